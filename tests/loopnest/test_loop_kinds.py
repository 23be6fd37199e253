"""vectorize, unroll, parallelize, GPU binding and the vector lowering of prepare_for_codegen:
golden text, semantic preservation on every CPU backend, refusals that leave the nest
unchanged (reductions, prefix sums, in-place updates), escape hatches in the history."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from codegen import build
from loopnest import LoopNest
from loopnest.stmt import Block, Cond, For, ForKind, Let, Store, iter_stmts
from loopnest.transforms.loop_kinds import lower_vectorized_loops
from loopnest.vectorize_lowering import version_guarded_loops
from nests import FIXTURE_OK, float_source, roundtrip, run, unchanged
from te import (Buffer, Compute, IntImm, Reduce, Sum, Var, exp, float32, if_then_else, int32,
                select)

SIZES = st.sampled_from([1, 2, 3, 5, 7, 8, 13, 16])
RNG = np.random.default_rng(11)
rand = float_source(RNG)


def reduction(n=4, m=8):
    A = Buffer("A", (n, m), float32)
    C = Reduce("C", (n,), Sum(), lambda i, k: A[i, k], (m,))
    return A, C


def prefix_sum(n=8):
    A = Buffer("A", (n,), float32)
    B = Compute("B", (n,), lambda i: A[i])
    nest = LoopNest([B])
    i = nest.get_loops_for(B)[0]
    nest.root = Block([For(i.var, IntImm(1), IntImm(n), Block([Store(B, (i.var,), B[i.var - 1] + A[i.var])]))])
    return nest, A, B, i


# ------------------------------------------------------------------------------------
# golden text
# ------------------------------------------------------------------------------------
def test_vectorize_golden_and_lowering():
    A = Buffer("A", (20,), float32)
    B = Compute("B", (20,), lambda i: A[i] * 2.0)
    nest = LoopNest([B])
    outer, inner, tail = nest.split_with_tail(nest.get_loops_for(B)[0], 8)
    assert nest.vectorize(inner) == inner
    assert str(nest) == """\
for (int i_outer = 0; i_outer < 2; i_outer++) {
  vectorized for (int i_inner = 0; i_inner < 8; i_inner++) {
    B[i_outer * 8 + i_inner] = A[i_outer * 8 + i_inner] * 2.0f;
  }
}
for (int i_tail = 0; i_tail < 4; i_tail++) {
  B[i_tail + 16] = A[i_tail + 16] * 2.0f;
}"""
    prepared = nest.copy().prepare_for_codegen()
    assert str(prepared) == """\
for (int i_outer = 0; i_outer < 2; i_outer++) {
  B[ramp(i_outer * 8, 1, 8)] = A[ramp(i_outer * 8, 1, 8)] * broadcast(2.0f, 8);
}
for (int i_tail = 0; i_tail < 4; i_tail++) {
  B[i_tail + 16] = A[i_tail + 16] * 2.0f;
}"""
    roundtrip(nest, [B])


def test_parallelize_golden():
    A, C = reduction()
    nest = LoopNest([C])
    i, k = nest.get_loops_for(C)
    nest.parallelize(i)
    assert str(nest) == """\
parallel for (int i = 0; i < 4; i++) {
  C[i] = 0.0f;
  for (int k = 0; k < 8; k++) {
    C[i] = C[i] + A[i, k];
  }
}"""
    assert nest.history == [{"op": "parallelize", "args": [{"loop": "i"}], "kwargs": {}}]


def test_unroll_full_golden():
    A = Buffer("A", (4, 3), float32)
    B = Compute("B", (4, 3), lambda i, j: A[i, j])
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    assert nest.unroll(j) is None
    assert not j.exists()
    assert str(nest) == """\
for (int i = 0; i < 4; i++) {
  B[i, 0] = A[i, 0];
  B[i, 1] = A[i, 1];
  B[i, 2] = A[i, 2];
}"""
    roundtrip(nest, [B])


def test_unroll_by_factor_golden():
    A = Buffer("A", (5,), float32)
    B = Compute("B", (5,), lambda i: A[i] + 1.0)
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    main, tail = nest.unroll(i, 2)
    assert main == i and tail.name == "i_tail"
    assert str(nest) == """\
