"""prepare_for_codegen's "vectorize" pass: vectorized loops become vector statements
(Ramp / Broadcast) where their bodies allow. ``loopnest.passes`` runs it after the
indices are flattened; loops it cannot lower stay vectorized loops.
"""
from __future__ import annotations

from te import expr as E
from te.expr import Broadcast, IntImm, Ramp, Var

from .lazy_analysis import legality_checks
from .stmt import Block, For, ForKind, Let, Stmt, StmtMutator, Store
from .transforms._rewrite import add, mul, sub, substitute_stmt, tidy

__all__ = ["lower_vectorized_loops"]


def lower_vectorized_loops(root: Stmt) -> Stmt:
    """Replace each vectorized loop of constant extent whose body holds only Stores and Lets
    by vector statements: the variable becomes ``ramp(start, 1, lanes)``, scalar operands
    next to vector ones become broadcasts, loads with a vector index become vector loads.

    Before / after (indices already flattened)::

        vectorized for (int i_inner = 0; i_inner < 4; i_inner++) {
          B[i_outer * 4 + i_inner] = A[i_outer * 4 + i_inner] + 1.0f;
        }
        ->  B[ramp(i_outer * 4, 1, 4)] = A[ramp(i_outer * 4, 1, 4)] + broadcast(1.0f, 4);

    Loops it cannot lower stay vectorized loops (backends run them serially, with a hint):
    inner loops or ifs in the body, a store whose index does not depend on the loop, an
    ``if_then_else`` whose condition varies across lanes, a non-constant extent. Lowering
    runs the statements of the body one after the other for all lanes, which the legality
    check of ``vectorize`` (no dependence carried by the loop) makes equivalent to the loop.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Block, For, ForKind, Store
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    >>> i = Var("i")
    >>> loop = For(i, 0, 8, Block((Store(B, (i,), A[i] + 1.0),)), ForKind.VECTORIZED)
    >>> print(lower_vectorized_loops(Block((loop,))))
    B[ramp(0, 1, 8)] = A[ramp(0, 1, 8)] + broadcast(1.0f, 8);
    """
    return _LowerVectorized().visit(root)


class _LowerVectorized(StmtMutator):
    def visit_For(self, s: For):
        s = self.generic(s)
        if s.kind != ForKind.VECTORIZED:
            return s
        out = _vectorize_loop(s)
        return s if out is None else out


def _vectorize_loop(f: For) -> Stmt | None:
    n = legality_checks().constant_extent(f)
    if n is None or n < 1:
        return None
    if n == 1:
        return substitute_stmt(f.body, {f.var: f.start})
    try:
        v = _Vectorizer(f.var, tidy(f.start), n)
        return v.stmt(f.body)
    except TypeError:  # some node cannot take vector operands: leave the loop
        return None


class _Fail(Exception):
    pass


