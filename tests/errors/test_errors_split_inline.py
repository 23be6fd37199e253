"""One minimal program per user error of split / tile / slice / inline / compute_at /
cache_accesses / rfactor, asserting the message the user sees (and that the nest is left
exactly as it was)."""
from __future__ import annotations

import pytest

from loopnest import LoopNest, ScheduleError
from loopnest.stmt import Block, For, Store
from te import Buffer, Compute, Reduce, Sum, Var, float32


def refused(nest, f) -> str:
    text, hist = str(nest), list(nest.history)
    with pytest.raises(ScheduleError) as info:
        f()
    assert str(nest) == text and nest.history == hist
    return str(info.value)


def vec16():
    A = Buffer("A", (16,), float32)
    B = Compute("B", (16,), lambda i: A[i] * 2.0)
    nest = LoopNest([B])
    return A, B, nest, nest.get_loops_for(B)[0]


def grid():
    A = Buffer("A", (4, 4), float32)
    C = Compute("C", (4, 4), lambda i, j: A[i, j])
    nest = LoopNest([C])
    return A, C, nest, nest.get_loops_for(C)


def stencil():
    A = Buffer("A", (4, 10), float32)
    B = Compute("B", (4, 10), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (4, 8), lambda i, j: B[i, j] + B[i, j + 2])
    return A, B, C, LoopNest([C])


def reduction():
    A = Buffer("A", (4, 4), float32)
    R = Reduce("R", (4,), Sum(), lambda i, k: A[i, k], (4,))
    D = Compute("D", (4,), lambda i: R[i] + 1.0)
    return A, R, D, LoopNest([D])


# ------------------------------------------------------------------------------------
# split / tile / slice
# ------------------------------------------------------------------------------------
def test_split_factor_zero():
    A, B, nest, i = vec16()
    assert refused(nest, lambda: nest.split_with_tail(i, 0)) == "split_with_tail(i, 0): the factor must be >= 1"


def test_split_factor_not_an_int():
    A, B, nest, i = vec16()
    assert refused(nest, lambda: nest.split_with_mask(i, 2.5)) == \
        "split_with_mask(i, 2.5): the factor must be a positive int, got float"


def test_stale_handle_after_split():
    A, B, nest, i = vec16()
    nest.split_with_tail(i, 4)
    assert refused(nest, lambda: nest.split_with_tail(i, 2)) == (
        "loop i no longer exists in this nest (it was removed by a transform, e.g. split, fuse, unroll or "
        "inline); get fresh handles with nest.get_loops_for(...)")


def test_tile_loops_not_perfectly_nested():
    A, C, nest, (i, j) = grid()
    assert refused(nest, lambda: nest.tile(j, i, 2, 2)) == \
        "tile(j, i): i must be the only statement in the body of j (a perfect nest, j outside i)"


def test_tile_same_loop_twice():
    A, C, nest, (i, j) = grid()
    assert refused(nest, lambda: nest.tile(i, i, 2, 2)) == "tile(i, i): the two loops must be different"


def test_tile_triangular_nest():
    A, C, nest, _ = grid()
    x, y = Var("x"), Var("y")
    nest.root = Block([For(x, 0, 4, Block([For(y, 0, x + 1, Block([Store(C, (x, y), A[x, y])]))]))])
    assert refused(nest, lambda: nest.tile(nest.loop("x"), nest.loop("y"), 2, 2)) == \
        "tile(x, y): the bounds of y depend on x (a non-rectangular nest cannot be tiled)"


def test_tile_reversing_a_dependence():
    A = Buffer("A", (4, 6, 6), float32)
    R = Reduce("R", (4,), Sum(), lambda i, k, l: A[i, k, l], (6, 6))
    nest = LoopNest([R])
    i, k, l = nest.get_loops_for(R)
    assert refused(nest, lambda: nest.tile(k, l, 2, 3)) == (
        "cannot tile loops k and l: `R[i] = R[i] + A[i, k, l]` reads R[i], written by the same statement in the "
        "previous iteration of loop k (flow dependence on R); in a tile, an iteration of l would run before an "
        "iteration of an earlier k that it depends on")


