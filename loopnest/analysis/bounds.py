"""Bounds inference with islpy: the region of a buffer that a statement subtree touches.

``access_region(stmt, buffer, outer_vars)`` gives, per dimension of ``buffer``, the
``(min, extent)`` of the indices read or written by ``stmt``, as expressions of the
variables fixed outside ``stmt`` (``outer_vars``, usually enclosing loop variables) and
of the symbolic sizes.

The accesses are those of the polyhedral model of ``stmt`` (``domains.analyze``, kept per
tree: the buffers of one body share it; a load on the side of an ``if_then_else`` that is
not taken is no access there). Affine (and quasi-affine: floordiv / floormod by
constants, min, max) indices, loop bounds and conditions are handled exactly: the loop
variables bound inside ``stmt`` are projected out and the per-dimension minimum / maximum
are read back from isl as expressions (piecewise results become ``min`` / ``max``). Anything
else is over-approximated safely: a non-affine bound or condition is dropped, a non-affine
index may be any element, and every region is clamped to the buffer's shape (an access
outside the buffer cannot execute in a valid program). When a dimension cannot be bounded
the whole dimension ``(0, dim)`` is returned.

>>> from te import Buffer, Var
>>> from loopnest.stmt import For, Store, Block
>>> A = Buffer("A", (64,), "float32"); B = Buffer("B", (64,), "float32")
>>> io, ii = Var("io"), Var("ii")
>>> body = For(ii, 0, 8, Block([Store(B, (io * 8 + ii,), A[io * 8 + ii + 1])]))
>>> [(str(m), str(e)) for m, e in access_region(body, A, [io], outer_ranges={io: (0, 8)})]
[('io * 8 + 1', 'min(63 - io * 8, 8)')]
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from fractions import Fraction
from functools import reduce, wraps
from typing import Any, Sequence

import islpy as isl

from te import expr as E
from te.functor import Functor
from te.queries import fold_int, free_vars
from te.simplify import simplify

from ..stmt import Stmt
from .boxes import box_bounds, linear_expr
from .budget import within_budget
from .domains import analyze

__all__ = ["access_region", "access_bounds", "writes_cover_box", "DimBounds", "pw_aff_to_expr", "RegionError",
           "clear_parsed"]


class RegionError(Exception):
    """Raised internally when an isl result cannot be turned back into an expression."""


@dataclass
class DimBounds:
    """The bounds of one buffer dimension over the accesses of a subtree.

    ``min`` / ``max`` are inclusive; ``extent = max - min + 1``. ``exact`` is False when
    the dimension was over-approximated (the whole dimension, or a non-affine part).
    ``extent_bound`` is an upper bound of ``extent`` over the ranges of the outer
    variables that depends only on sizes (an int when constant), never negative: what an
    allocation of the region needs.
    """

    min: E.Expr
    max: E.Expr
    extent: E.Expr
    exact: bool
    extent_bound: Any = None
    #: ``max + 1`` (the exclusive end), simplified through isl when possible
    stop: E.Expr = None

    def __post_init__(self):
        if self.stop is None:
            self.stop = simplify(_add_const(self.max, 1))


# ------------------------------------------------------------------------------------
# expressions <-> isl text
# ------------------------------------------------------------------------------------
def _int_only(method):
    """``method`` (a ``visit_<Class>`` of ``_Affine``) restricted to scalar integer
    expressions: None for non-integer and vector ones."""
    @wraps(method)
    def visit(self, e: E.Expr):
        if not e.dtype.is_integer or e.dtype.is_vector:
            return None
        return method(self, e)
    return visit


class _Affine(Functor):
    """te integer expressions -> isl quasi-affine text (None when not representable).

    ``env`` maps ``id(var)`` to isl text (a loop dimension, a parameter, or the text of a
    let-bound value; None for a non-affine let value). Floor division / modulo by a
    positive constant, min and max are native isl; C division and remainder (which truncate
    toward zero) are not represented. ``conv(e)`` dispatches on the class of ``e`` to
    ``visit_<Class>`` (``te.functor.Functor``); classes without a method give None.
    """

    def __init__(self, env: dict):
        self.env = env

    def __call__(self, e: E.Expr) -> str | None:
        return self.visit(e)

    def generic(self, e: E.Expr) -> None:
        return None

    def visit_IntImm(self, e: E.IntImm) -> str:
        return str(e.value) if e.value >= 0 else f"(-{-e.value})"

    def visit_Var(self, e: E.Var) -> str | None:
        return self.env.get(id(e))

    @_int_only
    def visit_Add(self, e: E.Expr) -> str | None:
        a, b = self(e.a), self(e.b)
        if a is None or b is None:
            return None
        return f"({a} {'+' if type(e) is E.Add else '-'} {b})"

    visit_Sub = visit_Add

    @_int_only
    def visit_Mul(self, e: E.Mul) -> str | None:
        for c, x in ((e.a, e.b), (e.b, e.a)):
            k = fold_int(c)
            if k is not None:
                xs = self(x)
                if xs is None:
                    return None
                return f"({k}*{xs})" if k >= 0 else f"(-{-k}*{xs})"  # isl rejects (-1)*x
        return None

    @_int_only
    def visit_FloorDiv(self, e: E.Expr) -> str | None:
        t = type(e)
        k = fold_int(e.b)
        a = self(e.a)
        if k is None or k <= 0 or a is None:
            return None
        if t is E.FloorDiv:
            return f"floor(({a})/{k})"
        if t is E.FloorMod:
            return f"(({a}) mod {k})"
        return None

    visit_FloorMod = visit_Div = visit_Mod = visit_FloorDiv

    @_int_only
    def visit_Min(self, e: E.Expr) -> str | None:
        a, b = self(e.a), self(e.b)
        if a is None or b is None:
            return None
        return f"{'min' if type(e) is E.Min else 'max'}({a}, {b})"

    visit_Max = visit_Min

    @_int_only
    def visit_Cast(self, e: E.Cast) -> str | None:
        v = e.value.dtype
        if v.is_integer and (v.bits < e.dtype.bits or (v.bits == e.dtype.bits and v.is_int == e.dtype.is_int)):
            return self(e.value)
        return None

    @_int_only
    def visit_Let(self, e: E.Let) -> str | None:
        saved = self.env.get(id(e.var), _MISSING)
        self.env[id(e.var)] = self(e.value)
        try:
            return self(e.body)
        finally:
            if saved is _MISSING:
                del self.env[id(e.var)]
            else:
                self.env[id(e.var)] = saved


def _affine(e: E.Expr, env: dict) -> str | None:
    """Self-contained isl text of ``e`` (None when not quasi-affine in ``env``'s names)."""
    return _Affine(dict(env))(e)


def _add_const(e: E.Expr, c: int) -> E.Expr:
    if isinstance(e, E.IntImm):
        return E.IntImm(e.value + c, e.dtype)
    if c == 0:
        return e
    return e + c if c > 0 else e - (-c)


_MISSING = object()


def _val(v) -> Fraction:
    return Fraction(str(v))


def _aff_to_expr(aff, pvars: list[E.Var], dtype) -> E.Expr:
    """Convert an isl Aff over parameters (with integer divisions) to an expression."""
    scale = int(_val(aff.get_denominator_val()))
    terms: list[tuple[int, E.Expr]] = []
    for k, v in enumerate(pvars):
        c = _val(aff.get_coefficient_val(isl.dim_type.param, k)) * scale
        if c:
            terms.append((int(c), v if v.dtype == dtype else E.Cast(dtype, v)))
    for k in range(aff.dim(isl.dim_type.in_)):
        if _val(aff.get_coefficient_val(isl.dim_type.in_, k)):
            raise RegionError("the bound depends on a set dimension")
    for k in range(aff.dim(isl.dim_type.div)):
        c = _val(aff.get_coefficient_val(isl.dim_type.div, k)) * scale
        if c:
            d = aff.get_div(k)
            dden = int(_val(d.get_denominator_val()))
            num = _aff_to_expr(d.scale_val(isl.Val(str(dden))) if dden != 1 else d, pvars, dtype)
            terms.append((int(c), E.FloorDiv(num, E.IntImm(dden, dtype)) if dden != 1 else num))
    c0 = _val(aff.get_constant_val()) * scale
    if c0.denominator != 1:
        raise RegionError(f"non-integral constant in {aff}")
    e = linear_expr(terms, int(c0), dtype)
    return e if scale == 1 else E.FloorDiv(e, E.IntImm(scale, dtype))


def _pw_form(pw, candidates: list | None = None, op_hint: str | None = None,
             ctx=None) -> tuple[str | None, list]:
    """``(op, affs)`` with ``pw == op(affs)`` on its domain (op None: one affine piece,
    "min" or "max"). ``candidates`` (with ``op_hint``) are affine functions to try first,
    e.g. the upper bounds of a dimension for its maximum (isl may have replaced them by
    something equal only on a piece). Operands are pruned only where another one is never
    worse on ``ctx`` (the parameter context), so the result stays a valid bound there even
    outside ``pw``'s domain. Raises RegionError when nothing fits."""
    pieces = pw.get_pieces()
    if not pieces:
        raise RegionError("empty piecewise function")
    uniq: list = []
    for _, a in pieces:
        if not any(a.plain_is_equal(b) for b in uniq):
            uniq.append(a)
    dom = pw.domain()
    total = ctx is None or ctx.is_subset(dom)
    if len(uniq) == 1 and total:
        return None, uniq
    tries = []
    if candidates and op_hint:
        tries.append((op_hint, list(candidates)))
    if total:
        tries += [("min", uniq), ("max", uniq)]
    for name, affs in tries:
        op = (lambda a, b: a.min(b)) if name == "min" else (lambda a, b: a.max(b))
        try:
            cand = reduce(op, [isl.PwAff.from_aff(a) for a in affs]).intersect_domain(dom)
            if dom.is_subset(cand.eq_set(pw)):
                kept = _prune(name, affs, ctx if ctx is not None else dom)
                return (None if len(kept) == 1 else name), kept
        except isl.Error:
            continue
    raise RegionError(f"cannot express the piecewise bound {pw} as a min or max")


def _project(region, d: int):
    """``region`` projected on its dimension ``d`` (a one-dimensional parametric set)."""
    n = region.dim(isl.dim_type.set)
    return region.project_out(isl.dim_type.set, d + 1, n - d - 1).project_out(isl.dim_type.set, 0, d)


def _hull(s, box, convex: bool = True):
    # isl's exact convex hull can take exponential time on unions of many pieces (a tiled
    # convolution's padded window); a union of few pieces gets the exact hull (``convex``),
    # others the cheaper simple hull, which is still a safe over-approximation of the region.
    # A hull can reach outside the buffer although ``s`` does not (the simple hull drops the
    # clamp's constraints), so it is intersected with ``box``, the dimension's valid indices.
    if convex and s.n_basic_set() <= 4:
        hull = isl.Set.from_basic_set(s.convex_hull())
    else:
        # existentially quantified variables with large coefficients (tiles of a sliced
        # loop's bounds) make the simple hull itself take many seconds (seed 118, case 281);
        # dropping the constraints that hold them first gives a larger set, still safe
        hull = isl.Set.from_basic_set(s.remove_divs().simple_hull())
    return hull.intersect(box)


def _bound_candidates(s, upper: bool) -> list:
    """Affine bounds of the one-dimensional set ``s`` read off its constraints (over the
    parameters): upper bounds (``x <= floor(...)``) or lower bounds (``x >= ceil(...)``)."""
    out: list = []
    try:
        for bs in s.get_basic_sets():
            for c in bs.get_constraints():
                co = c.get_coefficient_val(isl.dim_type.set, 0)
                if co.is_zero() or (co.is_neg() != upper and not c.is_equality()):
                    continue
                b = c.get_bound(isl.dim_type.set, 0)
                b = (b.floor() if upper else b.ceil()).project_domain_on_params()
                if not any(b.plain_is_equal(x) for x in out):
                    out.append(b)
    except isl.Error:
        return []
    return out


def _prune(op: str, affs: list, dom) -> list:
    """Drop the operands of a min (max) that are never smaller (larger) than another on ``dom``."""
    keep = list(affs)
    k = 0
    while k < len(keep):
        a = keep[k]
        pa = isl.PwAff.from_aff(a).intersect_domain(dom)
        dominated = False
        for b in keep:
            if b is a:
                continue
            pb = isl.PwAff.from_aff(b).intersect_domain(dom)
            if dom.is_subset(pb.le_set(pa) if op == "min" else pb.ge_set(pa)):
                dominated = True
                break
        if dominated:
            del keep[k]
        else:
            k += 1
    return keep


def _form_to_expr(op: str | None, affs: list, pvars, dtype) -> E.Expr:
    exprs = [_aff_to_expr(a, pvars, dtype) for a in affs]
    if op is None or len(exprs) == 1:
        return exprs[0]
    exprs.sort(key=lambda x: isinstance(x, E.IntImm))  # constants last: ``min(i * 8 + 8, 64)``
    node = E.Min if op == "min" else E.Max
    return reduce(lambda a, b: node(a, b), exprs)


def pw_aff_to_expr(pw, pvars: list[E.Var], dtype: Any = "int32") -> E.Expr:
    """Turn an isl PwAff over parameters ``pvars`` into an expression: one piece directly,
    several pieces as the ``min`` or ``max`` of their affine functions when that is what
    they are. Raises RegionError otherwise.

    >>> import islpy as isl
    >>> from te import Var
    >>> N, i = Var("N"), Var("i")
    >>> pw = isl.PwAff("[N, i] -> { [(N - 1)] : 8i + 7 >= N - 1; [(8i + 7)] : 8i + 7 < N - 1 }")
    >>> print(pw_aff_to_expr(pw, [N, i]))
    min(N - 1, i * 8 + 7)
    """
    from te.dtypes import as_dtype
    op, affs = _pw_form(pw)
    return _form_to_expr(op, affs, pvars, as_dtype(dtype))


def _extent_expr(mn_form, mx_form, dom, pvars, dtype) -> E.Expr | None:
    # ``dom``: where the operands were pruned (the parameter context)
    """``max - min + 1`` as ``min(...)`` of affine differences when max is a min (or one
    affine piece) and min is a max (or one piece); None otherwise."""
    opn, mins = mn_form
    opx, maxs = mx_form
    if opn == "min" or opx == "max":
        return None
    diffs = []
    for a in maxs:
        for b in mins:
            d = _plus(a.sub(b), 1)
            if not any(d.plain_is_equal(x) for x in diffs):
                diffs.append(d)
    diffs = _prune("min", diffs, dom)
    try:
        return _form_to_expr("min", diffs, pvars, dtype)
    except RegionError:
        return None


def _never_empty(r, proj) -> bool:
    """Whether region ``proj`` (a projection onto one dimension, in the parameters) has a
    point for every value of the context ``r.ctx_set``: a masked loop's iterations past the
    mask read nothing, so a region read there can be empty where its extent is constant."""
    return r.ctx_set.is_subset(proj.params())


def _constant_extent(proj, dtype) -> E.Expr | None:
    """``max - min + 1`` of the one-dimensional set ``proj`` where it is one constant for
    every value of the parameters (a region starting at ``min(io * 6, 1018)``, six rows
    long: its bounds are pieces of affine functions whose difference ``_extent_expr`` does
    not read off), else None."""
    values: set = set()

    def piece(_dom, aff):
        values.add(aff.get_constant_val().to_python() if aff.is_cst() else None)

    proj.dim_max(0).sub(proj.dim_min(0)).foreach_piece(piece)
    if len(values) != 1 or None in values:
        return None
    return E.IntImm(int(values.pop()) + 1, dtype)


def _plus(aff, c: int):
    return aff.set_constant_val(aff.get_constant_val().add(isl.Val(str(c))))


# ------------------------------------------------------------------------------------
# the region
# ------------------------------------------------------------------------------------
#: isl affine functions read from text, by (class, text), the least recently used dropped
#: beyond ``_PARSED_SIZE``: the dimensions, buffers and transforms of one nest repeat their
#: bounds, and isl takes 50-250 us to read each (sets are read again each time: ``_parsed``)
_PARSED: "OrderedDict[tuple, Any]" = OrderedDict()
_PARSED_SIZE = 1024
_parsed_lock = threading.Lock()


def _parsed(cls, text: str):
    """``cls(text)`` (``isl.Set`` or ``isl.Aff``), an Aff read once per text. A set is read
    every time: isl changes a set's inner representation as operations use it (equal sets,
    other pieces), and the bounds read off a reused one differed, so a history replayed in
    the same process gave another nest (seed 196, case 148).

    >>> _parsed(isl.Aff, "[n] -> { [(n - 1)] }") is _parsed(isl.Aff, "[n] -> { [(n - 1)] }")
    True
    >>> _parsed(isl.Set, "[n] -> { [x] : 0 <= x < n }") is _parsed(isl.Set, "[n] -> { [x] : 0 <= x < n }")
    False
    """
    if cls is isl.Set:
        return cls(text)
    key = (cls, text)
    with _parsed_lock:
        hit = _PARSED.get(key)
        if hit is not None:
            _PARSED.move_to_end(key)
            return hit
    hit = cls(text)
    with _parsed_lock:
        _PARSED[key] = hit
        while len(_PARSED) > _PARSED_SIZE:
            _PARSED.popitem(last=False)
    return hit


def clear_parsed() -> None:
    """Forget the isl objects read from text (``_PARSED``).

    >>> clear_parsed(); len(_PARSED)
    0
    """
    with _parsed_lock:
        _PARSED.clear()


def _outer_ranges_from_nest(nest, outer_vars) -> dict:
    out = {}
    if nest is None:
        return out
    for v in outer_vars:
        f = nest._find_loop(v) if hasattr(nest, "_find_loop") else None
        if f is not None:
            out[v] = (f.start, f.stop)
    return out


#: isl operations the bounds of one dimension may take, exactly and then from the hull
#: (a convex hull or parametric minimum of many guarded pieces can take minutes)
BOUNDS_OPERATIONS = 1_000_000
#: isl operations building the region may take (past them every dimension is whole)
REGION_OPERATIONS = 5_000_000


@dataclass
class _Region:
    set: Any            # isl.Set of the accessed elements (clamped, in the context); None past the budget
    params: list        # Vars, in isl parameter order (p0, p1, ...)
    env: dict           # id(var) -> isl name
    pdecl: str
    ctx: list           # context constraints (isl text)
    ranges: dict
    exact: bool         # every index, bound and condition was represented exactly
    ctx_set: Any = None  # the context as an isl parameter set
    size_ids: frozenset = frozenset()  # ids of the buffer's size variables (>= 0 in ``ctx``)


def _build_region(stmt, buffer, outer_vars, nest, reads, writes, outer_ranges) -> _Region | None:
    """The region of ``buffer`` that ``stmt`` reads (``reads``) or writes (``writes``): the
    union of the ranges of those accesses in the polyhedral analysis of ``stmt``
    (``domains.analyze``: built through the isl API and kept per tree, so the buffers of one
    body share it), clamped to the buffer and restricted to the outer variables' ranges.
    None when ``stmt`` has no such access."""
    ranges = dict(_outer_ranges_from_nest(nest, outer_vars))
    for v, (lo, hi) in (outer_ranges or {}).items():
        ranges[v] = (E.as_expr(lo, v), E.as_expr(hi, v))
    an = analyze(stmt)
    accs = [a for a in an.accesses_of(buffer) if (writes if a.is_write else reads)]
    if not accs:
        return None
    # the analysis names its parameters p0, p1, ... (the sizes and outer variables stmt uses);
    # variables only the buffer's shape or the ranges use come after them
    params = list(an.params.values())
    range_exprs = [x for se in ranges.values() for x in se]
    for v in free_vars(list(buffer.dims) + range_exprs) + list(outer_vars) + list(ranges):
        if v.dtype.is_integer and not v.dtype.is_vector and all(p is not v for p in params):
            params.append(v)
    env = {id(v): f"p{k}" for k, v in enumerate(params)}
    pdecl = f"[{', '.join(env[id(v)] for v in params)}] -> " if params else ""
    xs = ", ".join(f"x{d}" for d in range(buffer.ndim))
    clamp = []
    for d, dim in enumerate(buffer.dims):
        t = _affine(dim, env)
        if t is not None:
            clamp.append(f"0 <= x{d} < {t}")
    ctx = []
    size_vars = {id(n) for n in free_vars(buffer.dims)}
    for v in params:
        if id(v) in size_vars:
            ctx.append(f"{env[id(v)]} >= 0")
    for v, (lo, hi) in ranges.items():
        lt, ht = _affine(lo, env), _affine(hi, env)
        if lt is not None:
            ctx.append(f"{env[id(v)]} >= {lt}")
        if ht is not None:
            ctx.append(f"{env[id(v)]} < {ht}")
    ctx_set = _parsed(isl.Set, f"{pdecl}{{ : {' and '.join(ctx) or '0 = 0'} }}")
    box = _parsed(isl.Set, f"{pdecl}{{ [{xs}] : {' and '.join(clamp) or '0 = 0'} }}")

    def union():
        out = None
        for a in accs:
            r = a.relation.range().reset_tuple_id()
            out = r if out is None else out.union(r)
        return out.intersect(box).intersect_params(ctx_set).align_params(ctx_set.get_space())
    # the union of many guarded pieces can grow exponentially
    region = within_budget(REGION_OPERATIONS, union)
    exact = all(a.exact and a.instance.domain_exact for a in accs)
    return _Region(region, params, env, pdecl, ctx, ranges, exact and region is not None, ctx_set,
                   frozenset(size_vars))


def access_bounds(stmt: Stmt, buffer, outer_vars: Sequence[E.Var] = (), nest=None, *,
                  reads: bool = True, writes: bool = True,
                  outer_ranges: dict | None = None) -> list[DimBounds] | None:
    """Per-dimension bounds of the accesses of ``buffer`` in ``stmt`` (None when ``stmt``
    does not access it). See ``access_region`` for the meaning of the arguments;
    ``outer_ranges`` maps outer variables to ``(start, stop)`` (taken from ``nest``'s
    loops when not given) and makes results simpler and ``extent_bound`` possible.

    The isl work is bounded: past ``REGION_OPERATIONS`` building the region, every
    dimension is whole; past ``BOUNDS_OPERATIONS`` for a dimension, its bounds are those
    of the region's simple hull clamped to the buffer, and past that again the whole
    dimension.
    """
    ranges = dict(_outer_ranges_from_nest(nest, outer_vars))
    ranges.update(outer_ranges or {})
    box = box_bounds(stmt, buffer, ranges, reads=reads, writes=writes)
    if box is not None:         # rectangular loops, affine indices: read off without isl
        return [DimBounds(b.min, b.max, b.extent, True, fold_int(b.extent), b.stop) for b in box]
    r = _build_region(stmt, buffer, outer_vars, nest, reads, writes, outer_ranges)
    if r is None:
        return None
    outer_ids = {id(v) for v in list(outer_vars) + list(r.ranges)}
    out = []
    for d, dim in enumerate(buffer.dims):
        b = None
        if r.set is not None:
            b = within_budget(BOUNDS_OPERATIONS, _dim_bounds, r, d, dim, outer_ids, True)
        if b is None and r.set is not None:   # isl gave up (or failed) on the exact bounds: the hull's
            b = within_budget(BOUNDS_OPERATIONS, _dim_bounds, r, d, dim, outer_ids, False)
        if b is None:
            zero = E.IntImm(0, dim.dtype)
            b = DimBounds(zero, simplify(_add_const(dim, -1)), dim, False, _const_or(dim), dim)
        out.append(b)
    return out


def _dim_bounds(r: _Region, d: int, dim: E.Expr, outer_ids: set, exact_hull: bool) -> DimBounds | None:
    """The bounds of dimension ``d`` of the region ``r``: exact where isl expresses them,
    else those of the hull (``exact_hull``: the convex hull of a union of few pieces, else
    the simple hull; both clamped to the buffer). None when they cannot be expressed."""
    try:
        return _dim_bounds_or_raise(r, d, dim, outer_ids, exact_hull)
    except RegionError:
        return None


def _dim_bounds_or_raise(r: _Region, d: int, dim: E.Expr, outer_ids: set, exact_hull: bool) -> DimBounds:
    region, params, env = r.set, r.params, r.env
    exact = r.exact
    if region.is_empty():
        zero = E.IntImm(0, dim.dtype)
        return DimBounds(zero, E.IntImm(-1, dim.dtype), zero, True, 0, zero)
    proj = _project(region, d)
    dt = _affine(dim, env)
    box = _parsed(isl.Set, f"{r.pdecl}{{ [x] : 0 <= x" + (f" < {dt}" if dt is not None else "") + " }")
    hull = _hull(proj, box, exact_hull)
    lows, highs = _bound_candidates(hull, False), _bound_candidates(hull, True)
    # the buffer's own bounds keep the region in bounds where it is empty
    lows.append(_parsed(isl.Aff, f"{r.pdecl}{{ [(0)] }}"))
    if dt is not None:
        highs.append(_parsed(isl.Aff, f"{r.pdecl}{{ [({dt} - 1)] }}"))
    of_proj = exact_hull        # both bounds read off the region itself, not its hull
    try:
        if not exact_hull:
            raise RegionError("the bounds of the hull")
        mn_form = _pw_form(proj.dim_min(0), lows, "max", r.ctx_set)
    except RegionError:  # the bounds of the convex hull: looser, still safe
        mn_form = _pw_form(hull.dim_min(0), lows, "max", r.ctx_set)
        exact = of_proj = False
    try:
        if not exact_hull:
            raise RegionError("the bounds of the hull")
        mx_form = _pw_form(proj.dim_max(0), highs, "min", r.ctx_set)
    except RegionError:
        mx_form = _pw_form(hull.dim_max(0), highs, "min", r.ctx_set)
        exact = of_proj = False
    mn = _form_to_expr(*mn_form, params, dim.dtype)
    mx = _form_to_expr(*mx_form, params, dim.dtype)
    stop = _form_to_expr(mx_form[0], [_plus(a, 1) for a in mx_form[1]], params, dim.dtype)
    # a constant extent first where the region is never empty (an empty one has extent 0):
    # the difference of the two forms may not simplify to it (a row ``i_tail + floordiv(M, 4)
    # * 4`` of a tail loop ``i_tail < floormod(M, 4)``)
    ext = _constant_extent(proj, dim.dtype) if of_proj and _never_empty(r, proj) else None
    if ext is None:
        ext = _extent_expr(mn_form, mx_form, r.ctx_set, params, dim.dtype)
    if ext is None:
        ext = simplify(_add_const(mx - mn, 1))
    bound = _non_negative(_extent_bound(ext, params, env, r.ranges, outer_ids, r.ctx, r.pdecl, dim),
                          params, env, r.size_ids)
    return DimBounds(simplify(mn), simplify(mx), simplify(ext), exact, bound, simplify(stop))


def writes_cover_box(stmt: Stmt, buffer, bounds: Sequence[DimBounds], outer_vars: Sequence[E.Var] = (),
                     nest=None, *, outer_ranges: dict | None = None) -> bool:
    """True when the writes of ``buffer`` in ``stmt`` provably cover every element of the
    box ``bounds`` (so a copy of the box back to ``buffer`` writes nothing stale).
    False when unsure (non-affine indices, bounds or conditions)."""
    r = _build_region(stmt, buffer, outer_vars, nest, False, True, outer_ranges)
    if r is None or not r.exact or r.set is None:
        return False
    cons = []
    for d, b in enumerate(bounds):
        lo, hi = _affine(b.min, r.env), _affine(b.max, r.env)
        if lo is None or hi is None:
            return False
        cons.append(f"{lo} <= x{d} <= {hi}")
    xs = ", ".join(f"x{d}" for d in range(buffer.ndim))
    try:
        box = _parsed(isl.Set, f"{r.pdecl}{{ [{xs}] : {' and '.join(cons) or '0 = 0'} }}")
        if r.ctx:
            box = box.intersect_params(_parsed(isl.Set, f"{r.pdecl}{{ : {' and '.join(r.ctx)} }}"))
        return box.is_subset(r.set)
    except isl.Error:
        return False


def _const_or(e: E.Expr):
    return e.value if isinstance(e, E.IntImm) else e


def _extent_bound(ext: E.Expr, params, env, ranges, outer_ids, ctx, pdecl, dim):
    """An upper bound of ``ext`` over the outer variables' ranges, free of them: an int
    when constant, else an expression of the sizes; the whole dimension when unknown."""
    if isinstance(ext, E.IntImm):
        return ext.value
    consts = _min_constants(ext)
    if consts:
        return min(consts)
    uses_outer = any(id(v) in outer_ids for v in free_vars(ext))
    if not uses_outer:
        return ext
    t = _affine(ext, env)
    if t is None:
        return _const_or(dim)
    outer_names = [env[id(v)] for v in params if id(v) in outer_ids]
    keep = [v for v in params if id(v) not in outer_ids]
    kdecl = f"[{', '.join(env[id(v)] for v in keep)}] -> " if keep else ""
    cons = " and ".join([f"e = {t}"] + ctx)
    try:
        s = _parsed(isl.Set, f"{kdecl}{{ [e] : exists ({', '.join(outer_names)} : {cons}) }}")
        if s.is_empty():
            return 0
        bound = pw_aff_to_expr(s.dim_max(0), keep, dim.dtype)
    except (isl.Error, RegionError):
        return _const_or(dim)
    bound = simplify(bound)
    consts = _min_constants(bound)
    if consts:  # min(..., c) <= c: a constant size is what allocations want
        return min(consts)
    return bound.value if isinstance(bound, E.IntImm) else bound


def _non_negative(bound, params, env, size_ids):
    """``bound`` (an extent bound) as an allocation size: ``max(bound, 0)`` unless no values
    >= 0 of the sizes make it negative. The largest extent of a region over the outer loops
    is negative for sizes where the loops run no iteration (``N - 1`` at ``N = 0``), and the
    buffer is allocated all the same."""
    if isinstance(bound, int):
        return max(bound, 0)
    t = _affine(bound, env)
    if t is not None:
        names = [env[id(v)] for v in params]
        cons = [f"{env[id(v)]} >= 0" for v in params if id(v) in size_ids]
        try:
            if _parsed(isl.Set, f"[{', '.join(names)}] -> {{ : {' and '.join(cons + [f'{t} < 0'])} }}").is_empty():
                return bound
        except isl.Error:
            pass
    return simplify(E.Max(bound, E.IntImm(0, bound.dtype)))


class _MinConstants(Functor):
    """The constant operands of a tree of Min nodes (``[]`` for anything else)."""

    def visit_IntImm(self, e: E.IntImm) -> list[int]:
        return [e.value]

    def visit_Min(self, e: E.Min) -> list[int]:
        return self.visit(e.a) + self.visit(e.b)

    def generic(self, e: E.Expr) -> list[int]:
        return []


def _min_constants(e: E.Expr) -> list[int]:
    return _MinConstants().visit(e)


def access_region(stmt: Stmt, buffer, outer_vars: Sequence[E.Var] = (), nest=None, *,
                  reads: bool = True, writes: bool = True,
                  outer_ranges: dict | None = None) -> list[tuple[E.Expr, E.Expr]]:
    """Per dimension of ``buffer``, ``(min, extent)`` of the indices accessed by ``stmt``.

    ``outer_vars`` are the variables fixed outside ``stmt`` (for a loop body: the loop
    variables enclosing it and the loop's own); the results are expressions of them and
    of size variables. With ``nest`` (a LoopNest) the ranges of outer loop variables are
    looked up to simplify the results. ``reads`` / ``writes`` select which accesses count.
    A dimension that is not accessed at all gets ``(0, 0)``.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import For, Store, Block
    >>> N = Var("N"); A = Buffer("A", (N,), "float32"); B = Buffer("B", (N,), "float32")
    >>> i, k = Var("i"), Var("k")
    >>> loop = For(k, 0, 3, Block([Store(B, (i,), A[i + k - 1])]))   # a 3-point stencil
    >>> [(str(m), str(e)) for m, e in access_region(loop, A, [i], outer_ranges={i: (1, N - 1)})]
    [('i - 1', '3')]
    """
    b = access_bounds(stmt, buffer, outer_vars, nest, reads=reads, writes=writes, outer_ranges=outer_ranges)
    if b is None:
        return [(E.IntImm(0, d.dtype), E.IntImm(0, d.dtype)) for d in buffer.dims]
    return [(x.min, x.extent) for x in b]
