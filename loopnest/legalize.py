"""Semantic lowering passes: where the language's edge cases are decided, once for every target.

Each pass is a function ``(nest, root) -> root`` listed in ``loopnest.passes`` and shown by the
pass dumps (``LOOPNEST_DUMP_PASSES=1``). The rules they implement are those of
``docs/semantics.md``:

* ``widen_indices`` (every target): the flat index of a buffer that can hold 2^31 elements or
  more (a symbolic dimension, or a constant element count of at least 2^31) is computed in
  int64, so an index never wraps at 32 bits on any backend;
* ``guard_int_division`` (compiled targets): integer ``x / 0``, ``x % 0``, ``floordiv(x, 0)``
  and ``floormod(x, 0)`` are 0; ``INT_MIN / -1`` wraps to ``INT_MIN`` and ``INT_MIN % -1`` is 0.
  After the pass every integer division divides by a value that is neither 0 nor (signed) -1,
  which is defined behaviour in C, LLVM and PTX alike;
* ``lower_low_precision`` (compiled targets): arithmetic and intrinsic calls on float16,
  bfloat16, tf32 and float8 become float32 arithmetic between casts: every operand is cast to
  float32, the operation is computed in float32 and its result is cast back, which rounds it
  to the format once (round to nearest even; float8 saturates). The printers then only see
  float32 arithmetic and conversions.
* ``mask_shift_amounts`` (compiled targets): a shift amount is taken modulo the width
  (``x << s`` is ``x << (s & (bits - 1))``), so no machine shift sees an amount that is
  negative or at least the width (poison in LLVM, undefined in C).
* ``unsigned_division`` (LLVM): a signed division or remainder (C or floor) of a provably
  non-negative dividend by a positive constant is done on the unsigned type, where all four
  agree and a power of two is one shift (``int32(uint32(i) / uint32(4))``). The result is the
  same; the dump shows which divisions the printer emits as unsigned.
* ``short_circuit`` (LLVM, CUDA): a scalar ``a && b`` / ``a || b`` whose right side loads what
  the left side did not (so it may read out of bounds when the left side decides) becomes
  ``if_then_else(a, b, false)`` / ``if_then_else(a, true, b)``, which evaluates ``b`` only when
  needed; every other ``&&`` and ``||`` evaluates both sides, which is the same value.
* ``expand_float_min_max`` (CUDA): float ``maximum`` / ``minimum`` (IEEE 754-2019: a NaN
  operand gives NaN, ``-0.0 < +0.0``) become compares and selects, since CUDA C has no such
  operation (``fmaxf`` ignores NaNs); nvcc makes of them the code of the former C helpers.
  LLVM keeps the nodes: ``llvm.maximum`` / ``llvm.minimum`` mean exactly that, and its
  vectorizer turns them into vector instructions and vectorised reductions, which a select
  form would lose.

IREval implements the same rules directly on the unexpanded nodes (it is their definition);
the LLVM and CUDA printers only print the expanded forms. What they still spell out is one
operation of one meaning each, with nothing to decide: a float -> integer ``Cast`` (truncate,
saturate, NaN -> 0) is ``llvm.fptosi.sat`` / ``llvm.fptoui.sat`` on LLVM and CUDA's ``tc_f2i``;
a ``Cast`` to a low-precision format (round to nearest even once, float8 saturating) is LLVM's
integer code in ``codegen.llvm.lowp`` and CUDA's ``tc_rnd_*``. Both printers compute both
sides of the ``&&`` and ``||`` that ``short_circuit`` leaves (CUDA with ``&`` and ``|``).

>>> from te import Buffer, Compute, int32
>>> from loopnest import LoopNest
>>> A = Buffer("A", (4,), int32); B = Buffer("B", (4,), int32)
>>> nest = LoopNest([Compute("Q", (4,), lambda i: A[i] / B[i])]).prepare_for_codegen()
>>> print(guard_int_division(nest, nest.root))
for (int i = 0; i < 4; i++) {
  Q[i] = select(B[i] == 0, 0, select(B[i] == (-1), 0 - A[i], A[i] / select(B[i] == 0 || B[i] == (-1), 1, B[i])));
}
"""
from __future__ import annotations

