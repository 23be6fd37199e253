"""The benchmark kernels: their te definitions, numpy / PyTorch peers, and schedules.

Each ``Workload`` builds its tensors for a size, gives the numpy reference, the inputs,
the work done (flops, bytes moved), a default schedule and a hand schedule.

The hand schedules take their vector widths and tile shapes from a :class:`loopnest.Target`
(their ``target`` argument; ``None`` is the host, ``loopnest.host_target()``), never from an
assumed ISA: element-wise loops run ``target.lanes(dtype)`` wide, row reductions keep
``REDUCE_VECTORS`` vectors of partial results, register tiles are sized to
``target.vector_registers`` and cache blocks to ``target.l1_bytes`` / ``l2_bytes``. To write
them for another CPU, pass a described one, e.g. ``host_target().replace(vector_bits=256,
vector_registers=16)`` for AVX2.

>>> w = WORKLOADS["row_sum"]
>>> spec = w.make(w.small[0])
>>> sorted(spec.inputs)
['A']
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from te import Buffer, Compute, Max, Reduce, Sum, Var, exp, float32, maximum, rsqrt, tanh
from loopnest import LoopNest, ScheduleError, Target
from loopnest.auto.schedule import REDUCE_VECTORS, STREAM_ROWS, transpose_tile as auto_transpose_tile
from loopnest.auto.templates import (column_reduction, column_stream, reduction_parts, vector_reduction,
                                     vectorize_split)
from loopnest.target import resolve_target

#: how many partial results of a row reduction are left to a serial reduction at the end
#: of the row (``vector_row_reduction``'s ``fold``; at most one native vector): folding
#: further by vector operations (to 4, 2) gained 1-4% and cost 35 ms of compile time a level
FOLD = 8
#: bytes in a cache line (the unit of element-wise statements and of the transpose's output runs)
CACHE_LINE = 64

from .pipelines import hand_pyramid, hand_stencil, make_pyramid, make_stencil


@dataclass
class Spec:
    """One workload at one size."""

    label: str
    outputs: list
    args: list
    inputs: dict            # name -> numpy array
    out_shapes: dict        # name -> shape of each output
    reference: Callable[[dict], dict]    # numpy float64 (or float32 where noted) outputs
    numpy_fn: Callable[[dict], Any]      # the numpy peer that is timed
    torch_fn: Callable | None = None     # builds a zero-arg callable from torch tensors
    flops: float = 0.0
    bytes: float = 0.0
    tol: float = 1e-4

    def run(self, kernel) -> tuple[dict, Callable[[], Any]]:
        """Run ``kernel`` once on the inputs, with outputs that start as NaN (a value the
        kernel does not write stays wrong); returns the outputs and the call that reruns it."""
        outs = {name: np.full(shape, np.nan, np.float32) for name, shape in self.out_shapes.items()}
        arrays = dict(self.inputs, **outs)
        args = [arrays[b.name] for b in self.args]      # positional: the kernel's fast call path
        call = lambda: kernel(*args)  # noqa: E731
        call()
        return outs, call

    def error(self, outs: dict) -> float:
        """The largest difference of ``outs`` from the numpy reference, relative to the
        reference's magnitude (at least 1); infinite where an output is NaN and the
        reference is not. Correct means ``error <= tol``.

        >>> spec = make_elementwise(64)
        >>> outs = spec.reference(spec.inputs)
        >>> spec.error(outs), spec.error({k: v + np.nan for k, v in outs.items()})
        (0.0, inf)
        """
        err = 0.0
        for name, want in self.reference(self.inputs).items():
            diff = np.abs(outs[name].astype(np.float64) - want)
            if np.isnan(diff).any():
                return float("inf")
            err = max(err, float(diff.max()) / max(1.0, float(np.abs(want).max())))
        return err


@dataclass
class Workload:
    name: str
    make: Callable[[Any], Spec]
    small: list
    full: list
    hand_schedule: Callable[[LoopNest, Spec], None]
    default_schedule: Callable[[LoopNest, Spec], None] = field(default=lambda nest, spec: None)
    #: sizes at which the default schedule is not run (a call would take minutes)
    skip_default: Callable[[Any], bool] = field(default=lambda size: False)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


# ---------------------------------------------------------------------------------------
# schedule helpers
# ---------------------------------------------------------------------------------------
def parallel_outer_vector_inner(nest: LoopNest, t, lanes: int) -> None:
    """Parallelize the outermost loop of ``t`` and vectorize a ``lanes``-wide split of its
    innermost loop (when it is not a reduction loop)."""
    loops = nest.get_loops_for(t)
    try:
        nest.parallelize(loops[0])
    except ScheduleError:
        pass
    inner = nest.get_loops_for(t)[-1]
    if isinstance(inner.extent, int) and inner.extent >= lanes and not t.is_reduction:
        _, vi, _ = nest.split_with_tail(inner, lanes)
        nest.vectorize(vi)


def vector_lanes(target: Target | None, dtype=float32) -> int:
    """Elements of ``dtype`` in one native vector of ``target`` (``None``: the host).

    >>> vector_lanes(Target(vector_bits=512)), vector_lanes(Target(vector_bits=256))
    (16, 8)
    """
    return resolve_target(target).lanes(dtype)


def _tensors(nest: LoopNest) -> dict:
    return {t.name: t for t in nest.tensors}


def fuse_rows(nest: LoopNest, out, producers) -> None:
    """``compute_at`` each producer (consumers first) at the outermost loop of ``out``, so
    one iteration of that loop computes everything its row needs."""
    for t in producers:
        nest.compute_at(t, nest.get_loops_for(out)[0])


def vector_row_reduction(nest: LoopNest, t, row, lanes: int, fold: int = 0) -> None:
    """Vectorize the innermost reduction loop of ``t`` (inside loop ``row``): split it by
    ``lanes``, ``rfactor`` at the inner part so ``lanes`` partial results accumulate side by
    side (a reassociation of the reduction, which rfactor makes legal for Sum/Max), keep the
    partials in a row-local buffer (``cache_accesses``) and vectorize their accumulation.
    With ``fold``, the partials are then summed into ``fold`` partials by vector operations
    (a second rfactor), so the serial reduction left at the end of the row adds up only
    ``fold`` of them: a serial chain of 64 scalar adds per row cost more than the row's
    vector loop (layernorm 4096 x 1024 on AVX-512: 1.2x faster folded to 8).
    Leaves the reduction as it is when the extent is not a multiple of ``lanes``."""
    for width in (lanes, fold) if fold else (lanes,):
        k = nest.get_loops_for(t)[-1]
        if not isinstance(k.extent, int) or k.extent % width or k.extent <= width:
            return
        _, ki, _ = nest.split_with_tail(k, width)
        rf = nest.rfactor(t, ki)
        nest.cache_accesses(rf, rf.name + "_row", row)
        nest.vectorize(ki)


def vectorize_innermost(nest: LoopNest, t, lanes: int) -> None:
    """Split the innermost loop of ``t`` by ``lanes`` and vectorize the inner part and the
    tail (``loopnest.auto.templates.vectorize_split``)."""
    inner = nest.get_loops_for(t)[-1]
    if not isinstance(inner.extent, int) or inner.extent < lanes:
        return
    vectorize_split(nest, inner, lanes)


# ---------------------------------------------------------------------------------------
# workloads
# ---------------------------------------------------------------------------------------
def make_elementwise(n: int) -> Spec:
    A = Buffer("A", (n,), float32)
    B = Buffer("B", (n,), float32)
    C = Buffer("C", (n,), float32)
    Y = Compute("Y", (n,), lambda i: maximum(A[i] * 2.0 + B[i], 0.0) * C[i] - 1.0)
    r = _rng()
    inputs = {k: r.standard_normal(n).astype(np.float32) for k in "ABC"}

    def ref(x):
        a, b, c = (x[k].astype(np.float64) for k in "ABC")
        return {"Y": np.maximum(a * 2 + b, 0) * c - 1}

    def np_fn(x):
        return np.maximum(x["A"] * 2 + x["B"], 0) * x["C"] - 1

    def torch_fn(t, x):
        a, b, c = (t.from_numpy(x[k]) for k in "ABC")
        return lambda: t.clamp_min(a * 2 + b, 0) * c - 1

    return Spec(f"n={n}", [Y], [A, B, C, Y], inputs, {"Y": (n,)}, ref, np_fn, torch_fn,
                flops=5 * n, bytes=16 * n)


def hand_elementwise(nest: LoopNest, spec: Spec, target: Target | None = None, width: int | None = None) -> None:
    """Blocks of 4096 elements in parallel, each statement ``width`` elements wide: a cache
    line (16 floats: two AVX2 vectors, one AVX-512 vector; on AVX-512 two vectors a statement
    measured 10% slower), at least one native vector; the output, never read back, gets
    streaming stores at full size (codegen)."""
    (Y,) = spec.outputs
    (i,) = nest.get_loops_for(Y)
    outer, inner, _ = nest.split_with_tail(i, 4096)
    nest.parallelize(outer)
    width = width or max(vector_lanes(target, Y.dtype), CACHE_LINE // Y.dtype.itemsize)
    _, vi, _ = nest.split_with_tail(inner, width)
    nest.vectorize(vi)


#: sqrt(2 / pi), GELU's tanh approximation's scale
GELU_SCALE = 0.7978845608028654


def make_gelu(n: int) -> Spec:
    """GELU in its tanh approximation (GPT-2's; PyTorch's ``gelu(x, approximate="tanh")``),
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))``: an element-wise kernel whose cost is
    its ``tanh``, which LLVM computes in vector code (``codegen.llvm.mathfns``).

    >>> spec = make_gelu(64)
    >>> spec.out_shapes
    {'Y': (64,)}
    """
    X = Buffer("X", (n,), float32)
    Y = Compute("Y", (n,), lambda i: 0.5 * X[i] * (1.0 + tanh(GELU_SCALE * (X[i] + 0.044715 * X[i] * X[i] * X[i]))))
    x = (_rng().standard_normal(n) * 3).astype(np.float32)

    def ref(d):
        v = d["X"].astype(np.float64)
        return {"Y": 0.5 * v * (1 + np.tanh(GELU_SCALE * (v + 0.044715 * v ** 3)))}

    def np_fn(d):
        v = d["X"]
        return 0.5 * v * (1 + np.tanh(np.float32(GELU_SCALE) * (v + np.float32(0.044715) * v * v * v)))

    def torch_fn(t, d):
        v = t.from_numpy(d["X"])
        return lambda: t.nn.functional.gelu(v, approximate="tanh")

    return Spec(f"n={n}", [Y], [X, Y], {"X": x}, {"Y": (n,)}, ref, np_fn, torch_fn, flops=9 * n, bytes=8 * n)


def make_softmax(shape) -> Spec:
    m, n = shape
    X = Buffer("X", (m, n), float32)
    mx = Reduce("mx", (m,), Max(), lambda i, k: X[i, k], (n,))
    e = Compute("e", (m, n), lambda i, j: exp(X[i, j] - mx[i]))
    s = Reduce("s", (m,), Sum(), lambda i, k: e[i, k], (n,))
    # a multiply by the row's reciprocal, as PyTorch's kernel does: the division is
    # computed once a row (hoisted out of the inner loop), not once an element
    Y = Compute("Y", (m, n), lambda i, j: e[i, j] * (1.0 / s[i]))
    x = _rng().standard_normal((m, n)).astype(np.float32)

    def ref(d):
        v = d["X"].astype(np.float64)
        z = np.exp(v - v.max(axis=1, keepdims=True))
        return {"Y": z / z.sum(axis=1, keepdims=True)}

    def np_fn(d):
        v = d["X"]
        z = np.exp(v - v.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)

    def torch_fn(t, d):
        v = t.from_numpy(d["X"])
        return lambda: t.softmax(v, dim=1)

    return Spec(f"{m}x{n}", [Y], [X, Y], {"X": x}, {"Y": (m, n)}, ref, np_fn, torch_fn,
                flops=5 * m * n, bytes=8 * m * n, tol=1e-5)


def hand_softmax(nest: LoopNest, spec: Spec, target: Target | None = None, lanes: int | None = None,
                 reduce_lanes: int | None = None, prefetch: bool = True) -> None:
    """One parallel pass per row: the row max, the exponentials (kept in a row-sized local
    buffer, computed once), their sum and the scaled output are all computed inside the row
    loop; both row reductions accumulate ``reduce_lanes`` partial results in vector
    registers (rfactor; ``REDUCE_VECTORS`` native vectors by default), the element-wise
    loops run ``lanes`` wide (one native vector by default); rows run in parallel. With
    ``prefetch``, the next row of X and Y is prefetched (``LoopNest.prefetch``)."""
    lanes = lanes or vector_lanes(target)
    reduce_lanes = reduce_lanes or REDUCE_VECTORS * vector_lanes(target)
    (Y,) = spec.outputs
    t = _tensors(nest)
    fuse_rows(nest, Y, [t["s"], t["e"], t["mx"]])
    row = nest.get_loops_for(Y)[0]
    fold = min(FOLD, vector_lanes(target))
    vector_row_reduction(nest, t["mx"], row, reduce_lanes, fold)
    vector_row_reduction(nest, t["s"], row, reduce_lanes, fold)
    nest.cache_accesses(t["e"], "e_row", row)
    nest.eliminate_dead_stores()
    vectorize_innermost(nest, t["e"].name + "_row", lanes)
    vectorize_innermost(nest, Y, lanes)
    nest.parallelize(row)
    if prefetch:
        nest.prefetch("X", row)
        nest.prefetch(Y, row)


def make_layernorm(shape) -> Spec:
    m, n = shape
    X = Buffer("X", (m, n), float32)
    G = Buffer("G", (n,), float32)
    Bb = Buffer("Bb", (n,), float32)
    mean = Reduce("mean", (m,), Sum(), lambda i, k: X[i, k] * (1.0 / n), (n,))
    var = Reduce("var", (m,), Sum(), lambda i, k: (X[i, k] - mean[i]) * (X[i, k] - mean[i]) * (1.0 / n), (n,))
    Y = Compute("Y", (m, n), lambda i, j: (X[i, j] - mean[i]) * rsqrt(var[i] + 1e-5) * G[j] + Bb[j])
    r = _rng()
    d = {"X": r.standard_normal((m, n)).astype(np.float32), "G": r.standard_normal(n).astype(np.float32),
         "Bb": r.standard_normal(n).astype(np.float32)}

    def ref(x):
        v = x["X"].astype(np.float64)
        mu = v.mean(axis=1, keepdims=True)
        va = ((v - mu) ** 2).mean(axis=1, keepdims=True)
        return {"Y": (v - mu) / np.sqrt(va + 1e-5) * x["G"] + x["Bb"]}

    def np_fn(x):
        v = x["X"]
        mu = v.mean(axis=1, keepdims=True)
        va = ((v - mu) ** 2).mean(axis=1, keepdims=True)
        return (v - mu) / np.sqrt(va + 1e-5) * x["G"] + x["Bb"]

    def torch_fn(t, x):
        v, g, b = t.from_numpy(x["X"]), t.from_numpy(x["G"]), t.from_numpy(x["Bb"])
        return lambda: t.nn.functional.layer_norm(v, (n,), g, b, 1e-5)

    return Spec(f"{m}x{n}", [Y], [X, G, Bb, Y], d, {"Y": (m, n)}, ref, np_fn, torch_fn,
                flops=8 * m * n, bytes=8 * m * n, tol=2e-4)


def hand_layernorm(nest: LoopNest, spec: Spec, target: Target | None = None, lanes: int | None = None,
                   reduce_lanes: int | None = None, prefetch: bool = True) -> None:
    """One parallel pass per row: mean and variance computed inside the row loop, each
    accumulating ``reduce_lanes`` partial sums in vector registers (rfactor;
    ``REDUCE_VECTORS`` native vectors by default), then the normalized row, ``lanes`` wide
    (one native vector by default); rows run in parallel. With ``prefetch``, the next row of
    X (read, and Y, to be written) is prefetched during the last pass over this one
    (``LoopNest.prefetch``; 4096 x 1024 on AVX-512: 1.2x faster)."""
    lanes = lanes or vector_lanes(target)
    reduce_lanes = reduce_lanes or REDUCE_VECTORS * vector_lanes(target)
    (Y,) = spec.outputs
    t = _tensors(nest)
    fuse_rows(nest, Y, [t["var"], t["mean"]])
    row = nest.get_loops_for(Y)[0]
    fold = min(FOLD, vector_lanes(target))
    vector_row_reduction(nest, t["mean"], row, reduce_lanes, fold)
    vector_row_reduction(nest, t["var"], row, reduce_lanes, fold)
    nest.eliminate_dead_stores()
    vectorize_innermost(nest, Y, lanes)
    nest.parallelize(row)
    if prefetch:
        nest.prefetch("X", row)
        nest.prefetch(Y, row)


def _matrix_sum(shape, axis: int) -> Spec:
    """The sums of an ``m`` x ``n`` matrix along ``axis``: 1, a sum per row; 0, per column."""
    m, n = shape
    A = Buffer("A", (m, n), float32)
    if axis == 1:
        S = Reduce("S", (m,), Sum(), lambda i, k: A[i, k], (n,))
    else:
        S = Reduce("S", (n,), Sum(), lambda j, i: A[i, j], (m,))
    a = _rng().standard_normal((m, n)).astype(np.float32)
    return Spec(f"{m}x{n}", [S], [A, S], {"A": a}, {"S": S.shape},
                lambda d: {"S": d["A"].astype(np.float64).sum(axis=axis)}, lambda d: d["A"].sum(axis=axis),
                lambda t, d: (lambda v: (lambda: v.sum(dim=axis)))(t.from_numpy(d["A"])),
                flops=m * n, bytes=4 * m * n, tol=1e-3)


def make_row_sum(shape) -> Spec:
    return _matrix_sum(shape, axis=1)


def hand_row_sum(nest: LoopNest, spec: Spec, target: Target | None = None,
                 reduce_lanes: int | None = None) -> None:
    """Rows in parallel; each row's sum accumulates ``reduce_lanes`` partial sums in vector
    registers (rfactor over the lanes; ``REDUCE_VECTORS`` native vectors by default),
    reduced at the end of the row."""
    reduce_lanes = reduce_lanes or REDUCE_VECTORS * vector_lanes(target)
    (S,) = spec.outputs
    i = nest.get_loops_for(S)[0]
    vector_row_reduction(nest, S, i, reduce_lanes, min(FOLD, vector_lanes(target)))
    nest.eliminate_dead_stores()
    nest.parallelize(nest.get_loops_for(S)[0])


def make_sum(shape) -> Spec:
    """The sum of a whole ``m`` x ``n`` matrix (one output), of values in [0, 1)."""
    m, n = shape
    A = Buffer("A", (m, n), float32)
    S = Reduce("S", (1,), Sum(), lambda z, i, j: A[i, j], (m, n))
    a = _rng().random((m, n), dtype=np.float32)
    return Spec(f"{m}x{n}", [S], [A, S], {"A": a}, {"S": (1,)},
                lambda d: {"S": np.array([d["A"].astype(np.float64).sum()])}, lambda d: d["A"].sum(),
                lambda t, d: (lambda v: (lambda: v.sum()))(t.from_numpy(d["A"])),
                flops=m * n, bytes=4 * m * n, tol=1e-4)


def hand_sum(nest: LoopNest, spec: Spec, target: Target | None = None) -> None:
    """``REDUCE_VECTORS`` native vectors of partial sums (``vector_reduction``), one set per
    core over a share of the rows (``reduction_parts``: one output would keep one core
    busy), added up at the end."""
    (S,) = spec.outputs
    t = resolve_target(target)
    lanes = vector_reduction(nest, S, nest.get_loops_for(S)[0], REDUCE_VECTORS * vector_lanes(target),
                             min(FOLD, vector_lanes(target)))
    if t.cores > 1:
        reduction_parts(nest, S, lanes or S.name, t.cores)
    nest.eliminate_dead_stores()


def make_column_sum(shape) -> Spec:
    return _matrix_sum(shape, axis=0)


def hand_column_sum(nest: LoopNest, spec: Spec, target: Target | None = None) -> None:
    """The rows streamed into one chunk of the sums per core, ``STREAM_ROWS`` at a time, the
    columns vectorized (``loopnest.auto.templates.column_stream``); where the columns do not cut into such
    chunks, tiles of ``REDUCE_VECTORS`` native vectors held in registers while the rows
    stream past, the tiles in parallel (``column_reduction``)."""
    (S,) = spec.outputs
    t = resolve_target(target)
    try:
        column_stream(nest, S, vector_lanes(target), t.cores, t.l1_bytes, STREAM_ROWS)
    except ScheduleError:
        column_reduction(nest, S, vector_lanes(target), REDUCE_VECTORS, par=True)


def make_conv1d(shape) -> Spec:
    """``Y[i] = sum_k X[i + k] * W[k]``: a "valid" 1-D convolution (correlation) of ``n``
    outputs and ``taps`` weights, numpy's ``correlate`` and PyTorch's ``conv1d``."""
    n, taps = shape
    X, W = Buffer("X", (n + taps - 1,), float32), Buffer("W", (taps,), float32)
    Y = Reduce("Y", (n,), Sum(), lambda i, k: X[i + k] * W[k], (taps,))
    x = _rng().standard_normal(n + taps - 1).astype(np.float32)
    w = _rng(1).standard_normal(taps).astype(np.float32)

    def torch_fn(t, d):
        tx, tw = t.from_numpy(d["X"]).reshape(1, 1, -1), t.from_numpy(d["W"]).reshape(1, 1, -1)
        return lambda: t.nn.functional.conv1d(tx, tw).reshape(-1)
    return Spec(f"{n}x{taps}", [Y], [X, W, Y], {"X": x, "W": w}, {"Y": (n,)},
                lambda d: {"Y": np.correlate(d["X"].astype(np.float64), d["W"].astype(np.float64), "valid")},
                lambda d: np.correlate(d["X"], d["W"], "valid"), torch_fn,
                flops=2 * n * taps, bytes=4 * (2 * n + 2 * taps - 1), tol=1e-4)


def hand_conv1d(nest: LoopNest, spec: Spec, target: Target | None = None) -> None:
    """Tiles of up to ``REDUCE_VECTORS`` native vectors of outputs held in registers while
    the taps are added in, the tiles in parallel (``column_reduction``: consecutive outputs
    read consecutive inputs, so a vector of outputs takes a vector load per tap)."""
    (Y,) = spec.outputs
    column_reduction(nest, Y, vector_lanes(target), REDUCE_VECTORS, par=True)


def make_transpose(shape) -> Spec:
    m, n = shape
    A = Buffer("A", (m, n), float32)
    T = Compute("T", (n, m), lambda i, j: A[j, i])
    a = _rng().standard_normal((m, n)).astype(np.float32)
    return Spec(f"{m}x{n}", [T], [A, T], {"A": a}, {"T": (n, m)},
                lambda d: {"T": d["A"].T.astype(np.float64)}, lambda d: np.ascontiguousarray(d["A"].T),
                lambda t, d: (lambda v: (lambda: v.t().contiguous()))(t.from_numpy(d["A"])),
                flops=0, bytes=8 * m * n, tol=0)


def transpose_tile(target: Target | None = None, dtype=float32) -> tuple[int, int]:
    """(output rows, output columns) of a transpose tile for ``target``: each output row of
    the tile is four cache lines (whole lines for the streaming stores, at least one native
    vector), read from as many input rows, each of them read sequentially down a strip of
    16 times as many output rows (long runs for the hardware prefetcher). Measured on
    AVX-512 (4096^2 floats, one thread): 64 x 64 tiles 1.3x, 1024 x 64 ones 2.1x faster
    than 32 x 32 ones written 8 wide; 48 or 80 columns are slower than 64.

    >>> transpose_tile(Target(vector_bits=512)), transpose_tile(Target(vector_bits=256), "float64")
    ((1024, 64), (512, 32))
    """
    return auto_transpose_tile(resolve_target(target), dtype)     # the automatic scheduler's rule


def hand_transpose(nest: LoopNest, spec: Spec, target: Target | None = None, tile: tuple[int, int] | None = None,
                   lanes: int | None = None) -> None:
    """Tiles of ``transpose_tile(target)`` elements (``tile``: output rows x columns), strips
    of tile rows in parallel; the output is written ``lanes`` contiguous elements at a time
    (one native vector by default; the input side is gathered)."""
    lanes = lanes or vector_lanes(target)
    ti, tj = tile or transpose_tile(target)
    (T,) = spec.outputs
    i, j = nest.get_loops_for(T)
    if tile is None and isinstance(i.extent, int):      # a strip for every core at least
        ti = min(ti, max(tj, i.extent // resolve_target(target).cores))
    io, jo, ii, ji = nest.tile(i, j, ti, tj)
    if isinstance(ji.extent, int) and ji.extent % lanes == 0 and spec.out_shapes["T"][1] % tj == 0:
        _, vi, _ = nest.split_with_tail(ji, lanes)
        nest.vectorize(vi)
    nest.parallelize(io)


def make_matmul(n: int, b_transposed: bool = False) -> Spec:
    """``A @ B``, or with ``b_transposed`` a linear layer's ``A @ B.T`` (B holds the weights,
    one output per row; PyTorch's peer is ``torch.nn.functional.linear``)."""
    A = Buffer("A", (n, n), float32)
    B = Buffer("B", (n, n), float32)
    if b_transposed:
        C = Reduce("C", (n, n), Sum(), lambda i, j, k: A[i, k] * B[j, k], (n,))
    else:
        C = Reduce("C", (n, n), Sum(), lambda i, j, k: A[i, k] * B[k, j], (n,))
    r = _rng()
    d = {"A": r.standard_normal((n, n)).astype(np.float32), "B": r.standard_normal((n, n)).astype(np.float32)}
    right = (lambda b: b.T) if b_transposed else (lambda b: b)

    def torch_fn(t, x):
        a, b = t.from_numpy(x["A"]), t.from_numpy(x["B"])
        return (lambda: t.nn.functional.linear(a, b)) if b_transposed else (lambda: a @ b)
    return Spec(f"n={n}", [C], [A, B, C], d, {"C": (n, n)},
                lambda x: {"C": x["A"].astype(np.float64) @ right(x["B"].astype(np.float64))},
                lambda x: x["A"] @ right(x["B"]), torch_fn, flops=2 * n ** 3, bytes=12 * n * n, tol=1e-3)


