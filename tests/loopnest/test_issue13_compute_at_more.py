"""compute_at beyond one consumer (issue 13): a producer that other consumers also read is
computed into a buffer local to the loop (PyTorch NNC's computeAt) and stays where it is
for the others; after split_with_tail the producer is computed at the main loop and at the
tail's corresponding loop (Halide's partial strips); reorder and tile distribute a tail
sibling out of the way."""
from __future__ import annotations

import numpy as np

from loopnest import LoopNest
from nests import roundtrip, run, unchanged, unchanged_with_buffers
from te import Buffer, Compute, Min, Reduce, Sum, float32, int32

H, W = 10, 8


def stencil(h=H, w=W):
    """B = 2A on (h + 1, w + 2); C[i, j] = B[i, j] + B[i + 1, j + 2]; D[i] = B[i, w + 1] - 1."""
    A = Buffer("A", (h + 1, w + 2), float32)
    B = Compute("B", (h + 1, w + 2), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (h, w), lambda i, j: B[i, j] + B[i + 1, j + 2])
    D = Compute("D", (h,), lambda i: B[i, w + 1] - 1.0)
    return A, B, C, D


def data(h=H, w=W):
    return np.random.default_rng(h * 13 + w).standard_normal((h + 1, w + 2)).astype(np.float32)


def c_ref(a, h=H, w=W):
    b = a * np.float32(2.0)
    return b[:h, :w] + b[1:, 2:]


def check_c(nest, A, C, backend):
    a = data()
    c = np.zeros((H, W), np.float32)
    run(nest, [A, C], [a, c], backend)
    np.testing.assert_allclose(c, c_ref(a), rtol=1e-6)


def allocs(nest):
    return [line.strip() for line in str(nest.copy().prepare_for_codegen()).splitlines() if "// alloc" in line]


# ------------------------------------------------------------------------------------
# other readers: a local copy for the loop, the producer kept for the others
# ------------------------------------------------------------------------------------
def test_other_readers_keep_the_producer_and_the_loop_gets_a_local_copy(backend):
    A, B, C, D = stencil()
    nest = LoopNest([C, D])
    i, j = nest.get_loops_for(C)
    nest.compute_at(B, i)
    text = str(nest)
    assert text.startswith("for (int i = 0; i < 11; i++) {\n  for (int j = 0; j < 10; j++) {\n"
                           "    B[i, j] = A[i, j] * 2.0f;")
    body = str(i.stmt)
    assert "B_local[i_3, j_2] = A[i_3, j_2] * 2.0f;" in body and "B[" not in body
    assert "D[i_2] = B[i_2, 9] - 1.0f;" in text                  # the other reader reads B
    # the local copy holds the 2 rows of B one row of C reads; B keeps its full size
    assert allocs(nest) == ["float32 B[11, 10]; // alloc", "float32 B_local[2, 10]; // alloc"]
    a = data()
    c, d = np.zeros((H, W), np.float32), np.zeros(H, np.float32)
    run(nest, [A, C, D], [a, c, d], backend)
    np.testing.assert_allclose(c, c_ref(a), rtol=1e-6)
    np.testing.assert_allclose(d, a[:H, W + 1] * 2 - 1, rtol=1e-6)
    roundtrip(nest, [C, D])


def test_other_readers_of_a_reduction(backend):
    A = Buffer("A", (6, 5), float32)
    R = Reduce("R", (6,), Sum(), lambda i, k: A[i, k] * A[i, k], (5,))
    E = Compute("E", (6, 3), lambda i, j: R[i] + 1.0)
    F = Compute("F", (6,), lambda i: R[i] * 2.0)
    nest = LoopNest([E, F])
    ei, ej = nest.get_loops_for(E)
    nest.compute_at(R, ej)
    assert "R_local[i_1] = 0.0f;" in str(ej.stmt)
    assert allocs(nest) == ["float32 R[6]; // alloc", "float32 R_local[1]; // alloc"]
    a = np.random.default_rng(1).standard_normal((6, 5)).astype(np.float32)
    e, f = np.zeros((6, 3), np.float32), np.zeros(6, np.float32)
    run(nest, [A, E, F], [a, e, f], backend)
    r = (a.astype(np.float64) ** 2).sum(1)
    np.testing.assert_allclose(e, np.repeat(r[:, None] + 1, 3, 1), rtol=1e-5)
    np.testing.assert_allclose(f, 2 * r, rtol=1e-5)
    roundtrip(nest, [E, F])


