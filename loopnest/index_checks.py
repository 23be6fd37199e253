"""The run-time index checks of data-dependent accesses, as IR (a lowering pass).

Bounds inference checks, when a kernel is called, every access whose index is an affine
function of the loop variables and sizes (``loopnest.analysis.regions``). An index that
depends on loaded data (a histogram's ``H[A[i]]``, a variable bound to a load, a loop whose
bounds are loaded; ``loopnest.data_dependence``) cannot be checked before the
kernel runs. ``guard_data_dependent_indices`` wraps each such index, per dimension, in a
``te.expr.IndexCheck`` of that dimension's extent; it runs before ``flatten_indices``, so
``H[r, k]`` with ``k`` past its own dimension fails even where the flat offset ``r * 4 + k``
would stay inside the buffer. The backends only print the node: IREval raises
``IndexError``; LLVM returns ``INDEX_OUT_OF_RANGE`` plus the check's site and CUDA stores the
site in the module's error flag, and the call raises ``IndexError`` naming the buffer and
dimension. ``build(..., bounds_check=False)`` removes the checks (``drop_index_checks``).

>>> from te import Buffer, Var
>>> from loopnest.stmt import Block, For, Store
>>> A, H = Buffer("A", (8,), "int32"), Buffer("H", (3, 4), "int32")
>>> r, i = Var("r"), Var("i")
>>> root = For(r, 0, 3, Block([For(i, 0, 8, Block([Store(H, (r, A[i]), H[r, A[i]] + 1)]))]))
>>> checked = guard_data_dependent_indices(None, root)
>>> print(checked)
for (int r = 0; r < 3; r++) {
  for (int i = 0; i < 8; i++) {
    H[r, check_index(A[i], 4, H, 1)] = H[r, check_index(A[i], 4, H, 1)] + 1;
  }
}
>>> print(drop_index_checks(None, checked))
for (int r = 0; r < 3; r++) {
  for (int i = 0; i < 8; i++) {
    H[r, A[i]] = H[r, A[i]] + 1;
  }
}
"""
from __future__ import annotations

from te import expr as E

from .data_dependence import data_dependent_vars, needs_check
from .stmt import Stmt, StmtMutator, Store

__all__ = ["guard_data_dependent_indices", "drop_index_checks"]


def _checked(buf, indices: tuple, dd: dict) -> tuple:
    """``indices`` of ``buf`` with each data-dependent one wrapped in an IndexCheck."""
    return tuple(E.IndexCheck(ix, buf.dims[d], buf.name, d)
                 if not _checks(ix, buf, d) and needs_check(ix, dd) else ix
                 for d, ix in enumerate(indices))


def _checks(ix: E.Expr, buf, d: int) -> bool:
    """Whether ``ix`` is already the check of dimension ``d`` of ``buf`` (a check of another
    buffer's dimension, an inlined tensor's, still needs this one)."""
    return isinstance(ix, E.IndexCheck) and (ix.buffer, ix.dim) == (buf.name, d)


class _CheckExpr(E.ExprMutator):
    memoize = True

    def __init__(self, dd: dict):
        self.dd = dd

    def visit_Load(self, e: E.Load) -> E.Expr:
        idx = tuple(self.visit(i) for i in e.indices)
        new = _checked(e.buffer, idx, self.dd)
        return e if all(a is b for a, b in zip(new, e.indices)) else E.Load(e.buffer, new)


class _CheckStmt(StmtMutator):
    def __init__(self, dd: dict):
        self.ex = _CheckExpr(dd)

    def visit_expr(self, e: E.Expr) -> E.Expr:
        return self.ex.visit(e)

    def visit_Store(self, s: Store) -> Store:
        idx = _checked(s.buffer, tuple(self.ex.visit(i) for i in s.indices), self.ex.dd)
        return s.replace(indices=idx if any(a is not b for a, b in zip(idx, s.indices)) else s.indices,
                         value=self.ex.visit(s.value))


def guard_data_dependent_indices(nest, root: Stmt) -> Stmt:
    """``root`` with every data-dependent index of a load or store checked against its
    dimension (see the module docstring); ``nest`` is unused (the pass signature)."""
    return _CheckStmt(data_dependent_vars(root)).visit(root)


class _DropExpr(E.ExprMutator):
    memoize = True

    def visit_IndexCheck(self, e: E.IndexCheck) -> E.Expr:
        return self.visit(e.index)


class _DropStmt(StmtMutator):
    def __init__(self):
        self.ex = _DropExpr()

    def visit_expr(self, e: E.Expr) -> E.Expr:
        return self.ex.visit(e)


def drop_index_checks(nest, root: Stmt) -> Stmt:
    """``root`` without its ``IndexCheck`` nodes (each replaced by its index): what
    ``build(..., bounds_check=False)`` runs; ``nest`` is unused (the pass signature)."""
    return _DropStmt().visit(root)
