"""split_with_overlap: the last tile shifted back inside its loop (golden text, values on
IREval and LLVM against numpy, refusals that leave the nest unchanged, history replay, the
bounds of buffers indexed by the shifted tile's start, and the contraction template's rows)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from loopnest import LoopNest, Target
from loopnest.analysis.boxes import box_bounds
from loopnest.auto.templates import row_tiles
from loopnest.stmt import Block, For, Store
from nests import roundtrip, run, unchanged
from te import Buffer, Compute, Reduce, Sum, Var, float32
from te.expr import Max, Min


def matmul(m, n=16, k=8):
    A = Buffer("A", (m, k), float32)
    B = Buffer("B", (k, n), float32)
    C = Reduce("C", (m, n), Sum(), lambda i, j, r: A[i, r] * B[r, j], (k,))
    return A, B, C


def test_golden_and_values():
    A = Buffer("A", (20,), float32)
    B = Compute("B", (20,), lambda i: A[i] * 2.0)
    nest = LoopNest([B])
    outer, inner = nest.split_with_overlap(nest.get_loops_for(B)[0], 8)
    assert (outer.name, inner.name, outer.extent, inner.extent) == ("i_outer", "i_inner", 3, 8)
    assert str(nest) == """\
for (int i_outer = 0; i_outer < 3; i_outer++) {
  for (int i_inner = 0; i_inner < 8; i_inner++) {
    B[min(i_outer * 8, 12) + i_inner] = A[min(i_outer * 8, 12) + i_inner] * 2.0f;
  }
}"""
    roundtrip(nest, [B])
    a = np.arange(20, dtype=np.float32)
    for backend in ("ireval", "llvm"):
        b = run(nest, [A, B], [a, np.zeros(20, np.float32)], backend)[1]
        np.testing.assert_array_equal(b, a * 2)


def test_a_dividing_factor_is_a_plain_split():
    A = Buffer("A", (16,), float32)
    B = Compute("B", (16,), lambda i: A[i] + 1.0)
    nest = LoopNest([B])
    nest.split_with_overlap(nest.get_loops_for(B)[0], 4)
    assert "min(" not in str(nest)
    assert "B[i_outer * 4 + i_inner]" in str(nest)


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 23), factor=st.integers(1, 9), which=st.sampled_from(["rows", "columns"]))
def test_reduction_rows_and_columns_match_numpy(m, factor, which):
    """The init and the update of C in each shifted tile: rows (or columns) run twice give
    the same values; a factor above the extent is refused, the nest unchanged."""
    A, B, C = matmul(m, n=13)
    nest = LoopNest([C])
    i, j, _ = nest.get_loops_for(C)
    loop, extent = (i, m) if which == "rows" else (j, 13)
    if factor > extent:
        msg = unchanged(nest, lambda: nest.split_with_overlap(loop, factor))
        assert "fewer than one tile" in msg
        return
    nest.split_with_overlap(loop, factor)
    rng = np.random.default_rng(m * 10 + factor)
    a = rng.standard_normal((m, 8)).astype(np.float32)
    b = rng.standard_normal((8, 13)).astype(np.float32)
    want = a.astype(np.float64) @ b
    for backend in ("ireval", "llvm"):
        c = run(nest, [A, B, C], [a, b, np.full((m, 13), np.nan, np.float32)], backend)[2]
        np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4)


def test_refused_where_an_iteration_may_not_run_twice():
    A, B, C = matmul(10)
    nest = LoopNest([C])
    r = nest.get_loops_for(C)[-1]
    msg = unchanged(nest, lambda: nest.split_with_overlap(r, 3))
    assert "independent iterations" in msg and "previous iteration of loop r" in msg and "split_with_tail" in msg
    # an in-place update: independent rows, but a row run again would double twice
    X = Buffer("X", (10,), float32)
    i = Var("i")
    nest = LoopNest.from_stmt(For(i, 0, 10, Block([Store(X, (i,), X[i] * 2.0)])), outputs=[X])
    msg = unchanged(nest, lambda: nest.split_with_overlap(nest.loop("i"), 4))
    assert "reads X where it may not have written it" in msg
    nest.split_with_overlap(nest.loop("i"), 5)        # 5 divides 10: no overlap, legal


def test_an_empty_loop_splits_plainly():
    A = Buffer("A", (0,), float32)
    B = Compute("B", (0,), lambda i: A[i] + 1.0)
    nest = LoopNest([B])
    outer, inner = nest.split_with_overlap(nest.get_loops_for(B)[0], 4)
    assert (outer.extent, inner.extent) == (0, 4) and "min(" not in str(nest)


def test_refused_for_symbolic_extents():
    N = Var("N")
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i] + 1.0)
    nest = LoopNest([B])
    msg = unchanged(nest, lambda: nest.split_with_overlap(nest.get_loops_for(B)[0], 4))
    assert "symbolic" in msg and "split_with_tail" in msg


@pytest.mark.parametrize("boxes", [True, False])
def test_local_buffer_of_a_shifted_tile_has_constant_extent(boxes, monkeypatch):
    """The region of a tile starting at ``min(io * 6, 14)`` is six rows: the box reading takes
    the min as a term; isl's bounds of it are pieces whose difference is that constant."""
    import loopnest.analysis.bounds as bounds
    if not boxes:
        monkeypatch.setattr(bounds, "box_bounds", lambda *a, **k: None)
    A, B, C = matmul(20)
    nest = LoopNest([C])
    io, ii = nest.split_with_overlap(nest.get_loops_for(C)[0], 6)
    nest.cache_accesses(nest.buffer("C"), "C_local", io)
    text = str(nest)
    assert "C_local_i0 < 6;" in text and nest.buffer("C_local").dims[0].value == 6
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((20, 8)).astype(np.float32), rng.standard_normal((8, 16)).astype(np.float32)
    c = run(nest, [A, B, C], [a, b, np.zeros((20, 16), np.float32)], "llvm")[2]
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_box_bounds_take_a_min_of_outer_variables_as_a_term():
    X = Buffer("X", (20,), float32)
    o, i = Var("o"), Var("i")
    body = For(i, 0, 6, Block((Store(X, (Min(o * 6, 14) + i,), 1.0),)))
    (box,) = box_bounds(body, X, {o: (0, 4)})
    assert (str(box.min), str(box.max), str(box.extent)) == ("min(o * 6, 14)", "min(o * 6, 14) + 5", "6")
    # a max: past the buffer's end for o = 3 (rows 18 to 23): no box; for o < 3 always 14
    assert box_bounds(For(i, 0, 6, Block((Store(X, (Max(o * 6, 14) + i,), 1.0),))), X, {o: (0, 4)}) is None
    (box,) = box_bounds(For(i, 0, 6, Block((Store(X, (Max(o * 6, 14) + i,), 1.0),))), X, {o: (0, 3)})
    assert (str(box.min), str(box.extent)) == ("14", "6")
    # a min of the loop inside is no term of the outer variables
    inner = For(i, 0, 6, Block((Store(X, (Min(i, o),), 1.0),)))
    assert box_bounds(inner, X, {o: (0, 4)}) is None