def test_slice_of_gpu_bound_loop():
    A, C, nest, (i, j) = grid()
    nest.set_gpu_block_index(i, 0)
    assert refused(nest, lambda: nest.slice_head(i, 2)) == \
        "slice_head(i, 2): i is bound to a GPU index; slice it before binding"


# ------------------------------------------------------------------------------------
# compute_inline
# ------------------------------------------------------------------------------------
def test_inline_reduction():
    A, R, D, nest = reduction()
    assert refused(nest, lambda: nest.compute_inline(R)) == (
        "cannot inline R: it is a reduction (its value is accumulated over loops, it is not one expression); "
        "use compute_at to compute it next to its consumer")


def test_inline_output():
    A, R, D, nest = reduction()
    assert refused(nest, lambda: nest.compute_inline(D)) == (
        "cannot inline D: it is an output of the nest, so all of its elements must be stored where the caller "
        "can read them")


def test_inline_input_buffer():
    A, R, D, nest = reduction()
    assert refused(nest, lambda: nest.compute_inline(A)) == \
        "cannot inline A: it is not a tensor defined by Compute or Reduce (it is an input buffer)"


def test_inline_after_split_with_tail():
    A, B, _, _ = vec16()
    E = Compute("E", (16,), lambda i: B[i] + 1.0)
    nest = LoopNest([E])
    nest.split_with_tail(nest.get_loops_for(B)[0], 3)
    assert refused(nest, lambda: nest.compute_inline(B)) == (
        "cannot inline B: it is computed by 2 stores (its loops were split with a tail or sliced); inline needs "
        "the single store of its definition: inline before splitting its loops, or split with split_with_mask")


def test_inline_twice():
    A, B, _, _ = vec16()
    E = Compute("E", (16,), lambda i: B[i] + 1.0)
    nest = LoopNest([E])
    nest.compute_inline(B)
    assert refused(nest, lambda: nest.compute_inline(B)) == \
        "cannot inline B: it is not computed in this nest any more (it was inlined, or nothing reads it)"


def test_inline_cache_buffer():
    A, B, _, _ = vec16()
    E = Compute("E", (16,), lambda i: B[i] + 1.0)
    nest = LoopNest([E])
    local = nest.cache_accesses(A, "A_c", nest.get_loops_for(B)[0])
    assert refused(nest, lambda: nest.compute_inline(local)) == (
        "cannot inline A_c: it is not a tensor defined by Compute or Reduce (it was made by a transform such as "
        "cache_accesses or rfactor)")


# ------------------------------------------------------------------------------------
# compute_at
# ------------------------------------------------------------------------------------
def test_compute_at_loop_that_does_not_read_it():
    A, B, C, nest = stencil()
    bi, bj = nest.get_loops_for(B)
    assert refused(nest, lambda: nest.compute_at(B, bj)) == \
        "cannot compute B at loop j: nothing inside loop j reads B; compute_at(B, ...) would be legal at loops i_1, j_1"


def test_compute_at_vectorized_loop():
    A, B, C, nest = stencil()
    i, j = nest.get_loops_for(C)
    nest.vectorize(j)
    assert refused(nest, lambda: nest.compute_at(B, j)) == (
        "cannot compute B at loop j_1: loop j_1 is vectorized (its body must stay one vector statement); "
        "compute_at(B, ...) would be legal at loop i_1")


def test_compute_at_output():
    A, B, C, nest = stencil()
    i, j = nest.get_loops_for(C)
    assert refused(nest, lambda: nest.compute_at(C, i)) == (
        "cannot compute C at loop i_1: it is an output of the nest, so all of its elements must be stored where "
        "the caller can read them")


