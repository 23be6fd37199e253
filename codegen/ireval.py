"""IREval: the reference interpreter, the executable specification of the IR.

Every other backend is checked against IREval, so it implements the semantics of
``docs/semantics.md`` exactly and checks what compiled code cannot afford to check:

* integers wrap around at their width (int8..int64, uint8..uint64); ``Div``/``Mod`` truncate
  toward zero (C), ``FloorDiv``/``FloorMod`` round toward minus infinity; an integer division
  or remainder by zero is 0; ``INT_MIN / -1`` wraps to INT_MIN (``INT_MIN % -1`` is 0);
* float32/float64 arithmetic is IEEE in the dtype's precision (numpy scalar/array ops);
  float16, bfloat16, tf32 and float8 values are computed in float32 and rounded back to their
  format after every operation (and after every intrinsic call) with ``te.lowprec.convert``
  (round to nearest even; float8 saturates to finite as the Tile IR rules say);
* ``Cast`` follows C: float -> int truncates toward zero, saturating out of range, NaN -> 0
  (``te.lowprec.float_to_int``); int -> int wraps; int -> float rounds to nearest (once); any
  -> bool is ``value != 0``; float -> float rounds once with ``te.lowprec.convert``;
* ``Min``/``Max`` on floats are IEEE 754-2019 ``minimum``/``maximum``: NaN propagates and
  ``-0.0 < +0.0``;
* ``Select`` evaluates both sides, ``IfThenElse`` only the taken side (per lane for vectors),
  scalar ``And``/``Or`` short-circuit (vector ones evaluate both operands, as the spec allows);
* intrinsics use numpy in the dtype's precision (``sigmoid = 1/(1+exp(-x))``,
  ``rsqrt = 1/sqrt(x)``, ``round`` = half to even, integer ``abs`` wraps at INT_MIN); ``erf``,
  ``erfc`` and ``lgamma`` are ``math``'s in float64 (numpy has none of them; scipy is not a core
  dependency) rounded to the dtype, ``lgamma`` giving +inf at its poles as C does;
* integer bit operations and ``bitcast`` are ``codegen.ireval_bits``: a shift amount is taken
  modulo the width, ``>>`` is arithmetic on signed types;
* a buffer of vector elements (dtype ``float32x4``) is an array with a trailing lanes axis;
  ``A[i]`` reads a whole vector, ``A[ramp(i, 1, k)]`` reads ``k`` of them (``4 * k`` lanes);
* casts and loads keep NaN payloads bit-exactly as the LLVM backend does: loading bfloat16 /
  float8 reads a NaN's sign and payload (ml_dtypes would canonicalise it), a store writes
  them back unchanged, and a float -> float conversion returns a quiet NaN;
* every load and store is bounds checked against its buffer (flat element offsets):
  ``IndexError`` names the buffer, the offset and the access, never a numpy negative-index
  wrap-around; reading a buffer outside its Allocate/Free raises ``RuntimeError``;
* loops of every kind (parallel, vectorized, unrolled, gpu_block, gpu_thread) run as serial
  loops; ``check_races=True`` also records, per element, the iterations of the parallel and
  GPU loops around each access, and raises :class:`DataRaceError` where two iterations of
  one run of such a loop touch an element, one of them writing (what a serial run hides,
  and the compiled code races on);
* ``Allocate`` gives a zeroed buffer (``poison=True``: NaN / 0xCD bytes, to catch reads of
  memory nobody wrote), ``Free`` releases it.

>>> import numpy as np
>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> from codegen import build
>>> A = Buffer("A", (4,), "int32")
>>> B = Compute("B", (4,), lambda i: A[i] / 2)          # C division
>>> k = build(LoopNest([B]), [A, B], target="ireval")
>>> b = np.empty(4, np.int32); k(np.array([-5, -4, 5, 7], np.int32), b); b.tolist()
[-2, -2, 2, 3]

How it runs: the prepared statement tree is compiled once into Python closures over a
frame (a list of slots for variables and buffers). Each closure accepts numpy scalars or
numpy arrays, so the same code runs one iteration at a time (the exact, serial path) or all
the iterations of a loop nest at once (a *batch*). A loop nest is batched only when the
batch provably has the serial result: ``codegen.ireval_batch`` plans the batches and its
docstring says when one is taken. Inside a batch, ``IfThenElse``, scalar ``And``/``Or`` and
``Cond`` evaluate each side on the iterations that take it only (the frame is restricted to
those iterations), so guarded loads never touch memory the serial program would not touch.

``batch=False`` disables batching (every loop serial), which the tests use to check the
batched path against the serial one bit for bit. Arguments that share memory disable
batching for that call. ``evaluate(expr, bindings, buffers)`` evaluates a single expression
with these semantics (handy for checking rewrites such as the simplifier's).
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from loopnest.kinds import ForKind
from loopnest.printer import stmt_to_str
from loopnest.queries import stmt_free_vars, stmt_stored_buffers
from loopnest.stmt import Allocate, Block, Cond, For, Free, LetStmt, Stmt, Store, iter_stmts, stmt_depth
from te import expr as E
from te.bitops import BIT_CALLS
from te.dtypes import Dtype
from te.functor import Functor
from te.lanes import lane_of
from te.lowprec import convert as _lp_convert, float_to_int as _lp_float_to_int
from te.queries import expr_depth, free_vars
from te.recursion import SHALLOW_DEPTH, recursion_guard, run_deep

from .ireval_batch import plan_batch
from .ireval_bits import bit_fn, bitcast_fn
from .ireval_common import _ALLOW, Fn, _check_access, _flat_idx, _restrict
from .kernel import BuildError, Kernel, Param, sanitize_name

__all__ = ["IREvalKernel", "build_ireval", "evaluate", "OPTIONS", "DataRaceError"]

#: options understood by ``build_ireval`` (``fast_math`` is accepted and ignored: IREval is exact)
OPTIONS = ("poison", "batch", "chunk", "name", "fast_math", "check_races")

_CHUNK = 1 << 16          # iterations per batch chunk (bounds the temporary arrays)


# ------------------------------------------------------------------------------------
# dtypes
# ------------------------------------------------------------------------------------
def _internal_np(dt: Dtype) -> np.dtype:
    """The numpy dtype values of ``dt`` are computed in (float32 for the low-precision floats)."""
    return np.dtype(np.float32) if dt.is_lowp_float else dt.numpy


def _lp_name(dt: Dtype) -> str:
    """The te.lowprec format name of a float dtype."""
    if dt.kind == "float":
        return f"float{dt.bits}"
    if dt.kind == "bfloat":
        return "bfloat16"
    return dt.kind


def _scalar(x):
    """0-d arrays become numpy scalars (closures return scalars for unbatched values)."""
    return x[()] if type(x) is np.ndarray and x.ndim == 0 else x


def _rounder(dt: Dtype) -> Callable[[Any], Any] | None:
    """Round a float32 value (scalar or array) to ``dt``'s format; None when nothing to do."""
    if not dt.is_lowp_float:
        return None
    fmt = _lp_name(dt)

    def rnd(x):
        return _scalar(_widen_storage(_lp_convert(np.asarray(x, np.float32), "float32", fmt), fmt))
    return rnd