for (int i = 0; i < 2; i++) {
  B[i * 2] = A[i * 2] + 1.0f;
  B[i * 2 + 1] = A[i * 2 + 1] + 1.0f;
}
for (int i_tail = 4; i_tail < 5; i_tail++) {
  B[i_tail] = A[i_tail] + 1.0f;
}"""
    roundtrip(nest, [B])


def _copy_with_rows_unrolled():
    """``B = A`` (2 x 3) with its row loop unrolled into copies: (A, B, nest, the column loop)."""
    A = Buffer("A", (2, 3), float32)
    B = Compute("B", (2, 3), lambda i, j: A[i, j])
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    nest.unroll(i)
    return A, B, nest, j


def test_unroll_copies_get_fresh_inner_loops():
    A, B, nest, j = _copy_with_rows_unrolled()
    names = [l.name for l in nest.get_all_loops()]
    assert names == ["j", "j_1"] and j.exists()
    nest.verify()


def test_late_unroll_marks_the_loop_and_code_generation_makes_the_copies():
    A = Buffer("A", (4, 3), float32)
    B = Compute("B", (4, 3), lambda i, j: A[i, j] * 2.0 + 1.0)
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    assert nest.unroll(j, late=True) is None
    assert j.exists() and j.kind == ForKind.UNROLLED
    assert str(nest) == """\
for (int i = 0; i < 4; i++) {
  unrolled for (int j = 0; j < 3; j++) {
    B[i, j] = A[i, j] * 2.0f + 1.0f;
  }
}"""
    roundtrip(nest, [B])
    a = rand(4, 3)
    want = a.astype(np.float64) * 2 + 1
    for backend in ("ireval", "llvm"):
        np.testing.assert_allclose(run(nest, [A, B], [a, np.zeros((4, 3), np.float32)], backend)[1], want, rtol=1e-6)
    source = build(nest, [A, B], target="llvm", cache=False).source
    assert "j_loop" not in source and source.count("fmul") == 3      # one copy per iteration, no loop
    gpu = LoopNest([B])
    i, j = gpu.get_loops_for(B)
    gpu.set_gpu_block_index(i, 0)
    gpu.unroll(j, late=True)
    assert "#pragma unroll" in build(gpu, [A, B], target="cuda").source


def test_late_unroll_refusals_name_the_reason_and_change_nothing():
    A = Buffer("A", (100, 4), float32)
    B = Compute("B", (100, 4), lambda i, j: A[i, j])
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    assert "at most 64" in unchanged(nest, lambda: nest.unroll(i, late=True))
    assert "leave out the factor" in unchanged(nest, lambda: nest.unroll(j, 2, late=True))
    nest.vectorize(j)
    assert "marks a serial loop" in unchanged(nest, lambda: nest.unroll(j, late=True))
    N = Var("N")
    C = Compute("C", (N,), lambda k: k * 2)
    sym = LoopNest([C])
    assert "not a constant" in unchanged(sym, lambda: sym.unroll(sym.get_loops_for(C)[0], late=True))


def test_late_unroll_of_a_loop_unrolled_into_copies_marks_every_copy():
    A, B, nest, j = _copy_with_rows_unrolled()
    nest.unroll(j, late=True)
    assert [lp.kind for lp in nest.get_all_loops()] == [ForKind.UNROLLED] * 2
    a = rand(2, 3)
    for backend in ("ireval", "llvm"):
        assert np.array_equal(run(nest, [A, B], [a, np.zeros((2, 3), np.float32)], backend)[1], a), backend


def test_gpu_binding_golden():
    A = Buffer("A", (128,), float32)
    B = Compute("B", (128,), lambda i: A[i] * 2.0)
    nest = LoopNest([B])
    o, inner, _ = nest.split_with_tail(nest.get_loops_for(B)[0], 32)
    nest.set_gpu_block_index(o, 0)
    nest.set_gpu_thread_index(inner, 0)
    assert str(nest) == """\
