"""Exact value-flow analysis is bounded: past ``FLOW_OPERATIONS`` isl operations it is
undecided and the callers take their safe answer (a shared allocation, a buffer read as
input) instead of running for minutes."""
import islpy as isl
import numpy as np

from codegen import build
from loopnest import LoopNest
from loopnest.analysis import dependences
from loopnest.analysis.dependences import isl_budget, value_flow
from te import Buffer, Compute


def test_a_budget_that_runs_out_is_reported_and_restored():
    ctx = isl.DEFAULT_CONTEXT
    with isl_budget(5) as within:
        isl.Set("[n] -> { [i, j, k] : 0 <= i < n and 0 <= j < i and 0 <= k < j and (i + j + k) mod 7 = 3 }") \
            .lexmin().coalesce()
    assert not within()
    assert ctx.get_max_operations() == 0
    assert isl.Set("{ [i] : 0 <= i < 4 }").count_val().to_python() == 4    # isl works again


def test_undecided_value_flow_keeps_the_allocation_outside_and_the_values_right(monkeypatch):
    A = Buffer("A", (8, 8), "float32")
    T1 = Compute("T1", (8, 8), lambda i, j: A[i, j] + 1.0)
    T2 = Compute("T2", (8,), lambda i: T1[i / 2, 0] * 2.0)
    nest = LoopNest([T2])
    nest.fuse([nest.get_loops_for(T1)[0], nest.get_loops_for(T2)[0]])
    monkeypatch.setattr(dependences, "FLOW_OPERATIONS", 1)
    assert value_flow(nest, nest.buffer("T1")) is None
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    out = np.zeros(8, np.float32)
    build(nest, [A, T2], target="llvm")(a, out)
    np.testing.assert_array_equal(out, (a[np.arange(8) // 2, 0] + 1) * 2)
