"""cache_accesses, rfactor and eliminate_dead_stores: golden text, semantic preservation on
every CPU backend, refusals that leave the nest unchanged, and history replay."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from loopnest import LoopNest, ScheduleError
from loopnest.stmt import Block, For, Store
from nests import FIXTURE_OK, roundtrip, run
from nests import unchanged_with_buffers as unchanged
from te import Buffer, Compute, Max, Reduce, Sum, Var, float32, int32

SIZES = st.sampled_from([1, 2, 3, 5, 7, 8, 13])


def matmul(n=5, k=3, m=4):
    M = Buffer("M", (n, k), float32)
    K = Buffer("K", (k, m), float32)
    P = Reduce("P", (n, m), Sum(), lambda i, j, r: M[i, r] * K[r, j], (k,))
    return M, K, P


# ------------------------------------------------------------------------------------
# cache_accesses
# ------------------------------------------------------------------------------------
def test_cache_reads_golden():
    A = Buffer("A", (4, 6), float32)
    B = Compute("B", (4, 4), lambda i, j: A[i, j] + A[i, j + 2])
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    A_local = nest.cache_accesses(A, "A_local", i)
    assert A_local.shape == (1, 6) and A_local in nest.intermediates and nest.buffers["A_local"] is A_local
    assert str(nest) == """\
for (int i = 0; i < 4; i++) {
  for (int A_local_i1 = 0; A_local_i1 < 6; A_local_i1++) {
    A_local[0, A_local_i1] = A[i, A_local_i1];
  }
  for (int j = 0; j < 4; j++) {
    B[i, j] = A_local[0, j] + A_local[0, j + 2];
  }
}"""
    assert i.exists() and j.exists()
    roundtrip(nest, [B])


def test_cache_accumulator_golden_has_no_copy_in():
    M, K, P = matmul()
    nest = LoopNest([P])
    i, j, r = nest.get_loops_for(P)
    loc = nest.cache_accesses(P, "acc", j)
    assert loc.shape == (1, 1)
    assert str(nest) == """\
