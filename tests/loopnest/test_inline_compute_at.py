"""compute_inline and compute_at: golden text, semantic preservation on every CPU backend,
refusals (with the legal loops listed), stable handles and history replay."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from loopnest import LoopNest, ScheduleError
from nests import FIXTURE_OK, roundtrip, run, unchanged
from te import Buffer, Compute, Max, Reduce, Sum, Var, exp, float32, int32

SIZES = st.sampled_from([1, 2, 3, 5, 7, 8, 13])


def stencil(n=4, m=8):
    """B = 2A on (n, m + 2); C[i, j] = B[i, j] + B[i, j + 2]."""
    A = Buffer("A", (n, m + 2), float32)
    B = Compute("B", (n, m + 2), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (n, m), lambda i, j: B[i, j] + B[i, j + 2])
    return A, B, C


def stencil_ref(a, m):
    b = a.astype(np.float64) * 2.0
    return b[:, :m] + b[:, 2:m + 2]


# ------------------------------------------------------------------------------------
# compute_inline
# ------------------------------------------------------------------------------------
def test_inline_golden():
    A = Buffer("A", (8,), float32)
    B = Compute("B", (8,), lambda i: A[i] * 2.0)
    C = Compute("C", (8,), lambda i: B[i] + 1.0)
    nest = LoopNest([C])
    c_loop, = nest.get_loops_for(C)
    nest.compute_inline(B)
    assert str(nest) == """\
for (int i_1 = 0; i_1 < 8; i_1++) {
  C[i_1] = A[i_1] * 2.0f + 1.0f;
}"""
    assert B not in nest.intermediates
    assert c_loop.exists()  # the consumer's handle survives
    with pytest.raises(ScheduleError, match="not computed"):
        nest.get_loops_for(B)
    roundtrip(nest, [C])


def test_inline_substitutes_the_read_indices():
    A, B, C = stencil(2, 3)
    nest = LoopNest([C])
    nest.compute_inline(B)
    assert "C[i_1, j_1] = A[i_1, j_1] * 2.0f + A[i_1, j_1 + 2] * 2.0f;" in str(nest)


def test_inline_into_a_reduction_and_a_chain(backend):
    A = Buffer("A", (5, 6), float32)
    B = Compute("B", (5, 6), lambda i, j: exp(A[i, j]))
    D = Compute("D", (5, 6), lambda i, j: B[i, j] * 0.5)
    C = Reduce("C", (5,), Sum(), lambda i, k: D[i, k] + B[i, k], (6,))
    nest = LoopNest([C])
    nest.compute_inline(D)
    nest.compute_inline(B)
    assert nest.intermediates == [] and "B[" not in str(nest) and "D[" not in str(nest)
    a = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32)
    c = np.zeros(5, np.float32)
    run(nest, [A, C], [a, c], backend)
    np.testing.assert_allclose(c, (np.exp(a.astype(np.float64)) * 1.5).sum(1), rtol=1e-5)
    roundtrip(nest, [C])


def test_inline_after_scheduling_the_consumer(backend):
    A, B, C = stencil(5, 7)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    nest.tile(i, j, 2, 3)
    nest.compute_inline(B)
    a = np.random.default_rng(2).standard_normal((5, 9)).astype(np.float32)
    c = np.zeros((5, 7), np.float32)
    run(nest, [A, C], [a, c], backend)
    np.testing.assert_allclose(c, stencil_ref(a, 7), rtol=1e-6)


def test_inline_refusals_leave_the_nest_unchanged():
    A = Buffer("A", (4, 6), float32)
    R = Reduce("R", (4,), Sum(), lambda i, k: A[i, k], (6,))
    B = Compute("B", (4,), lambda i: A[i, 0] + 1.0)
    C = Compute("C", (4,), lambda i: R[i] + B[i])
    nest = LoopNest([C])
    assert "is a reduction" in unchanged(nest, lambda: nest.compute_inline(R))
    assert "output of the nest" in unchanged(nest, lambda: nest.compute_inline(C))
    assert "input buffer" in unchanged(nest, lambda: nest.compute_inline(A))
    nest.split_with_tail(nest.get_loops_for(B)[0], 3)
    assert "computed by 2 stores" in unchanged(nest, lambda: nest.compute_inline(B))


# ------------------------------------------------------------------------------------
# compute_at
# ------------------------------------------------------------------------------------
def test_compute_at_outer_loop_golden():
    A, B, C = stencil(4, 8)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    nest.compute_at(B, i)
    assert str(nest) == """\
for (int i_1 = 0; i_1 < 4; i_1++) {
  for (int j_2 = 0; j_2 < 10; j_2++) {
    B[i_1, j_2] = A[i_1, j_2] * 2.0f;
  }
  for (int j_1 = 0; j_1 < 8; j_1++) {
    C[i_1, j_1] = B[i_1, j_1] + B[i_1, j_1 + 2];
  }
}"""
    assert i.exists() and j.exists()
    assert [l.name for l in nest.get_loops_for(B)] == ["i_1", "j_2"]
    roundtrip(nest, [C])


def test_compute_at_inner_loop_computes_the_stencil_window():
    A, B, C = stencil(4, 8)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    nest.compute_at(B, j)
    assert str(nest) == """\
