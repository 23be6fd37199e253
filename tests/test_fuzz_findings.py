"""Regression tests of defects the random tester (``python -m fuzz``) found: each test is
the minimised program and schedule of one finding, checked as the tester checks it (the
scheduled program gives the unscheduled program's values on IREval and LLVM)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest, ScheduleError
from loopnest.analysis import bounds
from loopnest.stmt import Block, Cond, For, Store
from te.expr import substitute
from te.queries import fold_int
from te import Buffer, Compute, Max, Min, Reduce, Sum, Var, cast, const, floordiv, floormod, if_then_else, maximum, \
    minimum, select


def _run(nest, args, data, shapes, sizes, target):
    outs = [np.zeros(shape, dtype) for shape, dtype in shapes]
    build(nest, args, target=target)(*data, *outs, *sizes)
    return outs


def _same_as_unscheduled(schedule, outputs, inputs, data, sizes=()):
    """Apply ``schedule`` to a fresh nest of ``outputs``; its values on IREval and LLVM equal
    the unscheduled nest's on IREval. ``sizes``: (size Var, value) pairs. Returns the nest."""
    args = inputs + outputs + [v for v, _ in sizes]
    values = [n for _, n in sizes]
    shapes = [(tuple(fold_int(substitute(d, dict(sizes))) for d in t.dims), np.dtype(str(t.dtype))) for t in outputs]
    want = _run(LoopNest(outputs), args, data, shapes, values, "ireval")
    nest = LoopNest(outputs)
    schedule(nest)
    for target in ("ireval", "llvm"):
        got = _run(nest, args, data, shapes, values, target)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, err_msg=target)
    return nest


# ---------------------------------------------------------------------------------------
# bounds inference of a region of many guarded, quasi-affine pieces: isl's convex hull of
# the region took minutes inside cache_accesses (seed 7, case 85)
# ---------------------------------------------------------------------------------------
def _guarded_stages():
    M = Var("M")
    A = Buffer("A", (M, M), "float32")
    B = Buffer("B", (4,), "float32")
    C = Buffer("C", (6,), "int32")
    T1 = Compute("T1", (4,), lambda i0: C[i0 + 2] * cast(A[i0, floordiv(i0, 2)], "int32"))
    T2 = Compute("T2", (4,), lambda i0: maximum(cast(T1[i0 % 3], "float32"), cast(T1[i0], "float32") / 2.0))
    T3 = Reduce("T3", (4,), Sum(), lambda i0, r0: minimum(
        cast(T2[floormod(r0, 4)], "int32"),
        select(cast(T1[r0 % 3], "float32") < B[floordiv(r0, 2)], cast(T2[r0 / 2], "int32"), -1) * 2), (M,))
    T4 = Reduce("T4", (4,), Max(), lambda i0, r0: maximum(cast(T3[r0], "float32"), (
        select(i0 < 0, if_then_else(r0 >= 1, B[r0 - 1], 0.0), cast(C[r0 + 1], "float32"))
        - select(if_then_else(r0 >= 2, T2[r0 - 2], 0.0) >= 2.0, cast(C[r0 / 2], "float32"),
                 cast(C[(const(6, "int32") - 1) - r0], "float32")))), (M,))
    T5 = Compute("T5", (4,), lambda i0: minimum(cast(T4[i0], "int32"), cast(cast(T3[floormod(i0, 4)], "float32"),
                                                                           "int32")))
    rng = np.random.default_rng(0)
    m = 4
    data = [rng.integers(-3, 4, (m, m)).astype(np.float32), rng.integers(-3, 4, 4).astype(np.float32),
            rng.integers(-3, 4, 6).astype(np.int32)]
    return [T5], [A, B, C], data, [(M, m)]


def _cache_in_tail(nest):
    nest.eliminate_dead_stores()
    nest.split_with_mask(nest.loop("i0_3"), 2)
    nest.split_with_tail(nest.loop("r0_1"), 3)
    nest.cache_accesses(nest.buffer("C"), "cache1", nest.loop("r0_1_tail"))


def test_bounds_of_many_guarded_pieces_are_bounded_in_time():
    outputs, inputs, data, sizes = _guarded_stages()
    start = time.monotonic()
    nest = LoopNest(outputs)
    _cache_in_tail(nest)
    assert time.monotonic() - start < 60, "bounds inference ran unbounded"
    _same_as_unscheduled(_cache_in_tail, outputs, inputs, data, sizes)