for (int i = 0; i < 5; i++) {
  for (int j = 0; j < 4; j++) {
    acc[0, 0] = 0.0f;
    for (int r = 0; r < 3; r++) {
      acc[0, 0] = acc[0, 0] + M[i, r] * K[r, j];
    }
    P[i, j] = acc[0, 0];
  }
}"""
    roundtrip(nest, [P])


def test_cache_of_split_loop_has_constant_size_and_clamped_copy():
    A = Buffer("A", (4, 6), float32)
    B = Compute("B", (4, 4), lambda i, j: A[i, j] + A[i, j + 2])
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    jo, ji = nest.split_with_mask(j, 3)
    loc = nest.cache_accesses(A, "A_local", jo)
    assert loc.shape == (1, 5)
    assert "for (int A_local_i1 = 0; A_local_i1 < min(6 - j_outer * 3, 5); A_local_i1++) {" in str(nest)


def test_cache_of_dense_writes_has_no_copy_in():
    A = Buffer("A", (3, 8), float32)
    C = Compute("C", (3, 8), lambda i, j: A[i, j] * 2.0)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    nest.split_with_tail(j, 3)
    nest.cache_accesses(C, "C_local", i)
    text = str(nest)
    assert "= C[" not in text and text.count("C[") == 1  # only the copy back


def test_cache_of_partial_writes_copies_in_first(backend):
    # the loop writes only the even columns of C: the copy back of the bounding box must
    # not clobber the odd ones, so the box is first filled from C
    A = Buffer("A", (3, 8), float32)
    C = Compute("C", (3, 8), lambda i, j: A[i, j] * 2.0)
    nest = LoopNest([C])
    i, j = Var("i", int32), Var("j", int32)
    nest.root = Block([For(i, 0, 3, Block([For(j, 0, 4, Block([Store(C, (i, j * 2), A[i, j * 2] * 2.0)]))]))])
    loc = nest.cache_accesses(C, "C_local", nest.loop("i"))
    assert loc.shape == (1, 7)
    assert "C_local[0, C_local_i1] = C[i, C_local_i1];" in str(nest)
    a = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    c = np.full((3, 8), 5.0, np.float32)
    run(nest, [A, C], [a, c], backend)
    want = np.full((3, 8), 5.0, np.float32)
    want[:, ::2] = a[:, ::2] * 2.0
    np.testing.assert_array_equal(c, want)


@settings(max_examples=10, deadline=None, suppress_health_check=FIXTURE_OK)
@given(n=SIZES, k=SIZES, m=SIZES, f=st.integers(1, 4), where=st.sampled_from(["i", "io", "j", "r"]),
       what=st.sampled_from(["M", "K", "P"]))
def test_cache_preserves_values(backend, n, k, m, f, where, what):
    M, K, P = matmul(n, k, m)
    nest = LoopNest([P])
    i, j, r = nest.get_loops_for(P)
    io, ii = nest.split_with_mask(i, f)
    loop = {"i": ii, "io": io, "j": j, "r": r}[where]
    buf = {"M": M, "K": K, "P": P}[what]
    nest.cache_accesses(buf, f"{what}_c", loop)
    rng = np.random.default_rng(n * 100 + k * 10 + m)
    mm = rng.standard_normal((n, k)).astype(np.float32)
    kk = rng.standard_normal((k, m)).astype(np.float32)
    p = np.zeros((n, m), np.float32)
    run(nest, [M, K, P], [mm, kk, p], backend)
    np.testing.assert_allclose(p, mm.astype(np.float64) @ kk, rtol=1e-5, atol=1e-5)
    roundtrip(nest, [P])


def test_cache_after_compute_at_over_a_unit_loop_needs_no_copy_in():
    """compute_at over a loop of extent 1 writes B[0, ...] while C still reads B[i, ...]:
    the writes cover the reads (i is 0), so the cache is not filled from B (which nothing
    has written yet), and B itself becomes dead."""
    A = Buffer("A", (1, 10), float32)
    B = Compute("B", (1, 10), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (1, 8), lambda i, j: B[i, j] + B[i, j + 2])
    nest = LoopNest([C])
    ref = nest.copy()
    i, j = nest.get_loops_for(C)
    nest.compute_at(B, i)
    assert "B[0, j_2] = A[0, j_2] * 2.0f;" in str(nest) and "B[i_1, j_1]" in str(nest)
    nest.cache_accesses(B, "B_row", i)
    assert "= B[" not in str(nest)
    assert nest.eliminate_dead_stores() == ["B"]
    assert "B[" not in str(nest) and B not in nest.intermediates
    a = np.random.default_rng(5).standard_normal((1, 10)).astype(np.float32)
    want = run(ref, [A, C], [a, np.zeros((1, 8), np.float32)], "ireval")[1]
    got = run(nest, [A, C], [a, np.zeros((1, 8), np.float32)], "ireval")[1]
    np.testing.assert_array_equal(got, want)
    roundtrip(nest, [C])


def _accumulate_after_init(init_cols: int, read_first: bool):
    """for i: [a read of C row i;] C[i, 0:init_cols] = 0; C[i, :] += A[i, :] (a tile
    initialised, maybe in part, before it is accumulated into)."""
    A = Buffer("A", (3, 4), float32)
    C = Compute("C", (3, 4), lambda i, j: A[i, j])
    D = Compute("D", (3,), lambda i: A[i, 0])
    nest = LoopNest([C, D])
    i, j, j2, r = (Var(n, int32) for n in ("i", "j", "j2", "r"))
    body = [For(j, 0, init_cols, Block([Store(C, (i, j), 0.0)])),
            For(j2, 0, 4, Block([For(r, 0, 2, Block([Store(C, (i, j2), C[i, j2] + A[i, j2])]))]))]
    if read_first:
        body.insert(0, Store(D, (i,), C[i, 3]))
    nest.root = Block([For(i, 0, 3, Block(body))])
    return nest, A, C, D


@pytest.mark.parametrize("init_cols,read_first,copy_in", [(4, False, False), (2, False, True), (4, True, True)])
def test_cache_copies_in_exactly_when_a_read_precedes_the_writes(init_cols, read_first, copy_in, backend):
    """Writes before the first read that cover what it reads: no copy in (the reads see only
    values the body wrote). Writes covering part of the row, or a read before them: the
    cache is filled from C first, and the values are those of the nest without it."""
    nest, A, C, D = _accumulate_after_init(init_cols, read_first)
    ref = nest.copy()
    nest.cache_accesses(C, "C_row", nest.loop("i"))
    assert ("C_row[0, C_row_i1] = C[i, C_row_i1];" in str(nest)) == copy_in
    a = np.random.default_rng(init_cols).standard_normal((3, 4)).astype(np.float32)
    c0 = np.full((3, 4), 7.0, np.float32)
    want = run(ref, [A, C, D], [a, c0.copy(), np.zeros(3, np.float32)], "ireval")
    got = run(nest, [A, C, D], [a, c0.copy(), np.zeros(3, np.float32)], backend)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


def _unit_loop_nests():
    """(name, outputs, inputs, prepare) with loops of extent 1: a unit dimension, or a split
    by the whole extent (outer loop of extent 1, folded to 0 by simplify) or by more (a
    guarded inner loop), each cached at every loop for every buffer below."""
    def split(where, factor_of, mask):
        def prep(nest, out):
            loop = nest.get_loops_for(out)[where]
            factor = factor_of(loop.extent)
            (nest.split_with_mask if mask else nest.split_with_tail)(loop, factor)
            nest.simplify()
        return prep
    out = []
    for n, k, m in ((1, 3, 4), (4, 1, 3), (3, 2, 1)):
        M, K, P = matmul(n, k, m)
        out.append((f"matmul{n}x{k}x{m}", P, [M, K], lambda nest, o: None))
    M, K, P = matmul(4, 3, 2)
    out.append(("matmul_split_whole_i", P, [M, K], split(0, lambda e: e, False)))
    out.append(("matmul_split_whole_r", P, [M, K], split(2, lambda e: e, True)))
    out.append(("matmul_split_over_j", P, [M, K], split(1, lambda e: e + 1, True)))
    A = Buffer("A", (1, 6), float32)
    V = Buffer("V", (3, 1), float32)
    B = Compute("B", (3, 4), lambda i, j: A[0, j] * V[i, 0] + A[0, j + 2])
    out.append(("broadcast", B, [A, V], lambda nest, o: None))
    X = Buffer("X", (3, 4), float32)
    S = Reduce("S", (1, 4), Sum(), lambda z, j, i: X[i, j], (3,))
    out.append(("unit_row_sum", S, [X], split(1, lambda e: e, False)))
    return out


@pytest.mark.parametrize("case", _unit_loop_nests(), ids=lambda c: c[0])
def test_cache_around_unit_loops_preserves_values(case):
    name, out, inputs, prepare = case
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(tuple(b.shape)).astype(np.float32) for b in inputs]
    want = run(LoopNest([out]), inputs + [out], arrays + [np.zeros(tuple(out.shape), np.float32)], "ireval")[-1]
    base = LoopNest([out])
    prepare(base, out)
    tried = 0
    for li in range(len(base.get_all_loops())):
        for bname in sorted(base.buffers):
            nest = base.copy()
            loop = nest.get_all_loops()[li]
            try:
                nest.cache_accesses(nest.buffers[bname], "cached", loop)
            except ScheduleError:
                continue
            tried += 1
            got = run(nest, inputs + [out], arrays + [np.zeros(tuple(out.shape), np.float32)], "ireval")[-1]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name}: cache {bname} at {loop.name}\n{nest}")
    assert tried >= 3, tried


def test_cache_with_symbolic_sizes(backend):
    N = Var("N", int32)
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i] * 3.0)
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    io, ii = nest.split_with_mask(i, 4)
    loc = nest.cache_accesses(A, "A_l", io)
    assert loc.shape == (4,)
    for n in (1, 4, 7):
        a = np.arange(n, dtype=np.float32)
        b = np.zeros(n, np.float32)
        run(nest, [A, B, N], [a, b], backend, sizes=[n])
        np.testing.assert_allclose(b, a * 3.0)


def test_cache_refusals_leave_the_nest_unchanged():
    M, K, P = matmul()
    nest = LoopNest([P])
    i, j, r = nest.get_loops_for(P)
    assert "invalid cache buffer name" in unchanged(nest, lambda: nest.cache_accesses(M, "a b", i))
    assert "already used" in unchanged(nest, lambda: nest.cache_accesses(M, "K", i))
    assert "already used" in unchanged(nest, lambda: nest.cache_accesses(M, "j", i))
    nest.cache_accesses(K, "K_c", j)  # K is now read only by the copy into K_c, outside r
    assert "does not access K" in unchanged(nest, lambda: nest.cache_accesses(K, "K_e", r))
    nest.vectorize(r, check=False)
    assert "vectorized" in unchanged(nest, lambda: nest.cache_accesses(M, "M_c", r))


# ------------------------------------------------------------------------------------
# rfactor
# ------------------------------------------------------------------------------------
def test_rfactor_golden():
    A = Buffer("A", (4, 8), float32)
    C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (8,))
    nest = LoopNest([C])
    i, k = nest.get_loops_for(C)
    C_rf = nest.rfactor(C, k)
    assert C_rf.name == "C_rf" and C_rf.shape == (4, 8) and C_rf in nest.intermediates
    assert str(nest) == """\
