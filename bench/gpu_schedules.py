"""GPU schedules for every benchmark workload of ``bench.kernels.WORKLOADS``.

Each schedule takes the workload's ``LoopNest`` and ``Spec`` (like the CPU hand schedules)
and binds it to the GPU with the public transforms -- ``split_with_mask``, ``tile``,
``reorder``, ``fuse``, ``compute_at``, ``rfactor``, ``cache_accesses`` (shared-memory rows
and tiles, per-thread register accumulators), ``set_gpu_block_index`` /
``set_gpu_thread_index`` -- except the matmul, whose register-tiled shared-memory schedule
is the statement tree of :func:`loopnest.transforms.gpu_matmul.register_tiled_matmul` (the transforms
lay out a cached accumulator like the tensor, ``[BM, BN]``, which the CUDA backend cannot
keep in registers once each thread owns a 2-D micro-tile).

>>> from bench.kernels import WORKLOADS
>>> spec = WORKLOADS["row_sum"].make((8, 1024))
>>> nest = gpu_nest("row_sum", spec)
>>> from codegen import build
>>> build(nest, spec.args, target="cuda").launch_dims()
[('k0_S', (8, 1, 1), (256, 1, 1))]

``GPU_SCHEDULES`` maps each workload name to its schedule; ``TEST_SIZES`` gives sizes small
enough for the interpreter (IREval runs GPU axes as serial loops). A schedule adapts its
tile and thread counts to the size it is given (the sizes must be positive; the matmul
needs multiples of its block tile).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from loopnest import LoopNest
from loopnest.auto.gpu import WGMMA_ARCHS, WGMMA_TILES as TUNING_WGMMA_TILES
from loopnest.auto.gpu import (block_reduce, cache_rows, direct_conv2d, divisor_at_most, grid_partials, grid_reduce,
                               pow2_at_most, row_threads, thread_strided)
from loopnest.nest import Loop
from loopnest.transforms.gpu_matmul import mma_shared_bytes
from loopnest.transforms.gpu_wgmma import wgmma_shared_bytes
from te import Buffer, Reduce, Sum, cast, float32

from codegen.cuda.plan import STATIC_SHARED_BYTES

from .kernels import WORKLOADS, Spec
from .pipelines import PYRAMID_LEVELS, STENCIL_STAGES, stencil_kinds

__all__ = ["GPU_SCHEDULES", "TEST_SIZES", "gpu_nest", "thread_strided", "block_reduce", "matmul_config",
           "elementwise_gpu", "softmax_gpu", "layernorm_gpu", "row_sum_gpu", "sum_gpu", "column_sum_gpu",
           "transpose_gpu", "matmul_gpu", "mma_matmul_config", "WGMMA_TILES", "WGMMA_TF32_TILES",
           "tf32_wgmma_matmul", "linear_gpu", "conv1d_gpu", "conv2d_gpu", "blur_gpu", "make_matmul_lowp", "bind_2d",
           "stencil_gpu", "pyramid_gpu"]


# ---------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------
def _tensor(nest: LoopNest, name: str):
    for t in nest.tensors:
        if t.name == name:
            return t
    raise KeyError(f"the nest has no tensor named {name!r}; it has {[t.name for t in nest.tensors]}")


def _loop_named(nest: LoopNest, name: str) -> Loop:
    for l in nest.get_all_loops():
        if l.name == name:
            return l
    raise KeyError(f"no loop named {name!r}; loops: {[l.name for l in nest.get_all_loops()]}")


# ---------------------------------------------------------------------------------------
# schedules
# ---------------------------------------------------------------------------------------
def elementwise_gpu(nest: LoopNest, spec: Spec, threads: int = 256, per_thread: int = 4) -> None:
    """``Y = max(A*2 + B, 0) * C - 1`` (and GELU): blocks of 256 threads, each thread 4 elements.

    Memory-bound (16 bytes per element, 5 flops): the aim is copy bandwidth. Element
    ``b*1024 + e*256 + t`` goes to thread ``t`` of block ``b``, so each of a thread's 4
    (unrolled, independent) loads of an array is a fully coalesced 1 KiB warp access and four
    are in flight per thread -- enough memory parallelism to saturate HBM without a huge grid;
    256 threads give full occupancy with few registers. A partial last block is masked."""
    (Y,) = spec.outputs
    (i,) = nest.get_loops_for(Y)
    bo, rest = nest.split_with_mask(i, threads * per_thread)
    nest.set_gpu_block_index(bo, 0)
    thread_strided(nest, rest, threads)


def sum_gpu(nest: LoopNest, spec: Spec, threads: int = 256) -> None:
    """The sum of a whole matrix: partial sums by many blocks of ``threads`` threads, each
    thread adding every partials-th element (consecutive threads, consecutive elements),
    then one block adding the partials with a tree (:func:`loopnest.auto.gpu.grid_reduce`,
    the partials of :func:`loopnest.auto.gpu.grid_partials`, at least a block's worth)."""
    (S,) = spec.outputs
    grid_reduce(nest, nest.buffer(S.name), threads, max(threads, grid_partials(S) or threads))


def conv1d_gpu(nest: LoopNest, spec: Spec, threads: int = 256, per_thread: int = 4) -> None:
    """``Y[i] = sum_k X[i + k] * W[k]``: the outputs as :func:`elementwise_gpu` cuts them
    (blocks of ``threads`` threads, ``per_thread`` outputs each, ``threads`` apart), each
    thread adding up its outputs' taps: a few dozen terms are too few for a tree of threads
    per output, and the warp's reads of ``X`` at one tap are consecutive (coalesced)."""
    (Y,) = spec.outputs
    i = nest.get_loops_for(Y)[0]
    bo, rest = nest.split_with_mask(i, threads * per_thread)
    nest.set_gpu_block_index(bo, 0)
    thread_strided(nest, rest, threads)


def _row_block_with_shared_x(nest: LoopNest, spec: Spec, stats, threads: int | None, cap: int = 256):
    """The common start of the row schedules: ``compute_at`` each of ``stats`` (in order)
    into the row loop of the output, bind that loop to blockIdx.x, and copy the row of X
    into shared memory with a thread-strided (coalesced) loop. Returns ``(Y, row loop,
    threads per block)``."""
    (Y,) = spec.outputs
    X = spec.args[0]
    T = threads or row_threads(int(X.shape[1]), cap)
    i, _ = nest.get_loops_for(Y)
    for t in stats:
        nest.compute_at(t, i)
    nest.set_gpu_block_index(i, 0)
    nest.cache_accesses(X, "X_sh", i)
    thread_strided(nest, _loop_named(nest, "X_sh_i1"), T)
    return Y, i, T


#: threads per row of softmax and layernorm at most, and the threads of their reductions'
#: second level. On an H100 at 4096 x 1024, 32 and 4 took softmax to 9.1 us (PyTorch 10.3)
#: from 12.1 us with 128 and 32 (64 and 8: 9.6; 128 and 8: 11.0), and layernorm to 8.2 us
#: from 9.5. Each level after the registers is a chain of dependent steps through shared
#: memory (128 / 32 + 32 steps with 128 and 32, 8 + 4 here; for the NaN-propagating max a
#: step is several operations), and with one warp per row each thread keeps its slice of
#: the row in its own registers (the CUDA backend sees that no other thread reads it).
NORM_THREADS, NORM_SECOND = 32, 4


def softmax_gpu(nest: LoopNest, spec: Spec, threads: int | None = None, second: int = NORM_SECOND) -> None:
    """Row softmax, one block per row.

    One kernel: ``compute_at`` brings ``mx``, ``e`` and ``s`` into the row loop (bound to
    blockIdx.x); the row of X is copied once (``cache_accesses``) with coalesced loads,
    ``exp(x - max)`` is stored in a row too, and both reductions are three-level trees
    (``threads`` register partials -> ``second`` -> 1, :func:`block_reduce`;
    ``NORM_THREADS`` threads at most). Every loop over the row is thread-strided, so each
    warp touches 32 consecutive floats and each thread reads only its own slice of the
    copied rows: the CUDA backend keeps those slices in each thread's own array (32 floats
    of each row per thread at 1024 columns), not in shared memory. Global traffic is the
    minimum, one read and one write per element."""
    mx, e, s = _tensor(nest, "mx"), _tensor(nest, "e"), _tensor(nest, "s")
    Y, i, T = _row_block_with_shared_x(nest, spec, (s, e, mx), threads, NORM_THREADS)
    parts = block_reduce(nest, mx, T, second) + block_reduce(nest, s, T, second)
    thread_strided(nest, nest.get_loops_for(e)[-1], T)
    thread_strided(nest, nest.get_loops_for(Y)[-1], T)
    cache_rows(nest, [e, mx, s] + parts, i)


def layernorm_gpu(nest: LoopNest, spec: Spec, threads: int | None = None, second: int = NORM_SECOND) -> None:
    """Layer norm over rows, one block per row.

    Same shape as :func:`softmax_gpu`: the row of X is read from global memory once (into
    each thread's own slice with ``NORM_THREADS`` threads, else a shared row); ``mean`` and
    ``var`` are block reductions (register partials, then a shared-memory tree); the output
    loop is thread-strided (coalesced loads of G and Bb and stores of Y). Two passes over the
    copied row keep the variance exact (no E[x^2]-E[x]^2 cancellation)."""
    mean, var = _tensor(nest, "mean"), _tensor(nest, "var")
    Y, i, T = _row_block_with_shared_x(nest, spec, (var, mean), threads, NORM_THREADS)
    parts = block_reduce(nest, mean, T, second) + block_reduce(nest, var, T, second)
    thread_strided(nest, nest.get_loops_for(Y)[-1], T)
    cache_rows(nest, [mean, var] + parts, i)


def row_sum_gpu(nest: LoopNest, spec: Spec, threads: int | None = None, second: int = 32) -> None:
    """Row sums, one block per row: each of 256 threads sums a strided slice of the row in a
    register straight from global memory (coalesced; no shared copy of the row is needed
    since every element is read once), then the partials are combined in shared memory
    (256 -> 32 -> 1) and one thread stores the row's sum."""
    (S,) = spec.outputs
    A = spec.args[0]
    n = int(A.shape[1])
    T = threads or row_threads(n)
    i, _ = nest.get_loops_for(S)
    nest.set_gpu_block_index(i, 0)
    parts = block_reduce(nest, S, T, second)
    nest.cache_accesses(S, "S_sh", i)
    cache_rows(nest, parts, i)


def column_sum_gpu(nest: LoopNest, spec: Spec, threads: int = 256) -> None:
    """Column sums, a thread per column summing it in a register down the rows: the threads
    of a warp read neighbouring columns of one row at a time (coalesced)."""
    (S,) = spec.outputs
    (j, _) = nest.get_loops_for(S)
    blocks, lanes = nest.split_with_mask(j, threads)
    nest.set_gpu_block_index(blocks, 0)
    nest.set_gpu_thread_index(lanes, 0)


def linear_gpu(nest: LoopNest, spec: Spec) -> None:
    """``A @ B.T`` takes the automatic GPU schedule (``nest.auto_schedule("cuda")``): the
    float32 register-tiled tree reads B as K x N, so each output is a block's reduction
    (float16 and bfloat16 operands take the tensor cores, which read B either way)."""
    nest.auto_schedule("cuda")


def transpose_gpu(nest: LoopNest, spec: Spec, tile: int | None = None, rows: int = 8,
                  shared: bool | None = None) -> None:
    """``T[i, j] = A[j, i]``. With ``shared`` (None: when both sizes are multiples of the tile,
    64 by default) the tiled transpose through a shared tile padded to ``tile + 1`` columns
    (:func:`_shared_transpose`): coalesced on both sides, 2.74 TB/s on an H100 at 4096^2 (64 x
    64 tiles, 8 rows of threads; 2.71 with 32 x 32), against 1.80 for the version below.

    Otherwise 32 x 32 tiles through L1, one block of 32 x 8 threads per tile, each thread 4
    rows of the tile 8 apart: stores are coalesced (threadIdx.x runs along T's rows); each
    warp's loads read one float from 32 rows of A, and the tile's rows stay in L1 while the
    block's other warps use the rest of each sector."""
    A = spec.args[0]
    if shared is None:
        shared = all(int(d) % (tile or 64) == 0 for d in A.shape)
    tile = tile or (64 if shared else 32)
    (T,) = spec.outputs
    if shared:
        _shared_transpose(nest, A, T, tile, rows)
        return
    i, j = nest.get_loops_for(T)
    io, jo, ii, ji = nest.tile(i, j, tile, tile)
    nest.set_gpu_block_index(io, 1)
    nest.set_gpu_block_index(jo, 0)
    ro, ri = nest.split_with_mask(ii, rows)
    nest.reorder([ro, ri, ji], [1, 2, 0])
    nest.set_gpu_thread_index(ri, 1)
    nest.set_gpu_thread_index(ji, 0)
    nest.unroll(ro)


def _shared_transpose(nest: LoopNest, A: Buffer, T, tile: int, rows: int, convert=None) -> None:
    """``shared=True``: the classic tiled transpose as a statement tree. A block of
    ``tile x rows`` threads reads a ``tile x tile`` tile of A row by row (coalesced) into
    shared memory padded to ``tile + 1`` columns (no bank conflicts on the column reads),
    waits, and writes it to T row by row (coalesced), each thread ``tile / rows`` rows.
    ``convert(value)``: what is stored of each element read (the element itself by default)."""
    from loopnest.stmt import Block, For, ForKind, Store
    from te import Var

    m, n = (int(d) for d in A.shape)
    if m % tile or n % tile or tile % rows:
        raise ValueError(f"the shared-memory transpose needs {m} x {n} to be multiples of the tile {tile} "
                         f"and the tile of the rows {rows}")
    tile_buf = Buffer("A_tile", (tile, tile + 1), A.dtype)
    by, bx = Var("by"), Var("bx")
    counter = iter(range(100))

    def threads(body_fn):
        ty, tx, r = (Var(f"{b}{next(counter)}") for b in ("ty", "tx", "r"))
        inner = For(r, 0, tile // rows, Block(body_fn(ty * (tile // rows) + r, tx)), ForKind.UNROLLED)
        return For(ty, 0, rows, Block([For(tx, 0, tile, Block([inner]), ForKind.GPU_THREAD, 0)]),
                   ForKind.GPU_THREAD, 1)

    convert = convert or (lambda e: e)
    load = threads(lambda y, x: [Store(tile_buf, (y, x), convert(A[by * tile + y, bx * tile + x]))])
    store = threads(lambda y, x: [Store(T, (bx * tile + y, by * tile + x), tile_buf[x, y])])
    root = For(by, 0, m // tile, Block([For(bx, 0, n // tile, Block([load, store]), ForKind.GPU_BLOCK, 0)]),
               ForKind.GPU_BLOCK, 1)
    nest.add_buffer(tile_buf)
    nest.root = Block((root,))
    nest.verify()


def matmul_config(m: int, n: int, k: int) -> dict:
    """Tile sizes for an ``m x k @ k x n`` matmul: 128 x 128 block tiles with 8 x 8
    accumulators per thread when the problem has at least 256 such tiles (two blocks for
    each of an H100's 132 SMs), else 64 x 64 with 4 x 4 per thread, else 32 x 32 with 2 x 2
    (16 x 16 threads in each case). The k-tiles are double-buffered through registers
    (``stages=2``); 128 x 128 and 64 x 64 tiles take k-tiles of 16 read in 128-bit loads
    (``vector=4``) where K allows, else k-tiles of 8.

    Measured on an H100 (TFLOP/s, cuBLAS's time / ours in the same run in brackets):

    * 4096: 48.8 (0.96) with k-tiles of 16 in 128-bit loads; 46.4-46.5 with k-tiles of 8 in
      128-bit loads, 45.0 in 32-bit loads, 38.2 (0.76) single-buffered; 128 x 64 or 64 x 128
      blocks 33-35.
    * 1024 (64 tiles of 128): 28.7 (0.77) with 64 x 64 tiles, k-tiles of 16 in 128-bit loads;
      24.1 with 64 x 64 tiles and k-tiles of 8; 21.1 with 128 x 128 tiles.
    * 512: 12.5 (1.35) against 10.4 with k-tiles of 8; 256: 2.7 against 2.3.

    >>> matmul_config(4096, 4096, 4096)
    {'BM': 128, 'BN': 128, 'BK': 16, 'TM': 8, 'TN': 8, 'stages': 2, 'vector': 4}
    >>> matmul_config(1024, 1024, 1024)["BM"]
    64
    """
    for bm, tm in ((128, 8), (64, 4), (32, 2)):
        if m % bm or n % bm:
            continue
        if bm == 128 and (m // bm) * (n // bm) < 256:
            continue
        config = {"BM": bm, "BN": bm, "BK": 8 if k % 8 == 0 else divisor_at_most(k, 8), "TM": tm, "TN": tm,
                  "stages": 2}
        if bm >= 64 and k % 16 == 0:
            config.update(BK=16, vector=4)        # each thread's share of a tile in 128-bit loads
        return config
    raise ValueError(f"matmul_gpu needs M and N to be multiples of 32, got {m} x {n}")


def matmul_gpu(nest: LoopNest, spec: Spec, tensor_cores: bool | None = None,
               max_shared_bytes: int = STATIC_SHARED_BYTES, arch: str | None = None, **config) -> None:
    """``C = A @ B``. float16 and bfloat16 inputs go to the tensor cores (``tensor_cores``
    None: when no SIMT tile ``TM``/``TN`` is given) with :func:`mma_matmul_config`'s tiles
    (:mod:`loopnest.transforms.gpu_matmul`, ``nest.gpu_matmul``); float32 inputs too with ``tensor_cores=True`` (tf32,
    which rounds the operands: opt-in). Otherwise: shared-memory tiles of A and B plus a register micro-tile per thread
    (:func:`loopnest.transforms.gpu_matmul.register_tiled_matmul`, tiles from :func:`matmul_config`;
    keyword arguments override them). ``max_shared_bytes`` is what the kernel will be built
    with: the tensor-core tiles take two shared stages where it allows. ``wgmma=True`` takes
    Hopper's warpgroup-MMA tree instead (its tiles: ``BM, BN, BK, stages, ahead, swizzle``),
    as :func:`mma_matmul_config` does by default for the device ``arch`` sm_90 (``wgmma=False``
    keeps the ``mma.sync`` tree there).

    A block of 16 x 16 threads computes a 128 x 128 tile of C (64 x 64 on small problems),
    each thread an 8 x 8 block of float32 accumulators in registers. Per k-tile of 8 the
    block copies 128 x 8 of A (stored transposed) and 8 x 128 of B into shared memory, then
    for each k every thread reads 8 + 8 floats (four 128-bit shared loads) for 64 FMAs: that
    arithmetic intensity leaves the FMA units, not shared-memory bandwidth, as the limit.
    The micro-tile is interleaved (rows ``ty*4 + {0..3}`` and ``64 + ty*4 + {0..3}``,
    columns likewise) so a warp's 128-bit loads read consecutive addresses, free of bank
    conflicts. About 105 registers per thread: two blocks (16 warps) per SM hide the
    global-load latency at each k-tile. float16 inputs stay float16 in shared memory (half
    the traffic) and are converted to float32 as they are used."""
    A, B = spec.args[0], spec.args[1]
    m, k = (int(d) for d in A.shape)
    n = int(B.shape[1])
    if tensor_cores is None:
        tensor_cores = str(A.dtype) in ("float16", "bfloat16") and not {"TM", "TN"} & set(config)
    if tensor_cores:
        # wgmma=True: the warpgroup-MMA tree, with its own tile defaults; wgmma=False: the mma.sync tree
        chosen = "wgmma" in config
        base = {} if config.get("wgmma") else mma_matmul_config(m, n, k, str(A.dtype), max_shared_bytes,
                                                                None if chosen else arch)
        nest.gpu_matmul(True, **dict(base, **config))
    else:
        nest.gpu_matmul(False, **dict(matmul_config(m, n, k), **config))


#: the warpgroup-MMA tree's tiles on sm_90 (float16, bfloat16): 128 x 256 blocks of two
#: warpgroups, k-tiles of 64 in four shared stages (192 KiB), two copied ahead
WGMMA_TILES = dict(TUNING_WGMMA_TILES[0])
#: the blocks it needs (about one per SM of an H100) on the devices that take it (``WGMMA_ARCHS``)
WGMMA_MIN_BLOCKS = 128


#: the tf32 tree's tiles: k-tiles of 32 float32 (one 128-byte swizzled row), the same bytes per stage
WGMMA_TF32_TILES = {"wgmma": True, "BM": 128, "BN": 256, "BK": 32, "stages": 4}
#: the tile parameters :func:`tf32_wgmma_matmul` takes (those of ``wgmma_matmul`` it leaves open)
WGMMA_TF32_TILE_NAMES = frozenset({"BM", "BN", "BK", "stages", "ahead", "swizzle"})


def tf32_wgmma_matmul(A: Buffer, B: Buffer, **tiles) -> list[tuple[LoopNest, list]]:
    """``C = A @ B`` for float32 ``A`` (M x K) and ``B`` (K x N) as tf32 on Hopper's warpgroup
    MMA (sm_90a), in two kernels: the tf32 instruction reads both operands K-major (it has
    no transposed form), so the first kernel transposes ``B`` into ``BT`` (N x K: the
    shared-memory tiled transpose of :func:`transpose_gpu`, 64 x 64 tiles) and the second is
    the warpgroup tree (:data:`WGMMA_TF32_TILES`, ``tiles`` override them) on ``A`` and
    ``BT``. The transpose rounds B to tf32 (to nearest even): the tensor cores may instead
    truncate an operand's low bits, which biases each sum towards zero; rounded, only A's
    half of that bias is left. Returns ``[(nest, args)]`` in launch order; the second takes ``BT`` by name
    (build it with ``max_shared_bytes`` up to the device's opt-in limit: the default tiles
    take 192 KiB). Raises ``ValueError`` for a tile parameter it does not take
    (``WGMMA_TF32_TILE_NAMES``), and (or ``ScheduleError`` from the tree) where the sizes do
    not divide into the tiles (64 for the transpose).

    >>> A, B = Buffer("A", (256, 128), "float32"), Buffer("B", (128, 256), "float32")
    >>> [(nest.tensorized, [a.name for a in args]) for nest, args in tf32_wgmma_matmul(A, B, stages=2)]
    [({}, ['B', 'BT']), ({'kk': 'wgmma_m64nNk8_tf32'}, ['A', 'BT', 'C'])]
    """
    from te import Compute

    m, k = (int(d) for d in A.shape)
    n = int(B.shape[1])
    if str(A.dtype) != "float32" or str(B.dtype) != "float32" or int(B.shape[0]) != k:
        raise ValueError(f"tf32_wgmma_matmul takes float32 A (M x K) and B (K x N), got {A.dtype} {A.shape} and "
                         f"{B.dtype} {B.shape}")
    unknown = sorted(set(tiles) - WGMMA_TF32_TILE_NAMES)
    if unknown:
        raise ValueError(f"tf32_wgmma_matmul: unknown tile parameter(s) {', '.join(unknown)}; it takes "
                         f"{', '.join(sorted(WGMMA_TF32_TILE_NAMES))} (the warpgroup tree's, see wgmma_matmul)")
    config = dict(WGMMA_TF32_TILES, **tiles)

    def to_tf32(e):
        return cast(cast(e, "tf32"), float32)

    BT = Compute("BT", (n, k), lambda j, kk: to_tf32(B[kk, j]))
    transpose = LoopNest([BT])
    _shared_transpose(transpose, B, BT, 64, 8, to_tf32)
    BTin = Buffer("BT", (n, k), "float32")
    C = Reduce("C", (m, n), Sum(), lambda i, j, kk: A[i, kk] * BTin[j, kk], (k,))
    matmul = LoopNest([C])
    matmul.gpu_matmul(True, **config)
    return [(transpose, [B, BT]), (matmul, [A, BTin, C])]


def mma_matmul_config(m: int, n: int, k: int, dtype: str = "float16",
                      max_shared_bytes: int = STATIC_SHARED_BYTES, arch: str | None = None) -> dict:
    """Tiles of the tensor-core matmul (:func:`loopnest.transforms.gpu_matmul.mma_matmul`): 128 x 128
    blocks of eight 64 x 32 warp tiles with k-tiles of 64, or 64 x 64 blocks of 32 x 32 warp
    tiles for small problems. float32 (tf32) takes k-tiles of half the depth (the same bytes).

    Where ``max_shared_bytes`` (what the kernel is built with) holds two k-stages of the
    128 x 128 tiles (70 KiB), the next k-tile is copied into the other stage with
    ``cp.async`` while the warps multiply (``stages=2, prefetch="shared"``); else it is
    prefetched through registers. Measured on an H100 at 4096, in TFLOP/s: float16 289 with
    two shared stages against 256 through registers (286 and 259 with three and four stages,
    274-285 with 128 x 256 blocks, 245 with 64 x 64 warp tiles); tf32 136 against 117.

    On ``arch`` sm_90, float16 and bfloat16 take Hopper's warpgroup MMA instead
    (:data:`WGMMA_TILES`, :mod:`loopnest.transforms.gpu_wgmma`) where the sizes divide into
    at least :data:`WGMMA_MIN_BLOCKS` of its blocks and ``max_shared_bytes`` holds its four
    stages. On an H100 at 4096, same run: float16 617 TFLOP/s (0.82 of cuBLAS) against 283
    for ``mma.sync``; bfloat16 629 (0.81) against 287; with three stages (one k-tile ahead)
    513, with four stages copying three ahead (no MMA left in flight) 546, 128 x 128 blocks
    511, k-tiles of 128 in two stages 552.

    >>> mma_matmul_config(4096, 4096, 4096)
    {'BM': 128, 'BN': 128, 'BK': 64, 'WM': 64, 'WN': 32}
    >>> mma_matmul_config(4096, 4096, 4096, max_shared_bytes=227 * 1024)
    {'BM': 128, 'BN': 128, 'BK': 64, 'WM': 64, 'WN': 32, 'stages': 2, 'prefetch': 'shared'}
    >>> mma_matmul_config(256, 256, 256, "float32")
    {'BM': 64, 'BN': 64, 'BK': 16, 'WM': 32, 'WN': 32}
    >>> mma_matmul_config(4096, 4096, 4096, max_shared_bytes=227 * 1024, arch="sm_90")
    {'wgmma': True, 'BM': 128, 'BN': 256, 'BK': 64, 'stages': 4}
    """
    t = WGMMA_TILES
    if arch in WGMMA_ARCHS and dtype in ("float16", "bfloat16") and m % t["BM"] == 0 and n % t["BN"] == 0 \
            and k % t["BK"] == 0 and (m // t["BM"]) * (n // t["BN"]) >= WGMMA_MIN_BLOCKS \
            and wgmma_shared_bytes(t["BM"], t["BN"], t["BK"], t["stages"]) <= max_shared_bytes:
        return dict(t)
    deep = 2 if dtype == "float32" else 1
    if m % 128 == 0 and n % 128 == 0 and k % 64 == 0 and (m // 128) * (n // 128) >= 64:
        config = {"BM": 128, "BN": 128, "BK": 64 // deep, "WM": 64, "WN": 32}
        itemsize = 4 if dtype == "float32" else 2
        if mma_shared_bytes(128, 128, 64 // deep, stages=2, itemsize=itemsize) <= max_shared_bytes:
            config.update(stages=2, prefetch="shared")
        return config
    if m % 64 == 0 and n % 64 == 0 and k % 32 == 0:
        return {"BM": 64, "BN": 64, "BK": 32 // deep, "WM": 32, "WN": 32}
    raise ValueError(f"the tensor-core matmul needs M and N to be multiples of 64 and K of 32, got "
                     f"{m} x {n} x {k}; pass tensor_cores=False for the SIMT schedule")


def conv2d_gpu(nest: LoopNest, spec: Spec, channels: int = 2, pixels: int = 1, threads: int = 128) -> None:
    """3x3 convolution (padding 1): :func:`loopnest.auto.gpu.direct_conv2d`, one block per
    (image, ``channels`` output channels, band of rows), each thread ``channels`` x
    ``pixels`` outputs in registers, the padded input window of each input channel computed
    into shared memory.

    Measured on an H100 (1 x 64 x 56 x 56, 64 output channels), in ms: 0.059 with two
    channels per thread, 0.064 with one, 0.063-0.080 with four or eight, 0.081-0.15 with 2-4
    pixels as well: larger register tiles leave too few threads for this small problem.
    Bands of 128 threads (two rows) rather than 256: 0.0555-0.0559 against 0.0593-0.0595 in
    the same runs; 512 threads 0.063. Copying the windows of 4-32 input channels per barrier
    instead of one: 0.0547-0.069, no better."""
    (Y,) = spec.outputs
    direct_conv2d(nest, Y, channels, pixels, threads)


def make_matmul_lowp(n: int, dtype: str = "float16") -> Spec:
    """The matmul workload with ``dtype`` inputs (float16 or bfloat16) and float32 sums and
    output -- the GPU benchmark's low-precision matmul (scheduled by :func:`matmul_gpu`).

    >>> spec = make_matmul_lowp(64)
    >>> spec.inputs["A"].dtype, spec.out_shapes
    (dtype('float16'), {'C': (64, 64)})
    """
    A = Buffer("A", (n, n), dtype)
    B = Buffer("B", (n, n), dtype)
    C = Reduce("C", (n, n), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (n,))
    r = np.random.default_rng(0)
    npdt = A.dtype.numpy
    d = {"A": r.standard_normal((n, n)).astype(npdt), "B": r.standard_normal((n, n)).astype(npdt)}
    return Spec(f"n={n} {A.dtype}", [C], [A, B, C], d, {"C": (n, n)},
                lambda x: {"C": x["A"].astype(np.float64) @ x["B"].astype(np.float64)},
                lambda x: x["A"].astype(np.float32) @ x["B"].astype(np.float32), None,
                flops=2 * n ** 3, bytes=(2 * A.dtype.itemsize + 4) * n * n, tol=1e-3)


def blur_gpu(nest: LoopNest, spec: Spec, rows: int = 8, cols: int = 128) -> None:
    """Halide's blur on the GPU: ``inp`` inlined, ``blur_y`` tiled ``rows`` x ``cols`` (a tile
    per block, a column per thread), ``blur_x`` computed per tile into a ``(rows + 2) x
    cols`` shared-memory buffer (storage follows ``compute_at``)."""
    (by,) = spec.outputs
    nest.compute_inline(_tensor(nest, "inp"))
    _tile_with_producer(nest, by, _tensor(nest, "blur_x"), rows, cols)


def _tile_with_producer(nest: LoopNest, consumer, producer, rows: int, cols: int) -> None:
    """Tile the 2-D ``consumer`` ``rows`` x ``cols`` (a block per tile, a thread per column)
    and compute ``producer`` per tile (its storage, the tile and its halo, follows
    ``compute_at`` into shared memory), its columns spread over the same threads."""
    yo, xo, _, xi = nest.tile(*nest.get_loops_for(consumer), rows, cols)
    nest.compute_at(producer, xo)
    nest.set_gpu_block_index(xo, 0)
    nest.set_gpu_block_index(yo, 1)
    nest.set_gpu_thread_index(xi, 0)
    _, pxi = nest.split_with_mask(nest.get_loops_for(producer)[-1], cols)
    nest.set_gpu_thread_index(pxi, 0)


def bind_2d(nest: LoopNest, t, rows: int = 8, cols: int = 32) -> None:
    """Tile the two loops of a 2-D stage ``t`` computed at the root into blocks of ``rows`` x
    ``cols`` threads (fewer where the stage is smaller), a thread per element.

    >>> from te import Buffer, Compute
    >>> A = Buffer("A", (5, 40), "float32"); B = Compute("B", (5, 40), lambda y, x: A[y, x] + 1.0)
    >>> nest = LoopNest([B]); bind_2d(nest, B)
    >>> [l.kind for l in nest.get_loops_for(B)]
    ['gpu_block', 'gpu_block', 'gpu_thread', 'gpu_thread']
    """
    y, x = nest.get_loops_for(t)
    yo, xo, yi, xi = nest.tile(y, x, pow2_at_most(y.extent, rows), pow2_at_most(x.extent, cols))
    nest.set_gpu_block_index(yo, 1)
    nest.set_gpu_block_index(xo, 0)
    nest.set_gpu_thread_index(yi, 1)
    nest.set_gpu_thread_index(xi, 0)


def stencil_gpu(nest: LoopNest, spec: Spec, fuse: bool = True, rows: int = 8, cols: int = 128) -> None:
    """The stencil chain on the GPU, the input scaling inlined.

    ``fuse``: each horizontal-vertical-sharpen run of stages is one kernel, as
    :func:`blur_gpu` fuses the blur: the horizontal blur inlined into the vertical one,
    which is computed per ``rows`` x ``cols`` tile of the sharpen (a column per thread) into
    a shared-memory buffer with its halo; the stages outside such runs get a kernel each
    (:func:`bind_2d`). Thirteen stages take five kernels, so the image crosses global memory
    five times instead of thirteen. Without ``fuse``, every stage is a kernel of its own."""
    nest.compute_inline(_tensor(nest, "S0"))
    kinds = stencil_kinds()
    fused: set[int] = set()
    for s in range(3, STENCIL_STAGES + 1) if fuse else ():
        if kinds[s - 3:s] != ["x", "y", "xy"]:
            continue
        nest.compute_inline(_tensor(nest, f"S{s - 2}"))
        _tile_with_producer(nest, _tensor(nest, f"S{s}"), _tensor(nest, f"S{s - 1}"), rows, cols)
        fused |= {s - 2, s - 1, s}
    for s in range(1, STENCIL_STAGES + 1):
        if s not in fused:
            bind_2d(nest, _tensor(nest, f"S{s}"))


def pyramid_gpu(nest: LoopNest, spec: Spec) -> None:
    """The pyramid on the GPU: the CPU schedule's inlining (the input scaling, the
    Laplacian's upsampling, the output's vertical upsampling), every other stage a kernel of
    its own (``bind_2d``)."""
    nest.compute_inline(_tensor(nest, "g0"))
    for lv in range(PYRAMID_LEVELS):
        for name in ("ug", "ugx", "uo"):
            nest.compute_inline(_tensor(nest, f"{name}{lv}"))
    for lv in range(1, PYRAMID_LEVELS + 1):
        bind_2d(nest, _tensor(nest, f"dx{lv}"))
        bind_2d(nest, _tensor(nest, f"g{lv}"))
    for lv in range(PYRAMID_LEVELS - 1, -1, -1):
        bind_2d(nest, _tensor(nest, f"uox{lv}"))
        bind_2d(nest, _tensor(nest, f"out{lv}"))


GPU_SCHEDULES: dict[str, Callable[[LoopNest, Spec], None]] = {
    "elementwise": elementwise_gpu,
    "gelu": elementwise_gpu,
    "softmax": softmax_gpu,
    "layernorm": layernorm_gpu,
    "row_sum": row_sum_gpu,
    "transpose": transpose_gpu,
    "matmul": matmul_gpu,
    "linear": linear_gpu,
    "linear_batch": linear_gpu,
    "sum": sum_gpu,
    "column_sum": column_sum_gpu,
    "conv1d": conv1d_gpu,
    "conv2d": conv2d_gpu,
    "blur": blur_gpu,
    "stencil": stencil_gpu,
    "pyramid": pyramid_gpu,
}

#: sizes at which the GPU-bound nests run on IREval in well under a second each
TEST_SIZES: dict[str, object] = {
    "elementwise": 3000,
    "gelu": 3000,
    "softmax": (4, 512),
    "layernorm": (4, 512),
    "row_sum": (4, 512),
    "transpose": (40, 72),
    "matmul": 64,
    "linear": 8,
    "linear_batch": (3, 64),
    "sum": (40, 300),
    "column_sum": (40, 300),
    "conv1d": (3000, 7),
    "conv2d": (1, 4, 8, 12, 4),
    "blur": (20, 300),
    "stencil": (12, 40),
    "pyramid": (32, 64),
}


def gpu_nest(name: str, spec: Spec, **params) -> LoopNest:
    """A fresh LoopNest of ``spec`` (workload ``name``) with its GPU schedule applied."""
    nest = LoopNest(spec.outputs)
    GPU_SCHEDULES[name](nest, spec, **params)
    return nest


assert set(GPU_SCHEDULES) == set(WORKLOADS), "every benchmark workload needs a GPU schedule"