from te import expr as E
from te.bitops import SHIFTS
from te.dtypes import Dtype, float32, int64
from te.functor import Functor
from te.queries import fold_int, has_load, int_value, loads, provably_nonneg, structural_key

from .stmt import For, Stmt, StmtMutator, Store

__all__ = ["widen_indices", "guard_int_division", "mask_shift_amounts", "lower_low_precision",
           "unsigned_division", "short_circuit", "needs_short_circuit", "expand_float_min_max",
           "may_exceed_int32"]

_INT32_LIMIT = 2 ** 31


# ------------------------------------------------------------------------------------
# index width
# ------------------------------------------------------------------------------------
def may_exceed_int32(buf) -> bool:
    """True when ``buf`` can hold 2^31 elements or more: a symbolic dimension, or constant
    dimensions whose product reaches 2^31.

    >>> from te import Buffer, Var
    >>> may_exceed_int32(Buffer("A", (43000, 50000), "int8")), may_exceed_int32(Buffer("B", (64, 64)))
    (True, False)
    >>> may_exceed_int32(Buffer("C", (Var("N"),)))
    True
    """
    count = 1
    for d in buf.dims:
        if not isinstance(d, E.IntImm):
            return True
        count *= d.value
    return count * buf.dtype.lanes >= _INT32_LIMIT


def _wide(dt: Dtype) -> Dtype:
    return int64.with_lanes(dt.lanes)


class _Widen(Functor):
    """``visit(e)``: ``e`` computed in int64. Arithmetic nodes are rebuilt on widened operands;
    anything else (variables, loads, calls, casts) is cast to int64 at the leaf."""

    def visit(self, e: E.Expr) -> E.Expr:
        if not e.dtype.is_integer or e.dtype.bits == 64:
            return e
        return super().visit(e)

    def visit_IntImm(self, e):
        return E.IntImm(e.value, int64)

    def _binary(self, e):
        return type(e)(self.visit(e.a), self.visit(e.b))

    visit_Add = visit_Sub = visit_Mul = visit_Div = visit_Mod = _binary
    visit_FloorDiv = visit_FloorMod = visit_Min = visit_Max = _binary

    def _choice(self, e):
        return type(e)(e.cond, self.visit(e.t), self.visit(e.f))

    visit_Select = visit_IfThenElse = _choice

    def visit_Ramp(self, e):
        return E.Ramp(self.visit(e.base), self.visit(e.stride), e.lanes)

    def visit_Broadcast(self, e):
        return E.Broadcast(self.visit(e.value), e.lanes)

    def generic(self, e):
        return E.Cast(_wide(e.dtype), e)


def _widen(e: E.Expr) -> E.Expr:
    return _Widen().visit(e)


class _WidenExpr(E.ExprMutator):
    def visit_Load(self, e: E.Load) -> E.Expr:
        e = self.generic(e)
        if len(e.indices) == 1 and may_exceed_int32(e.buffer):
            return e.replace(indices=(_widen(e.indices[0]),))
        return e


class _WidenStmt(StmtMutator):
    def __init__(self):
        self.ex = _WidenExpr()

    def visit_expr(self, e):
        return self.ex.visit(e)

    def visit_Store(self, s: Store):
        idx = tuple(self.ex.visit(i) for i in s.indices)
        if len(idx) == 1 and may_exceed_int32(s.buffer):
            idx = (_widen(idx[0]),)
        return s.replace(indices=idx, value=self.ex.visit(s.value))

    def visit_Prefetch(self, s):
        idx = tuple(self.ex.visit(i) for i in s.indices)
        if len(idx) == 1 and may_exceed_int32(s.buffer):
            idx = (_widen(idx[0]),)
        return s.replace(indices=idx)