def test_a_second_compute_at_for_the_last_reader_moves_the_producer(backend):
    A, B, C, D = stencil()
    nest = LoopNest([C, D])
    nest.compute_at(B, nest.get_loops_for(C)[0])        # C reads B_local from now on
    nest.compute_at(B, nest.get_loops_for(D)[0])        # D was the last reader of B
    root_stmts = [str(s) for s in nest.root.stmts]
    assert not any(s.startswith("for (int i = 0;") for s in root_stmts)     # B's own loops are gone
    assert "B[i_2, 9] = A[i_2, 9] * 2.0f;" in str(nest)
    a = data()
    c, d = np.zeros((H, W), np.float32), np.zeros(H, np.float32)
    run(nest, [A, C, D], [a, c, d], backend)
    np.testing.assert_allclose(c, c_ref(a), rtol=1e-6)
    np.testing.assert_allclose(d, a[:H, W + 1] * 2 - 1, rtol=1e-6)
    roundtrip(nest, [C, D])


def test_store_at_hoists_a_local_copy():
    A, B, C, D = stencil()
    nest = LoopNest([C, D])
    io, ii = nest.split_with_mask(nest.get_loops_for(C)[0], 4)
    nest.compute_at(B, ii)
    assert allocs(nest)[1] == "float32 B_local[2, 10]; // alloc"
    nest.store_at("B_local", io)
    assert allocs(nest)[1] == "float32 B_local[5, 10]; // alloc"
    roundtrip(nest, [C, D])


# ------------------------------------------------------------------------------------
# tails: the main loop and the tail's corresponding loop
# ------------------------------------------------------------------------------------
def rows_with_tail():
    A, B, C, _ = stencil()
    nest = LoopNest([C])
    yo, yi, yt = nest.split_with_tail(nest.get_loops_for(C)[0], 4)
    return nest, A, B, C, yo, yi, yt


def test_compute_at_the_inner_loop_computes_at_the_tail_loop_too(backend):
    nest, A, B, C, yo, yi, yt = rows_with_tail()
    nest.compute_at(B, yi)
    # every reader is covered: B leaves the root; the tail computes its rows into B_local
    assert str(nest) == """\
for (int i_1_outer = 0; i_1_outer < 2; i_1_outer++) {
  for (int i_1_inner = 0; i_1_inner < 4; i_1_inner++) {
    for (int i_2 = i_1_outer * 4 + i_1_inner; i_2 < i_1_outer * 4 + i_1_inner + 2; i_2++) {
      for (int j_2 = 0; j_2 < 10; j_2++) {
        B[i_2, j_2] = A[i_2, j_2] * 2.0f;
      }
    }
    for (int j_1 = 0; j_1 < 8; j_1++) {
      C[i_1_outer * 4 + i_1_inner, j_1] = B[i_1_outer * 4 + i_1_inner, j_1] + B[i_1_outer * 4 + i_1_inner + 1, j_1 + 2];
    }
  }
}
for (int i_1_tail = 0; i_1_tail < 2; i_1_tail++) {
  for (int i_3 = i_1_tail + 8; i_3 < i_1_tail + 10; i_3++) {
    for (int j_3 = 0; j_3 < 10; j_3++) {
      B_local[i_3, j_3] = A[i_3, j_3] * 2.0f;
    }
  }
  for (int j_1_1 = 0; j_1_1 < 8; j_1_1++) {
    C[i_1_tail + 8, j_1_1] = B_local[i_1_tail + 8, j_1_1] + B_local[i_1_tail + 9, j_1_1 + 2];
  }
}"""
    assert allocs(nest) == ["float32 B[2, 10]; // alloc", "float32 B_local[2, 10]; // alloc"]
    check_c(nest, A, C, backend)
    roundtrip(nest, [C])