for (int i = 0; i < 4; i++) {
  for (int k_rf = 0; k_rf < 8; k_rf++) {
    C_rf[i, k_rf] = 0.0f;
  }
  for (int k = 0; k < 8; k++) {
    C_rf[i, k] = C_rf[i, k] + A[i, k];
  }
  C[i] = 0.0f;
  for (int k_1 = 0; k_1 < 8; k_1++) {
    C[i] = C[i] + C_rf[i, k_1];
  }
}"""
    assert i.exists() and k.exists()
    roundtrip(nest, [C])


def test_rfactor_enables_parallel_partial_sums(backend):
    A = Buffer("A", (3, 12), float32)
    C = Reduce("C", (3,), Max(), lambda i, k: A[i, k], (12,))
    nest = LoopNest([C])
    i, k = nest.get_loops_for(C)
    ko, ki = nest.split_with_mask(k, 4)
    with pytest.raises(ScheduleError):
        nest.parallelize(ki)
    nest.rfactor(C, ki)
    nest.reorder([ko, ki], [1, 0])
    nest.parallelize(ki)
    a = np.random.default_rng(3).standard_normal((3, 12)).astype(np.float32)
    c = np.zeros(3, np.float32)
    run(nest, [A, C], [a, c], backend)
    np.testing.assert_array_equal(c, a.max(1))
    roundtrip(nest, [C])


@settings(max_examples=10, deadline=None, suppress_health_check=FIXTURE_OK)
@given(n=SIZES, k=SIZES, l=SIZES, f=st.integers(1, 4), which=st.sampled_from(["k", "l", "ko", "ki"]))
def test_rfactor_preserves_values(backend, n, k, l, f, which):
    A = Buffer("A", (n, k, l), float32)
    C = Reduce("C", (n,), Sum(), lambda i, a, b: A[i, a, b], (k, l))
    nest = LoopNest([C])
    i, ka, lb = nest.get_loops_for(C)
    ko, ki = nest.split_with_mask(ka, f)
    loop = {"k": ko, "l": lb, "ko": ko, "ki": ki}[which]
    rf = nest.rfactor(C, loop)
    a = np.random.default_rng(n + k + l).standard_normal((n, k, l)).astype(np.float32)
    c = np.zeros(n, np.float32)
    run(nest, [A, C], [a, c], backend)
    np.testing.assert_allclose(c, a.astype(np.float64).sum((1, 2)), rtol=1e-4, atol=1e-5)
    roundtrip(nest, [C])


def test_rfactor_refusals_leave_the_nest_unchanged():
    A = Buffer("A", (4, 8), float32)
    B = Compute("B", (4, 8), lambda i, k: A[i, k] + 1.0)
    C = Reduce("C", (4,), Sum(), lambda i, k: B[i, k], (8,))
    nest = LoopNest([C])
    bi, bk = nest.get_loops_for(B)
    i, k = nest.get_loops_for(C)
    assert "B is not a reduction" in unchanged(nest, lambda: nest.rfactor(B, bk))
    assert "not a reduction loop of C" in unchanged(nest, lambda: nest.rfactor(C, i))
    assert "does not enclose the accumulation" in unchanged(nest, lambda: nest.rfactor(C, bk))
    nest.split_with_tail(k, 3)
    assert "1 initialising and 2 accumulating" in unchanged(nest, lambda: nest.rfactor(C, nest.loop("k_1_outer")))


# ------------------------------------------------------------------------------------
# eliminate_dead_stores
# ------------------------------------------------------------------------------------
def test_eliminate_dead_stores_removes_unread_intermediates_and_their_loops():
    A = Buffer("A", (8,), float32)
    C = Compute("C", (8,), lambda i: A[i] + 1.0)
    nest = LoopNest([C])
    # an intermediate that nothing reads: a stale cache / partial left by scheduling
    T = Buffer("T", (8,), float32)
    nest.add_buffer(T)
    t = Var("t", int32)
    dead = For(t, 0, 8, Block([Store(T, (t,), A[t] * 2.0)]))
    nest.root = Block((dead,) + nest.root.stmts)
    assert nest.eliminate_dead_stores() == ["T"]
    assert str(nest) == """\
for (int i = 0; i < 8; i++) {
  C[i] = A[i] + 1.0f;
}"""
    assert T not in nest.intermediates
    assert nest.eliminate_dead_stores() == []


def test_eliminate_dead_stores_after_cache_and_compute_at_shrinks_storage(backend):
    A = Buffer("A", (4, 10), float32)
    B = Compute("B", (4, 10), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (4, 8), lambda i, j: B[i, j] + B[i, j + 2])
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    nest.compute_at(B, i)
    nest.cache_accesses(B, "B_row", i)
    assert nest.eliminate_dead_stores() == ["B"]
    assert "B[" not in str(nest) and B not in nest.intermediates
    a = np.random.default_rng(5).standard_normal((4, 10)).astype(np.float32)
    c = np.zeros((4, 8), np.float32)
    run(nest, [A, C], [a, c], backend)
    np.testing.assert_allclose(c, (a * 2)[:, :8] + (a * 2)[:, 2:], rtol=1e-6)
    roundtrip(nest, [C])
