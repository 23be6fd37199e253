"""Vector legalisation: every decision to compute a vector expression lane by lane, made once
in the IR so that a printer emits each node whole (scalar or vector) and never re-visits an
expression for one lane. ``scalarize_vectors`` (CUDA, after ``legalize_vectors``) goes
further for a target without vector arithmetic: every vector store's value becomes its lanes
(see its docstring).

``legalize_vectors`` (a pass of ``loopnest.passes.TARGET_PASSES``, LLVM and CUDA):

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
from te.queries import has_load, int_value

from .stmt import LetStmt, Stmt, StmtMutator, Store

__all__ = ["is_masked_load", "legalize_vectors", "scalarize_vectors"]


class _Legalize(E.ExprMutator):
    def __init__(self, masked_loads: bool):
        self.masked_loads = masked_loads

    def visit_IfThenElse(self, e: E.IfThenElse) -> E.Expr:
        e = self.generic(e)
        if not (has_load(e.t) or has_load(e.f)):
            return E.Select(e.cond, e.t, e.f)
        if e.cond.dtype.lanes == 1 or (self.masked_loads and is_masked_load(e)):
            return e
        vmap: dict = {}
        return E.MakeVector([E.IfThenElse(lane_of(e.cond, k, vmap), lane_of(e.t, k, vmap), lane_of(e.f, k, vmap))
                             for k in range(e.dtype.lanes)])


class _LegalizeStmt(StmtMutator):
    def __init__(self, masked_loads: bool):
        self.masked_loads = masked_loads

    def visit_expr(self, e: E.Expr) -> E.Expr:
        return _Legalize(self.masked_loads).visit(e)


def legalize_vectors(nest, root: Stmt, masked_loads: bool = False) -> Stmt:
    """``root`` with every per-lane computation explicit (see the module docstring): an
    ``if_then_else`` that loads nothing is a ``select``; one with a vector condition that
    loads is a ``make_vector`` of per-lane scalar ``if_then_else``, but, with
    ``masked_loads`` (LLVM), a masked load (``is_masked_load``) stays whole. ``nest`` is
    unused (the pass signature of ``loopnest.passes``)."""
    return _LegalizeStmt(masked_loads).visit(root)


def is_masked_load(e: E.Expr) -> bool:
    """Whether ``e`` is ``if_then_else(mask, A[ramp(base, 1, n)], c)``: a vector condition, a
    load of consecutive elements of a buffer of scalar elements, a constant for the other
    lanes. LLVM computes it as one ``llvm.masked.load``, which reads only the lanes of the
    mask, as the ``if_then_else`` says.

    >>> from te import Broadcast, Buffer, Ramp, Var, float32, if_then_else
    >>> A = Buffer("A", (8,), float32); idx = Ramp(Var("i"), 1, 4)
    >>> is_masked_load(if_then_else(idx < Broadcast(Var("n"), 4), A[idx], Broadcast(0.0, 4)))
    True
    """
    if not (isinstance(e, E.IfThenElse) and e.cond.dtype.is_vector and isinstance(e.t, E.Load)):
        return False
    idx, dt = e.t.indices, e.t.buffer.dtype
    other = e.f.value if isinstance(e.f, E.Broadcast) else e.f
    return (len(idx) == 1 and isinstance(idx[0], E.Ramp) and int_value(idx[0].stride) == 1 and dt.lanes == 1
            and not (dt.is_bool or dt.is_lowp_float) and isinstance(other, (E.IntImm, E.FloatImm)))


def _lanes(e: E.Expr, lanes: int) -> E.Expr:
    """``e`` as a make_vector of its ``lanes`` scalar lanes (loads at ramp indices kept whole)."""
    if type(e) is E.MakeVector:
        return e
    vmap: dict = {}
    return E.MakeVector([lane_of(e, k, vmap, whole_loads=True) for k in range(lanes)])


class _Scalarize(StmtMutator):
    def visit_Store(self, s: Store) -> Stmt:
        lanes = max([s.value.dtype.lanes] + [ix.dtype.lanes for ix in s.indices])
        if lanes == 1:
            return s
        value = _lanes(s.value, lanes) if s.value.dtype.is_vector else E.MakeVector([s.value] * lanes)
        indices = tuple(ix if ix.dtype.lanes == 1 or type(ix) in (E.Ramp, E.Broadcast) else _lanes(ix, ix.dtype.lanes)
                        for ix in s.indices)
        return Store(s.buffer, indices, value)

    def visit_LetStmt(self, s: LetStmt) -> Stmt:
        body = self.visit(s.body)
        if not s.var.dtype.is_vector:
            return s if body is s.body else LetStmt(s.var, s.value, body)
        return LetStmt(s.var, _lanes(s.value, s.var.dtype.lanes), body)


def scalarize_vectors(nest, root: Stmt) -> Stmt:
    """``root`` with the value of every vector store and vector ``let`` statement a
    ``make_vector`` of scalar lane expressions (``te.lanes.lane_of``), for a target without
    vector arithmetic (CUDA C): a printer then emits each lane's scalar expression whole.
    A load of a scalar buffer at a ramp index stays one vector load whose lanes are taken
    (``extract_lane``), so that the target may read it as whole vectors; a vector variable
    of a ``let`` statement is read lane by lane the same way. A store index that is neither
    scalar, a ramp nor a broadcast becomes a ``make_vector`` of its lanes too.

    Before::

        B[ramp(i * 2, 1, 2)] = A[ramp(i * 2, 1, 2)] * broadcast(2.0f, 2);

    After::

        B[ramp(i * 2, 1, 2)] = make_vector(extract_lane(A[ramp(i * 2, 1, 2)], 0) * 2.0f,
                                           extract_lane(A[ramp(i * 2, 1, 2)], 1) * 2.0f);

    >>> from te import Broadcast, Buffer, Ramp, Var, float32
    >>> from loopnest.stmt import Store
    >>> A, B = Buffer("A", (8,), float32), Buffer("B", (8,), float32)
    >>> idx = Ramp(Var("i") * 2, 1, 2)
    >>> print(scalarize_vectors(None, Store(B, [idx], A[idx] * Broadcast(2.0, 2))))
    B[ramp(i * 2, 1, 2)] = make_vector(extract_lane(A[ramp(i * 2, 1, 2)], 0) * 2.0f, \
extract_lane(A[ramp(i * 2, 1, 2)], 1) * 2.0f);
    """
    return _Scalarize().visit(root)
