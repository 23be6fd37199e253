"""One minimal program per user error of the loop transforms (reorder, fuse, flatten,
distribute, vectorize, unroll, parallelize, GPU binding), asserting the whole message.

Each refused transform must also leave the nest exactly as it was.
"""
from __future__ import annotations

import pytest

from loopnest import LoopNest, ScheduleError
from loopnest.stmt import Block, For, Store
from te import Buffer, Compute, Reduce, Sum, Var, float32


def refused(nest, f, message):
    text, hist = str(nest), list(nest.history)
    with pytest.raises(ScheduleError) as info:
        f()
    assert str(info.value) == message
    assert str(nest) == text and nest.history == hist


def reduction():
    A = Buffer("A", (8, 16), float32)
    C = Reduce("C", (8,), Sum(), lambda i, k: A[i, k], (16,))
    nest = LoopNest([C])
    return nest, *nest.get_loops_for(C)


def symbolic():
    N = Var("N")
    X = Buffer("X", (N,), float32)
    Y = Compute("Y", (N,), lambda i: X[i] * 2.0)
    nest = LoopNest([Y])
    return nest, nest.get_loops_for(Y)[0]


def square():
    M = Buffer("M", (4, 4), float32)
    D = Compute("D", (4, 4), lambda a, b: M[a, b])
    nest = LoopNest([D])
    return nest, D, *nest.get_loops_for(D)


def prefix_sum():
    S = Buffer("S", (8,), float32)
    P = Compute("P", (8,), lambda i: S[i])
    nest = LoopNest([P])
    p = nest.get_loops_for(P)[0]
    nest.root = Block([For(p.var, 1, 8, Block([Store(P, (p.var,), P[p.var - 1] + S[p.var])]))])
    return nest, p


KERNEL_K = ("`C[i] = C[i] + A[i, k]` reads C[i], written by the same statement in the previous iteration of "
            "loop k (flow dependence on C carried by loop k)")


# -- parallelize / vectorize / GPU binding: dependences ------------------------------------
def test_parallelize_reduction_loop():
    nest, i, k = reduction()
    refused(nest, lambda: nest.parallelize(k),
            f"cannot parallelize loop k: {KERNEL_K}; parallelize would be legal on loop i")


def test_vectorize_reduction_loop():
    nest, i, k = reduction()
    refused(nest, lambda: nest.vectorize(k), f"cannot vectorize loop k: {KERNEL_K}; vectorize would be legal on loop i")


def test_gpu_thread_on_reduction_loop():
    nest, i, k = reduction()
    refused(nest, lambda: nest.set_gpu_thread_index(k, 0),
            f"cannot bind loop k to gpu_thread.x: {KERNEL_K}; GPU binding would be legal on loop i")


def test_parallelize_prefix_sum():
    nest, p = prefix_sum()
    refused(nest, lambda: nest.parallelize(p),
            "cannot parallelize loop i: `P[i] = P[i - 1] + S[i]` reads P[i - 1], written by the same statement "
            "(as P[i]) in the previous iteration of loop i (flow dependence on P carried by loop i)")


def test_vectorize_symbolic_extent():
    nest, y = symbolic()
    refused(nest, lambda: nest.vectorize(y),
            "cannot vectorize loop i: its extent N is not a constant; split it by a constant factor and "
            "vectorize the inner loop")


# -- unroll -------------------------------------------------------------------------------
def test_unroll_symbolic_extent_fully():
    nest, y = symbolic()
    refused(nest, lambda: nest.unroll(y),
            "cannot fully unroll loop i: its extent N is not a constant; unroll(i, factor) unrolls by a factor")


def test_unroll_factor_zero():
    nest, y = symbolic()
    refused(nest, lambda: nest.unroll(y, 0), "unroll(i, 0): the factor must be >= 1")


def test_unroll_factor_not_below_extent():
    nest, D, a, b = square()
    refused(nest, lambda: nest.unroll(b, 4), "unroll(b, 4): the factor is not below the extent 4; use unroll(b) "
                                             "to unroll fully")


def test_unroll_gpu_loop():
    nest, D, a, b = square()
    nest.set_gpu_block_index(a, 0)
    refused(nest, lambda: nest.unroll(a), "cannot unroll loop a: it is bound to gpu_block.x")


