"""The Ray executor on a local Ray instance: only where Ray is installed (the optional
``distributed`` extra); skipped otherwise."""
import math
import os
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (optional 'distributed' extra)")

from tune.errors import ErrorKind, WorkerCrashed, WorkerTimeout  # noqa: E402
from tune.ray_executor import RayExecutor  # noqa: E402
from tune.runner import MeasureOptions, Runner  # noqa: E402
from tune_fakes import fake_builder, tiny_task  # noqa: E402


def segfault():
    import ctypes
    ctypes.string_at(0)


def sleep_long():
    time.sleep(600)


@pytest.fixture(scope="module")
def ex():
    # Ray workers import functions by module name: put this directory and the project on their path
    here = Path(__file__).resolve().parent
    path = os.pathsep.join([str(here), str(here.parents[1]), os.environ.get("PYTHONPATH", "")])
    e = RayExecutor(init_kwargs={"num_cpus": 2, "include_dashboard": False, "log_to_driver": False,
                                 "runtime_env": {"env_vars": {"PYTHONPATH": path}}})
    yield e
    e.shutdown()


def test_results_timeouts_and_crashes(ex):
    assert ex.submit(math.sqrt, 9.0).result(timeout=120) == 3.0
    with pytest.raises(WorkerTimeout):
        ex.submit_limited(sleep_long, timeout=1.0).result(timeout=120)
    with pytest.raises(WorkerCrashed):
        ex.submit_limited(segfault, timeout=60).result(timeout=120)
    assert ex.submit(math.sqrt, 16.0).result(timeout=120) == 4.0


def test_runner_measures_through_ray(ex):
    task = tiny_task()
    ref = task.save()
    opts = MeasureOptions(target="fake", repeats=2, min_repeat_s=0.0, builder=fake_builder)
    res = Runner(ex, build_timeout=60, run_timeout=60).run(
        ref, ['[{"op": "ok", "args": [1], "kwargs": {}}]', '[{"op": "wrong", "args": [1], "kwargs": {}}]'], opts)
    assert res[0].ok and res[0].median > 0
    assert res[1].error_kind == ErrorKind.WRONG_RESULT
