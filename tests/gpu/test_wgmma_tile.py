"""One warpgroup's generated ``wgmma.mma_async`` tile on the GPU (sm_90a), against numpy and
the CPU model of the accumulator fragment and the canonical shared-memory layouts
(:mod:`codegen.cuda.wgmma`). Skipped without PyCUDA, a device, or on devices other than
sm_90."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("pycuda.driver")

from codegen.cuda.compile import compile_cubin  # noqa: E402
from codegen.cuda.launch import get_driver  # noqa: E402
from codegen.cuda.wgmma_source import warpgroup_tile_source  # noqa: E402

STORAGE = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _run(cuda_device, n, dtype, trans_b, A, B):
    if cuda_device["arch"] not in ("sm_90", "sm_90a"):
        pytest.skip(f"wgmma needs sm_90a, the device is {cuda_device['arch']}")
    drv = get_driver()
    mod = drv.module_from_buffer(compile_cubin(warpgroup_tile_source(n, dtype, trans_b), "sm_90a"))
    fn = mod.get_function("wgmma_tile_kernel")
    b = B if trans_b else np.ascontiguousarray(B.T)
    D = np.full((64, n), np.nan, np.float32)
    fn(drv.In(np.ascontiguousarray(A).view(np.uint16)), drv.In(np.ascontiguousarray(b).view(np.uint16)),
       drv.Out(D), block=(128, 1, 1), grid=(1, 1))
    drv.Context.synchronize()
    return D


@pytest.mark.parametrize("n,dtype,trans_b", [(8, "f16", True), (64, "f16", True), (256, "f16", True),
                                             (128, "bf16", True), (64, "f16", False), (32, "bf16", False)])
def test_warpgroup_tile_on_gpu_matches_numpy(cuda_device, n, dtype, trans_b):
    rng = np.random.default_rng(n)
    A = rng.integers(-8, 9, (64, 16)).astype(STORAGE[dtype])
    B = rng.integers(-8, 9, (16, n)).astype(STORAGE[dtype])
    D = _run(cuda_device, n, dtype, trans_b, A, B)
    np.testing.assert_array_equal(D, A.astype(np.float64) @ B.astype(np.float64))
    A = rng.standard_normal((64, 16)).astype(STORAGE[dtype])
    B = rng.standard_normal((16, n)).astype(STORAGE[dtype])
    D = _run(cuda_device, n, dtype, trans_b, A, B)
    np.testing.assert_allclose(D, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-4, atol=1e-4)
