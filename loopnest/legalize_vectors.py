"""Vector legalisation: every decision to compute a vector expression lane by lane, made once
in the IR so that a printer emits each node whole (scalar or vector) and never re-visits an
expression for one lane.

``legalize_vectors`` (a pass of ``loopnest.passes.TARGET_PASSES``):

* an ``if_then_else`` whose branches load nothing is a ``select`` (computing both sides is
  safe and cheaper than branching);
* an ``if_then_else`` with a vector condition and a load in a branch must load only in the
  lanes that take that branch: it becomes ``make_vector`` of one scalar ``if_then_else`` per
  lane, each lane computed by ``te.lanes.lane_of`` (a ramp's lane ``k`` is ``base + stride *
  k``, a load at a vector index a scalar load at that lane, ...).

Before::

    B[ramp(i * 4, 1, 4)] = if_then_else(ramp(i * 4, 1, 4) < broadcast(n, 4), A[ramp(i * 4, 1, 4)],
                                        broadcast(0.0f, 4));

After::

    B[ramp(i * 4, 1, 4)] = make_vector(if_then_else(i * 4 < n, A[i * 4], 0.0f),
                                       if_then_else(i * 4 + 1 * 1 < n, A[i * 4 + 1 * 1], 0.0f), ...);

>>> from te import Broadcast, Buffer, Ramp, Var, float32, if_then_else
>>> from loopnest.stmt import Store
>>> A, B = Buffer("A", (8,), float32), Buffer("B", (8,), float32)
>>> i = Var("i")
>>> idx = Ramp(i, 1, 2)
>>> s = Store(B, [idx], if_then_else(idx < Broadcast(Var("n"), 2), A[idx], Broadcast(0.0, 2)))
>>> print(legalize_vectors(None, s))
B[ramp(i, 1, 2)] = make_vector(if_then_else(i < n, A[i], 0.0f), if_then_else(i + 1 * 1 < n, A[i + 1 * 1], 0.0f));
"""
from __future__ import annotations

from te import expr as E
from te.lanes import lane_of
from te.queries import has_load

from .stmt import Stmt, StmtMutator

__all__ = ["legalize_vectors"]


class _Legalize(E.ExprMutator):
    def visit_IfThenElse(self, e: E.IfThenElse) -> E.Expr:
        e = self.generic(e)
        if not (has_load(e.t) or has_load(e.f)):
            return E.Select(e.cond, e.t, e.f)
        if e.cond.dtype.lanes == 1:
            return e
        vmap: dict = {}
        return E.MakeVector([E.IfThenElse(lane_of(e.cond, k, vmap), lane_of(e.t, k, vmap), lane_of(e.f, k, vmap))
                             for k in range(e.dtype.lanes)])


class _LegalizeStmt(StmtMutator):
    def visit_expr(self, e: E.Expr) -> E.Expr:
        return _Legalize().visit(e)


def legalize_vectors(nest, root: Stmt) -> Stmt:
    """``root`` with every per-lane computation explicit (see the module docstring): an
    ``if_then_else`` that loads nothing is a ``select``; one with a vector condition that
    loads is a ``make_vector`` of per-lane scalar ``if_then_else``. ``nest`` is unused (the
    pass signature of ``loopnest.passes``)."""
    return _LegalizeStmt().visit(root)
