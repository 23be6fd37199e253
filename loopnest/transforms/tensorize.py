"""tensorize: declare that a loop nest is a warp MMA, written lane by lane, and check it.

A warp's ``mma.sync.m16n8k16`` computes ``D(16 x 8) = A(16 x 16) * B(16 x 8) + C`` with the
tiles spread over the 32 lanes: lane ``l`` holds the accumulators ``v = 0..3`` at row
:func:`fragment_row` ``(l, v)``, column :func:`fragment_col` ``(l, v)``. A nest is that
instruction (repeated over tiles) when, inside the loop bound to threadIdx.x with 32
iterations (``lane``), it reads::

    for t... (tile loops)  for v in 0..4:  for k in 0..16:
        acc[c(lane, t, v)] += f32(A[a0(t) + row(lane, v) * lda + k]) * f32(B[b0(t) + k * ldb + col(lane, v)])

(``B`` either K x N as above or N x K: ``B[b0 + col * ldb + k]``), with ``A`` and ``B`` both
float16 or both bfloat16, ``acc`` float32, ``lda``/``ldb`` and the tile origins multiples of
8 elements (ldmatrix reads 16-byte rows). ``mma_m16n8k8_tf32`` is the same with k = 8 and
float32 operands, which the tensor cores round to tf32 (opt-in: only a nest declared with
``tensorize`` uses it). ``mma_m16n8k32_f8`` takes float8 (e4m3 or e5m2) operands with k = 32
and B stored N x K (sm_89 and later). Every index is evaluated at every point of the
nest, for several values of the variables around it, and compared with the layout: the
check is exact for the values tried, and IREval runs the nest as written either way.

:func:`match_mma` recognises such a nest (the CUDA step ``cuda_tensor_cores`` prints each
as ``ldmatrix`` and ``mma.sync``); ``LoopNest.tensorize(loop)`` checks a nest of the user's
schedule now, raising a ``ScheduleError`` that names what does not match, and makes the CUDA
build refuse (``BuildError``) to print it any other way -- for instance when its operands
are not in shared memory or its accumulators not in registers.

>>> from te import Buffer, Var, cast, float32
>>> from loopnest import LoopNest
>>> from loopnest.stmt import Block, For, ForKind, Store
>>> As, Bs = Buffer("As", (16, 16), "float16"), Buffer("Bs", (16, 8), "float16")
>>> acc = Buffer("acc", (32, 4), "float32")
>>> lane, v, k = Var("lane"), Var("v"), Var("k")
>>> body = Store(acc, (lane, v), acc[lane, v] + cast(As[fragment_row(lane, v), k], float32)
...              * cast(Bs[k, fragment_col(lane, v)], float32))
>>> tile = For(v, 0, 4, Block([For(k, 0, 16, Block([body]))]))
>>> nest = LoopNest(For(lane, 0, 32, Block([tile])), outputs=[acc])
>>> _ = nest.set_gpu_thread_index(lane, 0)
>>> nest.tensorize(k)
Traceback (most recent call last):
...
loopnest.errors.ScheduleError: tensorize(k, 'mma_m16n8k16'): the nest needs a loop over the 4 accumulators of a lane and, inside it, one over k
>>> nest.tensorize(v)
>>> nest.tensorized
{'v': 'mma_m16n8k16'}
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from te import expr as E
from te.expr import Expr, IntImm, Var, floordiv, floormod
from te.queries import free_vars
from te.simplify import simplify

from ..errors import ScheduleError
from ..loop import Loop
from ..passes import flat_index
from ..stmt import For, ForKind, Store, iter_stmts

__all__ = ["INTRINSICS", "MmaMatch", "NotAnMma", "fragment_row", "fragment_col", "match_mma", "tensorize",
           "why_not_an_mma", "check_tensorized"]

#: the intrinsics ``tensorize`` knows: their k extent and operand types (-> the PTX type name).
#: ``mma_m16n8k8_tf32`` takes float32 operands and rounds them to tf32 (10 bits of mantissa)
#: on the tensor cores: a precision the user opts into, so only a declared nest uses it.
INTRINSICS = {"mma_m16n8k16": (16, {"float16": "f16", "bfloat16": "bf16"}),
              "mma_m16n8k8_tf32": (8, {"float32": "tf32"}),
              "mma_m16n8k32_f8": (32, {"float8_e4m3": "e4m3", "float8_e5m2": "e5m2"}),
              # Hopper's warpgroup MMA (loopnest.transforms.tensorize_wgmma); N is the nest's
              "wgmma_m64nNk16": (16, {"float16": "f16", "bfloat16": "bf16"}),
              "wgmma_m64nNk8_tf32": (8, {"float32": "tf32"})}
#: ``why_not(nest, loop)`` of the intrinsics not checked here, by name: the warpgroup MMA's
#: (``loopnest.transforms.tensorize_wgmma`` registers it when imported, as ``loopnest`` does)
CHECKS: dict = {}
#: the PTX shape of each operand type
MMA_SHAPES = {"f16": "m16n8k16", "bf16": "m16n8k16", "tf32": "m16n8k8", "e4m3": "m16n8k32", "e5m2": "m16n8k32"}
_TRIALS = 3


def fragment_row(lane, v):
    """Row of value ``v`` (0..3) of ``lane`` in an m16n8 accumulator tile: an expression for
    expressions, integers (or integer arrays) otherwise.

    >>> [fragment_row(l, v) for l, v in ((0, 0), (5, 1), (5, 2), (31, 3))]
    [0, 1, 9, 15]
    """
    if isinstance(lane, Expr) or isinstance(v, Expr):
        return floordiv(lane, 4) + floordiv(v, 2) * 8
    return lane // 4 + 8 * (v // 2)


def fragment_col(lane, v):
    """Column of value ``v`` (0..3) of ``lane`` in an m16n8 accumulator tile (see
    :func:`fragment_row`).

    >>> [fragment_col(l, v) for l, v in ((0, 0), (5, 1), (5, 2), (31, 3))]
    [0, 3, 2, 7]
    """
    if isinstance(lane, Expr) or isinstance(v, Expr):
        return floormod(lane, 4) * 2 + floormod(v, 2)
    return 2 * (lane % 4) + v % 2


class NotAnMma(Exception):
    """The nest is not a warp MMA; the message says what does not match."""


@dataclass
class MmaMatch:
    """A nest that is a warp MMA: ``root`` (its outermost loop), the ``lane`` variable, the
    operand type (``"f16"``/``"bf16"``), the buffers, leading dimensions, B's storage
    (``"B_kn"``: K x N, ``"B_nk"``: N x K), and the tiles in nest order: ``a_tiles`` /
    ``b_tiles`` (tile origins, flat element offsets as expressions) and ``mmas``: ``(a tile
    index, b tile index, [acc index of v = 0..3])``."""

    root: For
    lane: Var
    dtype: str
    a: Any
    b: Any
    acc: Any
    lda: int
    ldb: int
    b_storage: str
    a_tiles: list
    b_tiles: list
    mmas: list

    @property
    def shape(self) -> str:
        """The PTX shape: ``m16n8k16``, ``m16n8k8`` for tf32, ``m16n8k32`` for float8."""
        return MMA_SHAPES[self.dtype]

    def describe(self) -> str:
        b_layout = "K x N" if self.b_storage == "B_kn" else "N x K"
        return (f"{self.shape} {self.dtype}: {len(self.a_tiles)} A tile(s) ({self.a.name}, ld {self.lda}), "
                f"{len(self.b_tiles)} B tile(s) ({self.b.name} {b_layout}, ld {self.ldb}), "
                f"{len(self.mmas)} mma.sync per nest")


# ------------------------------------------------------------------------------------
# numeric evaluation of index expressions over every point of a nest
# ------------------------------------------------------------------------------------
_BIT_OPS = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}
_BINARY = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Min: np.minimum, E.Max: np.maximum,
    E.FloorDiv: np.floor_divide, E.FloorMod: np.mod,
}


def _evaluate(e, env: dict):
    """``e`` at the points of ``env`` (id(var) -> int array); integer expressions only."""
    t = type(e)
    if t is IntImm:
        return np.int64(e.value)
    if t is Var:
        if id(e) not in env:
            raise NotAnMma(f"an index uses {e.name}, which is not a loop around the nest")
        return env[id(e)]
    if t is E.Cast and e.dtype.is_int:
        return _evaluate(e.value, env)
    if t in _BINARY:
        return _BINARY[t](_evaluate(e.a, env), _evaluate(e.b, env))
    if t is E.Call and e.name in _BIT_OPS and e.dtype.is_int:     # a swizzled layout's XOR, a mask
        return _BIT_OPS[e.name](_evaluate(e.args[0], env), _evaluate(e.args[1], env))
    if t in (E.Div, E.Mod):   # C division of non-negative operands (codegen's index division)
        a, b = _evaluate(e.a, env), _evaluate(e.b, env)
        if np.any(a < 0) or np.any(b <= 0):
            raise NotAnMma("an index divides a negative number")
        return a // b if t is E.Div else a % b
    raise NotAnMma(f"an index holds a {t.__name__}, which the layout check does not evaluate")


# ------------------------------------------------------------------------------------
# matching
# ------------------------------------------------------------------------------------
def _perfect_nest(loop: For) -> list[For]:
    loops = [loop]
    while len(loops[-1].body.stmts) == 1 and isinstance(loops[-1].body.stmts[0], For):
        loops.append(loops[-1].body.stmts[0])
    body = loops[-1].body.stmts
    if len(body) != 1 or not isinstance(body[0], Store):
        raise NotAnMma(f"the innermost loop {loops[-1].var.name} must hold one store, it holds {len(body)} "
                       "statement(s)")
    for f in loops:
        if f.kind not in (ForKind.SERIAL, ForKind.UNROLLED):
            raise NotAnMma(f"loop {f.var.name} is {f.kind}; the loops of the tile must be serial or unrolled")
        if not (isinstance(f.start, IntImm) and f.start.value == 0 and isinstance(f.stop, IntImm)):
            raise NotAnMma(f"loop {f.var.name} must run from 0 to a constant")
    if len(loops) < 2:
        raise NotAnMma("the nest needs a loop over the 4 accumulators of a lane and, inside it, one over k")
    return loops


def _product_operands(store: Store, index_of):
    """``(acc index, A load, B load)`` of ``acc[i] = acc[i] + f32(A[..]) * f32(B[..])``."""
    v = store.value
    form = f"the store must read acc[i] = acc[i] + float32(A[...]) * float32(B[...]), it reads {store.buffer.name} = {v}"
    if type(v) is not E.Add:
        raise NotAnMma(form)
    for prev, prod in ((v.a, v.b), (v.b, v.a)):
        if type(prev) is not E.Load or prev.buffer is not store.buffer or type(prod) is not E.Mul:
            continue
        if not all(E.structural_equal(a, b) for a, b in zip(prev.indices, store.indices)):
            continue
        ops = []
        for x in (prod.a, prod.b):
            if type(x) is E.Cast and str(x.dtype) == "float32":
                x = x.value
            if type(x) is not E.Load:
                raise NotAnMma(form)
            ops.append(x)
        return index_of(store.buffer, store.indices), ops[0], ops[1]
    raise NotAnMma(form)


def _mma_operands(loop: For, index_of: Callable, scope: Callable | None, operand_types, intrinsic: str):
    """``(loops, store, acc index, A load, B load)`` of a perfect nest ``acc[i] += f32(A[..]) *
    f32(B[..])`` whose accumulators are float32 registers and whose operands are shared-memory
    buffers of one of ``operand_types``; NotAnMma otherwise."""
    loops = _perfect_nest(loop)
    store = loops[-1].body.stmts[0]
    if str(store.buffer.dtype) != "float32":
        raise NotAnMma(f"the accumulators {store.buffer.name} are {store.buffer.dtype}, expected float32")
    c_index, x, y = _product_operands(store, index_of)
    if str(x.buffer.dtype) not in operand_types or x.buffer.dtype != y.buffer.dtype:
        raise NotAnMma(f"the operands {x.buffer.name} ({x.buffer.dtype}) and {y.buffer.name} ({y.buffer.dtype}) "
                       f"must both be {' or both '.join(operand_types)} for {intrinsic}")
    if store.buffer in (x.buffer, y.buffer):
        raise NotAnMma(f"the accumulators {store.buffer.name} are also an operand")
    if scope is not None:
        for buf, want in ((x.buffer, "shared"), (y.buffer, "shared"), (store.buffer, "local")):
            have = scope(buf)
            if have != want:
                where = "global memory (a kernel argument)" if have == "param" else f"{have} memory"
                raise NotAnMma(f"{buf.name} is in {where}; an MMA takes its operands from shared memory and "
                               "its accumulators from registers (a thread-local array)")
    return loops, store, c_index, x, y


def match_mma(loop: For, lane: Var, index_of: Callable, scope: Callable | None = None,
              intrinsic: str = "mma_m16n8k16") -> MmaMatch:
    """The :class:`MmaMatch` that ``loop`` (inside the threadIdx.x loop of ``lane``) is, as
    ``intrinsic`` (see :data:`INTRINSICS`); raises :class:`NotAnMma` naming the first
    mismatch. ``index_of(buffer, indices)`` is the flat element index of an access;
    ``scope(buffer)`` (optional) its memory scope, which must be ``"shared"`` for the
    operands and ``"local"`` for the accumulators."""
    k_extent, operand_types = INTRINSICS[intrinsic]
    loops, store, c_index, x, y = _mma_operands(loop, index_of, scope, operand_types, intrinsic)
    tile_loops, v_loop, k_loop = loops[:-2], loops[-2], loops[-1]
    if v_loop.stop.value != 4 or k_loop.stop.value != k_extent:
        raise NotAnMma(f"the two innermost loops ({v_loop.var.name}: {v_loop.stop.value}, {k_loop.var.name}: "
                       f"{k_loop.stop.value}) must be the 4 accumulators of a lane and k = {k_extent}")
    a_ix, b_ix = index_of(x.buffer, x.indices), index_of(y.buffer, y.indices)
    nest_vars = [lane] + [f.var for f in loops]
    extents = [32] + [int(f.stop.value) for f in loops]
    if np.prod(extents) > 1 << 20:
        raise NotAnMma(f"the nest has {int(np.prod(extents))} points per warp; at most {1 << 20} are checked")
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in extents], indexing="ij")
    lane_g, k_g = grids[0], grids[-1]
    row, col = fragment_row(lane_g, grids[-2]), fragment_col(lane_g, grids[-2])
    tiles = (slice(None),) * len(tile_loops)
    first = (0,) * len(tile_loops)
    outer = [w for w in free_vars([c_index, a_ix, b_ix]) if all(w is not u for u in nest_vars)]
    rng = np.random.default_rng(0)
    found = None
    for trial in range(_TRIALS):
        env = {id(w): np.int64(0 if trial == 0 else rng.integers(0, 5)) for w in outer}
        env.update({id(w): g for w, g in zip(nest_vars, grids)})
        a, b, c = (np.broadcast_to(_evaluate(e, env), lane_g.shape) for e in (a_ix, b_ix, c_index))
        a0, b0 = a[(0,) + tiles + (0, 0)], b[(0,) + tiles + (0, 0)]      # the tile origins
        a_off = a - a0[(None, Ellipsis, None, None)]
        b_off = b - b0[(None, Ellipsis, None, None)]
        lda = int(a_off[(4,) + first + (0, 0)])                          # lane 4, v 0: row 1
        if not np.array_equal(a_off, row * lda + k_g):
            raise NotAnMma(f"{x.buffer.name}'s index is not row(lane, v) * ld + k of an A tile (the accumulator "
                           "fragment layout)")
        ldb, storage = int(b_off[(0,) + first + (0, 1)]), "B_kn"          # k 1: row 1 of K x N
        if not np.array_equal(b_off, k_g * ldb + col):
            ldb, storage = int(b_off[(0,) + first + (1, 0)]), "B_nk"      # v 1: row 1 of N x K
            if not np.array_equal(b_off, col * ldb + k_g):
                raise NotAnMma(f"{y.buffer.name}'s index is neither k * ld + col(lane, v) nor col(lane, v) * ld + k "
                               "of a B tile (the accumulator fragment layout)")
        chunk = 16 // x.buffer.dtype.itemsize          # elements in the 16 bytes of an ldmatrix row
        if k_extent != 8 and (lda % chunk or ldb % chunk or np.any(a0 % chunk) or np.any(b0 % chunk)):
            raise NotAnMma(f"the rows of the tiles (ld {lda} and {ldb}) and their origins must be multiples of "
                           f"{chunk} elements: ldmatrix reads 16-byte rows")
        if k_extent == 32 and storage == "B_kn":
            raise NotAnMma(f"8-bit B tiles must be stored N x K ({y.buffer.name}[n, k], k contiguous): ldmatrix "
                           "cannot transpose 8-bit elements")
        if np.any(c != c[..., :1]):
            raise NotAnMma(f"the accumulator index of {store.buffer.name} changes with k")
        if found not in (None, (lda, ldb, storage)):
            raise NotAnMma("the leading dimensions change with the loops around the nest")
        found = (lda, ldb, storage)
    return _tiles(loops, lane, operand_types[str(x.buffer.dtype)], x, y, store, *found, c_index, a_ix, b_ix)


def _tile_points(loops, threads, a_ix, b_ix):
    """The points of a matched nest's tile loops (all loops but the two innermost), in the
    nest's order: ``(env, A tile, B tile)`` with ``env`` the tile variables' values (the
    inner loops' at 0), and the distinct tile origins (A's and B's flat indices at the
    point, with the ``threads`` variables also 0) in the lists returned with them."""
    tile_loops = loops[:-2]
    zero = {f.var: IntImm(0, f.var.dtype) for f in loops[-2:]}
    origins = {v: IntImm(0, v.dtype) for v in threads}
    a_tiles, b_tiles, a_keys, b_keys, points = [], [], {}, {}, []
    for point in itertools.product(*[range(int(f.stop.value)) for f in tile_loops]):
        env = dict(zero)
        env.update({f.var: IntImm(p, f.var.dtype) for f, p in zip(tile_loops, point)})
        at = {**env, **origins}
        a0, b0 = simplify(E.substitute(a_ix, at)), simplify(E.substitute(b_ix, at))
        ka, kb = E.structural_key(a0), E.structural_key(b0)
        if ka not in a_keys:
            a_keys[ka] = len(a_tiles)
            a_tiles.append(a0)
        if kb not in b_keys:
            b_keys[kb] = len(b_tiles)
            b_tiles.append(b0)
        points.append((env, a_keys[ka], b_keys[kb]))
    return points, a_tiles, b_tiles


def _tiles(loops, lane, dtype, x, y, store, lda, ldb, storage, c_index, a_ix, b_ix) -> MmaMatch:
    """The tile origins and the MMAs of a matched nest, in the nest's order."""
    v_var = loops[-2].var
    points, a_tiles, b_tiles = _tile_points(loops, (lane,), a_ix, b_ix)
    mmas = [(ai, bi, [simplify(E.substitute(c_index, {**env, v_var: IntImm(v, v_var.dtype)})) for v in range(4)])
            for env, ai, bi in points]
    return MmaMatch(loops[0], lane, dtype, x.buffer, y.buffer, store.buffer,
                    lda, ldb, storage, a_tiles, b_tiles, mmas)


