"""The bounds of a buffer's accesses read off rectangular loops, without the polyhedral
model: ``box_bounds`` answers what ``bounds.access_bounds`` asks isl (about a millisecond a
question on a 13-stage pipeline, where ``compute_at`` and ``shrink_storage`` ask it for every
stage) where the answer is a box:

* the statement holds only blocks, loops and stores (no condition, let, call or prefetch
  around an access);
* every loop inside it runs a constant number of times, at least once, from a start that is
  affine in the outer variables;
* every index of the buffer is affine in the loop variables (a ``Ramp`` adds its lanes), is
  free of loads and is not read under a select, an ``if_then_else`` or a let;
* the lowest (highest) index of every access differ by constants, so their union is one
  affine function of the outer variables;
* the region lies inside the buffer for every value of the outer variables (constant
  ranges, constant dimensions).

Anything else returns None, and the caller asks isl. The bounds are exact: the minimum and
maximum over a box of loop values are at its corners.

>>> from te import Buffer, Var
>>> from loopnest.stmt import Block, For, Store
>>> A, B = Buffer("A", (64, 40), "float32"), Buffer("B", (16, 40), "float32")
>>> yo, y, x = Var("yo"), Var("y"), Var("x")
>>> body = For(y, yo * 8, yo * 8 + 10, Block((For(x, 0, 38, Block((
...     Store(B, (y - yo * 8, x), A[y, x] + A[y, x + 2]),))),)))
>>> [(str(b.min), str(b.max), str(b.extent)) for b in box_bounds(body, A, {yo: (0, 6)}, writes=False)]
[('yo * 8', 'yo * 8 + 9', '10'), ('0', '39', '40')]
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple

from te import expr as E
from te.queries import fold_int, free_vars, structural_key
from te.simplify import simplify

from ..stmt import Block, For, Store

__all__ = ["Box", "affine_form", "box_bounds", "linear_expr"]


class Box(NamedTuple):
    """The bounds of one dimension: ``min`` and ``max`` (inclusive) and ``stop`` (``max + 1``),
    expressions of the outer variables, and the constant ``extent``.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Block, For, Store
    >>> A = Buffer("A", (8,), "float32"); i, o = Var("i"), Var("o")
    >>> (b,) = box_bounds(For(i, 0, 3, Block((Store(A, (o + i,), 1.0),))), A, {o: (0, 5)})
    >>> str(b.min), str(b.max), str(b.extent), str(b.stop)
    ('o', 'o + 2', '3', 'o + 3')
    """

    min: E.Expr
    max: E.Expr
    extent: E.Expr
    stop: E.Expr


class _NotABox(Exception):
    """The accesses do not form a box this module can read off (ask isl)."""


def box_bounds(stmt, buffer, ranges: dict, *, reads: bool = True, writes: bool = True) -> list | None:
    """Per dimension, the ``Box`` of the accesses of ``buffer`` in ``stmt`` (its reads,
    its writes or both), as expressions of the outer variables ``ranges`` (``var -> (start,
    stop)``), when they form a box inside the buffer (see the module docstring); None when
    they do not, or when ``stmt`` does not access ``buffer``.

    >>> from te import Buffer, Var
    >>> from loopnest.stmt import Block, For, Store
    >>> A = Buffer("A", (8,), "float32"); i = Var("i")
    >>> [str(b.stop) for b in box_bounds(For(i, 0, 4, Block((Store(A, (i * 2,), 1.0),))), A, {})]
    ['7']
    >>> box_bounds(For(i, 0, 4, Block((Store(A, (i * i,), 1.0),))), A, {}) is None     # not affine
    True
    """
    dims = [fold_int(d) for d in buffer.dims]
    if any(d is None for d in dims):
        return None
    outer = {}
    for v, (lo, hi) in ranges.items():
        lo, hi = fold_int(simplify(E.as_expr(lo, v))), fold_int(simplify(E.as_expr(hi, v)))
        if lo is None or hi is None or hi <= lo:
            return None
        outer[id(v)] = (lo, hi - 1)
    accesses = _accesses_of(stmt)
    if accesses is None:
        return None
    for key, atom in accesses.vars.items():
        if isinstance(key, tuple) and key not in outer:
            span = _atom_range(atom, outer)
            if span is not None:
                outer[key] = span
    kinds = [k for k, wanted in ((False, reads), (True, writes)) if wanted]
    if any(accesses.poisoned.get((id(buffer), k)) for k in kinds):
        return None
    spans = [span for k in kinds for span in accesses.spans.get((id(buffer), k), ())]
    if not spans:
        return None
    out = []
    for d, (dim, dim_expr) in enumerate(zip(dims, buffer.dims)):
        low = _union([s[d][0] for s in spans], min)
        high = _union([s[d][1] for s in spans], max)
        if low is None or high is None or low[0] != high[0]:
            return None
        low, high = _fix_single(low, outer), _fix_single(high, outer)
        lowest, highest = _extreme(low, outer, min), _extreme(high, outer, max)
        if lowest is None or highest is None or lowest < 0 or highest > dim - 1:
            return None
        ext = high[1] - low[1] + 1
        dtype = dim_expr.dtype
        terms = []
        for key, c in low[0].items():
            v = accesses.vars[key]
            terms.append((c, v if v.dtype == dtype else E.Cast(dtype, v)))
        mn, mx = _expr(terms, low[1], dtype), _expr(terms, high[1], dtype)
        out.append(Box(mn, mx, E.IntImm(ext, dtype), _expr(terms, high[1] + 1, dtype)))
    return out


def _expr(terms: list, const: int, dtype) -> E.Expr:
    return simplify(linear_expr(terms, const, dtype))


def linear_expr(terms: list[tuple[int, E.Expr]], const: int, dtype) -> E.Expr:
    """``sum(c * x) + const`` printed naturally: positive terms first, ``- c * x`` after.

    >>> from te import Var
    >>> i, j = Var("i"), Var("j")
    >>> print(linear_expr([(-1, j), (2, i)], -3, i.dtype))
    i * 2 - j - 3
    """
    out: E.Expr | None = None
    pos = [(c, x) for c, x in terms if c > 0]
    neg = [(c, x) for c, x in terms if c < 0]
    for c, x in pos:
        t = x if c == 1 else x * E.IntImm(c, dtype)
        out = t if out is None else out + t
    if out is None:
        out = E.IntImm(const, dtype)
        const = 0
    for c, x in neg:
        t = x if c == -1 else x * E.IntImm(-c, dtype)
        out = out - t
    if const > 0:
        out = out + E.IntImm(const, dtype)
    elif const < 0:
        out = out - E.IntImm(-const, dtype)
    return out


def _union(forms: list, pick):
    """The lowest (``pick=min``) or highest of affine forms that differ by constants, else None."""
    first = forms[0][0]
    if any(f[0] != first for f in forms[1:]):
        return None
    return first, pick(f[1] for f in forms)


def _fix_single(form, outer: dict):
    """``form`` with the outer variables that take one value (a loop of one trip) replaced by it."""
    terms, const = form
    single = {k: outer[k][0] for k in terms if k in outer and outer[k][0] == outer[k][1]}
    return {k: c for k, c in terms.items() if k not in single}, const + sum(terms[k] * v for k, v in single.items())


def _extreme(form, outer: dict, pick):
    """The lowest (``pick=min``) or highest value of ``form`` over the outer ranges; None
    where it uses a variable without a range (a size)."""
    terms, total = form
    for key, c in terms.items():
        if key not in outer:
            return None
        lo, hi = outer[key]
        total += pick(c * lo, c * hi)
    return total


#: the accesses of the last statements asked about (``shrink_storage`` asks about each buffer
#: stored at one loop, ``compute_at`` about one stage after another of a growing body)
_CACHE: "OrderedDict[int, tuple]" = OrderedDict()
_CACHE_SIZE = 8
_cache_lock = threading.Lock()


def _accesses_of(stmt):
    """The ``_Accesses`` of ``stmt`` (kept for the last few statements: they are immutable), or
    None where its statements are not all blocks, loops of constant trips and stores."""
    with _cache_lock:
        hit = _CACHE.get(id(stmt))
        if hit is not None and hit[0] is stmt:
            _CACHE.move_to_end(id(stmt))
            return hit[1]
    accesses = _Accesses()
    try:
        accesses.walk(stmt)
    except _NotABox:
        accesses = None
    with _cache_lock:
        _CACHE[id(stmt)] = (stmt, accesses)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return accesses


class _Accesses:
    """The spans of the accesses in a statement, by ``(id(buffer), is_write)``: per access, per
    dimension, the (lowest, highest) index as affine forms of the outer variables. Forms are
    ``({id(var): coefficient}, constant)``; ``vars`` maps the ids back to the variables.
    ``poisoned[(id(buffer), is_write)]``: an access of that kind is not affine, or is a read
    on a condition or in a loop bound."""

    def __init__(self):
        self.spans: dict = {}
        self.poisoned: dict = {}
        self.vars: dict = {}

    def walk(self, stmt) -> None:
        self._stmt(stmt, {})

    def _stmt(self, s, loops: dict) -> None:
        if isinstance(s, Block):
            for x in s.stmts:
                self._stmt(x, loops)
        elif isinstance(s, For):
            for ld, _ in _loads([s.start, s.stop]):
                self.poisoned[(id(ld.buffer), False)] = True
            start, stop = affine_form(s.start, self.vars), affine_form(s.stop, self.vars)
            if start is None or stop is None or any(k in loops for k in start[0]) or start[0] != stop[0] \
                    or stop[1] - start[1] < 1:
                raise _NotABox
            self._stmt(s.body, {**loops, id(s.var): (start, stop[1] - start[1] - 1)})
        elif isinstance(s, Store):
            self._access(s.buffer, True, s.indices, loops)
            for ld, conditional in _loads(list(s.indices) + [s.value]):
                if conditional:
                    self.poisoned[(id(ld.buffer), False)] = True
                else:
                    self._access(ld.buffer, False, ld.indices, loops)
        else:                   # a condition, a let, a call, a prefetch, an allocation
            raise _NotABox

    def _access(self, buffer, is_write: bool, indices, loops: dict) -> None:
        key = (id(buffer), is_write)
        if self.poisoned.get(key):
            return
        span = []
        for ix in indices:
            lanes = 0
            if isinstance(ix, E.Ramp):
                stride = fold_int(ix.stride)
                if stride is None:
                    self.poisoned[key] = True
                    return
                ix, lanes = ix.base, stride * (ix.lanes - 1)
            elif isinstance(ix, E.Broadcast):
                ix = ix.value
            form = affine_form(ix, self.vars, atoms=True)
            if form is None or any(_atom_uses(self.vars[k], loops) for k in form[0] if isinstance(k, tuple)):
                self.poisoned[key] = True
                return
            low, high = _over_loops(form, loops)
            span.append(((low[0], low[1] + min(lanes, 0)), (high[0], high[1] + max(lanes, 0))))
        self.spans.setdefault(key, []).append(span)


def _atom_uses(atom: E.Expr, loops: dict) -> bool:
    """Whether ``atom`` (a min or max) uses a loop inside the statement (it is then no
    function of the outer variables alone)."""
    return any(id(v) in loops for v in free_vars([atom]))


def _atom_range(atom: E.Expr, outer: dict):
    """``(lowest, highest)`` bounds of the min or max ``atom`` of affine operands over the outer
    ranges, or None: the lowest of a min is its operands' lowest, its highest at most
    theirs (and the other way round for a max)."""
    names: dict = {}
    forms = [affine_form(x, names) for x in (atom.a, atom.b)]
    if any(f is None for f in forms):
        return None
    lows = [_extreme(f, outer, min) for f in forms]
    highs = [_extreme(f, outer, max) for f in forms]
    if None in lows or None in highs:
        return None
    pick = min if isinstance(atom, E.Min) else max
    return pick(lows), pick(highs)


def _over_loops(form, loops: dict):
    """The lowest and highest value of ``form`` over the loops inside the statement (each
    ``id(var) -> (start form, trips - 1)``): forms of the outer variables. ``c * u`` with ``u``
    in ``[start, start + last]`` spans ``c * start`` plus ``[min(0, c * last), max(0, c * last)]``."""
    terms: dict = {}
    low = high = form[1]
    for key, c in form[0].items():
        if key in loops:
            (start_terms, start_const), last = loops[key]
            _add(terms, start_terms, c)
            low += c * start_const + min(c * last, 0)
            high += c * start_const + max(c * last, 0)
        else:
            _add(terms, {key: c}, 1)
    terms = {k: c for k, c in terms.items() if c}
    return (terms, low), (terms, high)


def _add(terms: dict, more: dict, scale: int) -> None:
    for key, c in more.items():
        terms[key] = terms.get(key, 0) + scale * c


def affine_form(e: E.Expr, names: dict, atoms: bool = False):
    """``e`` as ``({id(var): coefficient}, constant)`` when it is an affine integer expression
    of variables (sums, differences, products by constants), else None; ``names`` collects
    ``id(var) -> var``. With ``atoms``, a scalar ``min`` or ``max`` counts as one more
    variable (the start of a tile shifted back inside its loop, ``split_with_overlap``), keyed
    ``("atom", structural key)`` in the terms and in ``names``.

    >>> from te import Var
    >>> i, j = Var("i"), Var("j")
    >>> names = {}
    >>> terms, c = affine_form((i - j * 3) * 2 + 5, names)
    >>> sorted((names[k].name, x) for k, x in terms.items()), c, affine_form(i * j, names)
    ([('i', 2), ('j', -6)], 5, None)
    """
    if isinstance(e, E.IntImm):
        return {}, e.value
    if isinstance(e, E.Var):
        if not e.dtype.is_int or e.dtype.is_vector:
            return None
        names[id(e)] = e
        return {id(e): 1}, 0
    if atoms and isinstance(e, (E.Min, E.Max)) and e.dtype.is_int and not e.dtype.is_vector:
        key = ("atom", structural_key(e, vars_by_identity=True))
        names[key] = e
        return {key: 1}, 0
    if isinstance(e, (E.Add, E.Sub, E.Mul)):
        a, b = affine_form(e.a, names, atoms), affine_form(e.b, names, atoms)
        if a is None or b is None:
            return None
        if isinstance(e, E.Mul):
            if a[0] and b[0]:
                return None
            (terms, c), k = (a, b[1]) if not b[0] else (b, a[1])
            return ({key: x * k for key, x in terms.items() if x * k}, c * k)
        sign = 1 if isinstance(e, E.Add) else -1
        terms = dict(a[0])
        _add(terms, b[0], sign)
        return {k: c for k, c in terms.items() if c}, a[1] + sign * b[1]
    return None


def _loads(exprs: list) -> list:
    """Every load in ``exprs``, each with whether it is read only on a condition (a select, an
    ``if_then_else``, a let's body, an index check, a call's argument)."""
    out: list = []
    stack = [(e, False) for e in exprs]
    while stack:
        e, conditional = stack.pop()
        if isinstance(e, E.Load):
            out.append((e, conditional))
        elif isinstance(e, (E.Var, E.IntImm, E.FloatImm)):
            continue
        inner = conditional or isinstance(e, (E._Conditional, E.Let, E.IndexCheck, E.Call))
        stack.extend((x, inner) for x in e.children())
    return out
