"""GPU schedule building blocks, made of the public transforms: threads over a loop, block
reductions, rows of intermediates in shared memory. Used by the hand GPU schedules of
``bench.gpu_schedules`` and by the tuning space for CUDA (``tune.gpu_space``).

>>> from te import Buffer, Reduce, Sum
>>> from loopnest import LoopNest
>>> A = Buffer("A", (8, 1024), "float32")
>>> S = Reduce("S", (8,), Sum(), lambda i, k: A[i, k], (1024,))
>>> nest = LoopNest([S])
>>> row = nest.get_loops_for(S)[0]
>>> _ = nest.set_gpu_block_index(row, 0)
>>> cache_rows(nest, block_reduce(nest, S, 256), row)
>>> sorted(b for b in nest.buffers if b.endswith("_sh"))
['S_rf_1_sh', 'S_rf_sh']
"""
from __future__ import annotations

from te import expr as E
from te.queries import expr_size, int_value, loads
from te.tensor import Tensor

from ..errors import ScheduleError
from ..loop import Loop
from ..lower import tensors_in_order
from ..transforms.gpu_matmul import load_of, matmul_operands
from ..transforms.gpu_wgmma import wgmma_shared_bytes
from .classify import classify, consumers_of
from .schedule import SHORT_REDUCTION, AutoScheduleReport, reduction_terms

__all__ = ["thread_strided", "block_reduce", "grid_reduce", "grid_partials", "cache_rows", "row_threads", "pow2_at_most",
           "conv2d_operands", "direct_conv2d", "divisor_at_most", "GpuPlan", "auto_schedule_gpu", "MMA_TILES",
           "SIMT_TILES", "WGMMA_TILES", "WGMMA_ARCHS"]


def pow2_at_most(n: int, cap: int) -> int:
    """The largest power of two at most ``min(n, cap)`` (1 at least).

    >>> pow2_at_most(1000, 256), pow2_at_most(3, 256)
    (256, 2)
    """
    p = 1
    while p * 2 <= min(n, cap):
        p *= 2
    return p


