"""Iteration domains, access relations and schedules of a statement tree, as isl objects.

Every statement that touches memory becomes an *instance* record: its enclosing loops, its
iteration domain (an ``isl.Set`` over the loop variables, symbolic sizes as parameters),
its position in execution order (a 2d+1 schedule), and its accesses: the Store's write and
every Load read by it, each with an access relation (an ``isl.Map`` from iterations to
buffer elements). Loads in loop bounds, conditions and Let values belong to pseudo-instances
at the position of that For / Cond / Let.

Affine (and quasi-affine: floordiv/floormod/C division by constants, min, max, select)
index and bound expressions are represented exactly. Anything else is over-approximated,
which is safe for dependence analysis: a non-affine bound or condition is dropped (the
domain grows), a non-affine index dimension may be any element.

>>> from te import Buffer, Compute
>>> from loopnest import LoopNest
>>> A = Buffer("A", (16,), "float32")
>>> B = Compute("B", (15,), lambda i: A[i + 1] * 2.0)
>>> an = analyze(LoopNest([B]).root)
>>> [str(a) for a in an.accesses]
['B[i] (write)', 'A[i + 1] (read)']
>>> print(an.accesses[1].relation)
{ S0[i0] -> M1[1 + i0] : 0 <= i0 <= 14 }

In the isl objects, size parameters are named ``p<k>``, statements ``S<k>`` and buffers
``M<k>``; ``Analysis`` keeps the mapping back to the IR. They are built with the isl API
(``_PwConverter``), an order of magnitude faster than parsing text; ``affine_text`` and
``cond_text`` give the isl text of an expression for code that prefers to build text.
"""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import islpy as isl

from te import expr as E
from te.functor import Functor
from te.queries import fold_int

from ..queries import stmt_free_vars
from ..stmt import Block, Cond, For, Let, Stmt, Store
from .budget import within_budget

__all__ = ["Instance", "Access", "LoopInfo", "Analysis", "analyze", "affine_text", "cond_text",
           "loop_var_of", "const_int", "provably_equal", "provably_nonnegative", "clear_memo"]


@dataclass(frozen=True)
class _LetBinding:
    """A let-bound variable: its value and the environment it was bound in."""

    value: E.Expr
    env: dict


# ------------------------------------------------------------------------------------
# what the two converters share
# ------------------------------------------------------------------------------------
def _scalar_int(method):
    """``method`` (a ``visit_<Class>`` of a converter) restricted to scalar integer
    expressions: None for vector and non-integer ones."""
    @functools.wraps(method)
    def visit(self, e: E.Expr, *args):
        if e.dtype.is_vector or not e.dtype.is_integer:
            return None
        return method(self, e, *args)
    return visit


class _ExprConverter(Functor):
    """Base of ``_Converter`` (isl text) and ``_PwConverter`` (isl objects).

    ``aff(e)`` dispatches on the class of ``e`` to ``visit_<Class>`` (``te.functor.Functor``;
    expressions without a method are not affine: None). This base holds what does not depend
    on the result type: the scoping of let-bound variables in ``env``, the translation of
    bool expressions (``cond``, through ``_CondConverter``), of binary operations
    (``_binary``) and of casts, selects and lets (``visit_Cast``, ``visit_Select``,
    ``visit_IfThenElse``, ``visit_Let``), written in terms of ``aff`` and of the primitives
    each subclass defines: ``_both`` (conjunction), ``_either`` (disjunction), ``_truth``
    (the constant true / false), ``_compare`` (a comparison) and ``_choose`` (a select of
    two values).
    """

    env: dict

    def aff(self, e: E.Expr):
        """The converted integer expression ``e``, or None when it is not quasi-affine."""
        return self.visit(e)

    def generic(self, e: E.Expr):
        return None

    def _both(self, a, b):
        raise NotImplementedError

    def _either(self, a, b):
        raise NotImplementedError

    def _truth(self, value: bool):
        raise NotImplementedError

    def _compare(self, t: type, a, b):
        raise NotImplementedError

    def _choose(self, c, nc, a, b):
        raise NotImplementedError

    def _in_env(self, env: dict, fn, *args):
        """``fn(*args)`` evaluated with ``self.env`` temporarily replaced by ``env``."""
        saved, self.env = self.env, env
        try:
            return fn(*args)
        finally:
            self.env = saved

    def _let_value(self, b: _LetBinding):
        """The converted value of a let-bound variable, in the environment it was bound in."""
        return self._in_env(b.env, self.aff, b.value)

    def _under_let(self, e: E.Let, fn, *args):
        """``fn(e.body, *args)`` with the variable of the Let expression ``e`` bound."""
        env = dict(self.env)
        env[id(e.var)] = _LetBinding(e.value, self.env)
        return self._in_env(env, fn, e.body, *args)

    def _binary(self, e: E.Expr, combine):
        """``combine(a, b)`` of the converted operands of a binary expression (converted in
        order), or None when either cannot be converted."""
        a, b = self.aff(e.a), self.aff(e.b)
        return None if a is None or b is None else combine(a, b)

    # the integer expressions that convert alike in every converter: a Cast that keeps the
    # value, a Select / IfThenElse, a Let
    @_scalar_int
    def visit_Cast(self, e: E.Cast):
        return self.aff(e.value) if _cast_keeps_value(e) else None

    @_scalar_int
    def visit_Select(self, e: E.Expr):
        """A Select / IfThenElse: ``_choose(cond, not cond, true value, false value)`` with
        each part converted exactly, or None when any of them cannot be."""
        c = self.cond(e.cond, exact=True)
        nc = self.cond(e.cond, negate=True, exact=True)
        a, b = self.aff(e.t), self.aff(e.f)
        if c is None or nc is None or a is None or b is None:
            return None
        return self._choose(c, nc, a, b)

    visit_IfThenElse = visit_Select

    @_scalar_int
    def visit_Let(self, e: E.Let):
        return self._under_let(e, self.aff)

    def cond(self, e: E.Expr, negate: bool = False, exact: bool = False):
        """The converted constraint of a bool expression (of its negation with ``negate``).

        None means "no constraint": with ``exact=False`` a non-affine condition is
        over-approximated by true; with ``exact=True`` None means "cannot express".
        """
        return _CondConverter(self).visit(e, negate, exact)


