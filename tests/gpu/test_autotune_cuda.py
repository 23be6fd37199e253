"""autotune(..., target="cuda") with the automatic CUDA space on a GPU: the tuned kernels run
and agree with numpy. Skipped without PyCUDA or a device."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pycuda.driver")

from te import Buffer, Compute, Reduce, Sum, cast, exp, float32  # noqa: E402
from tune import autotune  # noqa: E402


def test_autotune_an_elementwise_chain_on_the_gpu(cuda_device):
    A = Buffer("A", (1 << 16,), "float32")
    B = Compute("B", (1 << 16,), lambda i: exp(A[i]) * 2.0)
    kernel, record = autotune([B], [A, B], target="cuda", trials=4, progress=False)
    a = np.random.default_rng(0).standard_normal(1 << 16).astype(np.float32)
    b = np.zeros_like(a)
    kernel(A=a, B=b)
    np.testing.assert_allclose(b, np.exp(a) * 2.0, rtol=1e-5)


def test_autotune_a_half_precision_matmul_on_tensor_cores(cuda_device):
    A, B = Buffer("A", (256, 256), "float16"), Buffer("B", (256, 256), "float16")
    C = Reduce("C", (256, 256), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (256,))
    kernel, record = autotune([C], [A, B, C], target="cuda", trials=3, progress=False)
    assert "tc_mma_f16(" in kernel.source
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((256, 256)).astype(np.float16) for _ in range(2))
    c = np.zeros((256, 256), np.float32)
    kernel(A=a, B=b, C=c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-3, atol=1e-2)
