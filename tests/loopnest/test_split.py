"""split_with_tail, split_with_mask, tile, slice_head, slice_tail, normalize: golden text,
semantic preservation on every CPU backend, refusals that leave the nest unchanged, stable
handles and history replay."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from loopnest import LoopNest, ScheduleError
from nests import FIXTURE_OK, roundtrip, run, unchanged
from te import Buffer, Compute, Reduce, Sum, Var, float32, int32

SIZES = st.sampled_from([1, 2, 3, 5, 7, 8, 11, 13, 16])
FACTORS = st.integers(1, 9)


def elementwise(n=20):
    A = Buffer("A", (n,), float32)
    B = Compute("B", (n,), lambda i: A[i] * 2.0)
    return A, B


def grid(n=10, m=16):
    A = Buffer("A", (n, m), float32)
    C = Compute("C", (n, m), lambda i, j: A[i, j] + 1.0)
    return A, C


# ------------------------------------------------------------------------------------
# golden text (the docstrings' before / after)
# ------------------------------------------------------------------------------------
def test_split_with_tail_golden():
    A, B = elementwise(20)
    nest = LoopNest([B])
    outer, inner, tail = nest.split_with_tail(nest.get_loops_for(B)[0], 8)
    assert (outer.name, inner.name, tail.name) == ("i_outer", "i_inner", "i_tail")
    assert str(nest) == """\
for (int i_outer = 0; i_outer < 2; i_outer++) {
  for (int i_inner = 0; i_inner < 8; i_inner++) {
    B[i_outer * 8 + i_inner] = A[i_outer * 8 + i_inner] * 2.0f;
  }
}
for (int i_tail = 0; i_tail < 4; i_tail++) {
  B[i_tail + 16] = A[i_tail + 16] * 2.0f;
}"""
    roundtrip(nest, [B])


def test_split_with_tail_divisible_has_no_tail():
    A, B = elementwise(16)
    nest = LoopNest([B])
    outer, inner, tail = nest.split_with_tail(nest.get_loops_for(B)[0], 4)
    assert tail is None and outer.extent == 4 and inner.extent == 4


def test_split_with_tail_symbolic_always_has_tail():
    N = Var("N", int32)
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i] + 1.0)
    nest = LoopNest([B])
    outer, inner, tail = nest.split_with_tail(nest.get_loops_for(B)[0], 4)
    assert tail is not None
    assert str(nest) == """\
for (int i_outer = 0; i_outer < floordiv(N, 4); i_outer++) {
  for (int i_inner = 0; i_inner < 4; i_inner++) {
    B[i_outer * 4 + i_inner] = A[i_outer * 4 + i_inner] + 1.0f;
  }
}
for (int i_tail = 0; i_tail < floormod(N, 4); i_tail++) {
  B[i_tail + floordiv(N, 4) * 4] = A[i_tail + floordiv(N, 4) * 4] + 1.0f;
}"""


def test_split_with_mask_golden():
    A, B = elementwise(20)
    nest = LoopNest([B])
    outer, inner = nest.split_with_mask(nest.get_loops_for(B)[0], 8)
    assert str(nest) == """\
for (int i_outer = 0; i_outer < 3; i_outer++) {
  for (int i_inner = 0; i_inner < 8; i_inner++) {
    if (i_outer * 8 + i_inner < 20) {
      B[i_outer * 8 + i_inner] = A[i_outer * 8 + i_inner] * 2.0f;
    }
  }
}"""
    roundtrip(nest, [B])


def test_split_with_mask_divisible_has_no_guard():
    A, B = elementwise(16)
    nest = LoopNest([B])
    nest.split_with_mask(nest.get_loops_for(B)[0], 8)
    assert "if" not in str(nest)


def test_split_of_inner_loop_keeps_outer_handle_and_tail_copies_get_fresh_loops():
    A, C = grid(10, 16)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    nest.split_with_tail(i, 4)
    assert not i.exists()
    assert j.exists() and j.extent == 16  # the main body keeps j; the tail copy gets j_1
    names = [l.name for l in nest.get_all_loops()]
    assert names == ["i_outer", "i_inner", "j", "i_tail", "j_1"]
    with pytest.raises(ScheduleError, match="no longer exists"):
        nest.split_with_tail(i, 2)
    nest.split_with_mask(j, 5)  # the handle still works
    roundtrip(nest, [C])


def test_tile_golden():
    A, C = grid(10, 16)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    xo, yo, xi, yi = nest.tile(i, j, 4, 8)
    assert [l.name for l in (xo, yo, xi, yi)] == ["i_outer", "j_outer", "i_inner", "j_inner"]
    assert str(nest) == """\