# ------------------------------------------------------------------------------------
# the transform
# ------------------------------------------------------------------------------------
def tensorize(nest, loop, intrinsic: str = "mma_m16n8k16") -> None:
    """Check that ``loop`` is a warp MMA written lane by lane (see the module docstring) and
    record it in ``nest.tensorized``; the CUDA build then prints it with tensor cores or
    refuses. Raises ``ScheduleError`` naming what does not match; the nest is unchanged."""
    if intrinsic not in INTRINSICS:
        raise ScheduleError(f"tensorize: unknown intrinsic {intrinsic!r}; expected one of {sorted(INTRINSICS)}")
    around = {id(g.stmt.var) for g in nest.get_enclosing_loops(loop)[:-1]}
    inside = {id(g.var) for g in iter_stmts(loop.stmt.body) if isinstance(g, For)}
    other = next((v for v in nest._tensorized if id(v) in around | inside), None)
    if other is not None:
        # one MMA holds the other: the CUDA build prints the outer one (seed 74, case 1072)
        raise ScheduleError(f"tensorize({loop.name}, {intrinsic!r}): loop {other.name} "
                            f"{'around' if id(other) in around else 'inside'} it is already declared a warp MMA")
    reason = why_not_an_mma(nest, loop, intrinsic)
    if reason is not None:
        raise ScheduleError(f"tensorize({loop.name}, {intrinsic!r}): {reason}")
    nest._tensorized[loop.stmt.var] = intrinsic