class _CondConverter(Functor):
    """The bool half of an ``_ExprConverter``: ``visit(e, negate, exact)`` is
    ``conv.cond(e, negate, exact)``, dispatched on the class of ``e`` (None for classes
    without a method: no constraint / cannot express)."""

    def __init__(self, conv: _ExprConverter):
        self.conv = conv

    def visit_Not(self, e: E.Not, negate: bool, exact: bool):
        return self.visit(e.a, not negate, exact)

    def visit_And(self, e: E.Expr, negate: bool, exact: bool):
        conj = (type(e) is E.And) != negate
        a, b = self.visit(e.a, negate, exact), self.visit(e.b, negate, exact)
        if conj:
            if a is None or b is None:
                return None if exact else (a if b is None else b)
            return self.conv._both(a, b)
        if a is None or b is None:
            return None
        return self.conv._either(a, b)

    visit_Or = visit_And

    def visit_IntImm(self, e: E.IntImm, negate: bool, exact: bool):
        return self.conv._truth(bool(e.value) != negate) if e.dtype.is_bool else None

    def visit_LT(self, e: E.CmpOp, negate: bool, exact: bool):
        if not e.a.dtype.is_integer or e.a.dtype.is_vector:
            return None
        op = _NEGATED_CMP[type(e)] if negate else type(e)
        return self.conv._binary(e, lambda a, b: self.conv._compare(op, a, b))

    visit_LE = visit_GT = visit_GE = visit_EQ = visit_NE = visit_LT

    def visit_Let(self, e: E.Let, negate: bool, exact: bool):
        return self.conv._under_let(e, self.conv.cond, negate, exact)

    def generic(self, e: E.Expr, negate: bool, exact: bool):
        return None


_NEGATED_CMP = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT, E.EQ: E.NE, E.NE: E.EQ}


def _cast_keeps_value(e: E.Cast) -> bool:
    """True when the integer Cast ``e`` never changes the value it converts (a widening to
    the same signedness, or to a strictly wider type)."""
    src, dst = e.value.dtype, e.dtype
    return src.is_integer and src.bits <= dst.bits and (src.is_int == dst.is_int or src.bits < dst.bits)