for (int i_outer = 0; i_outer < 3; i_outer++) {
  for (int j_outer = 0; j_outer < 2; j_outer++) {
    for (int i_inner = 0; i_inner < 4; i_inner++) {
      for (int j_inner = 0; j_inner < 8; j_inner++) {
        if (i_outer * 4 + i_inner < 10) {
          C[i_outer * 4 + i_inner, j_outer * 8 + j_inner] = A[i_outer * 4 + i_inner, j_outer * 8 + j_inner] + 1.0f;
        }
      }
    }
  }
}"""
    assert [l.name for l in nest.get_all_loops()] == ["i_outer", "j_outer", "i_inner", "j_inner"]
    roundtrip(nest, [C])


def test_slice_head_golden():
    A = Buffer("A", (10,), float32)
    B = Compute("B", (10,), lambda i: A[i])
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    head, tail = nest.slice_head(i, 2)
    assert tail == i and head.name == "i_head"
    assert str(nest) == """\
for (int i_head = 0; i_head < 2; i_head++) {
  B[i_head] = A[i_head];
}
for (int i = 2; i < 10; i++) {
  B[i] = A[i];
}"""
    roundtrip(nest, [B])


def test_slice_tail_golden():
    A = Buffer("A", (10,), float32)
    B = Compute("B", (10,), lambda i: A[i])
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    head, tail = nest.slice_tail(i, 2)
    assert head == i and tail.name == "i_tail"
    assert str(nest) == """\
for (int i = 0; i < 8; i++) {
  B[i] = A[i];
}
for (int i_tail = 8; i_tail < 10; i_tail++) {
  B[i_tail] = A[i_tail];
}"""
    roundtrip(nest, [B])


def test_slice_covering_the_whole_loop_changes_nothing():
    A = Buffer("A", (4,), float32)
    B = Compute("B", (4,), lambda i: A[i])
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    before = str(nest)
    assert nest.slice_head(i, 4) == (i, None)
    assert nest.slice_tail(i, 9) == (None, i)
    assert str(nest) == before


def test_normalize_golden():
    A = Buffer("A", (10,), float32)
    B = Compute("B", (10,), lambda i: A[i])
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    nest.slice_head(i, 2)
    assert nest.normalize(i) == i
    assert str(nest) == """\
