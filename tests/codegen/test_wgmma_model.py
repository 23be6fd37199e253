"""The CPU model of Hopper's warpgroup MMA (codegen.cuda.wgmma): the accumulator layout
against CuTe's, the canonical layouts and descriptors against a plain matmul, and the
generated test kernel compiled for sm_90a."""
from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

from codegen.cuda.wgmma import (acc_coord, acc_layout, canonical_offset, decode_descriptor, descriptor,
                                tile_offsets, warpgroup_mma)
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


def _image(A, B, trans_b, a_at, b_at, lbo_sbo_a, lbo_sbo_b, size=1 << 16):
    smem = np.zeros(size, np.uint8)
    for (i, j), x in np.ndenumerate(A):
        o = a_at + canonical_offset("K", i, j, *lbo_sbo_a)
        smem[o:o + 2] = np.frombuffer(x.tobytes(), np.uint8)
    Bs = B if trans_b else B.T
    for (i, j), x in np.ndenumerate(Bs):
        o = b_at + canonical_offset("MN" if trans_b else "K", i, j, *lbo_sbo_b)
        smem[o:o + 2] = np.frombuffer(x.tobytes(), np.uint8)
    return smem


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
    D = np.zeros((64, 32))
    t, v = np.meshgrid(range(128), range(16), indexing="ij")
    D[acc_coord(t, v)] = out
    expected = A[64:, 16:32].astype(np.float64) @ B[16:32].astype(np.float64) + 1
    np.testing.assert_array_equal(D, expected)


def test_descriptor_fields_and_refusals():
    assert decode_descriptor(descriptor(227 * 1024 - 16, 128, 8192)) == (227 * 1024 - 16, 128, 8192)
    with pytest.raises(ValueError, match="multiple of 16"):
        descriptor(8, 128, 256)
    with pytest.raises(ValueError, match="swizzle"):
        decode_descriptor(descriptor(0, 128, 256) | (1 << 62))
    with pytest.raises(ValueError, match="N must be"):
        wgmma_function(12)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("n,dtype,trans_b", [(256, "f16", True), (64, "bf16", False)])
def test_the_tile_kernel_compiles_to_wgmma_for_sm90a_without_spills(n, dtype, trans_b):
    from codegen.cuda.compile import compile_ptx, ptxas_report
    src = warpgroup_tile_source(n, dtype, trans_b)
    assert f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype}" in compile_ptx(src, "sm_90a")
    assert "wgmma.mma_async" not in compile_ptx(src, "sm_90")      # the guard: plain sm_90 has none
    assert ptxas_report(src, "sm_90a")["spill_stores"] == 0