#: NaN-carrying storage formats whose numpy conversions (ml_dtypes) drop NaN payloads:
#: format -> (exponent bits, mantissa bits, unsigned storage dtype)
_NAN_FORMATS = {"bfloat16": (8, 7, np.uint16), "float8_e5m2": (5, 2, np.uint8),
                "float8_e4m3": (4, 3, np.uint8)}


def _widen_storage(v, fmt: str):
    """Storage values of float format ``fmt`` -> their float32 register values, bit-exact:
    a NaN keeps its sign and payload (and stays signalling if it was), as the LLVM
    backend's integer decode does (ml_dtypes' own conversion returns a canonical NaN).
    The e4m3 patterns 0x7F/0xFF read as NaN with payload 0b111."""
    a = np.asarray(v)
    r = a.astype(np.float32)
    layout = _NAN_FORMATS.get(fmt)
    if layout is None:
        return r
    nan = np.isnan(r)
    if nan.any():
        e, m, ut = layout
        src = a.view(ut).astype(np.uint32)
        bits = ((src >> (e + m)) << 31) | 0x7F800000 | ((src & ((1 << m) - 1)) << (23 - m))
        r = np.where(nan, bits.astype(np.uint32).view(np.float32), r)
    return r


def _nan_storage_bits(v: np.ndarray, fmt: str) -> np.ndarray:
    """Storage bits of the NaN register values ``v`` (float32) of ``fmt`` (bfloat16 / e5m2):
    sign and leading payload kept, not quietened (a stored value is already of the format)."""
    e, m, ut = _NAN_FORMATS[fmt]
    b = np.asarray(v, np.float32).view(np.uint32)
    man = (b & 0x7FFFFF) >> (23 - m)
    man = np.where(man == 0, 1 << (m - 1), man)
    return (((b >> 31) << (e + m)) | (((1 << e) - 1) << m) | man).astype(ut)


def _quiet(x):
    """``x`` (float32) with its NaNs quietened (a float -> float conversion quiets, as IEEE says)."""
    a = np.asarray(x, np.float32)
    nan = np.isnan(a)
    if nan.any():
        a = np.where(nan, (a.view(np.uint32) | np.uint32(0x400000)).view(np.float32), a)
    return _scalar(a)


def _const_value(dt: Dtype, value) -> Any:
    """A constant as the numpy scalar the interpreter computes with."""
    if dt.is_bool:
        return np.bool_(bool(value))
    if dt.is_integer:
        return dt.numpy.type(int(value))
    if dt.is_lowp_float:
        fmt = _lp_name(dt)
        return np.float32(_scalar(_widen_storage(_lp_convert(np.asarray(float(value)), "float64", fmt), fmt)))
    return dt.numpy.type(float(value))


def _wrap_int(v: int, dt: Dtype):
    bits = dt.bits
    v &= (1 << bits) - 1
    if dt.is_int and v >= 1 << (bits - 1):
        v -= 1 << bits
    return dt.numpy.type(v)


def _int_to_f64_round_odd(v: int) -> float:
    """``v`` as float64 rounded to odd: a later rounding to a narrower format is then correct."""
    m = -v if v < 0 else v
    if m < (1 << 53):
        return float(v)
    shift = m.bit_length() - 53
    kept = m >> shift
    if m & ((1 << shift) - 1):
        kept |= 1
    r = math.ldexp(float(kept), shift)
    return -r if v < 0 else r


def _cast_fn(src: Dtype, dst: Dtype) -> Callable[[Any], Any]:
    """Element conversion between internal values of ``src`` and ``dst`` (C semantics)."""
    src, dst = src.element, dst.element
    if src == dst:
        return lambda x: x
    if dst.is_bool:
        return lambda x: x != 0
    dnp = _internal_np(dst)
    if src.is_bool or (src.is_integer and dst.is_integer):
        return lambda x: x.astype(dnp)          # numpy int -> int casts are modular
    if src.is_integer:                           # int -> float: round once to nearest
        if not dst.is_lowp_float:
            return lambda x: x.astype(dnp)       # numpy converts int64 -> float32 directly
        fmt = _lp_name(dst)
        if src.bits < 64:
            return lambda x: _scalar(_lp_convert(np.asarray(x, np.float64), "float64", fmt)
                                     .astype(np.float32))       # integers: no NaN to keep
        odd = np.vectorize(lambda v: _int_to_f64_round_odd(int(v)), otypes=[np.float64])
        return lambda x: _scalar(_lp_convert(np.asarray(odd(x), np.float64), "float64", fmt)
                                 .astype(np.float32))
    if dst.is_integer:                           # float -> int: truncate, saturate, NaN -> 0
        info = np.iinfo(dnp)
        lo, hi, t = int(info.min), int(info.max), dnp.type

        def f2i(x):
            if type(x) is np.ndarray:
                return _lp_float_to_int(x, dnp)
            v = float(x)
            if v != v:
                return t(0)
            if v == math.inf:
                return t(hi)
            if v == -math.inf:
                return t(lo)
            return t(min(max(math.trunc(v), lo), hi))
        return f2i
    # float -> float
    snp = _internal_np(src)
    if not dst.is_lowp_float:
        if src.is_lowp_float and dnp == np.float32:   # the register already holds the value
            return _quiet
        return lambda x: x.astype(dnp)           # widening is exact; float64 -> float32 rounds once
    sfmt = "float64" if snp == np.float64 else "float32"
    dfmt = _lp_name(dst)
    return lambda x: _scalar(_widen_storage(_lp_convert(np.asarray(x, snp), sfmt, dfmt), dfmt))


# ------------------------------------------------------------------------------------
# the compiler
# ------------------------------------------------------------------------------------
_CMP = {E.EQ: operator.eq, E.NE: operator.ne, E.LT: operator.lt, E.LE: operator.le,
        E.GT: operator.gt, E.GE: operator.ge}
_ARITH = {E.Add: operator.add, E.Sub: operator.sub, E.Mul: operator.mul}
_UNARY_F = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
            "tanh": np.tanh, "floor": np.floor, "ceil": np.ceil, "round": np.rint, "sin": np.sin,
            "cos": np.cos, "abs": np.abs, "isnan": np.isnan, "asin": np.arcsin, "acos": np.arccos,
            "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tan": np.tan, "log10": np.log10,
            "log1p": np.log1p, "expm1": np.expm1, "trunc": np.trunc}
