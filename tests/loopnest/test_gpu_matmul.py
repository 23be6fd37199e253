"""nest.gpu_matmul: a lone matmul's loops replaced by a GPU tree (tensor cores or register tiles),
recorded in history, refused with a ScheduleError (the nest unchanged) on anything else."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest, ScheduleError
from te import Buffer, Compute, Reduce, Sum, cast, float32


def matmul(dtype="float16", n=64, nk=False):
    A = Buffer("A", (n, n), dtype)
    B = Buffer("B", (n, n), dtype)
    if nk:
        return A, B, Reduce("C", (n, n), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[j, k], float32), (n,))
    return A, B, Reduce("C", (n, n), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (n,))


@pytest.mark.parametrize("dtype,nk,tiles,tensorized", [
    ("float16", False, dict(BM=64, BN=64, BK=32, WM=32, WN=32), {"kk": "mma_m16n8k16"}),
    ("float8_e4m3", True, dict(BM=64, BN=64, BK=64, WM=32, WN=32), {"kk": "mma_m16n8k32_f8"}),
    ("float32", False, dict(BM=32, BN=32, BK=8, TM=2, TN=2), {}),
    # the register-tiled tree double-buffered through registers, and read in runs of 2 or 4
    ("float32", False, dict(BM=32, BN=32, BK=8, TM=2, TN=2, stages=2), {}),
    ("float32", False, dict(BM=64, BN=64, BK=16, TM=4, TN=4, vector=4), {}),
    ("float32", False, dict(BM=32, BN=32, BK=16, TM=2, TN=2, stages=2, vector=2), {}),
    ("float32", False, dict(BM=64, BN=64, BK=16, TM=4, TN=4, stages=2, vector=4, interleave=False), {}),
])
def test_a_lone_matmul_becomes_a_gpu_tree_that_ireval_runs(dtype, nk, tiles, tensorized):
    A, B, C = matmul(dtype, nk=nk)
    nest = LoopNest([C])
    nest.gpu_matmul(**tiles)
    assert nest.tensorized == tensorized and [h["op"] for h in nest.history] == ["gpu_matmul"]
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((64, 64)).astype(A.dtype.numpy) for _ in range(2))
    c = np.zeros((64, 64), np.float32)
    build(nest, [A, B, C], target="ireval")(A=a, B=b, C=c)
    want = a.astype(np.float64) @ (b.astype(np.float64).T if nk else b.astype(np.float64))
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-3)


def test_anything_else_is_refused_and_the_nest_is_unchanged():
    A, B, C = matmul()
    nest = LoopNest([C])
    nest.split_with_mask(nest.get_loops_for(C)[0], 8)
    before = str(nest)
    with pytest.raises(ScheduleError, match="takes a fresh nest of one matmul tensor"):
        nest.gpu_matmul()
    assert str(nest) == before
    X = Buffer("X", (64,), "float32")
    with pytest.raises(ScheduleError, match="is not C\\[i, j\\] = sum_k"):
        LoopNest([Reduce("S", (4,), Sum(), lambda i, k: X[i * 16 + k], (16,))]).gpu_matmul()
    with pytest.raises(ScheduleError, match="must be multiples of BM"):
        LoopNest([matmul(n=96)[2]]).gpu_matmul(BM=64, BN=64, BK=32, WM=32, WN=32)


@pytest.mark.parametrize("bad,match", [
    (dict(stages=3), r"stages must be 1 or 2, got 3"),
    (dict(vector=3), r"vector \(3\) must be an int >= 1 dividing BK \(8\) and BN \(32\)"),
    (dict(vector=4.0), r"vector \(4\.0\) must be an int"),
    (dict(vector=4), r"must split evenly over the 256 threads, 4 element\(s\) at a time"),
])
def test_the_register_tiled_tree_refuses_stages_and_vectors_it_cannot_build(bad, match):
    A, B, C = matmul("float32")
    nest = LoopNest([C])
    before = str(nest)
    with pytest.raises(ScheduleError, match=match):
        nest.gpu_matmul(False, BM=32, BN=32, BK=8, TM=2, TN=2, **bad)
    assert str(nest) == before and nest.history == []
