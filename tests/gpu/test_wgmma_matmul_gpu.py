"""The warpgroup-MMA matmul tree (Hopper's wgmma.mma_async, sm_90a) on the GPU with each B layout,
operand type and number of shared stages (the MMAs of one iteration in flight beside the next one's copies, where
codegen.cuda.wgmma_overlap allows it), against numpy. Skipped without PyCUDA, a device, or
on devices other than sm_90."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from codegen.cuda.mma_matmul import wgmma_matmul_example


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [dict(M=128, N=128, K=256, BN=64, BK=32, stages=1),
                                   dict(M=128, N=128, K=256, BN=64, BK=32, stages=2),
                                   dict(M=256, N=512, K=256, BN=256, BK=64, stages=3),
                                   dict(M=128, N=256, K=320, BN=128, BK=64, stages=4, b_layout="nk"),
                                   dict(M=256, N=512, K=1024, BN=256, BK=64, stages=4),
                                   dict(M=256, N=512, K=1024, BN=256, BK=64, stages=4, ahead=3),
                                   dict(M=256, N=512, K=1024, BN=256, BK=64, stages=4, swizzle=0),
                                   dict(M=128, N=256, K=256, BN=128, BK=128, stages=2, b_layout="nk"),
                                   dict(M=192, N=96, K=128, BM=192, BN=96, BK=64, stages=2)])
def test_wgmma_matmul_matches_numpy_on_the_gpu(cuda_device, dtype, shape):
    if cuda_device["arch"] not in ("sm_90", "sm_90a"):
        pytest.skip(f"wgmma needs sm_90a, the device is {cuda_device['arch']}")
    ex = wgmma_matmul_example(dtype=dtype, **shape)
    arrays, expected = ex.make(np.random.default_rng(0))
    k = build(ex.nest, ex.args, target="cuda", max_shared_bytes=cuda_device["max_shared_bytes_optin"])
    assert "wgmma.mma_async" in k.source
    k(**arrays)
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("shape", [dict(M=128, N=128, K=256, BN=64, BK=32, stages=2),
                                   dict(M=256, N=512, K=1024, BN=256, BK=32, stages=4),
                                   dict(M=128, N=256, K=512, BN=256, BK=64, stages=2)])
def test_tf32_wgmma_matmul_matches_numpy_within_tf32_rounding(cuda_device, shape):
    if cuda_device["arch"] not in ("sm_90", "sm_90a"):
        pytest.skip(f"wgmma needs sm_90a, the device is {cuda_device['arch']}")
    ex = wgmma_matmul_example(dtype="float32", b_layout="nk", **shape)
    arrays, expected = ex.make(np.random.default_rng(0))
    k = build(ex.nest, ex.args, target="cuda", max_shared_bytes=cuda_device["max_shared_bytes_optin"])
    assert "m64n" in k.source and "k8_tf32" in k.source
    k(**arrays)
    # tf32 keeps 10 bits of mantissa: about 1e-3 of each product, over K products of unit normals
    scale = np.sqrt(shape["K"])
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=0, atol=4e-3 * scale)
