"""The warpgroup tensor-core matmul of Hopper GPUs (``wgmma.mma_async``, sm_90a) as a statement tree.

A warpgroup is four warps: here thread ``lane`` (threadIdx.x, 32) of warp ``w``
(threadIdx.y, 4) of warpgroup ``g`` (threadIdx.z). One ``wgmma.mma_async.m64nNk16``
computes ``D(64 x N) += A(64 x 16) * B(16 x N)`` for a warpgroup, thread ``(w, lane)``
holding the ``N / 2`` accumulators ``v`` at row :func:`warpgroup_row` and column
:func:`warpgroup_col`. The tree says exactly that, thread by thread::

    for g, w, lane (threads): for kk: for v in 0..N/2: for k in 0..16:
        acc[g, w, lane, v] += f32(As[stage, kx / 64, row, ((kx % 64) / 8 ^ row % 8) * 8 + kx % 8])
                              * f32(Bs[stage, col / 64, kx, ((col % 64) / 8 ^ kx % 8) * 8 + col % 8])

with ``row = 64 g + warpgroup_row(w, lane, v)``, ``col = warpgroup_col(lane, v)`` and
``kx = 16 kk + k``. The shared tiles are in the instruction's *128-byte swizzled layout*
(:mod:`codegen.cuda.wgmma`): rows of 64 elements (128 bytes) along the contiguous dimension
-- A's rows along K, a K x N B's along N, an N x K B's along K -- eight rows to a 1024-byte
atom, the 16-byte chunk ``c`` of row ``r`` stored at chunk ``c ^ (r % 8)`` so that the eight
rows of a column of chunks lie in distinct banks. Eight threads copy the 128 contiguous
bytes of a row of global memory into a row of an atom (the thread storing chunk ``p`` reads
chunk ``p ^ (r % 8)``, so the stores' indices are affine for the dependence analysis): on an
H100 the copies of the interleaved layout (below), which scatter each 128-byte row of global
memory over eight core matrices, ran at 2.2 TB/s from L2, whole rows into whole rows at
8 TB/s, and the 4096^3 float16 matmul went from 174 to 617 TFLOP/s (0.82 of cuBLAS).

With ``swizzle=0`` (the only choice when BK, or BN of a K x N B, is not a multiple of 64)
the tiles are in the *interleaved canonical layout*: eight rows of 16 bytes (a core matrix)
contiguous, A's core matrices K-major (8 rows x 8 k) and B's MN-major (8 k x 8 columns;
N x K B: K-major), ``As[stage, row / 8, kx / 8, row % 8, kx % 8]``. Either way a
descriptor (start address, the byte distances between core matrices or atoms, the swizzle)
describes each operand. IREval and LLVM run the tree as written;
``nest.tensorize("kk", "wgmma_m64nNk16")`` checks the nest against the layouts
(:mod:`loopnest.transforms.tensorize_wgmma`), and the CUDA backend prints one
``wgmma.mma_async`` per ``kk`` on sm_90a (plain per-thread code elsewhere).

float32 operands take the tf32 instruction (``m64nNk8``: 8 of K, the same 32 bytes per
step), which reads both operands K-major: B must be N x K, and the tiles are swizzled rows of
32 elements (``As[stage, kx / 32, row, ((kx % 32) / 4 ^ row % 8) * 4 + kx % 4]``).

Per k-tile of BK the block's threads copy the A (BM x BK) and B (BK x BN) tiles into shared
memory (``cp.async`` on the GPU), ``ahead`` k-tiles ahead of the MMAs, as
:func:`~.gpu_matmul.mma_matmul` does with ``prefetch="shared"``. By default that is
``stages - 2`` with 3 or 4 stages: the stage the previous iteration's MMAs read is then not
overwritten, so the CUDA backend lets those MMAs run on while the next tiles are copied
(:mod:`codegen.cuda.wgmma_overlap`; 4 stages: 2 k-tiles in flight beside them).

>>> from te import Buffer, Reduce, Sum, cast, float32
>>> A = Buffer("A", (128, 64), "float16"); B = Buffer("B", (64, 256), "float16")
>>> C = Reduce("C", (128, 256), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (64,))
>>> root, bufs = wgmma_matmul(A, B, C)
>>> [(b.name, b.shape) for b in bufs]
[('As', (4, 1, 128, 64)), ('Bs', (4, 4, 64, 64)), ('acc', (2, 4, 32, 128))]
>>> [b.shape for b in wgmma_matmul(A, B, C, swizzle=0)[1][:2]]
[(4, 16, 8, 8, 8), (4, 32, 8, 8, 8)]
"""
from __future__ import annotations

