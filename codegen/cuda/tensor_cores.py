"""The CUDA step ``cuda_tensor_cores``: loop nests that are warp MMAs, written lane by lane.

A loop nest inside a kernel is printed as tensor-core instructions when it is, for every
lane of a warp, exactly what ``mma.sync.m16n8k16`` computes for that lane
(:mod:`codegen.cuda.mma`), repeated over tiles::

    lane (the loop bound to threadIdx.x, extent 32)
      for t... (tile loops, each moving the A tile or the B tile, not both)
        for v in 0..4:  for k in 0..16:
          acc[c(lane, v)] += f32(A[a0 + row(lane, v) * lda + k]) * f32(B[b0 + k * ldb + col(lane, v)])

with ``A`` and ``B`` float16 (or both bfloat16) tiles in shared memory (B either K x N or
N x K row-major), ``acc`` float32 in registers, ``row``/``col`` the accumulator fragment
layout (:func:`codegen.cuda.mma_matmul.fragment_row`). IREval and LLVM run the nest as
written; here it becomes one ``ldmatrix`` per A tile and per B tile and one ``mma.sync``
per (A tile, B tile) pair, in the nest's order. The match is checked numerically: every
index of the nest is evaluated at every point (each lane, tile, ``v`` and ``k``) for several
values of the variables around it, and must equal the layout's; anything else is printed as
ordinary per-lane code (correct, without tensor cores). The step records what it matched;
``LOOPNEST_DUMP_PASSES=1`` prints it.

>>> from codegen import build
>>> from codegen.cuda.mma_matmul import mma_matmul_example
>>> ex = mma_matmul_example(128, 128, 64)
>>> k = build(ex.nest, ex.args, target="cuda")
>>> print(k.module.plan.describe_tensor_cores())
kernel k0_C: 1 warp MMA nest(s)
  m16n8k16 f16: 8 A tile(s) (As, ld 40), 16 B tile(s) (Bs K x N, ld 136), 64 mma.sync per nest
>>> "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in k.source
True
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from te import expr as E
from te.expr import IntImm, Var
from te.queries import free_vars
from te.simplify import simplify
from loopnest.stmt import Block, For, ForKind, Store

from .ir_queries import extent
from .mma_matmul import fragment_col, fragment_row

__all__ = ["MmaNest", "plan_tensor_cores", "match_mma_nest"]

_OPERAND_DTYPES = {"float16": "f16", "bfloat16": "bf16"}
_TRIALS = 3


@dataclass
class MmaNest:
    """One matched nest: ``root`` (the outermost tile loop, or the ``v`` loop), the lane
    variable, the operand dtype (``"f16"``/``"bf16"``), the buffers, the leading
    dimensions, B's storage (``"B_kn"``: K x N, ``"B_nk"``: N x K), and the tiles in nest
    order: ``a_tiles`` / ``b_tiles`` (A and B tile origins, flat element offsets as
    expressions) and ``mmas``: ``(a tile index, b tile index, [acc index of v = 0..3])``."""

    root: For
    lane: Var
    dtype: str
    a: object
    b: object
    acc: object
    lda: int
    ldb: int
    b_storage: str
    a_tiles: list
    b_tiles: list
    mmas: list

    def describe(self) -> str:
        b_layout = "K x N" if self.b_storage == "B_kn" else "N x K"
        return (f"m16n8k16 {self.dtype}: {len(self.a_tiles)} A tile(s) ({self.a.name}, ld {self.lda}), "
                f"{len(self.b_tiles)} B tile(s) ({self.b.name} {b_layout}, ld {self.ldb}), "
                f"{len(self.mmas)} mma.sync per nest")


# ------------------------------------------------------------------------------------
# numeric evaluation of index expressions over every point of a nest
# ------------------------------------------------------------------------------------
_BINARY = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Min: np.minimum, E.Max: np.maximum,
    E.FloorDiv: np.floor_divide, E.FloorMod: np.mod,
}


class _NotAffine(Exception):
    """An index uses something the numeric check does not evaluate (a load, a call...)."""


def _evaluate(e, env: dict):
    """``e`` at the points of ``env`` (id(var) -> int array); integer expressions only."""
    t = type(e)
    if t is IntImm:
        return np.int64(e.value)
    if t is Var:
        if id(e) not in env:
            raise _NotAffine(e.name)
        return env[id(e)]
    if t is E.Cast and e.dtype.is_int:
        return _evaluate(e.value, env)
    if t in _BINARY:
        return _BINARY[t](_evaluate(e.a, env), _evaluate(e.b, env))
    if t in (E.Div, E.Mod):   # C division of non-negative operands (cuda_index_division)
        a, b = _evaluate(e.a, env), _evaluate(e.b, env)
        if np.any(a < 0) or np.any(b <= 0):
            raise _NotAffine("negative division")
        return a // b if t is E.Div else a % b
    raise _NotAffine(t.__name__)


# ------------------------------------------------------------------------------------
# matching
# ------------------------------------------------------------------------------------
def _perfect_nest(loop: For) -> list[For] | None:
    loops = [loop]
    while len(loops[-1].body.stmts) == 1 and isinstance(loops[-1].body.stmts[0], For):
        loops.append(loops[-1].body.stmts[0])
    body = loops[-1].body.stmts
    if len(body) != 1 or not isinstance(body[0], Store):
        return None
    for f in loops:
        if f.kind not in (ForKind.SERIAL, ForKind.UNROLLED) or not isinstance(f.start, IntImm) or f.start.value:
            return None
        if not isinstance(f.stop, IntImm):
            return None
    return loops


def _product_operands(store: Store):
    """``(acc index, A load, B load)`` of ``acc[i] = acc[i] + f32(A[..]) * f32(B[..])``."""
    v = store.value
    if type(v) is not E.Add or len(store.indices) != 1:
        return None
    for prev, prod in ((v.a, v.b), (v.b, v.a)):
        if type(prev) is not E.Load or prev.buffer is not store.buffer or type(prod) is not E.Mul:
            continue
        if len(prev.indices) != 1 or not E.structural_equal(prev.indices[0], store.indices[0]):
            continue
        ops = []
        for x in (prod.a, prod.b):
            if type(x) is E.Cast and str(x.dtype) == "float32":
                x = x.value
            if type(x) is not E.Load or len(x.indices) != 1:
                return None
            ops.append(x)
        return store.indices[0], ops[0], ops[1]
    return None


def match_mma_nest(loop: For, lane: Var, scope) -> MmaNest | None:
    """The :class:`MmaNest` that ``loop`` (inside the threadIdx.x loop of ``lane``) is, or
    None. ``scope(buffer)`` is the memory scope of a buffer (``codegen.cuda.plan``)."""
    loops = _perfect_nest(loop)
    if loops is None or len(loops) < 2:
        return None
    store = loops[-1].body.stmts[0]
    if str(store.buffer.dtype) != "float32" or scope(store.buffer) != "local":
        return None
    ops = _product_operands(store)
    if ops is None:
        return None
    c_index, x, y = ops
    if str(x.buffer.dtype) not in _OPERAND_DTYPES or x.buffer.dtype != y.buffer.dtype:
        return None
    if scope(x.buffer) != "shared" or scope(y.buffer) != "shared" or store.buffer in (x.buffer, y.buffer):
        return None
    tile_loops, v_loop, k_loop = loops[:-2], loops[-2], loops[-1]
    if v_loop.stop.value != 4 or k_loop.stop.value != 16:
        return None
    nest_vars = [lane] + [f.var for f in loops]
    extents = [32] + [int(f.stop.value) for f in loops]
    if np.prod(extents) > 1 << 20:
        return None
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in extents], indexing="ij")
    lane_g, v_g, k_g = grids[0], grids[-2], grids[-1]
    row, col = fragment_row(lane_g, v_g), fragment_col(lane_g, v_g)
    tiles = (slice(None),) * len(tile_loops)
    first = (0,) * len(tile_loops)
    outer = [w for w in free_vars([c_index, x.indices[0], y.indices[0]]) if all(w is not u for u in nest_vars)]
    rng = np.random.default_rng(0)
    found = None
    for trial in range(_TRIALS):
        env = {id(w): np.int64(0 if trial == 0 else rng.integers(0, 5)) for w in outer}
        env.update({id(w): g for w, g in zip(nest_vars, grids)})
        try:
            a, b, c = (np.broadcast_to(_evaluate(e, env), lane_g.shape)
                       for e in (x.indices[0], y.indices[0], c_index))
        except _NotAffine:
            return None
        a0, b0 = a[(0,) + tiles + (0, 0)], b[(0,) + tiles + (0, 0)]      # the tile origins
        a_off = a - a0[(None, Ellipsis, None, None)]
        b_off = b - b0[(None, Ellipsis, None, None)]
        lda = int(a_off[(4,) + first + (0, 0)])                          # lane 4, v 0: row 1
        if not np.array_equal(a_off, row * lda + k_g):
            return None
        ldb, storage = int(b_off[(0,) + first + (0, 1)]), "B_kn"          # k 1: row 1 of K x N
        if not np.array_equal(b_off, k_g * ldb + col):
            ldb, storage = int(b_off[(0,) + first + (1, 0)]), "B_nk"      # v 1: row 1 of N x K
            if not np.array_equal(b_off, col * ldb + k_g):
                return None
        if lda % 8 or ldb % 8 or np.any(a0 % 8) or np.any(b0 % 8):
            return None   # ldmatrix rows are 16-byte aligned
        if np.any(c != c[..., :1]):
            return None   # the accumulator does not move with k
        if found not in (None, (lda, ldb, storage)):
            return None
        found = (lda, ldb, storage)
    return _tiles(loops, lane, x, y, store, *found, c_index)


def _tiles(loops, lane, x, y, store, lda, ldb, storage, c_index) -> MmaNest:
    """The tile origins and the MMAs of a matched nest, in the nest's order."""
    tile_loops = loops[:-2]
    v_var, k_var = loops[-2].var, loops[-1].var
    zero = {lane: IntImm(0, lane.dtype), v_var: IntImm(0, v_var.dtype), k_var: IntImm(0, k_var.dtype)}
    a_tiles, b_tiles, a_keys, b_keys, mmas = [], [], {}, {}, []
    for point in itertools.product(*[range(int(f.stop.value)) for f in tile_loops]):
        env = dict(zero)
        env.update({f.var: IntImm(p, f.var.dtype) for f, p in zip(tile_loops, point)})
        a0 = simplify(E.substitute(x.indices[0], env))
        b0 = simplify(E.substitute(y.indices[0], env))
        ka, kb = E.structural_key(a0), E.structural_key(b0)
        if ka not in a_keys:
            a_keys[ka] = len(a_tiles)
            a_tiles.append(a0)
        if kb not in b_keys:
            b_keys[kb] = len(b_tiles)
            b_tiles.append(b0)
        accs = []
        for v in range(4):
            env_v = dict(env)
            env_v[v_var] = IntImm(v, v_var.dtype)
            env_v.pop(lane)
            accs.append(simplify(E.substitute(c_index, env_v)))
        mmas.append((a_keys[ka], b_keys[kb], accs))
    return MmaNest(loops[0], lane, _OPERAND_DTYPES[str(x.buffer.dtype)], x.buffer, y.buffer, store.buffer,
                   lda, ldb, storage, a_tiles, b_tiles, mmas)