# ------------------------------------------------------------------------------------
# expression -> isl text
# ------------------------------------------------------------------------------------
class _Converter(_ExprConverter):
    """Turn te integer expressions into isl quasi-affine text (None when not affine).

    ``env`` maps ``id(var)`` to the isl name of a loop dimension or to a ``_LetBinding``;
    other variables become parameters (``params`` / ``param_names`` are shared by an
    analysis so a Var keeps one name). isl's parser takes no ``?:`` inside expressions, so
    C division, C remainder and selects introduce auxiliary variables ``e<k>``, defined
    by constraints collected in ``defs``; ``wrap`` puts them under an ``exists``.
    """

    def __init__(self, env: dict, params: dict | None = None, param_names: dict | None = None,
                 counter: list | None = None):
        self.env = env
        self.params = {} if params is None else params
        self.param_names = {} if param_names is None else param_names
        self.counter = counter if counter is not None else [0]
        self.used: set[str] = set()     # parameters used by the texts made so far
        self.aux: list[str] = []        # auxiliary variables introduced
        self.defs: list[str] = []       # their defining constraints

    def param(self, v: E.Var) -> str:
        name = self.param_names.get(id(v))
        if name is None:
            name = f"p{len(self.param_names)}"
            self.param_names[id(v)] = name
            self.params[name] = v
        self.used.add(name)
        return name

    def _fresh(self) -> str:
        name = f"e{self.counter[0]}"
        self.counter[0] += 1
        self.aux.append(name)
        return name

    def wrap(self, cons: str) -> str:
        """``cons`` with the auxiliary variables quantified (``exists (e0 : defs and cons)``)."""
        if not self.aux:
            return cons
        return f"exists ({', '.join(self.aux)} : {' and '.join(self.defs + [cons])})"

    # ``aff`` (inherited) gives isl text (str | None)
    def visit_IntImm(self, e: E.IntImm) -> str:
        return str(e.value) if e.value >= 0 else f"({e.value})"

    def visit_Var(self, e: E.Var) -> str | None:
        b = self.env.get(id(e), _MISSING)
        if b is _MISSING:
            return self.param(e) if e.dtype.is_integer and not e.dtype.is_vector else None
        if isinstance(b, _LetBinding):
            return self._let_value(b)
        return b

    @_scalar_int
    def visit_Add(self, e: E.Expr) -> str | None:
        sign = "+" if type(e) is E.Add else "-"
        return self._binary(e, lambda a, b: f"({a} {sign} {b})")

    visit_Sub = visit_Add

    @_scalar_int
    def visit_Mul(self, e: E.Mul) -> str | None:
        for c, x in ((e.a, e.b), (e.b, e.a)):
            k = fold_int(c)
            if k is not None:
                xs = self.aff(x)
                return None if xs is None else f"({k}*{xs})" if k >= 0 else f"(({k})*{xs})"
        return None

    @_scalar_int
    def visit_FloorDiv(self, e: E.Expr) -> str | None:
        t = type(e)
        k = fold_int(e.b)
        a = self.aff(e.a)
        if k is None or k == 0 or a is None:
            return None
        if t is E.FloorDiv:
            return f"floor(({a})/{k})" if k > 0 else f"floor((-{a})/{-k})"
        if t is E.FloorMod:
            return f"({a} mod {k})" if k > 0 else None
        # C division truncates: q = trunc(a / |k|), a / k = sign(k) q, a % k = a - |k| q
        m = abs(k)
        q = self._fresh()
        self.defs.append(f"(({a} >= 0 and {m}*{q} <= {a} <= {m}*{q} + {m - 1}) or "
                         f"({a} < 0 and {m}*{q} - {m - 1} <= {a} <= {m}*{q}))")
        if t is E.Div:
            return q if k > 0 else f"(-{q})"
        return f"({a} - {m}*{q})"

    visit_FloorMod = visit_Div = visit_Mod = visit_FloorDiv

    @_scalar_int
    def visit_Min(self, e: E.Expr) -> str | None:
        fn = "min" if type(e) is E.Min else "max"
        return self._binary(e, lambda a, b: f"{fn}({a}, {b})")

    visit_Max = visit_Min

    # ``cond`` (inherited) gives isl constraint text; auxiliary definitions go to ``defs``
    def _both(self, a: str, b: str) -> str:
        return f"({a} and {b})"

    def _either(self, a: str, b: str) -> str:
        return f"({a} or {b})"

    def _truth(self, value: bool) -> str:
        return "(0 = 0)" if value else "(1 = 0)"

    def _compare(self, t: type, a: str, b: str) -> str:
        op = {E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=", E.EQ: "=", E.NE: "!="}[t]
        return f"({a} {op} {b})"

    def _choose(self, c: str, nc: str, a: str, b: str) -> str:
        v = self._fresh()
        self.defs.append(f"(({c} and {v} = {a}) or ({nc} and {v} = {b}))")
        return v


_MISSING = object()


#: the value of a constant integer expression: ``te.queries.fold_int`` (name kept for importers)
const_int = fold_int


def affine_text(e: E.Expr, env: dict | None = None) -> str | None:
    """The isl text of an integer expression, or None when it is not quasi-affine.

    Variables not in ``env`` (``id(var) -> text``) print as ``p<k>`` parameters. C division
    and remainder and selects need auxiliary variables, which a plain expression cannot
    hold: None for them (``cond_text`` handles them).

    >>> from te import Var
    >>> i = Var("i")
    >>> affine_text(i * 2 + 1, {id(i): "i0"})
    '((2*i0) + 1)'
    """
    conv = _Converter(dict(env or {}))
    t = conv.aff(e)
    return None if conv.aux else t


def cond_text(e: E.Expr, env: dict | None = None) -> str | None:
    """The isl constraint text of a bool expression (None: not expressible exactly).

    >>> from te import Var
    >>> i = Var("i")
    >>> cond_text(i < 4, {id(i): "i0"})
    '(i0 < 4)'
    """
    conv = _Converter(dict(env or {}))
    c = conv.cond(e, exact=True)
    return None if c is None else conv.wrap(c)


def provably_equal(a: E.Expr, b: E.Expr) -> bool:
    """True when two integer expressions are equal for every value of their variables:
    structurally equal after simplification, or equal as isl quasi-affine functions.

    >>> from te import Var, floordiv, floormod
    >>> n = Var("n")
    >>> provably_equal(n + n, 2 * n), provably_equal(floordiv(n, 2) * 2 + n % 2, n)
    (True, False)
    >>> provably_equal(floordiv(n, 2) * 2 + floormod(n, 2), n)
    True
    """
    from te.expr import structural_equal
    from te.simplify import simplify
    if a is b or structural_equal(a, b):
        return True
    sa, sb = simplify(a), simplify(b)
    if structural_equal(sa, sb):
        return True
    conv = _Converter({})
    ta, tb = conv.aff(a), conv.aff(b)
    if ta is None or tb is None:
        return False
    names = sorted(conv.used, key=lambda n: int(n[1:]))
    decl = f"[{', '.join(names)}] -> " if names else ""
    return isl.Set(f"{decl}{{ [] : {conv.wrap(f'{ta} != {tb}')} }}").is_empty()


def provably_nonnegative(e: E.Expr, ranges: dict | None = None, nonneg=()) -> bool:
    """True when the integer expression ``e`` is ``>= 0`` wherever every variable of
    ``ranges`` (``var -> (start, stop)``) lies in ``[start, stop)`` and every variable of
    ``nonneg`` (sizes) is ``>= 0``: by ``te.simplify.prove``, else in exact integer
    arithmetic (isl) for quasi-affine ``e`` and products of such factors. False when unsure.

    >>> from te import Var
    >>> i, n, m = Var("i"), Var("n"), Var("m")
    >>> provably_nonnegative(n - i - 1, {i: (0, n)}), provably_nonnegative(n - i - 2, {i: (0, n)})
    (True, False)
    >>> provably_nonnegative((n + 7) // 8, nonneg=[n]), provably_nonnegative(n - 1, nonneg=[n])
    (True, False)
    >>> provably_nonnegative(n * m, nonneg=[n, m])
    True
    """
    from te.simplify import prove
    ranges = dict(ranges or {})
    if type(e) is E.Mul and all(provably_nonnegative(x, ranges, nonneg) for x in (e.a, e.b)):
        return True
    known = {v: (E.as_expr(lo, v), E.as_expr(hi, v) - E.as_expr(lo, v)) for v, (lo, hi) in ranges.items()}
    for v in nonneg:
        if v.dtype.is_integer and v not in known:
            known[v] = (E.IntImm(0, v.dtype), E.IntImm(int(v.dtype.max_value()), v.dtype))
    if prove(E.GE(e, E.IntImm(0, e.dtype)), known) is True:   # cheap, but wary of overflow
        return True
    conv = _Converter({})
    neg = conv.cond(E.LT(e, E.IntImm(0, e.dtype)), exact=True)
    if neg is not None:
        cons = [neg] + [f"{conv.param(v)} >= 0" for v in nonneg if v.dtype.is_integer]
        for v, (lo, hi) in ranges.items():
            c = conv.cond(E.And(E.GE(v, E.as_expr(lo, v)), E.LT(v, E.as_expr(hi, v))))
            if c is not None:   # None: not affine, no constraint (a weaker context stays sound)
                cons.append(c)
        names = sorted(conv.used, key=lambda n: int(n[1:]))
        decl = f"[{', '.join(names)}] -> " if names else ""
        try:
            return isl.Set(f"{decl}{{ [] : {conv.wrap(' and '.join(cons))} }}").is_empty()
        except isl.Error:
            pass
    return False


# ------------------------------------------------------------------------------------
# records
# ------------------------------------------------------------------------------------
@dataclass(eq=False)
class LoopInfo:
    """Where a For sits: its depth (0 = outermost), its schedule position prefix
    (``position[:depth + 1]`` of every instance inside it) and the first position at
    depth + 1 of each statement of its body (to tell which body statement an instance is in).
    """

    loop: For
    depth: int
    prefix: tuple
    child_starts: list = field(default_factory=list)
    loops: tuple = ()  # enclosing loops, this one included (outermost first)

    def contains(self, inst: "Instance") -> bool:
        """True when ``inst`` executes inside the body of this loop."""
        return inst.depth > self.depth and inst.position[:self.depth + 1] == self.prefix

    def child_of(self, inst: "Instance") -> int:
        """Index of the body statement of this loop holding ``inst`` (which must be inside)."""
        p = inst.position[self.depth + 1]
        k = 0
        for n, s in enumerate(self.child_starts):
            if s <= p:
                k = n
        return k


@dataclass(eq=False)
class Instance:
    """A statement that touches memory, with its loops, domain and schedule position.

    ``stmt`` is a Store, or the For / Cond / Let whose expressions hold the loads.
    ``position`` holds depth + 1 textual positions (a pre-order count of the statements in
    each enclosing loop body): ``position[d]`` is the place of the loop at depth d in its
    parent's body, ``position[depth]`` the statement's own place (see ``Analysis.schedule``).
    """

    def slot(self, level: int, is_write: bool) -> int:
        """The execution-order key of this instance at ``level`` (0 <= level <= depth):
        a loop's bounds are read (2 p) before its body runs (2 p + 1); a statement reads
        (2 p) before it writes (2 p + 1)."""
        return 2 * self.position[level] + (1 if level < self.depth or is_write else 0)

    name: str
    stmt: Stmt
    loops: tuple
    position: tuple
    domain: Any            # isl.Set
    domain_exact: bool     # False when a bound or condition was over-approximated
    accesses: list = field(default_factory=list)

    @property
    def depth(self) -> int:
        return len(self.loops)

    def text(self, limit: int = 72) -> str:
        """One line of source text: ``B[i] = A[i] + 1.0f`` (shortened past ``limit``)."""
        from ..printer import stmt_to_str
        from te.printer import expr_to_str
        s = self.stmt
        if isinstance(s, Store):
            out = stmt_to_str(s).rstrip(";")
        elif isinstance(s, For):
            out = f"the bounds of loop {s.var.name}"
        elif isinstance(s, Cond):
            out = f"if ({expr_to_str(s.cond)})"
        elif isinstance(s, Let):
            out = f"{s.var.name} = {expr_to_str(s.value)}"
        elif type(s).__name__ == "ExternCall":
            out = stmt_to_str(s).rstrip(";")
        else:
            out = type(s).__name__
        return out if len(out) <= limit else out[:limit - 3] + "..."


@dataclass(eq=False)
class Access:
    """One read (a Load) or write (a Store) of a buffer by an instance.

    ``relation`` maps the instance's iterations (restricted to its domain) to the buffer
    elements touched; ``exact`` is False when some index was over-approximated.
    ``schedule`` maps iterations to execution time (reads of a statement come before its write).
    """

    instance: Instance
    buffer: Any
    indices: tuple
    is_write: bool
    node: Any
    relation: Any
    exact: bool
    analysis: Any = field(default=None, repr=False)

    @property
    def stmt(self) -> Stmt:
        return self.instance.stmt

    @property
    def schedule(self):
        """The 2d+1 schedule of this access: an ``isl.Map`` from iterations to time, all of
        one range space, so ``lex_lt_map`` orders any two accesses."""
        return self.analysis.schedule(self.instance, self.is_write)

    def text(self) -> str:
        """``B[i - 1]`` (``B[*]`` for an external call's access: every element)"""
        from te.printer import expr_to_str
        if type(self.node).__name__ == "ExternCall":
            return f"{self.buffer.name}[*]"
        return f"{self.buffer.name}[{', '.join(expr_to_str(i) for i in self.indices)}]"

    def __str__(self) -> str:
        return f"{self.text()} ({'write' if self.is_write else 'read'})"

    __repr__ = __str__


class Analysis:
    """The polyhedral model of one statement tree (see ``analyze``).

    ``instances`` in execution (pre-)order, ``accesses`` in the same order (a statement's
    write first, then its reads), ``loops`` maps ``id(loop var)`` to LoopInfo,
    ``params`` maps isl parameter names to the size Vars, ``buffer_names`` maps
    ``id(buffer)`` to the isl tuple name.

    The isl objects are built through the isl API (parsing text is an order of magnitude
    slower); every iteration space of depth d is ``[p0, ...] -> { S<k>[i0, ..., i<d-1>] }``.
    """

    def __init__(self, root: Stmt):
        self.root = root
        self.instances: list[Instance] = []
        self.accesses: list[Access] = []
        self.loops: dict[int, LoopInfo] = {}
        self.params: dict[str, E.Var] = {}
        self.buffer_names: dict[int, str] = {}
        self.max_depth = _max_depth(root)
        self.ctx = isl.DEFAULT_CONTEXT
        self._param_pos: dict[int, int] = {}
        for v in _free_int_vars(root):
            self._param_pos[id(v)] = len(self.params)
            self.params[f"p{len(self.params)}"] = v
        self._param_names = {id(v): n for n, v in self.params.items()}
        self._param_key = tuple(id(v) for v in self.params.values())
        self._anon_domains: dict[str, Any] = {}
        self._sched_cache: dict = {}
        self._build(root)

    # -- queries ---------------------------------------------------------------------
    def loop_info(self, loop: Any) -> LoopInfo:
        """The LoopInfo of a loop given as a Loop handle, a For or its Var."""
        v = loop_var_of(loop)
        info = self.loops.get(id(v))
        if info is None:
            raise KeyError(f"loop {v.name} is not in this statement tree")
        return info

    def accesses_of(self, buffer: Any) -> list[Access]:
        return [a for a in self.accesses if a.buffer is buffer]

    def instances_in(self, loop: Any) -> list[Instance]:
        info = self.loop_info(loop)
        return [s for s in self.instances if info.contains(s)]

    def param_decl(self, used=None) -> str:
        """``[p0, p1] -> `` for isl text that must share this analysis' parameters."""
        names = sorted(self.params if used is None else used, key=lambda n: int(n[1:]))
        return f"[{', '.join(names)}] -> " if names else ""

    def var_names(self, inst: Instance) -> dict[int, str]:
        """``id(var) -> name`` for the loop variables of ``inst`` and the size parameters."""
        out = {id(v): name for name, v in self.params.items()}
        for d, f in enumerate(inst.loops):
            out[id(f.var)] = f.var.name
        return out

    def schedule(self, inst: Instance, is_write: bool):
        """``S[i0, ...] -> [t0, i0, t1, i1, ..., td, 0, ...]``: ``t = 2 p + 1`` at the levels of
        the enclosing loops (their bodies run after their bounds are read, at ``2 p``) and
        ``2 p + w`` for the statement itself (w = 1 for a write: reads come first)."""
        key = (inst.name, is_write)
        m = self._sched_cache.get(key)
        if m is None:
            dims = []
            for d in range(inst.depth):
                dims += [str(2 * inst.position[d] + 1), f"i{d}"]
            dims.append(str(2 * inst.position[inst.depth] + (1 if is_write else 0)))
            dims += ["0"] * (2 * self.max_depth + 1 - len(dims))
            tup = ", ".join(f"i{d}" for d in range(inst.depth))
            m = isl.Map(f"{self.param_decl()}{{ {inst.name}[{tup}] -> [{', '.join(dims)}] }}")
            self._sched_cache[key] = m
        return m

    # -- isl building blocks -----------------------------------------------------------
    def space(self, depth: int):
        """(set space, local space, universe set) of iterations at ``depth`` (anonymous tuple)."""
        key = (len(self.params), depth)
        sp = _SPACES.get(key)
        if sp is None:
            space = isl.Space.set_alloc(self.ctx, len(self.params), depth)
            for k, name in enumerate(self.params):
                space = space.set_dim_name(isl.dim_type.param, k, name)
            sp = _SPACES[key] = (space, isl.LocalSpace.from_space(space), isl.Set.universe(space))
        return sp

    def const(self, depth: int, value: int):
        key = (len(self.params), depth, value)
        c = _CONSTS.get(key)
        if c is None:
            if len(_CONSTS) >= _CONSTS_SIZE:
                _CONSTS.clear()
            ls = self.space(depth)[1]
            c = _CONSTS[key] = isl.PwAff.from_aff(
                isl.Aff.zero_on_domain(ls).set_constant_val(isl.Val.int_from_si(self.ctx, value)))
        return c

    def memo_key(self, kind: str, nodes: tuple, depth: int, env: dict, dom) -> tuple | None:
        """The key under which ``_MEMO`` keeps what ``nodes`` (IR objects) convert to at
        ``depth`` in ``env`` on the domain ``dom``, or None when ``env`` binds a let (not
        memoized). The key holds identities: the entry keeps the objects alive (see ``_MEMO``)."""
        if env and not all(type(v) is int for v in env.values()):
            return None
        return (kind, tuple(map(id, nodes)), depth, tuple(env.items()), self._param_key, id(dom))

    # -- construction ----------------------------------------------------------------
    def _build(self, root: Stmt) -> None:
        self._counters: list[int] = [0]
        _DomainWalk(self).visit(root, (), {}, self.space(0)[2], True, ())

    def _next_pos(self) -> int:
        p = self._counters[-1]
        self._counters[-1] += 1
        return p

    def _instance(self, s, loops, dom, exact, position) -> Instance:
        name = f"S{len(self.instances)}"
        inst = Instance(name, s, loops, position, dom.set_tuple_name(name), exact)
        self._anon_domains[name] = dom
        self.instances.append(inst)
        return inst

    def _pseudo(self, s, exprs, loops, env, dom, exact, position) -> None:
        loads = _stmt_loads(s, exprs)
        if not loads:
            return
        inst = self._instance(s, loops, dom, exact, position)
        self._reads(inst, env, exprs, loads)

    def _reads(self, inst: Instance, env: dict, exprs, loads=None) -> None:
        for ld, lets, guards in (loads if loads is not None else _loads_with_lets(exprs)):
            full = _with_lets(env, lets)
            acc = self._access(inst, full, ld.buffer, ld.indices, False, ld)
            if guards:
                acc.relation = acc.relation.intersect_domain(self._guard_set(inst, env, guards))
            inst.accesses.append(acc)

    def _guard_set(self, inst: Instance, env: dict, guards):
        """The instances of ``inst`` where the ``if_then_else`` sides around a load are taken
        (``guards``: (condition, side taken, lets in scope) from the outermost): only those
        evaluate it. A condition that is not affine, is a vector (lane by lane) or wraps
        (``_wraps``) is left out (every instance may)."""
        dom = self._anon_domains[inst.name]
        out = dom.set_tuple_name(inst.name)
        for cond, taken, lets in guards:
            if cond.dtype.is_vector:
                continue
            conv = _PwConverter(self, inst.depth, _with_lets(env, lets))
            if _wraps(conv, cond, dom):
                continue
            c = conv.cond(cond, negate=not taken, exact=True)
            if c is not None:
                out = out.intersect(c.set_tuple_name(inst.name))
        return out

    def _access(self, inst: Instance, env: dict, buf, indices, is_write: bool, node) -> Access:
        bname = self.buffer_names.get(id(buf))
        if bname is None:
            bname = self.buffer_names[id(buf)] = f"M{len(self.buffer_names)}"
        dom = self._anon_domains[inst.name]
        key = self.memo_key("access", tuple(indices), inst.depth, env, dom)
        hit = _memo_get(key)
        if hit is None:
            hit = self._relation(inst.depth, env, indices, dom)
            _memo_put(key, (tuple(indices), dom), hit)
        rel, unknown = hit
        rel = rel.set_tuple_name(isl.dim_type.in_, inst.name).set_tuple_name(isl.dim_type.out, bname)
        acc = Access(inst, buf, tuple(indices), is_write, node, rel, not unknown, self)
        self.accesses.append(acc)
        return acc

    def _relation(self, d: int, env: dict, indices, dom) -> tuple:
        """(the access relation of ``indices`` from the anonymous domain ``dom`` at depth ``d``,
        anonymous too; whether some index is not affine)."""
        conv = _PwConverter(self, d, env)
        outs = []
        unknown = []
        for k, ix in enumerate(indices):
            pa = conv.aff(ix) if not ix.dtype.is_vector else None
            if pa is None:
                unknown.append(k)
            else:
                outs.append(pa)
        space = self.space(d)[0]
        if outs:
            lst = isl.PwAffList.alloc(self.ctx, len(outs))
            for pa in outs:
                lst = lst.add(pa)
            mspace = space.from_domain().add_dims(isl.dim_type.out, len(outs))
            rel = isl.Map.from_multi_pw_aff(isl.MultiPwAff.from_pw_aff_list(mspace, lst))
        else:
            rel = isl.Map.from_domain(self.space(d)[2])
        for k in unknown:  # an index that is not affine may be any element
            rel = rel.insert_dims(isl.dim_type.out, k, 1)
        return rel.intersect_domain(dom), bool(unknown)


def loop_domain(an: "Analysis", s: For, depth: int, env: dict, dom):
    """(the iterations of loop ``s`` inside ``dom``, as a set with one more dimension ``depth``
    for its variable; whether both its bounds were represented exactly). A bound that is not
    quasi-affine is left out, which over-approximates the domain."""
    inner = dom.add_dims(isl.dim_type.set, 1)
    conv = _PwConverter(an, depth + 1, env)
    var = isl.PwAff.from_aff(isl.Aff.var_on_domain(an.space(depth + 1)[1], isl.dim_type.set, depth))
    lo, hi = conv.aff(s.start), conv.aff(s.stop)
    if lo is not None:
        inner = inner.intersect(var.ge_set(lo))
    if hi is not None:
        inner = inner.intersect(var.lt_set(hi))
    return inner, lo is not None and hi is not None


def _cond_domains(an: "Analysis", cond: E.Expr, depth: int, env: dict, dom) -> tuple:
    """(the part of ``dom`` where ``cond`` holds, the part where it does not, whether both
    are exact); a condition that is not affine keeps its affine conjuncts, if any (an
    over-approximation of both parts); one whose arithmetic wraps somewhere in ``dom``
    (``_wraps``) narrows nothing."""
    conv = _PwConverter(an, depth, env)
    if _wraps(conv, cond, dom):
        return dom, dom, False
    c = conv.cond(cond, exact=True)
    nc = conv.cond(cond, negate=True, exact=True)
    ok = c is not None and nc is not None
    if not ok:
        c, nc = conv.cond(cond), conv.cond(cond, negate=True)
    return dom if c is None else dom.intersect(c), dom if nc is None else dom.intersect(nc), ok


#: where only the sizes bound a condition's arithmetic, the wrap check takes every size (and
#: outer variable) to lie within ``[-WRAP_CHECK_SIZE, WRAP_CHECK_SIZE]``: arithmetic that
#: leaves its type there wraps for sizes a program may well have (seed 193, case 65: ``i *
#: 402653184 + 1073741824 < c`` with ``i < N`` wraps at ``i = 3``), while ``i * N + j`` with
#: ``N`` up to it stays in int32
WRAP_CHECK_SIZE = 1 << 15


def _plausible_sizes(space):
    """The parameter set of ``space`` with every parameter within ``WRAP_CHECK_SIZE``."""
    box = isl.Set.universe(space)
    for k in range(space.dim(isl.dim_type.param)):
        box = box.lower_bound_val(isl.dim_type.param, k, -WRAP_CHECK_SIZE)
        box = box.upper_bound_val(isl.dim_type.param, k, WRAP_CHECK_SIZE)
    return box


def _wraps(conv: "_PwConverter", cond: E.Expr, dom) -> bool:
    """Whether an integer sum, difference or product in ``cond`` leaves its type's range at
    some point of ``dom``: there it wraps (two's complement), while its affine form goes on,
    so the condition the analysis sees would not be the one that runs (``r0 * 1073741823 +
    7 < -1`` holds at ``r0 = 3`` in int32). Where only the sizes bound the values, the sizes
    are taken to be at most ``WRAP_CHECK_SIZE`` (a nest whose sizes are larger and whose
    index arithmetic wraps only there is not seen). Arithmetic inside a ``Let`` expression
    of the condition, whose variable is not bound here, is not checked.

    >>> import islpy as isl
    >>> from te import Buffer, Compute, Var
    >>> from loopnest import LoopNest
    >>> r = Var("r")
    >>> an = analyze(LoopNest([Compute("B", (8,), lambda i: i)]).root)
    >>> conv = _PwConverter(an, 1, {id(r): 0})
    >>> dom = isl.Set("{ [r] : 0 <= r <= 7 }")
    >>> _wraps(conv, r * 1073741823 + 7 < -1, dom), _wraps(conv, r * 4 + 1 < 9, dom)
    (True, False)
    """
    stack = [cond]
    while stack:
        e = stack.pop()
        stack.extend(e.children())
        if type(e) not in (E.Add, E.Sub, E.Mul) or not e.dtype.is_integer or e.dtype.is_vector:
            continue
        pa = conv.aff(e)
        if pa is None:
            continue
        # an integer expression's form may have rational coefficients where a division is
        # exact on ``dom`` (``(2 i) / 5`` where i is a multiple of 5); its floor is the same
        # value with integer ones, which isl's bounds need
        pa = pa.intersect_domain(dom).floor()
        top, bottom = pa.max_val(), pa.min_val()
        if top.is_infty() or bottom.is_neginfty():      # unbounded but by the sizes
            plausible = pa.intersect_params(_plausible_sizes(pa.get_domain_space().params()))
            top = plausible.max_val() if top.is_infty() else top
            bottom = plausible.min_val() if bottom.is_neginfty() else bottom
        lo, hi = e.dtype.min_value(), e.dtype.max_value()
        if (not top.is_nan() and not top.is_infty() and top.to_python() > hi
                or not bottom.is_nan() and not bottom.is_neginfty() and bottom.to_python() < lo):
            return True
    return False


# ------------------------------------------------------------------------------------
# what analyses of successive trees share
# ------------------------------------------------------------------------------------
#: isl spaces and constants by (number of size parameters, depth[, value]): every analysis
#: names its parameters p0, p1, ... in order, so trees with as many sizes share them
_SPACES: dict[tuple, tuple] = {}
_CONSTS: dict[tuple, Any] = {}
_CONSTS_SIZE = 4096

#: the isl objects converted from IR objects: loop domains, condition domains and access
#: relations (anonymous tuples), keyed by ``Analysis.memo_key``, the least recently used
#: dropped beyond ``_MEMO_SIZE`` entries (about 2 KB each). A transform rebuilds only
#: the statements it changes (the others are the same objects in the new tree), so the
#: analysis of the new tree converts only those. Keys are identities of IR nodes, of the
#: enclosing domain and of the variables in scope; each entry holds those nodes and that
#: domain, so no identity in a live key is reused by another object. What a node converts to
#: depends only on the node, its depth, the positions of its variables (the environment and
#: the parameter order, both in the key) and the domain: a hit is what converting again gives.
_MEMO: "OrderedDict[tuple, tuple]" = OrderedDict()
_MEMO_SIZE = 4096
_memo_lock = threading.Lock()


def _memo_get(key):
    if key is None:
        return None
    with _memo_lock:
        entry = _MEMO.get(key)
        if entry is None:
            return None
        _MEMO.move_to_end(key)
        return entry[1]


def _memo_put(key, held: tuple, value) -> None:
    if key is None:
        return
    with _memo_lock:
        _MEMO[key] = (held, value)
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)


