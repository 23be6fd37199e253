"""Read-only queries on expressions: the one home for "which variables", "which constant",
"which loads" and "the same structure" questions (statement-level queries built on these
live in ``loopnest.queries``).

>>> from te import Buffer, IntImm, Var
>>> A = Buffer("A", (16,), "float32")
>>> i, n = Var("i"), Var("n")
>>> e = A[i * n + 1] * 2.0
>>> [v.name for v in free_vars(e)], [v.name for v in free_vars(e, bound={i})]
(['i', 'n'], ['n'])
>>> int_value(IntImm(4)), int_value(IntImm(4) * 2), fold_int(IntImm(4) * 2)
(4, None, 8)
>>> [str(ld) for ld in loads(e)], has_load(e, A)
(['A[i * n + 1]'], True)

Conventions shared by every function here:

* ``exprs`` arguments take one ``Expr`` or an iterable of them.
* Results that are lists keep the order of first appearance in a left-to-right pre-order walk
  (``te.expr.walk``'s order), each object once unless said otherwise.
* Variables and buffers are compared by identity (``Var`` hashes by identity).
* ``int_value`` is *syntactic* (a literal constant); ``fold_int`` *evaluates* a constant
  expression. A caller that must not look through arithmetic uses ``int_value``.
"""
from __future__ import annotations

import operator
from typing import Any, Iterable

import numpy as np

from . import expr as E
from .dtypes import Dtype
from .functor import Functor
from .expr import Broadcast, Cast, Expr, FloatImm, IntImm, Let, Load, Var, structural_equal, structural_key

__all__ = ["free_vars", "uses_var", "int_value", "fold_int", "loads", "unconditional_loads", "has_load",
           "loaded_buffers", "expr_depth", "expr_size", "structural_key", "structural_equal", "provably_nonneg"]


def _roots(exprs) -> list:
    """The expressions of ``exprs`` (one Expr or an iterable) as a stack: first on top."""
    if isinstance(exprs, Expr):
        return [exprs]
    stack = list(exprs)
    stack.reverse()
    return stack


_LEAVES = (Var, IntImm, FloatImm)


# ------------------------------------------------------------------------------------
# variables
# ------------------------------------------------------------------------------------
def free_vars(exprs: Expr | Iterable[Expr], bound: Iterable[Var] = (), lets: list | None = None) -> list[Var]:
    """The variables of ``exprs`` in order of first appearance, except those in ``bound`` and
    those bound by a ``Let`` expression inside ``exprs`` (a Let's variable counts as bound
    everywhere in ``exprs``, as in the statement-level ``loopnest.queries.stmt_free_vars``).
    The variables of those Lets are appended to ``lets`` when given.

    >>> from te import Let, Var
    >>> i, j, n, t = Var("i"), Var("j"), Var("n"), Var("t")
    >>> [v.name for v in free_vars([j * n + i, i + n])]
    ['j', 'n', 'i']
    >>> [v.name for v in free_vars(j * n + i, bound=[j])]
    ['n', 'i']
    >>> bound_here = []; [v.name for v in free_vars(Let(t, i * 2, t + n), lets=bound_here)], bound_here
    (['i', 'n'], [t])
    """
    seen: dict[Var, None] = {}
    let_vars: set | None = None
    stack = _roots(exprs)
    pop, push = stack.pop, stack.extend
    while stack:
        n = pop()
        t = type(n)
        if t is Var:
            seen[n] = None
        elif t is not IntImm and t is not FloatImm:
            if t is Let:
                if let_vars is None:
                    let_vars = set()
                let_vars.add(n.var)
            kids = n.children()
            kids.reverse()
            push(kids)
    if lets is not None and let_vars is not None:
        lets.extend(let_vars)
    if not bound and let_vars is None:
        return list(seen)
    skip = set(bound)
    if let_vars is not None:
        skip |= let_vars
    return [v for v in seen if v not in skip]