def plan_tensor_cores(plan) -> None:
    """Record in ``plan.mma`` (id(loop) -> :class:`MmaNest`) every nest of every kernel that
    is a warp MMA (see the module docstring). Kernels on architectures without
    ``mma.sync`` print the plain code (the printer guards on ``__CUDA_ARCH__``)."""
    for k in plan.kernels:
        _walk(plan, k, k.region, None)


def _walk(plan, kernel, s, lane) -> None:
    if isinstance(s, Block):
        for x in s.stmts:
            _walk(plan, kernel, x, lane)
        return
    if isinstance(s, For):
        if s.kind == ForKind.GPU_THREAD and s.axis == 0:
            n = extent(s)
            if isinstance(n, IntImm) and n.value == 32 and isinstance(s.start, IntImm) and s.start.value == 0:
                _walk(plan, kernel, s.body, s.var)
                return
            _walk(plan, kernel, s.body, None)
            return
        if lane is not None and s.kind in (ForKind.SERIAL, ForKind.UNROLLED):
            m = match_mma_nest(s, lane, plan.scope)
            if m is not None:
                plan.mma[id(s)] = m
                plan.mma_by_kernel.setdefault(kernel.name, []).append(m)
                return
        _walk(plan, kernel, s.body, lane)
        return
    for child in ("then", "otherwise", "body"):
        sub = getattr(s, child, None)
        if sub is not None:
            _walk(plan, kernel, sub, lane)


