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

from te.expr import Expr, IntImm, Var
from te.functor import Functor
from te.queries import fold_int, uses_var
from loopnest.stmt import Block, For, ForKind, LetStmt, Stmt, iter_stmts

__all__ = ["AXES", "extent", "flatten", "contains_thread_loop", "fresh_copy", "StmtWalk", "nonneg",
           "linear_coeff", "interval", "loop_ranges"]

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


class StmtWalk(Functor):
    """A walk over a statement tree that hands extra arguments down: ``generic(s, *args)``
    visits the child statements of ``s`` in order with the same arguments. Subclasses
    override ``visit_<Class>`` and call ``self.generic`` to go on below (with new arguments).

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Store
    >>> A = Buffer("A", (4,), "int32"); i = Var("i")
    >>> class Depths(StmtWalk):
    ...     def visit_For(self, s, depth): self.generic(s, depth + 1)
    ...     def visit_Store(self, s, depth): print(s.buffer.name, depth)
    >>> Depths().visit(Block([Store(A, (0,), 1), For(i, 0, 4, Block([Store(A, (i,), i)]))]), 0)
    A 0
    A 1
    """

    def generic(self, s: Stmt, *args) -> None:
        for f in fields(s):
            v = getattr(s, f.name)
            if isinstance(v, Stmt):
                self.visit(v, *args)
            elif f.name == "stmts":
                for x in v:
                    self.visit(x, *args)


def nonneg(e: Expr, nonneg_vars: set[int]) -> bool:
    """Whether ``e`` is provably >= 0, given the ids of variables known to be >= 0
    (loop variables counting up from non-negative starts; unsigned variables always).

    >>> from te import Var, floordiv
    >>> i, j = Var("i"), Var("j")
    >>> nonneg(floordiv(i * 4 + 3, 2), {id(i)}), nonneg(i - 1, {id(i)}), nonneg(j, {id(i)})
    (True, False, False)
    """
    return _NONNEG.visit(e, nonneg_vars)


class _NonNeg(Functor):
    """Whether an expression is provably >= 0 (see :func:`nonneg`)."""

    def visit_IntImm(self, e, nonneg_vars):
        return e.value >= 0

    def visit_Var(self, e, nonneg_vars):
        return id(e) in nonneg_vars or e.dtype.is_uint

    def _both(self, e, nonneg_vars):
        return self.visit(e.a, nonneg_vars) and self.visit(e.b, nonneg_vars)

    visit_Add = visit_Mul = visit_Min = visit_Max = _both

    def _by_positive_constant(self, e, nonneg_vars):
        k = fold_int(e.b)
        return k is not None and k > 0 and self.visit(e.a, nonneg_vars)

    visit_FloorDiv = visit_Div = _by_positive_constant

    def visit_FloorMod(self, e, nonneg_vars):
        k = fold_int(e.b)
        return k is not None and k > 0

    visit_Mod = _by_positive_constant   # C remainder: the sign of the dividend

    def generic(self, e, nonneg_vars):
        return False


_NONNEG = _NonNeg()


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
    return _LINEAR.visit(e, v)


class _LinearCoeff(Functor):
    """The coefficient of ``v`` in an expression that uses it (see :func:`linear_coeff`)."""

    def visit_Add(self, e, v):
        a, b = linear_coeff(e.a, v), linear_coeff(e.b, v)
        return None if a is None or b is None else a + b

    def visit_Sub(self, e, v):
        a, b = linear_coeff(e.a, v), linear_coeff(e.b, v)
        return None if a is None or b is None else a - b

    def visit_Mul(self, e, v):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if not uses_var(y, v):
                c, k = linear_coeff(x, v), fold_int(y)
                return None if c is None or k is None else c * k
        return None

    def generic(self, e, v):
        return None


_LINEAR = _LinearCoeff()


def interval(e: Expr, ranges: dict) -> tuple[int, int] | None:
    """Integer bounds of ``e`` given ``ranges`` (``{id(var): (lo, hi)}``), or None.

    >>> from te import Var, floormod
    >>> i = Var("i")
    >>> interval(i * 4 + floormod(i, 3), {id(i): (0, 7)})
    (0, 30)
    >>> interval((floormod(i, 8) ^ 5) * 8, {id(i): (0, 99)})
    (0, 56)
    """
    return _INTERVAL.visit(e, ranges)


