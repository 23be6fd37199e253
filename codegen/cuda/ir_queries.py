"""Read-only queries on the prepared loop-nest IR, shared by the CUDA passes and the printer.

>>> from te import Buffer, Var
>>> from loopnest.stmt import Block, For, ForKind, Store
>>> A = Buffer("A", (4,), "int32"); i = Var("i")
>>> loop = For(i, 0, 4, Block([Store(A, (i,), i)]), ForKind.GPU_THREAD, 0)
>>> contains_thread_loop(loop), str(extent(loop))
(True, '4')

The general expression and statement queries (``fold_int``, ``free_vars``, ``stmt_touches``,
...) are in ``te.queries`` and ``loopnest.queries``.
"""
from __future__ import annotations

from dataclasses import fields

from te import expr as E
from te.expr import Expr, IntImm, Var
from te.queries import fold_int, uses_var
from loopnest.stmt import Block, For, ForKind, Stmt, iter_stmts

__all__ = ["AXES", "extent", "flatten", "contains_thread_loop", "fresh_copy", "nonneg", "linear_coeff",
           "interval"]

AXES = "xyz"


def extent(f: For) -> Expr:
    """The trip count ``stop - start`` of ``f``, folded to a constant when it is one.

    >>> from te import Var
    >>> i = Var("i")
    >>> print(extent(For(i, 2, 10, Block(()))))
    8
    """
    if isinstance(f.start, IntImm) and f.start.value == 0:
        return f.stop
    c = fold_int(f.stop - f.start)
    return IntImm(c, f.var.dtype) if c is not None else f.stop - f.start


def flatten(s: Stmt) -> list[Stmt]:
    """The statements of ``s`` with nested Blocks spliced in (``[s]`` for a non-Block).

    >>> from te import Buffer
    >>> from loopnest.stmt import Store
    >>> A = Buffer("A", (2,), "int32")
    >>> len(flatten(Block([Block([Store(A, (0,), 1)]), Store(A, (1,), 2)])))
    2
    """
    if isinstance(s, Block):
        out = []
        for x in s.stmts:
            out.extend(flatten(x))
        return out
    return [s]


def contains_thread_loop(s: Stmt) -> bool:
    """Whether ``s`` is or holds a ``gpu_thread`` loop (see the module example)."""
    return any(isinstance(x, For) and x.kind == ForKind.GPU_THREAD for x in iter_stmts(s))


def fresh_copy(s: Stmt) -> Stmt:
    """A copy of the tree ``s`` in which every statement is a new object (expressions,
    variables and buffers are shared). The CUDA plan keys facts by statement identity, and a
    statement object may otherwise appear at two places of a hand-built tree.

    >>> from te import Buffer
    >>> from loopnest.stmt import Store
    >>> A = Buffer("A", (1,), "int32")
    >>> st = Store(A, (0,), 1)
    >>> b = fresh_copy(Block([st, st]))
    >>> b.stmts[0] is b.stmts[1], str(b) == str(Block([st, st]))
    (False, True)
    """
    vals = {}
    for f in fields(s):
        v = getattr(s, f.name)
        if isinstance(v, Stmt):
            v = fresh_copy(v)
        elif f.name == "stmts":
            v = tuple(fresh_copy(x) for x in v)
        vals[f.name] = v
    return type(s)(**vals)


def nonneg(e: Expr, nonneg_vars: set[int]) -> bool:
    """Whether ``e`` is provably >= 0, given the ids of variables known to be >= 0
    (loop variables counting up from non-negative starts; unsigned variables always).

    >>> from te import Var, floordiv
    >>> i, j = Var("i"), Var("j")
    >>> nonneg(floordiv(i * 4 + 3, 2), {id(i)}), nonneg(i - 1, {id(i)}), nonneg(j, {id(i)})
    (True, False, False)
    """
    t = type(e)
    if t is IntImm:
        return e.value >= 0
    if t is Var:
        return id(e) in nonneg_vars or e.dtype.is_uint
    if t in (E.Add, E.Mul, E.Min, E.Max):
        return nonneg(e.a, nonneg_vars) and nonneg(e.b, nonneg_vars)
    if t in (E.FloorDiv, E.Div):
        k = fold_int(e.b)
        return k is not None and k > 0 and nonneg(e.a, nonneg_vars)
    if t is E.FloorMod:
        k = fold_int(e.b)
        return k is not None and k > 0
    return False


def linear_coeff(e: Expr, v: Var) -> int | None:
    """``c`` when ``e == c * v + (terms without v)`` with a constant ``c``, else None.

    >>> from te import Var
    >>> i, j = Var("i"), Var("j")
    >>> linear_coeff(i * 8 + j - i, i), linear_coeff(i * j, i), linear_coeff(j + 1, i)
    (7, None, 0)
    """
    if not uses_var(e, v):
        return 0
    if e is v:
        return 1
    t = type(e)
    if t in (E.Add, E.Sub):
        a, b = linear_coeff(e.a, v), linear_coeff(e.b, v)
        if a is None or b is None:
            return None
        return a + b if t is E.Add else a - b
    if t is E.Mul:
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if not uses_var(y, v):
                c, k = linear_coeff(x, v), fold_int(y)
                return None if c is None or k is None else c * k
    return None


def interval(e: Expr, ranges: dict) -> tuple[int, int] | None:
    """Integer bounds of ``e`` given ``ranges`` (``{id(var): (lo, hi)}``), or None.

    >>> from te import Var, floormod
    >>> i = Var("i")
    >>> interval(i * 4 + floormod(i, 3), {id(i): (0, 7)})
    (0, 30)
    """
    t = type(e)
    if t is IntImm:
        return e.value, e.value
    if t is Var:
        return ranges.get(id(e))
    if t in (E.Add, E.Sub, E.Mul, E.Min, E.Max):
        a, b = interval(e.a, ranges), interval(e.b, ranges)
        if a is None or b is None:
            return None
        if t is E.Add:
            return a[0] + b[0], a[1] + b[1]
        if t is E.Sub:
            return a[0] - b[1], a[1] - b[0]
        if t is E.Min:
            return min(a[0], b[0]), min(a[1], b[1])
        if t is E.Max:
            return max(a[0], b[0]), max(a[1], b[1])
        prods = [x * y for x in a for y in b]
        return min(prods), max(prods)
    if t in (E.FloorDiv, E.FloorMod):
        a, k = interval(e.a, ranges), fold_int(e.b)
        if a is None or not k or k <= 0:
            return None
        return (a[0] // k, a[1] // k) if t is E.FloorDiv else (0, k - 1)
    return None
