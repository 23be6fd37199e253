"""Every pair of compute_inline, compute_at, cache_accesses, split and reorder, in both
orders, on a small pipeline (issue 13, order independence): each order computes the
unscheduled values or is refused with a ScheduleError, never a crash or a wrong value; a
pair whose result does not depend on the order works in both orders. The pairs whose
meaning depends on the order are refused in one order, with the reason:

- inline B, then compute B at a loop: B is not computed any more;
- inline B, then cache B: nothing reads B any more;
- reorder C's loops after B is computed, or cached, at C's row: B's rows are computed (copied)
  per row of C, and the reorder would need them distributed out of that loop (the anti
  dependence is named); in the other order "C's row" is the loop the reorder put outermost.
"""
import itertools

import numpy as np
import pytest

from te import Buffer, Compute, Reduce, Sum
from loopnest import LoopNest, ScheduleError
from codegen import build

N, M = 12, 10


def _pipeline():
    A = Buffer("A", (N + 2, M), "float32")
    B = Compute("B", (N + 2, M), lambda i, j: A[i, j] * 2.0 + 1.0)
    C = Compute("C", (N, M), lambda i, j: B[i, j] + B[i + 1, j] + B[i + 2, j])
    D = Reduce("D", (N,), Sum(), lambda i, k: C[i, k] * C[i, k], (M,))
    return A, D


def _loops(nest, name):
    return nest.get_loops_for(nest.buffer(name))


# each transform finds its loops by the tensor's name when it is applied
TRANSFORMS = {
    "inline B": lambda nest: nest.compute_inline(nest.buffer("B")),
    "B at C's row": lambda nest: nest.compute_at(nest.buffer("B"), _loops(nest, "C")[0]),
    "cache B at C's row": lambda nest: nest.cache_accesses(nest.buffer("B"), "B_cache", _loops(nest, "C")[0]),
    "split C's row": lambda nest: nest.split_with_mask(_loops(nest, "C")[0], 4),
    "reorder C": lambda nest: nest.reorder(_loops(nest, "C")[-2:], [1, 0]),
}


ORDER_DEPENDENT = {frozenset(p) for p in [("inline B", "B at C's row"), ("inline B", "cache B at C's row"),
                                          ("B at C's row", "reorder C"),
                                          ("cache B at C's row", "reorder C")]}


def _values(nest, A):
    a = np.arange((N + 2) * M, dtype=np.float32).reshape(N + 2, M) / 7.0
    d = np.empty(N, np.float32)
    build(nest, [A, nest.buffer("D")], target="llvm")(a, d)
    return d


def _apply(order):
    A, D = _pipeline()
    nest = LoopNest([D])
    for name in order:
        TRANSFORMS[name](nest)
    return nest, A


@pytest.mark.parametrize("pair", list(itertools.combinations(TRANSFORMS, 2)), ids=" + ".join)
def test_a_pair_gives_the_same_result_in_both_orders(pair):
    A0, D0 = _pipeline()
    want = _values(LoopNest([D0]), A0)
    outcomes = []
    for order in (pair, pair[::-1]):
        try:
            nest, A = _apply(order)
        except ScheduleError as e:
            outcomes.append(("refused", str(e)))
            continue
        np.testing.assert_allclose(_values(nest, A), want, rtol=1e-5)
        outcomes.append(("ok", None))
    kinds = [k for k, _ in outcomes]
    if frozenset(pair) in ORDER_DEPENDENT:
        assert "ok" in kinds, f"{pair}: {outcomes}"
    else:
        assert kinds == ["ok", "ok"], f"{pair}: {outcomes}"
