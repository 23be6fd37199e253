"""reorder, reorder_axis, fuse, flatten, distribute: golden text (the docstrings' before /
after), semantic preservation on every CPU backend with hypothesis shapes, refusals that
leave the nest unchanged, stable handles and history replay."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from loopnest import LoopNest
from loopnest.stmt import Block, For, Store
from nests import FIXTURE_OK, float_source, roundtrip, run, stencil_nest, unchanged
from te import Buffer, Compute, Reduce, Sum, Var, float32

SIZES = st.sampled_from([1, 2, 3, 5, 7, 8, 13])
rand = float_source(np.random.default_rng(7))


def cube(n=4, m=8, p=2):
    A = Buffer("A", (n, m, p), float32)
    B = Compute("B", (n, m, p), lambda i, j, k: A[i, j, k])
    return A, B


def matmul(n=4, m=5, kk=3):
    X = Buffer("X", (n, kk), float32)
    Y = Buffer("Y", (kk, m), float32)
    Z = Reduce("Z", (n, m), Sum(), lambda i, j, k: X[i, k] * Y[k, j], (kk,))
    return X, Y, Z


# ------------------------------------------------------------------------------------
# golden text
# ------------------------------------------------------------------------------------
def test_reorder_golden():
    A, B = cube()
    nest = LoopNest([B])
    i, j, k = nest.get_loops_for(B)
    assert nest.reorder([i, j, k], [2, 0, 1]) == [k, i, j]
    assert str(nest) == """\
for (int k = 0; k < 2; k++) {
  for (int i = 0; i < 4; i++) {
    for (int j = 0; j < 8; j++) {
      B[i, j, k] = A[i, j, k];
    }
  }
}"""
    assert [l.name for l in (i, j, k)] == ["i", "j", "k"] and all(l.exists() for l in (i, j, k))
    assert nest.history == [{"op": "reorder", "args": [[{"loop": "i"}, {"loop": "j"}, {"loop": "k"}], [2, 0, 1]],
                             "kwargs": {}}]
    roundtrip(nest, [B])


def test_reorder_axis_golden_keeps_middle_loop():
    A, B = cube()
    nest = LoopNest([B])
    i, j, k = nest.get_loops_for(B)
    nest.reorder_axis(k, i)
    assert str(nest) == """\
for (int k = 0; k < 2; k++) {
  for (int j = 0; j < 8; j++) {
    for (int i = 0; i < 4; i++) {
      B[i, j, k] = A[i, j, k];
    }
  }
}"""
    roundtrip(nest, [B])


def test_reorder_listed_loops_in_any_order():
    A, B = cube()
    nest = LoopNest([B])
    i, j, k = nest.get_loops_for(B)
    nest.reorder([k, i], [0, 1])     # slot 0 (i's place) gets k, slot 1 (k's place) gets i
    assert [l.name for l in nest.get_loops_for(B)] == ["k", "j", "i"]


def test_fuse_golden():
    N = Var("N")
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i] + 1.0)
    C = Compute("C", (N,), lambda i: B[i] * 2.0)
    nest = LoopNest([B, C])
    assert str(nest) == """\
for (int i = 0; i < N; i++) {
  B[i] = A[i] + 1.0f;
}
for (int i_1 = 0; i_1 < N; i_1++) {
  C[i_1] = B[i_1] * 2.0f;
}"""
    i, = nest.get_loops_for(B)
    fused = nest.fuse([i, nest.get_loops_for(C)[0]])
    assert fused == i
    assert str(nest) == """\
for (int i = 0; i < N; i++) {
  B[i] = A[i] + 1.0f;
  C[i] = B[i] * 2.0f;
}"""
    roundtrip(nest, [B, C])


def test_flatten_golden():
    A = Buffer("A", (4, 6), float32)
    B = Compute("B", (4, 6), lambda i, j: A[i, j])
    nest = LoopNest([B])
    flat = nest.flatten(nest.get_loops_for(B))
    assert flat.name == "i_j_flat" and flat.extent == 24
    assert str(nest) == """\
for (int i_j_flat = 0; i_j_flat < 24; i_j_flat++) {
  B[floordiv(i_j_flat, 6), floormod(i_j_flat, 6)] = A[floordiv(i_j_flat, 6), floormod(i_j_flat, 6)];
}"""
    roundtrip(nest, [B])


def test_distribute_golden():
    A = Buffer("A", (8,), float32)
    B = Compute("B", (8,), lambda i: A[i] + 1.0)
    C = Compute("C", (8,), lambda i: A[i] * 2.0)
    nest = LoopNest([B, C])
    i, = nest.get_loops_for(B)
    nest.fuse([i, nest.get_loops_for(C)[0]])
    first, second = nest.distribute(i)
    assert first == i and second.name == "i_2"
    assert str(nest) == """\