_BINARY_F = {"pow": np.power, "atan2": np.arctan2, "fmod": np.fmod, "copysign": np.copysign}


def _c_lgamma(x: float) -> float:
    """C's ``lgamma``: +inf at the poles (``math.lgamma`` raises there)."""
    try:
        return math.lgamma(x)
    except ValueError:
        return math.inf


#: functions numpy lacks, computed with ``math`` in float64 and rounded to the dtype
_MATH_F64 = {"erf": np.frompyfunc(math.erf, 1, 1), "erfc": np.frompyfunc(math.erfc, 1, 1),
             "lgamma": np.frompyfunc(_c_lgamma, 1, 1)}


class _Compiler(Functor):
    """Compiles IR into closures over a frame: ``expr(e)`` / ``stmt(s)`` (the functor's
    ``visit``) return the closure of a node, built by its ``visit_<Class>`` method once per
    node (``memoize``: a node shared by several parents is compiled once). Variables get
    frame slots by identity, buffers by name.

    >>> import numpy as np
    >>> from te import Var, int32
    >>> from loopnest.stmt import Stmt
    >>> c = _Compiler(batch=False, poison=False, chunk=1 << 16)
    >>> i = Var("i", int32)
    >>> s = c.bind_var(i)
    >>> twice = i * 2
    >>> c.expr(twice) is c.expr(twice)
    True
    >>> fr = [False] * c.nslots; fr[s] = np.int32(5); int(c.expr(twice + 1)(fr))
    11
    >>> class Nop(Stmt):
    ...     __slots__ = ()
    >>> c.stmt(Nop())
    Traceback (most recent call last):
    ...
    codegen.kernel.BuildError: IREval cannot run Nop statements
    """

    memoize = True      # closures address frame slots, which are per compiler, not per scope

    def __init__(self, batch: bool, poison: bool, chunk: int, check_races: bool = False):
        self.batch = batch
        self.poison = poison
        self.chunk = max(1, int(chunk))
        self.nslots = 1                      # slot 0: _ALLOW
        self.var_slots: dict[int, int] = {}
        self.buf_slots: dict[str, int] = {}
        self.buffers: dict[str, Any] = {}
        self._keep: list = []                # keeps the variables of var_slots alive (ids stay unique)
        self.race_slot = None                # check_races: the slot of the call's _RaceTracker
        if check_races:
            self.race_slot = self.nslots
            self.nslots += 1

    # -- slots ------------------------------------------------------------------------
    def bind_var(self, v: E.Var) -> int:
        s = self.var_slots.get(id(v))
        if s is None:
            s = self.var_slots[id(v)] = self.nslots
            self.nslots += 1
            self._keep.append(v)
        return s

    def buf_slot(self, buf) -> int:
        old = self.buffers.get(buf.name)
        if old is not None and old is not buf and old.dtype != buf.dtype:
            raise BuildError(f"two buffers named {buf.name} with dtypes {old.dtype} and {buf.dtype}")
        s = self.buf_slots.get(buf.name)
        if s is None:
            s = self.buf_slots[buf.name] = self.nslots
            self.nslots += 1
            self.buffers[buf.name] = buf
        return s

    def restrict_slots(self, vars_: Sequence[E.Var]) -> list[tuple[int, int]]:
        return [(self.var_slots[id(v)], 0 if v.dtype.lanes == 1 else 1)
                for v in vars_ if id(v) in self.var_slots]

    # -- dispatch -----------------------------------------------------------------------
    expr = stmt = Functor.visit     # two names for the reader: the closure of an expression / a statement

    def generic(self, node, *args) -> Fn:
        """A node class IREval has no ``visit_`` method for: a BuildError."""
        kind = type(node).__name__
        if isinstance(node, Stmt):
            raise BuildError(f"IREval cannot run {kind} statements")
        raise BuildError(f"IREval cannot evaluate {kind} nodes (`{node}`)")

    # -- expressions --------------------------------------------------------------------
    @staticmethod
    def _let(fv: Fn, slot: int, fb: Fn) -> Fn:
        """A let (expression or statement): ``slot`` holds ``fv``'s value while ``fb`` runs,
        then its previous value again; returns what ``fb`` returns."""
        def let(fr):
            old = fr[slot]
            fr[slot] = fv(fr)
            r = fb(fr)
            fr[slot] = old
            return r
        return let

    def visit_Var(self, e: E.Var) -> Fn:
        s = self.var_slots.get(id(e))
        if s is None:
            raise BuildError(f"variable {e.name} is used outside the loop or let that binds it, and is "
                             "not a kernel argument or a dimension of one")
        return operator.itemgetter(s)

    def visit_IntImm(self, e: E.IntImm) -> Fn:
        c = _const_value(e.dtype, e.value)
        return lambda fr: c

    def visit_FloatImm(self, e: E.FloatImm) -> Fn:
        c = _const_value(e.dtype, e.value)
        return lambda fr: c

    def visit_ExtractLane(self, e: E.ExtractLane) -> Fn:
        f, k = self.expr(e.value), e.lane
        return lambda fr: _scalar(f(fr)[..., k])

    def visit_MakeVector(self, e: E.MakeVector) -> Fn:
        fns = [self.expr(x) for x in e.values]
        npdt = _internal_np(e.dtype)

        def make_vector(fr):
            vals = [f(fr) for f in fns]
            if any(type(v) is np.ndarray for v in vals):
                return np.stack(np.broadcast_arrays(*vals), axis=-1).astype(npdt, copy=False)
            return np.array(vals, dtype=npdt)
        return make_vector

    def visit_Cast(self, e: E.Cast) -> Fn:
        f = self.expr(e.value)
        c = _cast_fn(e.value.dtype, e.dtype)
        return lambda fr: c(f(fr))

    def _binop_fn(self, e: E.BinaryOp) -> Callable[[Any, Any], Any]:
        t, dt = type(e), e.a.dtype
        if t in _CMP:
            return _CMP[t]
        if t is E.Min:
            return _ieee_min if dt.is_float else np.minimum
        if t is E.Max:
            return _ieee_max if dt.is_float else np.maximum
        if dt.is_bool:
            raise BuildError(f"arithmetic {t.__name__} on bool operands is not defined (`{e}`)")
        if dt.is_integer:
            if t in _ARITH:
                return _ARITH[t]
            return _int_div_fn(t, dt)
        rnd = _rounder(dt)
        if t in _ARITH or t is E.Div:
            op = _ARITH.get(t, operator.truediv)
            return op if rnd is None else (lambda a, b: rnd(op(a, b)))
        if t is E.FloorDiv:
            if rnd is None:
                return lambda a, b: np.floor(a / b)
            return lambda a, b: np.floor(rnd(a / b))
        if t is E.FloorMod:
            if rnd is None:
                return lambda a, b: a - np.floor(a / b) * b
            return lambda a, b: rnd(a - rnd(np.floor(rnd(a / b)) * b))
        raise BuildError(f"IREval: {t.__name__} is not defined on {dt} (`{e}`)")

    def visit_BinaryOp(self, e: E.BinaryOp) -> Fn:
        if type(e) is E.And or type(e) is E.Or:
            return self._logical(e)
        op = self._binop_fn(e)
        fa, fb = self.expr(e.a), self.expr(e.b)
        if isinstance(e.b, (E.IntImm, E.FloatImm)):
            cb = _const_value(e.b.dtype, e.b.value)
            return lambda fr: op(fa(fr), cb)
        return lambda fr: op(fa(fr), fb(fr))

    visit_Add = visit_Sub = visit_Mul = visit_Div = visit_Mod = visit_FloorDiv = visit_FloorMod = visit_BinaryOp
    visit_Min = visit_Max = visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = visit_BinaryOp
    visit_And = visit_Or = visit_BinaryOp

    def _logical(self, e: E.And) -> Fn:
        fa, fb = self.expr(e.a), self.expr(e.b)
        is_and = type(e) is E.And
        if e.dtype.lanes > 1:           # vectors: both sides evaluated (no per-lane short circuit)
            op = np.logical_and if is_and else np.logical_or
            return lambda fr: op(fa(fr), fb(fr))
        slots = self.restrict_slots(free_vars(e.b))
        guarded = _may_raise(e.b)

        def logical(fr):
            a = fa(fr)
            if type(a) is not np.ndarray:            # scalar: short circuit
                if is_and:
                    return fb(fr) if a else a
                return a if a else fb(fr)
            if not guarded:
                b = fb(fr)
                return (a & b) if is_and else (a | b)
            out = a.copy()
            m = a if is_and else ~a
            if m.all():
                out[...] = fb(fr)
            elif m.any():
                out[m] = fb(_restrict(fr, m, slots))
            return out
        return logical

    def visit_Not(self, e: E.Not) -> Fn:
        f = self.expr(e.a)
        return lambda fr: ~f(fr)

    def visit_Select(self, e: E.Select) -> Fn:
        fc, ft, ff = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
        widen = e.cond.dtype.lanes == 1 and e.dtype.lanes > 1

        def select(fr):
            c, t, f = fc(fr), ft(fr), ff(fr)
            if type(c) is np.ndarray and c.ndim:
                if widen:
                    c = c[..., None]
                return np.where(c, t, f)
            return t if c else f
        return select

    def visit_IfThenElse(self, e: E.IfThenElse) -> Fn:
        if e.cond.dtype.lanes > 1:
            return self._ite_lanes(e)
        fc, ft, ff = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
        npdt = _internal_np(e.dtype)
        tail = (e.dtype.lanes,) if e.dtype.lanes > 1 else ()
        if not (_may_raise(e.t) or _may_raise(e.f)):
            widen = bool(tail)

            def ite_pure(fr):
                c = fc(fr)
                if type(c) is np.ndarray and c.ndim:
                    return np.where(c[..., None] if widen else c, ft(fr), ff(fr))
                return ft(fr) if c else ff(fr)
            return ite_pure
        st = self.restrict_slots(free_vars(e.t))
        sf = self.restrict_slots(free_vars(e.f))

        def ite(fr):
            c = fc(fr)
            if type(c) is not np.ndarray or not c.ndim:
                return ft(fr) if c else ff(fr)
            if c.all():
                return np.broadcast_to(ft(fr), c.shape + tail).copy()
            out = np.empty(c.shape + tail, npdt)
            if c.any():
                out[c] = ft(_restrict(fr, c, st))
                nc = ~c
                out[nc] = ff(_restrict(fr, nc, sf))
            else:
                out[...] = ff(fr)
            return out
        return ite

    def _ite_lanes(self, e: E.IfThenElse) -> Fn:
        vmap: dict = {}
        return self.expr(E.MakeVector([E.IfThenElse(lane_of(e.cond, k, vmap), lane_of(e.t, k, vmap),
                                                    lane_of(e.f, k, vmap)) for k in range(e.dtype.lanes)]))

    def visit_Load(self, e: E.Load) -> Fn:
        buf = e.buffer
        bs = self.buf_slot(buf)
        fi = self.expr(_flat_idx(e.indices))
        name, where = buf.name, str(e)
        lowp = buf.dtype.is_lowp_float and buf.dtype.kind != "tf32"
        fmt = _lp_name(buf.dtype) if lowp else None
        if buf.dtype.lanes > 1:
            return self._tracked(self._vector_load(bs, fi, name, where, e.indices[-1].dtype.lanes if e.indices else 1,
                                                   fmt), bs, fi, False, name, where)

        def load(fr):
            arr = fr[bs]
            i = fi(fr)
            if type(i) is np.ndarray:
                _check_access(arr, i, "load from", name, where)
                v = arr[i]
                return _widen_storage(v, fmt) if lowp else v
            if arr is None or not 0 <= i < arr.shape[0]:
                _check_access(arr, i, "load from", name, where)
            return _scalar(_widen_storage(arr[i], fmt)) if lowp else arr[i]
        return self._tracked(load, bs, fi, False, name, where)

    @staticmethod
    def _vector_load(bs: int, fi: Fn, name: str, where: str, idx_lanes: int, fmt: str | None) -> Fn:
        """A load from a buffer of vector elements (a 2-D ``(n, lanes)`` array in the frame):
        the value has the lanes as its last axis; a vector index of ``k`` lanes reads ``k``
        consecutive-in-register elements, ``k * lanes`` lanes in all."""
        def load(fr):
            arr = fr[bs]
            i = fi(fr)
            if type(i) is np.ndarray:
                _check_access(arr, i, "load from", name, where)
                v = arr[i]
                if idx_lanes > 1:
                    v = v.reshape(i.shape[:-1] + (-1,))
            else:
                if arr is None or not 0 <= i < arr.shape[0]:
                    _check_access(arr, i, "load from", name, where)
                v = arr[i].copy()
            return _widen_storage(v, fmt) if fmt is not None else v
        return load

    def visit_Let(self, e: E.Let) -> Fn:
        fv = self.expr(e.value)
        slot = self.bind_var(e.var)
        return self._let(fv, slot, self.expr(e.body))

    def visit_IndexCheck(self, e: E.IndexCheck) -> Fn:
        fi, fn = self.expr(e.index), self.expr(e.extent)
        buf, dim, where = e.buffer, e.dim, str(e.index)

        def check(fr):
            i, n = fi(fr), fn(fr)
            if type(i) is np.ndarray:
                if i.size and (i.min() < 0 or i.max() >= n):
                    bad = i[(i < 0) | (i >= n)].flat[0]
                    raise _dim_oob(buf, dim, bad, n, where)
            elif not 0 <= i < n:
                raise _dim_oob(buf, dim, i, n, where)
            return i
        return check

    def visit_Ramp(self, e: E.Ramp) -> Fn:
        fb, fs = self.expr(e.base), self.expr(e.stride)
        ar = np.arange(e.lanes, dtype=_internal_np(e.dtype))

        def ramp(fr):
            b, s = fb(fr), fs(fr)
            if type(b) is np.ndarray or type(s) is np.ndarray:
                return np.asarray(b)[..., None] + np.asarray(s)[..., None] * ar
            return b + s * ar
        return ramp

    def visit_Broadcast(self, e: E.Broadcast) -> Fn:
        fv, lanes = self.expr(e.value), e.lanes
        npdt = _internal_np(e.dtype)

        def broadcast(fr):
            v = fv(fr)
            if type(v) is np.ndarray:
                return np.repeat(v[..., None], lanes, axis=-1)
            return np.full(lanes, v, dtype=npdt)
        return broadcast

    def visit_Call(self, e: E.Call) -> Fn:
        args = [self.expr(a) for a in e.args]
        adt = e.args[0].dtype
        npdt = _internal_np(adt)
        rnd = _rounder(adt) if e.name != "isnan" else None
        name = e.name
        if name == "bitcast":
            f, c = args[0], bitcast_fn(adt, e.dtype)
            return lambda fr: c(f(fr))
        if name in BIT_CALLS:
            bit = bit_fn(name, adt)
            if len(args) == 1:
                f = args[0]
                return lambda fr: bit(f(fr))
            fa, fb = args
            return lambda fr: bit(fa(fr), fb(fr))
        if name in _UNARY_F:
            fn = _UNARY_F[name]
        elif name == "rsqrt":
            one = npdt.type(1)
            fn = lambda x: one / np.sqrt(x)                       # noqa: E731
        elif name == "sigmoid":
            one = npdt.type(1)
            fn = lambda x: one / (one + np.exp(-x))               # noqa: E731
        elif name in _MATH_F64:
            ufunc = _MATH_F64[name]

            def fn(x):
                return np.asarray(ufunc(np.asarray(x, np.float64)), np.float64).astype(npdt)[()]
        elif name in _BINARY_F:
            fa, fb = args
            op = _BINARY_F[name]
            if rnd is None:
                return lambda fr: op(fa(fr), fb(fr))
            return lambda fr: rnd(op(fa(fr), fb(fr)))
        else:
            raise BuildError(f"IREval does not know the intrinsic {name!r} (`{e}`)")
        if name == "abs" and not adt.is_float:
            rnd = None
        f = args[0]
        if rnd is None:
            return lambda fr: fn(f(fr))
        return lambda fr: rnd(fn(f(fr)))

    # -- statements ---------------------------------------------------------------------
    def visit_Block(self, s: Block) -> Fn:
        fs = tuple(self.stmt(x) for x in s.stmts)
        if len(fs) == 1:
            return fs[0]
        if not fs:
            return lambda fr: None

        def block(fr):
            for f in fs:
                f(fr)
        return block

    def visit_Store(self, s: Store) -> Fn:
        buf = s.buffer
        bs = self.buf_slot(buf)
        fi = self.expr(_flat_idx(s.indices))
        fv = self.expr(s.value)
        name = buf.name
        where = f"{name}[{', '.join(str(i) for i in s.indices)}] = ..."
        nan_fmt = _lp_name(buf.dtype) if buf.dtype.kind in ("bfloat", "float8_e5m2") else None
        lanes = buf.dtype.lanes
        idx_lanes = s.indices[-1].dtype.lanes if s.indices else 1
        lane_ar = np.arange(lanes)

        def store(fr):
            arr = fr[bs]
            i = fi(fr)
            v = fv(fr)
            if type(i) is np.ndarray or arr is None or not 0 <= i < arr.shape[0]:
                _check_access(arr, i, "store to", name, where)
            if lanes > 1 and idx_lanes > 1:     # k vector elements: (..., k * lanes) -> (..., k, lanes)
                v = np.asarray(v)
                v = v.reshape(v.shape[:-1] + (idx_lanes, lanes))
            arr[i] = v
            if nan_fmt is not None:      # ml_dtypes stores a canonical NaN: keep the payload
                nan = np.isnan(v)
                if np.any(nan):
                    vb, nb = np.broadcast_arrays(np.asarray(v, np.float32), nan)
                    flat = np.asarray(i)[..., None] * lanes + lane_ar if lanes > 1 else i
                    ib = np.broadcast_to(flat, vb.shape)
                    arr.reshape(-1).view(_NAN_FORMATS[nan_fmt][2])[ib[nb]] = _nan_storage_bits(vb[nb], nan_fmt)
        return self._tracked(store, bs, fi, True, name, where)

    def visit_Cond(self, s: Cond) -> Fn:
        fc = self.expr(s.cond)
        ft = self.stmt(s.then)
        fo = self.stmt(s.otherwise) if s.otherwise is not None and s.otherwise.stmts else None
        st = self.restrict_slots(stmt_free_vars(s.then))
        so = self.restrict_slots(stmt_free_vars(s.otherwise)) if fo is not None else []

        def cond(fr):
            c = fc(fr)
            if type(c) is np.ndarray and c.ndim:     # a batch: each side on its iterations
                if c.all():
                    ft(fr)
                    return
                if c.any():
                    ft(_restrict(fr, c, st))
                if fo is not None:
                    nc = ~c
                    if nc.any():
                        fo(_restrict(fr, nc, so))
            elif c:
                ft(fr)
            elif fo is not None:
                fo(fr)
        return cond

    def visit_LetStmt(self, s: LetStmt) -> Fn:
        fv = self.expr(s.value)
        slot = self.bind_var(s.var)
        return self._let(fv, slot, self.stmt(s.body))

    def visit_Allocate(self, s: Allocate) -> Fn:
        buf = s.buffer
        bs = self.buf_slot(buf)
        npdt = buf.dtype.numpy
        name = buf.name
        poison = self.poison
        if buf.layout is not None:
            cos = int(buf.layout.cosize)
            size_fn = lambda fr: cos                                   # noqa: E731
        else:
            dims = [self.expr(d) for d in buf.dims]

            def size_fn(fr):
                n = 1
                for k, d in enumerate(dims):
                    v = int(d(fr))
                    if v < 0:
                        raise ValueError(f"IREval: allocation of {name}: dimension {k} is negative ({v})")
                    n *= v
                return n

        lanes = buf.dtype.lanes

        def allocate(fr):
            n = size_fn(fr)
            if lanes > 1:
                n = (n, lanes)
            if not poison:
                fr[bs] = np.zeros(n, npdt)
            elif buf.dtype.is_float:
                fr[bs] = np.full(n, np.nan, npdt)
            elif buf.dtype.is_bool:
                fr[bs] = np.ones(n, npdt)
            else:
                fr[bs] = np.full(np.prod(n) * npdt.itemsize, 0xCD, np.uint8).view(npdt).reshape(n)
        return allocate

    def visit_Free(self, s: Free) -> Fn:
        bs = self.buf_slot(s.buffer)

        def free(fr):
            fr[bs] = None
        return free

    def visit_Prefetch(self, s) -> Fn:
        """A cache hint changes nothing; its indices must lie inside the buffer (``Prefetch``)."""
        bs = self.buf_slot(s.buffer)
        fi = self.expr(_flat_idx(s.indices))
        name, where = s.buffer.name, str(s).rstrip(";")

        def prefetch(fr):
            arr = fr[bs]
            i = fi(fr)
            if type(i) is np.ndarray or arr is None or not 0 <= i < arr.shape[0]:
                _check_access(arr, i, "prefetch of", name, where)
        return prefetch

    def visit_ExternCall(self, s) -> Fn:
        """Call the external function's ``py_fn`` with numpy views of the whole buffers (the
        inputs, then the outputs), shaped as the buffers; it writes the outputs in place."""
        fn = s.func.py_fn
        if fn is None:
            raise BuildError(f"IREval cannot run the external call {s.func.name}: it was given only a C function; "
                             "pass py_fn= to Extern for IREval")
        bufs = [(self.buf_slot(b), [self.expr(d) for d in b.dims], b) for b in s.buffers]
        n_in = len(s.inputs)
        name = s.func.name

        def extern_call(fr):
            arrays = []
            for slot, dims, b in bufs:
                flat = fr[slot]
                if flat is None:
                    raise BuildError(f"IREval: the external call {name} gets {b.name}, which has no storage here")
                a = flat.reshape(tuple(int(d(fr)) for d in dims))
                if len(arrays) < n_in:    # the inputs as read-only views
                    a = a.view()
                    a.flags.writeable = False
                arrays.append(a)
            fn(*arrays)
        return extern_call

    def visit_For(self, s: For) -> Fn:
        slot = self.bind_var(s.var)
        fa, fb = self.expr(s.start), self.expr(s.stop)
        body = self.stmt(s.body)
        vt = s.var.dtype.numpy.type

        def serial_range(fr, a, b):
            for v in range(a, b):
                fr[slot] = vt(v)
                body(fr)

        def serial(fr):
            serial_range(fr, int(fa(fr)), int(fb(fr)))

        if self.race_slot is not None and s.kind in ForKind.CONCURRENT:
            return self._tracked_loop(s.var.name, slot, fa, fb, vt, body)
        plan = plan_batch(self, s, serial_range) if self.batch else None
        return plan or serial

    def _tracked_loop(self, name: str, slot: int, fa, fb, vt, body) -> Fn:
        """A concurrent loop under ``check_races``: each iteration runs with its place (this
        run of the loop, the iteration) added to the tracker's context."""
        rs = self.race_slot

        def concurrent(fr):
            tracker = fr[rs]
            outer, run = tracker.context, tracker.start(name)
            try:
                for v in range(int(fa(fr)), int(fb(fr))):
                    tracker.context = outer + ((run, v),)
                    fr[slot] = vt(v)
                    body(fr)
            finally:
                tracker.context = outer
        return concurrent

    def _tracked(self, access: Fn, bs: int, fi: Fn, write: bool, name: str, where: str) -> Fn:
        """``access`` (a load or a store of buffer slot ``bs`` at index ``fi``) reported to the
        race tracker first, under ``check_races``."""
        rs = self.race_slot
        if rs is None:
            return access

        def tracked(fr):
            arr = fr[bs]
            if arr is not None:
                fr[rs].access(arr, fi(fr), write, name, where)
            return access(fr)
        return tracked