def widen_indices(nest, root: Stmt) -> Stmt:
    """Flat indices of buffers that may hold 2^31 elements or more are computed in int64.

    Before: ``B[i * N + j] = A[i * N + j]`` (int32 arithmetic, wraps past 2^31).
    After: ``B[int64(i) * int64(N) + int64(j)] = A[int64(i) * int64(N) + int64(j)]``.
    Buffers whose constant size is below 2^31 elements keep int32 indices (cheaper on GPUs).
    """
    return _WidenStmt().visit(root)


# ------------------------------------------------------------------------------------
# integer division
# ------------------------------------------------------------------------------------
def _zero(dt: Dtype) -> E.Expr:
    return E.const(0, dt)


def _guard_division(e: E.BinaryOp) -> E.Expr:
    a, b = e.a, e.b
    dt = e.dtype
    signed = dt.kind == "int"
    is_div = isinstance(e, (E.Div, E.FloorDiv))
    c = int_value(b)
    if c is not None:
        if c == 0:
            return _zero(dt)
        if c == -1 and signed:
            return E.Sub(_zero(dt), a) if is_div else _zero(dt)
        return e
    is_zero = b.eq(0)
    bad = E.Or(is_zero, b.eq(-1)) if signed else is_zero
    safe = E.Select(bad, E.const(1, dt), b)
    divided = type(e)(a, safe)
    if not is_div:
        return divided               # x % 1 == 0 covers a divisor of 0 or -1
    if signed:
        divided = E.Select(b.eq(-1), E.Sub(_zero(dt), a), divided)
    return E.Select(is_zero, _zero(dt), divided)


class _GuardDivision(E.ExprMutator):
    def _visit_division(self, e):
        e = self.generic(e)
        return _guard_division(e) if e.dtype.is_integer else e

    visit_Div = visit_Mod = visit_FloorDiv = visit_FloorMod = _visit_division


class _ExprPass(StmtMutator):
    def __init__(self, ex: E.ExprMutator):
        self.ex = ex

    def visit_expr(self, e):
        return self.ex.visit(e)


def guard_int_division(nest, root: Stmt) -> Stmt:
    """Integer division and remainder by 0 give 0; ``INT_MIN / -1`` wraps to ``INT_MIN``.

    Before: ``Q[i] = A[i] / B[i]``.
    After: ``Q[i] = select(B[i] == 0, 0, select(B[i] == (-1), 0 - A[i],
    A[i] / select(B[i] == 0 || B[i] == (-1), 1, B[i])))``.
    A constant divisor other than 0 and -1 is left alone; ``x / 0`` becomes ``0`` and
    ``x / -1`` becomes ``0 - x``.
    """
    return _ExprPass(_GuardDivision()).visit(root)


# ------------------------------------------------------------------------------------
# low-precision arithmetic
# ------------------------------------------------------------------------------------
def _f32(dt: Dtype) -> Dtype:
    return float32.with_lanes(dt.lanes)


def _to_f32(e: E.Expr) -> E.Expr:
    """``e`` (a low-precision float) as the float32 holding its value exactly; constants are
    folded (a FloatImm already holds a value of its format)."""
    if isinstance(e, E.FloatImm):
        return E.FloatImm(e.value, float32)
    if isinstance(e, E.Broadcast) and isinstance(e.value, E.FloatImm):
        return E.Broadcast(E.FloatImm(e.value.value, float32), e.lanes)
    return E.Cast(_f32(e.dtype), e)


def _in_f32(cls: type, dt: Dtype, a: E.Expr, b: E.Expr) -> E.Expr:
    """``a <cls> b`` on operands of the low-precision ``dt``: computed in float32, rounded to ``dt``."""
    return E.Cast(dt, cls(_to_f32(a), _to_f32(b)))


def _floor_in_f32(dt: Dtype, a: E.Expr, b: E.Expr) -> E.Expr:
    """``floordiv(a, b)``: the quotient rounded to ``dt``, then its floor (exact in ``dt``)."""
    q = _in_f32(E.Div, dt, a, b)
    return E.Cast(dt, E.Call("floor", [_to_f32(q)], _f32(dt)))