def clear_memo() -> None:
    """Forget the isl objects kept for later analyses (``_MEMO``).

    >>> clear_memo(); len(_MEMO)
    0
    """
    with _memo_lock:
        _MEMO.clear()


class _DomainWalk(Functor):
    """The statement walk that builds an ``Analysis``: ``visit(s, loops, env, dom, exact,
    prefix)`` records the instances and accesses of ``s``, which runs inside ``loops`` with
    the environment ``env`` (see ``_PwConverter``), on the iteration domain ``dom`` (exact
    or over-approximated) at the schedule position prefix ``prefix``."""

    def __init__(self, an: Analysis):
        self.an = an

    def visit_Block(self, s: Block, loops: tuple, env: dict, dom, exact: bool, prefix: tuple) -> None:
        for x in s.stmts:
            self.visit(x, loops, env, dom, exact, prefix)

    def visit_Store(self, s: Store, loops: tuple, env: dict, dom, exact: bool, prefix: tuple) -> None:
        an = self.an
        pos = an._next_pos()
        inst = an._instance(s, loops, dom, exact, prefix + (pos,))
        inst.accesses.append(an._access(inst, env, s.buffer, s.indices, True, s))
        exprs = list(s.indices) + [s.value]
        an._reads(inst, env, exprs, _stmt_loads(s, exprs))

    def visit_For(self, s: For, loops: tuple, env: dict, dom, exact: bool, prefix: tuple) -> None:
        an = self.an
        pos = an._next_pos()
        an._pseudo(s, [s.start, s.stop], loops, env, dom, exact, prefix + (pos,))
        d = len(loops)
        key = an.memo_key("loop", (s.start, s.stop), d, env, dom)
        hit = _memo_get(key)
        if hit is None:
            hit = loop_domain(an, s, d, env, dom)
            _memo_put(key, (s.start, s.stop, dom), hit)
        inner_dom, bounded = hit
        inner_env = dict(env)
        inner_env[id(s.var)] = d
        info = LoopInfo(s, d, prefix + (pos,), loops=loops + (s,))
        an.loops.setdefault(id(s.var), info)
        an._counters.append(0)
        for x in s.body.stmts:
            info.child_starts.append(an._counters[-1])
            self.visit(x, loops + (s,), inner_env, inner_dom, exact and bounded,
                       prefix + (pos,))
        an._counters.pop()

    def visit_Cond(self, s: Cond, loops: tuple, env: dict, dom, exact: bool, prefix: tuple) -> None:
        an = self.an
        pos = an._next_pos()
        an._pseudo(s, [s.cond], loops, env, dom, exact, prefix + (pos,))
        key = an.memo_key("cond", (s.cond,), len(loops), env, dom)
        hit = _memo_get(key)
        if hit is None:
            hit = _cond_domains(an, s.cond, len(loops), env, dom)
            _memo_put(key, (s.cond, dom), hit)
        then_dom, else_dom, ok = hit
        self.visit(s.then, loops, env, then_dom, exact and ok, prefix)
        if s.otherwise is not None:
            self.visit(s.otherwise, loops, env, else_dom, exact and ok, prefix)

    def visit_LetStmt(self, s: Let, loops: tuple, env: dict, dom, exact: bool, prefix: tuple) -> None:
        an = self.an
        pos = an._next_pos()
        an._pseudo(s, [s.value], loops, env, dom, exact, prefix + (pos,))
        inner_env = dict(env)
        inner_env[id(s.var)] = _LetBinding(s.value, env)
        self.visit(s.body, loops, inner_env, dom, exact, prefix)

    def visit_ExternCall(self, s, loops: tuple, env: dict, dom, exact: bool, prefix: tuple) -> None:
        """One instance that writes its outputs and reads its inputs, each whole (an access of
        any element: over-approximated, so never exact)."""
        an = self.an
        pos = an._next_pos()
        inst = an._instance(s, loops, dom, exact, prefix + (pos,))
        for bufs, is_write in ((s.outputs, True), (s.inputs, False)):
            for b in bufs:
                inst.accesses.append(an._access(inst, env, b, (_WHOLE,) * b.ndim, is_write, s))

    def generic(self, s: Stmt, *args) -> None:
        """Allocate / Free and unknown statements touch no element values."""
        return None


