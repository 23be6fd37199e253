"""Built-in kernels to tune (for the command line and the tests): each returns a
``Workload`` with the outputs, the kernel arguments and a numpy reference.

>>> w = WORKLOADS["matmul"](M=8, N=8, K=8)
>>> [a.name for a in w.args]
['A', 'B', 'C']
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from te import Buffer, Compute, Max, Reduce, Sum, exp, float32

__all__ = ["Workload", "matmul", "conv2d", "softmax", "elementwise", "WORKLOADS"]


@dataclass
class Workload:
    """A computation to tune: outputs, kernel args, a numpy reference and its flop count."""

    name: str
    outputs: list
    args: list
    reference: Callable[[dict], Any]
    flops: int


def matmul(M: int = 128, N: int = 128, K: int = 128, dtype=float32) -> Workload:
    """C[i, j] = sum_k A[i, k] * B[k, j]."""
    A = Buffer("A", (M, K), dtype)
    B = Buffer("B", (K, N), dtype)
    C = Reduce("C", (M, N), Sum(), lambda i, j, k: A[i, k] * B[k, j], (K,))

    def ref(ins):
        return {"C": ins["A"].astype(np.float64) @ ins["B"].astype(np.float64)}
    return Workload("matmul", [C], [A, B, C], ref, 2 * M * N * K)


def conv2d(batch: int = 1, in_ch: int = 16, height: int = 16, width: int = 16, out_ch: int = 16,
           kernel: int = 3, dtype=float32) -> Workload:
    """Direct 2-D convolution, NCHW, stride 1, no padding: O[n, f, y, x] = sum I[n, c, y+ry, x+rx] W[f, c, ry, rx]."""
    H, W = height - kernel + 1, width - kernel + 1
    I = Buffer("I", (batch, in_ch, height, width), dtype)
    Wt = Buffer("W", (out_ch, in_ch, kernel, kernel), dtype)
    O = Reduce("O", (batch, out_ch, H, W), Sum(),
               lambda n, f, y, x, c, ry, rx: I[n, c, y + ry, x + rx] * Wt[f, c, ry, rx], (in_ch, kernel, kernel))

    def ref(ins):
        i, w = ins["I"].astype(np.float64), ins["W"].astype(np.float64)
        out = np.zeros((batch, out_ch, H, W))
        for ry in range(kernel):
            for rx in range(kernel):
                out += np.einsum("nchw,fc->nfhw", i[:, :, ry:ry + H, rx:rx + W], w[:, :, ry, rx])
        return {"O": out}
    return Workload("conv2d", [O], [I, Wt, O], ref, 2 * batch * out_ch * H * W * in_ch * kernel * kernel)


def softmax(rows: int = 128, cols: int = 128, dtype=float32) -> Workload:
    """Row softmax: max, exp(x - max), sum, divide."""
    X = Buffer("X", (rows, cols), dtype)
    M = Reduce("M", (rows,), Max(), lambda i, k: X[i, k], (cols,))
    E = Compute("E", (rows, cols), lambda i, j: exp(X[i, j] - M[i]))
    S = Reduce("S", (rows,), Sum(), lambda i, k: E[i, k], (cols,))
    Y = Compute("Y", (rows, cols), lambda i, j: E[i, j] / S[i])

    def ref(ins):
        x = ins["X"].astype(np.float64)
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return {"Y": e / e.sum(axis=1, keepdims=True)}
    return Workload("softmax", [Y], [X, Y], ref, 4 * rows * cols)


def elementwise(rows: int = 256, cols: int = 256, dtype=float32) -> Workload:
    """D = A * B + C."""
    A = Buffer("A", (rows, cols), dtype)
    B = Buffer("B", (rows, cols), dtype)
    Cb = Buffer("C", (rows, cols), dtype)
    D = Compute("D", (rows, cols), lambda i, j: A[i, j] * B[i, j] + Cb[i, j])

    def ref(ins):
        return {"D": ins["A"].astype(np.float64) * ins["B"] + ins["C"]}
    return Workload("elementwise", [D], [A, B, Cb, D], ref, 2 * rows * cols)


WORKLOADS: dict[str, Callable[..., Workload]] = {
    "matmul": matmul, "conv2d": conv2d, "softmax": softmax, "elementwise": elementwise,
}
