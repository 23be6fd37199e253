"""The arithmetic simplifier: constant folding, canonical index arithmetic, range-aware rules.

>>> from te import Var, int32, floordiv, floormod
>>> io, ii, j = Var("i_outer"), Var("i_inner"), Var("j")
>>> print(simplify((io * 8 + ii) * 64 + j))
i_outer * 512 + i_inner * 64 + j
>>> r = {io: (0, 16), ii: (0, 8)}
>>> print(simplify(floordiv(io * 8 + ii, 8), r), simplify(floormod(io * 8 + ii, 8), r))
i_outer i_inner

What it does, node by node (``ranges`` maps a Var to ``(min, extent)``: ``min <= v < min + extent``):

* **Constant folding** with the exact semantics of each dtype: integers wrap to their bit
  width (two's complement), ``/`` and ``%`` truncate like C, ``floordiv``/``floormod`` round
  toward minus infinity, a division by zero is never folded. float32 folds in float32 and
  float64 in float64; other float formats are not folded (only the exact identities
  ``x * 1``, ``x / 1``, ``x - 0.0`` and ``x + -0.0``). Casts fold with C semantics (float ->
  int truncates; NaN, infinities and out-of-range values are left alone).
* **Canonical integer sums.** Add/Sub/Mul on scalar integers are rewritten as a sum of
  monomials (a constant times a product of "atoms": variables, loads, divisions, ...), which is
  exact in the ring of integers modulo 2**bits, so it is valid even when the arithmetic wraps.
  Terms keep their order of first appearance, the constant comes last, and the text reads
  naturally (``i - 3`` rather than ``i + -3``). Float arithmetic is never reassociated.
* **Division and modulo** by a positive constant: ``floordiv(8*a + b, 8) -> a + floordiv(b, 8)``,
  bounds that fit one block decide the result, nested divisions merge, and
  ``floordiv(x, c) * c + floormod(x, c) -> x``. C ``/`` and ``%`` get the same rules only where
  the dividend is provably non-negative. Every rule that relies on exact integer values first
  proves, with interval bounds, that the expression cannot wrap.
* **Bounds and proofs**: comparisons, ``min``/``max`` and ``select`` conditions are decided from
  constant interval bounds and, for symbolic ranges (``i`` in ``[0, N)``), by substituting each
  variable's symbolic bounds (``i < N`` is true).
* **Vectors**: ``broadcast(a) + broadcast(b) -> broadcast(a + b)``, ``ramp(b, s) + broadcast(x)
  -> ramp(b + x, s)``, ``ramp(b, s) * broadcast(c) -> ramp(b * c, s * c)``, and the division rules
  on ramps whose lanes stay in one block.

Each call builds its own memo tables. A ``Simplifier`` simplifies many expressions under
the same ranges with one set of tables (a pass over a statement tree: every expression
inside a loop shares the loop's ranges). One table outlives the calls: the nodes that a
call without ranges returned (``_FIXED``). Simplification is idempotent, so such a node
simplifies to itself; a transform that rewrites part of a simplified expression and
simplifies it again (``substitute`` shares the subtrees it does not change) skips the
unchanged subtrees. ``clear_fixed_points()`` empties it.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import expr as E
from .dtypes import Dtype, bool_, float32, float64
from .functor import Functor
from .lanes import lane_of
from .queries import expr_depth, free_vars as _free_vars, int_value, uses_var
from .recursion import recursion_guard

__all__ = ["simplify", "Simplifier", "const_int_bounds", "prove", "is_const_int", "const_int",
           "clear_fixed_points"]

#: expand a product of two sums only when it has at most this many monomials
_EXPAND_LIMIT = 16
#: budget of the symbolic bound search (substitution steps, and their nesting depth)
_SYM_STEPS = 32
_SYM_DEPTH = 8

#: id(node) -> node for the nodes a simplification without ranges returned: their own
#: simplification (the entry keeps the node alive, so its id is not reused); emptied when full
_FIXED: dict[int, E.Expr] = {}
_FIXED_SIZE = 1 << 15


def clear_fixed_points() -> None:
    """Forget the expressions known to simplify to themselves (see the module docstring).

    >>> from te import Var
    >>> _ = simplify(Var("i") + 1); clear_fixed_points(); len(_FIXED)
    0
    """
    _FIXED.clear()


_ARITH = (E.Add, E.Sub, E.Mul)
_DIVMOD = (E.Div, E.Mod, E.FloorDiv, E.FloorMod)
_CMP = (E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE)
_NEGATE_CMP = {E.EQ: E.NE, E.NE: E.EQ, E.LT: E.GE, E.GE: E.LT, E.GT: E.LE, E.LE: E.GT}


# ------------------------------------------------------------------------------------------
# small public helpers
# ------------------------------------------------------------------------------------------
def is_const_int(e: Any, value: int | None = None) -> bool:
    """True when ``e`` is a literal integer (or bool) constant (``te.queries.int_value``),
    equal to ``value`` when given.

    >>> from te import IntImm
    >>> is_const_int(IntImm(4)), is_const_int(IntImm(4), 3)
    (True, False)
    """
    v = int_value(e)
    return v is not None and (value is None or v == value)


#: the value of a literal integer constant (``te.queries.int_value``; the name is kept for importers)
const_int = int_value


@recursion_guard(depth=lambda e, ranges=None: expr_depth(E.as_expr(e)))
def simplify(e: E.Expr, ranges: dict[E.Var, tuple] | None = None) -> E.Expr:
    """Simplify ``e``; ``ranges`` maps Vars to ``(min, extent)`` (ints or integer Exprs).

    The result has exactly the dtype of ``e`` and the same value wherever the variables lie
    in their ranges. Simplification is deterministic and idempotent.

    >>> from te import Var
    >>> i = Var("i")
    >>> print(simplify((i + 3) - 3), simplify(i * 1 + 0), simplify(i - i))
    i i 0
    >>> print(simplify(E.Min(i, 16), {i: (0, 8)}), simplify(i < 8, {i: (0, 8)}))
    i true
    """
    e = E.as_expr(e)
    out = _Ctx(_check_ranges(ranges)).visit(e)
    if out.dtype != e.dtype:  # pragma: no cover - a bug in a rule, never user input
        raise RuntimeError(f"simplify changed the dtype of `{e}` from {e.dtype} to {out.dtype} (`{out}`)")
    return out


class Simplifier:
    """``simplify`` for many expressions under the same ``ranges``: the ranges are checked
    and simplified once, and a subexpression shared by several expressions is simplified
    once. Each result is what ``simplify(e, ranges)`` gives. ``within(ranges)`` is a
    simplifier for other ranges sharing the structural tables (node keys, linear forms),
    which do not depend on the ranges.

    >>> from te import Var
    >>> i, n = Var("i"), Var("n")
    >>> s = Simplifier({i: (0, 8)})
    >>> print(s(E.Min(i, 16)), s(i < 8), s((i + 3) - 3))
    i true i
    >>> print(s.within({i: (0, n)})(i < n))
    true
    """

    def __init__(self, ranges: dict[E.Var, tuple] | None = None, _shared: tuple | None = None):
        self._ctx = _Ctx(_check_ranges(ranges), _shared)

    def within(self, ranges: dict[E.Var, tuple] | None) -> "Simplifier":
        """A simplifier for ``ranges`` that shares this one's structural tables."""
        return Simplifier(ranges, self._ctx.shared)

    def __call__(self, e: E.Expr) -> E.Expr:
        return _simplify_in(self._ctx, e)