def test_compute_at_the_outer_loop_computes_at_the_tail_loop(backend):
    nest, A, B, C, yo, yi, yt = rows_with_tail()
    nest.compute_at(B, yo)
    assert "B_local[" in str(yt.stmt)
    assert allocs(nest) == ["float32 B[5, 10]; // alloc", "float32 B_local[2, 10]; // alloc"]
    check_c(nest, A, C, backend)
    roundtrip(nest, [C])


def test_compute_at_the_tail_loop_computes_at_the_inner_loop_too(backend):
    nest, A, B, C, yo, yi, yt = rows_with_tail()
    nest.compute_at(B, yt)
    assert "B[" in str(yt.stmt) and "B_local[" in str(yi.stmt)
    check_c(nest, A, C, backend)
    roundtrip(nest, [C])


def test_tails_of_two_splits(backend):
    """Rows and columns split with tails: the column loop inside the row tail is a copy of
    the split column loop, so it computes B too."""
    A, B, C, _ = stencil()
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    nest.split_with_tail(i, 4)
    jo, ji, jt = nest.split_with_tail(j, 3)
    nest.compute_at(B, ji)
    assert str(nest).count("B_local") > 0 and not str(nest).startswith("for (int i = 0;")
    copy_of_j = nest.loop("j_1_1").stmt                 # the column loop of the row tail
    assert "B_local" in str(copy_of_j)
    assert allocs(nest) == ["float32 B[2, 3]; // alloc", "float32 B_local_1[2, 3]; // alloc",
                            "float32 B_local[2, 3]; // alloc"]
    check_c(nest, A, C, backend)
    roundtrip(nest, [C])


def test_reorder_and_tile_after_split_with_tail(backend):
    A, B, C, _ = stencil()
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    jo, ji, jt = nest.split_with_tail(j, 3)
    nest.reorder([i, jo], [1, 0])                       # the tail j_1_tail is distributed out
    assert [l.name for l in nest.get_enclosing_loops(ji)] == ["j_1_outer", "i_1", "j_1_inner"]
    check_c(nest, A, C, backend)
    roundtrip(nest, [C])
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    jo, ji, jt = nest.split_with_tail(j, 3)
    nest.tile(i, jo, 4, 2)
    check_c(nest, A, C, backend)
    roundtrip(nest, [C])


