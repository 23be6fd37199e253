"""Matmul statement trees for the GPU, and ``LoopNest.gpu_matmul``, which puts one in place of a
lone matmul's loops.

:func:`mma_matmul` builds ``C = A @ B`` on the tensor cores (float16 or bfloat16 inputs --
tf32 for float32, float8 with B stored N x K -- float32 sums). The tree says, for every lane of
every warp, which elements of the shared-memory tiles it multiplies into which of its
accumulators, exactly as the ``mma.sync.m16n8k16`` instruction distributes a 16 x 8 tile over a
warp (:mod:`loopnest.transforms.tensorize`: lane ``l``'s value ``v`` is row ``l / 4 + 8 * (v / 2)``,
column ``2 * (l % 4) + v % 2``)::

    for lane (threadIdx.x, 32): for ti: for tj: for v in 0..4: for k in 0..16:
        acc[wy, wx, lane, ti, tj, v] += f32(As[wy*WM + 16*ti + row(lane, v), 16*kk + k])
                                        * f32(Bs[16*kk + k, wx*WN + 8*tj + col(lane, v)])

IREval and LLVM run that as written (a small matmul per lane), so every machine checks it;
``nest.tensorize("kk")`` checks that the ``kk, ti, tj, v, k`` nest is what the instruction
computes, and the CUDA step ``cuda_tensor_cores`` (``codegen.cuda.tensor_cores``) prints it as
``ldmatrix`` loads and one ``mma.sync`` per (ti, tj) tile. A block of ``(BM / WM) x (BN / WN)``
warps computes a BM x BN tile of C; per K step of BK the threads copy the A and B tiles into
shared memory (rows padded so ldmatrix reads them without bank conflicts), 16 bytes per thread
and copy step. :func:`register_tiled_matmul` is the float32 SIMT tree (shared-memory tiles and
a register micro-tile per thread).

>>> from te import Buffer, Reduce, Sum, cast, float32
>>> A = Buffer("A", (128, 64), "float16"); B = Buffer("B", (64, 128), "float16")
>>> C = Reduce("C", (128, 128), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (64,))
>>> root, bufs = mma_matmul(A, B, C)
>>> [(b.name, b.shape) for b in bufs]
[('As', (1, 128, 40)), ('Bs', (1, 32, 136)), ('acc', (2, 2, 32, 4, 8, 4))]
"""
from __future__ import annotations

import numpy as np

from te import Buffer, Var, cast, floordiv, floormod, float32, int32, minimum
from te import expr as E
from te.expr import FloatImm, IntImm
from te.tensor import Tensor

from ..errors import ScheduleError
from ..stmt import Block, For, ForKind, Store, iter_stmts
from ._rewrite import fresh_vars, matmul_sizes, thread_nest
from .gpu_wgmma import WGMMA_INTRINSICS, wgmma_matmul
from .tensorize import fragment_col, fragment_row

__all__ = ["MMA_INTRINSIC", "fragment_row", "fragment_col", "mma_matmul", "mma_shared_bytes", "register_tiled_matmul",
           "matmul_operands", "gpu_matmul", "load_of"]

#: the ``tensorize`` intrinsic of each operand type (float32: tf32, which rounds the operands)
MMA_INTRINSIC = {"float16": "mma_m16n8k16", "bfloat16": "mma_m16n8k16", "float32": "mma_m16n8k8_tf32",
                 "float8_e4m3": "mma_m16n8k32_f8", "float8_e5m2": "mma_m16n8k32_f8"}

MMA_M, MMA_N = 16, 8
LANES = 32


