"""The CPU model of Hopper's warpgroup MMA (codegen.cuda.wgmma): the accumulator layout
against CuTe's, the canonical layouts and descriptors against a plain matmul, and the
generated test kernel compiled for sm_90a."""
from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

from codegen.cuda.wgmma import (acc_coord, acc_layout, canonical_offset, decode_descriptor, descriptor,
                                descriptor_swizzle, swizzled, tile_offsets, warpgroup_mma)
from codegen.cuda.wgmma_source import warpgroup_tile_source, wgmma_function


@pytest.mark.parametrize("n", [8, 24, 128, 256])
def test_accumulator_layout_is_cutes_and_a_bijection(n):
    L = acc_layout(n)
    seen = set()
    for t in range(128):
        for v in range(n // 2):
            idx = L(t, v)
            assert acc_coord(t, v) == (idx % 64, idx // 64)
            seen.add(acc_coord(t, v))
    assert seen == {(r, c) for r in range(64) for c in range(n)}


@pytest.mark.parametrize("major,rows,cols", [("K", 128, 64), ("MN", 64, 256), ("K", 64, 16), ("MN", 16, 8)])
def test_a_dense_tile_fills_its_bytes_once(major, rows, cols):
    lbo, sbo = tile_offsets(major, rows, cols)
    r, c = np.meshgrid(range(rows), range(cols), indexing="ij")
    offs = canonical_offset(major, r, c, lbo, sbo)
    assert sorted(offs.ravel().tolist()) == list(range(0, 2 * rows * cols, 2))


def _image(A, B, trans_b, a_at, b_at, lbo_sbo_a, lbo_sbo_b, size=1 << 16, swizzle=0):
    smem = np.zeros(size, np.uint8)
    n = A.dtype.itemsize
    for (i, j), x in np.ndenumerate(A):
        o = swizzled(a_at + canonical_offset("K", i, j, *lbo_sbo_a, n, swizzle), swizzle)
        smem[o:o + n] = np.frombuffer(x.tobytes(), np.uint8)
    Bs = B if trans_b else B.T
    for (i, j), x in np.ndenumerate(Bs):
        o = swizzled(b_at + canonical_offset("MN" if trans_b else "K", i, j, *lbo_sbo_b, n, swizzle), swizzle)
        smem[o:o + n] = np.frombuffer(x.tobytes(), np.uint8)
    return smem


def _as_tile(acc: np.ndarray) -> np.ndarray:
    """The 64 x N tile that the accumulators ``acc`` (128 threads x N / 2 values) hold."""
    D = np.zeros((64, 2 * acc.shape[1]))
    t, v = np.meshgrid(range(128), range(acc.shape[1]), indexing="ij")
    D[acc_coord(t, v)] = acc
    return D


@pytest.mark.parametrize("dtype,npdt", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
@pytest.mark.parametrize("trans_b", [True, False])
def test_model_of_a_k_step_inside_a_larger_tile_is_a_matmul(dtype, npdt, trans_b):
    # the second k step (k 16..31) of a 128 x 64 A tile's second 64 rows and of a 64 x 32 B tile
    rng = np.random.default_rng(3)
    A = rng.integers(-4, 5, (128, 64)).astype(npdt)
    B = rng.integers(-4, 5, (64, 32)).astype(npdt)
    la, lb = tile_offsets("K", 128, 64), (tile_offsets("MN", 64, 32) if trans_b else tile_offsets("K", 32, 64))
    smem = _image(A, B, trans_b, 0, 16384, la, lb)
    da = descriptor(0 + 8 * la[1] + 2 * la[0], *la)            # rows 64.. (8 core-matrix rows), k 16..
    db = descriptor(16384 + 2 * lb[0], *lb)                      # k 16..
    acc = np.ones((128, 16), np.float32)
    out = warpgroup_mma(smem, da, db, acc, 32, dtype, trans_b)
    D = _as_tile(out)
    expected = A[64:, 16:32].astype(np.float64) @ B[16:32].astype(np.float64) + 1
    np.testing.assert_array_equal(D, expected)


def test_a_swizzled_atom_stores_each_row_in_its_own_128_bytes_with_the_chunks_permuted():
    r, c = np.meshgrid(range(16), range(64), indexing="ij")
    offs = swizzled(canonical_offset("K", r, c, lbo=16, sbo=1024, swizzle=128))
    assert sorted(offs.ravel().tolist()) == list(range(0, 2 * 16 * 64, 2))
    assert (offs // 128 == r).all()                                    # row r: bytes [128 r, 128 r + 128)
    assert ((offs % 128) // 16 == (c // 8) ^ (r % 8)).all()            # chunk c // 8 at chunk (c // 8) ^ r


@pytest.mark.parametrize("dtype,npdt", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
@pytest.mark.parametrize("trans_b", [True, False])
def test_model_of_swizzled_operands_is_a_matmul(dtype, npdt, trans_b):
    # 128-byte swizzled atoms: A 128 x 64 (K-major, one atom along K), B 64 x 128 (MN-major: two
    # atoms along N, LBO apart) or 128 x 64 (K-major); the third k step of A's second 64 rows
    rng = np.random.default_rng(4)
    A = rng.integers(-4, 5, (128, 64)).astype(npdt)
    B = rng.integers(-4, 5, (64, 128)).astype(npdt)
    la, lb = (16, 1024), ((64 * 128, 1024) if trans_b else (16, 1024))
    smem = _image(A, B, trans_b, 0, 16384, la, lb, swizzle=128)
    da = descriptor(8 * 1024 + 2 * 32, *la, swizzle=128)             # rows 64..: 8 atoms on; k 32..: 64 bytes in
    db = descriptor(16384 + (4 * 1024 if trans_b else 64), *lb, swizzle=128)   # k 32..
    out = warpgroup_mma(smem, da, db, np.zeros((128, 64), np.float32), 128, dtype, trans_b)
    D = _as_tile(out)
    np.testing.assert_array_equal(D, A[64:, 32:48].astype(np.float64) @ B[32:48].astype(np.float64))


def test_model_of_tf32_operands_is_a_matmul():
    # tf32: 128-byte rows of 32 float32 elements, both operands K-major; A 128 x 64 (two atoms
    # along K, LBO apart), B 64 x 64 (N x K); the k step 40..47 (second atom, 32 bytes in) of
    # A's second 64 rows. Values tf32 holds exactly (the hardware's rounding is unspecified).
    rng = np.random.default_rng(6)
    A = (rng.integers(-64, 65, (128, 64)) / 8).astype(np.float32)
    B = (rng.integers(-64, 65, (64, 64)) / 8).astype(np.float32)
    la, lb = (16 * 1024, 1024), (8 * 1024, 1024)          # LBO: the next atom along K (128 or 64 rows on)
    smem = _image(A, B.T, False, 0, 32768, la, lb, size=1 << 17, swizzle=128)
    da = descriptor(8 * 1024 + la[0] + 32, *la, swizzle=128)          # rows 64..: 8 atoms on
    db = descriptor(32768 + lb[0] + 32, *lb, swizzle=128)
    out = warpgroup_mma(smem, da, db, np.zeros((128, 32), np.float32), 64, "tf32")
    D = _as_tile(out)
    np.testing.assert_array_equal(D, A[64:, 40:48].astype(np.float64) @ B.T[40:48].astype(np.float64))
    with pytest.raises(ValueError, match="K-major only"):
        warpgroup_mma(smem, da, db, np.zeros((128, 32), np.float32), 64, "tf32", trans_b=True)


def test_descriptor_fields_and_refusals():
    assert decode_descriptor(descriptor(227 * 1024 - 16, 128, 8192)) == (227 * 1024 - 16, 128, 8192)
    with pytest.raises(ValueError, match="multiple of 16"):
        descriptor(8, 128, 256)
    assert decode_descriptor(descriptor(2048, 16, 1024, swizzle=128)) == (2048, 16, 1024)
    assert descriptor_swizzle(descriptor(0, 128, 256)) == 0
    with pytest.raises(ValueError, match="modes 0 and 1"):
        descriptor_swizzle(descriptor(0, 128, 256) | (2 << 62))      # the 64-byte swizzle
    with pytest.raises(ValueError, match="swizzle must be"):
        descriptor(0, 128, 256, swizzle=64)
    with pytest.raises(ValueError, match="N must be"):
        wgmma_function(12)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("n,dtype,trans_b", [(256, "f16", True), (64, "bf16", False)])
def test_the_tile_kernel_compiles_to_wgmma_for_sm90a_without_spills(n, dtype, trans_b):
    from codegen.cuda.compile import compile_ptx, ptxas_report
    src = warpgroup_tile_source(n, dtype, trans_b)
    assert f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype}" in compile_ptx(src, "sm_90a")
    tf32 = wgmma_function(n, "tf32")[1]
    assert "1, 1, 1;" in tf32 and f"m64n{n}k8.f32.tf32.tf32" in tf32      # no transpose operands
    assert "wgmma.mma_async" not in compile_ptx(src, "sm_90")      # the guard: plain sm_90 has none
    assert ptxas_report(src, "sm_90a")["spill_stores"] == 0