class _Interval(Functor):
    """Integer bounds (see :func:`interval`); ``None`` where they are not known."""

    def visit_IntImm(self, e, ranges):
        return e.value, e.value

    def visit_Var(self, e, ranges):
        return ranges.get(id(e))

    def _both(self, e, ranges, combine):
        a, b = self.visit(e.a, ranges), self.visit(e.b, ranges)
        return None if a is None or b is None else combine(a, b)

    def visit_Add(self, e, ranges):
        return self._both(e, ranges, lambda a, b: (a[0] + b[0], a[1] + b[1]))

    def visit_Sub(self, e, ranges):
        return self._both(e, ranges, lambda a, b: (a[0] - b[1], a[1] - b[0]))

    def visit_Min(self, e, ranges):
        return self._both(e, ranges, lambda a, b: (min(a[0], b[0]), min(a[1], b[1])))

    def visit_Max(self, e, ranges):
        return self._both(e, ranges, lambda a, b: (max(a[0], b[0]), max(a[1], b[1])))

    def visit_Mul(self, e, ranges):
        def corners(a, b):
            prods = [x * y for x in a for y in b]
            return min(prods), max(prods)
        return self._both(e, ranges, corners)

    def _by_positive_constant(self, e, ranges, combine):
        a, k = self.visit(e.a, ranges), fold_int(e.b)
        return None if a is None or not k or k <= 0 else combine(a, k)

    def visit_FloorDiv(self, e, ranges):
        return self._by_positive_constant(e, ranges, lambda a, k: (a[0] // k, a[1] // k))

    def visit_FloorMod(self, e, ranges):
        return self._by_positive_constant(e, ranges, lambda a, k: (0, k - 1))

    def visit_Div(self, e, ranges):   # truncation is floor for a dividend >= 0
        r = self.visit_FloorDiv(e, ranges)
        return r if r is not None and r[0] >= 0 else None

    def visit_Mod(self, e, ranges):
        a = self.visit(e.a, ranges)
        return self.visit_FloorMod(e, ranges) if a is not None and a[0] >= 0 else None

    def visit_Call(self, e, ranges):
        """``&``, ``|`` and ``^`` of non-negative integers (a swizzled layout's XOR): below the
        next power of two of the larger bound (``&``: the smaller one)."""
        if e.name not in ("bitwise_and", "bitwise_or", "bitwise_xor") or not e.dtype.is_int:
            return None
        a, b = (self.visit(x, ranges) for x in e.args)
        if a is None or b is None or a[0] < 0 or b[0] < 0:
            return None
        if e.name == "bitwise_and":
            return 0, min(a[1], b[1])
        return 0, (1 << max(a[1], b[1]).bit_length()) - 1

    def generic(self, e, ranges):
        return None


_INTERVAL = _Interval()


def loop_ranges(s: Stmt) -> dict:
    """``{id(var): (lo, hi)}`` for the variables of the loops in ``s`` whose start and stop
    are constants (the union of the ranges where one variable is bound by several loops; a
    variable also bound by a loop with other bounds, or by a let, is left out), for
    :func:`interval`.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Store
    >>> A = Buffer("A", (8,), "int32"); i, j = Var("i"), Var("j")
    >>> r = loop_ranges(Block([For(i, 0, 4, Block([Store(A, (i,), 0)])), For(i, 2, 8, Block(())),
    ...                        For(j, 0, i + 1, Block(()))]))
    >>> r[id(i)], id(j) in r
    ((0, 7), False)
    """
    out: dict[int, tuple | None] = {}
    for x in iter_stmts(s):
        if isinstance(x, For):
            lo, hi = fold_int(x.start), fold_int(x.stop)
            key = id(x.var)
            if lo is None or hi is None or (key in out and out[key] is None):
                out[key] = None
            elif key in out:
                out[key] = (min(out[key][0], lo), max(out[key][1], hi - 1))
            else:
                out[key] = (lo, hi - 1)
        elif isinstance(x, LetStmt):
            out[id(x.var)] = None
    return {k: v for k, v in out.items() if v is not None}