def _ieee_max(a, b):
    """IEEE 754-2019 ``maximum``: NaN propagates and ``-0.0 < +0.0`` (numpy's ``maximum``
    returns the second operand of two equal zeros instead)."""
    r = np.maximum(a, b)
    tie = (a == b) & (a == 0)
    if np.any(tie):      # zeros: +0 unless both are -0, which is what adding them gives
        r = np.where(tie, a + b, r) if isinstance(r, np.ndarray) else a + b
    return r


def _ieee_min(a, b):
    """IEEE 754-2019 ``minimum``: NaN propagates and ``-0.0 < +0.0``."""
    r = np.minimum(a, b)
    tie = (a == b) & (a == 0)
    if np.any(tie):      # zeros: -0 unless both are +0
        r = np.where(tie, -(-a - b), r) if isinstance(r, np.ndarray) else -(-a - b)
    return r


def _int_div_fn(t, dt: Dtype) -> Callable[[Any, Any], Any]:
    """Integer Div/Mod (C, truncating) and FloorDiv/FloorMod with the language's rule for the
    edge cases (``loopnest.legalize``): a division or remainder by 0 is 0, ``INT_MIN / -1``
    wraps to INT_MIN and ``INT_MIN % -1`` is 0."""
    is_div = t in (E.Div, E.FloorDiv)

    def scalar(a: int, b: int):
        if b == 0:
            return 0
        if t is E.FloorDiv:
            return a // b
        if t is E.FloorMod:
            return a % b
        q = abs(a) // abs(b)
        if (a < 0) != (b < 0):
            q = -q
        return q if t is E.Div else a - b * q

    arr_op = {E.Div: None, E.Mod: np.fmod, E.FloorDiv: np.floor_divide, E.FloorMod: np.remainder}[t]

    def div(a, b):
        if type(a) is np.ndarray or type(b) is np.ndarray:
            zero = np.asarray(b) == 0
            if dt.kind == "int":      # x / -1 is -x (wrapping at INT_MIN), x % -1 is 0: no overflow trap
                neg1 = np.asarray(b) == -1
                safe = np.where(zero | neg1, 1, b).astype(np.asarray(b).dtype)
            else:
                neg1, safe = None, np.where(zero, 1, b).astype(np.asarray(b).dtype)
            with np.errstate(over="ignore"):
                if arr_op is None:          # truncating division: exact as (a - fmod(a, b)) / b
                    r = (a - np.fmod(a, safe)) // safe
                else:
                    r = arr_op(a, safe)
                if is_div and neg1 is not None and np.any(neg1):
                    r = np.where(neg1, 0 - np.asarray(a), r)
            if np.any(zero) or (neg1 is not None and np.any(neg1)):
                r = np.where(zero, 0, r).astype(np.result_type(a, b))
            return r
        return _wrap_int(scalar(int(a), int(b)), dt)
    return div