def test_row_tiles_shift_where_legal_and_fall_back_to_a_tail():
    A, B, C = matmul(20)
    nest = LoopNest([C])
    outer, inner, tail = row_tiles(nest, nest.get_loops_for(C)[0], 6)
    assert (outer.extent, inner.extent, tail) == (4, 6, None)
    X = Buffer("X", (10,), float32)
    i = Var("i")
    nest = LoopNest.from_stmt(For(i, 0, 10, Block([Store(X, (i,), X[i] * 2.0)])), outputs=[X])
    outer, inner, tail = row_tiles(nest, nest.loop("i"), 4)
    assert tail is not None and tail.extent == 2


@pytest.mark.parametrize("rows", [20, 1030])
def test_auto_matmul_rows_in_shifted_tiles(rows):
    """The automatic matmul's 6-row tiles: 20 or 1030 rows need no nest for the rows left
    over; the values match numpy."""
    A, B, C = matmul(rows, n=64, k=32)
    nest = LoopNest([C])
    nest.auto_schedule(target=Target(vector_bits=512, vector_registers=32, cores=2, l2_bytes=2 << 20))
    ops = [s["op"] for s in nest.history]
    assert "split_with_overlap" in ops and "i_tail" not in str(nest)
    rng = np.random.default_rng(rows)
    a, b = rng.standard_normal((rows, 32)).astype(np.float32), rng.standard_normal((32, 64)).astype(np.float32)
    c = run(nest, [A, B, C], [a, b, np.zeros((rows, 64), np.float32)], "llvm")[2]
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_auto_matmul_rows_that_run_in_parallel_keep_a_tail():
    """One column panel (32 columns, one tile of 8 rows x 2 vectors): the row tiles are the
    parallel loop, where shifted tiles would write the rows they share from two threads; the
    rows left over get a nest of their own."""
    A, B, C = matmul(202, n=32, k=256)
    nest = LoopNest([C])
    nest.auto_schedule(target=Target(vector_bits=512, vector_registers=32, cores=2, l2_bytes=2 << 20))
    ops = [s["op"] for s in nest.history]
    assert "split_with_overlap" not in ops and "parallelize" in ops
    assert any(lp.kind == "parallel" and lp.name.startswith("i_") for lp in nest.get_all_loops())
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((202, 256)).astype(np.float32), rng.standard_normal((256, 32)).astype(np.float32)
    c = run(nest, [A, B, C], [a, b, np.zeros((202, 32), np.float32)], "llvm")[2]
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
