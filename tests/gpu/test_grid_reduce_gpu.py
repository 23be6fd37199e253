"""auto_schedule("cuda") of reductions with few outputs and many terms (the sum of a whole
array: loopnest.auto.gpu.grid_reduce, partials by many blocks, then a block per output) on
the GPU at sizes that take its real partial counts, against numpy. Skipped without PyCUDA
or a CUDA device."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pycuda.driver")

from codegen import build  # noqa: E402
from loopnest import LoopNest  # noqa: E402
from te import Buffer, Max, Reduce, Sum  # noqa: E402


@pytest.mark.parametrize("outputs, rows, cols, reducer", [(1, 2048, 2048, Sum), (3, 1000, 777, Sum),
                                                          (1, 4096, 1024, Max)])
def test_a_whole_array_reduction_splits_over_blocks_and_matches_numpy(cuda_device, outputs, rows, cols, reducer):
    A = Buffer("A", (outputs, rows, cols), "float32")
    S = Reduce("S", (outputs,), reducer(), lambda o, i, j: A[o, i, j], (rows, cols))
    kernel = build(LoopNest([S]), [A, S], target="cuda", schedule="auto")
    assert "partials per output" in str(kernel.auto_schedule_report)
    a = np.random.default_rng(outputs).random((outputs, rows, cols), dtype=np.float32)
    got = np.zeros(outputs, np.float32)
    kernel(a, got)
    want = a.astype(np.float64).sum((1, 2)) if reducer is Sum else a.max((1, 2))
    np.testing.assert_allclose(got, want, rtol=1e-5)
