"""The tensor-core matmul tree with each way of fetching its tiles (one stage; two stages through
registers; 2 to 4 shared stages filled by cp.async) on the GPU, against numpy. Skipped without
PyCUDA, a device, or on devices older than sm_80."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from codegen.cuda.mma_matmul import mma_matmul_example

TILES = dict(BM=64, BN=64, BK=32, WM=32, WN=32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("fetch", [dict(stages=1), dict(stages=2), dict(stages=2, prefetch="shared"),
                                   dict(stages=3, prefetch="shared"), dict(stages=4, prefetch="shared")])
def test_prefetch_variants_match_numpy_on_the_gpu(cuda_device, dtype, fetch):
    if int(cuda_device["arch"][3:].rstrip("af")) < 80:
        pytest.skip(f"cp.async and mma.sync need sm_80 or later, the device is {cuda_device['arch']}")
    ex = mma_matmul_example(128, 128, 256, dtype=dtype, **TILES, **fetch)
    arrays, expected = ex.make(np.random.default_rng(0))
    build(ex.nest, ex.args, target="cuda")(**arrays)
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-4, atol=1e-3)
