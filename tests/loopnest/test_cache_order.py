"""cache_accesses(..., order=...): a local copy with its dimensions permuted (a transposed
pack): golden text, the same values on IREval and LLVM for reads, writes and symbolic
sizes, refusals that leave the nest unchanged, history replay; and the automatic
scheduler's transposed pack of ``A @ B.T``."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen import build
from loopnest import LoopNest, ScheduleError, Target
from te import Buffer, Compute, Reduce, Sum, Var


def _abt(n=8, m=10, k=12):
    A = Buffer("A", (n, k), "float32")
    B = Buffer("B", (m, k), "float32")
    return A, B, Reduce("C", (n, m), Sum(), lambda i, j, r: A[i, r] * B[j, r], (k,))


def test_a_transposed_copy_golden():
    A, B, C = _abt()
    nest = LoopNest([C])
    local = nest.cache_accesses(B, "B_t", nest.get_loops_for(C)[0], order=(1, 0))
    assert local.shape == (12, 10)
    assert str(nest) == """\
for (int i = 0; i < 8; i++) {
  for (int B_t_i0 = 0; B_t_i0 < 12; B_t_i0++) {
    for (int B_t_i1 = 0; B_t_i1 < 10; B_t_i1++) {
      B_t[B_t_i0, B_t_i1] = B[B_t_i1, B_t_i0];
    }
  }
  for (int j = 0; j < 10; j++) {
    C[i, j] = 0.0f;
    for (int r = 0; r < 12; r++) {
      C[i, j] = C[i, j] + A[i, r] * B_t[r, j];
    }
  }
}"""
    assert str(LoopNest([C]).replay(nest.history_json())) == str(nest)


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_a_transposed_accumulator_is_copied_back_transposed(target):
    # C's tile cached transposed: read, updated and written back through the permuted copy
    A, B, C = _abt()
    nest = LoopNest([C])
    i, j, r = nest.get_loops_for(C)
    nest.cache_accesses(C, "C_t", i, order=(1, 0))
    a = np.random.default_rng(0).standard_normal((8, 12)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((10, 12)).astype(np.float32)
    c = np.full((8, 10), np.nan, np.float32)
    build(nest, [A, B, C], target=target)(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.T, rtol=1e-5, atol=1e-5)


def test_a_permuted_copy_of_three_dimensions_with_symbolic_sizes():
    N = Var("N")
    X = Buffer("X", (N, 3, 5), "float32")
    Y = Compute("Y", (N, 3, 5), lambda a, b, c: X[a, b, c] * 2.0 + X[a, 2 - b, 4 - c])
    nest = LoopNest([Y])
    nest.cache_accesses(X, "X_p", nest.get_loops_for(Y)[0], order=[2, 0, 1])
    x = np.random.default_rng(2).standard_normal((4, 3, 5)).astype(np.float32)
    for target in ("ireval", "llvm"):
        y = np.zeros((4, 3, 5), np.float32)
        build(nest, [X, Y, N], target=target)(x, y, 4)
        np.testing.assert_allclose(y, x * 2.0 + x[:, ::-1, ::-1], rtol=1e-6)


@pytest.mark.parametrize("order", [(0, 0), (0, 1, 2), (1,), "10", (0, 2), (True, False)])
def test_an_order_that_is_not_a_permutation_is_refused_and_the_nest_is_unchanged(order):
    A, B, C = _abt()
    nest = LoopNest([C])
    before = str(nest)
    with pytest.raises(ScheduleError, match="order must be a permutation of B's dimensions"):
        nest.cache_accesses(B, "B_t", nest.get_loops_for(C)[0], order=order)
    assert str(nest) == before and not nest.history


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 30), m=st.integers(1, 40), k=st.integers(1, 20), bits=st.sampled_from([256, 512]))
def test_auto_schedule_packs_b_of_a_times_b_transposed_transposed(n, m, k, bits):
    A, B, C = _abt(n, m, k)
    nest = LoopNest([C])
    nest.auto_schedule(Target(vector_bits=bits, vector_registers=32, cores=2))
    packs = [h for h in nest.history if h["op"] == "cache_accesses" and h["args"][1] == "B_pack"]
    assert all(h["kwargs"].get("order") == [1, 0] for h in packs)
    a = np.random.default_rng(n).standard_normal((n, k)).astype(np.float32)
    b = np.random.default_rng(m).standard_normal((m, k)).astype(np.float32)
    c = np.full((n, m), np.nan, np.float32)
    build(nest, [A, B, C], target="llvm")(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.T.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_the_automatic_scheduler_reports_and_records_the_transposed_pack():
    A, B, C = _abt(64, 64, 64)
    nest = LoopNest([C])
    assert "B packed transposed" in str(nest.auto_schedule(Target(vector_bits=512, vector_registers=32, cores=2)))
    packs = [h["kwargs"] for h in nest.history if h["op"] == "cache_accesses" and h["args"][1] == "B_pack"]
    assert packs == [{"order": [1, 0]}]


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("rows", [70, 1030])
def test_leftover_rows_read_the_same_transposed_pack(rows, overlap, monkeypatch):
    """The rows the register tile leaves over run inside the column tile loop, after the
    tiles, and read its packed copy of B: B is transposed once (read in place, or packed
    again, it was transposed twice: x @ W.T 1024 took 7.4 ms against 6.9). With the last row
    tile shifted back (``row_tiles``, the default), no rows are left over."""
    from loopnest.auto import templates
    if not overlap:
        tiles = templates.row_tiles
        monkeypatch.setattr(templates, "row_tiles", lambda nest, loop, n, overlap=True: tiles(nest, loop, n, False))
    A, B, C = _abt(rows, 64, 32)
    nest = LoopNest([C])
    nest.auto_schedule(Target(vector_bits=512, vector_registers=32, cores=2))
    assert any(h["op"] == "fuse" for h in nest.history) != overlap
    assert any(h["op"] == "split_with_overlap" for h in nest.history) == overlap
    reads_of_b = [line for line in str(nest).splitlines() if "B[" in line]
    assert len(reads_of_b) == 1 and reads_of_b[0].strip().startswith("B_pack["), reads_of_b
    a = np.random.default_rng(rows).standard_normal((rows, 32)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32)
    c = np.full((rows, 64), np.nan, np.float32)
    build(nest, [A, B, C], target="llvm")(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.T.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_a_cache_at_a_tail_loop_holds_one_row_at_index_0(target):
    """The row ``i_tail + floordiv(M, 4) * 4`` of a tail loop ``i_tail < floormod(M, 4)``: its
    region is one row for every M (the bounds' two forms did not cancel: the copy ran over
    ``floordiv(i_tail * 3 + M + 3, 4) * 4 - ...`` rows), and the body reads the copy at row 0
    (not at a difference of those forms that only equals 0), so the copy can live in registers."""
    M = Var("M")
    X = Buffer("X", (M, 8), "float32")
    Y = Compute("Y", (M, 8), lambda i, j: X[i, j] * 2.0)
    nest = LoopNest([Y])
    _, _, tail = nest.split_with_tail(nest.get_loops_for(Y)[0], 4)
    local = nest.cache_accesses(nest.buffer("X"), "X_rest", tail)
    assert local.shape == (1, 8)
    text = str(nest)
    assert "X_rest[0, X_rest_i1] = X[i_tail + floordiv(M, 4) * 4, X_rest_i1];" in text
    assert "Y[i_tail + floordiv(M, 4) * 4, j_1] = X_rest[0, j_1] * 2.0f;" in text
    k = build(nest, [X, Y, M], target=target)
    for m in (3, 4, 7):
        x = np.arange(m * 8, dtype=np.float32).reshape(m, 8)
        y = np.full((m, 8), np.nan, np.float32)
        k(x, y, m)
        np.testing.assert_array_equal(y, x * 2)
