"""The regions of a kernel's argument buffers that its statement tree touches, and the sizes
for which they leave the buffer: what ``codegen.build`` checks before a kernel runs.

For each argument buffer and each of its dimensions, every access (a Load or a Store) whose
iteration domain and index are quasi-affine (see ``domains``) contributes the indices it
touches. An access through a ``TensorView``, or one already flattened by
``prepare_for_codegen``, counts against the element offset into the buffer's storage
(``axis is None``, checked against the number of elements). isl then gives, as sets
parametric in the size variables:

* ``region``: the indices touched (one-dimensional);
* ``touched``: the sizes for which anything is touched at all;
* ``violation``: the sizes for which some touched index is outside ``[0, limit)``.

An access that cannot be represented exactly (a non-affine index such as ``A[B[i]]`` or
``A[i * N]``, or one under a non-affine loop bound or condition) is left out, and its
dimension is listed in ``Regions.unchecked``: leaving accesses out only shrinks the region,
so a reported violation is always real. Loads on the untaken side of an ``if_then_else`` or
behind a scalar ``&&`` / ``||`` only count where they execute; both sides of a ``select``
count (both are evaluated).

>>> from te import Buffer, Compute, Var
>>> from loopnest import LoopNest
>>> N = Var("N"); A = Buffer("A", (N,), "float32"); W = Buffer("W", (4,), "float32")
>>> B = Compute("B", (N,), lambda i: A[i] * W[i])
>>> r = argument_regions(LoopNest([B]).root, [A, W, B])
>>> [(c.buffer.name, c.axis, str(c.min_expr()), str(c.max_expr())) for c in r.axes]
[('A', 0, '0', 'N - 1'), ('W', 0, '0', 'N - 1'), ('B', 0, '0', 'N - 1')]
>>> w = r.axes[1]
>>> w.needs_check, w.always_violated(), str(w.violation_condition())
(True, False, 'N >= 5')
>>> w.region_at({id(N): 6})
(0, 5)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property, reduce
from typing import Any, Sequence

import islpy as isl

from te import expr as E
from te.dtypes import int32, int64
from te.functor import Functor

from ..queries import stmt_free_vars, stmt_loads
from ..stmt import Block, Cond, For, Let, Stmt, Store
from .domains import Analysis, _LetBinding, _PwConverter, loop_domain

__all__ = ["AxisRegion", "Regions", "argument_regions"]


@dataclass(eq=False)
class _Touch:
    """One exactly represented access along one axis: its index on its iteration domain."""

    access: tuple   # (buffer, indices, is_write) as written in the tree
    index: Any      # isl.PwAff on the domain's space
    domain: Any     # isl.Set of the iterations that execute it
    limit: Any      # isl.PwAff on the same space: the indices must stay below it

    @property
    def text(self) -> str:
        from te.printer import expr_to_str
        buf, indices, is_write = self.access
        return f"{buf.name}[{', '.join(expr_to_str(i) for i in indices)}]" + (" (write)" if is_write else "")


@dataclass(eq=False)
class AxisRegion:
    """What the kernel touches of one dimension (``axis``) of an argument buffer, or of its
    storage as a whole (``axis is None``: element offsets, against ``limit`` elements).

    ``needs_check`` is False when no size puts the region outside ``[0, limit)``;
    ``always_violated(runs)`` is True when every size that runs the kernel does.

    >>> from te import Buffer, Compute
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8,), "float32")
    >>> C = Compute("C", (8,), lambda i: A[i + 100000000])
    >>> a = argument_regions(LoopNest([C]).root, [A, C]).axes[0]
    >>> a.region_at({}), a.always_violated(), a.accesses_out_of_range({})
    ((100000000, 100000007), True, ['A[i + 100000000]'])
    """

    buffer: Any
    axis: int | None
    limit: E.Expr
    params: list                # the size Vars, in isl parameter order
    violation: Any              # isl parameter set (within ``context``)
    context: Any                # what every call satisfies: argument dimensions >= 0, ...
    touches: list = field(default_factory=list, repr=False)

    @cached_property
    def region(self):
        """The indices touched: an isl set ``{ [x] }`` over the size parameters."""
        sets = [isl.Map.from_pw_aff(t.index.intersect_domain(t.domain)).range() for t in self.touches]
        return reduce(lambda a, b: a.union(b), sets).coalesce()

    @cached_property
    def touched(self):
        """The sizes for which some index is touched (an isl parameter set)."""
        return reduce(lambda a, b: a.union(b), [t.domain.params() for t in self.touches]).coalesce()

    @property
    def needs_check(self) -> bool:
        """True when some sizes put the region outside ``[0, limit)``."""
        return not self.violation.is_empty()

    def always_violated(self, runs=None) -> bool:
        """True when some size touches the buffer and every size at which the kernel runs
        leaves ``[0, limit)``. ``runs``: the sizes at which the kernel touches anything
        (``Regions.touched``); by default those that touch this region. A size that runs the
        kernel without reaching this region's accesses is a valid call (a guarded access
        reached only for large sizes: seed 142, case 487)."""
        t = (self.touched if runs is None else runs).intersect(self.context)
        return self.needs_check and not t.is_empty() and t.is_subset(self.violation)

    def violation_condition(self) -> E.Expr | None:
        """A bool expression of the sizes, true exactly where the region leaves the buffer
        (for sizes in the context); the constant false when it never does; None when isl's
        answer cannot be written as an expression."""
        v = self.violation.gist(self.context).coalesce().compute_divs()
        try:
            pieces = [_basic_set_expr(bs, self.params) for bs in v.get_basic_sets()]
        except _NotExpressible:
            return None
        if not pieces:
            return E.const(False, "bool")
        return reduce(lambda a, b: E.Or(a, b), pieces)

    def min_expr(self) -> E.Expr | None:
        """The smallest index touched as an expression of the sizes (None when isl's
        piecewise answer is not a min / max of affine pieces)."""
        return self._bound(self.region.dim_min(0))

    def max_expr(self) -> E.Expr | None:
        """The largest index touched as an expression of the sizes (see ``min_expr``)."""
        return self._bound(self.region.dim_max(0))

    def _bound(self, pw) -> E.Expr | None:
        from .bounds import RegionError, pw_aff_to_expr
        try:
            return pw_aff_to_expr(pw, self.params, self.limit.dtype)
        except (RegionError, isl.Error):
            return None

    def _fix(self, s, values: dict):
        for k, v in enumerate(self.params):
            if id(v) in values:
                s = s.fix_val(isl.dim_type.param, k, isl.Val(str(int(values[id(v)]))))
        return s

    def region_at(self, values: dict) -> tuple[int, int] | None:
        """``(min, max)`` of the indices touched for sizes ``{id(var): int}``; None when
        nothing is touched for them."""
        r = self._fix(self.region, values)
        if r.is_empty():
            return None
        lo, hi = r.dim_min_val(0), r.dim_max_val(0)
        if not (lo.is_int() and hi.is_int()):
            return None
        return int(lo.to_python()), int(hi.to_python())

    def accesses_out_of_range(self, values: dict) -> list[str]:
        """The text of each access that leaves ``[0, limit)`` for sizes ``{id(var): int}``."""
        out = []
        for t in self.touches:
            if t.text not in out and not self._fix(_outside(t).params(), values).is_empty():
                out.append(t.text)
        return out


@dataclass(eq=False)
class Regions:
    """``axes``: an AxisRegion per (argument buffer, dimension) touched by an exact access;
    ``unchecked``: ``(buffer, axis)`` pairs with an access that bounds inference cannot
    represent (``axis is None``: an offset into the storage).

    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> A = Buffer("A", (8,), "float32"); I = Buffer("I", (8,), "int32")
    >>> G = Compute("G", (8,), lambda i: A[I[i]])        # a data-dependent index
    >>> r = argument_regions(LoopNest([G]).root, [A, I, G])
    >>> [(b.name, axis) for b, axis in r.unchecked], [c.buffer.name for c in r.axes]
    ([('A', 0)], ['I', 'G'])
    """

    axes: list
    unchecked: list

    @cached_property
    def touched(self):
        """The sizes for which the kernel touches any argument (an isl parameter set; None
        without exact accesses)."""
        sets = [a.touched for a in self.axes]
        return reduce(lambda a, b: a.union(b), sets).coalesce() if sets else None


class _NotExpressible(Exception):
    """An isl constraint that the violation condition cannot hold (internal)."""


class _Model(Analysis):
    """The isl spaces of one region computation: ``Analysis``' spaces and constants over a
    given list of size parameters, without analysing a tree."""

    def __init__(self, params: list):
        self.ctx = isl.DEFAULT_CONTEXT
        self.params = {f"p{k}": v for k, v in enumerate(params)}
        self._param_pos = {id(v): k for k, v in enumerate(params)}
        self._spaces: dict = {}
        self._consts: dict = {}


def argument_regions(root: Stmt, buffers: Sequence[Any], flattened: bool = False) -> Regions:
    """The regions of ``buffers`` (the kernel's argument buffers) touched by ``root``.

    ``root`` is a nest's statement tree before ``prepare_for_codegen`` (regions per
    dimension), or after it with ``flattened=True`` (every access holds one element offset,
    so a buffer of several dimensions or with a layout gets one storage-wide region).

    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> N = Var("N"); A = Buffer("A", (N,), "float32")
    >>> B = Compute("B", (N,), lambda i: A[i + 1])
    >>> a = argument_regions(LoopNest([B]).root, [A, B]).axes[0]
    >>> str(a.min_expr()), str(a.max_expr()), a.always_violated()
    ('1', 'N', True)
    """
    from te.view import TensorView
    targets = {id(b): b for b in buffers if not isinstance(b, TensorView)}
    params = _params(root, targets.values())
    model = _Model(params)
    w = _Walker(model, targets, flattened)
    w.stmt(root, 0, {}, model.space(0)[2], True)
    context = _context(model, targets.values(), params)
    axes, unchecked = [], []
    for b in targets.values():
        keys = [k for k in [None] + list(range(b.ndim)) if (id(b), k) in w.touches or (id(b), k) in w.unknown]
        for k in keys:
            touches = w.touches.get((id(b), k), [])
            if (id(b), k) in w.unknown:
                unchecked.append((b, k))
            if touches:
                axes.append(_axis_region(model, b, k, touches, context))
    return Regions(axes, unchecked)


def _axis_region(model: _Model, b, axis, touches: list, context) -> AxisRegion:
    violation = reduce(lambda a, b: a.union(b), [_outside(t).params() for t in touches])
    return AxisRegion(b, axis, _limit_expr(b, axis), list(model.params.values()),
                      violation.intersect(context).coalesce(), context, touches)


def _outside(t: _Touch):
    """The iterations of ``t`` whose index is below 0 or at least its limit."""
    return t.domain.subtract(t.index.nonneg_set()).union(t.index.ge_set(t.limit).intersect(t.domain))


def _limit_expr(b, axis) -> E.Expr | None:
    """What the indices of ``axis`` must stay below: the dimension, or for a storage-wide
    region the number of elements (the layout's cosize for a laid-out buffer)."""
    if axis is not None:
        return b.dims[axis]
    if b.layout is not None:
        n = b.layout.cosize
        return E.IntImm(n, int64) if isinstance(n, int) else None
    if not b.dims:
        return E.IntImm(1, int32)
    return reduce(lambda x, y: x * y, b.dims)


def _params(root: Stmt, buffers) -> list:
    """The size variables: integer variables of ``root`` that no loop or let binds, and
    those of the buffers' shapes and of views' strides and offsets, in a fixed order."""
    from te.view import TensorView
    extra: list = [d for b in buffers for d in b.dims]
    for ld in stmt_loads(root):
        if isinstance(ld.buffer, TensorView):
            extra.extend(_view_exprs(ld.buffer))
    return [v for v in stmt_free_vars(root, extra, allocations=False)
            if v.dtype.is_integer and not v.dtype.is_vector]


def _view_exprs(v) -> list:
    from te.view import TensorView
    out = []
    while isinstance(v, TensorView):
        out += list(v.dims) + list(v._strides) + [v.offset]
        v = v.base
    return out


def _context(model: _Model, buffers, params) -> Any:
    """What every call satisfies: argument dimensions (affine ones) are >= 0, and so are
    unsigned size variables."""
    conv = _PwConverter(model, 0, {})
    zero = model.const(0, 0)
    c = model.space(0)[2]
    for b in buffers:
        for d in b.dims:
            pa = conv.aff(d)
            if pa is not None:
                c = c.intersect(pa.ge_set(zero))
    for v in params:
        if v.dtype.is_uint:
            c = c.intersect(conv.aff(v).ge_set(zero))
    return c.params()


class _Walker(Functor):
    """Collect, per (argument buffer, axis), the exactly represented accesses (``touches``)
    and the axes with an access that is not (``unknown``).

    ``stmt`` dispatches on the statement class to ``visit_<Class>(s, depth, env, dom, exact)``
    (``te.functor.Functor``), ``expr`` on the expression class through ``_ExprWalker``.
    """

    def __init__(self, model: _Model, targets: dict, flattened: bool):
        self.model = model
        self.targets = targets
        self.flattened = flattened
        self.touches: dict[tuple, list] = {}
        self.unknown: set = set()
        self._limits: dict = {}
        self._exprs = _ExprWalker(self)

    # -- statements --------------------------------------------------------------------
    def stmt(self, s: Stmt, depth: int, env: dict, dom, exact: bool) -> None:
        self.visit(s, depth, env, dom, exact)

    def visit_Block(self, s: Block, depth: int, env: dict, dom, exact: bool) -> None:
        for x in s.stmts:
            self.visit(x, depth, env, dom, exact)

    def visit_Store(self, s: Store, depth: int, env: dict, dom, exact: bool) -> None:
        for e in list(s.indices) + [s.value]:
            self.expr(e, depth, env, dom, exact)
        self.access((s.buffer, s.indices, True), depth, env, dom, exact)

    def visit_For(self, s: For, depth: int, env: dict, dom, exact: bool) -> None:
        self.expr(s.start, depth, env, dom, exact)
        self.expr(s.stop, depth, env, dom, exact)
        inner, bounded = loop_domain(self.model, s, depth, env, dom)
        inner_env = dict(env)
        inner_env[id(s.var)] = depth
        self.visit(s.body, depth + 1, inner_env, inner, exact and bounded)

    def visit_Cond(self, s: Cond, depth: int, env: dict, dom, exact: bool) -> None:
        self.expr(s.cond, depth, env, dom, exact)
        then_dom, else_dom, ok = self._split(s.cond, depth, env, dom)
        self.visit(s.then, depth, env, then_dom, exact and ok)
        if s.otherwise is not None:
            self.visit(s.otherwise, depth, env, else_dom, exact and ok)

    def visit_LetStmt(self, s: Let, depth: int, env: dict, dom, exact: bool) -> None:
        self.expr(s.value, depth, env, dom, exact)
        inner_env = dict(env)
        inner_env[id(s.var)] = _LetBinding(s.value, env)
        self.visit(s.body, depth, inner_env, dom, exact)

    def visit_ExternCall(self, s, depth: int, env: dict, dom, exact: bool) -> None:
        """An external call touches its buffers whole, within their shapes by construction
        (the call is given each buffer's dimensions): nothing to check."""
        return None

    def generic(self, s: Stmt, depth: int, env: dict, dom, exact: bool) -> None:
        """Allocate / Free touch no elements."""
        return None

    def _split(self, cond: E.Expr, depth: int, env: dict, dom):
        """(where ``cond`` holds, where it does not, whether both are exact)."""
        conv = _PwConverter(self.model, depth, env)
        c = conv.cond(cond, exact=True)
        nc = conv.cond(cond, negate=True, exact=True)
        if c is None or nc is None:
            return dom, dom, False
        return dom.intersect(c), dom.intersect(nc), True

    # -- expressions -------------------------------------------------------------------
    def expr(self, e: E.Expr, depth: int, env: dict, dom, exact: bool) -> None:
        self._exprs.visit(e, depth, env, dom, exact)

    # -- accesses ----------------------------------------------------------------------
    def access(self, access: tuple, depth: int, env: dict, dom, exact: bool) -> None:
        from te.view import TensorView, view_root
        buf, indices, _ = access
        root = view_root(buf)
        if id(root) not in self.targets:
            return
        if isinstance(buf, TensorView):
            axes = [(None, buf.memory_offset(indices))]
        elif self.flattened and (root.ndim != 1 or root.layout is not None) or len(indices) != root.ndim:
            axes = [(None, indices[0])] if len(indices) == 1 else []
        else:
            axes = list(enumerate(indices))
        conv = _PwConverter(self.model, depth, env)
        for axis, ix in axes:
            key = (id(root), axis)
            forms = _index_forms(ix)
            limit = self._limit(root, axis, depth) if exact and forms is not None else None
            pas = [conv.aff(f) for f in forms] if limit is not None else [None]
            if any(pa is None for pa in pas):
                self.unknown.add(key)
                continue
            for pa in pas:
                self.touches.setdefault(key, []).append(_Touch(access, pa, dom, limit))

    def _limit(self, buf, axis, depth: int):
        key = (id(buf), axis, depth)
        if key not in self._limits:
            e = _limit_expr(buf, axis)
            self._limits[key] = None if e is None else _PwConverter(self.model, depth, {}).aff(e)
        return self._limits[key]


class _ExprWalker(Functor):
    """The expression half of ``_Walker``: ``visit(e, depth, env, dom, exact)`` records the
    accesses of the loads in ``e``, narrowing ``dom`` under the conditions of IfThenElse,
    And and Or (which evaluate their operands conditionally)."""

    def __init__(self, w: _Walker):
        self.w = w

    def visit_Load(self, e: E.Load, depth: int, env: dict, dom, exact: bool) -> None:
        for ix in e.indices:
            self.visit(ix, depth, env, dom, exact)
        self.w.access((e.buffer, e.indices, False), depth, env, dom, exact)

    def visit_IfThenElse(self, e: E.IfThenElse, depth: int, env: dict, dom, exact: bool) -> None:
        self.visit(e.cond, depth, env, dom, exact)
        then_dom, else_dom, ok = self.w._split(e.cond, depth, env, dom)
        self.visit(e.t, depth, env, then_dom, exact and ok)
        self.visit(e.f, depth, env, else_dom, exact and ok)

    def visit_And(self, e: E.Expr, depth: int, env: dict, dom, exact: bool) -> None:
        if e.dtype.is_vector:
            self.generic(e, depth, env, dom, exact)
            return
        self.visit(e.a, depth, env, dom, exact)
        then_dom, else_dom, ok = self.w._split(e.a, depth, env, dom)
        self.visit(e.b, depth, env, then_dom if type(e) is E.And else else_dom, exact and ok)

    visit_Or = visit_And

    def visit_Let(self, e: E.Let, depth: int, env: dict, dom, exact: bool) -> None:
        self.visit(e.value, depth, env, dom, exact)
        inner_env = dict(env)
        inner_env[id(e.var)] = _LetBinding(e.value, env)
        self.visit(e.body, depth, inner_env, dom, exact)

    def generic(self, e: E.Expr, depth: int, env: dict, dom, exact: bool) -> None:
        for c in e.children():
            self.visit(c, depth, env, dom, exact)


def _index_forms(ix: E.Expr) -> list | None:
    """Scalar expressions whose values bound the lanes of ``ix`` (a Ramp's first and last
    lane, a Broadcast's value); None for other vector indices."""
    if not ix.dtype.is_vector:
        return [ix]
    if isinstance(ix, E.Ramp):
        last = ix.base + ix.stride * E.IntImm(ix.lanes - 1, ix.base.dtype)
        return [ix.base, last]
    if isinstance(ix, E.Broadcast):
        return [ix.value]
    return None


# ------------------------------------------------------------------------------------
# isl parameter sets -> bool expressions of the sizes
# ------------------------------------------------------------------------------------
def _val(v) -> int:
    f = Fraction(str(v))
    if f.denominator != 1:
        raise _NotExpressible(f"non-integral value {v}")
    return int(f)


def _basic_set_expr(bs, params: list) -> E.Expr:
    """The conjunction of ``bs``'s constraints over ``params`` (its divisions explicit)."""
    divs: list = []
    for k in range(bs.dim(isl.dim_type.div)):
        d = bs.get_div(k)
        den = _val(d.get_denominator_val())
        scaled = d.scale_val(isl.Val(str(den))) if den != 1 else d
        terms, c0 = _terms(scaled.get_coefficient_val, scaled.get_constant_val(), params, divs,
                           scaled.dim(isl.dim_type.div))
        num = _sum(terms, c0)
        if not _fits(num.dtype, den):       # a wrap modulo 2**32 of an int32 expression, say
            if not _fits(int64, den):
                raise _NotExpressible(f"a division by {den}")
            num = E.Cast(int64, num)
        divs.append(num if den == 1 else E.FloorDiv(num, E.IntImm(den, num.dtype)))
    conds = []
    for c in bs.get_constraints():
        terms, c0 = _terms(c.get_coefficient_val, c.get_constant_val(), params, divs, bs.dim(isl.dim_type.div))
        flip = bool(terms) and all(k < 0 for k, _ in terms)    # -N + 8 >= 0 reads N <= 8
        if flip:
            terms, c0 = [(-k, x) for k, x in terms], -c0
        lhs = _sum(terms, 0)
        rhs = E.IntImm(-c0, lhs.dtype) if _fits(lhs.dtype, -c0) else None
        if rhs is None:
            lhs, rhs = _sum(terms, c0), E.IntImm(0, _sum(terms, c0).dtype)
        conds.append(lhs.eq(rhs) if c.is_equality() else (lhs <= rhs if flip else lhs >= rhs))
    if not conds:
        return E.const(True, "bool")
    return reduce(lambda a, b: E.And(a, b), conds)


def _terms(coef, const, params: list, divs: list, ndiv: int) -> tuple[list, int]:
    """``([(coefficient, expression)], constant)`` of an isl affine form over the parameters
    and the divisions defined so far."""
    terms = []
    for k, v in enumerate(params):
        c = _val(coef(isl.dim_type.param, k))
        if c:
            terms.append((c, v))
    for k in range(ndiv):
        c = _val(coef(isl.dim_type.div, k))
        if c:
            if k >= len(divs):
                raise _NotExpressible("a constraint uses a division that is not defined yet")
            terms.append((c, divs[k]))
    return terms, _val(const)


def _fits(dt, c: int) -> bool:
    return dt.min_value() <= c <= dt.max_value()


def _sum(terms: list, c0: int) -> E.Expr:
    """``sum(c * x) + c0`` in int32 when the variables are int32 and the constants fit,
    else in int64; positive terms first."""
    constants = [c0] + [c for c, _ in terms]
    if not all(_fits(int64, c) for c in constants):
        raise _NotExpressible(f"a constant out of int64's range in {constants}")
    dt = int32 if all(x.dtype == int32 for _, x in terms) and all(_fits(int32, c) for c in constants) else int64
    out = None
    for c, x in sorted(terms, key=lambda t: t[0] < 0):
        x = x if x.dtype == dt else E.Cast(dt, x)
        if out is None:
            out = x if c == 1 else x * E.IntImm(c, dt)
        elif c > 0:
            out = out + (x if c == 1 else x * E.IntImm(c, dt))
        else:
            out = out - (x if c == -1 else x * E.IntImm(-c, dt))
    if out is None:
        return E.IntImm(c0, dt)
    if c0 > 0:
        return out + E.IntImm(c0, dt)
    if c0 < 0:
        return out - E.IntImm(-c0, dt)
    return out