def _dim_oob(buf: str, dim: int, i, n, where: str) -> IndexError:
    """The error of a failed ``IndexCheck``."""
    return IndexError(f"IREval: index {int(i)} of dimension {dim} of {buf} is outside [0, {int(n)}) "
                      f"(the data-dependent index `{where}`); keep the data in range, or clamp the index")


def _may_raise(e: E.Expr) -> bool:
    """Could evaluating ``e`` raise (it loads, and a load may be out of bounds, or it checks
    an index)? Such expressions under a guard are evaluated only on the iterations that take
    the guard."""
    found = []

    def f(n):
        if isinstance(n, (E.Load, E.IndexCheck)):
            found.append(1)
    E.walk(e, f)
    return bool(found)


# ------------------------------------------------------------------------------------
# the kernel
# ------------------------------------------------------------------------------------
def _flat_view(a: np.ndarray, buf) -> np.ndarray:
    """A 1-D view of the memory of ``a`` indexed by flat element offsets; for a buffer of
    vector elements a 2-D ``(elements, lanes)`` view (the array's last axis is the lanes)."""
    lanes = buf.dtype.lanes
    if buf.layout is None:
        return a.reshape(-1) if lanes == 1 else a.reshape(-1, lanes)
    n = int(buf.layout.cosize) if a.size else 0
    if lanes == 1:
        return np.lib.stride_tricks.as_strided(a, shape=(n,), strides=(a.itemsize,))
    return np.lib.stride_tricks.as_strided(a, shape=(n, lanes), strides=(a.itemsize * lanes, a.itemsize))