def test_bounds_past_the_isl_budget_fall_back_to_a_safe_region(monkeypatch):
    """Past the budget every dimension is the whole buffer: looser, and still correct."""
    monkeypatch.setattr(bounds, "BOUNDS_OPERATIONS", 1)
    A = Buffer("A", (64,), "float32")
    io, ii = Var("io"), Var("ii")
    Bf = Buffer("B", (64,), "float32")
    body = For(ii, 0, 8, Block([Store(Bf, (io * 8 + ii,), A[io * 8 + ii + 1])]))
    (b,) = bounds.access_bounds(body, A, [io], outer_ranges={io: (0, 8)})
    assert (str(b.min), str(b.extent), b.exact) == ("0", "64", False)
    outputs, inputs, data, sizes = _guarded_stages()
    _same_as_unscheduled(_cache_in_tail, outputs, inputs, data, sizes)


# ---------------------------------------------------------------------------------------
# a buffer whose dimensions differ in width, (3, N) with an int64 N (a cache buffer of an
# int64-sized tensor is (1, N)): flattening its indices multiplied int32 by int64 (seed 1,
# case 8, with int64 sizes)
# ---------------------------------------------------------------------------------------
def test_buffer_of_int32_and_int64_dimensions_builds():
    N = Var("N", "int64")
    A = Buffer("A", (3, N), "float32")
    B = Compute("B", (3, N), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (N, 3), lambda i, j: B[j, i] + 1.0)
    a = np.arange(15, dtype=np.float32).reshape(3, 5)
    _same_as_unscheduled(lambda nest: None, [C], [A], [a], [(N, 5)])
    c = np.zeros((5, 3), np.float32)
    build(LoopNest([C]), [A, C, N], target="llvm")(a, c, 5)
    np.testing.assert_array_equal(c, a.T * 2 + 1)


def test_cache_of_an_int64_sized_tensor():
    N = Var("N", "int64")
    T1 = Compute("T1", (N, N), lambda i0, i1: cast(i0 + i1, "float32"))
    T2 = Compute("T2", (N, N), lambda i0, i1: cast(T1[0, i0 % 3], "int64"))
    T3 = Compute("T3", (N, N), lambda i0, i1: cast(T2[i0, i0], "float32"))

    def schedule(nest):
        nest.cache_accesses(nest.buffer("T2"), "cache1", nest.get_loops_for(T2)[0])
        assert [str(d.dtype) for d in nest.buffer("cache1").dims] == ["int32", "int64"]

    _same_as_unscheduled(schedule, [T3], [], [], [(N, 4)])


def test_a_region_past_its_isl_budget_is_the_whole_buffer(monkeypatch):
    """Building a region of many guarded pieces (its disjunctive normal form) is bounded too
    (seed 7, case 311: seconds per compute_at candidate)."""
    monkeypatch.setattr(bounds, "REGION_OPERATIONS", 1)
    A = Buffer("A", (64,), "float32")
    io, ii = Var("io"), Var("ii")
    Bf = Buffer("B", (64,), "float32")
    body = For(ii, 0, 8, Block([Store(Bf, (io * 8 + ii,), A[io * 8 + ii + 1])]))
    (b,) = bounds.access_bounds(body, A, [io], outer_ranges={io: (0, 8)})
    assert (str(b.min), str(b.extent), b.exact) == ("0", "64", False)
    assert not bounds.writes_cover_box(body, Bf, [b], [io], outer_ranges={io: (0, 8)})
    outputs, inputs, data, sizes = _guarded_stages()
    _same_as_unscheduled(_cache_in_tail, outputs, inputs, data, sizes)


# ---------------------------------------------------------------------------------------
# the polyhedral analysis of a nest whose loop bounds are nested mins (a cache buffer's
# extent, split again): combining their piecewise forms ran for minutes when the
# allocation pass asked whether a buffer is private to a loop (seed 8, case 101)
# ---------------------------------------------------------------------------------------
def test_piecewise_bounds_past_their_budget_are_over_approximated(monkeypatch):
    from loopnest.analysis import domains
    monkeypatch.setattr(domains, "COMBINE_OPERATIONS", 1)
    outputs, inputs, data, sizes = _guarded_stages()

    def schedule(nest):
        _cache_in_tail(nest)
        nest.split_with_tail(nest.loop("cache1_i0"), 2)

    _same_as_unscheduled(schedule, outputs, inputs, data, sizes)