for (int i_head = 0; i_head < 2; i_head++) {
  B[i_head] = A[i_head];
}
for (int i = 0; i < 8; i++) {
  B[i + 2] = A[i + 2];
}"""
    roundtrip(nest, [B])
    before = str(nest)
    nest.normalize(i)  # already normalized: no change
    assert str(nest) == before


# ------------------------------------------------------------------------------------
# refusals leave the nest unchanged
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("factor", [0, -3, 2.5, True, "4"])
def test_bad_factors_are_refused(factor):
    A, B = elementwise(20)
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    for op in (nest.split_with_tail, nest.split_with_mask, nest.slice_head, nest.slice_tail):
        unchanged(nest, lambda: op(i, factor))
    A2, C = grid(4, 4)
    n2 = LoopNest([C])
    x, y = n2.get_loops_for(C)
    unchanged(n2, lambda: n2.tile(x, y, factor, 2))
    unchanged(n2, lambda: n2.tile(x, y, 2, factor))


def test_tile_of_non_nested_loops_is_refused():
    A, C = grid(4, 4)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    msg = unchanged(nest, lambda: nest.tile(j, i, 2, 2))
    assert "i must be the only statement in the body of j" in msg
    msg = unchanged(nest, lambda: nest.tile(i, i, 2, 2))
    assert "must be different" in msg


def test_tile_of_two_reduction_loops_is_refused():
    # C[i] accumulates over (k, l): tiling reorders the accumulation across k and l, which
    # the dependence analysis forbids (it changes the order of the writes to C[i]).
    A = Buffer("A", (4, 6, 6), float32)
    C = Reduce("C", (4,), Sum(), lambda i, k, l: A[i, k, l], (6, 6))
    nest = LoopNest([C])
    i, k, l = nest.get_loops_for(C)
    msg = unchanged(nest, lambda: nest.tile(k, l, 2, 3))
    assert msg.startswith("cannot tile loops k and l") and "C[i]" in msg


def test_tile_of_an_imperfect_nest_distributes_the_init():
    A = Buffer("A", (5, 7), float32)
    C = Reduce("C", (5,), Sum(), lambda i, k: A[i, k], (7,))
    nest = LoopNest([C])
    i, k = nest.get_loops_for(C)
    # C[i] = 0 sits between i and k: it gets a loop of its own (i_1), then i, k are tiled
    nest.tile(i, k, 2, 2)
    assert [l.name for l in nest.get_all_loops()] == ["i_1", "i_outer", "k_outer", "i_inner", "k_inner"]


# ------------------------------------------------------------------------------------
# semantic preservation
# ------------------------------------------------------------------------------------
@settings(max_examples=12, deadline=None, suppress_health_check=FIXTURE_OK)
@given(n=SIZES, f=FACTORS, op=st.sampled_from(["tail", "mask", "head", "tailslice"]))
def test_split_family_preserves_values_1d(backend, n, f, op):
    A, B = elementwise(n)
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    {"tail": nest.split_with_tail, "mask": nest.split_with_mask,
     "head": nest.slice_head, "tailslice": nest.slice_tail}[op](i, f)
    for l in nest.get_all_loops():
        nest.normalize(l)
    a = np.random.default_rng(n * 31 + f).standard_normal(n).astype(np.float32)
    b = np.zeros(n, np.float32)
    run(nest, [A, B], [a, b], backend)
    np.testing.assert_allclose(b, a * 2.0, rtol=1e-6)
    roundtrip(nest, [B])


@settings(max_examples=12, deadline=None, suppress_health_check=FIXTURE_OK)
@given(n=SIZES, m=SIZES, fx=FACTORS, fy=FACTORS, symbolic=st.booleans())
def test_tile_and_splits_preserve_values_2d(backend, n, m, fx, fy, symbolic):
    N = Var("N", int32) if symbolic else n
    A = Buffer("A", (N, m), float32)
    C = Compute("C", (N, m), lambda i, j: A[i, j] * 3.0 - 1.0)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    nest.tile(i, j, fx, fy)
    inner = nest.get_all_loops()[-1]
    nest.split_with_tail(inner, 2)
    a = np.random.default_rng(n + m).standard_normal((n, m)).astype(np.float32)
    c = np.zeros((n, m), np.float32)
    args = [A, C] + ([N] if symbolic else [])
    run(nest, args, [a, c], backend, sizes=[n] if symbolic else [])
    np.testing.assert_allclose(c, a * 3.0 - 1.0, rtol=1e-6, atol=1e-6)     # LLVM may fuse into an FMA
    roundtrip(nest, [C])


@settings(max_examples=10, deadline=None, suppress_health_check=FIXTURE_OK)
@given(n=SIZES, f=FACTORS, g=FACTORS)
def test_symbolic_split_and_slices_preserve_values(backend, n, f, g):
    N = Var("N", int32)
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i] + 0.5)
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    head, rest = nest.slice_head(i, f)
    nest.slice_tail(rest, g)
    outer, inner, tail = nest.split_with_tail(rest, 3)
    nest.split_with_mask(head, 2)
    a = np.arange(n, dtype=np.float32)
    b = np.zeros(n, np.float32)
    run(nest, [A, B, N], [a, b], backend, sizes=[n])
    np.testing.assert_allclose(b, a + 0.5)


def test_split_of_reduction_loop_preserves_values(backend):
    A = Buffer("A", (3, 13), float32)
    C = Reduce("C", (3,), Sum(), lambda i, k: A[i, k], (13,))
    nest = LoopNest([C])
    i, k = nest.get_loops_for(C)
    nest.split_with_tail(k, 4)
    nest.split_with_mask(i, 2)
    a = np.random.default_rng(0).standard_normal((3, 13)).astype(np.float32)
    c = np.zeros(3, np.float32)
    run(nest, [A, C], [a, c], backend)
    np.testing.assert_allclose(c, a.astype(np.float64).sum(1), rtol=1e-5)


@pytest.mark.parametrize("module", ["loopnest.transforms.split", "loopnest.transforms.inline",
                                    "loopnest.transforms.compute_at", "loopnest.transforms.cache",
                                    "loopnest.transforms.rfactor", "loopnest.transforms.dead_stores",
                                    "loopnest.transforms._rewrite", "loopnest.analysis.bounds"])
def test_docstring_examples(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def _t1_computed_in_a_parallel_reduction():
    """Seed 114, case 172: T1 computed at r0_outer, inside the parallel loop i0_2."""
    from loopnest import Target
    from te import Max, cast, floordiv, if_then_else, minimum
    N, M = Var("N", int32), Var("M", int32)
    T1 = Compute("T1", (N,), lambda i0: if_then_else(i0 >= 2, 1.0, 0.0))
    T2 = Compute("T2", (M + 1,), lambda i0: cast(T1[i0 % 3], "int64") + cast(T1[minimum(i0, N - 1)], "int64")
                 + cast(T1[floordiv(i0, 2)], "int64"))
    T3 = Reduce("T3", (M,), Max(), lambda i0, r0: minimum(cast(T2[r0], "float32"), T1[minimum(r0, N - 1)]),
                (M + 1,))
    nest = LoopNest([T3])
    nest.auto_schedule(Target(vector_bits=128, vector_registers=32, cores=3, l1_bytes=512, l2_bytes=1 << 20))
    nest.compute_at(nest.buffer("T1"), nest.loop("r0_outer"))
    return nest, T3, N, M


def test_slice_head_is_refused_where_a_parallel_loop_around_it_would_share_an_intermediate():
    """Seed 114, case 172: once sliced, the analysis no longer shows T1 private to the
    parallel loop's iterations, so its allocation would have been one T1 for all of them (a
    data race): refused, and the nest is as it was."""
    nest, _, _, _ = _t1_computed_in_a_parallel_reduction()
    before, history = str(nest), list(nest.history)
    with pytest.raises(ScheduleError, match=r"slice_head: loop i0_2 is parallel, and with loop r0_outer sliced, "
                                            r"cannot parallelize loop i0_2: .*flow dependence on T1"):
        nest.slice_head(nest.loop("r0_outer"), 2)
    assert str(nest) == before and nest.history == history


def _apply_change(nest, change):
    op, loop = change.split()
    if op == "unroll":
        return nest.unroll(nest.loop(loop), 2)
    return nest.split_with_tail(nest.loop(loop), 3)


CHANGES_INSIDE = ["split_with_tail r0_outer", "split_with_tail i0_3", "unroll i0_3"]


@pytest.mark.parametrize("change", CHANGES_INSIDE)
def test_a_change_inside_a_parallel_loop_that_the_analysis_alone_cannot_follow_is_refused(change, monkeypatch):
    """The same class as slicing, for every transform: a split with a tail or an unroll
    inside the parallel loop leaves bounds whose value flow isl gives up on. Asked of the
    analysis alone (what it showed before the change not carried over), T1 would be
    allocated once for all the concurrent iterations: refused, and the nest is as it was.
    Without the check, IREval's race detection names the race."""
    from codegen import build
    from codegen.ireval import DataRaceError
    from loopnest.transforms import privacy
    monkeypatch.setattr(privacy, "carry_private_facts", lambda nest, old_root, op: None)
    nest, T3, N, M = _t1_computed_in_a_parallel_reduction()
    before, history = str(nest), list(nest.history)
    op = change.split()[0]
    with pytest.raises(ScheduleError, match=rf"{op}: the iterations of the parallel loop i0_2 would share one T1: "
                                            r"they write it, .* \(a data race\); leave the loop as it is"):
        _apply_change(nest, change)
    assert str(nest) == before and nest.history == history
    monkeypatch.setattr(privacy, "refuse_lost_privacy", lambda nest, old_root, op: None)
    _apply_change(nest, change)
    kernel = build(nest, [T3, N, M], target="ireval", check_races=True)
    with pytest.raises(DataRaceError, match=r"data race on T1 .* parallel/GPU loop i0_2"):
        kernel(np.zeros(9, np.float32), 5, 9)