def why_not_an_mma(nest, loop, intrinsic: str) -> str | None:
    """Why ``loop`` is not a warp MMA of ``intrinsic`` written lane by lane (None: it is).

    >>> from te import Buffer, Reduce, Sum, cast, float32
    >>> from loopnest import LoopNest
    >>> A, B = Buffer("A", (32, 32), "float16"), Buffer("B", (32, 32), "float16")
    >>> C = Reduce("C", (32, 32), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (32,))
    >>> nest = LoopNest([C]); nest.gpu_matmul(BM=32, BN=32, BK=32, WM=16, WN=16)
    >>> why_not_an_mma(nest, nest.loop("kk"), "mma_m16n8k16") is None
    True
    >>> why_not_an_mma(nest, nest.loop("ko"), "mma_m16n8k16")[:45]
    'the loop must be inside a loop bound to threa'
    """
    if intrinsic in CHECKS:
        return CHECKS[intrinsic](nest, loop)
    lane = None
    for outer in reversed(nest.get_enclosing_loops(loop)):
        f = outer.stmt
        if f.kind == ForKind.GPU_THREAD and f.axis == 0:
            if isinstance(f.start, IntImm) and f.start.value == 0 and isinstance(f.stop, IntImm) and f.stop.value == 32:
                lane = f.var
            break
    if lane is None:
        return ("the loop must be inside a loop bound to threadIdx.x with 32 iterations (the lanes of a warp): "
                "bind the lane loop with set_gpu_thread_index(lane, 0) first")
    try:
        match_mma(loop.stmt, lane, lambda buf, indices: flat_index(buf, indices), intrinsic=intrinsic)
    except NotAnMma as exc:
        return str(exc)
    return None