def hand_matmul(nest: LoopNest, spec: Spec, target: Target | None = None) -> None:
    """Register-blocked matmul (``schedules.matmul_schedule``): a tile of C in registers
    sized to the target (6 rows x 4 vectors of 16 floats on AVX-512, 8 x 2 where A fits in less than
    half of L2; 6 x 2 x 8 on AVX2), k in cache-sized slices with the B panel packed (transposed for
    a linear layer's ``A @ B.T``), column panels in parallel."""
    from bench.schedules import matmul_schedule
    matmul_schedule(nest, spec.outputs[0], target=target)


def make_linear(n: int) -> Spec:
    """A linear layer's product ``A @ B.T`` (``make_matmul(n, b_transposed=True)``)."""
    return make_matmul(n, b_transposed=True)


def make_linear_batch(shape) -> Spec:
    """A linear layer ``A @ B.T`` (B holds the weights) whose batch, the rows of A, is a size
    variable ``M``: built once for every batch and run at ``m`` rows (``shape = (m, n)``, B
    n x n); the kernel reads M off A's shape (a model generating one row at a time)."""
    m, n = shape
    M = Var("M")
    A = Buffer("A", (M, n), float32)
    B = Buffer("B", (n, n), float32)
    C = Reduce("C", (M, n), Sum(), lambda i, j, k: A[i, k] * B[j, k], (n,))
    r = _rng()
    d = {"A": r.standard_normal((m, n)).astype(np.float32), "B": r.standard_normal((n, n)).astype(np.float32)}

    def torch_fn(t, x):
        a, b = t.from_numpy(x["A"]), t.from_numpy(x["B"])
        return lambda: t.nn.functional.linear(a, b)
    return Spec(f"M={m} of {n}", [C], [A, B, C], d, {"C": (m, n)},
                lambda x: {"C": x["A"].astype(np.float64) @ x["B"].astype(np.float64).T},
                lambda x: x["A"] @ x["B"].T, torch_fn, flops=2 * m * n * n, bytes=4 * (2 * m * n + n * n), tol=1e-3)


