"""GPU schedules of typical kernels, used by the CUDA tests and the GPU benchmarks.

Each function returns an :class:`Example`: a scheduled ``LoopNest`` whose loops are bound
to the GPU, the ``build`` argument list, and ``make(rng)`` producing input and output
arrays together with float64 (or exact integer) reference results. The same nest runs on
IREval (GPU axes as serial loops) and on CUDA, so both are checked against numpy.

>>> ex = elementwise(1000)
>>> print(ex.nest)                                   # doctest: +ELLIPSIS
gpu_block.x for (int i_outer = 0; ...
>>> arrays, expected = ex.make(np.random.default_rng(0))
>>> sorted(expected)
['Y']

Schedules built with transforms: :func:`elementwise`, :func:`elementwise_2d` (``tile``),
:func:`elementwise_tail`,
:func:`softmax_rows` (one thread per row, four kernels, global intermediates),
:func:`lowp_elementwise`, :func:`integer_ops`, :func:`float_to_int`, :func:`math_ops`. Built by hand (statement
trees, the shared-memory idioms the transforms will produce): :func:`softmax_block` (one block
per row, partial results in shared memory), :func:`matmul_tiled` (shared-memory tiles) and
:func:`matmul_register_tiled` (shared-memory tiles, a register micro-tile per thread; its
statement tree comes from :func:`register_tiled_matmul`, which ``bench.gpu_schedules`` also
uses for the benchmark matmul).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from te import (Buffer, Compute, Max, Reduce, Sum, Var, cast, exp, floordiv, floormod, float32, int32,
                maximum, select)
from te.expr import FloatImm, IntImm
from loopnest import LoopNest
from loopnest.stmt import Block, For, ForKind, Store
from loopnest.transforms.gpu_matmul import register_tiled_matmul

__all__ = ["Example", "elementwise", "elementwise_2d", "elementwise_tail", "softmax_rows", "softmax_block", "matmul_tiled", "matmul_register_tiled",
           "register_tiled_matmul",
           "lowp_elementwise", "integer_ops", "float_to_int", "math_ops", "running_sum_rows",
           "copy_per_thread", "ALL_EXAMPLES"]


@dataclass
class Example:
    """A GPU-scheduled nest with its arguments and a reference.

    ``make(rng)`` returns ``(arrays, expected)``: ``arrays`` maps every buffer argument's
    name to a numpy array (outputs zero-filled), ``expected`` maps output names to their
    reference values. ``rtol``/``atol`` are the tolerances for float outputs (integers are
    compared exactly).
    """

    name: str
    nest: LoopNest
    args: list
    make: Callable
    rtol: float = 1e-5
    atol: float = 1e-6
    notes: str = ""
    tags: tuple = field(default_factory=tuple)

    def check(self, name: str, got: np.ndarray, ref: np.ndarray) -> None:
        """Assert that output ``name`` computed as ``got`` matches ``ref``: integers and
        bools exactly, floats within ``rtol``/``atol`` (NaN where the reference has NaN).

        >>> ex = elementwise(4)
        >>> arrays, expected = ex.make(np.random.default_rng(0))
        >>> ex.check("Y", expected["Y"].astype(np.float32), expected["Y"])
        >>> ex.check("Y", arrays["Y"], expected["Y"])          # doctest: +ELLIPSIS
        Traceback (most recent call last):
        AssertionError: ...
        """
        if got.dtype.kind in "iub":
            np.testing.assert_array_equal(got.astype(np.int64), ref.astype(np.int64),
                                          err_msg=f"{self.name}:{name}")
        else:
            np.testing.assert_allclose(got.astype(np.float64), ref, rtol=self.rtol, atol=self.atol,
                                       equal_nan=True, err_msg=f"{self.name}:{name}")


def _bind_1d(nest, loop, threads: int):
    outer, inner = nest.split_with_mask(loop, threads)
    nest.set_gpu_block_index(outer, 0)
    nest.set_gpu_thread_index(inner, 0)
    return outer, inner


def _hand_nest(outputs, root, intermediates=()) -> LoopNest:
    """A LoopNest for ``outputs`` whose statement tree is ``root`` (built by hand)."""
    nest = LoopNest(outputs)
    for b in intermediates:
        nest.add_buffer(b)
    nest.root = root if isinstance(root, Block) else Block((root,))
    nest.verify()
    return nest


# ------------------------------------------------------------------------------------
def elementwise(n: int = 1000, threads: int = 128) -> Example:
    """``Y = exp(X) * 2 + 1`` over a symbolic length N, split with a mask: blocks x threads."""
    N = Var("N", int32)
    X = Buffer("X", (N,), float32)
    Y = Compute("Y", (N,), lambda i: exp(X[i]) * 2.0 + 1.0)
    nest = LoopNest([Y])
    _bind_1d(nest, nest.get_loops_for(Y)[0], threads)

    def make(rng):
        x = rng.standard_normal(n).astype(np.float32)
        return {"X": x, "Y": np.zeros(n, np.float32)}, {"Y": np.exp(x.astype(np.float64)) * 2 + 1}
    return Example("elementwise", nest, [X, Y], make)


def elementwise_2d(rows: int = 45, cols: int = 70, ty: int = 8, tx: int = 32) -> Example:
    """``Y[i, j] = X[i, j] + bias[j]`` tiled (``tile``) into 8 x 32 blocks: a 2-D grid and
    2-D thread blocks (blockIdx.y/x, threadIdx.y/x), partial tiles masked."""
    R, C = Var("R", int32), Var("C", int32)
    X = Buffer("X", (R, C), float32)
    bias = Buffer("bias", (C,), float32)
    Y = Compute("Y", (R, C), lambda i, j: X[i, j] + bias[j])
    nest = LoopNest([Y])
    i, j = nest.get_loops_for(Y)
    io, jo, ii, ji = nest.tile(i, j, ty, tx)
    nest.set_gpu_block_index(io, 1)
    nest.set_gpu_block_index(jo, 0)
    nest.set_gpu_thread_index(ii, 1)
    nest.set_gpu_thread_index(ji, 0)

    def make(rng):
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        b = rng.standard_normal(cols).astype(np.float32)
        return ({"X": x, "bias": b, "Y": np.zeros_like(x)},
                {"Y": x.astype(np.float64) + b.astype(np.float64)})
    return Example("elementwise_2d", nest, [X, bias, Y], make)


def elementwise_tail(n: int = 1000, threads: int = 128) -> Example:
    """``Y = X * 3 - 1`` split with a tail: the main part on blocks x threads, the tail loop
    (``N mod 128`` iterations, a launch-time block size) in a second kernel on threads."""
    N = Var("N", int32)
    X = Buffer("X", (N,), float32)
    Y = Compute("Y", (N,), lambda i: X[i] * 3.0 - 1.0)
    nest = LoopNest([Y])
    outer, inner, tail = nest.split_with_tail(nest.get_loops_for(Y)[0], threads)
    nest.set_gpu_block_index(outer, 0)
    nest.set_gpu_thread_index(inner, 0)
    nest.set_gpu_thread_index(tail, 0)

    def make(rng):
        x = rng.standard_normal(n).astype(np.float32)
        return {"X": x, "Y": np.zeros(n, np.float32)}, {"Y": x.astype(np.float64) * 3 - 1}
    return Example("elementwise_tail", nest, [X, Y], make)


def _softmax_tensors(X, R, cols: int):
    """Row softmax of ``X`` (``R`` rows, ``cols`` columns) as four tensors: ``mx, e, s, Y``."""
    mx = Reduce("mx", (R,), Max(), lambda r, c: X[r, c], (cols,))
    e = Compute("e", (R, cols), lambda r, c: exp(X[r, c] - mx[r]))
    s = Reduce("s", (R,), Sum(), lambda r, c: e[r, c], (cols,))
    Y = Compute("Y", (R, cols), lambda r, c: e[r, c] / s[r])
    return mx, e, s, Y


def _softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def softmax_rows(rows: int = 67, cols: int = 50, threads: int = 32) -> Example:
    """Row softmax from four tensors (max, exp, sum, divide), each its own kernel with one
    thread per row; the intermediates live in global memory allocated by the launcher."""
    R = Var("R", int32)
    X = Buffer("X", (R, cols), float32)
    mx, e, s, Y = _softmax_tensors(X, R, cols)
    nest = LoopNest([Y])
    for t in (mx, e, s, Y):
        _bind_1d(nest, nest.get_loops_for(t)[0], threads)

    def make(rng):
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        return {"X": x, "Y": np.zeros_like(x)}, {"Y": _softmax_ref(x)}
    return Example("softmax_rows", nest, [X, Y], make, rtol=1e-5, atol=1e-7)


def softmax_block(rows: int = 40, cols: int = 256, threads: int = 64) -> Example:
    """Row softmax with one block per row: each thread reduces a strided slice of the row
    into shared memory, one thread combines the partials, then every thread writes its
    slice. Exercises shared memory, single-thread sections and barriers."""
    if cols % threads:
        raise ValueError(f"softmax_block needs cols to be a multiple of threads, got cols={cols}, threads={threads}")
    J = cols // threads
    R = Var("R", int32)
    X = Buffer("X", (R, cols), float32)
    # the tensor definition (what the hand schedule computes), used for the nest's outputs
    mx, e, s, Y = _softmax_tensors(X, R, cols)
    pmax = Buffer("pmax", (threads,), float32)
    psum = Buffer("psum", (threads,), float32)
    stat = Buffer("stat", (2,), float32)
    r = Var("r")
    t1, t2, t3, j1, j2, j3, t4, t5 = (Var(n) for n in ("t1", "t2", "t3", "j1", "j2", "j3", "t4", "t5"))
    ninf = FloatImm(float("-inf"), float32)
    zero = FloatImm(0.0, float32)

    def x_at(j, t):
        return X[r, j * threads + t]

    def thread(v, body):
        return For(v, 0, threads, Block(body), ForKind.GPU_THREAD, 0)

    body = [
        thread(t1, [Store(pmax, (t1,), ninf),
                    For(j1, 0, J, Block([Store(pmax, (t1,), maximum(pmax[t1], x_at(j1, t1)))]))]),
        Store(stat, (0,), ninf),
        For(t4, 0, threads, Block([Store(stat, (0,), maximum(stat[0], pmax[t4]))])),
        thread(t2, [Store(psum, (t2,), zero),
                    For(j2, 0, J, Block([Store(psum, (t2,), psum[t2] + exp(x_at(j2, t2) - stat[0]))]))]),
        Store(stat, (1,), zero),
        For(t5, 0, threads, Block([Store(stat, (1,), stat[1] + psum[t5])])),
        thread(t3, [For(j3, 0, J, Block([Store(Y, (r, j3 * threads + t3),
                                               exp(x_at(j3, t3) - stat[0]) / stat[1])]))]),
    ]
    root = For(r, 0, R, Block(body), ForKind.GPU_BLOCK, 0)
    nest = _hand_nest([Y], root, [pmax, psum, stat])

    def make(rng):
        x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
        return {"X": x, "Y": np.zeros_like(x)}, {"Y": _softmax_ref(x)}
    return Example("softmax_block", nest, [X, Y], make, rtol=1e-5, atol=1e-7)


def matmul_tiled(M: int = 64, N: int = 48, K: int = 80, tile: int = 16, dtype="float32") -> Example:
    """``C = A @ B`` (float32 accumulation and result) with the classic shared-memory
    schedule: a tile x tile block of threads per output tile; for each K tile the block
    copies a tile of A and of B into shared memory, then every thread accumulates its
    element from them; the accumulators live in shared memory too. ``dtype`` is the input
    type (float32 or float16/bfloat16)."""
    T = tile
    if M % T or N % T or K % T:
        raise ValueError(f"matmul_tiled needs M, N, K ({M}, {N}, {K}) to be multiples of tile={tile}")
    A = Buffer("A", (M, K), dtype)
    B = Buffer("B", (K, N), dtype)
    C = Reduce("C", (M, N), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (K,))
    As = Buffer("As", (T, T), dtype)
    Bs = Buffer("Bs", (T, T), dtype)
    acc = Buffer("acc", (T, T), float32)
    by, bx, ko, ki = Var("by"), Var("bx"), Var("ko"), Var("ki")
    names = iter(range(100))

    def threads(body_fn):
        ty, tx = Var(f"ty{next(names)}"), Var(f"tx{next(names)}")
        inner = For(tx, 0, T, Block(body_fn(ty, tx)), ForKind.GPU_THREAD, 0)
        return For(ty, 0, T, Block([inner]), ForKind.GPU_THREAD, 1)

    init = threads(lambda ty, tx: [Store(acc, (ty, tx), FloatImm(0.0, float32))])
    load_a = threads(lambda ty, tx: [Store(As, (ty, tx), A[by * T + ty, ko * T + tx])])
    load_b = threads(lambda ty, tx: [Store(Bs, (ty, tx), B[ko * T + ty, bx * T + tx])])
    compute = threads(lambda ty, tx: [For(ki, 0, T, Block([Store(
        acc, (ty, tx), acc[ty, tx] + cast(As[ty, ki], float32) * cast(Bs[ki, tx], float32))]), ForKind.UNROLLED)])
    write = threads(lambda ty, tx: [Store(C, (by * T + ty, bx * T + tx), acc[ty, tx])])
    kloop = For(ko, 0, K // T, Block([load_a, load_b, compute]))
    root = For(by, 0, M // T, Block([For(bx, 0, N // T, Block([init, kloop, write]), ForKind.GPU_BLOCK, 0)]),
               ForKind.GPU_BLOCK, 1)
    nest = _hand_nest([C], root, [As, Bs, acc])
    npdt = A.dtype.numpy

    def make(rng):
        a = rng.standard_normal((M, K)).astype(npdt)
        b = rng.standard_normal((K, N)).astype(npdt)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        return {"A": a, "B": b, "C": np.zeros((M, N), np.float32)}, {"C": ref}
    return Example(f"matmul_tiled_{A.dtype}", nest, [A, B, C], make, rtol=1e-4, atol=1e-4)


def matmul_register_tiled(M: int = 128, N: int = 128, K: int = 64, BM: int = 64, BN: int = 64, BK: int = 8,
                          TM: int = 4, TN: int = 4, interleave: bool = False, dtype="float32") -> Example:
    """``C = A @ B`` (float32 sums) with register tiling (:func:`register_tiled_matmul`): a
    block of (BM/TM) x (BN/TN) threads computes a BM x BN tile of C, each thread a TM x TN
    micro-tile kept in registers; A and B tiles of depth BK go through shared memory.
    ``dtype`` is the input type (float32, or float16/bfloat16 converted as used)."""
    A = Buffer("A", (M, K), dtype)
    B = Buffer("B", (K, N), dtype)
    C = Reduce("C", (M, N), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (K,))
    root, scratch = register_tiled_matmul(A, B, C, BM, BN, BK, TM, TN, interleave)
    nest = _hand_nest([C], root, scratch)
    npdt = A.dtype.numpy

    def make(rng):
        a = rng.standard_normal((M, K)).astype(npdt)
        b = rng.standard_normal((K, N)).astype(npdt)
        return ({"A": a, "B": b, "C": np.zeros((M, N), np.float32)},
                {"C": a.astype(np.float64) @ b.astype(np.float64)})
    suffix = "_interleaved" if interleave else ""
    return Example(f"matmul_regtile_{A.dtype}{suffix}", nest, [A, B, C], make, rtol=1e-4, atol=1e-4)


def lowp_elementwise(dtype="float16", n: int = 777, threads: int = 64) -> Example:
    """Arithmetic in a low-precision type: ``Y = X * X + 1.5`` computed in ``dtype`` (every
    operation rounded), ``Z = dtype(exp(float32(X)) * 0.1)`` and ``W = float32(X) * 2``."""
    N = Var("N", int32)
    X = Buffer("X", (N,), dtype)
    Y = Compute("Y", (N,), lambda i: X[i] * X[i] + 1.5)
    Z = Compute("Z", (N,), lambda i: cast(exp(cast(X[i], float32)) * 0.1, dtype))
    W = Compute("W", (N,), lambda i: cast(X[i], float32) * 2.0)
    nest = LoopNest([Y, Z, W])
    for t in (Y, Z, W):
        _bind_1d(nest, nest.get_loops_for(t)[0], threads)
    npdt = X.dtype.numpy

    def rnd(v):
        return v.astype(npdt).astype(np.float64)

    def make(rng):
        x = (rng.standard_normal(n) * 2).astype(npdt)
        xf = x.astype(np.float64)
        exp_y = rnd(rnd(xf * xf) + 1.5)
        exp_z = rnd(np.exp(xf).astype(np.float32).astype(np.float64) * np.float64(np.float32(0.1)))
        return ({"X": x, "Y": np.zeros(n, npdt), "Z": np.zeros(n, npdt), "W": np.zeros(n, np.float32)},
                {"Y": exp_y, "Z": exp_z, "W": xf * 2})
    rtol = 1e-2 if X.dtype.kind == "bfloat" else 2e-3
    return Example(f"lowp_{X.dtype}", nest, [X, Y, Z, W], make, rtol=rtol, atol=1e-3)


def integer_ops(n: int = 500, threads: int = 128) -> Example:
    """Integer semantics: C division and remainder, floor division and remainder on negative
    operands, int32 wrap-around, and narrowing to int8 (wraps)."""
    N = Var("N", int32)
    A = Buffer("A", (N,), int32)
    B = Buffer("B", (N,), int32)
    Q = Compute("Q", (N,), lambda i: floordiv(A[i], B[i]) * 7 + floormod(A[i], B[i]))
    D = Compute("D", (N,), lambda i: A[i] / B[i] + (A[i] % B[i]) * 1000)
    W = Compute("W", (N,), lambda i: A[i] * 65537 + 2147483647)
    S = Compute("S", (N,), lambda i: cast(A[i] * 3 + 100, "int8"))
    F = Compute("F", (N,), lambda i: floordiv(A[i], 8) + floormod(A[i], 8))
    nest = LoopNest([Q, D, W, S, F])
    for t in (Q, D, W, S, F):
        _bind_1d(nest, nest.get_loops_for(t)[0], threads)

    def make(rng):
        a = rng.integers(-100000, 100000, n).astype(np.int32)
        a[:4] = [-2147483647 - 1, 2147483647, -7, 7]
        b = rng.integers(-50, 50, n).astype(np.int32)
        b[b == 0] = 3
        b[:4] = [3, -3, 2, -2]
        a64, b64 = a.astype(np.int64), b.astype(np.int64)
        fq = np.floor_divide(a64, b64) * 7 + np.mod(a64, b64)
        tq = np.sign(a64) * np.sign(b64) * (np.abs(a64) // np.abs(b64))
        d = tq + (a64 - tq * b64) * 1000
        w = a64 * 65537 + 2147483647
        s = a64 * 3 + 100
        f = np.floor_divide(a64, 8) + np.mod(a64, 8)

        def wrap(v, bits):
            v = np.asarray(v, dtype=object) % (1 << bits)
            return np.array([x - (1 << bits) if x >= 1 << (bits - 1) else x for x in v], dtype=np.int64)
        zeros = np.zeros(n, np.int32)
        return ({"A": a, "B": b, "Q": zeros.copy(), "D": zeros.copy(), "W": zeros.copy(),
                 "S": np.zeros(n, np.int8), "F": zeros.copy()},
                {"Q": wrap(fq, 32), "D": wrap(d, 32), "W": wrap(w, 32), "S": wrap(wrap(s, 32), 8),
                 "F": wrap(f, 32)})
    return Example("integer_ops", nest, [A, B, Q, D, W, S, F], make)


def float_to_int(n: int = 300, threads: int = 64) -> Example:
    """float -> int casts: truncation, saturation to the target range, NaN -> 0."""
    N = Var("N", int32)
    X = Buffer("X", (N,), float32)
    I = Compute("I", (N,), lambda i: cast(X[i], "int32"))
    U = Compute("U", (N,), lambda i: cast(X[i], "uint8"))
    S = Compute("S", (N,), lambda i: cast(X[i], "int8"))
    L = Compute("L", (N,), lambda i: cast(cast(X[i], "float64") * 1e10, "int64"))
    nest = LoopNest([I, U, S, L])
    for t in (I, U, S, L):
        _bind_1d(nest, nest.get_loops_for(t)[0], threads)

    def make(rng):
        x = (rng.standard_normal(n) * 300).astype(np.float32)
        x[:8] = [np.nan, np.inf, -np.inf, 3e9, -3e9, -0.9, 255.9, -128.9]
        from te.lowprec import float_to_int as f2i
        return ({"X": x, "I": np.zeros(n, np.int32), "U": np.zeros(n, np.uint8), "S": np.zeros(n, np.int8),
                 "L": np.zeros(n, np.int64)},
                {"I": f2i(x, np.int32), "U": f2i(x, np.uint8), "S": f2i(x, np.int8),
                 "L": f2i(x.astype(np.float64) * 1e10, np.int64)})
    return Example("float_to_int", nest, [X, I, U, S, L], make)


def _math_table():
    import math
    import te
    erf = np.vectorize(math.erf, otypes=[np.float64])
    # name -> (te function of x, numpy float64 reference)
    return {
        "exp": (te.exp, np.exp), "exp2": (te.exp2, np.exp2),
        "log": (lambda x: te.log(te.abs(x) + 1.0), lambda x: np.log(np.abs(x) + 1)),
        "log2": (lambda x: te.log2(te.abs(x) + 1.0), lambda x: np.log2(np.abs(x) + 1)),
        "sqrt": (lambda x: te.sqrt(te.abs(x)), lambda x: np.sqrt(np.abs(x))),
        "rsqrt": (lambda x: te.rsqrt(te.abs(x) + 0.5), lambda x: 1 / np.sqrt(np.abs(x) + 0.5)),
        "tanh": (te.tanh, np.tanh), "sigmoid": (te.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
        "abs": (te.abs, np.abs), "floor": (te.floor, np.floor), "ceil": (te.ceil, np.ceil),
        "round": (te.round, np.round), "sin": (te.sin, np.sin), "cos": (te.cos, np.cos),
        "erf": (te.erf, erf),
        "pow": (lambda x: te.pow(te.abs(x) + 0.1, x * 0.5), lambda x: np.power(np.abs(x) + 0.1, x * 0.5)),
        "isnan": (lambda x: te.cast(te.isnan(x), x.dtype), lambda x: np.isnan(x).astype(np.float64)),
        "max": (lambda x: te.maximum(x, x * -0.5), lambda x: np.maximum(x, x * -0.5)),
        "min": (lambda x: te.minimum(x, 0.25), lambda x: np.minimum(x, 0.25)),
        "select": (lambda x: te.select(x > 0.5, x * 3.0, x - 1.0), lambda x: np.where(x > 0.5, x * 3, x - 1)),
        "ite": (lambda x: te.if_then_else(x < 0.0, -x, x * x), lambda x: np.where(x < 0, -x, x * x)),
        "floordiv": (lambda x: floordiv(x, 0.75), lambda x: np.floor(x / 0.75)),
        "floormod": (lambda x: floormod(x, 0.75), lambda x: np.mod(x, 0.75)),
    }


def math_ops(dtype="float32", n: int = 96, threads: int = 32) -> Example:
    """Every math intrinsic (and select, if_then_else, NaN-propagating min/max, float floor
    division) in ``dtype``: row ``f`` of ``Y[f, i]`` applies function ``f`` to ``X[i]``
    (a select chain; rows on blockIdx.y, columns on blockIdx.x x threadIdx.x)."""
    N = Var("N", int32)
    X = Buffer("X", (N,), dtype)
    table = _math_table()
    names = list(table)

    def body(f, i):
        x = X[i]
        out = table[names[-1]][0](x)
        for k in range(len(names) - 2, -1, -1):
            out = select(f.eq(k), table[names[k]][0](x), out)
        return out
    Y = Compute("Y", (len(names), N), body)
    nest = LoopNest([Y])
    f, i = nest.get_loops_for(Y)
    nest.set_gpu_block_index(f, 1)
    _bind_1d(nest, i, threads)
    npdt = X.dtype.numpy

    def make(rng):
        x = (rng.standard_normal(n) * 2).astype(npdt)
        x[:7] = [0.5, 1.5, 2.5, -0.5, -2.5, np.nan, -np.inf]
        xf = x.astype(np.float64)
        with np.errstate(all="ignore"):
            ref = np.stack([table[k][1](xf) for k in names])
        return {"X": x, "Y": np.zeros((len(names), n), npdt)}, {"Y": ref}
    tol = 2e-6 if X.dtype.bits == 32 else 1e-12
    return Example(f"math_{X.dtype}", nest, [X, Y], make, rtol=tol, atol=tol,
                   notes="rows: " + ", ".join(names))


def running_sum_rows(rows: int = 6, cols: int = 40, threads: int = 16) -> Example:
    """``S[i + 1, :] = S[i, :] + A[i + 1, :]``: the row loop stays serial and runs on the host
    (a host loop, one launch per row), the columns are blocks x threads; each row's kernel
    reads what the previous row's kernel wrote.

    >>> from codegen import build
    >>> ex = running_sum_rows(rows=6)
    >>> len(build(ex.nest, ex.args, target="cuda").launch_dims())    # the first row, then 5 rows
    6
    """
    A, S = Buffer("A", (rows, cols), float32), Buffer("S", (rows, cols), float32)
    i, j, j0 = Var("i"), Var("j"), Var("j0")
    nest = LoopNest(Block([For(j0, 0, cols, Store(S, (0, j0), A[0, j0])),
                           For(i, 0, rows - 1, For(j, 0, cols, Store(S, (i + 1, j), S[i, j] + A[i + 1, j])))]),
                    outputs=[S])
    for var in (j0, j):
        _bind_1d(nest, nest.loop(var), threads)

    def make(rng):
        a = rng.standard_normal((rows, cols)).astype(np.float32)
        return {"A": a, "S": np.zeros_like(a)}, {"S": np.cumsum(a.astype(np.float64), axis=0)}
    return Example("running_sum_rows", nest, [A, S], make)


def copy_per_thread(threads: int = 8) -> tuple[LoopNest, list]:
    """``S[i] = sum_k A[k] * (i + 1)`` for sizes ``N`` (of A) and ``M`` (of S), ``threads``
    threads per block, each thread copying all of A first (``cache_accesses`` at its thread
    loop): a copy sized at launch, one global slice per block and per thread, ``M`` x ``N``
    floats in all. Returns ``(nest, [A, S, N, M])``.

    >>> from codegen import build
    >>> nest, args = copy_per_thread()
    >>> N, M = args[2:]
    >>> build(nest, args, target="cuda").module.scratch_nbytes({id(N): 100, id(M): 16})
    [6400]
    """
    N, M = Var("N", int32), Var("M", int32)
    A = Buffer("A", (N,), float32)
    S = Reduce("S", (M,), Sum(), lambda i, k: A[k] * cast(i + 1, float32), (N,))
    nest = LoopNest([S])
    io, ii = nest.split_with_mask(nest.get_loops_for(S)[0], threads)
    nest.set_gpu_block_index(io, 0)
    nest.set_gpu_thread_index(ii, 0)
    nest.cache_accesses(A, "Ac", ii)
    return nest, [A, S, N, M]


def ALL_EXAMPLES() -> list[Example]:
    """Every example at test sizes (fresh nests each call)."""
    return [elementwise(), elementwise_2d(), elementwise_tail(), softmax_rows(), softmax_block(), matmul_tiled(),
            matmul_tiled(dtype="float16"), matmul_register_tiled(64, 128, 16), lowp_elementwise("float16"), lowp_elementwise("bfloat16"),
            integer_ops(), float_to_int(), math_ops("float32"), math_ops("float64")]