def check_tensorized(nest, op: str) -> None:
    """After transform ``op``: every loop nest declared by ``tensorize`` is still a warp MMA
    (a transform of its loops would leave one the CUDA build refuses), else ScheduleError.
    ``LoopNest``'s transforms call it; a refused one leaves the nest unchanged.

    >>> from te import Buffer, Reduce, Sum, cast, float32
    >>> from loopnest import LoopNest
    >>> A, B = Buffer("A", (32, 32), "float16"), Buffer("B", (32, 32), "float16")
    >>> C = Reduce("C", (32, 32), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (32,))
    >>> nest = LoopNest([C]); nest.gpu_matmul(BM=32, BN=32, BK=32, WM=16, WN=16)
    >>> from loopnest import ScheduleError
    >>> try:
    ...     nest.unroll(nest.loop("kk"))
    ... except ScheduleError as e:
    ...     print(str(e)[:72])
    unroll: loop kk was declared a warp MMA by tensorize(kk, 'mma_m16n8k16')
    """
    for var, intrinsic in nest._tensorized.items():
        stmt = next((s for s in iter_stmts(nest.root) if isinstance(s, For) and s.var is var), None)
        reason = "the loop is gone" if stmt is None else why_not_an_mma(nest, Loop(nest, var), intrinsic)
        if reason is not None:
            raise ScheduleError(f"{op}: loop {var.name} was declared a warp MMA by tensorize({var.name}, "
                                f"{intrinsic!r}) and would no longer be one: {reason}; transform its loops before "
                                "tensorize (gpu_matmul declares its tree's MMA nests)")