def test_compute_at_input():
    A, B, C, nest = stencil()
    i, j = nest.get_loops_for(C)
    assert refused(nest, lambda: nest.compute_at(A, i)) == \
        "cannot compute A at loop i_1: it is not a tensor defined by Compute or Reduce (it is an input buffer)"


# ------------------------------------------------------------------------------------
# cache_accesses
# ------------------------------------------------------------------------------------
def test_cache_invalid_name():
    A, B, C, nest = stencil()
    i, j = nest.get_loops_for(C)
    assert refused(nest, lambda: nest.cache_accesses(B, "a b", i)) == (
        "cache_accesses(B, 'a b', i_1): invalid cache buffer name 'a b': expected an identifier of letters, "
        "digits, '_' and '.', starting with a letter or '_' (at most 128 characters)")


def test_cache_name_in_use():
    A, B, C, nest = stencil()
    i, j = nest.get_loops_for(C)
    assert refused(nest, lambda: nest.cache_accesses(B, "A", i)) == \
        "cache_accesses(B, 'A', i_1): the name 'A' is already used by a buffer or loop of this nest; choose another"


def test_cache_loop_not_accessing_the_buffer():
    A, B, C, nest = stencil()
    i, j = nest.get_loops_for(C)
    assert refused(nest, lambda: nest.cache_accesses(A, "A_c", i)) == \
        "cannot cache A in loop i_1: its body does not access A"


def test_cache_in_vectorized_loop():
    A, B, C, nest = stencil()
    i, j = nest.get_loops_for(C)
    nest.vectorize(j)
    assert refused(nest, lambda: nest.cache_accesses(B, "B_c", j)) == (
        "cannot cache B in loop j_1: the loop is vectorized (its body must stay one vector statement); cache in "
        "an enclosing loop")


def test_cache_partial_writes_in_parallel_loop():
    A, C, nest, _ = grid()
    i, j = Var("i"), Var("j")
    nest.root = Block([For(i, 0, 4, Block([For(j, 0, 2, Block([Store(C, (i, j * 2), A[i, j])]))]))])
    nest.parallelize(nest.loop("i"))
    assert refused(nest, lambda: nest.cache_accesses(C, "C_c", nest.loop("i"))) == (
        "cannot cache C in parallel loop i: its writes may not cover the cached region, so copying it back could "
        "overwrite elements that other iterations write; cache in a serial loop")


# ------------------------------------------------------------------------------------
# rfactor
# ------------------------------------------------------------------------------------
def test_rfactor_not_a_reduction():
    A, R, D, nest = reduction()
    i, = nest.get_loops_for(D)
    assert refused(nest, lambda: nest.rfactor(D, i)) == \
        "cannot rfactor D at loop i_1: D is not a reduction (rfactor splits the reduction loops of a Reduce tensor)"


def test_rfactor_not_a_reduction_loop():
    A, R, D, nest = reduction()
    i, k = nest.get_loops_for(R)
    assert refused(nest, lambda: nest.rfactor(R, i)) == (
        "cannot rfactor R at loop i: loop i is not a reduction loop of R (it indexes R, or encloses its "
        "initialisation); rfactor needs a reduction loop")


def test_rfactor_loop_of_another_tensor():
    A, R, D, nest = reduction()
    i, = nest.get_loops_for(D)
    assert refused(nest, lambda: nest.rfactor(R, i)) == \
        "cannot rfactor R at loop i_1: loop i_1 does not enclose the accumulation of R"


def test_rfactor_after_split_with_tail():
    A, R, D, nest = reduction()
    i, k = nest.get_loops_for(R)
    nest.split_with_tail(k, 3)
    assert refused(nest, lambda: nest.rfactor(R, nest.loop("k_outer"))) == (
        "cannot rfactor R at loop k_outer: R is computed by 1 initialising and 2 accumulating stores; rfactor "
        "needs one of each (split reduction loops with split_with_mask, and apply rfactor before compute_at or "
        "slicing)")
