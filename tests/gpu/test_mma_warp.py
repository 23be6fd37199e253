"""One warp's generated ``mma.sync`` tile (ldmatrix-loaded f16/bf16, element-loaded tf32) on the
GPU, against numpy and the CPU model of the PTX fragment layouts. Skipped without PyCUDA, a
device, or on devices older than sm_80."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("pycuda.driver")

from codegen.cuda.compile import compile_cubin  # noqa: E402
from codegen.cuda.launch import get_driver  # noqa: E402
from codegen.cuda.mma import warp_mma  # noqa: E402
from codegen.cuda.mma_source import kernel_name, warp_tile_source  # noqa: E402
from te.lowprec import round_to_tf32  # noqa: E402

STORAGE = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32}


def _run_tile(cuda_device, dtype, b_storage, A, B, C):
    if int(cuda_device["arch"][3:].rstrip("af")) < 80:
        pytest.skip(f"mma.sync m16n8k16/m16n8k8 needs sm_80 or later, the device is {cuda_device['arch']}")
    drv = get_driver()
    mod = drv.module_from_buffer(compile_cubin(warp_tile_source(dtype, b_storage), cuda_device["arch"]))
    fn = mod.get_function(kernel_name(dtype, b_storage))
    b_tile = B if b_storage == "B_kn" else np.ascontiguousarray(B.T)
    a_bits = np.ascontiguousarray(A).view(np.uint16 if dtype != "tf32" else np.float32)
    b_bits = b_tile.view(np.uint16 if dtype != "tf32" else np.float32)
    D = np.full((16, 8), np.nan, np.float32)
    fn(drv.In(a_bits), drv.In(b_bits), drv.In(np.ascontiguousarray(C, np.float32)), drv.Out(D),
       block=(32, 1, 1), grid=(1, 1))
    drv.Context.synchronize()
    return D


@pytest.mark.parametrize("dtype", ["f16", "bf16", "tf32"])
@pytest.mark.parametrize("b_storage", ["B_kn", "B_nk"])
def test_warp_mma_tile_on_gpu_matches_numpy_and_the_model(cuda_device, dtype, b_storage):
    k = 8 if dtype == "tf32" else 16
    shape = "m16n8k8" if dtype == "tf32" else "m16n8k16"
    rng = np.random.default_rng(11)
    A = rng.standard_normal((16, k)).astype(STORAGE[dtype])
    B = rng.standard_normal((k, 8)).astype(STORAGE[dtype])
    if dtype == "tf32":
        A, B = round_to_tf32(A), round_to_tf32(B)
    C = rng.standard_normal((16, 8)).astype(np.float32)
    D = _run_tile(cuda_device, dtype, b_storage, A, B, C)
    expected = A.astype(np.float64) @ B.astype(np.float64) + C
    np.testing.assert_allclose(D, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(D, warp_mma(A.astype(np.float32), B.astype(np.float32), C, shape, dtype),
                               rtol=1e-4, atol=1e-4)
    # small integers: exact on the hardware as in the model, whatever the accumulation order
    Ai = rng.integers(-8, 9, A.shape).astype(STORAGE[dtype])
    Bi = rng.integers(-8, 9, B.shape).astype(STORAGE[dtype])
    Ci = rng.integers(-64, 65, C.shape).astype(np.float32)
    Di = _run_tile(cuda_device, dtype, b_storage, Ai, Bi, Ci)
    model = warp_mma(Ai.astype(np.float32), Bi.astype(np.float32), Ci, shape, dtype)
    np.testing.assert_array_equal(Di, model)


def test_each_lane_writes_the_elements_of_its_fragment(cuda_device):
    # one-hot A picks rows of B; with C = 0 every D element is a single, distinct B value
    A = np.eye(16, dtype=np.float16)
    B = (np.arange(128) - 64).reshape(16, 8).astype(np.float16)
    D = _run_tile(cuda_device, "f16", "B_kn", A, B, np.zeros((16, 8), np.float32))
    np.testing.assert_array_equal(D, B.astype(np.float32))
