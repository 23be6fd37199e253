"""Allocations of intermediates go inside a loop only when no value of the buffer flows
between its iterations; ``simplify`` is a recorded transform that replays."""
from __future__ import annotations

import json

import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest, ScheduleError
from loopnest.analysis.legality import privatizable
from loopnest.stmt import Block, For, Store
from te import Buffer, Compute, float32


def _fused(read):
    """T1 and T2 = 2 * T1[read(i)] with their outer loops fused (legal for read(i) <= i)."""
    A = Buffer("A", (4, 8), float32)
    T1 = Compute("T1", (4, 8), lambda i, j: A[i, j] + 1.0)
    T2 = Compute("T2", (4,), lambda i: T1[read(i), 0] * 2.0)
    nest = LoopNest([T2])
    i = nest.fuse([nest.get_loops_for(T1)[0], nest.get_loops_for(T2)[0]])
    return nest, i, A, T2


def _run(nest, A, out, backend):
    a = np.arange(np.prod([d.value for d in A.dims]), dtype=np.float32).reshape([d.value for d in A.dims])
    got = np.full([d.value for d in out.dims], np.nan, np.float32)
    build(nest, [A, out], target=backend)(a, got)
    return a, got


def test_fuse_reading_an_earlier_iteration_allocates_outside_the_loop(backend):
    """Iteration i reads row i / 2 of T1, written by an earlier iteration: one T1 for the loop."""
    nest, i, A, T2 = _fused(lambda i: i / 2)
    assert not privatizable(nest, nest.buffer("T1"), i)
    text = str(nest.copy().prepare_for_codegen())
    assert text.startswith("float32 T1[4, 8]; // alloc\nfor (int i = 0; i < 4; i++) {"), text
    a, got = _run(nest, A, T2, backend)
    np.testing.assert_array_equal(got, (a[np.arange(4) // 2, 0] + 1.0) * 2.0)
    with pytest.raises(ScheduleError, match="T1"):
        nest.parallelize(i)


def test_fuse_reading_the_same_iteration_allocates_inside_the_loop(backend):
    nest, i, A, T2 = _fused(lambda i: i)
    assert privatizable(nest, nest.buffer("T1"), i)
    assert "for (int i = 0; i < 4; i++) {\n  float32 T1[4, 8]; // alloc" in str(nest.copy().prepare_for_codegen())
    nest.parallelize(i)
    a, got = _run(nest, A, T2, backend)
    np.testing.assert_array_equal(got, (a[:, 0] + 1.0) * 2.0)


def test_the_allocation_stops_at_the_loop_that_carries_values(backend):
    """Fused twice: T2[i, j] reads T1[i, j / 2], written in an earlier iteration of j but in the
    same iteration of i: T1 is allocated inside i, around j."""
    A = Buffer("A", (4, 8), float32)
    T1 = Compute("T1", (4, 8), lambda i, j: A[i, j] + 1.0)
    T2 = Compute("T2", (4, 8), lambda i, j: T1[i, j / 2] * 2.0)
    nest = LoopNest([T2])
    i = nest.fuse([nest.get_loops_for(T1)[0], nest.get_loops_for(T2)[0]])
    j = nest.fuse([nest.get_loops_for(T1)[1], nest.get_loops_for(T2)[1]])
    t1 = nest.buffer("T1")
    assert privatizable(nest, t1, i) and not privatizable(nest, t1, j)
    assert ("for (int i = 0; i < 4; i++) {\n  float32 T1[4, 8]; // alloc\n  for (int j = 0; j < 8; j++) {"
            in str(nest.copy().prepare_for_codegen()))
    a, got = _run(nest, A, T2, backend)
    np.testing.assert_array_equal(got, (a[:, np.arange(8) // 2] + 1.0) * 2.0)


def test_compute_at_still_allocates_inside_the_loop():
    A = Buffer("A", (16, 8), float32)
    B = Compute("B", (16, 8), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (14, 8), lambda i, j: B[i, j] + B[i + 1, j] + B[i + 2, j])
    nest = LoopNest([C])
    i, _ = nest.get_loops_for(C)
    nest.compute_at(B, i)
    # stored at i (the default after compute_at): sized for one iteration, allocated once
    assert str(nest.copy().prepare_for_codegen()).startswith("float32 B[3, 8]; // alloc\nfor (int i_1 = 0;")
    nest.store_at(B, None)   # the whole buffer: still private to an iteration of i
    assert "for (int i_1 = 0; i_1 < 14; i_1++) {\n  float32 B[16, 8]; // alloc" in str(nest.prepare_for_codegen())


def test_values_carried_by_an_outer_loop_keep_the_buffer_out_of_the_inner_one():
    """T[i] is read in iteration o before it is rewritten: the value comes from iteration
    o - 1 (same i). T is not private to an iteration of i, nor of o."""
    A = Buffer("A", (2, 4), float32)
    T = Compute("T", (4,), lambda z: 0.0)
    B = Compute("B", (2, 4), lambda o, i: A[o, i] + T[i])
    nest = LoopNest([B])
    o, i = nest.get_loops_for(B)
    nest.root = Block([For(o.var, 0, 2, Block([For(i.var, 0, 4, Block([
        Store(B, (o.var, i.var), T[i.var] + 1.0), Store(T, (i.var,), A[o.var, i.var])]))]))])
    assert not privatizable(nest, T, i) and not privatizable(nest, T, o)
    assert str(nest.prepare_for_codegen()).startswith("float32 T[4]; // alloc\nfor (int o = 0;")


def test_simplify_is_recorded_and_replays():
    A = Buffer("A", (1, 8), float32)
    B = Compute("B", (1, 8), lambda i, j: A[i, j] * 2.0)
    nest = LoopNest([B])
    _, j = nest.get_loops_for(B)
    nest.split_with_tail(j, 4)
    before = str(nest)
    nest.simplify()
    assert str(nest) != before
    assert nest.history[-1] == {"op": "simplify", "args": [], "kwargs": {}}
    replayed = LoopNest([B]).replay(json.loads(json.dumps(nest.history)))
    assert str(replayed) == str(nest)
    nest.prepare_for_codegen()
    with pytest.raises(ScheduleError, match="simplify: the nest was prepared for codegen"):
        nest.simplify()


def _cached_matmul():
    """A 12 x 8 matmul whose 2-row tiles accumulate in a cache copy ``C_local`` made at the
    tile loop ``io`` (``i_inner_outer``), inside the loop ``o`` of 6-row blocks around it."""
    from te import Reduce, Sum
    A, B = Buffer("A", (12, 8), float32), Buffer("B", (8, 8), float32)
    C = Reduce("C", (12, 8), Sum(), lambda i, j, k: A[i, k] * B[k, j], (8,))
    nest = LoopNest([C])
    i, j, k = nest.get_loops_for(C)
    o, io, _ = nest.split_with_tail(i, 6)
    io, _, _ = nest.split_with_tail(io, 2)
    nest.reorder([io, nest.loop("i_inner_inner"), j, k], [0, 3, 1, 2])
    nest.cache_accesses(C, "C_local", io)
    return nest, o, io, A, B, C


def test_a_cache_copy_is_allocated_in_its_loop_without_the_dependence_analysis(monkeypatch):
    """A ``cache_accesses`` copy is filled before it is read in each iteration of the loop it
    was made at, and so in each of a loop that was around that one: its allocation goes
    inside without building the dependence analysis of the nest (``_filled_in_each_iteration``)."""
    from loopnest.analysis import legality
    from loopnest.transforms import privacy
    nest, o, io, A, B, C = _cached_matmul()
    assert privacy._filled_in_each_iteration(nest, nest.buffer("C_local"), o.stmt)
    assert privacy._filled_in_each_iteration(nest, nest.buffer("C_local"), io.stmt)

    def no_analysis(*args):
        raise AssertionError("the dependence analysis was asked")
    monkeypatch.setattr(legality, "privatizable", no_analysis)
    text = str(nest.copy().prepare_for_codegen())
    assert "for (int i_inner_outer = 0; i_inner_outer < 3; i_inner_outer++) {\n    float32 C_local" in text, text
    a, b = np.arange(96, dtype=np.float32).reshape(12, 8) % 5, np.arange(64, dtype=np.float32).reshape(8, 8) % 3
    got = np.zeros((12, 8), np.float32)
    build(nest, [A, B, C], target="ireval")(a, b, got)
    np.testing.assert_array_equal(got, a @ b)


def test_a_cache_copy_under_loops_made_after_it_is_left_to_the_dependence_analysis():
    """A loop made around the cache loop after the copy (a split of the loop around it) may
    hold the cache loop's iterations in another way: the test declines, and the analysis
    decides (here too: inside)."""
    from loopnest.transforms import privacy
    nest, o, io, A, B, C = _cached_matmul()
    oo, _, _ = nest.split_with_tail(o, 2)
    assert not privacy._filled_in_each_iteration(nest, nest.buffer("C_local"), oo.stmt)
    assert privatizable(nest, nest.buffer("C_local"), oo)
    a, b = np.arange(96, dtype=np.float32).reshape(12, 8) % 5, np.arange(64, dtype=np.float32).reshape(8, 8) % 3
    got = np.zeros((12, 8), np.float32)
    build(nest, [A, B, C], target="ireval")(a, b, got)
    np.testing.assert_array_equal(got, a @ b)