# ---------------------------------------------------------------------------------------
# compute_at at the outer loop of a split_with_tail whose body does not use the split
# loop's variable: the main and tail copies share their Store objects, and the check for
# readers outside the loop, which compared statements by identity, found none and raised a
# bare IndexError; it now walks the nest skipping the loop, and the tail gets a copy of T1
# (seed 7, case 199). Computed at i0_1, T1's storage for one iteration has N - 1 elements,
# which bounds inference now makes max(N - 1, 0): at N = 0 the allocation was negative.
# ---------------------------------------------------------------------------------------
def test_compute_at_the_outer_loop_of_a_split_whose_body_ignores_its_variable():
    N = Var("N")
    T1 = Compute("T1", (N,), lambda i0: i0 + 1)
    T2 = Reduce("T2", (N + 1,), Max(),
                lambda i0, r0, r1: if_then_else(r0 >= 1, cast(T1[r0 - 1], "float32"), 0.0), (N, N))

    def at(loop):
        def schedule(nest):
            nest.split_with_tail(nest.loop("r1"), 2)
            nest.compute_at(nest.buffer("T1"), nest.loop(loop))
            assert ("T1_local" in str(nest.loop("r1_tail").stmt)) == (loop == "r1_outer")
        return schedule

    for loop in ("r1_outer", "i0_1"):
        for n in range(5):
            nest = _same_as_unscheduled(at(loop), [T2], [], [], [(N, n)])
            assert str(LoopNest([T2]).replay(nest.history_json())) == str(nest)


def test_a_condition_whose_arithmetic_wraps_does_not_narrow_a_cached_region():
    """Found by the random tester (seed 179, case 257): ``C[r0 + 2, r0 - 1]`` is read where
    ``r0 * 1073741823 + 7 < -1``, never in exact integers but at r0 = 2, 3, 6 and 7 in int32,
    where the product wraps. The analysis took the condition as written, so the region that
    ``cache_accesses`` copied was empty and the read left it (IREval: IndexError; LLVM: a
    read past the cache). A condition whose sums or products leave their type somewhere in
    the domain now narrows nothing."""
    C = Buffer("C", (10, 9), "int64")
    T1 = Compute("T1", (8,), lambda i0: if_then_else(i0 >= 1, C[i0 + 2, i0 - 1], 0))
    T2 = Compute("T2", (8,), lambda i0: 1)
    T3 = Compute("T3", (8,), lambda i0: cast(T2[floormod(i0, 8)], "int32"))
    T4 = Reduce("T4", (9,), Min(), lambda i0, r0: cast(T3[floordiv(r0, 2)], "float32") + if_then_else(
        r0 * 1073741823 + 7 < -1, cast(T1[r0], "float32"), 0.0), (8,))
    T5 = Reduce("T5", (8,), Max(), lambda i0, r0: T4[floordiv(r0, 2)], (9,))
    c = np.arange(90, dtype=np.int64).reshape(10, 9) - 45
    want = np.zeros(8, np.float32)
    build(LoopNest([T5]), [C, T5], target="ireval")(c, want)
    nest = LoopNest([T5])
    nest.compute_inline(nest.buffer("T1"))
    nest.split_with_mask(nest.get_loops_for(T4)[0], 2)
    nest.cache_accesses(nest.buffer("C"), "cache2", nest.get_loops_for(T4)[1])
    assert "cache2_i0 < 0" not in str(nest)
    for target in ("ireval", "llvm"):
        got = np.full(8, np.nan, np.float32)
        build(nest, [C, T5], target=target)(c, got)
        np.testing.assert_array_equal(got, want)


def test_a_condition_that_wraps_for_a_symbolic_size_does_not_narrow_a_cached_region():
    """Seed 193, case 65: the same wrap with symbolic sizes. ``C[i1 - 2, i1]`` is read where
    ``i1 * 402653184 + 1073741824 < -1073741824`` with ``i1 < N``: never in exact integers,
    at i1 = 3, 4 and 5 in int32. The check took a maximum that grows with a size not to wrap,
    so the region that ``cache_accesses`` copied was empty (IREval: IndexError; LLVM: NaN
    read from the cache); it now takes sizes to be at most ``WRAP_CHECK_SIZE``."""
    N = Var("N", "int32")
    C = Buffer("C", (N, N), "float32")
    T4 = Compute("T4", (N, N), lambda i0, i1: if_then_else(
        i1 * 402653184 + 1073741824 < -1073741824, C[i1 - 2, minimum(i1, N - 1)], 0.0))
    c = np.arange(64, dtype=np.float32).reshape(8, 8)
    want = np.zeros((8, 8), np.float32)
    build(LoopNest([T4]), [C, T4, N], target="ireval")(c, want, 8)
    assert want[0, 3] == c[1, 3]
    nest = LoopNest([T4])
    nest.cache_accesses(nest.buffer("C"), "cache3", nest.get_loops_for(T4)[1])
    assert "cache3_i0 < 0" not in str(nest)
    for target in ("ireval", "llvm"):
        got = np.full((8, 8), np.nan, np.float32)
        build(nest, [C, T4, N], target=target)(c, got, 8)
        np.testing.assert_array_equal(got, want)