class _Vectorizer:
    """Rewrite a loop body for all lanes at once; ``None`` when some construct cannot be."""

    def __init__(self, var: Var, start: E.Expr, lanes: int):
        self.var = var
        self.lanes = lanes
        self.ramp = Ramp(start, IntImm(1, var.dtype), lanes)
        self.env: dict = {}

    # -- statements --------------------------------------------------------------------
    def stmt(self, s: Stmt) -> Stmt | None:
        try:
            return self._stmt(s)
        except _Fail:
            return None

    def _stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, Block):
            return Block(tuple(self._stmt(x) for x in s.stmts))
        if isinstance(s, Store):
            idx = [self.expr(i) for i in s.indices]
            if (not idx or not idx[-1].dtype.is_vector or isinstance(idx[-1], Broadcast)
                    or any(i.dtype.is_vector for i in idx[:-1])):
                raise _Fail  # a lane-invariant store (or a vector index not in the last place)
            value = self.expr(s.value)
            return Store(s.buffer, tuple(idx), self.bc(value))
        if isinstance(s, Let):
            value = self.expr(s.value)
            if value.dtype.is_vector:
                nv = Var(s.var.name, value.dtype)
                self.env[s.var] = nv
                return Let(nv, value, self._stmt(s.body))
            return Let(s.var, value, self._stmt(s.body))
        raise _Fail

    # -- expressions -------------------------------------------------------------------
    def bc(self, e: E.Expr) -> E.Expr:
        return e if e.dtype.is_vector else Broadcast(e, self.lanes)

    def expr(self, e: E.Expr) -> E.Expr:
        t = type(e)
        if t is Var:
            if e is self.var:
                return self.ramp
            return self.env.get(e, e)
        if t in (E.IntImm, E.FloatImm):
            return e
        if t in (Ramp, Broadcast):
            raise _Fail
        if isinstance(e, E.BinaryOp):
            a, b = self.expr(e.a), self.expr(e.b)
            if not (a.dtype.is_vector or b.dtype.is_vector):
                return e.replace(a=a, b=b)
            r = _ramp_arith(t, a, b)
            if r is not None:
                return r
            return t(self.bc(a), self.bc(b))
        if t is E.Not:
            a = self.expr(e.a)
            return e.replace(a=a)
        if t is E.Cast:
            a = self.expr(e.value)
            if not a.dtype.is_vector:
                return e.replace(value=a)
            if isinstance(a, Ramp) and e.dtype.is_integer:
                return Ramp(tidy(E.Cast(e.dtype, a.base)), tidy(E.Cast(e.dtype, a.stride)), a.lanes)
            return E.Cast(e.dtype.with_lanes(self.lanes), a)
        if t is E.Select or t is E.IfThenElse:
            c, x, y = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
            if not any(z.dtype.is_vector for z in (c, x, y)):
                return e.replace(cond=c, t=x, f=y)
            if t is E.IfThenElse and c.dtype.is_vector:
                raise _Fail  # only the taken side may be evaluated, lane by lane
            return t(c, self.bc(x), self.bc(y))
        if t is E.Load:
            idx = [self.expr(i) for i in e.indices]
            if not any(i.dtype.is_vector for i in idx):
                return e.replace(indices=tuple(idx))
            if any(i.dtype.is_vector for i in idx[:-1]):
                raise _Fail
            return E.Load(e.buffer, tuple(idx))
        if t is E.Let:
            value = self.expr(e.value)
            if value.dtype.is_vector:
                nv = Var(e.var.name, value.dtype)
                self.env[e.var] = nv
                body = self.expr(e.body)
                return E.Let(nv, value, body)
            return e.replace(value=value, body=self.expr(e.body))
        if t is E.Call:
            args = [self.expr(a) for a in e.args]
            if not any(a.dtype.is_vector for a in args):
                return e.replace(args=tuple(args))
            return E.Call(e.name, [self.bc(a) for a in args], e.dtype.with_lanes(self.lanes))
        raise _Fail


def _ramp_arith(t, a: E.Expr, b: E.Expr) -> E.Expr | None:
    """Keep integer index arithmetic in Ramp form: ramp + x, ramp - x, ramp * x, ramp + ramp."""
    if not (a.dtype.is_integer and b.dtype.is_integer):
        return None
    ra, rb = isinstance(a, Ramp), isinstance(b, Ramp)
    sa, sb = not a.dtype.is_vector, not b.dtype.is_vector
    lanes = a.lanes if ra else b.lanes if rb else None
    if lanes is None:
        return None
    if t is E.Add:
        if ra and sb:
            return _ramp(add(a.base, b), a.stride, lanes)
        if sa and rb:
            return _ramp(add(a, b.base), b.stride, lanes)
        if ra and rb:
            return _ramp(add(a.base, b.base), add(a.stride, b.stride), lanes)
    if t is E.Sub:
        if ra and sb:
            return _ramp(sub(a.base, b), a.stride, lanes)
        if sa and rb:
            return _ramp(sub(a, b.base), sub(IntImm(0, b.stride.dtype), b.stride), lanes)
        if ra and rb:
            return _ramp(sub(a.base, b.base), sub(a.stride, b.stride), lanes)
    if t is E.Mul:
        if ra and sb:
            return _ramp(mul(a.base, b), mul(a.stride, b), lanes)
        if sa and rb:
            return _ramp(mul(a, b.base), mul(a, b.stride), lanes)
    return None


def _ramp(base: E.Expr, stride: E.Expr, lanes: int) -> E.Expr:
    base, stride = tidy(base), tidy(stride)
    if isinstance(stride, IntImm) and stride.value == 0:
        return Broadcast(base, lanes)
    return Ramp(base, stride, lanes)