@recursion_guard(depth=lambda ctx, e: expr_depth(E.as_expr(e)))
def _simplify_in(ctx: "_Ctx", e: E.Expr) -> E.Expr:
    e = E.as_expr(e)
    # a call that ran out of recursion (run again on a deep thread) may have left these set
    ctx.resolving.clear()
    ctx.busy.clear()
    ctx.in_sym = 0
    out = ctx.visit(e)
    if out.dtype != e.dtype:  # pragma: no cover - a bug in a rule, never user input
        raise RuntimeError(f"simplify changed the dtype of `{e}` from {e.dtype} to {out.dtype} (`{out}`)")
    return out


@recursion_guard(depth=lambda e, ranges=None: expr_depth(E.as_expr(e)))
def const_int_bounds(e: E.Expr, ranges: dict[E.Var, tuple] | None = None) -> tuple[int | None, int | None]:
    """Integer bounds ``(lo, hi)`` with ``lo <= e <= hi`` for every lane and every point of
    ``ranges``; a side is ``None`` when nothing better than the dtype's own limit is known
    (for unsigned types the lower limit 0 is reported). Non-integer expressions give
    ``(None, None)``.

    >>> from te import Var
    >>> i = Var("i")
    >>> const_int_bounds(i * 4 + 1, {i: (0, 8)})
    (1, 29)
    >>> const_int_bounds(i)
    (None, None)
    """
    e = E.as_expr(e)
    dt = e.dtype
    if not (dt.is_integer or dt.is_bool):
        return (None, None)
    ctx = _Ctx(_check_ranges(ranges))
    lo, hi = ctx.cb(ctx.visit(e))
    if dt.is_bool:
        return (lo, hi)
    dlo, dhi = _dt_range(dt)
    return (None if (lo <= dlo and dt.is_int) else lo, None if hi >= dhi else hi)


def prove(cond: E.Expr, ranges: dict[E.Var, tuple] | None = None) -> bool | None:
    """``True`` if ``cond`` is provably true for every point of ``ranges`` (every lane of a
    vector), ``False`` if provably false, ``None`` when unknown.

    >>> from te import Var
    >>> i, n = Var("i"), Var("N")
    >>> prove(i < n, {i: (0, n)}), prove(i >= 8, {i: (0, 8)}), prove(i < 4, {i: (0, 8)})
    (True, False, None)
    """
    cond = E.check_condition(cond, "prove's condition")
    if not cond.dtype.is_bool:
        raise TypeError(f"prove needs a bool condition, got `{cond}` of dtype {cond.dtype}")
    s = simplify(cond, ranges)
    if type(s) is E.Broadcast:
        s = s.value
    if type(s) is E.IntImm:
        return bool(s.value)
    return None


def _check_ranges(ranges) -> dict:
    if ranges is None:
        return {}
    if not isinstance(ranges, dict):
        raise TypeError(f"ranges must be a dict {{Var: (min, extent)}}, got {type(ranges).__name__}")
    out = {}
    for v, r in ranges.items():
        if not isinstance(v, E.Var):
            raise TypeError(f"ranges keys must be te Vars, got {v!r} ({type(v).__name__})")
        if not isinstance(r, (tuple, list)) or len(r) != 2:
            raise TypeError(f"range of {v.name} must be a (min, extent) pair, got {r!r}")
        mn, ext = (E.as_expr(x, v) for x in r)
        for what, x in (("min", mn), ("extent", ext)):
            if not x.dtype.is_integer or x.dtype.is_vector:
                raise TypeError(f"range {what} of {v.name} must be a scalar integer, got `{x}` ({x.dtype})")
        out[v] = (mn, ext)
    return out


# ------------------------------------------------------------------------------------------
# integer and float helpers
# ------------------------------------------------------------------------------------------
_DT_RANGES: dict = {}


def _dt_range(dt: Dtype) -> tuple[int, int]:
    r = _DT_RANGES.get(dt)
    if r is None:
        r = _DT_RANGES[dt] = (0, 1) if dt.is_bool else (int(dt.min_value()), int(dt.max_value()))
    return r


def _wrap(v: int, dt: Dtype) -> int:
    """``v`` reduced to ``dt``'s bit width (two's complement for signed types)."""
    if dt.is_bool:
        return 1 if v else 0
    m = 1 << dt.bits
    v &= m - 1
    if dt.is_int and v >= m >> 1:
        v -= m
    return v


def _imm(v: int, dt: Dtype) -> E.IntImm:
    return E.IntImm(_wrap(v, dt.element), dt.element)