def uses_var(exprs: Expr | Iterable[Expr], var: Var) -> bool:
    """Whether the variable ``var`` (by identity) occurs anywhere in ``exprs``, as a use or as
    the variable of a ``Let``; stops at the first occurrence.

    >>> from te import Let, Var
    >>> i, j, t = Var("i"), Var("i"), Var("t")
    >>> uses_var(i * 2 + 1, i), uses_var(i * 2 + 1, j), uses_var(Let(t, 1, i), t)
    (True, False, True)
    """
    stack = _roots(exprs)
    pop, push = stack.pop, stack.extend
    while stack:
        x = pop()
        if x is var:
            return True
        push(x.children())
    return False


# ------------------------------------------------------------------------------------
# shape
# ------------------------------------------------------------------------------------
def expr_depth(exprs: Expr | Iterable[Expr]) -> int:
    """The nesting depth of ``exprs``: the number of nodes on the longest path from a root
    down to a leaf (a leaf is 1; 0 for no expressions). Computed without recursion, each
    shared subexpression once, so it is safe on the deepest expressions; recursive passes
    need about this many nested calls (see ``te.recursion``).

    >>> from te import Var
    >>> i = Var("i")
    >>> expr_depth(i), expr_depth(i * 2 + 1), expr_depth([i, (i + 1) * (i + 2) - 3]), expr_depth([])
    (1, 3, 4, 0)
    """
    depth: dict[int, int] = {}
    best = 0
    stack = [(e, False) for e in _roots(exprs)]
    pop, push = stack.pop, stack.append
    while stack:
        n, done = pop()
        if id(n) in depth:
            d = depth[id(n)]
        elif type(n) in _LEAVES:
            d = depth[id(n)] = 1
        elif done:
            d = depth[id(n)] = 1 + max((depth[id(c)] for c in n.children()), default=0)
        else:
            push((n, True))
            stack.extend((c, False) for c in n.children() if id(c) not in depth)
            continue
        if d > best:
            best = d
    return best


def expr_size(exprs: Expr | Iterable[Expr]) -> int:
    """The number of nodes of ``exprs``, a shared subexpression counted at each use (what
    copying or printing it produces). Computed without recursion.

    >>> from te import Var
    >>> i = Var("i")
    >>> e = i * 2 + 1
    >>> expr_size(i), expr_size(e), expr_size([e, e * e]), expr_size([])
    (1, 5, 16, 0)
    """
    count = 0
    stack = list(_roots(exprs))
    while stack:
        count += 1
        stack.extend(stack.pop().children())
    return count


# ------------------------------------------------------------------------------------
# constants
# ------------------------------------------------------------------------------------
def int_value(e: Any) -> int | None:
    """The integer a literal constant denotes, else ``None`` (syntactic: nothing is folded).

    Literal constants are an ``IntImm`` (integer or bool dtype), a ``Broadcast`` of one (the
    value of every lane) and a Python or numpy integer (not a Python bool).

    >>> from te import Broadcast, IntImm, Var
    >>> int_value(IntImm(7)), int_value(Broadcast(IntImm(3), 4)), int_value(5)
    (7, 3, 5)
    >>> int_value(IntImm(3) + 1), int_value(Var("i")), int_value(True)
    (None, None, None)
    """
    t = type(e)
    if t is IntImm:
        return e.value
    if t is Broadcast:
        v = e.value
        return v.value if type(v) is IntImm else None
    if t is not bool and isinstance(e, (int, np.integer)):
        return int(e)
    return None


def _cdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


_FOLD_OPS = {
    E.Add: operator.add, E.Sub: operator.sub, E.Mul: operator.mul, E.Min: min, E.Max: max,
    E.FloorDiv: operator.floordiv, E.FloorMod: operator.mod,
    E.Div: _cdiv, E.Mod: lambda a, b: a - _cdiv(a, b) * b,
}
_DIVISIONS = (E.FloorDiv, E.FloorMod, E.Div, E.Mod)
#: id(dtype) -> (dtype, min, max, is a scalar integer, is bool); holding the dtype keeps its id
#: unique while the entry lives. Bounded: cleared when it grows past _INFO_LIMIT entries.
_INFO: dict[int, tuple] = {}
_INFO_LIMIT = 4096