#: the index of an ExternCall's accesses: a variable bound nowhere, so any element
_WHOLE = E.Var("any", "int32")


#: the most pieces of the two operands' product that a piecewise min, max, sum or difference
#: is built from, and the isl operations it may take: nested mins of bounds (a cache
#: buffer's extent, computed at a loop of another one) multiply their pieces, and isl's
#: work with them (pieces with many integer divisions) grows faster still
MAX_PIECES = 64
COMBINE_OPERATIONS = 500_000


def _combined(a, b, combine):
    """``combine(b)`` (a method of ``a``: min, max, add, sub), or None (not quasi-affine: the
    analyses over-approximate it) when it could make more than ``MAX_PIECES`` pieces or
    takes more than ``COMBINE_OPERATIONS`` isl operations.

    >>> a = isl.PwAff("[n] -> { [(n)] : n >= 0; [(0)] : n < 0 }")
    >>> print(_combined(a, a, a.max))
    [n] -> { [(n)] : n >= 0; [(0)] : n < 0 }
    """
    if a.n_piece() * b.n_piece() > MAX_PIECES:
        return None
    return within_budget(COMBINE_OPERATIONS, combine, b)


class _PwConverter(_ExprConverter):
    """te integer expressions to ``isl.PwAff`` on the iteration space of one depth (None when
    not quasi-affine); bool expressions to ``isl.Set``."""

    def __init__(self, an: Analysis, depth: int, env: dict):
        self.an = an
        self.depth = depth
        self.ls = an.space(depth)[1]
        self.env = env

    def _var(self, kind, pos):
        return isl.PwAff.from_aff(isl.Aff.var_on_domain(self.ls, kind, pos))

    # ``aff`` (inherited) gives an ``isl.PwAff`` (or None)
    def visit_IntImm(self, e: E.IntImm):
        return self.an.const(self.depth, e.value)

    def visit_Var(self, e: E.Var):
        b = self.env.get(id(e), _MISSING)
        if b is _MISSING:
            pos = self.an._param_pos.get(id(e))
            return None if pos is None else self._var(isl.dim_type.param, pos)
        if isinstance(b, _LetBinding):
            return self._let_value(b)
        return self._var(isl.dim_type.set, b)

    @_scalar_int
    def visit_Add(self, e: E.Expr):
        add = type(e) is E.Add
        return self._binary(e, lambda a, b: _combined(a, b, a.add if add else a.sub))

    visit_Sub = visit_Add

    @_scalar_int
    def visit_Mul(self, e: E.Mul):
        for c, x in ((e.a, e.b), (e.b, e.a)):
            k = fold_int(c)
            if k is not None:
                xs = self.aff(x)
                return None if xs is None else xs.scale_val(isl.Val.int_from_si(self.an.ctx, k))
        return None

    @_scalar_int
    def visit_FloorDiv(self, e: E.Expr):
        t = type(e)
        k = fold_int(e.b)
        a = self.aff(e.a)
        if k is None or k == 0 or a is None:
            return None
        kv = isl.Val.int_from_si(self.an.ctx, abs(k))
        if t is E.FloorDiv:
            return (a if k > 0 else a.neg()).scale_down_val(kv).floor()
        if t is E.FloorMod:
            return a.mod_val(kv) if k > 0 else None
        kc = self.an.const(self.depth, k)
        return a.tdiv_q(kc) if t is E.Div else a.tdiv_r(kc)

    visit_FloorMod = visit_Div = visit_Mod = visit_FloorDiv

    @_scalar_int
    def visit_Min(self, e: E.Expr):
        is_min = type(e) is E.Min
        return self._binary(e, lambda a, b: _combined(a, b, a.min if is_min else a.max))

    visit_Max = visit_Min

    # ``cond`` (inherited) gives the ``isl.Set`` where a bool expression holds
    def _both(self, a, b):
        return a.intersect(b)

    def _either(self, a, b):
        return a.union(b)

    def _truth(self, value: bool):
        u = self.an.space(self.depth)[2]
        return u if value else u.subtract(u)

    def _compare(self, t: type, a, b):
        op = {E.LT: "lt", E.LE: "le", E.GT: "gt", E.GE: "ge", E.EQ: "eq", E.NE: "ne"}[t]
        return getattr(a, f"{op}_set")(b)

    def _choose(self, c, nc, a, b):
        return a.intersect_domain(c).union_add(b.intersect_domain(nc))