for (int i = 0; i < 8; i++) {
  B[i] = A[i] + 1.0f;
}
for (int i_2 = 0; i_2 < 8; i_2++) {
  C[i_2] = A[i_2] * 2.0f;
}"""
    roundtrip(nest, [B, C])


# ------------------------------------------------------------------------------------
# semantic preservation
# ------------------------------------------------------------------------------------
@settings(max_examples=12, suppress_health_check=FIXTURE_OK)
@given(n=SIZES, m=SIZES, p=SIZES, perm=st.permutations([0, 1, 2]))
def test_reorder_preserves_values(backend, n, m, p, perm):
    A = Buffer("A", (n, m, p), float32)
    B = Compute("B", (n, m, p), lambda i, j, k: A[i, j, k] * 2.0 + A[i, 0, 0])
    nest = LoopNest([B])
    nest.reorder(nest.get_loops_for(B), perm)
    a = rand(n, m, p)
    (b,) = run(nest, [A, B], [a, np.zeros((n, m, p), np.float32)], backend)[1:]
    np.testing.assert_allclose(b, a * 2 + a[:, :1, :1], rtol=1e-6)


@settings(max_examples=10, suppress_health_check=FIXTURE_OK)
@given(n=SIZES, m=SIZES, kk=SIZES)
def test_matmul_reorder_output_loops_and_fuse_flatten(backend, n, m, kk):
    X, Y, Z = matmul(n, m, kk)
    nest = LoopNest([Z])
    i, j, k = nest.get_loops_for(Z)
    nest.reorder_axis(i, j)
    x, y = rand(n, kk), rand(kk, m)
    (z,) = run(nest, [X, Y, Z], [x, y, np.zeros((n, m), np.float32)], backend)[2:]
    np.testing.assert_allclose(z, x.astype(np.float64) @ y, rtol=1e-5, atol=1e-5)


@settings(max_examples=10, suppress_health_check=FIXTURE_OK)
@given(n=SIZES, m=SIZES)
def test_fuse_then_flatten_preserves_values(backend, n, m):
    A = Buffer("A", (n, m), float32)
    B = Compute("B", (n, m), lambda i, j: A[i, j] + 1.0)
    C = Compute("C", (n, m), lambda i, j: B[i, j] * B[i, j])
    nest = LoopNest([C])
    (i, j), (i1, j1) = nest.get_loops_for(B), nest.get_loops_for(C)
    nest.fuse([i, i1])
    nest.fuse([j, j1])
    flat = nest.flatten([i, j])
    assert flat.extent == n * m
    a = rand(n, m)
    (c,) = run(nest, [A, C], [a, np.zeros((n, m), np.float32)], backend)[1:]
    np.testing.assert_allclose(c, (a + 1) ** 2, rtol=1e-6)
    roundtrip(nest, [C])


def test_flatten_symbolic_extents(backend):
    N, M = Var("N"), Var("M")
    A = Buffer("A", (N, M), float32)
    B = Compute("B", (N, M), lambda i, j: A[i, j] * 3.0)
    nest = LoopNest([B])
    nest.flatten(nest.get_loops_for(B))
    assert "i_j_flat < N * M" in str(nest)
    for n, m in ((1, 1), (3, 7), (5, 1)):
        a = rand(n, m)
        (b,) = run(nest, [A, B, N, M], [a, np.zeros((n, m), np.float32)], backend)[1:]
        np.testing.assert_allclose(b, a * 3, rtol=1e-6)


@settings(max_examples=8, suppress_health_check=FIXTURE_OK)
@given(n=SIZES)
def test_distribute_preserves_values(backend, n):
    A = Buffer("A", (n,), float32)
    B = Compute("B", (n,), lambda i: A[i] + 1.0)
    C = Compute("C", (n,), lambda i: B[i] * 2.0)
    nest = LoopNest([B, C])
    i, = nest.get_loops_for(B)
    nest.fuse([i, nest.get_loops_for(C)[0]])
    nest.distribute(i)
    a = rand(n)
    b, c = run(nest, [A, B, C], [a, np.zeros(n, np.float32), np.zeros(n, np.float32)], backend)[1:]
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)


def test_fuse_legality_and_values(backend):
    """C[i] = B[i] + B[(i + 8) % 9] reads B[8] at i = 0, a later iteration: fusion refused;
    E[i] = B[i] * 2 only reads the same iteration: fused and correct."""
    A = Buffer("A", (9,), float32)
    B = Compute("B", (9,), lambda i: A[i] + 1.0)
    C = Compute("C", (9,), lambda i: B[i] + B[(i + 8) % 9])
    nest = LoopNest([C])
    msg = unchanged(nest, lambda: nest.fuse([nest.get_loops_for(B)[0], nest.get_loops_for(C)[0]]))
    assert "cannot fuse loops i and i_1" in msg
    D = Compute("D", (8,), lambda i: B[i] + B[i + 1])
    nest = LoopNest([D])
    msg = unchanged(nest, lambda: nest.fuse([nest.get_loops_for(B)[0], nest.get_loops_for(D)[0]]))
    assert "bounds differ" in msg
    E = Compute("E", (9,), lambda i: B[i] * 2.0)
    nest = LoopNest([E])
    nest.fuse([nest.get_loops_for(B)[0], nest.get_loops_for(E)[0]])
    a = rand(9)
    (e,) = run(nest, [A, E], [a, np.zeros(9, np.float32)], backend)[1:]
    np.testing.assert_allclose(e, (a + 1) * 2, rtol=1e-6)


# ------------------------------------------------------------------------------------
# refusals: the nest is left exactly as it was
# ------------------------------------------------------------------------------------
def test_reorder_stencil_refused():
    nest, C = stencil_nest()
    i, j = nest.get_all_loops()
    msg = unchanged(nest, lambda: nest.reorder([i, j], [1, 0]))
    assert msg.startswith("cannot reorder loops (i, j) to (j, i): `C[i, j] = C[i - 1, j + 1] + C[i, j - 1]` "
                          "reads C[i - 1, j + 1]")
    msg = unchanged(nest, lambda: nest.reorder_axis(j, i))
    assert "would become (-1, 1) over (j, i)" in msg


def test_reorder_reduction_loop_outside_init_distributes_the_init():
    """The init store in the way gets a loop of its own (j_1); j and k keep their handles."""
    X, Y, Z = matmul()
    nest = LoopNest([Z])
    i, j, k = nest.get_loops_for(Z)
    nest.reorder([j, k], [1, 0])
    assert [l.name for l in nest.get_loops_for(Z)] == ["i", "k", "j"]
    assert [l.name for l in nest.get_all_loops()] == ["i", "j_1", "k", "j"]


def test_reorder_reduction_after_distribute():
    """Distributing the init out of j makes (j, k) perfect; k outside j is then legal
    (the k loop carries the dependence, the order of j within k does not matter)."""
    X, Y, Z = matmul(3, 4, 5)
    nest = LoopNest([Z])
    i, j, k = nest.get_loops_for(Z)
    _, j1 = nest.distribute(j)
    nest.reorder([j1, k], [1, 0])
    assert [l.name for l in nest.get_loops_for(Z)] == ["i", "k", "j_1"]
    x, y = rand(3, 5), rand(5, 4)
    (z,) = run(nest, [X, Y, Z], [x, y, np.zeros((3, 4), np.float32)], "ireval")[2:]
    np.testing.assert_allclose(z, x.astype(np.float64) @ y, rtol=1e-5, atol=1e-5)


def test_reorder_non_rectangular_refused():
    A = Buffer("A", (8, 8), float32)
    B = Compute("B", (8, 8), lambda i, j: A[i, j])
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    nest.root = Block([For(i.var, 0, 8, Block([For(j.var, 0, i.var + 1, Block([Store(B, (i.var, j.var), A[i.var, j.var])]))]))])
    msg = unchanged(nest, lambda: nest.reorder([i, j], [1, 0]))
    assert msg == ("reorder: the bounds of loop j use i, but loop i would be placed inside loop j "
                   "(a non-rectangular nest keeps the loop bounding it outside)")


def test_reorder_bad_arguments():
    A, B = cube()
    nest = LoopNest([B])
    i, j, k = nest.get_loops_for(B)
    assert "not a permutation of 0..1" in unchanged(nest, lambda: nest.reorder([i, j], [0, 0]))
    assert "name one loop twice" in unchanged(nest, lambda: nest.reorder([i, i], [1, 0]))
    A2, B2 = cube()
    C = Compute("C", (3,), lambda x: B[x, 0, 0])
    nest = LoopNest([C])
    (i, j, k), (x,) = nest.get_loops_for(B), nest.get_loops_for(C)
    assert "not nested one inside the other" in unchanged(nest, lambda: nest.reorder([i, x], [1, 0]))
    before = str(nest)
    assert nest.reorder_axis(i, i) == [i, i] and str(nest) == before     # a no-op, as in NNC


def test_fuse_refusals():
    A = Buffer("A", (8,), float32)
    B = Compute("B", (8,), lambda i: A[i] + 1.0)
    C = Compute("C", (8,), lambda i: A[i] * 2.0)
    D = Compute("D", (8,), lambda i: A[i] - 1.0)
    nest = LoopNest([B, C, D])
    (b,), (c,), (d,) = nest.get_loops_for(B), nest.get_loops_for(C), nest.get_loops_for(D)
    assert "not adjacent; `for (int i_1 = 0; i_1 < 8; i_1++) {` lies between them" in unchanged(
        nest, lambda: nest.fuse([b, d]))
    assert "at least two loops" in unchanged(nest, lambda: nest.fuse([b]))
    nest.parallelize(c)
    assert "loop i is serial and loop i_1 is parallel" in unchanged(nest, lambda: nest.fuse([b, c]))
    # three loops at once, given out of order
    nest = LoopNest([B, C, D])
    (b,), (c,), (d,) = nest.get_loops_for(B), nest.get_loops_for(C), nest.get_loops_for(D)
    assert nest.fuse([d, b, c]) == b
    assert str(nest).count("for (") == 1


def test_fuse_nested_loops_not_siblings_refused():
    A, B = cube()
    nest = LoopNest([B])
    i, j, k = nest.get_loops_for(B)
    assert "not in the same block" in unchanged(nest, lambda: nest.fuse([i, j]))


def test_fuse_parallel_loops_rechecks_parallelism():
    A = Buffer("A", (8,), float32)
    B = Compute("B", (8,), lambda i: A[i] + 1.0)
    C = Compute("C", (8,), lambda i: B[7 - i] * 2.0)
    nest = LoopNest([B, C])
    (b,), (c,) = nest.get_loops_for(B), nest.get_loops_for(C)
    nest.parallelize(b)
    nest.parallelize(c)
    # fusing is refused anyway: C[i] reads B[7 - i], written by a later iteration
    assert "cannot fuse" in unchanged(nest, lambda: nest.fuse([b, c]))


def test_distribute_refusals():
    A = Buffer("A", (8,), float32)
    B = Compute("B", (8,), lambda i: A[i])
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    assert "its body has 1 statement, there is nothing to split" in unchanged(nest, lambda: nest.distribute(i))
    T = Buffer("T", (8,), float32)
    nest.root = Block([For(i.var, 1, 8, Block([Store(B, (i.var,), T[i.var - 1]), Store(T, (i.var,), A[i.var])]))])
    msg = unchanged(nest, lambda: nest.distribute(i))
    assert msg == ("cannot distribute loop i: `B[i] = T[i - 1]` reads T[i - 1], written by `T[i] = A[i]` "
                   "in the previous iteration of loop i (flow dependence on T carried by loop i); it goes from "
                   "statement 1 of the body back to statement 0: distributed, every iteration of statement 0 would "
                   "run before statement 1; keep them in one loop")


def _cached_pair_nest():
    """i { j { T[i, j] = A[i, j] + 1; C[i, j] = T[i, j] * 2 } } (T computed at j)."""
    A = Buffer("A", (5, 6), float32)
    T = Compute("T", (5, 6), lambda i, j: A[i, j] + 1.0)
    C = Compute("C", (5, 6), lambda i, j: T[i, j] * 2.0)
    nest = LoopNest([C])
    nest.compute_at(T, nest.get_loops_for(C)[1])
    return nest, A, T, C


def test_distribute_inner_loop_after_caching_at_the_outer_loop():
    """T cached at i: T_local[0, j] is reused by every iteration of i, so C's read in one
    iteration of i precedes T's write in the next -- a dependence from statement 1 of j's
    body back to statement 0, carried by i only: distributing j keeps it."""
    nest, A, T, C = _cached_pair_nest()
    ref = nest.copy()
    i, j = nest.get_loops_for(C)
    nest.cache_accesses(T, "T_local", i)
    first, second = nest.distribute(j)
    assert str(nest).startswith("""\