def _int_info(dt: Dtype) -> tuple:
    r = _INFO.get(id(dt))
    if r is None or r[0] is not dt:
        if len(_INFO) >= _INFO_LIMIT:
            _INFO.clear()
        integer = dt.kind in ("int", "uint") and dt.lanes == 1
        lo, hi = (int(dt.min_value()), int(dt.max_value())) if integer else (0, -1)
        r = _INFO[id(dt)] = (dt, lo, hi, integer, dt.kind == "bool")
    return r


def fold_int(e: Any) -> int | None:
    """The value of a scalar constant integer expression, else ``None``.

    Folds ``IntImm`` leaves through ``+ - * min max``, the four divisions (``floordiv`` /
    ``floormod`` round toward minus infinity, ``/`` and ``%`` truncate like C) and casts
    between integer types (from integer or bool), with exact integers; independent of the
    simplifier (no range reasoning; cheap enough for hot paths). Where the
    program's fixed-width arithmetic would differ from the exact value (a result outside
    its dtype, a division by zero) the result is ``None``, never a wrapped value. Vectors
    (``Broadcast``, ``Ramp``), variables, loads, comparisons and selects give ``None``: use
    ``int_value`` for a literal that may be a ``Broadcast``, ``te.simplify`` for more.

    >>> from te import Cast, IntImm, MinExpr, Var, int8, int64
    >>> fold_int(IntImm(3) * 4 - 2), fold_int(MinExpr(IntImm(8), IntImm(5)) // 2)
    (10, 2)
    >>> fold_int(IntImm(-7) / 2), fold_int(IntImm(-7) % 2), fold_int(Cast(int64, IntImm(9)))
    (-3, -1, 9)
    >>> fold_int(Var("n") + 1), fold_int(IntImm(1) // 0), fold_int(Cast(int8, IntImm(300)))
    (None, None, None)
    >>> fold_int(IntImm(2 ** 30) * 4) is None   # would wrap in int32
    True
    """
    t = type(e)
    if t is IntImm:
        return e.value
    op = _FOLD_OPS.get(t)
    if op is not None:
        a = fold_int(e.a)
        if a is None:
            return None
        b = fold_int(e.b)
        if b is None or (b == 0 and t in _DIVISIONS):
            return None
        v = op(a, b)
        info = _int_info(e.dtype)
    elif t is Cast:
        v = fold_int(e.value)   # an int: the source is an integer or bool scalar
        if v is None:
            return None
        info = _int_info(e.dtype)
        if not info[3]:
            return None
    else:
        return None
    return v if info[1] <= v <= info[2] else None


# ------------------------------------------------------------------------------------
# signs
# ------------------------------------------------------------------------------------
def provably_nonneg(e: Expr, nonneg_vars: set[int] = frozenset()) -> bool:
    """Whether the integer expression ``e`` is >= 0 for every value of its variables, given
    the ids of the scalar variables known to be >= 0 (loop variables counting up from a
    non-negative start).

    Exact for wrapping integer arithmetic: ``+``, ``-`` and ``*`` may overflow into negative
    values, so only constants, those variables, unsigned variables, and division, remainder,
    ``min`` and ``max`` of those by / with positive constants count.

    >>> from te import Var, floordiv, uint32
    >>> i, j = Var("i"), Var("j")
    >>> provably_nonneg(i / 2, {id(i)}), provably_nonneg(floordiv(i, 4) % 3, {id(i)})
    (True, True)
    >>> provably_nonneg(i + 1, {id(i)}), provably_nonneg(j, {id(i)}), provably_nonneg(Var("u", uint32))
    (False, False, True)
    """
    return _NONNEG.visit(e, nonneg_vars)


