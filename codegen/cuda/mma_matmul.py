"""A tensor-core matmul as a statement tree: warps of ``mma.sync`` tiles written lane by lane.

:func:`mma_matmul` builds ``C = A @ B`` (float16 or bfloat16 inputs, float32 sums) for the
CUDA backend's tensor cores. The tree says, for every lane of every warp, which elements of
the shared-memory tiles it multiplies into which of its accumulators, exactly as the
``mma.sync.m16n8k16`` instruction distributes a 16 x 8 tile over a warp
(:mod:`codegen.cuda.mma`: lane ``l``'s value ``v`` is row ``l / 4 + 8 * (v / 2)``, column
``2 * (l % 4) + v % 2``)::

    for lane (threadIdx.x, 32): for ti: for tj: for v in 0..4: for k in 0..16:
        acc[wy, wx, lane, ti, tj, v] += f32(As[wy*WM + 16*ti + row(lane, v), 16*kk + k])
                                        * f32(Bs[16*kk + k, wx*WN + 8*tj + col(lane, v)])

IREval and LLVM run that as written (a small matmul per lane), so every machine checks it;
``nest.tensorize("kk")`` checks that the ``kk, ti, tj, v, k`` nest is what the instruction
computes, and the CUDA step ``cuda_tensor_cores`` (:mod:`codegen.cuda.tensor_cores`) prints it as ``ldmatrix`` loads and one ``mma.sync`` per
(ti, tj) tile. A block of ``(BM / WM) x (BN / WN)`` warps computes a BM x BN tile of C;
per K step of BK the threads copy the A and B tiles into shared memory (rows padded so
ldmatrix reads them without bank conflicts), eight contiguous elements per thread and
copy step.

>>> from te import Buffer, Reduce, Sum, cast, float32
>>> A = Buffer("A", (128, 64), "float16"); B = Buffer("B", (64, 128), "float16")
>>> C = Reduce("C", (128, 128), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (64,))
>>> root, bufs = mma_matmul(A, B, C)
>>> [(b.name, b.shape) for b in bufs]
[('As', (1, 128, 40)), ('Bs', (1, 32, 136)), ('acc', (2, 2, 32, 4, 8, 4))]
"""
from __future__ import annotations

import numpy as np

from te import Buffer, Reduce, Sum, Var, cast, floordiv, floormod, float32, minimum
from te.expr import FloatImm

from loopnest.transforms.tensorize import fragment_col, fragment_row


__all__ = ["MMA_INTRINSIC", "fragment_row", "fragment_col", "mma_matmul", "mma_matmul_example"]

#: the ``tensorize`` intrinsic of each operand type (float32: tf32, which rounds the operands)
MMA_INTRINSIC = {"float16": "mma_m16n8k16", "bfloat16": "mma_m16n8k16", "float32": "mma_m16n8k8_tf32",
                 "float8_e4m3": "mma_m16n8k32_f8", "float8_e5m2": "mma_m16n8k32_f8"}

MMA_M, MMA_N = 16, 8
LANES = 32


def mma_matmul(A, B, C, BM: int = 128, BN: int = 128, BK: int = 32, WM: int = 64, WN: int = 64,
               stages: int = 1, b_layout: str = "kn"):
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

    Raises ``ValueError`` when the sizes are not multiples of the tiles or the tiles do not
    fit the instruction (WM a multiple of 16, WN of 8, BK of 16)."""
    from loopnest.stmt import Block, For, ForKind, Store

    M, K = (int(d) for d in A.shape)
    if b_layout not in ("kn", "nk"):
        raise ValueError(f"b_layout must be 'kn' (B is K x N) or 'nk' (B is N x K), got {b_layout!r}")
    nk = b_layout == "nk"
    N = int(B.shape[0] if nk else B.shape[1])
    if int(B.shape[1] if nk else B.shape[0]) != K or tuple(int(d) for d in C.shape) != (M, N):
        raise ValueError(f"matmul shapes do not match: A {A.shape}, B {B.shape} ({b_layout}), C {C.shape}")
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
    if stages not in (1, 2):
        raise ValueError(f"stages must be 1 or 2, got {stages}")
    # rows padded so the fragment loads hit distinct banks: ldmatrix's 16-byte rows for 16-bit
    # and 8-bit operands, the (lane / 4, lane % 4) element pattern of tf32
    if tf32:
        lda, ldb = BK + 4, BN + 8
    else:
        lda, ldb = _conflict_free(BK, VEC), _conflict_free(BK if nk else BN, VEC)
    As = Buffer("As", (stages, BM, lda), A.dtype)
    Bs = Buffer("Bs", (stages, BN if nk else BK, ldb), B.dtype)
    acc = Buffer("acc", (WY, WX, LANES, TI, TJ, 4), float32)
    by, bx, ko, kk = Var("by"), Var("bx"), Var("ko"), Var("kk")
    counter = iter(range(1000))

    def fresh(base):
        return Var(f"{base}{next(counter)}")

    def threads(body_fn):
        wy, wx, lane = fresh("wy"), fresh("wx"), fresh("lane")
        inner = For(lane, 0, LANES, Block(body_fn(wy, wx, lane)), ForKind.GPU_THREAD, 0)
        return For(wy, 0, WY, Block([For(wx, 0, WX, Block([inner]), ForKind.GPU_THREAD, 1)]), ForKind.GPU_THREAD, 2)

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
    if stages == 1:
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


def _conflict_free(cols: int, per_chunk: int) -> int:
    """The smallest row length >= ``cols`` made of an odd number of 16-byte chunks (of
    ``per_chunk`` elements): the 8 rows an ldmatrix phase reads fall into distinct banks."""
    ld = -(-cols // per_chunk) * per_chunk
    return ld if (ld // per_chunk) % 2 else ld + per_chunk


def mma_matmul_example(M: int = 128, N: int = 128, K: int = 64, dtype: str = "float16", **tiles):
    """An :class:`codegen.cuda.examples.Example` of :func:`mma_matmul` (random inputs, a
    float64 numpy reference); float8 takes B as N x K (``b_layout="nk"``).

    >>> ex = mma_matmul_example()
    >>> ex.name, [a.name for a in ex.args]
    ('matmul_mma_float16', ['A', 'B', 'C'])
    """
    from .examples import Example, _hand_nest

    nk = dtype.startswith("float8")
    A = Buffer("A", (M, K), dtype)
    B = Buffer("B", (N, K) if nk else (K, N), dtype)
    if nk:
        C = Reduce("C", (M, N), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[j, k], float32), (K,))
    else:
        C = Reduce("C", (M, N), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (K,))
    root, scratch = mma_matmul(A, B, C, b_layout="nk" if nk else "kn", **tiles)
    nest = _hand_nest([C], root, scratch)
    nest.tensorize("kk", MMA_INTRINSIC[str(A.dtype)])
    npdt = A.dtype.numpy

    def make(rng):
        a = rng.standard_normal((M, K)).astype(npdt)
        b = rng.standard_normal((N, K) if nk else (K, N)).astype(npdt)
        bt = b.astype(np.float64).T if nk else b.astype(np.float64)
        return ({"A": a, "B": b, "C": np.zeros((M, N), np.float32)}, {"C": a.astype(np.float64) @ bt})
    tol = (5e-3, 5e-2) if dtype == "float32" else (1e-4, 1e-3)    # tf32 rounds the operands
    return Example(f"matmul_mma_{A.dtype}", nest, [A, B, C], make, rtol=tol[0], atol=tol[1])