from te import Buffer, Var, bitwise_xor, cast, floordiv, floormod, float32, minimum
from te.expr import Expr, FloatImm

from ..stmt import Block, For, ForKind, Store
from ._rewrite import fresh_vars, matmul_sizes, thread_nest

__all__ = ["WGMMA_INTRINSIC", "WGMMA_TF32_INTRINSIC", "WGMMA_INTRINSICS", "WGMMA_TYPES", "warpgroup_row",
           "warpgroup_col", "swizzled_chunk", "wgmma_matmul", "wgmma_shared_bytes"]

#: the ``tensorize`` intrinsic of the 16-bit warpgroup MMA (N is the nest's: twice its values per thread)
WGMMA_INTRINSIC = "wgmma_m64nNk16"
#: the tf32 one: float32 operands rounded to tf32 on the tensor cores (opt-in, as ``mma_m16n8k8_tf32``)
WGMMA_TF32_INTRINSIC = "wgmma_m64nNk8_tf32"
#: operand type -> the intrinsic of its warpgroup MMA
WGMMA_INTRINSICS = {"float16": WGMMA_INTRINSIC, "bfloat16": WGMMA_INTRINSIC, "float32": WGMMA_TF32_INTRINSIC}
#: operand types -> the PTX type name
WGMMA_TYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "tf32"}
LANES, WARPS, ROWS = 32, 4, 64
#: the swizzle of the operand tiles, in bytes, and the elements of 16 bits in one of its rows
SWIZZLE, ATOM = 128, 64
#: the bytes of K one instruction takes (16 elements of 16 bits, 8 of tf32) and of a copied chunk
MMA_K_BYTES, CHUNK = 32, 16


def warpgroup_row(warp, lane, v):
    """Row of accumulator ``v`` of thread ``lane`` of warp ``warp`` in a warpgroup's 64 x N
    tile (expressions or ints).

    >>> warpgroup_row(1, 5, 2), warpgroup_row(3, 31, 127)
    (25, 63)
    """
    if any(isinstance(x, Expr) for x in (warp, lane, v)):
        return warp * 16 + floordiv(lane, 4) + floormod(floordiv(v, 2), 2) * 8
    return 16 * warp + lane // 4 + 8 * ((v // 2) % 2)


