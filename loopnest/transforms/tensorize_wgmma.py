"""tensorize for Hopper's warpgroup MMA: check that a loop nest is ``wgmma.mma_async.m64nNk16``
written thread by thread (:mod:`loopnest.transforms.gpu_wgmma`).

Inside a warpgroup's thread loops -- ``lane`` bound to threadIdx.x (32 iterations) and
``warp`` to threadIdx.y (4) -- the nest must read::

    for t... (tile loops)  for v in 0..N/2:  for k in 0..16:
        acc[c(t) + v] += f32(A[a0(t) + K(row, k)]) * f32(B[b0(t) + MN(k, col)  or  K(col, k)])

with ``row``/``col`` the accumulator layout (:func:`~.gpu_wgmma.warpgroup_row`,
:func:`~.gpu_wgmma.warpgroup_col`), ``K(r, k) = (r % 8) * 8 + (r / 8) * sbo + k % 8 + (k / 8) * lbo``
the K-major interleaved canonical layout in elements and ``MN(k, n) = (k % 8) * 8 +
(k / 8) * lbo + n % 8 + (n / 8) * sbo`` the MN-major one (B stored K x N), both operands
float16 or both bfloat16 in shared memory, the accumulators float32 registers, one
thread's ``N / 2`` of them consecutive. Either operand may instead be in the 128-byte
swizzled layout (:mod:`codegen.cuda.wgmma`): rows of 64 elements in 1024-byte atoms, the
16-byte chunk ``c`` of row ``r`` at ``c ^ (r % 8)``, the tile's origin in the first row of an
atom (the buffer's shared memory is then 1024-byte aligned by the CUDA backend). Every index
is evaluated at every point of the nest
for several values of the variables around it, as :func:`~.tensorize.match_mma` does.

>>> from te import Buffer, Reduce, Sum, cast, float32
>>> from loopnest import LoopNest
>>> A, B = Buffer("A", (64, 32), "float16"), Buffer("B", (32, 64), "float16")
>>> C = Reduce("C", (64, 64), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (32,))
>>> nest = LoopNest([C]); nest.gpu_matmul(True, wgmma=True, BM=64, BN=64, BK=32, stages=2)
>>> nest.tensorized
{'kk': 'wgmma_m64nNk16'}
>>> m = match_wgmma(nest.loop("kk").stmt, *_threads(nest, nest.loop("kk")), _flat)
>>> print(m.describe())
wgmma m64n64k16 f16: 2 A tile(s) (As, K-major), 2 B tile(s) (Bs, MN-major), 2 wgmma per nest
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import numpy as np

from te import expr as E
from te.expr import IntImm, Var
from te.queries import free_vars
from te.simplify import simplify

from ..passes import flat_index
from ..stmt import For, ForKind
from .gpu_wgmma import WGMMA_INTRINSIC, WGMMA_TF32_INTRINSIC, WGMMA_TYPES, warpgroup_col, warpgroup_row
from .tensorize import CHECKS, INTRINSICS, NotAnMma, _evaluate, _mma_operands, _tile_points

__all__ = ["WgmmaMatch", "match_wgmma", "why_not_a_wgmma"]

_TRIALS = 3
_MAX_POINTS = 1 << 22


@dataclass
class WgmmaMatch:
    """A nest that is a warpgroup MMA: ``root``, the ``lane`` and ``warp`` variables, the
    operand type (``"f16"``/``"bf16"``), the buffers, ``n`` (the instruction's N), the
    operands' byte offsets between core matrices (``*_lbo`` along K, ``*_sbo`` along M or
    N), B's major mode (``"MN"``: K x N, the transposed form; ``"K"``: N x K), the tile
    origins (flat element offsets) and ``mmas``: ``(a tile, b tile, acc index of v = 0)``."""

    root: For
    lane: Var
    warp: Var
    dtype: str
    a: Any
    b: Any
    acc: Any
    n: int
    a_lbo: int
    a_sbo: int
    b_lbo: int
    b_sbo: int
    b_major: str
    a_tiles: list
    b_tiles: list
    mmas: list
    in_flight: int = 0      # the groups left running at the end of the nest (codegen.cuda.wgmma_overlap)
    a_swizzle: int = 0      # bytes: 0 (interleaved core matrices) or 128 (swizzled atoms)
    b_swizzle: int = 0
    k: int = 16             # the instruction's K: 16 (16-bit operands) or 8 (tf32)

    kind = "wgmma"

    def describe(self) -> str:
        def layout(major, swizzle):
            return f"{major}-major" + (f", {swizzle}-byte swizzle" if swizzle else "")
        return (f"wgmma m64n{self.n}k{self.k} {self.dtype}: {len(self.a_tiles)} A tile(s) ({self.a.name}, "
                f"{layout('K', self.a_swizzle)}), {len(self.b_tiles)} B tile(s) ({self.b.name}, "
                f"{layout(self.b_major, self.b_swizzle)}), {len(self.mmas)} wgmma per nest")

    @property
    def swizzled_buffers(self) -> list:
        """The operand buffers in swizzled layouts: their shared memory must be 1024-byte aligned."""
        return [buf for buf, sw in ((self.a, self.a_swizzle), (self.b, self.b_swizzle)) if sw]


def _k_major(r, k, lbo, sbo, per=8):
    """K-major core matrices of ``per`` elements to a 16-byte row, in elements."""
    return (r % 8) * per + (r // 8) * sbo + k % per + (k // per) * lbo


def _mn_major(k, n, lbo, sbo):
    return (k % 8) * 8 + (k // 8) * lbo + n % 8 + (n // 8) * sbo


def _swizzled(x, itemsize=2):
    """The 128-byte swizzle on element indices (codegen.cuda.wgmma.swizzled on bytes)."""
    b = x * itemsize
    return (b ^ (((b >> 7) & 7) << 4)) // itemsize


def _atom_rows(r, c, lbo, sbo, row=64):
    """Rows ``r`` of ``row`` elements ``c`` (128 bytes) in 128-byte atoms (before the swizzle), in elements."""
    return (r % 8) * row + (r // 8) * sbo + c % row + (c // row) * lbo


def _in_atoms(ix, origin, r, c, lbo, sbo, itemsize=2):
    """Whether the element indices ``ix`` are the 128-byte swizzled layout at ``origin`` (in
    the first row of an atom, as the descriptor's zero base offset assumes)."""
    return (not np.any(origin * itemsize % 1024 >= 128) and sbo * itemsize % 1024 == 0 and lbo * itemsize % 16 == 0
            and np.array_equal(ix, _swizzled(origin + _atom_rows(r, c, lbo, sbo, 128 // itemsize), itemsize)))


def match_wgmma(loop: For, lane: Var, warp: Var, index_of: Callable, scope: Callable | None = None,
                intrinsic: str = WGMMA_INTRINSIC) -> WgmmaMatch:
    """The :class:`WgmmaMatch` that ``loop`` (inside the thread loops of ``lane`` and
    ``warp``) is, as ``intrinsic`` (``wgmma_m64nNk16`` for 16-bit operands,
    ``wgmma_m64nNk8_tf32`` for float32 ones, both operands K-major); raises
    :class:`~.tensorize.NotAnMma` naming the first mismatch."""
    k_extent, types = INTRINSICS[intrinsic]
    loops, store, c_index, x, y = _mma_operands(loop, index_of, scope, types, intrinsic)
    tile_loops, v_loop, k_loop = loops[:-2], loops[-2], loops[-1]
    values = int(v_loop.stop.value)
    if values % 4 or not 4 <= values <= 128 or k_loop.stop.value != k_extent:
        raise NotAnMma(f"the two innermost loops ({v_loop.var.name}: {values}, {k_loop.var.name}: "
                       f"{k_loop.stop.value}) must be a thread's N / 2 accumulators (N a multiple of 8 up to 256) "
                       f"and k = {k_extent}")
    itemsize = x.buffer.dtype.itemsize
    per = 16 // itemsize        # elements in 16 bytes: a core matrix's row
    a_ix, b_ix = index_of(x.buffer, x.indices), index_of(y.buffer, y.indices)
    nest_vars = [warp, lane] + [f.var for f in loops]
    extents = [4, 32] + [int(f.stop.value) for f in loops]
    if np.prod(extents) > _MAX_POINTS:
        raise NotAnMma(f"the nest has {int(np.prod(extents))} points per warpgroup; at most {_MAX_POINTS} are checked")
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in extents], indexing="ij")
    warp_g, lane_g, v_g, k_g = grids[0], grids[1], grids[-2], grids[-1]
    row, col = warpgroup_row(warp_g, lane_g, v_g), warpgroup_col(lane_g, v_g)
    outer = [w for w in free_vars([c_index, a_ix, b_ix]) if all(w is not u for u in nest_vars)]
    rng = np.random.default_rng(0)
    here = (0, 0) + (slice(None),) * len(tile_loops)
    origin = (None, None) + (Ellipsis,) + (None, None)
    found = None
    for trial in range(_TRIALS):
        env = {id(w): np.int64(0 if trial == 0 else rng.integers(0, 5)) for w in outer}
        env.update({id(w): g for w, g in zip(nest_vars, grids)})
        a, b, c = (np.broadcast_to(_evaluate(e, env), k_g.shape) for e in (a_ix, b_ix, c_index))
        a0, b0 = a[here + (0, 0)], b[here + (0, 0)]
        a_off, b_off = a - a0[origin], b - b0[origin]
        first = (0, 0) + (0,) * len(tile_loops)
        # k per: the next core matrix along K; v 2: row 8
        a_lbo, a_sbo, a_sw = int(a_off[first + (0, per)]), int(a_off[first + (2, 0)]), 0
        if not np.array_equal(a_off, _k_major(row, k_g, a_lbo, a_sbo, per)):
            a_lbo, a_sw = per, 128        # K-major swizzled: LBO unused (one k step lies inside a row)
            if not _in_atoms(a, a0[origin], row, k_g, a_lbo, a_sbo, itemsize):
                raise NotAnMma(f"{x.buffer.name}'s index is neither the K-major interleaved layout nor the K-major "
                               f"128-byte swizzled layout of a 64 x {k_extent} A tile at the warpgroup's accumulator "
                               "rows")
        b_lbo, b_sbo, b_sw = int(b_off[first + (0, per)]), int(b_off[first + (4, 0)]), 0     # v 4: column 8
        if itemsize == 2 and np.array_equal(b_off, _mn_major(k_g, col, b_lbo, b_sbo)):
            major = "MN"
        elif np.array_equal(b_off, _k_major(col, k_g, b_lbo, b_sbo, per)):
            major = "K"
        else:
            # swizzled: MN-major rows are k (SBO: k 8) and LBO steps 64 columns (v 32), K-major rows are columns
            mn_lbo = int(b_off[first + (32, 0)]) if values > 32 else 8
            if itemsize == 2 and _in_atoms(b, b0[origin], k_g, col, mn_lbo, b_lbo):
                major, b_lbo, b_sbo, b_sw = "MN", mn_lbo, b_lbo, 128
            elif _in_atoms(b, b0[origin], col, k_g, per, b_sbo, itemsize):
                major, b_lbo, b_sw = "K", per, 128
            elif itemsize != 2:
                raise NotAnMma(f"{y.buffer.name}'s index is not the K-major layout (interleaved or 128-byte "
                               f"swizzled) of an N x {k_extent} B tile at the accumulator columns; tf32 reads B "
                               "K-major only (store it N x K)")
            else:
                raise NotAnMma(f"{y.buffer.name}'s index is neither the MN-major nor the K-major layout (interleaved "
                               "or 128-byte swizzled) of a 16 x N B tile at the accumulator columns")
        if any(d % per or not 0 < itemsize * d < 1 << 18 for d in (a_lbo, a_sbo, b_lbo, b_sbo)):
            raise NotAnMma("the distances between core matrices must be positive multiples of 16 bytes below "
                           f"256 KiB (A: {itemsize * a_lbo}, {itemsize * a_sbo}; B: {itemsize * b_lbo}, "
                           f"{itemsize * b_sbo} bytes)")
        if np.any(a0 % per) or np.any(b0 % per):
            raise NotAnMma("the tile origins must be multiples of 16 bytes")
        if np.any(c - c[..., :1, :] != v_g) or np.any(c != c[..., :1]):
            raise NotAnMma(f"a thread's accumulators of {store.buffer.name} must be consecutive in v and not "
                           "change with k")
        if found not in (None, (a_lbo, a_sbo, b_lbo, b_sbo, major, a_sw, b_sw)):
            raise NotAnMma("the layouts change with the loops around the nest")
        found = (a_lbo, a_sbo, b_lbo, b_sbo, major, a_sw, b_sw)
    a_lbo, a_sbo, b_lbo, b_sbo, major, a_sw, b_sw = found
    a_tiles, b_tiles, mmas = _tiles(loops, lane, warp, a_ix, b_ix, c_index)
    size = itemsize
    return WgmmaMatch(loops[0], lane, warp, WGMMA_TYPES[str(x.buffer.dtype)], x.buffer, y.buffer, store.buffer,
                      2 * values, size * a_lbo, size * a_sbo, size * b_lbo, size * b_sbo, major, a_tiles, b_tiles,
                      mmas, a_swizzle=a_sw, b_swizzle=b_sw, k=k_extent)


def _tiles(loops, lane, warp, a_ix, b_ix, c_index):
    points, a_tiles, b_tiles = _tile_points(loops, (lane, warp), a_ix, b_ix)
    return a_tiles, b_tiles, [(ai, bi, simplify(E.substitute(c_index, env))) for env, ai, bi in points]


def _threads(nest, loop):
    """``(lane, warp)``: the variables of the threadIdx.x loop of 32 and the threadIdx.y loop
    of 4 around ``loop``, or None for either that is missing."""
    lane = warp = None
    for outer in reversed(nest.get_enclosing_loops(loop)[:-1]):
        f = outer.stmt
        if f.kind != ForKind.GPU_THREAD or f.axis not in (0, 1):
            continue
        full = isinstance(f.start, IntImm) and f.start.value == 0 and isinstance(f.stop, IntImm)
        if f.axis == 0 and lane is None:
            lane = f.var if full and f.stop.value == 32 else False
        elif f.axis == 1 and warp is None:
            warp = f.var if full and f.stop.value == 4 else False
    return (lane if lane is not False else None), (warp if warp is not False else None)


def _flat(buf, indices):
    return flat_index(buf, indices)


def why_not_a_wgmma(nest, loop, intrinsic: str = WGMMA_INTRINSIC) -> str | None:
    """Why ``loop`` is not the warpgroup MMA ``intrinsic`` written thread by thread (None: it is)."""
    lane, warp = _threads(nest, loop)
    if lane is None or warp is None:
        return ("the loop must be inside a loop bound to threadIdx.x with 32 iterations (the lanes) and one bound "
                "to threadIdx.y with 4 (the warps of a warpgroup)")
    try:
        match_wgmma(loop.stmt, lane, warp, _flat, intrinsic=intrinsic)
    except NotAnMma as exc:
        return str(exc)
    return None


CHECKS[WGMMA_INTRINSIC] = why_not_a_wgmma
CHECKS[WGMMA_TF32_INTRINSIC] = partial(why_not_a_wgmma, intrinsic=WGMMA_TF32_INTRINSIC)