for (int i_1 = 0; i_1 < 4; i_1++) {
  for (int j_1 = 0; j_1 < 8; j_1++) {
    for (int j_2 = j_1; j_2 < j_1 + 3; j_2++) {
      B[i_1, j_2] = A[i_1, j_2] * 2.0f;
    }
    C[i_1, j_1] = B[i_1, j_1] + B[i_1, j_1 + 2];
  }
}"""


def test_compute_at_split_loop_uses_clamped_region():
    A, B, C = stencil(4, 8)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    jo, ji = nest.split_with_mask(j, 3)
    nest.compute_at(B, jo)
    assert "for (int j_2 = j_1_outer * 3; j_2 < min(j_1_outer * 3 + 5, 10); j_2++) {" in str(nest)


def test_compute_at_reduction_producer_golden():
    N = Var("N", int32)
    A = Buffer("A", (N, 6), float32)
    R = Reduce("R", (N,), Sum(), lambda i, k: A[i, k], (6,))
    D = Compute("D", (N,), lambda i: R[i] * 3.0)
    nest = LoopNest([D])
    i, = nest.get_loops_for(D)
    nest.compute_at(R, i)
    assert str(nest) == """\
for (int i_1 = 0; i_1 < N; i_1++) {
  R[i_1] = 0.0f;
  for (int k_1 = 0; k_1 < 6; k_1++) {
    R[i_1] = R[i_1] + A[i_1, k_1];
  }
  D[i_1] = R[i_1] * 3.0f;
}"""
    roundtrip(nest, [D])


@settings(max_examples=10, deadline=None, suppress_health_check=FIXTURE_OK)
@given(n=SIZES, m=SIZES, f=st.integers(1, 5), where=st.sampled_from(["i", "j", "jo", "ji"]))
def test_compute_at_preserves_values(backend, n, m, f, where):
    A, B, C = stencil(n, m)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    jo, ji = nest.split_with_mask(j, f)
    nest.compute_at(B, {"i": i, "j": jo, "jo": jo, "ji": ji}[where])
    a = np.random.default_rng(n * 7 + m).standard_normal((n, m + 2)).astype(np.float32)
    c = np.zeros((n, m), np.float32)
    run(nest, [A, C], [a, c], backend)
    np.testing.assert_allclose(c, stencil_ref(a, m), rtol=1e-6)
    roundtrip(nest, [C])


@settings(max_examples=8, deadline=None, suppress_health_check=FIXTURE_OK)
@given(n=SIZES, f=st.integers(1, 4))
def test_compute_at_symbolic_reduction_chain_preserves_values(backend, n, f):
    N = Var("N", int32)
    A = Buffer("A", (N, 5), float32)
    B = Compute("B", (N, 5), lambda i, k: A[i, k] * A[i, k])
    R = Reduce("R", (N,), Max(), lambda i, k: B[i, k], (5,))
    D = Compute("D", (N,), lambda i: R[i] + 1.0)
    nest = LoopNest([D])
    i, = nest.get_loops_for(D)
    io, ii = nest.split_with_mask(i, f)
    nest.compute_at(R, io)
    k = nest.get_loops_for(R)[-1]
    nest.compute_at(B, k)
    a = np.random.default_rng(n).standard_normal((n, 5)).astype(np.float32)
    d = np.zeros(n, np.float32)
    run(nest, [A, D, N], [a, d], backend, sizes=[n])
    np.testing.assert_allclose(d, (a.astype(np.float64) ** 2).max(1) + 1.0, rtol=1e-6)
    roundtrip(nest, [D])


def test_compute_at_a_loop_with_a_tail_computes_at_the_tail_too(backend):
    # the tail loop also reads B: it gets a local copy of its own (more in
    # test_issue13_compute_at_more.py)
    A, B, C = stencil(4, 8)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    nest.split_with_tail(j, 3)
    nest.compute_at(B, nest.loop("j_1_outer"))
    tail = nest.loop("j_1_tail").stmt
    assert "B_local[" in str(tail) and "B[" not in str(tail)
    a = np.random.default_rng(3).standard_normal((4, 10)).astype(np.float32)
    c = np.zeros((4, 8), np.float32)
    run(nest, [A, C], [a, c], backend)
    np.testing.assert_allclose(c, stencil_ref(a, 8), rtol=1e-6)
    roundtrip(nest, [C])


def test_compute_at_refused_at_a_loop_not_reading_the_tensor():
    A, B, C = stencil(4, 8)
    nest = LoopNest([C])
    bi, bj = nest.get_loops_for(B)
    msg = unchanged(nest, lambda: nest.compute_at(B, bj))
    assert "nothing inside loop j reads B" in msg and "legal at loops i_1, j_1" in msg


def test_compute_at_refusals_for_outputs_and_inputs():
    A, B, C = stencil(4, 8)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    assert "output of the nest" in unchanged(nest, lambda: nest.compute_at(C, i))
    assert "input buffer" in unchanged(nest, lambda: nest.compute_at(A, i))


def test_compute_at_refused_when_an_input_is_computed_later():
    # X is computed inside C's loop (before the B reads there); moving B into the loop
    # of D, which runs before C's loop, would read X before it is computed.
    A = Buffer("A", (6,), float32)
    X = Compute("X", (6,), lambda i: A[i] + 1.0)
    B = Compute("B", (6,), lambda i: X[i] * 2.0)
    C = Compute("C", (6,), lambda i: B[i] + X[i])
    nest = LoopNest([C])
    i, = nest.get_loops_for(C)
    nest.compute_at(B, i)
    # every read of X is now in C's loop: X can go there too (before B)
    nest.compute_at(X, i)
    text = str(nest)
    assert text.index("X[") < text.index("B[")
    a = np.arange(6, dtype=np.float32)
    c = np.zeros(6, np.float32)
    run(nest, [A, C], [a, c], "ireval")
    np.testing.assert_allclose(c, (a + 1) * 3)


def test_compute_at_is_recorded_and_replays():
    A, B, C = stencil(3, 5)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    nest.compute_at(B, j)
    assert nest.history[-1] == {"op": "compute_at", "args": [{"buffer": "B"}, {"loop": "j_1"}], "kwargs": {}}
    roundtrip(nest, [C])