def test_a_loop_whose_guard_wraps_keeps_its_dependences():
    """The same wrap in a Cond statement: ``A[0] += 1`` where ``r * 1073741823 + 7 < -1`` runs
    at r = 2, 3, 6 and 7 in int32, so the loop carries a dependence on A[0] and may not run in
    parallel (taken as written, the condition never held and parallelize was accepted)."""
    A = Buffer("A", (1,), "int32")
    r = Var("r")
    stmt = For(r, 0, 8, Block([Cond(r * 1073741823 + 7 < -1, Block([Store(A, (0,), A[0] + 1)]))]))
    nest = LoopNest(stmt, outputs=[A])
    with pytest.raises(ScheduleError):
        nest.parallelize(nest.loop("r"))
    a = np.zeros(1, np.int32)
    build(nest, [A], target="llvm")(a)
    assert a[0] == 4


def test_a_guard_whose_form_has_rational_coefficients_is_bounded():
    """Found by the random tester (seed 185, case 51): after ``compute_at`` and a split with a
    tail, a guard's index arithmetic converted to ``(2 i1) / 5`` on a domain where i1 is a
    multiple of 5, an integer there; the wrap check asked isl for its bounds, which need
    integer coefficients, and the build failed with an isl error. The check now bounds its
    floor (the same value)."""
    import ml_dtypes  # noqa: F401 -- bfloat16
    B = Buffer("B", (const(6, "int64"),), "int32")
    T1 = Compute("T1", (const(6, "int64"),), lambda i0: if_then_else(i0 >= 2, cast(B[i0 - 2], "float32"), 0.0))
    T2 = Compute("T2", (const(7, "int64"), const(7, "int64")), lambda i0, i1: cast(T1[i1 / 2], "bfloat16") - select(
        T1[i1 % 3] < 1.0, const(1.0, "bfloat16"), const(1.0, "bfloat16")))
    b = np.array([1, 3, -1, -2, 1, 1], np.int32)
    want = np.zeros((7, 7), "bfloat16")
    build(LoopNest([T2]), [B, T2], target="ireval")(b, want)
    nest = LoopNest([T2])
    nest.compute_at(nest.buffer("T1"), nest.loop("i1"))
    nest.split_with_tail(nest.get_loops_for("T1")[-1], 2)
    for target in ("ireval", "llvm"):
        got = np.zeros((7, 7), "bfloat16")
        build(nest, [B, T2], target=target)(b, got)
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_a_schedule_gives_the_same_nest_a_second_time_in_one_process():
    """Seed 196, case 148: ``compute_at`` after three splits bounded T1's loop by
    ``floordiv(M + 2, 4) * 4 - 2`` the first time in a process and by ``M`` the second: the
    bounds inference reused isl sets read from text, whose inner representation the first
    run had changed, so the history replayed to another nest."""
    M = Var("M", "int32")
    A = Buffer("A", (M + 2,), "float32")
    T1 = Compute("T1", (M + 2,), lambda i0: cast(A[i0 / 2], "int32") + cast(A[i0 % 3], "int32") * 2)
    T2 = Compute("T2", (M + 2,), lambda i0: if_then_else(i0 >= 2, cast(T1[i0 - 2], "float16"), 0.0) - cast(
        A[i0], "float16"))
    T3 = Compute("T3", (M + 2,), lambda i0: maximum(cast(T2[i0], "float32"), cast(T2[0], "float32")))

    def schedule():
        nest = LoopNest([T3])
        nest.split_with_mask(nest.loop("i0"), 1)
        nest.split_with_tail(nest.loop("i0_1"), 4)
        nest.split_with_mask(nest.loop("i0_1_outer"), 2)
        nest.compute_at(nest.buffer("T1"), nest.loop("i0_1_outer_outer"))
        return nest
    first = schedule()
    assert str(schedule()) == str(first)
    assert str(LoopNest([T3]).replay(first.history_json())) == str(first)
