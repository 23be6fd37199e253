"""Tensor views and partition views: the Tile IR document's rules, end to end."""
import numpy as np
import pytest

from te import Buffer, Compute, float32
from te.layout import Layout, column_major, row_major
from te.view import PartitionView, TensorView
from loopnest import LoopNest
from codegen import build


def run(outputs, args, arrays, backend):
    k = build(LoopNest(outputs), args, target=backend)
    k(*arrays)


def test_transpose_view(backend):
    A = Buffer("A", (6, 8), float32)
    At = TensorView(A, (8, 6), (1, 8), name="At")
    T = Compute("T", (8, 6), lambda i, j: At[i, j] * 2.0)
    a = np.arange(48, dtype=np.float32).reshape(6, 8)
    t = np.empty((8, 6), np.float32)
    run([T], [A, T], [a, t], backend)
    np.testing.assert_array_equal(t, a.T * 2)


def test_strided_view_with_offset(backend):
    A = Buffer("A", (16,), float32)
    V = TensorView(A, (5,), (3,), offset=1, name="V")      # A[1], A[4], ..., A[13]
    B = Compute("B", (5,), lambda i: V[i])
    a = np.arange(16, dtype=np.float32)
    b = np.empty(5, np.float32)
    run([B], [A, B], [a, b], backend)
    np.testing.assert_array_equal(b, a[1::3][:5])


def test_partition_index_space_is_ceildiv():
    # the document's example: a (64, 256) view in (128, 128) tiles has a (1, 2) index space
    assert PartitionView(Buffer("V", (64, 256), float32), (128, 128)).grid_shape == (1, 2)
    assert PartitionView(Buffer("V", (8192, 128), float32), (128, 4)).grid_shape == (64, 32)


def test_partition_tiles_must_be_powers_of_two():
    with pytest.raises(ValueError, match="powers of two"):
        PartitionView(Buffer("V", (16,), float32), (3,))


def test_partition_out_of_bounds_loads_give_padding(backend):
    A = Buffer("A", (5, 6), float32)
    P = PartitionView(A, (4, 4), padding=-1.0)
    gi, gj = P.grid_shape
    T = Compute("T", (gi, gj, 4, 4), lambda I, J, i, j: P[I, J, i, j])
    a = np.arange(30, dtype=np.float32).reshape(5, 6)
    t = np.empty((2, 2, 4, 4), np.float32)
    run([T], [A, T], [a, t], backend)
    padded = np.full((8, 8), -1.0, np.float32)
    padded[:5, :6] = a
    want = padded.reshape(2, 4, 2, 4).transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(t, want)


def test_partition_dim_map_swaps_tile_dimensions(backend):
    A = Buffer("A", (4, 8), float32)
    P = PartitionView(A, (2, 4), dim_map=[1, 0], padding=0.0)   # tile dim 0 runs along view dim 1
    assert P.grid_shape == (4, 1)     # 8 / 2 tiles along view dim 1, 4 / 4 along view dim 0
    T = Compute("T", (4, 1, 2, 4), lambda I, J, i, j: P[I, J, i, j])
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    t = np.empty((4, 1, 2, 4), np.float32)
    run([T], [A, T], [a, t], backend)
    for I in range(4):
        for J in range(1):
            for i in range(2):
                for j in range(4):
                    row, col = J * 4 + j, I * 2 + i
                    assert t[I, J, i, j] == a[row, col]


def test_column_major_and_composed_layout_buffers_match_row_major(backend):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((6, 4)).astype(np.float32)
    results = []
    for layout, arr in [(None, np.ascontiguousarray(data)), (column_major(6, 4), np.asfortranarray(data))]:
        A = Buffer("A", (6, 4), float32, layout=layout)
        B = Compute("B", (6, 4), lambda i, j: A[i, j] * 3.0 + 1.0)
        b = np.empty((6, 4), np.float32)
        run([B], [A, B], [arr, b], backend)
        results.append(b)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0], data * 3 + 1, rtol=1e-6)


def test_composed_layout_buffer(backend):
    # hidet composition: row_major(2, 2) * row_major(3, 4) is a (6, 8) layout of 2 x 2 row-major
    # blocks of 3 x 4 row-major tiles; read element (i, j) through it.
    lay = row_major(2, 2) * row_major(3, 4)
    assert lay.extents == (6, 8)
    A = Buffer("A", (6, 8), float32, layout=lay)
    B = Compute("B", (6, 8), lambda i, j: A[i, j])
    storage = np.arange(48, dtype=np.float32)
    want = np.array([[storage[lay(i, j)] for j in range(8)] for i in range(6)], np.float32)
    # a hierarchical layout has no numpy strides: the kernel takes its storage, in order
    b = np.empty((6, 8), np.float32)
    k = build(LoopNest([B]), [A, B], target=backend)
    k(storage.reshape(6, 8), b)
    np.testing.assert_array_equal(b, want)


def test_wrong_strides_are_refused():
    A = Buffer("A", (6, 4), float32, layout=column_major(6, 4))
    B = Compute("B", (6, 4), lambda i, j: A[i, j])
    k = build(LoopNest([B]), [A, B], target="ireval")
    with pytest.raises(ValueError, match="argument A .* strides"):
        k(np.zeros((6, 4), np.float32), np.zeros((6, 4), np.float32))


def test_views_of_tensors_are_refused():
    A = Buffer("A", (4,), float32)
    B = Compute("B", (4,), lambda i: A[i])
    with pytest.raises(TypeError, match="views of computed tensors"):
        TensorView(B, (4,), (1,))
