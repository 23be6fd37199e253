"""Kernels that need more than 48 KiB of shared memory take it as dynamic shared memory (built
with a larger ``max_shared_bytes``), on the GPU: a hand-built 52 KB buffer and the tensor-core
matmul with 128 x 128 tiles and four cp.async stages (74 KiB). Skipped without PyCUDA or a
device (and the matmul on devices older than sm_80)."""
from __future__ import annotations

import numpy as np

from codegen import build
from codegen.cuda.mma_matmul import mma_matmul_example
from tests.codegen.test_cuda_emit import _big_shared_nest


def test_a_52kb_shared_buffer_on_the_gpu(cuda_device):
    nest, A, Y = _big_shared_nest()
    k = build(nest, [A, Y], target="cuda", max_shared_bytes=100 * 1024)
    assert k.module.kernels[0].dynamic_shared == 52000
    a = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    y = np.zeros_like(a)
    k(a, y)
    np.testing.assert_array_equal(y, a[:, ::-1] * 2)


def test_a_four_stage_tensor_core_matmul_with_74kib_of_shared_memory(cuda_device):
    import pytest
    if int(cuda_device["arch"][3:].rstrip("af")) < 80:
        pytest.skip(f"cp.async and mma.sync need sm_80 or later, the device is {cuda_device['arch']}")
    ex = mma_matmul_example(256, 256, 256, dtype="float16", BM=128, BN=128, BK=32, WM=64, WN=32, stages=4,
                            prefetch="shared")
    k = build(ex.nest, ex.args, target="cuda", max_shared_bytes=160 * 1024)
    assert k.module.kernels[0].dynamic_shared > 48 * 1024
    arrays, expected = ex.make(np.random.default_rng(0))
    k(**arrays)
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-4, atol=1e-3)