class _NonNeg(Functor):
    def visit_IntImm(self, e, nonneg_vars):
        return e.value >= 0

    def visit_Var(self, e, nonneg_vars):
        return e.dtype.is_uint or (e.dtype.lanes == 1 and id(e) in nonneg_vars)

    def _by_positive_constant(self, e, nonneg_vars):
        k = fold_int(e.b)
        return k is not None and k > 0 and self.visit(e.a, nonneg_vars)

    visit_Div = visit_FloorDiv = visit_Mod = _by_positive_constant

    def visit_FloorMod(self, e, nonneg_vars):
        k = fold_int(e.b)
        return k is not None and k > 0

    def visit_Min(self, e, nonneg_vars):
        return self.visit(e.a, nonneg_vars) and self.visit(e.b, nonneg_vars)

    def visit_Max(self, e, nonneg_vars):
        return self.visit(e.a, nonneg_vars) or self.visit(e.b, nonneg_vars)

    def generic(self, e, nonneg_vars):
        return False


_NONNEG = _NonNeg()


# ------------------------------------------------------------------------------------
# loads
# ------------------------------------------------------------------------------------
def _iter_loads(exprs, buffer):
    """The loads of ``exprs`` (of ``buffer`` when given), pre-order, produced lazily."""
    stack = _roots(exprs)
    pop, push = stack.pop, stack.extend
    while stack:
        n = pop()
        t = type(n)
        if t is Load:
            if buffer is None or n.buffer is buffer:
                yield n
        elif t in _LEAVES:
            continue
        kids = n.children()
        kids.reverse()
        push(kids)


def loads(exprs: Expr | Iterable[Expr], buffer: Any = None) -> list[Load]:
    """Every ``Load`` node in ``exprs`` (of ``buffer`` when given, by identity), in pre-order;
    a load nested in another load's index comes after it. Repeated nodes are listed again.

    >>> from te import Buffer, Var
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "int32")
    >>> i = Var("i")
    >>> [str(ld) for ld in loads(A[B[i]] + A[i])]
    ['A[B[i]]', 'B[i]', 'A[i]']
    >>> [str(ld) for ld in loads([A[i], B[i] + 1], B)]
    ['B[i]']
    """
    return list(_iter_loads(exprs, buffer))


def unconditional_loads(exprs: Expr | Iterable[Expr], buffer: Any = None) -> list[Load]:
    """The loads of ``exprs`` (of ``buffer`` when given) that run whenever ``exprs`` are
    evaluated: those on neither side of an ``if_then_else``, which evaluates only the side it
    takes (``select`` evaluates both, so its loads count), in the order of ``loads``.

    >>> from te import Buffer, Var, if_then_else, select
    >>> A = Buffer("A", (8,), "float32")
    >>> i = Var("i")
    >>> [str(ld) for ld in unconditional_loads(if_then_else(i < 4, A[i + 4], A[0]) + A[i])]
    ['A[i]']
    >>> [str(ld) for ld in unconditional_loads(select(i < 4, A[i + 4], 0.0))]
    ['A[i + 4]']
    """
    out: list[Load] = []
    stack = _roots(exprs)
    while stack:
        n = stack.pop()
        if type(n) is E.IfThenElse:
            stack.append(n.cond)        # the sides run only where they are taken
            continue
        if type(n) is Load and (buffer is None or n.buffer is buffer):
            out.append(n)
        if type(n) not in _LEAVES:
            kids = n.children()
            kids.reverse()
            stack.extend(kids)
    return out


def has_load(exprs: Expr | Iterable[Expr], buffer: Any = None) -> bool:
    """Whether ``exprs`` load anything (``buffer``, by identity, when given); stops at the
    first match.

    >>> from te import Buffer, Var
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    >>> i = Var("i")
    >>> has_load(A[i] + 1.0), has_load(A[i] + 1.0, B), has_load(i + 1)
    (True, False, False)
    """
    return next(_iter_loads(exprs, buffer), None) is not None


def loaded_buffers(exprs: Expr | Iterable[Expr]) -> list:
    """The distinct buffers that ``exprs`` load from, in order of first load.

    >>> from te import Buffer, Var
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "int32")
    >>> i = Var("i")
    >>> [b.name for b in loaded_buffers([B[i] + 1, A[B[i]] * A[i]])]
    ['B', 'A']
    """
    seen: dict[int, Any] = {}
    for ld in loads(exprs):
        b = ld.buffer
        if id(b) not in seen:
            seen[id(b)] = b
    return list(seen.values())