def test_unrolled_loop_handle_is_stale():
    nest, D, a, b = square()
    nest.unroll(b)
    refused(nest, lambda: nest.parallelize(b),
            "loop b was removed by unroll(b) (fully unrolled into copies of its body); it has no loop left to "
            "transform, and the other loops keep their handles")


# -- GPU binding ----------------------------------------------------------------------------
def test_gpu_dim_out_of_range():
    nest, y = symbolic()
    refused(nest, lambda: nest.set_gpu_block_index(y, 3), "set_gpu_block_index(i, 3): dim must be 0, 1 or 2 (x, y or z)")


def test_gpu_same_axis_twice_on_one_path():
    nest, D, a, b = square()
    nest.set_gpu_block_index(a, 0)
    refused(nest, lambda: nest.set_gpu_block_index(b, 0),
            "cannot bind loop b to gpu_block.x: loop a around it is already bound to gpu_block.x")


def test_gpu_block_inside_thread():
    nest, D, a, b = square()
    nest.set_gpu_thread_index(a, 0)
    refused(nest, lambda: nest.set_gpu_block_index(b, 0),
            "cannot bind loop b to gpu_block.x: it is inside the gpu_thread loop a; block loops must enclose "
            "thread loops")


def test_parallelize_gpu_loop():
    nest, D, a, b = square()
    nest.set_gpu_block_index(a, 0)
    refused(nest, lambda: nest.parallelize(a), "cannot parallelize loop a: it is bound to gpu_block.x")


# -- reorder --------------------------------------------------------------------------------
def test_reorder_bad_permutation():
    nest, D, a, b = square()
    refused(nest, lambda: nest.reorder([a, b], [1, 1]),
            "reorder: the permutation [1, 1] is not a permutation of 0..1 (one entry per loop of ['a', 'b'])")


def test_reorder_imperfect_nest():
    """The statement in the way reads what the accumulation wrote in the previous iteration:
    it cannot get a loop of its own, so the reorder is refused with that dependence."""
    nest, i, k = reduction()
    C = nest.outputs[0]
    A = nest.inputs[0]
    nest.root = Block([For(i.var, 1, 8, Block([Store(C, (i.var,), C[i.var - 1]), For(k.var, 0, 16, Block([
        Store(C, (i.var,), C[i.var] + A[i.var, k.var])]))]))])
    refused(nest, lambda: nest.reorder([i, k], [1, 0]),
            "reorder: the body of loop i holds `C[i] = C[i - 1];` besides loop k, and it cannot be moved into a "
            "loop of its own: cannot distribute loop i: `C[i] = C[i - 1]` reads C[i - 1], written by "
            "`C[i] = C[i] + A[i, k]` in the previous iteration of loop i (flow dependence on C carried by loop i); "
            "it goes from statement 1 of the body back to statement 0: distributed, every iteration of statement 0 "
            "would run before statement 1; keep them in one loop")


def test_reorder_reverses_a_dependence():
    nest, D, a, b = square()
    nest.root = Block([For(a.var, 1, 4, Block([For(b.var, 0, 3, Block([
        Store(D, (a.var, b.var), D[a.var - 1, b.var + 1])]))]))])
    refused(nest, lambda: nest.reorder([a, b], [1, 0]),
            "cannot reorder loops (a, b) to (b, a): `D[a, b] = D[a - 1, b + 1]` reads D[a - 1, b + 1], written by "
            "the same statement (as D[a, b]) in the previous iteration of loop a (flow dependence on D); its "
            "distance (1, -1) over (a, b) would become (-1, 1) over (b, a): the read D[a - 1, b + 1] would run "
            "before the write D[a, b] it needs; no other order of these loops is legal")


def test_reorder_triangular_nest():
    nest, D, a, b = square()
    nest.root = Block([For(a.var, 0, 4, Block([For(b.var, 0, a.var, Block([Store(D, (a.var, b.var), 1.0)]))]))])
    refused(nest, lambda: nest.reorder([a, b], [1, 0]),
            "reorder: the bounds of loop b use a, but loop a would be placed inside loop b (a non-rectangular nest "
            "keeps the loop bounding it outside)")


# -- fuse -----------------------------------------------------------------------------------
def test_fuse_one_loop():
    nest, D, a, b = square()
    refused(nest, lambda: nest.fuse([a]), "fuse needs at least two loops, got ['a']")


def test_fuse_nested_loops():
    nest, D, a, b = square()
    refused(nest, lambda: nest.fuse([a, b]),
            "cannot fuse loops a and b: loop b is not in the same block as loop a (fused loops must be siblings, "
            "one after the other)")