def mma_matmul(A, B, C, BM: int = 128, BN: int = 128, BK: int = 32, WM: int = 64, WN: int = 64,
               stages: int = 1, b_layout: str = "kn", prefetch: str = "registers"):
    """The statement tree of ``C = A @ B`` on tensor cores (see the module docstring) for
    buffers ``A`` (M x K), ``B`` (K x N) of float16 or bfloat16 -- or float32, for tf32's
    m16n8k8 (k steps of 8; declare the nests with ``tensorize(..., "mma_m16n8k8_tf32")``) --
    and ``C`` (M x N, float32); returns ``(root, [As, Bs, acc, ...])`` for ``nest.add_buffer``.
    ``b_layout="nk"`` takes ``B`` as N x K (``C[i, j] = sum_k A[i, k] * B[j, k]``), which
    float8 operands (e4m3 / e5m2, m16n8k32, ``"mma_m16n8k32_f8"``) require.

    ``stages=2`` double-buffers the shared tiles: each K step first reads the next step's
    tiles from global memory into registers (16-byte vectors), then multiplies the current
    tiles, then stores the registers into the other half of the shared buffers, so the
    global loads are in flight during the MMAs and one barrier per K step suffices.
    ``prefetch="shared"`` (``stages`` >= 2) copies the tiles straight into shared memory
    instead: tiles ``0 .. stages-2`` before the K loop, then at each K step ``ko`` the tile
    ``ko + stages - 1`` into stage ``(ko + stages - 1) % stages`` before the MMAs on stage
    ``ko % stages``; on sm_80 and later the CUDA backend issues those copies as ``cp.async``
    (``codegen.cuda.async_copy``), so they travel during the MMAs without registers.

    Raises ``ValueError`` when the sizes are not multiples of the tiles or the tiles do not
    fit the instruction (WM a multiple of 16, WN of 8, BK of 16)."""
    M, N, K, nk = matmul_sizes(A, B, C, b_layout)
    if str(A.dtype) not in MMA_INTRINSIC or A.dtype != B.dtype:
        raise ValueError(f"tensor-core inputs must both be one of {sorted(MMA_INTRINSIC)}, got {A.dtype} and {B.dtype}")
    tf32 = str(A.dtype) == "float32"
    fp8 = A.dtype.itemsize == 1
    if fp8 and not nk:
        raise ValueError("float8 operands need B as N x K (b_layout='nk'): ldmatrix cannot transpose 8-bit elements")
    MMA_K = {4: 8, 2: 16, 1: 32}[A.dtype.itemsize]
    if M % BM or N % BN or K % BK:
        raise ValueError(f"M, N, K ({M}, {N}, {K}) must be multiples of BM, BN, BK ({BM}, {BN}, {BK})")
    if BM % WM or BN % WN or WM % MMA_M or WN % MMA_N or BK % MMA_K:
        raise ValueError(f"the warp tile {WM} x {WN} must divide the block tile {BM} x {BN} and be made of "
                         f"{MMA_M} x {MMA_N} tiles; BK ({BK}) must be a multiple of {MMA_K}")
    WY, WX, TI, TJ = BM // WM, BN // WN, WM // MMA_M, WN // MMA_N
    nthreads = LANES * WY * WX
    VEC = 16 // A.dtype.itemsize  # elements per thread and copy step: 16 bytes
    if (BM * BK) % (nthreads * VEC) or (BK * BN) % (nthreads * VEC):
        raise ValueError(f"the A and B tiles ({BM} x {BK}, {BK} x {BN}) must split into {VEC}-element pieces "
                         f"evenly over the {nthreads} threads")
    if prefetch not in ("registers", "shared"):
        raise ValueError(f"prefetch must be 'registers' or 'shared', got {prefetch!r}")
    if prefetch == "registers" and stages not in (1, 2):
        raise ValueError(f"stages must be 1 or 2 with prefetch='registers', got {stages}")
    if prefetch == "shared" and not 2 <= stages <= 4:
        raise ValueError(f"stages must be 2 to 4 with prefetch='shared', got {stages}")
    lda, ldb = _tile_row_lengths(BN, BK, A.dtype.itemsize, nk)
    As = Buffer("As", (stages, BM, lda), A.dtype)
    Bs = Buffer("Bs", (stages, BN if nk else BK, ldb), B.dtype)
    acc = Buffer("acc", (WY, WX, LANES, TI, TJ, 4), float32)
    by, bx, ko, kk = Var("by"), Var("bx"), Var("ko"), Var("kk")
    fresh = fresh_vars()

    def threads(body_fn):
        return thread_nest(fresh, [("wy", WY), ("wx", WX), ("lane", LANES)], body_fn)

    def tiles(body_fn, inner=None):
        """for ti, tj, v (unrolled) around ``body_fn(ti, tj, v)``."""
        ti, tj, v = fresh("ti"), fresh("tj"), fresh("v")
        return For(ti, 0, TI, Block([For(tj, 0, TJ, Block([For(v, 0, 4, Block(body_fn(ti, tj, v)),
                                                                ForKind.UNROLLED)]), ForKind.UNROLLED)]),
                   ForKind.UNROLLED)

    def copy(dst, src, rows, cols, src_row, src_col, stage, via=None):
        """Threads copy a rows x cols tile of ``src`` into stage ``stage`` of ``dst``, 8
        elements each at a time; with ``via`` (a register buffer, per thread and chunk one
        run of 8) ``via="load"`` fills the registers and ``via="store"`` empties them."""
        per = rows * cols // (nthreads * VEC)
        mode, regs = via if via else (None, None)

        def body(wy, wx, lane):
            c, e = fresh("c"), fresh("e")
            lin = ((wy * WX + wx) * LANES + lane) + c * nthreads
            r, c8 = floordiv(lin, cols // VEC), floormod(lin, cols // VEC) * VEC
            reg = (wy, wx, lane, c, e)
            if mode == "load":
                store = Store(regs, reg, src[src_row + r, src_col + c8 + e])
            elif mode == "store":
                store = Store(dst, (stage, r, c8 + e), regs[reg])
            else:
                store = Store(dst, (stage, r, c8 + e), src[src_row + r, src_col + c8 + e])
            return [For(c, 0, per, Block([For(e, 0, VEC, Block([store]), ForKind.VECTORIZED)]), ForKind.UNROLLED)]
        return threads(body)

    def f32(x):
        return cast(x, float32)

    def acc_at(wy, wx, lane, ti, tj, v):
        return (wy, wx, lane, ti, tj, v)

    init = threads(lambda wy, wx, lane: [tiles(lambda ti, tj, v: [
        Store(acc, acc_at(wy, wx, lane, ti, tj, v), FloatImm(0.0, float32))])])

    def mma_step(wy, wx, lane, stage):
        k = fresh("k")
        ti, tj, v = fresh("ti"), fresh("tj"), fresh("v")
        at = acc_at(wy, wx, lane, ti, tj, v)
        a = As[stage, wy * WM + ti * MMA_M + fragment_row(lane, v), kk * MMA_K + k]
        n = wx * WN + tj * MMA_N + fragment_col(lane, v)
        b = Bs[stage, n, kk * MMA_K + k] if nk else Bs[stage, kk * MMA_K + k, n]
        body = Store(acc, at, acc[at] + f32(a) * f32(b))
        nest = For(k, 0, MMA_K, Block([body]), ForKind.UNROLLED)
        for var, extent in ((v, 4), (tj, TJ), (ti, TI)):
            nest = For(var, 0, extent, Block([nest]), ForKind.UNROLLED)
        return [For(kk, 0, BK // MMA_K, Block([nest]), ForKind.UNROLLED)]

    KT = K // BK
    scratch = [As, Bs, acc]

    def copy_b(kt, stage):
        return copy(Bs, B, BN, BK, bx * BN, kt * BK, stage) if nk else copy(Bs, B, BK, BN, kt * BK, bx * BN, stage)
    if prefetch == "shared":
        prologue = [c for s in range(stages - 1)
                    for c in (copy(As, A, BM, BK, by * BM, min(s, KT - 1) * BK, s), copy_b(min(s, KT - 1), s))]
        ahead = minimum(ko + (stages - 1), KT - 1)     # the last steps reload the last tile into unused stages
        kloop = For(ko, 0, KT, Block([
            copy(As, A, BM, BK, by * BM, ahead * BK, floormod(ko + (stages - 1), stages)),
            copy_b(ahead, floormod(ko + (stages - 1), stages)),
            threads(lambda wy, wx, lane: mma_step(wy, wx, lane, floormod(ko, stages)))]))
    elif stages == 1:
        prologue = []
        kloop = For(ko, 0, KT, Block([
            copy(As, A, BM, BK, by * BM, ko * BK, 0),
            copy(Bs, B, BN, BK, bx * BN, ko * BK, 0) if nk else copy(Bs, B, BK, BN, ko * BK, bx * BN, 0),
            threads(lambda wy, wx, lane: mma_step(wy, wx, lane, 0))]))
    elif nk:
        raise ValueError("stages=2 takes B as K x N")
    else:
        ra = Buffer("ra", (WY, WX, LANES, BM * BK // (nthreads * VEC), VEC), A.dtype)
        rb = Buffer("rb", (WY, WX, LANES, BK * BN // (nthreads * VEC), VEC), B.dtype)
        scratch += [ra, rb]
        nxt = minimum(ko + 1, KT - 1)      # the last step reloads its own tiles into the unused half
        prologue = [copy(As, A, BM, BK, by * BM, 0, 0), copy(Bs, B, BK, BN, 0, bx * BN, 0)]
        kloop = For(ko, 0, KT, Block([
            copy(As, A, BM, BK, by * BM, nxt * BK, None, ("load", ra)),
            copy(Bs, B, BK, BN, nxt * BK, bx * BN, None, ("load", rb)),
            threads(lambda wy, wx, lane: mma_step(wy, wx, lane, floormod(ko, 2))),
            copy(As, A, BM, BK, None, None, floormod(ko + 1, 2), ("store", ra)),
            copy(Bs, B, BK, BN, None, None, floormod(ko + 1, 2), ("store", rb))]))
    write = threads(lambda wy, wx, lane: [tiles(lambda ti, tj, v: [Store(
        C, (by * BM + wy * WM + ti * MMA_M + fragment_row(lane, v), bx * BN + wx * WN + tj * MMA_N + fragment_col(lane, v)),
        acc[acc_at(wy, wx, lane, ti, tj, v)])])])
    root = For(by, 0, M // BM, Block([For(bx, 0, N // BN, Block([init, *prologue, kloop, write]),
                                          ForKind.GPU_BLOCK, 0)]), ForKind.GPU_BLOCK, 1)
    return Block((root,)), scratch


def _tile_row_lengths(BN: int, BK: int, itemsize: int, nk: bool = False) -> tuple[int, int]:
    """Row lengths of the shared A and B tiles, padded so the fragment loads hit distinct
    banks: ldmatrix's 16-byte rows for 16-bit and 8-bit operands, the (lane / 4, lane % 4)
    element pattern of tf32 (``itemsize`` 4)."""
    if itemsize == 4:     # B as N x K holds rows of BK, as A does (it had rows of BN + 8: seed 155, case 467)
        return BK + 4, BK + 4 if nk else BN + 8
    vec = 16 // itemsize
    return _conflict_free(BK, vec), _conflict_free(BK if nk else BN, vec)


def mma_shared_bytes(BM: int, BN: int, BK: int, stages: int = 1, itemsize: int = 2, b_layout: str = "kn") -> int:
    """The shared memory of :func:`mma_matmul`'s A and B tiles (padded rows, ``stages`` k-stages).

    >>> mma_shared_bytes(128, 128, 64, stages=2)       # 2 x (128 x 72 + 64 x 136) halves
    71680
    """
    nk = b_layout == "nk"
    lda, ldb = _tile_row_lengths(BN, BK, itemsize, nk)
    return stages * (BM * lda + (BN if nk else BK) * ldb) * itemsize


def _conflict_free(cols: int, per_chunk: int) -> int:
    """The smallest row length >= ``cols`` made of an odd number of 16-byte chunks (of
    ``per_chunk`` elements): the 8 rows an ldmatrix phase reads fall into distinct banks."""
    ld = -(-cols // per_chunk) * per_chunk
    return ld if (ld // per_chunk) % 2 else ld + per_chunk


def register_tiled_matmul(A, B, C, BM: int = 64, BN: int = 64, BK: int = 8, TM: int = 4, TN: int = 4,
                          interleave: bool = False, stages: int = 1, vector: int = 1):
    """The statement tree of ``C = A @ B`` with shared-memory tiles and a register micro-tile
    per thread, for buffers ``A`` (M x K), ``B`` (K x N) and ``C`` (M x N, float32); returns
    ``(root, [As, Bs, acc, ...])`` -- the tree and the buffers it allocates, for
    ``nest.add_buffer``. Inputs of a low-precision type are converted to float32 as they are
    used; the sums are float32.

    A block of (BM/TM) x (BN/TN) threads computes a BM x BN tile of C, each thread a TM x TN
    micro-tile whose accumulators (``acc[ty, tx, i, j]``, allocated at block level) the CUDA
    backend keeps in registers. For each K step of BK, the block copies an A tile (stored
    transposed, ``As[k, m]``) and a B tile into shared memory, every thread copying its share
    with a short serial loop; the inner product then runs over the tiles with the loop over
    the BK steps outside the thread loops (the same code per thread, and IREval batches the
    threads) and its first step peeled, so the barrier after the copies sits before it
    rather than in every step: two barriers per K step.
    With ``interleave`` (TM and TN multiples of 4) a thread's rows are ``ty*4 + {0..3}``
    plus multiples of ``4 * BM/TM`` (columns likewise), so a warp's 128-bit shared loads
    read consecutive addresses without bank conflicts and its stores of C are contiguous.
    ``stages=2`` double-buffers the shared tiles: each K step first loads the next step's
    tiles from global memory into registers (``ra``, ``rb``), multiplies the current tiles,
    then stores the registers into the other half of the shared buffers, so the global loads
    are in flight during the multiplications and one barrier per K step suffices.
    ``vector`` elements of a row are read from global memory at a time (4 float32: 128-bit
    loads), each thread's share of a tile in runs of that length.

    >>> from te import Buffer, Reduce, Sum
    >>> A = Buffer("A", (64, 16), "float32"); B = Buffer("B", (16, 64), "float32")
    >>> C = Reduce("C", (64, 64), Sum(), lambda i, j, k: A[i, k] * B[k, j], (16,))
    >>> root, bufs = register_tiled_matmul(A, B, C)
    >>> [(b.name, b.shape) for b in bufs]
    [('As', (1, 8, 64)), ('Bs', (1, 8, 64)), ('acc', (16, 16, 4, 4))]
    >>> [(b.name, b.shape) for b in register_tiled_matmul(A, B, C, stages=2)[1]]
    [('As', (2, 8, 64)), ('Bs', (2, 8, 64)), ('acc', (16, 16, 4, 4)), ('ra', (16, 16, 2)), ('rb', (16, 16, 2))]
    >>> [b.shape for b in register_tiled_matmul(A, B, C, stages=2, vector=2)[1][-2:]]   # one run of 2 per thread
    [(16, 16, 1, 2), (16, 16, 1, 2)]
    """
    M, K = (int(d) for d in A.shape)
    N = int(B.shape[1])
    if int(B.shape[0]) != K or tuple(int(d) for d in C.shape) != (M, N):
        raise ValueError(f"matmul shapes do not match: A {A.shape}, B {B.shape}, C {C.shape}")
    if M % BM or N % BN or K % BK:
        raise ValueError(f"register_tiled_matmul needs M, N, K ({M}, {N}, {K}) to be multiples of BM, BN, BK "
                         f"({BM}, {BN}, {BK})")
    if BM % TM or BN % TN:
        raise ValueError(f"the micro-tile {TM} x {TN} must divide the block tile {BM} x {BN}")
    if interleave and (TM % 4 or TN % 4):
        raise ValueError(f"interleave needs TM and TN to be multiples of 4, got {TM} x {TN}")
    if type(stages) is not int or stages not in (1, 2):
        raise ValueError(f"stages must be 1 or 2, got {stages!r}")
    TY, TX = BM // TM, BN // TN
    nthreads = TY * TX
    if type(vector) is not int or vector < 1 or BK % vector or BN % vector:
        raise ValueError(f"vector ({vector!r}) must be an int >= 1 dividing BK ({BK}) and BN ({BN})")
    if (BM * BK) % (nthreads * vector) or (BK * BN) % (nthreads * vector):
        raise ValueError(f"the tiles BM x BK = {BM} x {BK} and BK x BN = {BK} x {BN} must split evenly over the "
                         f"{nthreads} threads, {vector} element(s) at a time")
    per_a, per_b = BM * BK // (nthreads * vector), BK * BN // (nthreads * vector)
    As = Buffer("As", (stages, BK, BM), A.dtype)
    Bs = Buffer("Bs", (stages, BK, BN), B.dtype)
    acc = Buffer("acc", (TY, TX, TM, TN), float32)
    by, bx, ko = Var("by"), Var("bx"), Var("ko")
    fresh = fresh_vars()

    def f32(x):
        return x if x.dtype == float32 else cast(x, float32)

    def row(ty, i):
        return floordiv(i, 4) * (TY * 4) + ty * 4 + floormod(i, 4) if interleave else ty * TM + i

    def col(tx, j):
        return floordiv(j, 4) * (TX * 4) + tx * 4 + floormod(j, 4) if interleave else tx * TN + j

    def threads(body_fn):
        ty, tx = fresh("ty"), fresh("tx")
        inner = For(tx, 0, TX, Block(body_fn(ty, tx)), ForKind.GPU_THREAD, 0)
        return For(ty, 0, TY, Block([inner]), ForKind.GPU_THREAD, 1)

    def micro(body_fn, kind=ForKind.UNROLLED):
        i, j = fresh("i"), fresh("j")
        return For(i, 0, TM, Block([For(j, 0, TN, Block(body_fn(i, j)), kind)]), kind)

    def copy(per, body_fn):
        """Each thread's ``per`` runs of ``vector`` elements of a tile: ``body_fn(ty, tx, (c, e),
        lin)`` for element e of its c-th run, at the tile's linear position ``lin``."""
        def body(ty, tx):
            c, e = fresh("c"), fresh("e")
            lin = ((ty * TX + tx) + c * nthreads) * vector + e if vector > 1 else (ty * TX + tx) + c * nthreads
            inner = Block(body_fn(ty, tx, (c, e) if vector > 1 else (c,), lin))
            if vector > 1:
                inner = Block([For(e, 0, vector, inner, ForKind.VECTORIZED)])
            return [For(c, 0, per, inner, ForKind.UNROLLED)]
        return threads(body)

    def a_at(l):
        return floormod(l, BK), floordiv(l, BK)          # As[k, m] of A's (m, k)

    def b_at(l):
        return floordiv(l, BN), floormod(l, BN)

    def load_a(kt, stage):
        return copy(per_a, lambda ty, tx, c, l: [
            Store(As, (stage, *a_at(l)), A[by * BM + floordiv(l, BK), kt * BK + floormod(l, BK)])])

    def load_b(kt, stage):
        return copy(per_b, lambda ty, tx, c, l: [
            Store(Bs, (stage, *b_at(l)), B[kt * BK + floordiv(l, BN), bx * BN + floormod(l, BN)])])

    init = threads(lambda ty, tx: [micro(lambda i, j: [Store(acc, (ty, tx, i, j), FloatImm(0.0, float32))])])

    def compute(stage):
        def step(k):
            return threads(lambda ty, tx: [micro(lambda i, j: [Store(
                acc, (ty, tx, i, j),
                acc[ty, tx, i, j] + f32(As[stage, k, row(ty, i)]) * f32(Bs[stage, k, col(tx, j)]))])])
        # the first k step on its own: the barrier after the copies goes before it, not into the loop
        kk = fresh("kk")
        return [step(IntImm(0, int32)), For(kk, 1, BK, Block([step(kk)]), ForKind.UNROLLED)]
    write = threads(lambda ty, tx: [micro(lambda i, j: [
        Store(C, (by * BM + row(ty, i), bx * BN + col(tx, j)), acc[ty, tx, i, j])])])
    KT = K // BK
    scratch = [As, Bs, acc]
    if stages == 1:
        prologue = []
        kloop = For(ko, 0, KT, Block([load_a(ko, 0), load_b(ko, 0), *compute(0)]))
    else:
        runs = (vector,) if vector > 1 else ()
        ra = Buffer("ra", (TY, TX, per_a, *runs), A.dtype)
        rb = Buffer("rb", (TY, TX, per_b, *runs), B.dtype)
        scratch += [ra, rb]
        nxt = minimum(ko + 1, KT - 1)      # the last step reloads its own tiles into the unused half
        ahead = floormod(ko + 1, 2)
        prologue = [load_a(IntImm(0, int32), 0), load_b(IntImm(0, int32), 0)]
        kloop = For(ko, 0, KT, Block([
            copy(per_a, lambda ty, tx, c, l: [
                Store(ra, (ty, tx, *c), A[by * BM + floordiv(l, BK), nxt * BK + floormod(l, BK)])]),
            copy(per_b, lambda ty, tx, c, l: [
                Store(rb, (ty, tx, *c), B[nxt * BK + floordiv(l, BN), bx * BN + floormod(l, BN)])]),
            *compute(floormod(ko, 2)),
            copy(per_a, lambda ty, tx, c, l: [Store(As, (ahead, *a_at(l)), ra[(ty, tx, *c)])]),
            copy(per_b, lambda ty, tx, c, l: [Store(Bs, (ahead, *b_at(l)), rb[(ty, tx, *c)])])]))
    block = For(bx, 0, N // BN, Block([init, *prologue, kloop, write]), ForKind.GPU_BLOCK, 0)
    root = For(by, 0, M // BM, Block([block]), ForKind.GPU_BLOCK, 1)
    return Block((root,)), scratch


def load_of(e):
    """The load ``e`` is, under any casts, else None.

    >>> from te import Buffer, cast
    >>> A = Buffer("A", (4,), "float16")
    >>> load_of(cast(A[1], "float32")).buffer.name, load_of(A[1] + A[2])
    ('A', None)
    """
    while type(e) is E.Cast:
        e = e.value
    return e if type(e) is E.Load else None


def matmul_operands(t: Tensor):
    """``(A, B, b_layout)`` when ``t`` is ``sum_k A[i, k] * B[k, j]`` (``"kn"``) or
    ``sum_k A[i, k] * B[j, k]`` (``"nk"``) of two input buffers over static sizes (casts of
    the loads allowed), else None.

    >>> from te import Buffer, Reduce, Sum
    >>> A, B = Buffer("A", (8, 4), "float32"), Buffer("B", (4, 16), "float32")
    >>> C = Reduce("C", (8, 16), Sum(), lambda i, j, k: A[i, k] * B[k, j], (4,))
    >>> a, b, layout = matmul_operands(C)
    >>> a.name, b.name, layout
    ('A', 'B', 'kn')
    """
    if not t.is_reduction or len(t.args) != 2 or len(t.reduce_args) != 1 or type(t.body) is not E.Mul:
        return None
    i, j = t.args
    (k,) = t.reduce_args
    a, b = load_of(t.body.a), load_of(t.body.b)
    if a is None or b is None:
        return None
    if not (len(a.indices) == 2 and a.indices[0] is i and a.indices[1] is k and len(b.indices) == 2):
        return None
    if b.indices[0] is k and b.indices[1] is j:
        layout = "kn"
    elif b.indices[0] is j and b.indices[1] is k:
        layout = "nk"
    else:
        return None
    if isinstance(a.buffer, Tensor) or isinstance(b.buffer, Tensor):
        return None      # computed operands: the tree reads input buffers
    shapes = [a.buffer.shape, b.buffer.shape, t.dims]
    if not all(isinstance(d, int) or type(d) is E.IntImm for s in shapes for d in s):
        return None
    return a.buffer, b.buffer, layout


def gpu_matmul(nest, tensor_cores: bool | None = None, **tiles) -> None:
    """Replace the loops of the nest's lone matmul (:func:`matmul_operands`) by a GPU tree:
    :func:`mma_matmul` on the tensor cores (``tensor_cores`` None: for float16, bfloat16 and
    float8 operands; True also takes float32 to tf32), declared with ``tensorize``, or
    :func:`register_tiled_matmul` (float32, SIMT). ``tiles`` are the tree's tile sizes;
    ``wgmma=True`` takes Hopper's warpgroup MMA instead (:func:`~.gpu_wgmma.wgmma_matmul`,
    float16 and bfloat16 on sm_90a, float32 as tf32 with an N x K B; its tiles ``BM, BN, BK,
    stages``, ``ahead`` and ``swizzle``).
    Raises ``ScheduleError`` (the nest unchanged) for anything else."""
    if nest.history or len(nest.tensors) != 1:
        raise ScheduleError("gpu_matmul: takes a fresh nest of one matmul tensor; this one has "
                            f"{len(nest.tensors)} tensor(s) and {len(nest.history)} transform(s) applied")
    (C,) = nest.tensors
    ops = matmul_operands(C)
    if ops is None:
        raise ScheduleError(f"gpu_matmul: {C.name} is not C[i, j] = sum_k A[i, k] * B[k, j] (or B[j, k]) over "
                            "static sizes")
    A, B, b_layout = ops
    if tensor_cores is None:
        tensor_cores = str(A.dtype) in MMA_INTRINSIC and str(A.dtype) != "float32"
    wgmma = bool(tiles.pop("wgmma", False))
    try:
        if wgmma:
            if not tensor_cores:
                raise ValueError("wgmma=True is a tensor-core tree; it needs tensor_cores")
            root, scratch = wgmma_matmul(A, B, C, b_layout=b_layout, **tiles)
        elif tensor_cores:
            root, scratch = mma_matmul(A, B, C, b_layout=b_layout, **tiles)
        else:
            if b_layout != "kn":
                raise ValueError("the SIMT tree takes B as K x N")
            tiles.setdefault("interleave", tiles.get("TM", 4) % 4 == 0 and tiles.get("TN", 4) % 4 == 0)
            root, scratch = register_tiled_matmul(A, B, C, **tiles)
    except (ValueError, TypeError) as exc:
        raise ScheduleError(f"gpu_matmul({C.name}): {exc}") from None
    for b in scratch:
        nest.add_buffer(b)
    nest.root = root
    nest.verify()
    if tensor_cores:
        nest.tensorize("kk", (WGMMA_INTRINSICS if wgmma else MMA_INTRINSIC)[str(A.dtype)])
    # each block fills its tiles and accumulators before it reads them: they are private to
    # the block loops, which the dependence analysis cannot always show within its budget
    # (the swizzled tiles' XOR indices)
    blocks = frozenset(id(f.var) for f in iter_stmts(nest.root)
                       if isinstance(f, For) and f.kind == ForKind.GPU_BLOCK)
    nest._tree_private = (nest.root, frozenset(id(b) for b in scratch), blocks)
