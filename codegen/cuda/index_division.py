"""The ``cuda_index_division`` step: floor division of a non-negative index by a positive
constant becomes C division.

For ``a >= 0`` and a constant ``k > 0``, ``floordiv(a, k) == a / k`` and
``floormod(a, k) == a % k``, so in index arithmetic (the indices of loads and stores, loop
bounds; printed as plain C) such ``FloorDiv`` / ``FloorMod`` nodes are rewritten into the
truncating ``Div`` / ``Mod`` nodes, which the printer spells ``/`` and ``%``. ``a >= 0`` is
proved by :func:`codegen.cuda.ir_queries.nonneg`, with the loop variables counting up from
non-negative starts. Values outside indices are left alone: their arithmetic wraps, so
``nonneg`` does not hold for them.

>>> from te import Buffer, Compute, floordiv, floormod
>>> from loopnest import LoopNest
>>> A = Buffer("A", (16,), "float32")
>>> B = Compute("B", (4, 4), lambda i, j: A[floordiv(i * 4 + j, 2) + floormod(j, 2)])
>>> nest = LoopNest([B]).prepare_for_codegen()
>>> print(lower_index_division(nest.root))
for (int i = 0; i < 4; i++) {
  for (int j = 0; j < 4; j++) {
    B[i * 4 + j] = A[i * 2 + j / 2 + j % 2];
  }
}
"""
from __future__ import annotations

from te import expr as E
from te.queries import fold_int
from loopnest.stmt import For, Stmt, StmtMutator, Store, iter_stmts

from .ir_queries import nonneg

__all__ = ["lower_index_division", "nonneg_loop_vars"]


def nonneg_loop_vars(root: Stmt) -> set[int]:
    """The ids of the loop variables of ``root`` that are >= 0: loops counting up from a
    start that is (outer loops first).

    >>> from te import Var
    >>> from loopnest.stmt import Block, For
    >>> i, j = Var("i"), Var("j")
    >>> inner = For(j, i - 1, i + 4, Block(()))
    >>> sorted(v.name for v in (i, j) if id(v) in nonneg_loop_vars(For(i, 0, 4, inner)))
    ['i']
    """
    found: set[int] = set()
    for s in iter_stmts(root):   # pre-order: outer loops are known before inner ones
        if isinstance(s, For) and nonneg(s.start, found):
            found.add(id(s.var))
    return found


def lower_index_division(root: Stmt) -> Stmt:
    """``root`` with the floor divisions and remainders of its index arithmetic whose dividend
    is provably >= 0 and divisor a positive constant made C ``/`` and ``%`` (see the module
    docstring); unchanged subtrees are shared."""
    index = _IndexDivision(nonneg_loop_vars(root))
    return _Statements(index, _Values(index)).visit(root)


class _IndexDivision(E.ExprMutator):
    """Rewrites an index expression (and the indices of the loads inside it)."""

    def __init__(self, nonneg_vars: set[int]):
        self.nonneg_vars = nonneg_vars

    def _floor(self, e):
        e = self.generic(e)
        k = fold_int(e.b)
        if e.dtype.is_integer and k is not None and k > 0 and nonneg(e.a, self.nonneg_vars):
            return (E.Div if type(e) is E.FloorDiv else E.Mod)(e.a, e.b)
        return e

    visit_FloorDiv = visit_FloorMod = _floor


class _Values(E.ExprMutator):
    """Rewrites only the indices of the loads of a value expression."""

    def __init__(self, index: _IndexDivision):
        self.index = index

    def visit_Load(self, e: E.Load):
        indices = tuple(self.index.visit(i) for i in e.indices)
        return e if all(a is b for a, b in zip(indices, e.indices)) else e.replace(indices=indices)


class _Statements(StmtMutator):
    def __init__(self, index: _IndexDivision, values: _Values):
        self.index, self.values = index, values

    def visit_expr(self, e):
        return self.values.visit(e)

    def visit_For(self, s: For):
        s = self.generic(s)
        start, stop = self.index.visit(s.start), self.index.visit(s.stop)
        return s if start is s.start and stop is s.stop else s.replace(start=start, stop=stop)

    def visit_Store(self, s: Store):
        indices = tuple(self.index.visit(i) for i in s.indices)
        value = self.values.visit(s.value)
        if value is s.value and all(a is b for a, b in zip(indices, s.indices)):
            return s
        return s.replace(indices=indices, value=value)