def warpgroup_col(lane, v):
    """Column of accumulator ``v`` of thread ``lane`` (any warp) in the 64 x N tile.

    >>> warpgroup_col(5, 5), warpgroup_col(31, 127)
    (11, 255)
    """
    if isinstance(lane, Expr) or isinstance(v, Expr):
        return floordiv(v, 4) * 8 + floormod(lane, 4) * 2 + floormod(v, 2)
    return 8 * (v // 4) + 2 * (lane % 4) + v % 2


def swizzled_chunk(chunk, row):
    """The 16-byte chunk of a 128-byte row that chunk ``chunk`` (0..7) of row ``row`` is
    stored at in a 128-byte swizzled atom: ``chunk ^ (row % 8)`` (expressions or ints).

    >>> swizzled_chunk(2, 7), swizzled_chunk(5, 8)
    (5, 5)
    """
    if isinstance(chunk, Expr) or isinstance(row, Expr):
        return bitwise_xor(chunk, floormod(row, 8))
    return chunk ^ (row % 8)


def _swizzle_for(swizzle, BN: int, BK: int, nk: bool, atom: int = ATOM) -> int:
    """The operands' swizzle: 128 where every tile is whole 128-byte atoms (``BK`` a multiple
    of ``atom``, the elements of a 128-byte row, and, for a K x N B, ``BN`` too), else 0;
    ``swizzle`` given: checked. tf32 (``atom`` 32) takes the swizzled layout only."""
    fits = BK % atom == 0 and (nk or BN % atom == 0)
    if swizzle is None:
        swizzle = SWIZZLE if fits or atom != ATOM else 0
    if swizzle not in (0, SWIZZLE):
        raise ValueError(f"swizzle must be 0 (interleaved core matrices) or {SWIZZLE} bytes, got {swizzle!r}")
    if not swizzle and atom != ATOM:
        raise ValueError(f"the tf32 warpgroup MMA takes the {SWIZZLE}-byte swizzled layout only; swizzle=0 is for "
                         "16-bit operands")
    if swizzle and not fits:
        raise ValueError(f"the {SWIZZLE}-byte swizzle needs BK ({BK}){'' if nk else f' and BN ({BN})'} to be "
                         f"multiples of {atom}" + ("; use swizzle=0 or larger tiles" if atom == ATOM else ""))
    return swizzle


def wgmma_shared_bytes(BM: int, BN: int, BK: int, stages: int, itemsize: int = 2) -> int:
    """Shared memory of the A and B tiles (``stages`` k-stages, no padding).

    >>> wgmma_shared_bytes(128, 256, 64, 4)
    196608
    """
    return stages * (BM + BN) * BK * itemsize


def wgmma_matmul(A, B, C, BM: int = 128, BN: int = 256, BK: int = 64, stages: int = 4, b_layout: str = "kn",
                 ahead: int | None = None, swizzle: int | None = None):
    """The statement tree of ``C = A @ B`` on Hopper's warpgroup MMA (see the module
    docstring) for ``A`` (M x K) and ``B`` (K x N, or N x K with ``b_layout="nk"``) both
    float16 or both bfloat16, and ``C`` (M x N) float32; returns ``(root, [As, Bs, acc])``.
    float32 ``A`` and ``B`` take the tf32 instruction (``m64nNk8``, operands rounded to tf32:
    declared ``wgmma_m64nNk8_tf32``), which reads both operands K-major: B must be N x K, and
    the tiles are 128-byte swizzled rows of 32 elements (``BK`` a multiple of 32).
    A block of ``BM / 64`` warpgroups computes a BM x BN tile of C, each warpgroup 64 rows
    with one ``m64n{BN}k16`` per 16 of K. ``stages`` (1 to 4) k-tiles are in shared memory
    at once (on an H100 at 4096, float16: 617 TFLOP/s with 4, 513 with 3; the default 4 takes
    192 KiB with the default tiles: build with ``max_shared_bytes`` up to the device's
    opt-in limit); the copies run ``ahead`` k-tiles ahead of the MMAs (0 to ``stages - 1``; by
    default ``stages - 2`` with 3 or more stages, else ``stages - 1``). ``swizzle``: the
    operands' shared layout, 128 (rows of 128-byte swizzled atoms, copied a whole row of
    global memory at a time: the default where ``BK``, and ``BN`` for a K x N B, are
    multiples of 64) or 0 (interleaved core matrices). Raises ``ValueError`` when the sizes
    are not multiples of the tiles or the tiles do not fit the instruction."""
    M, N, K, nk = matmul_sizes(A, B, C, b_layout)
    if str(A.dtype) not in WGMMA_TYPES or A.dtype != B.dtype or str(C.dtype) != "float32":
        raise ValueError(f"the warpgroup MMA takes float16, bfloat16 or float32 (tf32) A and B of one type and a "
                         f"float32 C, got {A.dtype}, {B.dtype} and {C.dtype}")
    itemsize = A.dtype.itemsize
    if itemsize == 4 and not nk:
        raise ValueError("the tf32 warpgroup MMA reads B K-major: B must be N x K (b_layout='nk'); transpose a "
                         "K x N B first")
    atom, piece, mma_k = SWIZZLE // itemsize, CHUNK // itemsize, MMA_K_BYTES // itemsize
    for name, x in (("BM", BM), ("BN", BN), ("BK", BK), ("stages", stages)):
        if type(x) is not int or x < 1:
            raise ValueError(f"{name} must be a positive int, got {x!r}")
    if BM % ROWS or BN % 32 or BN > 256 or BK % mma_k or not 1 <= stages <= 4:
        raise ValueError(f"BM ({BM}) must be a multiple of 64, BN ({BN}) a multiple of 32 up to 256, BK ({BK}) a "
                         f"multiple of {mma_k}, and stages ({stages}) 1 to 4")
    if ahead is None:
        ahead = stages - 2 if stages >= 3 else stages - 1
    if type(ahead) is not int or not 0 <= ahead < stages:
        raise ValueError(f"ahead must be an int from 0 to stages - 1 ({stages - 1}), got {ahead!r}")
    if M % BM or N % BN or K % BK:
        raise ValueError(f"M, N, K ({M}, {N}, {K}) must be multiples of BM, BN, BK ({BM}, {BN}, {BK})")
    swizzle = _swizzle_for(swizzle, BN, BK, nk, atom)
    G = BM // ROWS
    nthreads = G * WARPS * LANES
    if (BM * BK // piece) % nthreads or (BK * BN // piece) % nthreads:
        raise ValueError(f"the tiles ({BM} x {BK}, {BK} x {BN}) must split into 16-byte pieces evenly over the "
                         f"{nthreads} threads")
    if swizzle:
        As = Buffer("As", (stages, BK // atom, BM, atom), A.dtype)
        Bs = Buffer("Bs", (stages, BK // atom, BN, atom) if nk else (stages, BN // atom, BK, atom), B.dtype)
    else:
        As = Buffer("As", (stages, BM // 8, BK // 8, 8, 8), A.dtype)
        Bs = Buffer("Bs", (stages, BN // 8, BK // 8, 8, 8), B.dtype)
    acc = Buffer("acc", (G, WARPS, LANES, BN // 2), float32)
    by, bx, ko, kk = Var("by"), Var("bx"), Var("ko"), Var("kk")
    fresh = fresh_vars()

    def threads(body_fn):
        return thread_nest(fresh, [("g", G), ("w", WARPS), ("lane", LANES)], body_fn)

    def copy(chunks, store_fn):
        """Each thread's share of a tile's ``chunks`` 16-byte pieces: ``store_fn(lin, e)``
        stores element ``e`` of piece ``lin``."""
        def body(g, w, lane):
            c, e = fresh("c"), fresh("e")
            lin = ((g * WARPS + w) * LANES + lane) + c * nthreads
            vec = For(e, 0, piece, Block([store_fn(lin, e)]), ForKind.VECTORIZED)
            return [For(c, 0, chunks // nthreads, Block([vec]), ForKind.UNROLLED)]
        return threads(body)

    def k_major(stage, r, kx):
        """The index of element (r, kx) of a K-major tile (rows r, kx along K) in stage ``stage``."""
        if swizzle:
            chunk = swizzled_chunk(floormod(floordiv(kx, piece), 8), r)
            return stage, floordiv(kx, atom), r, chunk * piece + floormod(kx, piece)
        return stage, floordiv(r, 8), floordiv(kx, 8), floormod(r, 8), floormod(kx, 8)

    def atom_copy(buf, stage, rows, cols, load):
        """A ``rows x cols`` tile in 128-byte swizzled atoms (``buf[stage, atom, row, 128
        bytes]``), eight threads per 128 bytes of a row: the thread storing chunk ``p`` of a
        row of an atom reads the row's chunk ``p ^ (row % 8)`` (``load(row, column)``), so the
        stores' indices stay affine for the dependence analysis and each eight threads read
        128 contiguous bytes of global memory."""
        per_row = cols // piece

        def store(lin, e):
            r, q = floordiv(lin, per_row), floormod(lin, per_row)
            a, p = floordiv(q, 8), floormod(q, 8)
            col = (a * 8 + swizzled_chunk(p, r)) * piece + e
            return Store(buf, (stage, a, r, p * piece + e), load(r, col))
        return copy(rows * per_row, store)

    def copy_a(kt, stage):
        if swizzle:
            return atom_copy(As, stage, BM, BK, lambda r, c: A[by * BM + r, kt * BK + c])

        # eight consecutive threads fill a core matrix (8 rows of one 16-byte k chunk)
        def store(lin, e):
            r8, kc, rg = floormod(lin, 8), floormod(floordiv(lin, 8), BK // 8), floordiv(lin, BK)
            return Store(As, (stage, rg, kc, r8, e), A[by * BM + rg * 8 + r8, kt * BK + kc * 8 + e])
        return copy(BM * BK // 8, store)

    def copy_b(kt, stage):
        if swizzle and nk:
            return atom_copy(Bs, stage, BN, BK, lambda r, c: B[bx * BN + r, kt * BK + c])
        if swizzle:     # rows of K, 64 columns of N per atom
            return atom_copy(Bs, stage, BK, BN, lambda r, c: B[kt * BK + r, bx * BN + c])
        if nk:
            def store(lin, e):
                n8, kc, ng = floormod(lin, 8), floormod(floordiv(lin, 8), BK // 8), floordiv(lin, BK)
                return Store(Bs, (stage, ng, kc, n8, e), B[bx * BN + ng * 8 + n8, kt * BK + kc * 8 + e])
        else:
            # eight threads read eight rows of k at one 16-byte column chunk, four such chunks
            # side by side per warp (whole 32-byte sectors of each row)
            def store(lin, e):
                k8, ncs = floormod(lin, 8), floormod(floordiv(lin, 8), 4)
                kg, ng4 = floormod(floordiv(lin, 32), BK // 8), floordiv(lin, 4 * BK)
                nc = ng4 * 4 + ncs
                return Store(Bs, (stage, nc, kg, k8, e), B[kt * BK + kg * 8 + k8, bx * BN + nc * 8 + e])
        return copy(BK * BN // 8, store)

    def mma_step(g, w, lane, stage):
        v, k = fresh("v"), fresh("k")
        row = g * ROWS + warpgroup_row(w, lane, v)
        col = warpgroup_col(lane, v)
        kx = kk * mma_k + k
        a = As[k_major(stage, row, kx)]
        if nk:
            b = Bs[k_major(stage, col, kx)]
        elif swizzle:
            chunk = swizzled_chunk(floormod(floordiv(col, 8), ATOM // 8), kx)
            b = Bs[stage, floordiv(col, ATOM), kx, chunk * 8 + floormod(col, 8)]
        else:
            b = Bs[stage, floordiv(col, 8), floordiv(kx, 8), floormod(kx, 8), floormod(col, 8)]
        at = (g, w, lane, v)
        body = Store(acc, at, acc[at] + cast(a, float32) * cast(b, float32))
        nest = For(v, 0, BN // 2, Block([For(k, 0, mma_k, Block([body]), ForKind.UNROLLED)]), ForKind.UNROLLED)
        return [For(kk, 0, BK // mma_k, Block([nest]), ForKind.UNROLLED)]

    def per_value(body_fn):
        """for the accumulators ``v = 4 q + 2 h + p`` of a thread, pairs ``p`` (adjacent columns) vectorized."""
        q, h, p = fresh("q"), fresh("h"), fresh("p")
        inner = For(p, 0, 2, Block([body_fn(q * 4 + h * 2 + p)]), ForKind.VECTORIZED)
        return For(q, 0, BN // 8, Block([For(h, 0, 2, Block([inner]), ForKind.UNROLLED)]), ForKind.UNROLLED)

    init = threads(lambda g, w, lane: [per_value(lambda v: Store(acc, (g, w, lane, v), FloatImm(0.0, float32)))])
    KT = K // BK
    prologue = [x for s in range(ahead) for x in (copy_a(min(s, KT - 1), s), copy_b(min(s, KT - 1), s))]
    tile = minimum(ko + ahead, KT - 1)     # the last steps reload the last tile into unused stages
    nxt = floormod(ko + ahead, stages)
    kloop = For(ko, 0, KT, Block([copy_a(tile, nxt), copy_b(tile, nxt),
                                  threads(lambda g, w, lane: mma_step(g, w, lane, floormod(ko, stages)))]))
    write = threads(lambda g, w, lane: [per_value(lambda v: Store(
        C, (by * BM + g * ROWS + warpgroup_row(w, lane, v), bx * BN + warpgroup_col(lane, v)),
        acc[g, w, lane, v]))])
    root = For(by, 0, M // BM, Block([For(bx, 0, N // BN, Block([init, *prologue, kloop, write]),
                                          ForKind.GPU_BLOCK, 0)]), ForKind.GPU_BLOCK, 1)
    return Block((root,)), [As, Bs, acc]
