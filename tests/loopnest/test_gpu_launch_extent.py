"""GPU binding refuses a loop whose extent depends on a loop of the nest (the fixed-seed
fuzz campaign, seed 1 case 23): grid and block sizes are fixed at launch, so the CUDA build
would refuse the schedule; the binding names the loop instead."""
from __future__ import annotations

from codegen import build
from loopnest import LoopNest
from nests import unchanged
from te import Compute, Reduce, Sum, cast, const, floormod, minimum
from te.queries import fold_int


def test_thread_binding_of_a_cache_loop_whose_extent_depends_on_an_outer_loop():
    """T1's rows min(i0, 5) and i0, cached for each element of T3: i0 - min(i0, 5) + 1 rows,
    as many as i0 says. (The campaign's case read T1[i1, min(i0, 1)], one element for each
    i0: its cache's extent depended on i0 only in how the analysis wrote it, and is now 1.)"""
    T1 = Compute("T1", (8, 2), lambda i0, i1: 1.0)
    T3 = Compute("T3", (8, 2), lambda i0, i1: T1[minimum(i0, const(5, "int32")), i1] + T1[i0, i1])
    nest = LoopNest([T3])
    nest.cache_accesses(nest.buffer("T1"), "cache1", nest.get_loops_for(T3)[1])
    msg = unchanged(nest, lambda: nest.set_gpu_thread_index(nest.loop("cache1_i0"), 2))
    assert msg.startswith("cannot bind loop cache1_i0 to gpu_thread.z: its extent ")
    assert "depends on loop i0_1, and grid and block sizes must be known at launch" in msg
    build(nest, [T3], target="cuda")


def test_one_element_of_a_min_of_an_outer_loop_caches_in_a_loop_of_constant_extent():
    """The campaign's case: T1[i1, min(i0, 1)] is one element for each (i0, i1); its cache's
    loops have constant extents and bind."""
    T1 = Compute("T1", (8, 2), lambda i0, i1: 1.0)
    T2 = Reduce("T2", (8, 2), Sum(), lambda i0, i1, r0: 1.0, (8,))
    T3 = Compute("T3", (8, 2), lambda i0, i1: floormod(cast(T1[i1, minimum(i0, const(1, "int32"))], "int32"),
                                                          cast(T2[minimum(i0, const(7, "int32")), floormod(i0, 2)],
                                                               "int32")))
    nest = LoopNest([T3])
    nest.cache_accesses(nest.buffer("T1"), "cache1", nest.loop("i1_2"))
    assert [fold_int(d) for d in nest.buffer("cache1").dims] == [1, 1]
    build(nest, [T3], target="cuda")


def test_a_loop_of_constant_extent_inside_another_still_binds():
    A = Compute("A", (4, 8), lambda i, j: i + j)
    nest = LoopNest([A])
    i, j = nest.get_loops_for(A)
    nest.set_gpu_block_index(i, 0)
    nest.set_gpu_thread_index(j, 0)
    assert "threadIdx.x" in build(nest, [A], target="cuda").source
