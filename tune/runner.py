"""Measuring candidates: build, check once against the reference, time; in worker processes.

``measure_candidate`` is the function a worker runs for one candidate: phase ``"build"``
(the builder replays the trace and compiles), then phase ``"run"`` (held under the
executor's run lock so timings never overlap): one call whose outputs are compared with the
task's reference, then warm-up and timed repeats. ``Runner`` submits candidates to an
executor with separate build and run time limits and turns every failure of a candidate
into a ``MeasureResult`` with an ``ErrorKind``: a compiler refusal (``codegen.BuildError``,
``loopnest.ScheduleError`` while replaying), a launch the device cannot run or that faults
(``CudaLaunchError``, ``LaunchLimitError``), a resource error (``errors.RESOURCE_ERRORS``), a
wrong result, a crashed worker, a timeout. Any other exception is a bug in the compiler,
the builder or the task, not a property of the candidate: it propagates out of ``Runner.run``
(with the worker's traceback in ``worker_traceback``) instead of becoming a record.

>>> MeasureResult(error_kind="RunTimeout", error="phase 'run' ran past 1 s").ok
False
"""
from __future__ import annotations

import concurrent.futures as cf
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from .errors import RESOURCE_ERRORS, ErrorKind, WorkerCrashed, WorkerTimeout
from .executor import LocalExecutor, enter_phase, exclusive_phase
from .task import TaskRef, check_outputs
from .timing import TimeStats, time_callable

__all__ = ["MeasureOptions", "MeasureResult", "Runner", "measure_candidate", "build_failures", "run_failures"]


@dataclass(frozen=True)
class MeasureOptions:
    """How a candidate is built and timed (sent to the worker with each candidate).

    ``builder`` is a module-level function ``(task, trace, target, build_options) -> kernel``
    (``tune.builder.build_candidate`` by default; tests plug in fakes).
    """

    target: str = "llvm"
    warmup: int = 1
    repeats: int = 5
    min_repeat_s: float = 0.01
    build_options: dict = field(default_factory=dict)
    builder: Callable | None = None


@dataclass
class MeasureResult:
    """The outcome of measuring one candidate: time statistics, or an error kind and message."""

    costs: list[float] = field(default_factory=list)
    number: int = 0
    build_s: float = 0.0
    run_s: float = 0.0
    error_kind: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None and bool(self.costs)

    @property
    def stats(self) -> TimeStats | None:
        return TimeStats(list(self.costs), self.number) if self.costs else None

    @property
    def median(self) -> float:
        """Median seconds per call; ``inf`` for a failed candidate (never the best)."""
        return self.stats.median if self.ok else float("inf")

    @classmethod
    def failure(cls, kind: str, message: str, build_s: float = 0.0) -> "MeasureResult":
        return cls(error_kind=kind, error=message[:4000], build_s=build_s)


def _describe(e: BaseException) -> str:
    tb = getattr(e, "worker_traceback", None)
    msg = f"{type(e).__name__}: {e}"
    return msg if not tb else f"{msg}\n{tb[-2000:]}"


def build_failures() -> tuple[type[BaseException], ...]:
    """The exceptions of a build that are the candidate's failure (recorded as ``BuildError``).

    >>> from codegen import BuildError
    >>> BuildError in build_failures(), KeyError in build_failures()
    (True, False)
    """
    from codegen.kernel import BuildError
    from loopnest import ScheduleError
    return (BuildError, ScheduleError, *RESOURCE_ERRORS)


def run_failures() -> tuple[type[BaseException], ...]:
    """The exceptions of a kernel call that are the candidate's failure (recorded as ``RunError``):
    a CUDA launch that faults or exceeds the device's limits, and resource errors.

    >>> MemoryError in run_failures(), ValueError in run_failures()
    (True, False)
    """
    from codegen.cuda.launch import CudaLaunchError, LaunchLimitError
    return (CudaLaunchError, LaunchLimitError, *RESOURCE_ERRORS)