for (int i_1 = 0; i_1 < 5; i_1++) {
  for (int j_1 = 0; j_1 < 6; j_1++) {
    T_local[0, j_1] = A[i_1, j_1] + 1.0f;
  }
  for (int j_1_1 = 0; j_1_1 < 6; j_1_1++) {
    C[i_1, j_1_1] = T_local[0, j_1_1] * 2.0f;
  }""")
    a = rand(5, 6)
    want = run(ref, [A, C], [a, np.zeros((5, 6), np.float32)], "ireval")[1]
    got = run(nest, [A, C], [a, np.zeros((5, 6), np.float32)], "ireval")[1]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, (a + 1) * 2, rtol=1e-6)
    roundtrip(nest, [C])


def test_distribute_inner_loop_still_refused_when_it_carries_the_dependence():
    """T cached at j: one T_local element reused by every iteration of j (inside one
    iteration of i), so distributing j would let T's writes overwrite it before C reads it."""
    nest, A, T, C = _cached_pair_nest()
    i, j = nest.get_loops_for(C)
    nest.cache_accesses(T, "T_local", j)
    msg = unchanged(nest, lambda: nest.distribute(j))
    assert msg.startswith("cannot distribute loop j_1: ")
    assert "carried by loop j_1" in msg and "back to statement 0" in msg


def test_flatten_refusals():
    A, B = cube()
    nest = LoopNest([B])
    i, j, k = nest.get_loops_for(B)
    assert "loop j between them must be listed too" in unchanged(nest, lambda: nest.flatten([i, k]))
    nest.slice_head(j, 2)
    j_now = [l for l in nest.get_all_loops() if l.name == "j"][0]
    assert "starts at 2, not 0; normalize(j) first" in unchanged(nest, lambda: nest.flatten([j_now, k]))


def test_handles_survive_reorder_and_fuse():
    X, Y, Z = matmul()
    nest = LoopNest([Z])
    i, j, k = nest.get_loops_for(Z)
    nest.reorder_axis(i, j)
    nest.parallelize(j)
    assert i.kind == "serial" and j.kind == "parallel" and k.exists()
    assert [l.name for l in nest.get_loops_for(Z)] == ["j", "i", "k"]
    roundtrip(nest, [Z])


def test_fuse_vectorized_loops_rechecks_the_fused_loop():
    A = Buffer("A", (8,), float32)
    B = Compute("B", (8,), lambda i: A[i] + 1.0)
    C = Compute("C", (8,), lambda i: B[i] * 2.0)
    nest = LoopNest([B, C])
    (b,), (c,) = nest.get_loops_for(B), nest.get_loops_for(C)
    nest.vectorize(b)
    nest.vectorize(c)
    assert nest.fuse([b, c]).kind == "vectorized"
    # T[i] = B[i - 1]: a forward dependence between the bodies, fine for a serial fused loop,
    # but the fused loop would carry it, so it cannot stay vectorized
    T = Buffer("T", (8,), float32)
    nest = LoopNest([B, C])
    (b,), (c,) = nest.get_loops_for(B), nest.get_loops_for(C)
    nest.root = Block([For(b.var, 1, 8, Block([Store(B, (b.var,), A[b.var])])),
                       For(c.var, 1, 8, Block([Store(T, (c.var,), B[c.var - 1])]))])
    nest.vectorize(b)
    nest.vectorize(c)
    msg = unchanged(nest, lambda: nest.fuse([b, c]))
    assert msg.startswith("cannot fuse loops i and i_1: the fused loop would be vectorized, and cannot vectorize "
                          "loop i: `T[i] = B[i - 1]` reads B[i - 1], written by `B[i] = A[i]` in the previous "
                          "iteration of loop i (flow dependence on B carried by loop i)")


def test_reorder_rechecks_parallel_loops_at_their_new_depth():
    """D[i, j] = D[i - 1, j - 1]: distance (1, 1). Inner j carries nothing and may be
    parallel; moved outside i it would carry the dependence."""
    M = Buffer("M", (6, 6), float32)
    D = Compute("D", (6, 6), lambda i, j: M[i, j])
    nest = LoopNest([D])
    i, j = nest.get_loops_for(D)
    nest.root = Block([For(i.var, 1, 6, Block([For(j.var, 1, 6, Block([
        Store(D, (i.var, j.var), D[i.var - 1, j.var - 1])]))]))])
    nest.parallelize(j)
    msg = unchanged(nest, lambda: nest.reorder([i, j], [1, 0]))
    assert msg.startswith("reorder: loop j is parallel, and once moved, cannot parallelize loop j: "
                          "`D[i, j] = D[i - 1, j - 1]` reads D[i - 1, j - 1]")
    nest.root = Block([For(i.var, 1, 6, Block([For(j.var, 1, 6, Block([
        Store(D, (i.var, j.var), D[i.var - 1, j.var - 1])]))]))])
    nest.reorder([i, j], [1, 0])        # serial loops: the permutation itself is legal
