"""The tensor-core matmul as a test and benchmark example (its statement tree lives in
``loopnest.transforms.gpu_matmul``, re-exported here).

>>> ex = mma_matmul_example()
>>> ex.name, ex.nest.tensorized
('matmul_mma_float16', {'kk': 'mma_m16n8k16'})
"""
from __future__ import annotations

import numpy as np

from te import Buffer, Reduce, Sum, cast, float32
from loopnest.transforms.gpu_matmul import MMA_INTRINSIC, fragment_col, fragment_row, mma_matmul

__all__ = ["MMA_INTRINSIC", "fragment_row", "fragment_col", "mma_matmul", "mma_matmul_example", "wgmma_matmul_example"]


def _matmul_operands(M: int, N: int, K: int, dtype: str, nk: bool):
    """``A`` (M x K), ``B`` (N x K with ``nk``, else K x N) of ``dtype`` and ``C = A @ B`` in
    float32, and ``make(rng)``: random inputs and the float64 numpy reference."""
    A = Buffer("A", (M, K), dtype)
    B = Buffer("B", (N, K) if nk else (K, N), dtype)
    if nk:
        C = Reduce("C", (M, N), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[j, k], float32), (K,))
    else:
        C = Reduce("C", (M, N), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (K,))
    npdt = A.dtype.numpy

    def make(rng):
        a = rng.standard_normal((M, K)).astype(npdt)
        b = rng.standard_normal((N, K) if nk else (K, N)).astype(npdt)
        bt = b.astype(np.float64).T if nk else b.astype(np.float64)
        return ({"A": a, "B": b, "C": np.zeros((M, N), np.float32)}, {"C": a.astype(np.float64) @ bt})
    return A, B, C, make


def mma_matmul_example(M: int = 128, N: int = 128, K: int = 64, dtype: str = "float16", **tiles):
    """An :class:`codegen.cuda.examples.Example` of :func:`mma_matmul` (random inputs, a
    float64 numpy reference); float8 takes B as N x K (``b_layout="nk"``).

    >>> ex = mma_matmul_example()
    >>> ex.name, [a.name for a in ex.args]
    ('matmul_mma_float16', ['A', 'B', 'C'])
    """
    from .examples import Example, _hand_nest

    nk = dtype.startswith("float8")
    A, B, C, make = _matmul_operands(M, N, K, dtype, nk)
    root, scratch = mma_matmul(A, B, C, b_layout="nk" if nk else "kn", **tiles)
    nest = _hand_nest([C], root, scratch)
    nest.tensorize("kk", MMA_INTRINSIC[str(A.dtype)])
    tol = (5e-3, 5e-2) if dtype == "float32" else (1e-4, 1e-3)    # tf32 rounds the operands
    return Example(f"matmul_mma_{A.dtype}", nest, [A, B, C], make, rtol=tol[0], atol=tol[1])


def wgmma_matmul_example(M: int = 128, N: int = 64, K: int = 64, dtype: str = "float16", b_layout: str = "kn",
                         **tiles):
    """An :class:`codegen.cuda.examples.Example` of Hopper's warpgroup-MMA matmul
    (:func:`loopnest.transforms.gpu_wgmma.wgmma_matmul`, declared with ``tensorize``);
    float32 takes tf32 (B N x K).

    >>> ex = wgmma_matmul_example(BN=64, BK=32, stages=2)
    >>> ex.name, ex.nest.tensorized
    ('matmul_wgmma_float16', {'kk': 'wgmma_m64nNk16'})
    >>> wgmma_matmul_example(dtype="float32", b_layout="nk", BN=64, BK=32, stages=2).nest.tensorized
    {'kk': 'wgmma_m64nNk8_tf32'}
    """
    from loopnest import LoopNest
    from .examples import Example

    A, B, C, make = _matmul_operands(M, N, K, dtype, b_layout == "nk")
    nest = LoopNest([C])
    nest.gpu_matmul(True, wgmma=True, **tiles)
    rtol, atol = (5e-3, 5e-2) if dtype == "float32" else (1e-4, 1e-3)       # tf32 rounds the operands
    return Example(f"matmul_wgmma_{A.dtype}", nest, [A, B, C], make, rtol=rtol, atol=atol)