class IREvalKernel(Kernel):
    """A kernel run by the reference interpreter; ``source`` is the prepared nest's text.

    Calls bind and check the arguments (``codegen.kernel.Kernel``), then run the compiled
    closures over flat views of the arrays, writing the outputs in place.

    >>> import numpy as np
    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> from codegen import build
    >>> A = Buffer("A", (3,), "uint8")
    >>> B = Compute("B", (3,), lambda i: A[i] + 200)
    >>> k = build(LoopNest([B]), [A, B], target="ireval")
    >>> b = np.empty(3, np.uint8); k(np.array([1, 55, 56], np.uint8), b); b.tolist()   # wraps at 256
    [201, 255, 0]
    """

    target = "ireval"

    def __init__(self, name: str, params: list[Param], stmt: Stmt, source: str, program: Fn,
                 nslots: int, buf_slots: dict[str, int], size_slots: list, batch: bool, race_slot: int | None = None):
        super().__init__(name, params, stmt, source)
        self._race_slot = race_slot
        self._program = program
        self._nslots = nslots
        self._param_slots = [buf_slots.get(p.name) for p in self._buffer_params]
        written = {b.name for b in stmt_stored_buffers(stmt)}
        self._written = [p.name in written for p in self._buffer_params]
        self._size_slots = size_slots
        self._batch = batch
        self._depth: int | None = None     # of the tree, found on the first call

    def _launch(self, arrays: list, sizes: dict) -> None:
        if self._depth is None:
            self._depth = stmt_depth(self.stmt)
        if self._depth > SHALLOW_DEPTH:     # the closures nest as deeply as the tree
            run_deep(self._run, (arrays, sizes), depth=self._depth)
        else:
            self._run(arrays, sizes)

    def _run(self, arrays: list, sizes: dict) -> None:
        fr: list = [None] * self._nslots
        for s, key, var in self._size_slots:
            v = sizes.get(key)
            if v is None:
                raise TypeError(f"size variable {var.name} of {self.name} is not bound")
            fr[s] = _scalar_arg(var, v)
        for p, a, w in zip(self._buffer_params, arrays, self._written):
            if w and not a.flags.writeable:
                raise ValueError(f"argument {p.name} of {self.name} is written by the kernel but the array "
                                 "is read-only")
        views = []
        for p, a, s in zip(self._buffer_params, arrays, self._param_slots):
            if s is not None:
                fr[s] = _flat_view(a, p.buffer)
                views.append(a)
        allow = self._batch
        if allow and len(views) > 1:
            for k in range(len(views)):
                for j in range(k):
                    if np.may_share_memory(views[k], views[j]):
                        allow = False   # aliasing arguments: only the serial order is safe
        fr[_ALLOW] = allow
        if self._race_slot is not None:
            fr[self._race_slot] = _RaceTracker()
        with np.errstate(all="ignore"):
            self._program(fr)