class _LowerLowPrecision(E.ExprMutator):
    def _arith(self, e):
        e = self.generic(e)
        dt = e.a.dtype
        if not dt.is_lowp_float:
            return e
        if isinstance(e, E.FloorDiv):
            return _floor_in_f32(dt, e.a, e.b)
        if isinstance(e, E.FloorMod):    # a - floordiv(a, b) * b, every step rounded to dt
            qb = _in_f32(E.Mul, dt, _floor_in_f32(dt, e.a, e.b), e.b)
            return _in_f32(E.Sub, dt, e.a, qb)
        return _in_f32(type(e), dt, e.a, e.b)

    visit_Add = visit_Sub = visit_Mul = visit_Div = visit_FloorDiv = visit_FloorMod = _arith

    def visit_Call(self, e: E.Call) -> E.Expr:
        e = self.generic(e)
        if e.name in ("isnan", "bitcast") or not e.dtype.is_lowp_float:   # exact: nothing to round
            return e
        return E.Cast(e.dtype, E.Call(e.name, [_to_f32(a) for a in e.args], _f32(e.dtype)))


def lower_low_precision(nest, root: Stmt) -> Stmt:
    """Arithmetic on float16, bfloat16, tf32 and float8 is computed in float32 and rounded
    back to the format after every operation.

    Before: ``C[i] = A[i] * B[i] + float16(1.5)`` (float16).
    After: ``C[i] = float16(float32(float16(float32(A[i]) * float32(B[i]))) + 1.5f)``.
    ``+ - * /`` and the intrinsic calls are rewritten; ``floordiv`` and ``floormod`` become the
    float32 steps of ``floor(a / b)`` and ``a - floor(a / b) * b``, each rounded to the format.
    Comparisons, ``minimum`` / ``maximum``, ``isnan`` and selects are exact in every format and
    stay as they are, as do loads, stores and casts.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4,), "bfloat16")
    >>> nest = LoopNest([Compute("B", (4,), lambda i: A[i] * 2.0)]).prepare_for_codegen()
    >>> print(lower_low_precision(nest, nest.root))
    for (int i = 0; i < 4; i++) {
      B[i] = bfloat16(float32(A[i]) * 2.0f);
    }
    """
    return _ExprPass(_LowerLowPrecision()).visit(root)


# ------------------------------------------------------------------------------------
# shifts
# ------------------------------------------------------------------------------------
class _MaskShifts(E.ExprMutator):
    def visit_Call(self, e: E.Call) -> E.Expr:
        e = self.generic(e)
        if e.name not in SHIFTS:
            return e
        a, s = e.args
        width = s.dtype.bits
        c = int_value(s)
        if c is not None:
            if 0 <= c < width:
                return e
            return e.replace(args=(a, E.const(c & (width - 1), s.dtype)))
        return e.replace(args=(a, E.Call("bitwise_and", (s, E.const(width - 1, s.dtype)), s.dtype)))


def mask_shift_amounts(nest, root: Stmt) -> Stmt:
    """Shift amounts are taken modulo the width: ``x << s`` becomes ``x << (s & (bits - 1))``.

    Before: ``B[i] = A[i] << S[i]``. After: ``B[i] = A[i] << (S[i] & 31)`` (int32).
    A constant amount in ``[0, bits)`` is left alone; any other constant is reduced.

    >>> from te import Buffer, Compute, int32
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4,), int32); S = Buffer("S", (4,), int32)
    >>> nest = LoopNest([Compute("B", (4,), lambda i: (A[i] << S[i]) + (A[i] >> 33))]).prepare_for_codegen()
    >>> print(mask_shift_amounts(nest, nest.root))
    for (int i = 0; i < 4; i++) {
      B[i] = (A[i] << (S[i] & 31)) + (A[i] >> 1);
    }
    """
    return _ExprPass(_MaskShifts()).visit(root)


