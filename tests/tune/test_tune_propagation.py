"""Only a candidate's own failures become records; bugs propagate out of the tuning run.

A record is made for ``ScheduleError`` (an illegal schedule), ``BuildError`` (a refused or
failed compilation), a CUDA launch failure, a crashed or timed-out worker, and the resource
errors of ``tune.errors.RESOURCE_ERRORS``. A plain ``KeyError`` / ``RuntimeError`` from a
transform, the features, a builder or a kernel is a bug: it must reach the caller.
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import os

import numpy as np
import pytest

from codegen import BuildError
from codegen.cuda.launch import CudaLaunchError
from loopnest import ScheduleError
from loopnest.transforms import loop_kinds
from te import Buffer, Compute
from tune.database import Database
from tune.errors import ErrorKind, WorkerCrashed, WorkerError, WorkerTimeout
from tune.executor import LocalExecutor
from tune.runner import MeasureOptions, MeasureResult, Runner, measure_candidate
from tune.space import ScheduleSpace
from tune.task import Task
from tune.tuner import Tuner


def small_task() -> tuple[Task, list]:
    A = Buffer("A", (64,), "float32")
    B = Compute("B", (64,), lambda i: A[i] * 2.0)
    return Task([B], [A, B], reference=lambda ins: {"B": ins["A"] * 2}), [B]


def parallel_space(outputs) -> ScheduleSpace:
    def schedule(cfg, nest):
        if cfg.flag("par"):
            nest.parallelize(nest.get_loops_for(outputs[0].name)[0])
    return ScheduleSpace(schedule, outputs)


def make_tuner(task, space, runner=None) -> Tuner:
    return Tuner(task, space, Database(":memory:"), strategy="grid", runner=runner, progress=False,
                 include_baseline=False, options=MeasureOptions(target="llvm", repeats=1, min_repeat_s=0.0))


@pytest.fixture
def thread_runner():
    ex = cf.ThreadPoolExecutor(1)
    yield Runner(ex)
    ex.shutdown()


# ------------------------------------------------------------------------------------
# scheduling, in the tuner process
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("exc", [KeyError("loop table"), RuntimeError("transform bug")], ids=lambda e: type(e).__name__)
def test_unexpected_exception_in_a_transform_propagates(monkeypatch, thread_runner, exc):
    def broken(*args, **kwargs):
        raise exc
    monkeypatch.setattr(loop_kinds, "parallelize", broken)
    task, outs = small_task()
    tuner = make_tuner(task, parallel_space(outs), thread_runner)
    with pytest.raises(type(exc), match=str(exc.args[0])):
        tuner.tune(trials=2)
    assert tuner.db.records(task.key) == []     # nothing recorded as an invalid point


def test_schedule_error_in_a_transform_is_an_invalid_point(monkeypatch, thread_runner):
    def refuse(*args, **kwargs):
        raise ScheduleError("cannot parallelize: refused on purpose")
    monkeypatch.setattr(loop_kinds, "parallelize", refuse)
    task, outs = small_task()
    tuner = make_tuner(task, parallel_space(outs), thread_runner)
    result = tuner.tune(trials=2)
    assert result.invalid == 1 and result.best is not None
    assert [r.ok for r in result.records] == [True]
    invalid = [r for r in tuner.db.records(task.key) if r.error_kind == ErrorKind.INVALID_SCHEDULE]
    assert len(invalid) == 1 and "refused on purpose" in invalid[0].error


def test_feature_extraction_bug_propagates_and_resource_errors_do_not(monkeypatch):
    task, outs = small_task()
    space = parallel_space(outs)
    tuner = make_tuner(task, space)
    point = space.point({"par": True})

    def bug(nest, sizes):
        raise ValueError("feature bug")
    monkeypatch.setattr("tune.tuner.nest_features", bug)
    with pytest.raises(ValueError, match="feature bug"):
        tuner.prepare(point)

    def exhausted(nest, sizes):
        raise MemoryError("no memory for the features")
    monkeypatch.setattr("tune.tuner.nest_features", exhausted)
    prep = tuner.prepare(point)
    assert prep.valid and np.isnan(prep.features).all()


# ------------------------------------------------------------------------------------
# building and running, in the worker (called here in-process)
# ------------------------------------------------------------------------------------
def raising_builder(exc):
    def builder(task, trace, target, options):
        raise exc
    return builder


def kernel_builder(exc):
    def builder(task, trace, target, options):
        def kernel(**kwargs):
            raise exc
        return kernel
    return builder


@pytest.fixture
def ref():
    task, _ = small_task()
    r = task.save()
    yield r
    os.unlink(r.path)


def measure(ref, builder) -> MeasureResult:
    return measure_candidate(ref, "[]", MeasureOptions(target="fake", builder=builder, repeats=1, min_repeat_s=0.0))


@pytest.mark.parametrize("exc", [BuildError("nvcc refused it"), ScheduleError("stale trace"), MemoryError(),
                                 RecursionError("deep")], ids=lambda e: type(e).__name__)
def test_build_failures_of_the_candidate_are_recorded(ref, exc):
    res = measure(ref, raising_builder(exc))
    assert res.error_kind == ErrorKind.BUILD_ERROR and type(exc).__name__ in res.error


@pytest.mark.parametrize("exc", [KeyError("emitter table"), TypeError("bad operand"), AttributeError("no attr")],
                         ids=lambda e: type(e).__name__)
def test_build_bugs_propagate(ref, exc):
    with pytest.raises(type(exc)):
        measure(ref, raising_builder(exc))


@pytest.mark.parametrize("exc", [MemoryError("heap allocation failed"), CudaLaunchError("kernel faulted")],
                         ids=lambda e: type(e).__name__)
def test_run_failures_of_the_candidate_are_recorded(ref, exc):
    res = measure(ref, kernel_builder(exc))
    assert res.error_kind == ErrorKind.RUN_ERROR and str(exc) in res.error


@pytest.mark.parametrize("exc", [ValueError("binding bug"), IndexError("interpreter bug")],
                         ids=lambda e: type(e).__name__)
def test_run_bugs_propagate(ref, exc):
    with pytest.raises(type(exc)):
        measure(ref, kernel_builder(exc))


# ------------------------------------------------------------------------------------
# futures: a dead worker is a result, anything else is raised
# ------------------------------------------------------------------------------------
def failed_future(exc) -> cf.Future:
    f = cf.Future()
    f.set_exception(exc)
    return f


def test_runner_records_crashes_and_timeouts():
    assert Runner.result_of(failed_future(WorkerCrashed("died", "run", -11))).error_kind == ErrorKind.CRASH
    assert Runner.result_of(failed_future(WorkerTimeout("slow", "build", 1.0))).error_kind == ErrorKind.BUILD_TIMEOUT
    assert Runner.result_of(failed_future(WorkerTimeout("slow", "run", 1.0))).error_kind == ErrorKind.RUN_TIMEOUT


@pytest.mark.parametrize("exc", [KeyError("bug"), WorkerError("the task's result could not be sent back")],
                         ids=lambda e: type(e).__name__)
def test_runner_raises_other_exceptions_of_a_future(exc):
    with pytest.raises(type(exc)):
        Runner.result_of(failed_future(exc))


def buggy_builder(task, trace, target, options):
    """Module level, so a spawned worker can import it (tests/tune is on sys.path)."""
    if json.loads(trace):
        raise KeyError("a bug in the builder")
    from tune.builder import build_candidate
    return build_candidate(task, trace, "llvm", options)


def test_bug_in_a_worker_propagates_out_of_the_tuning_run():
    task, outs = small_task()
    space = parallel_space(outs)
    ex = LocalExecutor(max_workers=1)
    try:
        tuner = Tuner(task, space, Database(":memory:"), strategy="grid", runner=Runner(ex), progress=False,
                      options=MeasureOptions(target="llvm", repeats=1, min_repeat_s=0.0, builder=buggy_builder))
        with pytest.raises(KeyError, match="a bug in the builder") as info:
            tuner.tune(trials=3)
    finally:
        ex.shutdown()
    assert "buggy_builder" in info.value.worker_traceback


@pytest.mark.parametrize("module", ["tune.errors", "tune.runner"])
def test_docstring_examples(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
