"""compute_inline and compute_at rebuild a tensor from what the nest now computes (any order
works), bounds inference's fallback hull stays inside the buffer, and splitting a loop whose
extent may be negative keeps it running zero times."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from loopnest import LoopNest, ScheduleError
from loopnest.analysis.bounds import access_bounds
from loopnest.transforms.compute_at import compute_at_candidates
from nests import roundtrip, run, unchanged
from te import Buffer, Compute, Reduce, Sum, Var, float32, if_then_else, substitute
from te.queries import fold_int


# ------------------------------------------------------------------------------------
# compute_inline / compute_at work from the current statements
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("second", ["compute_inline", "compute_at"])
def test_second_transform_keeps_what_was_inlined(second, backend):
    A = Buffer("A", (4,), float32)
    T1 = Compute("T1", (4,), lambda i: A[i] + 1.0)
    T2 = Compute("T2", (4,), lambda i: T1[i] * 2.0 + A[i])
    T3 = Compute("T3", (4,), lambda i: T2[i] + 3.0)
    nest = LoopNest([T3])
    nest.compute_inline(T1)
    if second == "compute_inline":
        nest.compute_inline(T2)
    else:
        nest.compute_at(T2, nest.get_loops_for(T3)[0])
    assert "T1" not in str(nest)
    roundtrip(nest, [T3])
    a = np.arange(4, dtype=np.float32)
    out = np.full(4, np.nan, np.float32)
    run(nest, [A, T3], [a, out], backend)
    np.testing.assert_allclose(out, (a + 1.0) * 2.0 + a + 3.0)


def test_compute_at_after_inlining_into_the_tensor(backend):
    # T1 reads B, which T2's own definition does not: T2's store reads B once T1 is inlined
    A, B = Buffer("A", (4, 6), float32), Buffer("B", (4, 6), float32)
    T1 = Compute("T1", (4, 6), lambda i, j: B[i, j] * 3.0)
    T2 = Compute("T2", (4, 5), lambda i, j: T1[i, j] + T1[i, j + 1] + A[i, j])
    T3 = Compute("T3", (4, 4), lambda i, j: T2[i, j] - T2[i, j + 1])
    nest = LoopNest([T3])
    nest.compute_inline(T1)
    nest.compute_at(T2, nest.get_loops_for(T3)[0])
    assert str(nest) == """\