def row_threads(n: int, cap: int = 256) -> int:
    """Threads per row of ``n`` columns: a power of two, at most ``cap``, about four columns
    per thread, at least a warp.

    >>> row_threads(1024), row_threads(64)
    (256, 32)
    """
    return max(32, pow2_at_most(max(n // 4, 1), cap))


def thread_strided(nest, loop, threads: int, unroll: bool = True) -> Loop:
    """Spread ``loop`` over ``threads`` threads of threadIdx.x, each taking every
    ``threads``-th iteration (``i = o * threads + t``), so a warp touches consecutive
    elements (coalesced global accesses, conflict-free shared ones). Returns the thread loop.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (1024,), "float32"); B = Compute("B", (1024,), lambda i: A[i] + 1.0)
    >>> nest = LoopNest([B]); t = thread_strided(nest, nest.get_loops_for(B)[0], 256)
    >>> print(nest)                                   # unroll expands the 4 iterations
    gpu_thread.x for (int i_inner = 0; i_inner < 256; i_inner++) {
      B[i_inner] = A[i_inner] + 1.0f;
      B[i_inner + 256] = A[i_inner + 256] + 1.0f;
      B[i_inner + 512] = A[i_inner + 512] + 1.0f;
      B[i_inner + 768] = A[i_inner + 768] + 1.0f;
    }
    """
    outer, inner = nest.split_with_mask(loop, threads)
    nest.reorder([outer, inner], [1, 0])
    nest.set_gpu_thread_index(inner, 0)
    if unroll and isinstance(outer.extent, int) and outer.extent <= 8:
        nest.unroll(outer)
    return inner


def _reduce_level(nest, t, k, threads: int):
    """One level of a block reduction of ``t`` over loop ``k``: ``rfactor`` into one partial
    per thread (thread ``p`` combines iterations ``p, p + threads, ...``), the partial kept
    in a register while it accumulates. Returns (partial buffer, the final combining loop)."""
    ko, ki = nest.split_with_mask(k, threads)
    rf = nest.rfactor(t, ki)
    init = nest.loop(ki.name + "_rf")
    nest.reorder([ko, ki], [1, 0])
    fused = nest.fuse([init, ki])
    nest.set_gpu_thread_index(fused, 0)
    nest.cache_accesses(rf, rf.name + "_reg", fused)      # per thread: one element, a register
    final = nest.get_loops_for(t)[-1]
    return rf, final


def block_reduce(nest, t, threads: int, second: int = 32) -> list:
    """Reduce ``t`` (one value per row, the row loop bound to a block) over its innermost
    reduction loop with ``threads`` threads: each thread combines a strided slice in a
    register (``rfactor`` + ``cache_accesses``), then ``second`` threads combine those
    partials, then one thread combines the last ``second`` -- a three-level tree through
    shared memory (the CUDA backend has no warp shuffles). Returns the partial buffers,
    which the caller caches in shared memory at the row loop (:func:`cache_rows`)."""
    k = nest.get_loops_for(t)[-1]
    rf1, final = _reduce_level(nest, t, k, threads)
    out = [rf1]
    if second and threads >= 4 * second:
        rf2, _ = _reduce_level(nest, t, final, second)
        out.append(rf2)
    return out


def grid_reduce(nest, t, threads: int, partials: int) -> Loop:
    """Reduce ``t`` -- few outputs, many terms each (the sum of a whole array) -- in two
    kernels: ``partials`` threads per output, in blocks of ``threads``, each add every
    ``partials``-th term into a register (consecutive threads read consecutive terms) and
    store their partial; then a block per output adds its ``partials`` partials with a tree
    of ``threads`` threads (:func:`block_reduce`). The reduction loops are flattened into
    one first. Returns the output loop of the second kernel. All or nothing: where a step is
    refused (``ScheduleError``), the nest is as it was.

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (64, 96), "float32")
    >>> S = Reduce("S", (1,), Sum(), lambda z, i, j: A[i, j], (64, 96))
    >>> nest = LoopNest([S]); _ = grid_reduce(nest, nest.buffer("S"), 128, 512)
    >>> [(lp.extent, lp.kind) for lp in nest.get_loops_for("S_rf")]      # 4 blocks of 128 threads
    [(4, 'gpu_block'), (128, 'gpu_thread')]
    """
    saved, history = nest._snapshot(), list(nest.history)
    try:
        return _grid_reduce(nest, t, threads, partials)
    except BaseException:
        nest._restore(saved)
        nest.history[:] = history
        raise


def _grid_reduce(nest, t, threads: int, partials: int) -> Loop:
    if not t.dims:      # the second kernel binds its output loop to the blocks
        raise ScheduleError(f"grid_reduce: {t.name} has no output dimension for the second kernel's blocks; give "
                            f"it one of extent 1 (shape (1,), as the sum of a whole array in the example)")
    loops = nest.get_loops_for(t)
    outer, red = loops[:len(t.dims)], loops[len(t.dims):]
    r = nest.flatten(red) if len(red) > 1 else red[0]
    if len(outer) > 1:
        outer = [nest.flatten(outer)]
    ro, ri = nest.split_with_mask(r, partials)
    rf = nest.rfactor(t, ri)                 # rf[outputs..., p]: every partials-th term from p
    init = nest.loop(ri.name + "_rf")
    nest.reorder([ro, ri], [1, 0])
    part = nest.fuse([init, ri])
    first, init_t, update_t = nest.distribute(outer[0])
    second = nest.fuse([init_t, update_t])
    blocks, thread = nest.split_with_mask(nest.flatten([first, part]), threads)
    nest.set_gpu_block_index(blocks, 0)
    nest.set_gpu_thread_index(thread, 0)
    nest.cache_accesses(rf, rf.name + "_reg", thread)        # a thread's partial in a register
    nest.set_gpu_block_index(second, 0)
    cache_rows(nest, block_reduce(nest, t, threads), second)
    return second


def grid_partials(t: Tensor) -> int | None:
    """The partials per output :func:`grid_reduce` takes for reduction ``t``: a power of two,
    at most ``GRID_PARTIALS`` in all and ``GRID_TERMS_PER_THREAD`` terms each at least; None
    when ``t`` has ``GRID_OUTPUTS`` outputs or more, fewer than ``GRID_MIN_TERMS`` terms in
    all, or sizes that are not constants.

    >>> from te import Buffer, Reduce, Sum
    >>> A = Buffer("A", (4096, 4096), "float32")
    >>> grid_partials(Reduce("S", (1,), Sum(), lambda z, i, j: A[i, j], (4096, 4096)))
    65536
    >>> grid_partials(Reduce("R", (4096,), Sum(), lambda i, j: A[i, j], (4096,))) is None
    True
    """
    outputs, terms = 1, reduction_terms(t)
    for d in t.dims:
        v = int_value(d)
        outputs = outputs * v if outputs is not None and v is not None else None
    if outputs is None or terms is None or outputs >= GRID_OUTPUTS or outputs * terms < GRID_MIN_TERMS:
        return None
    return pow2_at_most(min(terms // GRID_TERMS_PER_THREAD, GRID_PARTIALS // outputs), GRID_PARTIALS)


def cache_rows(nest, bufs, row_loop) -> None:
    """One row of each intermediate of ``bufs`` in shared memory at ``row_loop`` (the
    copy-backs to the full-size intermediates are dead and removed)."""
    for b in bufs:
        nest.cache_accesses(b, b.name + "_sh", row_loop)
    nest.eliminate_dead_stores()


def divisor_at_most(n: int, cap: int) -> int:
    """The largest divisor of ``n`` that is at most ``cap`` (1 at least).

    >>> divisor_at_most(56, 64), divisor_at_most(56, 32), divisor_at_most(7, 2)
    (56, 28, 1)
    """
    return max(d for d in range(1, max(1, min(n, cap)) + 1) if n % d == 0)


def _sum_of(e, a: E.Var, b: E.Var) -> bool:
    return type(e) is E.Add and {id(e.a), id(e.b)} == {id(a), id(b)}


def _static(dims) -> bool:
    return all(int_value(d) is not None for d in dims)


def conv2d_operands(t: Tensor):
    """``(window, weights)`` when ``t`` is a direct 2-D convolution of static sizes,
    ``t[b, co, y, x] = sum_{ci, ry, rx} window[b, ci, y + ry, x + rx] * weights[co, ci, ry, rx]``
    (either factor first, casts of the loads allowed), the weights an input buffer and the
    window an input buffer or a tensor (a zero padding of the input, say); else None.

    >>> from te import Buffer, Reduce, Sum
    >>> X, W = Buffer("X", (1, 4, 10, 10), "float32"), Buffer("W", (8, 4, 3, 3), "float32")
    >>> Y = Reduce("Y", (1, 8, 8, 8), Sum(), lambda b, k, y, x, c, r, s: X[b, c, y + r, x + s] * W[k, c, r, s],
    ...            (4, 3, 3))
    >>> [buf.name for buf in conv2d_operands(Y)]
    ['X', 'W']
    """
    if not t.is_reduction or len(t.args) != 4 or len(t.reduce_args) != 3 or type(t.body) is not E.Mul:
        return None
    b, co, y, x = t.args
    ci, ry, rx = t.reduce_args
    for win, wt in ((load_of(t.body.a), load_of(t.body.b)), (load_of(t.body.b), load_of(t.body.a))):
        if win is None or wt is None or len(win.indices) != 4 or len(wt.indices) != 4:
            continue
        i = win.indices
        if not (i[0] is b and i[1] is ci and _sum_of(i[2], y, ry) and _sum_of(i[3], x, rx)):
            continue
        if not all(a is v for a, v in zip(wt.indices, (co, ci, ry, rx))) or isinstance(wt.buffer, Tensor):
            continue
        if _static(t.dims) and _static(t.reduce_dims) and _static(win.buffer.shape) and _static(wt.buffer.shape):
            return win.buffer, wt.buffer
    return None


def direct_conv2d(nest, Y, channels: int = 2, pixels: int = 1, threads: int = 128) -> None:
    """A GPU schedule of the direct convolution ``Y`` (:func:`conv2d_operands`): one block per
    (image, ``channels`` output channels, band of rows), each thread ``channels`` x
    ``pixels`` (consecutive in a row) outputs in registers.

    The input-channel loop ``ci`` moves outside the thread loops (the accumulators are a
    ``cache_accesses`` copy of the block's output tile, packed into registers per thread).
    For each ``ci`` the block copies the input window it needs, (rows + 2) x (cols + 2),
    into shared memory (``cache_accesses``; a window that is a tensor, such as a zero
    padding, is first computed at ``ci``, so the padding test runs once per element): each
    input value comes from global memory about once per block, and the 3 x 3 taps (unrolled)
    read shared memory; the weights are block-uniform loads (one broadcast transaction per
    warp). A thread's taps are loaded once for its ``channels`` output channels, and each
    weight once for its ``pixels`` outputs. The band covers whole rows (width up to 64, else
    a divisor) so no thread is masked, and at most ``threads`` threads; ``channels`` and
    ``pixels`` fall back to their largest divisors of the channel count and the band width.
    Raises ``ScheduleError`` for a ``Y`` that is not such a convolution.

    >>> from te import Buffer, Reduce, Sum
    >>> from loopnest import LoopNest
    >>> X, W = Buffer("X", (1, 4, 10, 10), "float32"), Buffer("W", (8, 4, 3, 3), "float32")
    >>> Y = Reduce("Y", (1, 8, 8, 8), Sum(), lambda b, k, y, x, c, r, s: X[b, c, y + r, x + s] * W[k, c, r, s],
    ...            (4, 3, 3))
    >>> nest = LoopNest([Y]); direct_conv2d(nest, Y)
    >>> sorted(b for b in nest.buffers if b.endswith("_sh"))
    ['X_sh']
    """
    ops = conv2d_operands(Y)
    if ops is None:
        raise ScheduleError(f"direct_conv2d: {Y.name} is not a direct 2-D convolution of static sizes "
                            f"({Y.name}[b, co, y, x] = sum over ci, ry, rx of window[b, ci, y + ry, x + rx] * "
                            "weights[co, ci, ry, rx]); schedule it another way")
    window = ops[0]
    b, co, y, x = nest.get_loops_for(Y)[:4]
    h, w = int(Y.shape[2]), int(Y.shape[3])
    tx = divisor_at_most(w, 64)
    pixels = divisor_at_most(tx, pixels)
    channels = divisor_at_most(int(Y.shape[1]), channels)
    ty = divisor_at_most(h, max(1, threads * pixels // tx))
    coo, coi, _ = nest.split_with_tail(co, channels)
    yo, xo, yi, xi = nest.tile(y, x, ty, tx)
    xt, xp, _ = nest.split_with_tail(xi, pixels)             # a thread's column, its pixels
    nest.reorder([coi, yo, xo, yi, xt, xp], [1, 2, 3, 4, 0, 5])
    band = nest.flatten([yo, xo])
    for loop in (xp, coi, xt, yi):
        nest.distribute(loop)                 # init, then update, each over the tile
    uy, ut, uc, up, ci, ry, rx = nest.get_loops_for(Y)[-7:]
    window_rows, window_cols = ty + ry.extent - 1, tx + rx.extent - 1
    nest.reorder([uy, ut, uc, up, ci, ry, rx], [4, 0, 1, 5, 6, 2, 3])   # ci, pixels of the tile, taps, outputs
    if isinstance(window, Tensor):
        nest.compute_at(window, ci)
    blocks = []
    for loop, axis in ((b, 2), (coo, 1), (band, 0)):
        if loop.extent == 1 and (blocks or loop is not band):
            nest.unroll(loop)                 # a unit loop goes (its index becomes 0)
        else:
            blocks.append((loop, axis))       # (a single tile keeps its band loop: a grid of one block)
    for loop, axis in blocks:
        nest.set_gpu_block_index(loop, axis)
    nest.cache_accesses(nest.buffer(Y.name), "acc", blocks[-1][0])
    shared = nest.cache_accesses(nest.buffer(window.name), f"{window.name}_sh", ci)
    nest.eliminate_dead_stores()
    # the write-back of the accumulators: a loop per dimension of the tile longer than 1
    # (channels, rows, columns), the channels moved inside the threads' loops and unrolled
    back = dict(zip([d for d, n in (("c", channels), ("y", ty), ("x", tx)) if n > 1],
                    [lp for lp in nest.get_loops_for(Y) if lp.exists() and lp.kind != "gpu_block"]))
    if "x" in back:
        back["x"], back["p"], _ = nest.split_with_tail(back["x"], pixels)
    order = [back[d] for d in "cyxp" if d in back]
    if "c" in back:
        nest.reorder(order, [order.index(back[d]) for d in "yxcp" if d in back])
    _bind_threads(nest, [(yi, 1), (xt, 0), (uy, 1), (ut, 0), (back.get("y"), 1), (back.get("x"), 0)])
    for loop in (coi, xp, ry, rx, uc, up, back.get("c"), back.get("p")):
        if loop is not None:
            nest.unroll(loop)
    # the copy's loops, inside ci: one per dimension of the window longer than 1 (rows, columns)
    loops = nest.get_loops_for(shared)
    copy = loops[next(k for k, lp in enumerate(loops) if lp.var is ci.var) + 1:]
    if len(copy) == 2:
        pyo, pxo, pyi, pxi = nest.tile(copy[0], copy[1], ty, tx // pixels)
        nest.reorder([pyo, pxo, pyi, pxi], [2, 3, 0, 1])   # thread loops outermost: one barrier
        _bind_threads(nest, [(pyi, 1), (pxi, 0)])
    elif len(copy) == 1:        # a window one row tall or one column wide
        (t, axis), = [(t, axis) for n, t, axis in ((window_rows, ty, 1), (window_cols, tx // pixels, 0)) if n > 1]
        outer, inner = nest.split_with_mask(copy[0], t)
        nest.reorder([outer, inner], [1, 0])
        _bind_threads(nest, [(inner, axis)])


def _bind_threads(nest, loops: list) -> None:
    """Bind each ``(loop, axis)`` of ``loops`` to that thread axis, in order; a loop that is
    None (absent) or of one iteration is left as it is (a block of one thread on an axis
    needs no binding)."""
    for loop, axis in loops:
        if loop is not None and loop.extent != 1:
            nest.set_gpu_thread_index(loop, axis)


# ---------------------------------------------------------------------------------------------
# the GPU templates of a whole computation: the CUDA tuning space's, and schedule="auto"'s
# ---------------------------------------------------------------------------------------------
#: block and warp tiles of the tensor-core matmul, fastest first (measured on an H100 at 4096)
MMA_TILES = [dict(BM=128, BN=128, BK=64, WM=64, WN=32), dict(BM=128, BN=128, BK=64, WM=64, WN=64),
             dict(BM=128, BN=128, BK=32, WM=64, WN=32), dict(BM=64, BN=64, BK=32, WM=32, WN=32),
             dict(BM=128, BN=128, BK=64, WM=32, WN=32)]
#: the warpgroup-MMA tree's tiles (float16 / bfloat16 on ``WGMMA_ARCHS``, in the device's opt-in
#: shared memory), fastest first: on an H100 at 4096 617, 511 and 513 TFLOP/s (``mma.sync``: 283)
WGMMA_TILES = [dict(wgmma=True, BM=128, BN=256, BK=64, stages=4), dict(wgmma=True, BM=128, BN=128, BK=64, stages=4),
               dict(wgmma=True, BM=128, BN=256, BK=64, stages=3)]
#: the devices with the warpgroup MMA
WGMMA_ARCHS = ("sm_90", "sm_90a")
#: block and per-thread tiles of the float32 register-tiled matmul, double-buffered, fastest first
#: (on an H100: the first at 4096, the second at 1024; 128-bit loads where the tiles allow)
SIMT_TILES = [dict(BM=128, BN=128, BK=16, TM=8, TN=8, stages=2, vector=4),
              dict(BM=64, BN=64, BK=16, TM=4, TN=4, stages=2, vector=4),
              dict(BM=128, BN=128, BK=8, TM=8, TN=8, stages=2), dict(BM=64, BN=64, BK=8, TM=4, TN=4, stages=2),
              dict(BM=128, BN=64, BK=8, TM=8, TN=4, stages=2), dict(BM=32, BN=32, BK=8, TM=2, TN=2, stages=2)]
#: expression nodes an inlined element-wise intermediate may add to its readers (its size times its reads)
INLINE_BUDGET = 64
#: threads per block of the fallback schedule of an element-wise tensor or reduction
FALLBACK_THREADS = 128
#: a reduction with fewer outputs than this (about the SMs of a large GPU: a block per output
#: would leave most of them idle) and at least GRID_MIN_TERMS terms in all takes ``grid_reduce``,
#: each output's terms split among up to GRID_PARTIALS threads in all, GRID_TERMS_PER_THREAD
#: terms a thread at least
GRID_OUTPUTS, GRID_MIN_TERMS, GRID_PARTIALS, GRID_TERMS_PER_THREAD = 128, 1 << 20, 1 << 16, 64
#: the benchmark's choices, which ``auto_schedule_gpu`` takes and the tuning space seeds with
DEFAULT_KNOBS = {"elementwise": {"threads": 256, "per": 4}, "reduction": {"threads": 256}, "matmul": {"tile": 0},
                 "conv": {"channels": 2, "pixels": 1, "threads": 128}}


class GpuPlan:
    """What the GPU templates do with each tensor of the computation of ``outputs``:
    element-wise intermediates are inlined into their readers within ``INLINE_BUDGET`` (else
    computed by kernels of their own); a lone matmul that one of the
    tiles divides takes ``nest.gpu_matmul`` (tensor cores for float16, bfloat16 and float8,
    else the SIMT tree); a lone direct convolution :func:`direct_conv2d` (its window tensor, if
    any, kept); every other tensor is ``"elementwise"`` (its loops flattened, blocks of
    ``threads`` threads of ``per`` elements each; also a reduction of at most
    ``SHORT_REDUCTION`` terms, each thread adding up its outputs' terms) or ``"reduction"``
    (other contractions included: a block per output, a tree of ``threads`` threads; with few
    outputs and many terms, :func:`grid_reduce`'s two kernels). ``kind_of`` names each kept
    tensor's template; ``apply`` schedules a nest with knobs per tensor. Raises
    ``ScheduleError`` for an external call (the CUDA backend does not run them).

    ``arch`` (the device, such as ``"sm_90"``; None: unknown) and ``max_shared_bytes`` (what
    the kernels will be built with; None: the default, which holds none of the warpgroup
    tree's stages) decide the matmul's tiles: on sm_90 a float16 or bfloat16 matmul takes the
    warpgroup tree's ``WGMMA_TILES`` first, those that fit the shared memory.

    >>> from te import Buffer, Compute, Reduce, Sum, exp
    >>> A = Buffer("A", (8, 256), "float32")
    >>> S = Reduce("S", (8,), Sum(), lambda i, k: exp(A[i, k]), (256,))
    >>> plan = GpuPlan([S]); plan.kind_of["S"], plan.defaults()
    ('reduction', {'S': {'threads': 256}})
    """

    def __init__(self, outputs, arch: str | None = None, max_shared_bytes: int | None = None):
        self.arch, self.max_shared_bytes = arch, max_shared_bytes
        self.tensors = tensors_in_order(list(outputs))
        self.outputs = {t.name for t in outputs}
        self.kinds = {t.name: classify(t) for t in self.tensors}
        self.conv = next((t for t in self.tensors if self._is_conv(t)), None)
        window = conv2d_operands(self.conv)[0].name if self.conv is not None else None
        self.inlined = self._to_inline(window)
        self.kept = [t for t in self.tensors if t.name not in self.inlined]
        self.fallbacks: dict[str, str] = {}     # tensor -> why its template was refused (``apply``)
        self.matmul = None
        self.short: dict[str, int] = {}     # reductions of at most SHORT_REDUCTION terms -> their terms
        for t in self.kept:
            kind = self.kinds[t.name]
            if kind == "extern":
                raise ScheduleError(f"tensor {t.name} is an external call, which the CUDA backend does not run")
            if t is self.conv:
                continue
            if matmul_operands(t) is not None and len(self.tensors) == 1 and self._tiles_for(t)[1]:
                self.matmul = t     # (other contractions take the reduction template)
        if self.conv is not None:
            self.kind_of = {self.conv.name: "conv"}
        elif self.matmul is not None:
            self.kind_of = {self.matmul.name: "matmul"}
        else:
            # a reduction of few terms: one output per thread (a tree of threads would mostly idle)
            self.short = {t.name: reduction_terms(t) for t in self.kept if self.kinds[t.name] != "elementwise"
                          and (reduction_terms(t) or SHORT_REDUCTION + 1) <= SHORT_REDUCTION}
            self.kind_of = {t.name: "elementwise" if self.kinds[t.name] == "elementwise" or t.name in self.short
                            else "reduction" for t in self.kept}
        # reductions of few outputs and many terms: partials per output in a first kernel
        self.partials = {t.name: p for t in self.kept if self.kind_of.get(t.name) == "reduction"
                         for p in [grid_partials(t)] if p}

    def _to_inline(self, window: str | None) -> list[str]:
        """The element-wise intermediates to inline, producers first: each while the nodes it
        adds to its readers' bodies (its body, its own inlined producers expanded, once per
        read) stay within ``INLINE_BUDGET``; a GPU recomputes cheaply, but chains of tensors
        read many times would grow exponentially."""
        readers = consumers_of(self.tensors)
        by_name = {t.name: t for t in self.tensors}
        size: dict[str, int] = {}
        inlined: list[str] = []
        for t in self.tensors:
            if self.kinds[t.name] == "extern":     # no body: never inlined (read through its buffer)
                size[t.name] = 1
                continue
            size[t.name] = expr_size([t.body]) + sum(len(loads(t.body, by_name[p])) * (size[p] - 1) for p in inlined)
            reads = sum(len(loads(by_name[c].body, t)) for c in readers[t.name] if self.kinds[c] != "extern")
            if (t.name not in self.outputs and t.name != window and self.kinds[t.name] == "elementwise" and reads
                    and size[t.name] * reads <= INLINE_BUDGET):
                inlined.append(t.name)
        return inlined

    def _is_conv(self, t) -> bool:
        """Whether ``t`` is a direct convolution the templates schedule: an output, the only
        tensor but for its window when that is an element-wise tensor of inputs (a zero padding)."""
        ops = conv2d_operands(t) if t.name in self.outputs else None
        if ops is None:
            return False
        window = ops[0]
        others = [u for u in self.tensors if u is not t]
        if not others:
            return True
        return (len(others) == 1 and others[0].name == window.name and window.name not in self.outputs
                and self.kinds[window.name] == "elementwise" and not any(isinstance(b, Tensor) for b in window.inputs()))

    def matmul_tiles(self) -> tuple[str, list[dict]]:
        """``("mma" | "simt", tiles)``: the lone matmul's kind and the tiles of ``MMA_TILES``
        (after ``WGMMA_TILES`` on sm_90) or ``SIMT_TILES`` that divide it (a matmul no tile
        divides takes the reduction template)."""
        return self._tiles_for(self.matmul)

    def _tiles_for(self, t) -> tuple[str, list[dict]]:
        A, B, layout = matmul_operands(t)
        m, k = (int_value(d) for d in A.shape)
        n = int_value(t.dims[1])
        lowp = str(A.dtype) in ("float16", "bfloat16", "float8_e4m3", "float8_e5m2") and A.dtype == B.dtype
        if not lowp and layout != "kn":     # the SIMT tree takes B as K x N: A @ B.T is a reduction
            return "simt", []
        tiles = MMA_TILES if lowp else SIMT_TILES
        if self.arch in WGMMA_ARCHS and self.max_shared_bytes and str(A.dtype) in ("float16", "bfloat16"):
            tiles = [c for c in WGMMA_TILES if wgmma_shared_bytes(c["BM"], c["BN"], c["BK"], c["stages"])
                     <= self.max_shared_bytes] + tiles
        return ("mma" if lowp else "simt"), [c for c in tiles if m % c["BM"] == 0 and n % c["BN"] == 0
                                             and k % c["BK"] == 0]

    def defaults(self) -> dict[str, dict]:
        """The knobs of each kept tensor that ``auto_schedule_gpu`` takes (``DEFAULT_KNOBS``)."""
        return {name: dict(DEFAULT_KNOBS[kind]) for name, kind in self.kind_of.items()}

    def apply(self, nest, knobs: dict[str, dict]) -> None:
        """Schedule ``nest`` (of this plan's outputs, unscheduled) with ``knobs`` per kept tensor
        (``defaults()``'s keys). Where a step of an element-wise tensor's or a reduction's
        template is refused (a flattened symbolic domain whose iterations the analysis cannot
        tell apart, a reduction over several loops), that tensor's steps are undone and it gets
        the fallback: its first output loop over blocks of ``FALLBACK_THREADS`` threads, one
        output each (``fallbacks`` maps it to the refusal)."""
        self.fallbacks = {}
        if self.matmul is not None:
            kind, tiles = self.matmul_tiles()
            nest.gpu_matmul(tensor_cores=kind == "mma", **tiles[knobs[self.matmul.name]["tile"]])
            return
        if self.conv is not None:
            direct_conv2d(nest, self.conv, **knobs[self.conv.name])
            return
        for name in self.inlined:
            nest.compute_inline(nest.buffer(name))
        for t in self.kept:
            saved, history = nest._snapshot(), list(nest.history)
            try:
                self._template(nest, t, knobs[t.name])
            except ScheduleError as exc:
                nest._restore(saved)
                nest.history[:] = history
                outer = nest.get_loops_for(t)[:len(t.dims)]
                if not outer:
                    raise
                blocks, threads = nest.split_with_mask(outer[0], FALLBACK_THREADS)
                nest.set_gpu_block_index(blocks, 0)
                nest.set_gpu_thread_index(threads, 0)
                self.fallbacks[t.name] = str(exc).split(";")[0]

    def _template(self, nest, t, k: dict) -> None:
        if self.kind_of[t.name] == "reduction" and self.partials.get(t.name, 0) >= k["threads"]:
            grid_reduce(nest, nest.buffer(t.name), k["threads"], self.partials[t.name])
            return
        outer = nest.get_loops_for(t)[:len(t.dims)]
        if len(outer) > 1:
            outer = [nest.flatten(outer)]
        if self.kind_of[t.name] == "elementwise":
            if not outer:
                return
            blocks, inner = nest.split_with_mask(outer[0], k["threads"] * k["per"])
            nest.set_gpu_block_index(blocks, 0)
            thread_strided(nest, inner, k["threads"])
        else:
            red = nest.get_loops_for(t)[len(t.dims):]
            if len(red) > 1:        # the tree takes one reduction loop
                nest.flatten(red)
            if outer:
                nest.set_gpu_block_index(outer[0], 0)
            parts = block_reduce(nest, nest.buffer(t.name), k["threads"])
            if outer:
                cache_rows(nest, parts, outer[0])

    def describe(self, knobs: dict[str, dict]) -> list[tuple[str, str, str]]:
        """``(tensor, choice, reason)`` for each tensor under ``knobs``."""
        out = [(name, "inlined", "element-wise intermediate") for name in self.inlined]
        for name, kind in self.kind_of.items():
            k = knobs[name]
            if name in self.fallbacks:
                out.append((name, f"its first output loop over blocks of {FALLBACK_THREADS} threads, one output each",
                            f"{kind}; the template was refused: {self.fallbacks[name]}"))
            elif kind == "matmul":
                mma, tiles = self.matmul_tiles()
                out.append((name, f"{'tensor-core' if mma == 'mma' else 'SIMT'} matmul tree, tile {tiles[k['tile']]}",
                            "matmul"))
            elif kind == "conv":
                out.append((name, f"{k['channels']} output channels x {k['pixels']} pixels per thread, at most "
                                  f"{k['threads']} threads per block, input windows in shared memory",
                            "direct convolution"))
            elif kind == "elementwise":
                why = (f"reduction of {self.short[name]} terms: too few for a tree of threads, one output per thread"
                       if name in self.short else "element-wise")
                out.append((name, f"blocks of {k['threads']} threads, {k['per']} elements each", why))
            elif self.partials.get(name, 0) >= k["threads"]:
                out.append((name, f"{self.partials[name]} partials per output in blocks of {k['threads']} threads, "
                                  f"then a block per output adding them with a tree of {k['threads']} threads",
                            "reduction with few outputs: a block per output would leave the GPU idle"))
            else:
                out.append((name, f"a block per output, a tree of {k['threads']} threads", "reduction"))
        return out


def auto_schedule_gpu(nest):
    """Schedule the unscheduled ``nest`` for a GPU with the templates' default choices
    (:class:`GpuPlan`, ``DEFAULT_KNOBS``: the benchmark's GPU schedules, and the first seed of
    the CUDA tuning space). Every transform applied is in ``nest.history``; returns the report
    (one line per tensor, also stored as ``nest.auto_schedule_report``). Raises
    ``ScheduleError`` for a nest already scheduled or written as statements, for an external
    call, or where a step is refused (a tensor's template falls back first, see
    :meth:`GpuPlan.apply`); the nest is then as it was. ``nest.auto_schedule("cuda")`` calls it.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4096,), "float32")
    >>> nest = LoopNest([Compute("B", (4096,), lambda i: A[i] * 2.0)])
    >>> print(auto_schedule_gpu(nest))
    B: blocks of 256 threads, 4 elements each (element-wise)
    """
    if nest.history:
        raise ScheduleError(f"auto_schedule('cuda') needs an unscheduled nest; this one has {len(nest.history)} "
                            "transforms applied (make a new LoopNest of the same outputs)")
    if not nest.tensors:
        raise ScheduleError("auto_schedule('cuda'): the nest is written as statements, with no tensor definitions "
                            "to choose templates from; bind its loops to blocks and threads by hand")
    plan = GpuPlan(nest.outputs)
    knobs = plan.defaults()
    saved, history = nest._snapshot(), list(nest.history)
    try:
        plan.apply(nest, knobs)
    except BaseException:    # all or nothing: a failure (or a retry on a deep thread) starts afresh
        nest._restore(saved)
        nest.history[:] = history
        raise
    report = AutoScheduleReport("cuda")
    for name, choice, reason in plan.describe(knobs):
        report.add(name, choice, reason)
    nest.auto_schedule_report = report
    return report
