"""One lane of a vector expression as a scalar expression: what a backend computes when a
vector operation has to run lane by lane (an ``if_then_else`` with a vector condition that
may load only in the lanes that take a branch).

Lane ``k`` of ``ramp(b, s, n)`` is ``b + s * k``, of ``broadcast(v, n)`` is ``v``, of an
elementwise operation the operation on the operands' lanes, of a load at a vector index a
scalar load at that index's lane. A vector ``let`` variable becomes one scalar variable per
lane; a node with no per-lane form (a vector variable bound outside, an element of a buffer
of vector elements) is read whole and its lane taken (``ExtractLane``).

>>> from te import Buffer, Ramp, Var
>>> A = Buffer("A", (16,), "float32")
>>> i = Var("i")
>>> print(lane_of(A[Ramp(i, 2, 4)] * 3.0, 1))
A[i + 2 * 1] * 3.0f
>>> V = Buffer("V", (16,), "float32x4")
>>> print(lane_of(V[Ramp(i, 1, 2)], 5))
extract_lane(V[i + 1 * 1], 1)
"""
from __future__ import annotations

from . import expr as E
from .functor import Functor

__all__ = ["lane_of"]


class _Lanes(Functor):
    """``visit(e, k, vmap)``: the scalar expression of lane ``k`` of ``e`` (scalar parts are
    shared); ``vmap`` maps the vector variables of the enclosing lets to their lane variables.
    With ``whole_loads``, a load at a ramp or broadcast index is read whole and its lane taken."""

    def __init__(self, whole_loads: bool = False):
        super().__init__()
        self.whole_loads = whole_loads

    def visit(self, e: E.Expr, k: int, vmap: dict) -> E.Expr:
        if e.dtype.lanes == 1:
            # a scalar reads a vector let variable only through its lanes (extract_lane)
            lets = {v: lanes for v, lanes in vmap.items() if isinstance(v, E.Var)}
            return _LetLanes(lets).visit(e) if lets else e
        return super().visit(e, k, vmap)

    def visit_Ramp(self, e: E.Ramp, k: int, vmap: dict) -> E.Expr:
        return e.base if k == 0 else E.Add(e.base, E.Mul(e.stride, E.IntImm(k, e.base.dtype)))

    def visit_Broadcast(self, e: E.Broadcast, k: int, vmap: dict) -> E.Expr:
        return e.value

    def visit_MakeVector(self, e: E.MakeVector, k: int, vmap: dict) -> E.Expr:
        return self.visit(e.values[k], k, vmap)

    def visit_Var(self, e: E.Var, k: int, vmap: dict) -> E.Expr:
        return vmap[e][k] if e in vmap else E.ExtractLane(e, k)

    def visit_BinaryOp(self, e: E.BinaryOp, k: int, vmap: dict) -> E.Expr:
        return type(e)(self.visit(e.a, k, vmap), self.visit(e.b, k, vmap))

    visit_Add = visit_Sub = visit_Mul = visit_Div = visit_Mod = visit_FloorDiv = visit_FloorMod = visit_BinaryOp
    visit_Min = visit_Max = visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = visit_BinaryOp
    visit_And = visit_Or = visit_BinaryOp

    def visit_Not(self, e: E.Not, k: int, vmap: dict) -> E.Expr:
        return E.Not(self.visit(e.a, k, vmap))

    def visit_Cast(self, e: E.Cast, k: int, vmap: dict) -> E.Expr:
        return E.Cast(e.dtype.element, self.visit(e.value, k, vmap))

    def visit_Select(self, e: E.Select, k: int, vmap: dict) -> E.Expr:
        return type(e)(self.visit(e.cond, k, vmap), self.visit(e.t, k, vmap), self.visit(e.f, k, vmap))

    visit_IfThenElse = visit_Select

    def visit_Load(self, e: E.Load, k: int, vmap: dict) -> E.Expr:
        per = e.buffer.dtype.lanes          # lanes of one element of the buffer
        if not e.indices or (per > 1 and e.indices[-1].dtype.lanes == 1):
            return E.ExtractLane(e, k)      # one element holds every lane
        head, idx = e.indices[:-1], e.indices[-1]
        if self.whole_loads and type(idx) in (E.Ramp, E.Broadcast):
            return E.ExtractLane(e, k)
        if per == 1:
            return E.Load(e.buffer, head + (self.visit(idx, k, vmap),))
        # lane k is in element k // per: read that element only
        return E.ExtractLane(E.Load(e.buffer, head + (self.visit(idx, k // per, vmap),)), k % per)

    def visit_Call(self, e: E.Call, k: int, vmap: dict) -> E.Expr:
        return E.Call(e.name, [self.visit(a, k, vmap) for a in e.args], e.dtype.element)

    def visit_IndexCheck(self, e: E.IndexCheck, k: int, vmap: dict) -> E.Expr:
        return E.IndexCheck(self.visit(e.index, k, vmap), e.extent, e.buffer, e.dim)   # this lane's check only

    def visit_Let(self, e: E.Let, k: int, vmap: dict) -> E.Expr:
        if e.var.dtype.lanes == 1:
            return E.Let(e.var, e.value, self.visit(e.body, k, vmap))
        lane_vars = vmap.get(("let", e.var))
        if lane_vars is None:
            lane_vars = [E.Var(e.var.name, e.var.dtype.element) for _ in range(e.var.dtype.lanes)]
            vmap[("let", e.var)] = lane_vars
        inner = dict(vmap)
        inner[e.var] = lane_vars
        return E.Let(lane_vars[k], self.visit(e.value, k, vmap), self.visit(e.body, k, inner))

    def generic(self, e: E.Expr, k: int, vmap: dict) -> E.Expr:
        return E.ExtractLane(e, k)


class _LetLanes(E.ExprMutator):
    """A scalar expression with ``extract_lane(v, j)`` of the vector let variables ``v`` of
    ``lets`` replaced by their lane variables ``lets[v][j]``."""

    def __init__(self, lets: dict):
        super().__init__()
        self.lets = lets

    def visit_ExtractLane(self, e: E.ExtractLane) -> E.Expr:
        if isinstance(e.value, E.Var) and e.value in self.lets:
            return self.lets[e.value][e.lane]
        return self.generic(e)


_LANES = _Lanes()      # stateless
_LANES_WHOLE_LOADS = _Lanes(whole_loads=True)


def lane_of(e: E.Expr, k: int, vmap: dict | None = None, *, whole_loads: bool = False) -> E.Expr:
    """The scalar expression computing lane ``k`` of the vector expression ``e`` (``e``
    itself when it is a scalar). Pass one ``vmap`` dict to the calls for every lane of one
    expression so that each vector ``let`` variable gets one scalar variable per lane.
    ``whole_loads=True`` keeps a load at a ramp (or broadcast) index whole --
    ``extract_lane`` of that one load node in every lane -- for a target that reads such
    runs as whole vectors.

    >>> from te import Broadcast, Buffer, Ramp, Var, select
    >>> i = Var("i")
    >>> print(lane_of(select(Ramp(i, 1, 4) < Broadcast(i, 4), Ramp(i, 1, 4), Broadcast(0, 4)), 2))
    select(i + 1 * 2 < i, i + 1 * 2, 0)
    >>> A = Buffer("A", (8,), "float32")
    >>> print(lane_of(A[Ramp(i, 1, 4)] * 2.0, 3, whole_loads=True))
    extract_lane(A[ramp(i, 1, 4)], 3) * 2.0f
    """
    lanes = _LANES_WHOLE_LOADS if whole_loads else _LANES
    return lanes.visit(e, k, {} if vmap is None else vmap)
