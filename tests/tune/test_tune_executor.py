"""The local worker pool: results and exceptions come back; a segfault, an abort, a hang or
exhausted memory fails only that task, and the pool goes on."""
import math
import time

import numpy as np
import pytest

from tune.errors import WorkerCrashed, WorkerTimeout
from tune.executor import LocalExecutor, enter_phase, exclusive_phase


def segfault():
    import ctypes
    ctypes.string_at(0)


def hang_in_run():
    enter_phase("run")
    time.sleep(600)


def allocate_too_much():
    return np.ones(1 << 40, dtype=np.uint8).sum()   # 1 TiB


def fail():
    raise KeyError("no such thing")


def timed_turn(hang: bool = False):
    enter_phase("build")
    with exclusive_phase("run"):
        t0 = time.time()
        if hang:
            time.sleep(600)
        time.sleep(0.3)
        return t0, time.time()


@pytest.fixture(scope="module")
def pool():
    ex = LocalExecutor(max_workers=2, memory_limit=2 << 30)
    yield ex
    ex.shutdown()


def test_results_and_exceptions(pool):
    assert pool.submit(math.factorial, 10).result() == 3628800
    assert list(pool.map(math.sqrt, [1.0, 4.0, 9.0])) == [1.0, 2.0, 3.0]
    with pytest.raises(KeyError, match="no such thing"):
        pool.submit(fail).result()


def test_faults_cost_one_task_each(pool):
    futs = [pool.submit_limited(segfault), pool.submit_limited(hang_in_run, phases={"build": 30, "run": 1.0}),
            pool.submit_limited(allocate_too_much), pool.submit(math.sqrt, 16.0)]
    with pytest.raises(WorkerCrashed) as crash:
        futs[0].result(timeout=60)
    assert crash.value.exitcode == -11 and "signal 11" in str(crash.value)
    with pytest.raises(WorkerTimeout) as hang:
        futs[1].result(timeout=60)
    assert hang.value.phase == "run" and hang.value.seconds == 1.0
    with pytest.raises(MemoryError):
        futs[2].result(timeout=60)
    assert futs[3].result(timeout=60) == 4.0
    assert pool.restarts >= 2
    assert pool.submit(math.sqrt, 25.0).result(timeout=60) == 5.0     # still serving


def test_shutdown_and_bad_arguments():
    with pytest.raises(ValueError, match="max_workers"):
        LocalExecutor(max_workers=0)
    with pytest.raises(ValueError, match="spawn"):
        LocalExecutor(mp_context="fork")
    ex = LocalExecutor(1)
    ex.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        ex.submit(math.sqrt, 1.0)


def test_exclusive_phases_never_overlap_and_survive_a_kill(pool):
    limits = {"build": 30, "run": 2.0}
    futs = [pool.submit_limited(timed_turn, (k == 1,), phases=limits) for k in range(4)]
    with pytest.raises(WorkerTimeout) as e:
        futs[1].result(timeout=60)          # killed while holding the turn
    assert e.value.phase == "run"
    spans = sorted(f.result(timeout=60) for k, f in enumerate(futs) if k != 1)
    for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
        assert a1 <= b0, spans