@pytest.mark.parametrize("change", CHANGES_INSIDE)
def test_a_change_inside_a_parallel_loop_keeps_what_the_analysis_showed_before(change):
    """A split or an unroll keeps every iteration of the parallel loop and the order of the
    instances in it, so T1, shown private to each iteration before the change, still is
    (``privacy.carry_private_facts``): accepted, allocated per iteration, race-free with
    poisoned scratch buffers, and the values of the unscheduled program on IREval and LLVM."""
    from codegen import build
    nest, T3, N, M = _t1_computed_in_a_parallel_reduction()
    _apply_change(nest, change)
    assert "parallel for (int i0_2" in str(nest)
    for n, m in ((5, 9), (7, 3), (4, 6), (3, 1)):
        want = np.zeros(m, np.float32)
        build(LoopNest([T3]), [T3, N, M], target="ireval")(want, n, m)
        got = np.zeros(m, np.float32)
        build(nest, [T3, N, M], target="ireval", check_races=True, poison=True)(got, n, m)
        np.testing.assert_array_equal(got, want)
        got = np.zeros(m, np.float32)
        build(nest, [T3, N, M], target="llvm")(got, n, m)
        np.testing.assert_array_equal(got, want)


def test_a_change_inside_a_parallel_loop_that_keeps_its_intermediates_private_is_accepted():
    """The check refuses only what it must: a split with a mask inside the same parallel loop
    leaves T1 provably private, so it is accepted and runs race-free, with its scratch buffers
    poisoned (a read of an element no iteration wrote would show), giving the values of the
    unscheduled program."""
    from codegen import build
    nest, T3, N, M = _t1_computed_in_a_parallel_reduction()
    nest.split_with_mask(nest.loop("r0_outer"), 3)
    got, want = np.zeros(9, np.float32), np.zeros(9, np.float32)
    build(nest, [T3, N, M], target="ireval", check_races=True, poison=True)(got, 5, 9)
    build(LoopNest([T3]), [T3, N, M], target="ireval")(want, 5, 9)
    np.testing.assert_array_equal(got, want)
    assert "parallel for (int i0_2" in str(nest)


def test_the_privacy_check_also_analyses_the_concurrent_loops_a_transform_makes(monkeypatch):
    """``unroll`` by a factor of a parallel loop leaves a parallel tail loop, a loop the
    transform made: its intermediates are analysed too (T private to each of its iterations
    here, so the unroll is accepted)."""
    from loopnest.transforms import privacy
    asked = []
    private_to = privacy.private_to
    monkeypatch.setattr(privacy, "private_to",
                        lambda nest, buf, f: asked.append((buf.name, f.var.name)) or private_to(nest, buf, f))
    A = Buffer("A", (10, 16), float32)
    T = Compute("T", (10, 16), lambda i, j: A[i, j] * 2.0)
    Y = Compute("Y", (10, 16), lambda i, j: T[i, j] + 1.0)
    nest = LoopNest([Y])
    i = nest.get_loops_for(Y)[0]
    nest.compute_at(nest.buffer("T"), i)
    nest.parallelize(i)
    _, tail = nest.unroll(i, 3)
    assert asked == [("T", i.name), ("T", tail.name)]
    assert f"parallel for (int {tail.name}" in str(nest)