for (int i_2 = 0; i_2 < 4; i_2++) {
  for (int j_3 = 0; j_3 < 5; j_3++) {
    T2[i_2, j_3] = B[i_2, j_3] * 3.0f + B[i_2, j_3 + 1] * 3.0f + A[i_2, j_3];
  }
  for (int j_2 = 0; j_2 < 4; j_2++) {
    T3[i_2, j_2] = T2[i_2, j_2] - T2[i_2, j_2 + 1];
  }
}"""
    roundtrip(nest, [T3])
    rng = np.random.default_rng(0)
    a, b = rng.random((4, 6), np.float32), rng.random((4, 6), np.float32)
    out = np.full((4, 4), np.nan, np.float32)
    run(nest, [A, B, T3], [a, b, out], backend)
    t2 = b[:, :5] * 3 + b[:, 1:6] * 3 + a[:, :5]
    np.testing.assert_allclose(out, t2[:, :4] - t2[:, 1:5], rtol=1e-5)


def test_compute_at_of_a_reduction_after_inlining_into_it():
    A = Buffer("A", (4, 6), float32)
    T1 = Compute("T1", (4, 6), lambda i, k: A[i, k] * 2.0)
    R = Reduce("R", (4,), Sum(), lambda i, k: T1[i, k], (6,))
    C = Compute("C", (4,), lambda i: R[i] + 1.0)
    nest = LoopNest([C])
    nest.compute_inline(T1)
    nest.compute_at(R, nest.get_loops_for(C)[0])
    assert "T1" not in str(nest)
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    out = np.full(4, np.nan, np.float32)
    run(nest, [A, C], [a, out], "ireval")
    np.testing.assert_allclose(out, (a * 2).sum(axis=1) + 1)


def test_compute_at_refusal_names_the_cache_buffer():
    A = Buffer("A", (4, 8), float32)
    B = Compute("B", (4, 8), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (4, 8), lambda i, j: B[i, j] + 1.0)
    nest = LoopNest([C])
    nest.cache_accesses(A, "Ac", nest.get_loops_for(B)[0])
    msg = unchanged(nest, lambda: nest.compute_at(B, nest.get_loops_for(C)[0]))
    assert "reads Ac, which B's definition does not read" in msg and "cache_accesses" in msg


def _chain():
    """T1 -> T2 -> R (a reduction) -> T3 -> T4 (the output), each read by the next only."""
    A, B = Buffer("A", (6, 12), float32), Buffer("B", (6, 12), float32)
    T1 = Compute("T1", (6, 12), lambda i, j: A[i, j] + B[i, j] * 0.5)
    T2 = Compute("T2", (6, 11), lambda i, j: T1[i, j] * 2.0 + T1[i, j + 1])
    R = Reduce("R", (6, 9), Sum(), lambda i, j, k: T2[i, j + k] + A[i, k], (3,))
    T3 = Compute("T3", (6, 9), lambda i, j: R[i, j] - B[i, j])
    T4 = Compute("T4", (6, 9), lambda i, j: T3[i, j] * T3[i, j] + B[i, j])
    return A, B, dict(T1=T1, T2=T2, R=R, T3=T3, T4=T4)


def _chain_ref(a, b):
    t1 = a.astype(np.float64) + b * 0.5
    t2 = t1[:, :11] * 2 + t1[:, 1:12]
    r = sum(t2[:, k:k + 9] + a[:, k:k + 1] for k in range(3))
    t3 = r - b[:, :9]
    return t3 * t3 + b[:, :9]


def _apply(nest, t, op):
    if op == "inline":
        nest.compute_inline(t)
        return
    legal = compute_at_candidates(nest, t)
    assert legal, f"no loop where compute_at({t.name}, ...) is legal:\n{nest}"
    nest.compute_at(t, legal[0] if op == "at_outer" else legal[-1])


@pytest.mark.parametrize("ops", list(itertools.product(["inline", "at_outer", "at_inner"], repeat=3)))
def test_inline_and_compute_at_in_every_order(ops):
    """Each of T1, T2, T3 is inlined or computed at its consumer's outermost or innermost
    legal loop, in every order: always legal (each is read by one consumer), same values."""
    rng = np.random.default_rng(1)
    a, b = rng.random((6, 12), np.float32), rng.random((6, 12), np.float32)
    want = _chain_ref(a, b)
    for order in itertools.permutations(range(3)):
        A, B, ts = _chain()
        nest = LoopNest([ts["T4"]])
        for k in order:
            _apply(nest, ts[("T1", "T2", "T3")[k]], ops[k])
        for k, name in enumerate(("T1", "T2", "T3")):
            if ops[k] == "inline":
                assert name not in str(nest)
        out = np.full((6, 9), np.nan, np.float32)
        run(nest, [A, B, ts["T4"]], [a, b, out], "ireval")
        np.testing.assert_allclose(out, want, rtol=1e-5, err_msg=f"order {order}:\n{nest}")


def test_inline_and_compute_at_pairs_refused_or_right():
    """Any two of the transforms, the reduction's compute_at included: refused with the nest
    unchanged, or the right values."""
    ops = [(op, n) for n in ("T1", "T2", "T3") for op in ("inline", "at_outer", "at_inner")]
    ops += [("at_outer", "R"), ("at_inner", "R")]
    rng = np.random.default_rng(2)
    a, b = rng.random((6, 12), np.float32), rng.random((6, 12), np.float32)
    want = _chain_ref(a, b)
    for seq in itertools.product(ops, repeat=2):
        A, B, ts = _chain()
        nest = LoopNest([ts["T4"]])
        for op, name in seq:
            if op != "inline" and not compute_at_candidates(nest, ts[name]) or \
                    op == "inline" and name not in str(nest):
                continue   # the tensor was inlined by the first transform
            _apply(nest, ts[name], op)
        out = np.full((6, 9), np.nan, np.float32)
        run(nest, [A, B, ts["T4"]], [a, b, out], "ireval")
        np.testing.assert_allclose(out, want, rtol=1e-5, err_msg=f"{seq}:\n{nest}")


# ------------------------------------------------------------------------------------
# bounds inference: the fallback hull is clamped to the buffer
# ------------------------------------------------------------------------------------
def _five_reads():
    C = Buffer("C", (10,), float32)
    T = Compute("T", (7,), lambda i: if_then_else(i >= 1, C[i - 1], 0.0) + C[9 - i] + C[8 - i]
                + C[7 - i] + C[6 - i])
    return C, T


def test_fallback_hull_stays_in_the_buffer():
    C, T = _five_reads()
    nest = LoopNest([T])
    f = nest.get_loops_for(T)[0].stmt
    b, = access_bounds(f.body, C, [f.var], outer_ranges={f.var: (0, 7)})
    for i in range(7):
        lo = fold_int(substitute(b.min, {f.var: i}))
        hi = fold_int(substitute(b.max, {f.var: i}))
        assert 0 <= lo and hi <= 9, (i, lo, hi)


def test_cache_of_five_reads_copies_inside_the_buffer(backend):
    C, T = _five_reads()
    nest = LoopNest([T])
    nest.cache_accesses(C, "Cc", nest.get_loops_for(T)[0])
    c = np.arange(10, dtype=np.float32) + 1
    i = np.arange(7)
    want = np.where(i >= 1, c[np.maximum(i - 1, 0)], 0) + c[9 - i] + c[8 - i] + c[7 - i] + c[6 - i]
    out = np.full(7, np.nan, np.float32)
    run(nest, [C, T], [c, out], backend)   # the build's bounds check refuses an access outside C
    np.testing.assert_allclose(out, want)


# ------------------------------------------------------------------------------------
# splitting a loop whose extent may be negative
# ------------------------------------------------------------------------------------
def _masked_write_back():
    """A write-back loop of cache_accesses under a mask: extent min(6 - (o*4 + i), 1), which
    is negative on masked iterations."""
    A = Buffer("A", (6,), float32)
    T = Compute("T", (6,), lambda i: A[i] + 1.0)
    nest = LoopNest([T])
    o, i = nest.split_with_mask(nest.get_loops_for(T)[0], 4)
    nest.cache_accesses(T, "Tc", i)
    return A, T, nest, nest.get_loops_for(T)[2]


@pytest.mark.parametrize("how", ["split_with_tail", "unroll"])
def test_split_of_a_possibly_negative_extent(how, backend):
    A, T, nest, wb = _masked_write_back()
    if how == "split_with_tail":
        nest.split_with_tail(wb, 2)
    else:
        nest.unroll(wb, 2)
    assert "max(min(6 - i_outer * 4 - i_inner, 1), 0)" in str(nest)
    a = np.arange(6, dtype=np.float32)
    out = np.full(6, np.nan, np.float32)
    run(nest, [A, T], [a, out], backend)
    np.testing.assert_allclose(out, a + 1.0)


def test_split_of_provably_nonnegative_extents_adds_no_max():
    N = Var("N")
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i] + 1.0)
    nest = LoopNest([B])
    o, i = nest.split_with_mask(nest.get_loops_for(B)[0], 4)
    nest.split_with_tail(o, 2)                     # extent floordiv(N + 3, 4)
    C = Compute("C", (N, N), lambda i, j: A[i] * A[j])
    flat = LoopNest([C])
    x, y = flat.get_loops_for(C)
    flat.split_with_tail(flat.flatten([x, y]), 4)   # extent N * N
    D = Compute("D", (10,), lambda i: A[i])
    const = LoopNest([D])
    const.split_with_tail(const.get_loops_for(D)[0], 4)
    assert "floordiv(floordiv(N + 3, 4), 2)" in str(nest)
    assert "floordiv(N * N, 4)" in str(flat)
    assert "i_outer < 2" in str(const) and "i_tail < 2" in str(const)
    assert not any("max(" in str(n) for n in (nest, flat, const))