def measure_candidate(ref: TaskRef, trace: str, options: MeasureOptions) -> MeasureResult:
    """Build and time one candidate (runs in a worker process). Never raises for the candidate's
    own faults (``build_failures``, ``run_failures``); any other exception propagates."""
    from .builder import build_candidate
    enter_phase("load")        # reading the task (once per worker) is not part of the build time
    try:
        task = ref.load()
    except RESOURCE_ERRORS as e:
        return MeasureResult.failure(ErrorKind.BUILD_ERROR, "loading the task: " + _describe(e))
    enter_phase("build")
    t0 = time.perf_counter()
    try:
        builder = options.builder or build_candidate
        kernel = builder(task, trace, options.target, dict(options.build_options))
    except build_failures() as e:
        return MeasureResult.failure(ErrorKind.BUILD_ERROR, _describe(e), time.perf_counter() - t0)
    build_s = time.perf_counter() - t0
    with exclusive_phase("run"):
        t1 = time.perf_counter()
        arrays = task.fresh_arrays()
        kwargs = task.call_kwargs(arrays)
        try:
            kernel(**kwargs)
        except run_failures() as e:
            return MeasureResult.failure(ErrorKind.RUN_ERROR, _describe(e), build_s)
        wrong = check_outputs({k: arrays[k] for k in task.output_names}, task.reference, task.dtypes)
        if wrong is not None:
            return MeasureResult.failure(ErrorKind.WRONG_RESULT, wrong, build_s)
        try:
            stats = time_callable(lambda: kernel(**kwargs), warmup=options.warmup, repeats=options.repeats,
                                  min_repeat_s=options.min_repeat_s)
        except run_failures() as e:
            return MeasureResult.failure(ErrorKind.RUN_ERROR, _describe(e), build_s)
        return MeasureResult(stats.costs, stats.number, build_s, time.perf_counter() - t1)


class Runner:
    """Measures traces of one task through an executor, with separate build and run time limits.

    >>> # runner = Runner(LocalExecutor(), build_timeout=30, run_timeout=10)
    >>> # results = runner.run(task_ref, [trace_json, ...], MeasureOptions(target="llvm"))
    """

    def __init__(self, executor: cf.Executor | None = None, build_timeout: float | None = 60.0,
                 run_timeout: float | None = 30.0, measure: Callable = measure_candidate,
                 load_timeout: float | None = 300.0):
        self.load_timeout = load_timeout
        self._own = executor is None
        self.executor = executor if executor is not None else LocalExecutor(max_workers=1)
        self.build_timeout = build_timeout
        self.run_timeout = run_timeout
        self.measure = measure

    def submit(self, ref: TaskRef, trace: str, options: MeasureOptions) -> cf.Future:
        phases = {"load": self.load_timeout, "build": self.build_timeout, "run": self.run_timeout}
        sub = getattr(self.executor, "submit_limited", None)
        if sub is not None:
            return sub(self.measure, (ref, trace, options), phases=phases)
        return self.executor.submit(self.measure, ref, trace, options)

    @staticmethod
    def result_of(fut: cf.Future) -> MeasureResult:
        """The MeasureResult of a submitted candidate: a worker that crashed or ran past a
        time limit is the candidate's failure; any other exception the future holds (a bug
        the measure function let through, a result that could not be sent back) is raised.

        >>> f = cf.Future(); f.set_exception(WorkerCrashed("worker process died (killed by signal 11)"))
        >>> Runner.result_of(f).error_kind
        'Crash'
        """
        try:
            res = fut.result()
        except WorkerTimeout as e:
            kind = ErrorKind.BUILD_TIMEOUT if e.phase in ("load", "build") else ErrorKind.RUN_TIMEOUT
            return MeasureResult.failure(kind, str(e))
        except WorkerCrashed as e:
            return MeasureResult.failure(ErrorKind.CRASH, str(e))
        if not isinstance(res, MeasureResult):
            raise TypeError(f"the measure function must return a MeasureResult, returned {res!r}; "
                            "a custom Runner(measure=...) should wrap measure_candidate")
        return res

    def run(self, ref: TaskRef, traces: Sequence[str], options: MeasureOptions) -> list[MeasureResult]:
        """Measure every trace (in parallel where the executor has several workers), in order."""
        futs = [self.submit(ref, t, options) for t in traces]
        try:
            return [self.result_of(f) for f in futs]
        except BaseException:
            for f in futs:     # a bug surfaced: do not go on measuring the rest
                f.cancel()
            raise

    def close(self):
        if self._own:
            self.executor.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