# ------------------------------------------------------------------------------------
# unsigned division
# ------------------------------------------------------------------------------------
class _UnsignedDivision(E.ExprMutator):
    """Rewrites the divisions of an expression, given the ids of the loop variables >= 0."""

    def __init__(self, nonneg_vars: set[int]):
        self.nonneg_vars = nonneg_vars

    def _division(self, e):
        e = self.generic(e)
        dt = e.dtype
        k = fold_int(e.b)
        if not (dt.is_int and dt.lanes == 1) or k is None or k <= 0 or not provably_nonneg(e.a, self.nonneg_vars):
            return e
        u = Dtype("uint", dt.bits)
        cls = E.Div if isinstance(e, (E.Div, E.FloorDiv)) else E.Mod
        return E.Cast(dt, cls(E.Cast(u, e.a), E.const(k, u)))

    visit_Div = visit_Mod = visit_FloorDiv = visit_FloorMod = _division


class _UnsignedDivisionStmt(StmtMutator):
    def __init__(self):
        self.ex = _UnsignedDivision(set())

    def visit_expr(self, e):
        return self.ex.visit(e)

    def visit_For(self, s: For):
        start, stop = self.ex.visit(s.start), self.ex.visit(s.stop)
        counts_up_from_nonneg = provably_nonneg(s.start, self.ex.nonneg_vars)
        if counts_up_from_nonneg:
            self.ex.nonneg_vars.add(id(s.var))
        try:
            body = self.visit(s.body)
        finally:
            self.ex.nonneg_vars.discard(id(s.var))
        return s.replace(start=start, stop=stop, body=body)


def unsigned_division(nest, root: Stmt) -> Stmt:
    """Signed division and remainder (``/``, ``%``, ``floordiv``, ``floormod``) of a dividend
    that is provably >= 0 (``te.queries.provably_nonneg``: loop variables counting up from a
    start >= 0, and divisions of those) by a constant > 0 are done on the unsigned type.

    The four operations agree there, so the value is unchanged; unsigned division by a
    constant is cheaper (a power of two is one shift, where signed division needs four
    instructions to round toward zero), and it keeps a signed division of a loop counter
    (``A[r / 2]``) away from LLVM 22's loop vectorizer, whose two cost models disagree about
    it on Intel CPUs (an LLVM built with assertions, as llvmlite's, aborts). Wrapping ``+``,
    ``-`` and ``*`` may overflow into negative values, so ``floordiv(i + 1, 2)`` stays signed.

    Before: ``B[i] = A[floordiv(i, 2)] + floormod(i, 4)``.
    After: ``B[i] = A[int32(uint32(i) / uint32(2))] + int32(uint32(i) % uint32(4))``.

    >>> from te import Buffer, Compute, floordiv, floormod
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8,), "int32")
    >>> nest = LoopNest([Compute("B", (8,), lambda i: A[floordiv(i, 2)] + floormod(i, 4) + (i - 1) / 2)])
    >>> nest = nest.prepare_for_codegen()
    >>> print(unsigned_division(nest, nest.root))
    for (int i = 0; i < 8; i++) {
      B[i] = A[int32(uint32(i) / uint32(2))] + int32(uint32(i) % uint32(4)) + (i - 1) / 2;
    }
    """
    return _UnsignedDivisionStmt().visit(root)


# ------------------------------------------------------------------------------------
# short-circuit and / or
# ------------------------------------------------------------------------------------
def _load_key(ld: E.Load):
    return id(ld.buffer), structural_key(ld, vars_by_identity=True)


def _reads_nothing_new(a: E.Expr, b: E.Expr) -> bool:
    """Every load of ``b`` is one that ``a`` always does (``a`` branches nothing away), so
    evaluating ``b`` after ``a`` cannot read where ``a`` did not."""
    lazy = []
    E.walk(a, lambda n: lazy.append(n) if isinstance(n, E.IfThenElse) else None)
    if lazy:
        return False
    done = {_load_key(ld) for ld in loads(a)}
    return all(_load_key(ld) in done for ld in loads(b))