class DataRaceError(RuntimeError):
    """Two iterations of one run of a parallel or GPU loop touched one element of a buffer,
    one of them writing it (IREval with ``check_races=True``): compiled code runs those
    iterations at once, so the result depends on their timing.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> from codegen import build
    >>> A = Buffer("A", (4,), "int32"); B = Compute("B", (4,), lambda i: A[i] + 1)
    >>> nest = LoopNest([B]); _ = nest.parallelize(nest.get_loops_for(B)[0])
    >>> k = build(nest, [A, B], target="ireval", check_races=True)
    >>> b = np.zeros(4, np.int32); k(np.arange(4, dtype=np.int32), b); b.tolist()   # no element shared
    [1, 2, 3, 4]
    """


class _RaceTracker:
    """One call's record for ``check_races``: ``context`` holds, outermost first, ``(run,
    iteration)`` of the concurrent loops around the current point (a run: one execution of a
    loop); per element of each storage (keyed by the array's id, kept alive for the call),
    the context of its last write and those of its reads since."""

    def __init__(self):
        self.context: tuple = ()
        self.loops: list[str] = []          # run -> the loop's variable name
        self.arrays: dict[int, Any] = {}
        self.writes: dict = {}
        self.reads: dict = {}

    def start(self, name: str) -> int:
        self.loops.append(name)
        return len(self.loops) - 1

    def access(self, arr, index, write: bool, name: str, where: str) -> None:
        key = id(arr)
        self.arrays.setdefault(key, arr)
        here = self.context
        for j in (np.asarray(index).ravel().tolist() if type(index) is np.ndarray else (int(index),)):
            cell = (key, j)
            w = self.writes.get(cell)
            if w is not None:
                self._check(w, here, name, j, where, write)
            if write:
                for r in self.reads.pop(cell, ()):
                    self._check(r, here, name, j, where, True)
                self.writes[cell] = (here, where)
            else:
                rs = self.reads.setdefault(cell, [])
                if len(rs) < 4 and all(r[0] != here for r in rs):
                    rs.append((here, where))

    def _check(self, other, here: tuple, name: str, j: int, where: str, write: bool) -> None:
        ctx, other_where = other
        for a, b in zip(ctx, here):
            if a != b:
                if a[0] == b[0]:       # one run of a loop, two iterations: they run at once
                    loop = self.loops[a[0]]
                    raise DataRaceError(
                        f"data race on {name} (element {j}): `{where}` ({'write' if write else 'read'}) in "
                        f"iteration {b[1]} of the parallel/GPU loop {loop} and `{other_where}` in iteration {a[1]} "
                        f"of the same run touch it, one of them writing; those iterations run at once")
                return