def hand_linear_batch(nest: LoopNest, spec: Spec, target: Target | None = None) -> None:
    """``make_linear_batch``'s layer specialized by hand (``LoopNest.specialize``): where the
    batch is at most 12 rows, dot products in tiles of 4 rows x 4 rows of B x vector lanes
    (``dot_product_row_tiles``); else the register-blocked matmul (``hand_matmul``)."""
    from loopnest.auto.templates import dot_product_row_tiles
    (C,) = spec.outputs
    few = nest.unscheduled()
    dot_product_row_tiles(few, C, vector_lanes(target), 4, 4, par=True)
    few.eliminate_dead_stores()
    nest.specialize(C.dims[0] <= 12, few)
    hand_matmul(nest, spec, target)


def make_conv2d(shape) -> Spec:
    n, c, h, w, k = shape
    X = Buffer("X", (n, c, h, w), float32)
    W = Buffer("W", (k, c, 3, 3), float32)
    from te import if_then_else
    P = Compute("P", (n, c, h + 2, w + 2), lambda b, ci, y, x: if_then_else(
        (y >= 1) & (y <= h) & (x >= 1) & (x <= w), X[b, ci, y - 1, x - 1], 0.0))
    Y = Reduce("Y", (n, k, h, w), Sum(), lambda b, co, y, x, ci, ry, rx: P[b, ci, y + ry, x + rx] * W[co, ci, ry, rx],
               (c, 3, 3))
    r = _rng()
    d = {"X": r.standard_normal((n, c, h, w)).astype(np.float32),
         "W": r.standard_normal((k, c, 3, 3)).astype(np.float32)}

    def ref(x):
        xp = np.pad(x["X"].astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((n, k, h, w))
        for ry in range(3):
            for rx in range(3):
                out += np.einsum("nchw,kc->nkhw", xp[:, :, ry:ry + h, rx:rx + w], x["W"][:, :, ry, rx])
        return {"Y": out}

    def np_fn(x):
        xp = np.pad(x["X"], ((0, 0), (0, 0), (1, 1), (1, 1)))
        cols = np.stack([xp[:, :, ry:ry + h, rx:rx + w] for ry in range(3) for rx in range(3)], axis=2)
        return np.einsum("ncrhw,kcr->nkhw", cols, x["W"].reshape(k, c, 9), optimize=True)

    def torch_fn(t, x):
        xv, wv = t.from_numpy(x["X"]), t.from_numpy(x["W"])
        return lambda: t.nn.functional.conv2d(xv, wv, padding=1)

    return Spec(f"{n}x{c}x{h}x{w}->{k}", [Y], [X, W, Y], d, {"Y": (n, k, h, w)}, ref, np_fn, torch_fn,
                flops=2 * n * k * h * w * c * 9, bytes=4 * (n * c * h * w + k * c * 9 + n * k * h * w), tol=1e-3)


def hand_conv2d(nest: LoopNest, spec: Spec, target: Target | None = None) -> None:
    """Register-blocked direct convolution (``schedules.conv2d_schedule``), its tile sized to
    the target's vector width and registers."""
    from bench.schedules import conv2d_schedule
    conv2d_schedule(nest, spec.outputs[0], target=target)


def make_blur(shape) -> Spec:
    """Halide's separable 3x3 blur of an (h + 2) x (w + 2) image: the input scaled to
    [0, 1], a horizontal blur ``blur_x`` and a vertical blur ``blur_y``."""
    h, w = shape
    A = Buffer("A", (h + 2, w + 2), float32)
    inp = Compute("inp", (h + 2, w + 2), lambda y, x: A[y, x] * (1.0 / 255))
    bx = Compute("blur_x", (h + 2, w), lambda y, x: (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) * (1.0 / 3))
    by = Compute("blur_y", (h, w), lambda y, x: (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) * (1.0 / 3))
    d = {"A": _rng().uniform(0, 255, (h + 2, w + 2)).astype(np.float32)}

    def blur(a, dt):
        f = a.astype(dt) / dt(255)
        b = (f[:, :-2] + f[:, 1:-1] + f[:, 2:]) / dt(3)
        return (b[:-2] + b[1:-1] + b[2:]) / dt(3)

    def torch_fn(t, x):
        av = t.from_numpy(x["A"])
        k = t.full((1, 1, 3, 3), 1.0 / (9 * 255), dtype=t.float32)
        return lambda: t.nn.functional.conv2d(av[None, None], k)

    return Spec(f"{h}x{w}", [by], [A, by], d, {"blur_y": (h, w)}, lambda x: {"blur_y": blur(x["A"], np.float64)},
                lambda x: blur(x["A"], np.float32), torch_fn,
                flops=13 * h * w, bytes=4 * ((h + 2) * (w + 2) + h * w), tol=1e-5)


def hand_blur(nest: LoopNest, spec: Spec, target: Target | None = None, rows: int = 8,
              lanes: int | None = None) -> None:
    """Halide's blur schedule without storage folding: ``inp`` inlined, ``blur_x`` computed
    per strip of ``rows`` output rows (in a strip-sized buffer per thread), strips in
    parallel, rows vectorized ``lanes`` wide (one native vector by default)."""
    lanes = lanes or vector_lanes(target)
    t = _tensors(nest)
    (by,) = spec.outputs
    nest.compute_inline(t["inp"])
    y, _ = nest.get_loops_for(by)
    yo, _ = nest.split_with_mask(y, rows)
    nest.compute_at(t["blur_x"], yo)
    nest.parallelize(yo)
    vectorize_innermost(nest, by, lanes)
    vectorize_innermost(nest, t["blur_x"], lanes)


WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("elementwise", make_elementwise, [1 << 20], [1 << 24], hand_elementwise),
    Workload("gelu", make_gelu, [1 << 20], [1 << 24], hand_elementwise),
    Workload("softmax", make_softmax, [(512, 1024)], [(4096, 1024)], hand_softmax),
    Workload("layernorm", make_layernorm, [(512, 1024)], [(4096, 1024)], hand_layernorm),
    Workload("row_sum", make_row_sum, [(1024, 1024)], [(4096, 4096)], hand_row_sum),
    Workload("transpose", make_transpose, [(1024, 1024)], [(4096, 4096)], hand_transpose),
    Workload("matmul", make_matmul, [256, 512], [256, 512, 1024, 1152, 2048], hand_matmul,
             skip_default=lambda n: n > 1024),     # the unscheduled 2048 matmul takes ~2 minutes a call
    Workload("linear", make_linear, [512], [1024], hand_matmul,
             skip_default=lambda n: n > 512),      # the unscheduled 1024 product takes seconds a call
    Workload("linear_batch", make_linear_batch, [(1, 512)], [(1, 1024), (8, 1024), (64, 1024)], hand_linear_batch),
    Workload("sum", make_sum, [(1024, 1024)], [(4096, 4096)], hand_sum),
    Workload("column_sum", make_column_sum, [(1024, 1024)], [(4096, 4096)], hand_column_sum),
    Workload("conv1d", make_conv1d, [(1 << 16, 31)], [(1 << 20, 31)], hand_conv1d),
    Workload("conv2d", make_conv2d, [(1, 16, 28, 28, 16)], [(1, 64, 56, 56, 64)], hand_conv2d),
    Workload("blur", make_blur, [(512, 768)], [(1536, 2560)], hand_blur),
    Workload("stencil", make_stencil, [(512, 768)], [(1536, 2560)], hand_stencil),
    Workload("pyramid", make_pyramid, [(512, 768)], [(1536, 2560)], hand_pyramid),
]}
