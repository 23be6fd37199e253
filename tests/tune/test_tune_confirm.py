"""The confirmation of ``autotune``: the fastest recorded candidates are timed again in
alternating rounds and the fastest there is kept (``tune.api.confirm_best``)."""
import time

import numpy as np

from te import Buffer, Compute
from tune.api import CONFIRM_MARGIN, confirm_best
from tune.database import Record
from tune.runner import MeasureOptions
from tune.task import Task

SLEEP = {"[1]": 0.004, "[2]": 0.0005, "[3]": 0.0001, "[4]": 0.0001}


def _fake_builder(task, trace, target, options):
    def kernel(**kwargs):
        time.sleep(SLEEP[trace])
    kernel.trace = trace
    return kernel


def _task():
    A = Buffer("A", (8,), "float32")
    B = Compute("B", (8,), lambda i: A[i] * 2.0)
    return Task([B], [A, B], reference=lambda ins: {"B": ins["A"] * 2}, target="llvm")


def _record(trace, median, error=None):
    return Record(workload_key="w", target="llvm", device="d", trace=trace, point={}, median=median,
                  error_kind=error)


def test_the_faster_of_near_candidates_wins_when_timed_again():
    options = MeasureOptions(builder=_fake_builder, min_repeat_s=0.0)
    records = [_record("[1]", 1.0), _record("[1]", 1.0), _record("[2]", 1.1),          # [1] measured fastest
               _record("[3]", 1.0 * CONFIRM_MARGIN * 1.5),                             # too slow to confirm
               _record("[4]", 0.5, error="RunError")]                                  # failed
    best, kernel = confirm_best(_task(), records, 3, options, rounds=3)
    assert best.trace == "[2]" and kernel.trace == "[2]"


def test_one_candidate_or_confirm_1_returns_the_recorded_best_without_building():
    options = MeasureOptions(builder=None)
    records = [_record("[1]", 1.0), _record("[2]", 1.1)]
    assert confirm_best(_task(), records, 1, options) == (records[0], None)
    assert confirm_best(_task(), records[:1] + [_record("[3]", 9.0)], 3, options) == (records[0], None)


def test_autotune_confirms_and_returns_a_correct_kernel():
    from tune import autotune
    from tune.workloads import matmul
    w = matmul(16, 16, 16)
    kernel, record, result = autotune(w.outputs, w.args, target="llvm", trials=6, reference=w.reference, repeats=2,
                                      min_repeat_s=0.001, progress=False, return_result=True, timeout=60)
    best = min(r.cost for r in result.records if r.ok)
    assert record.ok and record.cost <= best * CONFIRM_MARGIN
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((16, 16)).astype(np.float32) for _ in range(2))
    c = np.zeros((16, 16), np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_autotune_refuses_a_confirm_count_that_is_not_a_positive_int():
    import pytest
    from tune import autotune
    from tune.workloads import matmul
    w = matmul(4, 4, 4)
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="confirm must be a positive int"):
            autotune(w.outputs, w.args, target="llvm", trials=1, progress=False, confirm=bad)