def _free_int_vars(root: Stmt) -> list:
    """Scalar integer variables used in ``root`` and bound by no loop or let: the sizes."""
    return [v for v in stmt_free_vars(root, allocations=False) if v.dtype.is_integer and not v.dtype.is_vector]


def _stmt_loads(s: Stmt, exprs: list) -> list:
    """``_loads_with_lets(exprs)`` of the expressions ``exprs`` held by statement ``s`` (its
    bounds, condition, value, indices), kept in ``_MEMO`` with ``s``: statements are immutable."""
    key = ("loads", id(s))
    hit = _memo_get(key)
    if hit is None:
        hit = _loads_with_lets(exprs)
        _memo_put(key, (s,), hit)
    return hit


def _loads_with_lets(exprs) -> list:
    """Every Load in ``exprs`` with the let bindings in scope at it (pairs (var, value)) and
    the ``if_then_else`` sides it is on (``(condition, side taken, lets in scope at the
    condition)``, outermost first: the load is evaluated only where they are taken); the
    plain list of loads is ``te.queries.loads``."""
    rec = _LoadsWithLets()
    for e in exprs:
        rec.visit(e, (), ())
    return rec.out


def _with_lets(env: dict, lets: tuple) -> dict:
    """``env`` with the let bindings ``lets`` (pairs (var, value), outermost first) added."""
    if not lets:
        return env
    full = dict(env)
    for var, value in lets:
        full[id(var)] = _LetBinding(value, dict(full))
    return full