# ------------------------------------------------------------------------------------
# printing
# ------------------------------------------------------------------------------------
def print_mma_nest(em, nest: MmaNest, plain) -> None:
    """Print ``nest`` with the CUDA emitter ``em``: ldmatrix and mma.sync on sm_80 and later,
    ``plain()`` (the nest as ordinary per-lane code) elsewhere (older GPUs, host emulation)."""
    from .mma import ldmatrix_row_address
    from .mma_source import layout_c_expr

    em.helpers.need("tc_mma")
    lane = em.var(nest.lane)
    em.emit("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800")
    em.emit("{")
    em.indent += 1
    a_regs, b_regs = [], []
    a_lane = layout_c_expr(ldmatrix_row_address("A", nest.lda), lane)
    b_lane = layout_c_expr(ldmatrix_row_address(nest.b_storage, nest.ldb), lane)
    b_load = "tc_ldmatrix_x2_trans" if nest.b_storage == "B_kn" else "tc_ldmatrix_x2"
    for origin in nest.a_tiles:
        r = em.tmp("ma")
        a_regs.append(r)
        em.emit(f"unsigned {r}[4];")
        em.emit(f"tc_ldmatrix_x4({r}, &{em.elem(nest.a, f'{em.expr(origin, True)} + {a_lane}')});")
    for origin in nest.b_tiles:
        r = em.tmp("mb")
        b_regs.append(r)
        em.emit(f"unsigned {r}[2];")
        em.emit(f"{b_load}({r}, &{em.elem(nest.b, f'{em.expr(origin, True)} + {b_lane}')});")
    for ai, bi, accs in nest.mmas:
        refs = ", ".join(em.elem(nest.acc, em.expr(em._private_index(nest.acc, c), True)) for c in accs)
        em.emit(f"tc_mma_{nest.dtype}({refs}, {a_regs[ai]}, {b_regs[bi]});")
    em.indent -= 1
    em.emit("}")
    em.emit("#else")
    plain()
    em.emit("#endif")