def needs_short_circuit(e: E.Expr) -> bool:
    """Whether the ``&&`` / ``||`` node ``e`` must evaluate its right side only when the left
    side does not decide: it is scalar and its right side loads what the left side did not
    (see ``short_circuit``).

    >>> from te import Buffer, Var, logical_and, logical_or
    >>> A = Buffer("A", (8,), "int32"); i = Var("i")
    >>> needs_short_circuit(logical_and(i < 8, A[i] > 0)), needs_short_circuit(logical_or(A[i] == 0, A[i] == -1))
    (True, False)
    """
    return e.dtype.lanes == 1 and has_load(e.b) and not _reads_nothing_new(e.a, e.b)


class _ShortCircuit(E.ExprMutator):
    def _logical(self, e):
        e = self.generic(e)
        if not needs_short_circuit(e):
            return e
        short = E.const(isinstance(e, E.Or), e.dtype)
        if isinstance(e, E.And):
            return E.IfThenElse(e.a, e.b, short)
        return E.IfThenElse(e.a, short, e.b)

    visit_And = visit_Or = _logical


def short_circuit(nest, root: Stmt) -> Stmt:
    """Scalar ``&&`` and ``||`` whose right side loads evaluate it only when the left side
    does not decide: ``a && b`` becomes ``if_then_else(a, b, false)`` and ``a || b``
    ``if_then_else(a, true, b)``, so ``i < n && A[i] > 0`` never reads ``A[n]``.

    A right side that loads nothing, or only what the left side has loaded already (the
    ``b == 0 || b == -1`` of ``guard_int_division``), cannot fail, so evaluating it always gives
    the same value and costs no branch; vector ``&&`` / ``||`` evaluate both sides
    (``docs/semantics.md``).

    Before: ``B[i] = select(i < 4 && A[i] > 0, 1, 0)``.
    After: ``B[i] = select(if_then_else(i < 4, A[i] > 0, false), 1, 0)``.

    >>> from te import Buffer, Compute, logical_and, logical_or, select
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8,), "int32")
    >>> nest = LoopNest([Compute("B", (8,), lambda i: select(logical_or(i >= 4, A[i] > 0), 1, 0))])
    >>> nest = nest.prepare_for_codegen()
    >>> print(short_circuit(nest, nest.root))
    for (int i = 0; i < 8; i++) {
      B[i] = select(if_then_else(i >= 4, true, A[i] > 0), 1, 0);
    }
    """
    return _ExprPass(_ShortCircuit()).visit(root)


# ------------------------------------------------------------------------------------
# float maximum / minimum
# ------------------------------------------------------------------------------------
def _shareable(e: E.Expr) -> bool:
    """Free to repeat: a variable or a constant. (A load is bound by a ``let``, so that the
    selects choose between values, not between two loads of different buffers.)"""
    return isinstance(e, (E.Var, E.IntImm, E.FloatImm)) or e.dtype.lanes > 1


class _ExpandMinMax(E.ExprMutator):
    def __init__(self):
        self.count = 0

    def _min_max(self, e):
        e = self.generic(e)
        dt = e.dtype
        if not dt.is_float:
            return e
        lets = []
        ops = []
        for x in (e.a, e.b):
            if _shareable(x):
                ops.append(x)
                continue
            self.count += 1
            v = E.Var(f"{'mx' if isinstance(e, E.Max) else 'mn'}{self.count}", dt)
            lets.append((v, x))
            ops.append(v)
        out = _ieee_min_max(isinstance(e, E.Max), *ops)
        for v, x in reversed(lets):
            out = E.Let(v, x, out)
        return out

    visit_Min = visit_Max = _min_max