class _LoadsWithLets(Functor):
    """``visit(e, lets, guards)`` appends to ``out`` every Load of ``e`` with ``lets`` extended
    by the let bindings around it in ``e`` and ``guards`` by the ``if_then_else`` sides it is
    on (a lazy conditional: ``select`` evaluates both sides, so it guards nothing)."""

    def __init__(self):
        self.out: list = []

    def visit_Load(self, e: E.Load, lets: tuple, guards: tuple) -> None:
        self.out.append((e, lets, guards))
        self.generic(e, lets, guards)

    def visit_Let(self, e: E.Let, lets: tuple, guards: tuple) -> None:
        self.visit(e.value, lets, guards)
        self.visit(e.body, lets + ((e.var, e.value),), guards)

    def visit_IfThenElse(self, e: E.IfThenElse, lets: tuple, guards: tuple) -> None:
        self.visit(e.cond, lets, guards)
        self.visit(e.t, lets, guards + ((e.cond, True, lets),))
        self.visit(e.f, lets, guards + ((e.cond, False, lets),))

    def generic(self, e: E.Expr, lets: tuple, guards: tuple) -> None:
        for c in e.children():
            self.visit(c, lets, guards)


class _MaxDepth(Functor):
    """The deepest loop nesting of a statement tree (0 without loops)."""

    def visit_For(self, s: For) -> int:
        return 1 + self.visit(s.body)

    def visit_Block(self, s: Block) -> int:
        return max((self.visit(x) for x in s.stmts), default=0)

    def visit_Cond(self, s: Cond) -> int:
        return max(self.visit(s.then), self.visit(s.otherwise) if s.otherwise is not None else 0)

    def visit_LetStmt(self, s: Let) -> int:
        return self.visit(s.body)

    def generic(self, s: Stmt) -> int:
        return 0


def _max_depth(s: Stmt) -> int:
    return _MaxDepth().visit(s)


def loop_var_of(loop: Any) -> E.Var:
    """The Var of a Loop handle, a For, or a Var."""
    if isinstance(loop, E.Var):
        return loop
    if isinstance(loop, For):
        return loop.var
    v = getattr(loop, "var", None)
    if isinstance(v, E.Var):
        return v
    raise TypeError(f"expected a loop (a Loop handle, a For or its Var), got {loop!r}")


# ------------------------------------------------------------------------------------
# cache: statement trees are immutable, so one analysis per root object is valid
# ------------------------------------------------------------------------------------
_CACHE: "OrderedDict[int, tuple[Stmt, Analysis]]" = OrderedDict()
_CACHE_SIZE = 16


def analyze(root: Any) -> Analysis:
    """The (cached) Analysis of a statement tree, or of a LoopNest's current root."""
    root = getattr(root, "root", root)
    hit = _CACHE.get(id(root))
    if hit is not None and hit[0] is root:
        _CACHE.move_to_end(id(root))
        return hit[1]
    an = Analysis(root)
    _CACHE[id(root)] = (root, an)  # holding root keeps its id from being reused while cached
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return an