gpu_block.x for (int i_outer = 0; i_outer < 4; i_outer++) {
  gpu_thread.x for (int i_inner = 0; i_inner < 32; i_inner++) {
    B[i_outer * 32 + i_inner] = A[i_outer * 32 + i_inner] * 2.0f;
  }
}"""
    assert o.stmt.axis == 0 and inner.kind == ForKind.GPU_THREAD
    roundtrip(nest, [B])


# ------------------------------------------------------------------------------------
# vector lowering
# ------------------------------------------------------------------------------------
def _lowered(nest):
    p = nest.copy().prepare_for_codegen()
    return p, [s for s in iter_stmts(p.root) if isinstance(s, For) and s.kind == ForKind.VECTORIZED]


def test_lowering_broadcasts_invariants_and_keeps_scalar_loads():
    N = Var("N")
    A = Buffer("A", (N, 8), float32)
    s = Buffer("s", (N,), float32)
    B = Compute("B", (N, 8), lambda i, j: exp(A[i, j]) * s[i] + select(j < 4, 1.0, 2.0))
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    nest.vectorize(j)
    p, left = _lowered(nest)
    assert not left
    assert str(p) == """\
for (int i = 0; i < N; i++) {
  B[ramp(int64(i) * int64(8), int64(1), 8)] = exp(A[ramp(int64(i) * int64(8), int64(1), 8)]) * broadcast(s[int64(i)], 8) + select(ramp(0, 1, 8) < broadcast(4, 8), broadcast(1.0f, 8), broadcast(2.0f, 8));
}"""


def test_lowering_leaves_loops_it_cannot_vectorize():
    A = Buffer("A", (8,), float32)
    B = Compute("B", (8,), lambda i: if_then_else(A[i] > 0.0, A[i], 0.0))
    nest = LoopNest([B])
    nest.vectorize(nest.get_loops_for(B)[0])
    _, left = _lowered(nest)               # if_then_else with a lane-varying condition
    assert len(left) == 1
    A2, C = reduction(4, 8)
    nest = LoopNest([C])
    i, k = nest.get_loops_for(C)
    nest.vectorize(i)                      # legal, but the body holds a loop: stays a loop
    _, left = _lowered(nest)
    assert [f.var.name for f in left] == ["i"]
    # a hand-made tree: a condition in the body that is not an interval of the lanes
    i = Var("i")
    root = Block([For(i, 0, 4, Block([Cond(i % 2 == 0, Block([Store(A, (i,), 1.0)]))]), ForKind.VECTORIZED)])
    assert lower_vectorized_loops(root) is root
    # one that is: vector code where every lane passes (here none does), else the loop, serial
    root = Block([For(i, 0, 4, Block([Cond(i < 2, Block([Store(A, (i,), 1.0)]))]), ForKind.VECTORIZED)])
    assert lower_vectorized_loops(root) is root
    assert str(version_guarded_loops(root)) == str(Block([root.stmts[0].replace(kind=ForKind.SERIAL)]))


def test_lowering_let_and_extent_one():
    A = Buffer("A", (8,), float32)
    B = Buffer("B", (8,), float32)
    i, t = Var("i"), Var("t", float32)
    root = Block([For(i, 0, 8, Block([Let(t, A[i] * 2.0, Block([Store(B, (i,), t + 1.0)]))]), ForKind.VECTORIZED)])
    out = lower_vectorized_loops(root)
    assert str(out) == """\
{ float32x8 t = A[ramp(0, 1, 8)] * broadcast(2.0f, 8);
  B[ramp(0, 1, 8)] = t + broadcast(1.0f, 8);
}"""
    root = Block([For(i, 3, 4, Block([Store(B, (i,), A[i])]), ForKind.VECTORIZED)])
    assert str(lower_vectorized_loops(root)) == "B[3] = A[3];"


@settings(max_examples=10, suppress_health_check=FIXTURE_OK)
@given(n=SIZES, m=SIZES, factor=st.sampled_from([2, 3, 4, 8]))
def test_vectorize_preserves_values(backend, n, m, factor):
    A = Buffer("A", (n, m), float32)
    r = Buffer("r", (m,), float32)
    B = Compute("B", (n, m), lambda i, j: A[i, j] * r[j] + A[i, (j + 1) % m] - 1.0)
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    _, inner, _ = nest.split_with_tail(j, factor)
    nest.vectorize(inner)
    a, rr = rand(n, m), rand(m)
    (b,) = run(nest, [A, r, B], [a, rr, np.zeros((n, m), np.float32)], backend)[2:]
    np.testing.assert_allclose(b, a * rr + np.roll(a, -1, axis=1) - 1, rtol=1e-6, atol=1e-6)


def test_vectorize_symbolic_size(backend):
    N = Var("N")
    A = Buffer("A", (N, 4), int32)
    B = Compute("B", (N, 4), lambda i, j: A[i, j] * 3 + j)
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    nest.vectorize(j)
    nest.parallelize(i)
    for n in (1, 5):
        a = RNG.integers(-50, 50, (n, 4)).astype(np.int32)
        (b,) = run(nest, [A, B, N], [a, np.zeros((n, 4), np.int32)], backend)[1:]
        np.testing.assert_array_equal(b, a * 3 + np.arange(4))


@settings(max_examples=10, suppress_health_check=FIXTURE_OK)
@given(n=SIZES, factor=st.integers(1, 4), late=st.booleans())
def test_unroll_preserves_values(backend, n, factor, late):
    A, C = reduction(3, n)
    nest = LoopNest([C])
    i, k = nest.get_loops_for(C)
    if factor >= n or late:
        nest.unroll(k, late=late)
    else:
        nest.unroll(k, factor)
    nest.parallelize(i)
    a = rand(3, n)
    (c,) = run(nest, [A, C], [a, np.zeros(3, np.float32)], backend)[1:]
    np.testing.assert_allclose(c, a.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_unroll_symbolic_extent_by_factor(backend):
    N = Var("N")
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i] * 2.0)
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    main, tail = nest.unroll(i, 3)
    assert "i < floordiv(N, 3)" in str(nest) and tail is not None
    for n in (0, 1, 2, 3, 7):
        a = rand(n)
        (b,) = run(nest, [A, B, N], [a, np.zeros(n, np.float32)], backend)[1:]
        np.testing.assert_allclose(b, a * 2)


# ------------------------------------------------------------------------------------
# refusals
# ------------------------------------------------------------------------------------
def test_reduction_loop_refused_output_loop_allowed():
    A, C = reduction()
    nest = LoopNest([C])
    i, k = nest.get_loops_for(C)
    msg = unchanged(nest, lambda: nest.parallelize(k))
    assert msg.endswith("(flow dependence on C carried by loop k); parallelize would be legal on loop i")
    msg = unchanged(nest, lambda: nest.vectorize(k))
    assert msg.startswith("cannot vectorize loop k: `C[i] = C[i] + A[i, k]` reads C[i]")
    nest.parallelize(i)
    assert i.kind == ForKind.PARALLEL


def test_prefix_sum_refused():
    nest, A, B, i = prefix_sum()
    msg = unchanged(nest, lambda: nest.parallelize(i))
    assert msg == ("cannot parallelize loop i: `B[i] = B[i - 1] + A[i]` reads B[i - 1], written by the same "
                   "statement (as B[i]) in the previous iteration of loop i (flow dependence on B carried by loop i)")
    unchanged(nest, lambda: nest.vectorize(i))
    unchanged(nest, lambda: nest.set_gpu_thread_index(i, 0))


def test_in_place_update_refused():
    """A[i] = A[i + 1] * 2: each iteration overwrites nothing read later, but reads what the
    next one overwrites: an anti dependence, so no parallel or vector loop."""
    A = Buffer("A", (9,), float32)
    B = Compute("B", (8,), lambda i: A[i])
    nest = LoopNest([B])
    i = nest.get_loops_for(B)[0]
    nest.root = Block([For(i.var, 0, 8, Block([Store(A, (i.var,), A[i.var + 1] * 2.0)]))])
    msg = unchanged(nest, lambda: nest.parallelize(i))
    assert msg == ("cannot parallelize loop i: `A[i] = A[i + 1] * 2.0f` overwrites A[i], read by the same statement "
                   "(as A[i + 1]) in the previous iteration of loop i (anti dependence on A carried by loop i)")
    # in place without a shift is fine
    nest.root = Block([For(i.var, 0, 8, Block([Store(A, (i.var,), A[i.var] * 2.0)]))])
    nest.parallelize(i)
    nest.vectorize(i)


def test_stencil_reading_earlier_neighbours_refused():
    A = Buffer("A", (10,), float32)
    B = Compute("B", (10,), lambda i: A[i])
    nest = LoopNest([B])
    i = nest.get_loops_for(B)[0]
    nest.root = Block([For(i.var, 1, 9, Block([Store(A, (i.var,), (A[i.var - 1] + A[i.var + 1]) * 0.5)]))])
    msg = unchanged(nest, lambda: nest.vectorize(i))
    assert "reads A[i - 1], written by the same statement (as A[i]) in the previous iteration of loop i" in msg


def test_vectorize_needs_constant_extent():
    N = Var("N")
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i])
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    msg = unchanged(nest, lambda: nest.vectorize(i))
    assert msg == ("cannot vectorize loop i: its extent N is not a constant; split it by a constant factor "
                   "and vectorize the inner loop")
    unchanged(nest, lambda: nest.vectorize(i, check=False))


def test_escape_hatches_are_recorded(backend):
    nest, A, B, i = prefix_sum(6)
    nest.vectorize(i, check=False)
    assert nest.history[-1] == {"op": "vectorize", "args": [{"loop": "i"}], "kwargs": {"check": False}}
    nest2, _, _, i2 = prefix_sum(6)
    nest2.parallelize(i2, check=False)
    assert nest2.history[-1]["kwargs"] == {"check": False}
    # the hatch is real: the loop is lowered to one vector statement, which reads every
    # B[i - 1] before writing any B[i] (what the caller asserted would not matter)
    assert "B[ramp(1, 1, 5)] = B[ramp(0, 1, 5)] + A[ramp(1, 1, 5)];" in str(nest.copy().prepare_for_codegen())
    a = np.arange(6, dtype=np.float32)
    b = np.full(6, 10.0, np.float32)
    run(nest, [A, B], [a, b], backend)
    np.testing.assert_array_equal(b, [10, 11, 12, 13, 14, 15])


def test_unroll_refusals():
    N = Var("N")
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i])
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    assert "its extent N is not a constant" in unchanged(nest, lambda: nest.unroll(i))
    assert "the factor must be >= 1" in unchanged(nest, lambda: nest.unroll(i, 0))
    assert "must be an int" in unchanged(nest, lambda: nest.unroll(i, 2.5))
    A2 = Buffer("A2", (4,), float32)
    B2 = Compute("B2", (4,), lambda i: A2[i])
    nest = LoopNest([B2])
    i, = nest.get_loops_for(B2)
    assert "not below the extent 4" in unchanged(nest, lambda: nest.unroll(i, 4))


def test_gpu_binding_refusals():
    A, C = reduction()
    nest = LoopNest([C])
    i, k = nest.get_loops_for(C)
    assert "dim must be 0, 1 or 2" in unchanged(nest, lambda: nest.set_gpu_block_index(i, 3))
    assert "dim must be 0, 1 or 2" in unchanged(nest, lambda: nest.set_gpu_block_index(i, True))
    msg = unchanged(nest, lambda: nest.set_gpu_thread_index(k, 0))
    assert msg.startswith("cannot bind loop k to gpu_thread.x: `C[i] = C[i] + A[i, k]` reads C[i]")
    B = Buffer("B", (4, 4), float32)
    D = Compute("D", (4, 4), lambda x, y: B[x, y])
    nest = LoopNest([D])
    x, y = nest.get_loops_for(D)
    nest.set_gpu_block_index(x, 0)
    assert "loop x around it is already bound to gpu_block.x" in unchanged(nest, lambda: nest.set_gpu_block_index(y, 0))
    nest.set_gpu_thread_index(y, 0)
    assert "it is bound to gpu_thread.x" in unchanged(nest, lambda: nest.parallelize(y))
    nest = LoopNest([D])
    x, y = nest.get_loops_for(D)
    nest.set_gpu_thread_index(x, 0)
    assert "block loops must enclose thread loops" in unchanged(nest, lambda: nest.set_gpu_block_index(y, 1))
    # ../shared/repros/cuda_block_not_outermost.py: the outer half of a split inner loop bound
    # to a block index, then its inner half to a thread index, under the serial loop i: i is
    # a host loop (one launch per iteration); under a parallel loop, or a serial loop under
    # a block loop, it is refused
    G = Compute("G", (4, 64), lambda i, j: B[i % 4, j % 4] * 2.0)
    nest = LoopNest([G])
    jo, ji = nest.split_with_mask(nest.get_loops_for(G)[1], 16)
    nest.set_gpu_block_index(jo, 0)
    nest.set_gpu_thread_index(ji, 0)
    assert build(nest, [B, G], target="cuda").launch_dims() == [("k0_G", (4, 1, 1), (16, 1, 1))] * 4
    nest = LoopNest([G])
    i, j = nest.get_loops_for(G)
    nest.parallelize(i)
    jo, ji = nest.split_with_mask(j, 16)
    nest.set_gpu_block_index(jo, 0)
    msg = unchanged(nest, lambda: nest.set_gpu_thread_index(ji, 0))
    assert "the gpu_block loops below loop i would run once per iteration of it on the host, but it is a " \
           "parallel loop" in msg
    # threads bound first, then a block index on a loop under a plain one under a block loop
    # (seed 56, case 185: accepted, then the CUDA build refused it)
    E = Compute("E", (4, 4, 4, 4), lambda w, x, y, z: B[x, y] + 1.0)
    nest = LoopNest([E])
    w, x, y, z = nest.get_loops_for(E)
    nest.set_gpu_block_index(w, 2)
    nest.set_gpu_thread_index(z, 0)
    msg = unchanged(nest, lambda: nest.set_gpu_block_index(y, 0))
    assert "the gpu_block loop y is inside loop x, which is not a gpu_block loop" in msg
    nest.set_gpu_block_index(x, 1)
    nest.set_gpu_block_index(y, 0)                 # under a block loop: fine
    assert build(nest, [B, E], target="cuda").launch_dims() == [("k0_E", (4, 4, 4), (4, 1, 1))]
    # splitting a bound loop would leave serial loops around the block or thread loops inside
    # (the random tester's matmul programs: split_with_mask of a block loop, accepted, then
    # refused by the CUDA build)
    for split in (nest.split_with_mask, nest.split_with_tail):
        for loop in (x, z):
            assert "is bound to a GPU index; split it before binding" in unchanged(nest, lambda: split(loop, 3))
    assert "is bound to a GPU index" in unchanged(nest, lambda: nest.tile(x, y, 2, 2))
    # flattening bound loops would make a serial loop of them (seed 69, case 112: a warp MMA
    # tree's warp loops flattened, its accumulators no longer per thread)
    assert "flatten the loops before binding" in unchanged(nest, lambda: nest.flatten([x, y]))
    # an axis's own limit: 64 threads on z, 65535 blocks on y (seed 70, case 353: 256 threads on
    # z, accepted, then refused by the CUDA build)
    W = Compute("W", (256, 70000), lambda a, b: B[a % 4, b % 4])
    nest = LoopNest([W])
    a, b = nest.get_loops_for(W)
    assert "its 256 iterations exceed the 64 that CUDA allows" in unchanged(nest, lambda: nest.set_gpu_thread_index(a, 2))
    assert "its 70000 iterations exceed the 65535" in unchanged(nest, lambda: nest.set_gpu_block_index(b, 1))
    nest.set_gpu_block_index(a, 1)
    # a copy between block loops (seed 64, case 360: cache_accesses at the outer block loop of a
    # gpu_matmul tree, accepted, then refused by the CUDA build)
    from codegen.cuda.mma_matmul import mma_matmul_example
    mm = mma_matmul_example(32, 32, 32, BM=16, BN=16, BK=16, WM=16, WN=16).nest
    msg = unchanged(mm, lambda: mm.cache_accesses(mm.buffer("As"), "cache1", mm.loop("by")))
    assert "the copies would go beside the gpu_block loop bx inside it" in msg
    # more threads than a block may have (seed 65, case 78: refused only by the CUDA build)
    F = Compute("F", (64, 32), lambda a, b: B[a % 4, b % 4] * 2.0)
    nest = LoopNest([F])
    a, b = nest.get_loops_for(F)
    nest.set_gpu_thread_index(b, 0)
    msg = unchanged(nest, lambda: nest.set_gpu_thread_index(a, 1))
    assert "the block would have 32 (x) x 64 (y) = 2048 threads, more than the 1024" in msg


def test_parallelize_after_compute_at_privatizes_the_intermediate(backend):
    """B is recomputed inside each iteration of i (compute_at): its storage is reused across
    iterations, but every read sees the same iteration's writes, so i may run in parallel
    (insert_allocations puts B's allocation, sized for one iteration, inside the loop)."""
    A = Buffer("A", (16, 8), float32)
    B = Compute("B", (16, 8), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (14, 8), lambda i, j: B[i, j] + B[i + 1, j] + B[i + 2, j])
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    nest.compute_at(B, i)
    nest.parallelize(i)
    assert "parallel for (int i_1 = 0; i_1 < 14; i_1++) {\n  float32 B[3, 8]; // alloc" in str(
        nest.copy().prepare_for_codegen())
    a = rand(16, 8)
    (c,) = run(nest, [A, C], [a, np.zeros((14, 8), np.float32)], backend)[1:]
    b = a * 2
    np.testing.assert_allclose(c, b[:-2] + b[1:-1] + b[2:], rtol=1e-6)


def test_gpu_binding_escape_hatch_is_recorded():
    A, C = reduction()
    nest = LoopNest([C])
    i, k = nest.get_loops_for(C)
    nest.set_gpu_thread_index(k, 0, check=False)
    assert k.kind == ForKind.GPU_THREAD
    assert nest.history == [{"op": "set_gpu_thread_index", "args": [{"loop": "k"}, 0], "kwargs": {"check": False}}]
    roundtrip(nest, [C])


def test_an_unroll_that_would_copy_too_large_a_body_is_refused_and_changes_nothing():
    """1,024 copies of a 172-node body made a 237,000-line LLVM module that LLVM optimised for
    over ten minutes (random tester seed 53, case 253): full unrolls and unroll factors are
    capped by the nodes their copies hold (``MAX_UNROLL_NODES``)."""
    import functools
    import operator

    import pytest

    from loopnest import ScheduleError
    from loopnest.transforms.loop_kinds import MAX_UNROLL_NODES
    from te import Buffer, Compute
    A = Buffer("A", (1024, 40), "float32")
    Y = Compute("Y", (1024,), lambda i: functools.reduce(operator.add, [A[i, k] * float(k) for k in range(40)]))
    nest = LoopNest([Y])
    (i,) = nest.get_loops_for(Y)
    before, history = str(nest), list(nest.history)
    with pytest.raises(ScheduleError, match=rf"1024 copies of its body of \d+ nodes .*at most {MAX_UNROLL_NODES}"):
        nest.unroll(i)
    with pytest.raises(ScheduleError, match=r"unroll\(i, 512\): 512 copies of the body"):
        nest.unroll(i, 512)
    assert str(nest) == before and nest.history == history
    nest.unroll(i, 4)                                   # a small factor is fine