def _scalar_arg(var: E.Var, v) -> Any:
    """The frame value of scalar argument ``var = v``: integers range-checked, floats rounded
    once from the Python float to the dtype (NaN and infinities pass; a finite value past the
    dtype's largest one is refused, as on LLVM)."""
    dt = var.dtype
    if dt.is_float:
        v = float(v)
        if math.isfinite(v) and abs(v) > dt.max_value():
            raise ValueError(f"scalar {var.name} = {v} does not fit its dtype {dt} (largest finite {dt.max_value()})")
        exact = E._round_to(v, dt) if math.isfinite(v) else v
        return dt.numpy.type(np.float64(exact) if dt.bits == 64 else np.float32(exact))   # exact: one rounding
    lo, hi = dt.min_value(), dt.max_value()
    if not lo <= v <= hi:
        raise ValueError(f"size {var.name} = {v} does not fit its dtype {dt}")
    return dt.numpy.type(v)


def build_ireval(nest, params: list[Param], **options) -> IREvalKernel:
    """Compile a prepared nest for the reference interpreter.

    ``nest`` is a prepared ``LoopNest`` (or any object with a ``root`` statement), ``params``
    come from ``codegen.kernel.make_params``. Options: ``poison=True`` fills allocations with
    NaN / 0xCD bytes instead of zeros; ``batch=False`` runs every loop serially (no numpy
    batching); ``chunk`` sets the iterations per batch chunk; ``check_races=True`` raises
    :class:`DataRaceError` where iterations of a parallel or GPU loop share an element (the
    module docstring; no batching); ``name`` the kernel name; ``fast_math`` is accepted and ignored (IREval is
    exact).

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> from codegen.kernel import make_params
    >>> A = Buffer("A", (4,), "float32"); B = Compute("B", (4,), lambda i: A[i] + 1.0)
    >>> nest = LoopNest([B]).prepare_for_codegen()
    >>> k = build_ireval(nest, make_params(nest, [A, B]))
    >>> k.target, k.source.splitlines()[1].strip()
    ('ireval', 'B[i] = A[i] + 1.0f;')
    """
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise TypeError(f"unknown IREval option(s) {sorted(unknown)}; known options are {list(OPTIONS)}")
    root = getattr(nest, "root", None)
    if not isinstance(root, Stmt):
        raise BuildError(f"build_ireval needs a prepared LoopNest (with a root statement), got {nest!r}")
    races = bool(options.get("check_races", False))
    comp = _Compiler(batch=bool(options.get("batch", True)) and not races, poison=bool(options.get("poison", False)),
                     chunk=int(options.get("chunk", _CHUNK)), check_races=races)
    # kernel parameters: buffers by name, size variables by identity (or by name)
    by_id: dict[int, E.Var] = {}
    by_name: dict[str, E.Var] = {}
    for p in params:
        if p.is_buffer:
            comp.buf_slot(p.buffer)
            for d in p.buffer.dims:
                if isinstance(d, E.Var):
                    by_id.setdefault(id(d), d)
                    by_name.setdefault(d.name, d)
        else:
            by_id[id(p.var)] = p.var
            by_name[p.var.name] = p.var
    size_slots = []
    for v in stmt_free_vars(root):
        src = v if id(v) in by_id else by_name.get(v.name)
        if src is None:
            raise BuildError(f"variable {v.name} is used by the nest but is neither a kernel argument nor a "
                             f"dimension of an argument; add it to build's argument list")
        size_slots.append((comp.bind_var(v), id(src), v))
    program = comp.stmt(root)
    outs = getattr(nest, "outputs", None) or []
    name = options.get("name") or sanitize_name("ireval_" + "_".join(t.name for t in outs) if outs else "ireval_kernel")
    return IREvalKernel(name, list(params), root, stmt_to_str(root), program, comp.nslots, comp.buf_slots,
                        size_slots, comp.batch, comp.race_slot)


@recursion_guard(depth=lambda e, *args, **kwargs: expr_depth(e))
def evaluate(e: E.Expr, bindings: Mapping[E.Var, Any] | None = None,
             buffers: Mapping[str, np.ndarray] | None = None) -> Any:
    """Evaluate one expression with IREval's semantics.

    ``bindings`` maps the free variables to values; ``buffers`` maps buffer names to 1-D
    arrays indexed by flat element offsets. The result is a numpy scalar (an array for vector
    expressions) of the expression's numpy dtype.

    >>> from te import Var, int8
    >>> x = Var("x", int8)
    >>> int(evaluate((x + 100) / 3, {x: 100}))     # int8 wraps: 200 -> -56
    -18
    """
    comp = _Compiler(batch=False, poison=False, chunk=_CHUNK)
    fr_init = []
    for v, val in (bindings or {}).items():
        fr_init.append((comp.bind_var(v), _const_value(v.dtype, val) if v.dtype.lanes == 1
                        else np.asarray(val, _internal_np(v.dtype))))
    bufs = []
    for name, arr in (buffers or {}).items():
        bufs.append((name, np.ascontiguousarray(arr).reshape(-1)))
    names = {n for n, _ in bufs}

    lanes_of: dict[str, int] = {}

    def reg(n):
        if isinstance(n, E.Load):
            if n.buffer.name not in names:
                raise ValueError(f"evaluate: buffer {n.buffer.name} is loaded but not given in buffers")
            comp.buf_slot(n.buffer)
            lanes_of[n.buffer.name] = n.buffer.dtype.lanes
    E.walk(e, reg)
    f = comp.expr(e)
    fr: list = [None] * comp.nslots
    fr[_ALLOW] = False
    for s, val in fr_init:
        fr[s] = val
    for name, arr in bufs:
        if name in comp.buf_slots:
            lanes = lanes_of.get(name, 1)
            fr[comp.buf_slots[name]] = arr if lanes == 1 else arr.reshape(-1, lanes)
    with np.errstate(all="ignore"):
        r = f(fr)
    dt = e.dtype
    if dt.is_lowp_float:
        r = np.asarray(r).astype(dt.numpy)
        return _scalar(r)
    return r