def test_fuse_mismatched_bounds():
    S = Buffer("S", (8,), float32)
    E1 = Compute("E1", (8,), lambda i: S[i] + 1.0)
    E2 = Compute("E2", (6,), lambda i: E1[i] * 2.0)
    nest = LoopNest([E2])
    refused(nest, lambda: nest.fuse([nest.get_loops_for(E1)[0], nest.get_loops_for(E2)[0]]),
            "cannot fuse loops i and i_1: their bounds differ: loop i runs [0, 8), loop i_1 runs [0, 6) (split or "
            "slice one to match first)")


def test_fuse_not_adjacent():
    S = Buffer("S", (8,), float32)
    F = [Compute(f"F{k}", (8,), lambda i, k=k: S[i] * float(k)) for k in range(3)]
    nest = LoopNest(F)
    refused(nest, lambda: nest.fuse([nest.get_loops_for(F[0])[0], nest.get_loops_for(F[2])[0]]),
            "cannot fuse loops i and i_2: they are not adjacent; `for (int i_1 = 0; i_1 < 8; i_1++) {` lies between "
            "them")


def test_fuse_different_kinds():
    S = Buffer("S", (8,), float32)
    F1 = Compute("F1", (8,), lambda i: S[i])
    F2 = Compute("F2", (8,), lambda i: S[i] * 2.0)
    nest = LoopNest([F1, F2])
    f1, f2 = nest.get_loops_for(F1)[0], nest.get_loops_for(F2)[0]
    nest.parallelize(f2)
    refused(nest, lambda: nest.fuse([f1, f2]),
            "cannot fuse loops i and i_1: loop i is serial and loop i_1 is parallel; fuse before changing loop kinds")


def test_fuse_backward_dependence():
    S = Buffer("S", (8,), float32)
    E1 = Compute("E1", (7,), lambda i: S[i] + 1.0)
    E3 = Compute("E3", (7,), lambda i: E1[(i + 1) % 7] * 2.0)
    nest = LoopNest([E3])
    refused(nest, lambda: nest.fuse([nest.get_loops_for(E1)[0], nest.get_loops_for(E3)[0]]),
            "cannot fuse loops i and i_1: `E3[i_1] = E1[(i_1 + 1) % 7] * 2.0f` reads E1[(i_1 + 1) % 7], written by "
            "`E1[i] = S[i] + 1.0f` earlier (flow dependence on E1); after fusion an iteration of loop i_1 would run "
            "before the later iteration of loop i it depends on (e.g. i_1 = 0 needs i = 1)")


# -- flatten, distribute --------------------------------------------------------------------
def test_flatten_with_a_gap():
    B3 = Compute("B3", (2, 3, 4), lambda x, y, z: 1.0)
    nest = LoopNest([B3])
    x, y, z = nest.get_loops_for(B3)
    refused(nest, lambda: nest.flatten([x, z]),
            "flatten: the loops must be consecutive; loop y between them must be listed too")


def test_flatten_not_normalized():
    B3 = Compute("B3", (2, 3, 4), lambda x, y, z: 1.0)
    nest = LoopNest([B3])
    x, y, z = nest.get_loops_for(B3)
    nest.slice_head(y, 1)
    refused(nest, lambda: nest.flatten([y, z]), "flatten: loop y starts at 1, not 0; normalize(y) first")


def test_distribute_single_statement():
    nest, D, a, b = square()
    refused(nest, lambda: nest.distribute(a), "cannot distribute loop a: its body has 1 statement, there is nothing "
                                              "to split")


def test_distribute_backward_dependence():
    S = Buffer("S", (8,), float32)
    T = Buffer("T", (8,), float32)
    P = Compute("P", (8,), lambda i: S[i])
    nest = LoopNest([P])
    p = nest.get_loops_for(P)[0]
    nest.root = Block([For(p.var, 1, 8, Block([Store(P, (p.var,), T[p.var - 1]), Store(T, (p.var,), S[p.var])]))])
    refused(nest, lambda: nest.distribute(p),
            "cannot distribute loop i: `P[i] = T[i - 1]` reads T[i - 1], written by `T[i] = S[i]` in the previous "
            "iteration of loop i (flow dependence on T carried by loop i); it goes from statement 1 of the body back "
            "to statement 0: distributed, every iteration of statement 0 would run before statement 1; keep them "
            "in one loop")