def _trunc_div(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return -q if (x < 0) != (y < 0) else q


def _fold_int(t, x: int, y: int, dt: Dtype) -> int | None:
    if t is E.Add:
        r = x + y
    elif t is E.Sub:
        r = x - y
    elif t is E.Mul:
        r = x * y
    elif t in _DIVMOD:
        if y == 0:
            return None
        if t is E.Div:
            r = _trunc_div(x, y)
        elif t is E.Mod:
            r = x - _trunc_div(x, y) * y
        elif t is E.FloorDiv:
            r = x // y
        else:
            r = x % y
    elif t is E.Min:
        r = min(x, y)
    elif t is E.Max:
        r = max(x, y)
    else:
        return None
    return _wrap(r, dt)


def _cmp_values(t, x, y) -> bool:
    if t is E.EQ:
        return x == y
    if t is E.NE:
        return x != y
    if t is E.LT:
        return x < y
    if t is E.LE:
        return x <= y
    if t is E.GT:
        return x > y
    return x >= y


def _fval(e: E.Expr) -> float | None:
    """The exact value of a float32/float64 constant (float32 rounded to float32), else None."""
    if type(e) is not E.FloatImm:
        return None
    if e.dtype == float64:
        return e.value
    if e.dtype == float32:
        with np.errstate(all="ignore"):
            return float(np.float32(e.value))
    return None


def _fold_float(t, x: float, y: float, dt: Dtype) -> float | None:
    if t in (E.Div, E.FloorDiv, E.FloorMod) and y == 0:
        return None
    with np.errstate(all="ignore"):
        if dt == float32:
            x, y = np.float32(x), np.float32(y)
        if t is E.Add:
            r = x + y
        elif t is E.Sub:
            r = x - y
        elif t is E.Mul:
            r = x * y
        elif t is E.Div:
            r = x / y
        else:
            return None
        r = float(r)
    return r if math.isfinite(r) else None


def _is_neg_zero(e) -> bool:
    return type(e) is E.FloatImm and e.value == 0.0 and math.copysign(1.0, e.value) < 0


def _is_pos_zero(e) -> bool:
    return type(e) is E.FloatImm and e.value == 0.0 and math.copysign(1.0, e.value) > 0


def _is_float_one(e) -> bool:
    if type(e) is E.Broadcast:
        e = e.value
    return type(e) is E.FloatImm and e.value == 1.0


def _bcast_int(e, value: int | None = None) -> bool:
    return type(e) is E.Broadcast and type(e.value) is E.IntImm and (value is None or e.value.value == value)


def _can_represent(src: Dtype, dst: Dtype) -> bool:
    """Every value of integer/bool type ``src`` is exactly representable in ``dst``."""
    if not (dst.is_integer or dst.is_bool) or not (src.is_integer or src.is_bool):
        return False
    slo, shi = _dt_range(src.element)
    dlo, dhi = _dt_range(dst.element)
    return dlo <= slo and shi <= dhi


def _corners(alo, ahi, blo, bhi, fn):
    vals = [fn(alo, blo), fn(alo, bhi), fn(ahi, blo), fn(ahi, bhi)]
    return min(vals), max(vals)


# ------------------------------------------------------------------------------------------
# linear forms: sum of coefficient * monomial (+ constant), monomial = product of atoms
# ------------------------------------------------------------------------------------------
class _Lin:
    """``terms``: monomial key (sorted atom ids) -> (factor Exprs in print order, coefficient)."""

    __slots__ = ("terms", "const")

    def __init__(self, terms: dict, const: int):
        self.terms = terms
        self.const = const


_ZERO = _Lin({}, 0)


def _norm(c: int, bits: int | None) -> int:
    """The signed representative of ``c`` modulo 2**bits (``bits`` None: exact integers)."""
    if bits is None:
        return c
    m = 1 << bits
    c &= m - 1
    return c - m if c >= (m >> 1) else c


def _ladd(a: _Lin, b: _Lin, bits, sign: int = 1) -> _Lin:
    if not b.terms and not b.const:
        return a
    terms = dict(a.terms)
    for k, (f, c) in b.terms.items():
        old = terms.get(k)
        nc = _norm((old[1] if old else 0) + sign * c, bits)
        if nc:
            terms[k] = (old[0] if old else f, nc)
        elif old:
            del terms[k]
    return _Lin(terms, _norm(a.const + sign * b.const, bits))


def _lscale(a: _Lin, k: int, bits) -> _Lin:
    k = _norm(k, bits)
    if k == 0:
        return _ZERO
    if k == 1:
        return a
    terms = {}
    for key, (f, c) in a.terms.items():
        nc = _norm(c * k, bits)
        if nc:
            terms[key] = (f, nc)
    return _Lin(terms, _norm(a.const * k, bits))


def _lcount(a: _Lin) -> int:
    return len(a.terms) + (1 if a.const else 0)


def _lmul(a: _Lin, b: _Lin, bits) -> _Lin | None:
    """The expanded product, or None when it would have too many monomials."""
    if not a.terms:
        return _lscale(b, a.const, bits)
    if not b.terms:
        return _lscale(a, b.const, bits)
    if _lcount(a) * _lcount(b) > _EXPAND_LIMIT:
        return None
    ai = list(a.terms.items()) + ([((), ((), a.const))] if a.const else [])
    bi = list(b.terms.items()) + ([((), ((), b.const))] if b.const else [])
    terms: dict = {}
    const = 0
    for ka, (fa, ca) in ai:
        for kb, (fb, cbv) in bi:
            c = ca * cbv
            if not ka and not kb:
                const += c
                continue
            k = tuple(sorted(ka + kb))
            old = terms.get(k)
            terms[k] = (old[0] if old else fa + fb, (old[1] if old else 0) + c)
    terms = {k: (f, _norm(c, bits)) for k, (f, c) in terms.items() if _norm(c, bits)}
    return _Lin(terms, _norm(const, bits))


# ------------------------------------------------------------------------------------------
# the simplifier proper (one context per call; Let bodies get a child context)
# ------------------------------------------------------------------------------------------
class _Ctx(Functor):
    def __init__(self, ranges: dict, shared: tuple | None = None):
        self.ranges = ranges                 # Var -> (min Expr, extent Expr), unsimplified
        self.memo: dict = {}                 # id(node) -> (node, simplified)
        self.rawlins: dict = {}              # id(unsimplified Add/Sub/Mul) -> (node, _Lin)
        self.bounds: dict = {}               # id(simplified node) -> (node, (lo, hi))
        self.rng: dict = {}                  # Var -> (min, extent) simplified
        self.fv: dict = {}                   # Var -> free vars of its range
        self.resolving: set = set()         # Vars whose bounds are being computed
        self.busy: set = set()              # Vars whose range is being simplified
        self.in_sym = 0                     # nesting of symbolic-bound searches
        # structural tables, valid whatever the ranges: node keys, atom ids, linear forms
        self.shared = shared if shared is not None else ({}, {}, {})
        self.keys, self.intern, self.lins = self.shared
        #: the fixed points of simplification without ranges (only valid without ranges)
        self.fixed = None if ranges else _FIXED

    # -- structural keys -----------------------------------------------------------------
    def key(self, e: E.Expr) -> int:
        """A small int equal for structurally equal nodes (variables and buffers by identity)."""
        hit = self.keys.get(id(e))
        if hit is not None:
            return hit[1]
        t = type(e)
        if t is E.Var:
            k = ("V", id(e))
        elif t is E.IntImm:
            k = ("I", e.value, e.dtype)
        elif t is E.FloatImm:
            k = ("F", e.value.hex(), e.dtype)
        elif t is E.Load:
            k = ("L", id(e.buffer), e.dtype) + tuple(self.key(i) for i in e.indices)
        elif t is E.Call:
            k = ("C", e.name, e.dtype) + tuple(self.key(a) for a in e.args)
        elif t is E.Let:
            k = ("Let", self.key(e.var), self.key(e.value), self.key(e.body))
        else:
            k = (t.__name__, e.dtype, getattr(e, "lanes", 0)) + tuple(self.key(c) for c in e.children())
        k = self.intern.setdefault(k, len(self.intern))  # hash-consed: keys stay O(1) on DAGs
        self.keys[id(e)] = (e, k)
        return k

    def same(self, a: E.Expr, b: E.Expr) -> bool:
        return a is b or self.key(a) == self.key(b)

    def atom(self, e: E.Expr) -> _Lin:
        return _Lin({(self.key(e),): ((e,), 1)}, 0)

    # -- linear forms ----------------------------------------------------------------------
    def lin(self, s: E.Expr) -> _Lin:
        """The linear form of an already simplified scalar integer expression."""
        hit = self.lins.get(id(s))
        if hit is not None:
            return hit[1]
        t = type(s)
        bits = s.dtype.bits
        if t is E.IntImm:
            L = _Lin({}, _norm(s.value, bits))
        elif t in _ARITH and s.dtype.is_integer and s.dtype.lanes == 1:
            L = self._combine(t, self.lin(s.a), self.lin(s.b), s.dtype, s)
        else:
            L = self.atom(s)
        self.lins[id(s)] = (s, L)
        return L

    def _combine(self, t, la: _Lin, lb: _Lin, dt: Dtype, node: E.Expr | None) -> _Lin:
        bits = dt.bits
        if t is E.Add:
            return _ladd(la, lb, bits)
        if t is E.Sub:
            return _ladd(la, lb, bits, -1)
        r = _lmul(la, lb, bits)
        if r is not None:
            return r
        if node is None:  # an opaque product of two (large) sums
            node = E.Mul(self.lexpr(la, dt), self.lexpr(lb, dt))
            self.memo[id(node)] = (node, node)
        return self.atom(node)

    def _lin_raw(self, e: E.Expr) -> _Lin:
        """The linear form of an unsimplified expression (atoms get simplified)."""
        t = type(e)
        if t in _ARITH and e.dtype.is_integer and e.dtype.lanes == 1:
            hit = self.rawlins.get(id(e))
            if hit is not None:
                return hit[1]
            la, lb = self._lin_raw(e.a), self._lin_raw(e.b)
            L = self._combine(t, la, lb, e.dtype, None)
            self.rawlins[id(e)] = (e, L)
            return L
        return self.lin(self.visit(e))

    def lexpr(self, L: _Lin, dt: Dtype) -> E.Expr:
        """Print a linear form as an expression: terms in order (a positive one first),
        ``a - b`` for negative coefficients, the constant last."""
        dt = dt.element
        if not L.terms:
            return _imm(L.const, dt)
        items = list(L.terms.values())
        pos = next((i for i, (_, c) in enumerate(items) if c > 0), None)
        if pos:
            items.insert(0, items.pop(pos))
        smin = -(1 << (dt.bits - 1))
        k = L.const
        acc = None
        if pos is None and k > 0:
            acc, k = _imm(k, dt), 0
        for f, c in items:
            prod = f[0]
            for x in f[1:]:
                prod = E.Mul(prod, x)
            if c > 0 or (c == smin and dt.is_int):
                term = prod if c == 1 else E.Mul(prod, _imm(c, dt))
                acc = term if acc is None else E.Add(acc, term)
            else:
                term = prod if c == -1 else E.Mul(prod, _imm(-c, dt))
                acc = E.Sub(_imm(0, dt) if acc is None else acc, term)
        if k > 0 or (k == smin and dt.is_int):
            acc = E.Add(acc, _imm(k, dt))
        elif k < 0:
            acc = E.Sub(acc, _imm(-k, dt))
        self.lins.setdefault(id(acc), (acc, L))
        return acc

    # -- bounds ----------------------------------------------------------------------------
    def zint(self, L: _Lin) -> tuple[int, int]:
        """Exact integer interval of a linear form, atoms taking their bounds."""
        lo = hi = L.const
        for f, c in L.terms.values():
            plo, phi = self.cb(f[0])
            for x in f[1:]:
                xlo, xhi = self.cb(x)
                plo, phi = _corners(plo, phi, xlo, xhi, lambda p, q: p * q)
            if c > 0:
                lo += c * plo
                hi += c * phi
            else:
                lo += c * phi
                hi += c * plo
        return lo, hi

    def fits(self, L: _Lin, dt: Dtype) -> bool:
        """True when the linear form's exact value always lies in ``dt`` (so it never wraps)."""
        if not L.const and len(L.terms) == 1:
            (f, c), = L.terms.values()
            if c == 1 and len(f) == 1:
                return True
        lo, hi = self.zint(L)
        dlo, dhi = _dt_range(dt.element)
        if dlo <= lo and hi <= dhi:
            return True
        if self.in_sym or not L.terms:
            return False
        # symbolic ranges (i in [0, N)) often bound what constant bounds cannot
        self.in_sym += 1
        try:
            return ((lo >= dlo or self.sym_bound(L, False) >= dlo)
                    and (hi <= dhi or self.sym_bound(L, True) <= dhi))
        finally:
            self.in_sym -= 1

    def range_of(self, v: E.Var) -> tuple[E.Expr, E.Expr]:
        r = self.rng.get(v)
        if r is None:
            mn, ext = self.ranges[v]
            if v in self.busy:  # a range that refers to itself: use it unsimplified
                return (mn, ext)
            self.busy.add(v)
            try:
                r = (self.visit(mn), self.visit(ext))
            finally:
                self.busy.discard(v)
            self.rng[v] = r
        return r

    def free_vars(self, v: E.Var) -> set:
        fv = self.fv.get(v)
        if fv is None:
            fv = self.fv[v] = set(_free_vars(self.range_of(v)))
        return fv

    def cb(self, e: E.Expr) -> tuple[int, int]:
        """Constant bounds of a simplified integer/bool expression (over all lanes)."""
        hit = self.bounds.get(id(e))
        if hit is not None:
            return hit[1]
        dt = e.dtype.element
        full = _dt_range(dt) if (dt.is_integer or dt.is_bool) else (-(1 << 1100), 1 << 1100)
        r = self._cb(e, dt, full)
        lo, hi = max(r[0], full[0]), min(r[1], full[1])
        if hi < lo:  # only for empty ranges (code that never runs)
            hi = lo
        self.bounds[id(e)] = (e, (lo, hi))
        return lo, hi

    def _cb(self, e, dt, full):
        t = type(e)
        if t is E.IntImm:
            return (e.value, e.value)
        if not (dt.is_integer or dt.is_bool):
            return full
        if t is E.Var:
            if e not in self.ranges or e in self.resolving:
                return full
            mn, ext = self.range_of(e)
            self.resolving.add(e)
            try:
                mlo, mhi = self.cb(mn)
                _, ehi = self.cb(ext)
            finally:
                self.resolving.discard(e)
            return (mlo, mhi + ehi - 1)
        if t in _ARITH:
            L = self.lin(e) if e.dtype.lanes == 1 and dt.is_integer else None
            if L is not None and not (len(L.terms) == 1 and not L.const
                                      and next(iter(L.terms.values()))[0] == (e,)):
                lo, hi = self.zint(L)
            else:  # vectors, and products of sums left unexpanded
                (alo, ahi), (blo, bhi) = self.cb(e.a), self.cb(e.b)
                if t is E.Add:
                    lo, hi = alo + blo, ahi + bhi
                elif t is E.Sub:
                    lo, hi = alo - bhi, ahi - blo
                else:
                    lo, hi = _corners(alo, ahi, blo, bhi, lambda p, q: p * q)
            return (lo, hi) if full[0] <= lo and hi <= full[1] else full
        if t in _DIVMOD:
            return self._cb_divmod(t, e, full)
        if t is E.Min or t is E.Max:
            (alo, ahi), (blo, bhi) = self.cb(e.a), self.cb(e.b)
            fn = min if t is E.Min else max
            return (fn(alo, blo), fn(ahi, bhi))
        if t is E.Select or t is E.IfThenElse:
            (alo, ahi), (blo, bhi) = self.cb(e.t), self.cb(e.f)
            return (min(alo, blo), max(ahi, bhi))
        if t is E.Cast:
            src = e.value.dtype
            if src.is_integer or src.is_bool:
                lo, hi = self.cb(e.value)
                if full[0] <= lo and hi <= full[1]:
                    return (lo, hi)
            return full
        if t in _CMP or t is E.And or t is E.Or or t is E.Not:
            return (0, 1)
        if t is E.Broadcast:
            return self.cb(e.value)
        if t is E.Ramp:
            (blo, bhi), (slo, shi) = self.cb(e.base), self.cb(e.stride)
            n = e.lanes - 1
            lo, hi = blo + min(0, slo * n), bhi + max(0, shi * n)
            return (lo, hi) if full[0] <= lo and hi <= full[1] else full
        if t is E.Let:
            return self.cb(e.body)
        return full

    def _cb_divmod(self, t, e, full):
        (alo, ahi), (blo, bhi) = self.cb(e.a), self.cb(e.b)
        if blo <= 0 <= bhi:
            return full
        if t is E.Div or t is E.FloorDiv:
            fn = _trunc_div if t is E.Div else (lambda p, q: p // q)
            lo, hi = _corners(alo, ahi, blo, bhi, fn)
            return (lo, hi) if full[0] <= lo and hi <= full[1] else full
        m = max(abs(blo), abs(bhi)) - 1
        if t is E.Mod:  # the sign of the dividend, smaller than |b|
            return (max(alo, -m) if alo < 0 else 0, min(ahi, m) if ahi > 0 else 0)
        if blo > 0:
            return (0, min(ahi, m) if alo >= 0 else m)
        return (max(alo, -m) if ahi <= 0 else -m, 0)

    # -- proofs ----------------------------------------------------------------------------
    def decide(self, t, a: E.Expr, b: E.Expr) -> bool | None:
        """Decide the comparison ``a t b`` of simplified scalar integers, or None."""
        if self.same(a, b):
            return t in (E.EQ, E.LE, E.GE)
        (alo, ahi), (blo, bhi) = self.cb(a), self.cb(b)
        r = _decide_interval(t, alo - bhi, ahi - blo)
        if r is not None:
            return r
        la, lb = self.lin(a), self.lin(b)
        if not (self.fits(la, a.dtype) and self.fits(lb, b.dtype)):
            return None
        d = _ladd(la, lb, None, -1)  # a - b exactly
        lo, hi = self.zint(d)
        r = _decide_interval(t, lo, hi)
        if r is not None or not d.terms:
            return r
        hi = self.sym_bound(d, True)
        r = _decide_interval(t, lo, hi)
        if r is not None:
            return r
        lo = self.sym_bound(d, False)
        return _decide_interval(t, lo, hi)

    def nonneg(self, a: E.Expr) -> bool:
        if self.cb(a)[0] >= 0:
            return True
        return self.decide(E.GE, a, _imm(0, a.dtype)) is True

    def sym_bound(self, d: _Lin, upper: bool) -> int:
        """A bound of the exact value of ``d`` found by substituting symbolic bounds of its
        atoms (ranged variables, min/max, exact floordiv rewrites), depth-first, on a budget."""
        lo, hi = self.zint(d)
        best = hi if upper else lo
        stack = [(d, 0)]
        steps = 0
        while stack and steps < _SYM_STEPS:
            cur, depth = stack.pop()
            steps += 1
            for nxt in self._sym_steps(cur, upper):
                lo, hi = self.zint(nxt)
                best = min(best, hi) if upper else max(best, lo)
                if depth + 1 < _SYM_DEPTH:
                    stack.append((nxt, depth + 1))
        return best

    def _sym_steps(self, cur: _Lin, upper: bool) -> list[_Lin]:
        var_c, other_c = [], []
        for k, (f, c) in cur.terms.items():
            if len(f) != 1:
                continue
            x = f[0]
            tx = type(x)
            want_upper = (c > 0) == upper
            if tx is E.Var and x in self.ranges and x not in self.resolving:
                mn, ext = self.range_of(x)
                if type(mn) is not E.IntImm or type(ext) is not E.IntImm:
                    var_c.append((x, c, want_upper))
            elif tx is E.FloorDiv and type(x.b) is E.IntImm and x.b.value > 0 and c % x.b.value == 0:
                other_c.append((x, c, want_upper))
            elif (tx is E.Min and want_upper) or (tx is E.Max and not want_upper):
                other_c.append((x, c, want_upper))
        if len(var_c) > 1:  # substitute a variable no other candidate's range depends on first
            free = [self.free_vars(v) for v, _, _ in var_c]
            order = [i for i, (v, _, _) in enumerate(var_c)
                     if not any(v in fv for j, fv in enumerate(free) if j != i)]
            var_c = [var_c[i] for i in order] + [x for i, x in enumerate(var_c) if i not in order]
        for x, c, want_upper in var_c:
            mn, ext = self.range_of(x)
            lmn = self.lin(mn)
            if not self.fits(lmn, mn.dtype):
                continue
            if want_upper:
                lext = self.lin(ext)
                if not self.fits(lext, ext.dtype):
                    continue
                repl = _ladd(_ladd(lmn, lext, None), _Lin({}, -1), None)
            else:
                repl = lmn
            return [self._subst(cur, x, c, repl)]
        for x, c, _ in other_c:
            if type(x) is E.FloorDiv:
                # c * floordiv(y, m) == (c/m) * (y - floormod(y, m)), exactly
                ly = self.lin(x.a)
                if not self.fits(ly, x.a.dtype):
                    continue
                q = c // x.b.value
                rem = self.visit(E.FloorMod(x.a, x.b))
                repl = _ladd(_lscale(ly, q, None), _lscale(self.lin(rem), q, None), None, -1)
                return [self._subst(cur, x, c, repl, scaled=True)]
            outs = []
            for arg in (x.a, x.b):
                la = self.lin(arg)
                if self.fits(la, arg.dtype):
                    outs.append(self._subst(cur, x, c, la))
            if outs:
                return outs
        return []

    def _subst(self, cur: _Lin, x: E.Expr, c: int, repl: _Lin, scaled: bool = False) -> _Lin:
        """``cur`` with the monomial ``c * x`` replaced by ``c * repl`` (or by ``repl``)."""
        out = _ladd(cur, _lscale(self.atom(x), c, None), None, -1)
        return _ladd(out, repl if scaled else _lscale(repl, c, None), None)

    # -- visiting --------------------------------------------------------------------------
    def visit(self, e: E.Expr) -> E.Expr:
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        fixed = self.fixed
        if fixed is not None and fixed.get(id(e)) is e:
            self.memo[id(e)] = (e, e)
            return e
        r = self._collapse(Functor.visit(self, e))
        self.memo[id(e)] = (e, r)
        if r is not e:
            self.memo.setdefault(id(r), (r, r))
        if fixed is not None:
            if len(fixed) >= _FIXED_SIZE:
                fixed.clear()
            fixed[id(r)] = r
        return r

    def _collapse(self, r: E.Expr) -> E.Expr:
        """An integer expression whose bounds meet is that constant."""
        dt = r.dtype
        t = type(r)
        if not dt.is_integer or t is E.IntImm or (t is E.Broadcast and type(r.value) is E.IntImm):
            return r
        lo, hi = self.cb(r)
        if lo != hi:
            return r
        c = _imm(lo, dt)
        return c if dt.lanes == 1 else E.Broadcast(c, dt.lanes)

    def generic(self, e: E.Expr) -> E.Expr:
        changes = {}
        for f in e._fields:
            v = getattr(e, f)
            if isinstance(v, E.Expr):
                nv = self.visit(v)
                if nv is not v:
                    changes[f] = nv
            elif isinstance(v, tuple) and any(isinstance(x, E.Expr) for x in v):
                nv = tuple(self.visit(x) if isinstance(x, E.Expr) else x for x in v)
                if any(p is not q for p, q in zip(nv, v)):
                    changes[f] = nv
        return e.replace(**changes) if changes else e

    def v_leaf(self, e):
        return e

    def v_arith(self, e):
        dt = e.dtype
        if dt.is_integer and dt.lanes == 1:
            L = self._recombine(self._lin_raw(e), dt)
            return self.lexpr(L, dt)
        a, b = self.visit(e.a), self.visit(e.b)
        if dt.lanes > 1:
            return self._vector_binop(e, a, b)
        if dt.is_float:
            return self._float_binop(e, a, b)
        return e.replace(a=a, b=b)

    def _float_binop(self, e, a, b):
        t = type(e)
        x, y = _fval(a), _fval(b)
        if x is not None and y is not None:
            if t in (E.Min, E.Max):
                if not (math.isnan(x) or math.isnan(y)) and not (x == y == 0.0 and str(x) != str(y)):
                    return E.FloatImm((min if t is E.Min else max)(x, y), e.dtype)
            else:
                r = _fold_float(t, x, y, e.dtype)
                if r is not None:
                    return E.FloatImm(r, e.dtype)
        if t is E.Mul:
            if _is_float_one(b):
                return a
            if _is_float_one(a):
                return b
        elif t is E.Div and _is_float_one(b):
            return a
        elif t is E.Sub and _is_pos_zero(b):
            return a
        elif t is E.Add:
            if _is_neg_zero(b):
                return a
            if _is_neg_zero(a):
                return b
        elif t in (E.Min, E.Max) and self.same(a, b):
            return a
        return e.replace(a=a, b=b)

    def _recombine(self, L: _Lin, dt: Dtype) -> _Lin:
        """Merge ``k*c * (y / c) + k * (y % c)`` back into ``k * y`` (floor or C pairs, a
        constant or a symbolic ``c``, and ``(x / a) % c`` beside ``x / (a*c)``). These hold
        exactly in wrapping arithmetic, so they need no bounds."""
        bits = dt.bits
        for _ in range(16):
            for f, pc in list(L.terms.values()):
                r = self._recombine_one(L, f, pc, dt)
                if r is not None:
                    L = r
                    break
            else:
                return L
        return L

    def _recombine_one(self, L: _Lin, f: tuple, pc: int, dt: Dtype) -> _Lin | None:
        bits = dt.bits
        mod_of = {E.FloorDiv: E.FloorMod, E.Div: E.Mod}
        div_of = {E.FloorMod: E.FloorDiv, E.Mod: E.Div}
        if len(f) == 1 and type(f[0]) in mod_of and type(f[0].b) is E.IntImm and f[0].b.value:
            fd = f[0]   # pc * (x / d): needs (pc / d) * (x % d)
            d = fd.b.value
            if pc % d:
                return None
            k = pc // d
            rem = self.visit(mod_of[type(fd)](fd.a, fd.b))
            return self._swap(L, [(self.atom(fd), pc), (self.lin(rem), k)], self.lin(fd.a), k, bits)
        if len(f) == 2:  # pc * (x / n) * n with a symbolic n
            for fd, n in (f, f[::-1]):
                if type(fd) in mod_of and self.same(fd.b, n):
                    rem = self.visit(mod_of[type(fd)](fd.a, n))
                    prod = _lmul(self.atom(fd), self.atom(n), bits)
                    return self._swap(L, [(prod, pc), (self.lin(rem), pc)], self.lin(fd.a), pc, bits)
            return None
        if len(f) == 1 and type(f[0]) in div_of:
            fm = f[0]   # pc * ((x / a) % d) beside pc*d * (x / (a*d))
            y, d = fm.a, fm.b
            dv = div_of[type(fm)]
            if (type(d) is E.IntImm and d.value > 0 and type(y) is dv and type(y.b) is E.IntImm
                    and y.b.value > 0 and y.b.value * d.value <= _dt_range(dt)[1]):
                big = self.visit(dv(y.a, _imm(y.b.value * d.value, dt)))
                return self._swap(L, [(self.atom(fm), pc), (self.lin(big), pc * d.value)],
                                  self.lin(y), pc, bits)
        return None

    def _swap(self, L: _Lin, parts: list, repl: _Lin, k: int, bits: int) -> _Lin | None:
        """``L - sum(coef * part) + k * repl`` when every term of every part is in ``L`` with
        exactly that coefficient (so the parts really occur), else None."""
        need: dict = {}
        const = 0
        for part, coef in parts:
            for key, (_, c) in part.terms.items():
                need[key] = _norm(need.get(key, 0) + c * coef, bits)
            const += part.const * coef
        if not need:
            return None
        for key, c in need.items():
            hit = L.terms.get(key)
            if hit is None or hit[1] != c:
                return None
        out = _Lin({key: v for key, v in L.terms.items() if key not in need}, _norm(L.const - const, bits))
        return _ladd(out, _lscale(repl, k, bits), bits)

    def v_divmod(self, e):
        t = type(e)
        dt = e.dtype
        a, b = self.visit(e.a), self.visit(e.b)
        if dt.lanes > 1:
            return self._vector_binop(e, a, b)
        if not dt.is_integer:
            if dt.is_float:
                return self._float_binop(e, a, b)
            return e.replace(a=a, b=b)
        if type(b) is E.IntImm:
            c = b.value
            if type(a) is E.IntImm:
                r = _fold_int(t, a.value, c, dt)
                if r is not None:
                    return _imm(r, dt)
            if c == 1:
                return a if t in (E.Div, E.FloorDiv) else _imm(0, dt)
            if c == -1 and dt.is_int:
                if t in (E.Div, E.FloorDiv):
                    return self.lexpr(_lscale(self.lin(a), -1, dt.bits), dt)
                return _imm(0, dt)
            if c > 0:
                r = self._divmod_pos(t, a, c, dt)
                if r is not None:
                    return r
        return e.replace(a=a, b=b)

    def _divmod_pos(self, t, a: E.Expr, c: int, dt: Dtype) -> E.Expr | None:
        is_div = t in (E.Div, E.FloorDiv)
        floor = t in (E.FloorDiv, E.FloorMod)
        ta = type(a)
        # nested: (x / c1) / c2 == x / (c1 * c2);  (x % c1) % c2 == x % c2 when c2 | c1
        if ta is t and type(a.b) is E.IntImm and a.b.value > 0:
            c1 = a.b.value
            if is_div and c1 * c <= _dt_range(dt)[1]:
                return self.visit(t(a.a, _imm(c1 * c, dt)))
            if not is_div and c1 % c == 0:
                return self.visit(t(a.a, _imm(c, dt)))
        lo, hi = self.cb(a)
        if not floor:
            if -c < lo and hi < c:
                return _imm(0, dt) if is_div else a
            if not self.nonneg(a):
                return None
        # from here floor semantics hold (floor op, or C op on a non-negative dividend)
        m0 = lo // c
        if hi // c == m0:
            if is_div:
                return _imm(m0, dt)
            return self.lexpr(_ladd(self.lin(a), _Lin({}, m0 * c), dt.bits, -1), dt)
        La = self.lin(a)
        if not self.fits(La, dt):
            if t is E.FloorMod and c & (c - 1) == 0:
                return self._floormod_pow2(a, La, c, dt)
            return None
        g = math.gcd(c, La.const, *(cc for _, cc in La.terms.values()))
        if g > 1:  # floordiv(g*A, g*c') == floordiv(A, c');  floormod(g*A, g*c') == g * floormod(A, c')
            a2 = self.lexpr(_exact_div(La, g), dt)
            inner = self.visit(t(a2, _imm(c // g, dt)))
            if is_div:
                return inner
            return self.lexpr(_lscale(self.lin(inner), g, dt.bits), dt)
        q = {k: (f, cc // c) for k, (f, cc) in La.terms.items() if cc % c == 0}
        r_terms = {k: v for k, v in La.terms.items() if k not in q}
        k0 = La.const
        if not q and 0 <= k0 < c:
            return None
        Q = _Lin(q, 0)
        R = _Lin(r_terms, k0)
        rlo, rhi = self.zint(R)
        dlo, dhi = _dt_range(dt)
        if dlo <= rlo and rhi <= dhi and rlo // c == rhi // c:
            m = rlo // c
            if is_div:
                return self.lexpr(_ladd(Q, _Lin({}, m), dt.bits), dt)
            return self.lexpr(_ladd(R, _Lin({}, m * c), dt.bits, -1), dt)
        q0 = k0 // c
        R2 = _Lin(r_terms, k0 - q0 * c)
        if not self.fits(R2, dt):
            return None
        r2 = self.lexpr(R2, dt)
        op = t if (floor or self.nonneg(r2)) else {E.Div: E.FloorDiv, E.Mod: E.FloorMod}[t]
        inner = self.visit(op(r2, _imm(c, dt)))
        if not is_div:
            return inner
        return self.lexpr(_ladd(_ladd(Q, _Lin({}, q0), dt.bits), self.lin(inner), dt.bits), dt)

    def _floormod_pow2(self, a: E.Expr, La: _Lin, c: int, dt: Dtype) -> E.Expr | None:
        """floormod by a power of two c ignores multiples of c, and wrapping only adds
        multiples of 2**bits (a multiple of c): drop those terms even when ``a`` may wrap."""
        r_terms = {k: v for k, v in La.terms.items() if v[1] % c}
        R = _Lin(r_terms, La.const % c)
        if len(r_terms) != len(La.terms) or R.const != La.const:
            return self.visit(E.FloorMod(self.lexpr(R, dt), _imm(c, dt)))
        g = math.gcd(c, La.const, *(cc for _, cc in La.terms.values()))
        if g > 1:
            inner = self.visit(E.FloorMod(self.lexpr(_exact_div(La, g), dt), _imm(c // g, dt)))
            return self.lexpr(_lscale(self.lin(inner), g, dt.bits), dt)
        return None

    def v_minmax(self, e):
        t = type(e)
        dt = e.dtype
        a, b = self.visit(e.a), self.visit(e.b)
        if dt.lanes > 1:
            return self._vector_binop(e, a, b)
        if dt.is_float:
            return self._float_binop(e, a, b)
        if not dt.is_integer:
            return e.replace(a=a, b=b)
        if type(a) is E.IntImm and type(b) is E.IntImm:
            return _imm(_fold_int(t, a.value, b.value, dt), dt)
        if self.same(a, b):
            return a
        if type(a) is E.IntImm:  # constant second
            a, b = b, a
        if self.decide(E.LE, a, b):
            return a if t is E.Min else b
        if self.decide(E.GE, a, b):
            return b if t is E.Min else a
        # min(min(x, c1), c2) == min(x, min(c1, c2))
        if type(a) is t and type(a.b) is E.IntImm and type(b) is E.IntImm:
            return self.visit(t(a.a, _imm(_fold_int(t, a.b.value, b.value, dt), dt)))
        return e.replace(a=a, b=b) if (a is not e.a or b is not e.b) else e

    def v_cmp(self, e):
        t = type(e)
        a, b = self.visit(e.a), self.visit(e.b)
        dt = a.dtype
        if dt.lanes > 1:
            return self._vector_binop(e, a, b)
        if type(a) is E.IntImm and type(b) is E.IntImm:
            return _imm(_cmp_values(t, a.value, b.value), bool_)
        x, y = _fval(a), _fval(b)
        if x is not None and y is not None:
            return _imm(_cmp_values(t, x, y), bool_)
        if dt.is_integer:
            r = self.decide(t, a, b)
            if r is not None:
                return _imm(r, bool_)
        return e.replace(a=a, b=b)

    def v_logic(self, e):
        t = type(e)
        a, b = self.visit(e.a), self.visit(e.b)
        if e.dtype.lanes > 1:
            return self._vector_binop(e, a, b)
        absorbing = 0 if t is E.And else 1
        for x, other in ((a, b), (b, a)):
            if type(x) is E.IntImm:
                return x if x.value == absorbing else other
        if self.same(a, b):
            return a
        return e.replace(a=a, b=b)

    def v_not(self, e):
        a = self.visit(e.a)
        ta = type(a)
        if ta is E.IntImm:
            return _imm(1 - a.value, bool_)
        if ta is E.Broadcast and type(a.value) is E.IntImm:
            return E.Broadcast(_imm(1 - a.value.value, bool_), a.lanes)
        if ta is E.Not:
            return a.a
        if ta in _NEGATE_CMP and a.a.dtype.is_integer:
            return self.visit(_NEGATE_CMP[ta](a.a, a.b))
        return e.replace(a=a)

    def v_select(self, e):
        c = self.visit(e.cond)
        cc = c.value if type(c) is E.Broadcast else c
        if type(cc) is E.IntImm:
            return self.visit(e.t if cc.value else e.f)
        a, b = self.visit(e.t), self.visit(e.f)
        if self.same(a, b):
            return a
        if e.dtype == bool_ and type(a) is E.IntImm and type(b) is E.IntImm:
            return c if a.value else self.visit(E.Not(c))
        if (type(c) is E.Broadcast and type(a) is E.Broadcast and type(b) is E.Broadcast):
            return E.Broadcast(self.visit(type(e)(c.value, a.value, b.value)), a.lanes)
        return e.replace(cond=c, t=a, f=b)

    def v_cast(self, e):
        v = self.visit(e.value)
        dt, src = e.dtype, v.dtype
        if dt == src:
            return v
        tv = type(v)
        if tv is E.Broadcast:
            return E.Broadcast(self.visit(E.Cast(dt.element, v.value)), v.lanes)
        if tv is E.IntImm:
            r = _fold_cast_int(v.value, dt)
            if r is not None:
                return r
        elif tv is E.FloatImm:
            r = _fold_cast_float(v, dt)
            if r is not None:
                return r
        elif tv is E.Cast and _can_represent(v.value.dtype, src):
            # the inner cast is exact: cast(T, cast(U, x)) == cast(T, x)
            return self.visit(E.Cast(dt, v.value))
        return e.replace(value=v)

    def v_ramp(self, e):
        base, stride = self.visit(e.base), self.visit(e.stride)
        if type(stride) is E.IntImm and stride.value == 0:
            return E.Broadcast(base, e.lanes)
        return e.replace(base=base, stride=stride)

    def v_let(self, e):
        val = self.visit(e.value)
        if type(val) in (E.IntImm, E.FloatImm, E.Var) or not uses_var(e.body, e.var):
            return self.visit(E.substitute(e.body, {e.var: val}))
        ranges = self.ranges
        if val.dtype.is_integer and val.dtype.lanes == 1:
            ranges = dict(ranges)
            ranges[e.var] = (val, _imm(1, val.dtype))
        body = _Ctx(ranges, self.shared).visit(e.body)
        if not uses_var(body, e.var):
            return body
        return e.replace(value=val, body=body)

    # -- vectors -----------------------------------------------------------------------
    def _vector_binop(self, e, a, b):
        t = type(e)
        lanes = e.a.dtype.lanes
        ta, tb = type(a), type(b)
        if ta is E.Broadcast and tb is E.Broadcast:
            return E.Broadcast(self.visit(t(a.value, b.value)), lanes)
        dt = a.dtype
        if dt.is_integer:
            if t is E.Add:
                if _bcast_int(b, 0):
                    return a
                if _bcast_int(a, 0):
                    return b
                if _ramp_pair(ta, tb):
                    (ab, as_), (bb, bs) = _ramp_parts(a), _ramp_parts(b)
                    return self._ramp(E.Add(ab, bb), _add_opt(as_, bs, E.Add), lanes)
            elif t is E.Sub:
                if _bcast_int(b, 0):
                    return a
                if _ramp_pair(ta, tb):
                    (ab, as_), (bb, bs) = _ramp_parts(a), _ramp_parts(b)
                    return self._ramp(E.Sub(ab, bb), _add_opt(as_, bs, E.Sub), lanes)
            elif t is E.Mul:
                if _bcast_int(b, 1):
                    return a
                if _bcast_int(a, 1):
                    return b
                if _bcast_int(b, 0) or _bcast_int(a, 0):
                    return E.Broadcast(_imm(0, dt), lanes)
                if ta is E.Ramp and tb is E.Broadcast:
                    return self._ramp(E.Mul(a.base, b.value), E.Mul(a.stride, b.value), lanes)
                if ta is E.Broadcast and tb is E.Ramp:
                    return self._ramp(E.Mul(a.value, b.base), E.Mul(a.value, b.stride), lanes)
            elif t in _DIVMOD:
                if _bcast_int(b, 1):
                    return a if t in (E.Div, E.FloorDiv) else E.Broadcast(_imm(0, dt), lanes)
                if ta is E.Ramp and _bcast_int(b) and b.value.value > 0:
                    r = self._ramp_divmod(t, a, b.value.value, dt)
                    if r is not None:
                        return r
            elif t in _CMP:
                (alo, ahi), (blo, bhi) = self.cb(a), self.cb(b)
                r = _decide_interval(t, alo - bhi, ahi - blo)
                if r is not None:
                    return E.Broadcast(_imm(r, bool_), lanes)
            elif t in (E.Min, E.Max) and self.same(a, b):
                return a
        elif dt.is_float:
            if (t is E.Mul and _is_float_one(b)) or (t is E.Div and _is_float_one(b)):
                return a
            if t is E.Mul and _is_float_one(a):
                return b
            if t in (E.Min, E.Max) and self.same(a, b):
                return a
        elif dt.is_bool and t in (E.And, E.Or):
            absorbing = 0 if t is E.And else 1
            for x, other in ((a, b), (b, a)):
                if _bcast_int(x):
                    return x if x.value.value == absorbing else other
            if self.same(a, b):
                return a
        return e.replace(a=a, b=b)

    def _ramp(self, base, stride, lanes):
        base, stride = self.visit(base), self.visit(stride)
        if type(stride) is E.IntImm and stride.value == 0:
            return E.Broadcast(base, lanes)
        return E.Ramp(base, stride, lanes)

    def _ramp_divmod(self, t, a: E.Ramp, c: int, dt: Dtype):
        if type(a.stride) is not E.IntImm or a.stride.value < 0:
            return None
        s, n = a.stride.value, a.lanes - 1
        blo, bhi = self.cb(a.base)
        if bhi + s * n > _dt_range(dt)[1]:
            return None  # the lanes could wrap
        if t in (E.Div, E.Mod) and blo < 0:
            return None  # C semantics differ from floor on negative lanes
        fdiv, fmod = (E.FloorDiv, E.FloorMod) if t in (E.FloorDiv, E.FloorMod) else (E.Div, E.Mod)
        is_div = t in (E.Div, E.FloorDiv)
        if s % c == 0:  # lanes step by whole blocks
            if is_div:
                return self._ramp(fdiv(a.base, _imm(c, dt)), _imm(s // c, dt), a.lanes)
            return E.Broadcast(self.visit(fmod(a.base, _imm(c, dt))), a.lanes)
        r = self.visit(fmod(a.base, _imm(c, dt)))
        if self.cb(r)[1] + s * n < c:  # all lanes in the block of the base
            if is_div:
                return E.Broadcast(self.visit(fdiv(a.base, _imm(c, dt))), a.lanes)
            return self._ramp(r, a.stride, a.lanes)
        return None

    visit_Var = visit_IntImm = visit_FloatImm = v_leaf
    visit_Add = visit_Sub = visit_Mul = v_arith
    visit_Div = visit_Mod = visit_FloorDiv = visit_FloorMod = v_divmod
    visit_Min = visit_Max = v_minmax
    visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = v_cmp
    visit_And = visit_Or = v_logic
    visit_Not = v_not
    visit_Select = visit_IfThenElse = v_select
    visit_Cast = v_cast
    visit_Ramp = v_ramp
    visit_Let = v_let

    def visit_ExtractLane(self, e: E.ExtractLane) -> E.Expr:
        """A lane of a ramp, a broadcast or a ``make_vector`` is that lane's scalar expression."""
        v = self.visit(e.value)
        if type(v) in (E.Ramp, E.Broadcast, E.MakeVector):
            return self.visit(lane_of(v, e.lane))
        return e.replace(value=v)

def _exact_div(L: _Lin, g: int) -> _Lin:
    return _Lin({k: (f, c // g) for k, (f, c) in L.terms.items()}, L.const // g)


def _ramp_pair(ta, tb) -> bool:
    return (ta is E.Ramp and tb in (E.Ramp, E.Broadcast)) or (tb is E.Ramp and ta is E.Broadcast)


def _ramp_parts(x):
    if type(x) is E.Ramp:
        return x.base, x.stride
    return x.value, None


def _add_opt(p, q, cls):
    if q is None:
        return p
    if p is None:
        return E.Sub(_imm(0, q.dtype), q) if cls is E.Sub else q
    return cls(p, q)


def _decide_interval(t, lo: int, hi: int) -> bool | None:
    """Decide ``d t 0`` for d in [lo, hi] (d = a - b)."""
    if t is E.LT:
        return True if hi < 0 else (False if lo >= 0 else None)
    if t is E.LE:
        return True if hi <= 0 else (False if lo > 0 else None)
    if t is E.GT:
        return True if lo > 0 else (False if hi <= 0 else None)
    if t is E.GE:
        return True if lo >= 0 else (False if hi < 0 else None)
    if t is E.EQ:
        return True if lo == hi == 0 else (False if hi < 0 or lo > 0 else None)
    if t is E.NE:
        return False if lo == hi == 0 else (True if hi < 0 or lo > 0 else None)
    return None


def _fold_cast_int(v: int, dt: Dtype) -> E.Expr | None:
    if dt.is_integer or dt.is_bool:
        return _imm(v if not dt.is_bool else (v != 0), dt)
    if dt == float64:
        return E.FloatImm(float(v), dt)
    if dt == float32 and abs(v) <= 1 << 53:
        with np.errstate(all="ignore"):
            return E.FloatImm(float(np.float32(float(v))), dt)
    return None


def _fold_cast_float(v: E.FloatImm, dt: Dtype) -> E.Expr | None:
    x = _fval(v)
    if x is None or math.isnan(x):
        return None
    if dt.is_bool:
        return _imm(x != 0.0, dt)
    if math.isinf(x):
        return None
    if dt.is_integer:
        n = math.trunc(x)
        lo, hi = _dt_range(dt)
        return _imm(n, dt) if lo <= n <= hi else None
    if dt == float64:
        return E.FloatImm(x, dt)
    if dt == float32:
        with np.errstate(all="ignore"):
            r = float(np.float32(x))
        return E.FloatImm(r, dt) if math.isfinite(r) else None
    return None