def _ieee_min_max(is_max: bool, x: E.Expr, y: E.Expr) -> E.Expr:
    """IEEE 754-2019 maximum / minimum of ``x`` and ``y`` in compares, selects and (float32,
    float64) exact additions: a NaN operand makes ``x + y`` NaN; of two equal zeros,
    ``x + y`` is -0.0 only when both are (maximum) and ``-(-x - y)`` is -0.0 unless both
    are +0.0 (minimum). A constant operand that is not NaN needs no NaN test, and a nonzero
    one no signed-zero test (a value equal to it has its bits)."""
    if x.dtype.is_lowp_float:
        return _lowp_min_max(is_max, x, y)
    consts = [v.value for v in (x, y) if isinstance(v, E.FloatImm)]
    first = E.Select((x > y) if is_max else (x < y), x, y)
    if any(c != 0.0 for c in consts):          # NaN constants included: then the NaN test decides
        ordered = first
    else:
        minus1 = E.const(-1.0, x.dtype)
        zeros = x + y if is_max else (x * minus1 - y) * minus1
        ordered = E.Select(x.eq(y), E.Select(x.eq(E.const(0.0, x.dtype)), zeros, x), first)
    tests = [v.ne(v) for v in (x, y) if not (isinstance(v, E.FloatImm) and v.value == v.value)]
    if not tests:
        return ordered
    nan = tests[0] if len(tests) == 1 else E.Or(*tests)
    return E.Select(nan, x + y, ordered)


def _lowp_min_max(is_max: bool, x: E.Expr, y: E.Expr) -> E.Expr:
    """maximum / minimum of a low-precision format, whose arithmetic would round (comparisons
    are exact): one select of an operand. ``x`` is taken when it is NaN, beyond ``y``, or equal
    to it with the sign that wins (+ for maximum, - for minimum, as ``copysign`` of its
    float32 value shows); else ``y``, which is then NaN, beyond ``x`` or equal to it."""
    take_x = (x > y) if is_max else (x < y)
    if not (isinstance(x, E.FloatImm) and x.value == x.value):
        take_x = E.Or(take_x, x.ne(x))
    if not any(isinstance(v, E.FloatImm) and v.value != 0.0 for v in (x, y)):
        xf = _to_f32(x)
        sign = E.Call("copysign", [E.const(1.0, xf.dtype), xf], xf.dtype)
        wins = (sign > E.const(0.0, xf.dtype)) if is_max else (sign < E.const(0.0, xf.dtype))
        take_x = E.Or(take_x, E.And(x.eq(y), wins))
    return E.Select(take_x, x, y)


def expand_float_min_max(nest, root: Stmt) -> Stmt:
    """Float ``maximum`` / ``minimum`` become compares and selects with their NaN and signed-zero
    rule written out (``docs/semantics.md``): a NaN operand is the result; otherwise the larger
    (smaller) value; of two equal values the one whose sign is + (-), so that ``-0.0 < +0.0``.
    An operand that is not a variable or a constant is bound once by a ``let``.

    Before: ``C[i] = maximum(A[i], B[i] * 2.0f)``.
    After: ``C[i] = let mx1 = A[i] in let mx2 = B[i] * 2.0f in select(mx1 != mx1 || mx2 != mx2,
    mx1 + mx2, select(mx1 == mx2, select(mx1 == 0.0f, mx1 + mx2, mx1), select(mx1 > mx2, mx1, mx2)))``.
    A low-precision format, whose arithmetic would round, selects an operand:
    ``select(x > y || x != x || x == y && copysign(1.0f, float32(x)) > 0.0f, x, y)``.
    Integer and bool ``maximum`` / ``minimum`` are plain and stay as they are.

    >>> from te import Buffer, Compute, minimum
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (4,), "float32")
    >>> nest = LoopNest([Compute("B", (4,), lambda i: minimum(A[i], 1.5))]).prepare_for_codegen()
    >>> print(expand_float_min_max(nest, nest.root))
    for (int i = 0; i < 4; i++) {
      B[i] = let mn1 = A[i] in select(mn1 != mn1, mn1 + 1.5f, select(mn1 < 1.5f, mn1, 1.5f));
    }
    """
    return _ExprPass(_ExpandMinMax()).visit(root)