def test_split_tail_of_a_reduction_then_compute_at_the_tail(backend):
    """Once an IndexError: after simplify, the statements of a loop that does not use its
    variable are shared by the main and tail copies of a split."""
    T1 = Compute("T1", (1,), lambda i: 1)
    T2 = Reduce("T2", (1,), Min(), lambda i, r: T1[r // 2], (2,))
    nest = LoopNest([T2])
    nest.simplify()
    loops = nest.get_all_loops()
    assert [l.name for l in loops] == ["i", "i_1", "r"]
    outer, inner, tail = nest.split_with_tail(loops[1], 3)
    nest.compute_at(T1, tail)
    assert "T1[0] = 1;" in str(tail.stmt) and "T1_local" in str(inner.stmt)
    out = np.zeros(1, np.int32)
    run(nest, [T2], [out], backend)
    assert out[0] == 1
    roundtrip(nest, [T2])


# ------------------------------------------------------------------------------------
# refusals
# ------------------------------------------------------------------------------------
def test_refused_compute_at_names_the_reason_and_changes_nothing():
    A, B, C, D = stencil()
    nest = LoopNest([C, D])
    i, j = nest.get_loops_for(C)
    nest.vectorize(j)
    msg = unchanged_with_buffers(nest, lambda: nest.compute_at(B, j))
    assert msg == ("cannot compute B at loop j_1: loop j_1 is vectorized (its body must stay one vector statement); "
                   "compute_at(B, ...) would be legal at loops i_1, i_2")
    assert nest._store_at == {}
    bi, bj = nest.get_loops_for(B)
    msg = unchanged(nest, lambda: nest.compute_at(B, bj))
    assert msg.startswith("cannot compute B at loop j: nothing inside loop j reads B")


def test_refused_when_the_producer_reads_a_buffer_made_by_a_transform():
    A, B, C, D = stencil()
    nest = LoopNest([C, D])
    nest.cache_accesses(A, "A_c", nest.get_loops_for(B)[0])
    msg = unchanged_with_buffers(nest, lambda: nest.compute_at(B, nest.get_loops_for(C)[0]))
    assert "reads A_c, which B's definition does not read" in msg


def test_int_producer_with_other_readers_on_every_backend(backend):
    A = Buffer("A", (6,), int32)
    B = Compute("B", (6,), lambda i: A[i] * 3)
    C = Compute("C", (5,), lambda i: B[i] + B[i + 1])
    D = Compute("D", (6,), lambda i: B[5 - i])
    nest = LoopNest([C, D])
    co, ci, ct = nest.split_with_tail(nest.get_loops_for(C)[0], 2)
    nest.compute_at(B, ci)
    a = np.arange(6, dtype=np.int32)
    c, d = np.zeros(5, np.int32), np.zeros(6, np.int32)
    run(nest, [A, C, D], [a, c, d], backend)
    np.testing.assert_array_equal(c, 3 * a[:5] + 3 * a[1:])
    np.testing.assert_array_equal(d, 3 * a[::-1])
    roundtrip(nest, [C, D])


def test_local_copy_at_a_parallel_loop_is_private_to_each_iteration(backend):
    A, B, C, D = stencil()
    nest = LoopNest([C, D])
    i, j = nest.get_loops_for(C)
    nest.compute_at(B, i)
    nest.parallelize(i)
    lines = str(nest.copy().prepare_for_codegen()).splitlines()
    k = lines.index("parallel for (int i_1 = 0; i_1 < 10; i_1++) {")
    assert lines[k + 1] == "  float32 B_local[2, 10]; // alloc"
    a = data()
    c, d = np.zeros((H, W), np.float32), np.zeros(H, np.float32)
    run(nest, [A, C, D], [a, c, d], backend)
    np.testing.assert_allclose(c, c_ref(a), rtol=1e-6)
    np.testing.assert_allclose(d, a[:H, W + 1] * 2 - 1, rtol=1e-6)
    roundtrip(nest, [C, D])


# ------------------------------------------------------------------------------------
# sliding window and storage folding (store_at further out than compute_at)
# ------------------------------------------------------------------------------------
def blur_rows(h, step):
    """C[y, x] = B[step*y, x] + ... + B[step*y + 3, x], B = 2A: a 4-row window moving by step."""
    A = Buffer("A", (step * (h - 1) + 4, 6), float32)
    B = Compute("B", A.shape, lambda y, x: A[y, x] * 2.0)
    C = Compute("C", (h, 6), lambda y, x: B[step * y, x] + B[step * y + 1, x] + B[step * y + 2, x]
                + B[step * y + 3, x])
    return A, B, C


def check_rows(nest, A, C, h, step, backend):
    a = np.random.default_rng(h + step).standard_normal(tuple(int(d) for d in A.shape)).astype(np.float32)
    c = np.zeros((h, 6), np.float32)
    run(nest, [A, C], [a, c], backend)        # IREval poisons fresh storage: a missed row shows
    b = a.astype(np.float64) * 2
    want = sum(b[k:k + step * (h - 1) + 1:step] for k in range(4))
    np.testing.assert_allclose(c, want, rtol=1e-5)


def test_hoisted_storage_of_a_sliding_window_is_folded(backend):
    A, B, C = blur_rows(16, 1)
    nest = LoopNest([C])
    yo, yi = nest.split_with_mask(nest.get_loops_for(C)[0], 8)
    nest.compute_at(B, yi)
    nest.store_at(B, yo)
    text = str(nest)
    lines = str(nest.copy().prepare_for_codegen()).splitlines()
    assert lines[0] == "float32 B[4, 6]; // alloc"                     # the window, not 11 rows
    # after the first row of a strip, only the row the previous row did not compute
    assert lines[3].strip().startswith("for (int y_2 = select(y_1_inner > 0, y_1_outer * 8 + y_1_inner + 3, ")
    assert "B[floormod(y_2, 4) * 6 + x_2] = " in "\n".join(lines)
    assert str(nest) == text                                            # the schedule is unchanged
    check_rows(nest, A, C, 16, 1, backend)
    roundtrip(nest, [C])


def test_window_moving_by_two_and_ragged_strips(backend):
    A, B, C = blur_rows(13, 2)
    nest = LoopNest([C])
    yo, yi = nest.split_with_mask(nest.get_loops_for(C)[0], 4)
    nest.compute_at(B, yi)
    nest.store_at(B, yo)
    check_rows(nest, A, C, 13, 2, backend)
    A, B, C = blur_rows(12, 2)
    nest = LoopNest([C])
    yo, yi, yt = nest.split_with_tail(nest.get_loops_for(C)[0], 5)
    nest.compute_at(B, yi)
    nest.store_at(B, yo)
    assert allocs(nest)[0] == "float32 B[4, 6]; // alloc"
    check_rows(nest, A, C, 12, 2, backend)
    roundtrip(nest, [C])


def test_folded_window_of_a_reduction_per_parallel_row(backend):
    A = Buffer("A", (5, 12), float32)
    B = Compute("B", (5, 12), lambda y, x: A[y, x] + 1.0)
    R = Reduce("R", (5, 10), Sum(), lambda y, x, k: B[y, x + k], (3,))
    nest = LoopNest([R])
    y, x, k = nest.get_loops_for(R)
    nest.compute_at(B, x)
    nest.store_at(B, y)
    nest.parallelize(y)
    lines = str(nest.copy().prepare_for_codegen()).splitlines()
    assert lines[1] == "  float32 B[1, 3]; // alloc"                   # per thread, the 3 columns
    a = np.random.default_rng(5).standard_normal((5, 12)).astype(np.float32)
    r = np.zeros((5, 10), np.float32)
    run(nest, [A, R], [a, r], backend)
    b = a + 1
    np.testing.assert_allclose(r, b[:, :10] + b[:, 1:11] + b[:, 2:12], rtol=1e-5)


def test_no_folding_without_overlap_or_when_the_compute_loop_is_not_serial():
    A, B, C = blur_rows(8, 4)                                           # windows do not overlap
    nest = LoopNest([C])
    yo, yi = nest.split_with_mask(nest.get_loops_for(C)[0], 4)
    nest.compute_at(B, yi)
    nest.store_at(B, yo)
    assert allocs(nest)[0] == "float32 B[16, 6]; // alloc"
    assert "select(" not in str(nest.copy().prepare_for_codegen())
    A, B, C = blur_rows(16, 1)
    nest = LoopNest([C])
    yo, yi = nest.split_with_mask(nest.get_loops_for(C)[0], 8)
    nest.compute_at(B, yi)
    nest.store_at(B, yo)
    nest.parallelize(yi)                  # each row its own B again: nothing slides
    prepared = str(nest.copy().prepare_for_codegen())
    assert "    float32 B[4, 6]; // alloc" in prepared.splitlines()
    assert "floormod" not in prepared and "select(" not in prepared
    check_rows(nest, A, C, 16, 1, "ireval")
