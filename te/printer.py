"""Readable C-like text for expressions (statements are printed by ``loopnest.printer``).

>>> from te import Var
>>> i = Var("i")
>>> print((i + 1) * 2 - i % 3)
(i + 1) * 2 - i % 3
"""
from __future__ import annotations

import math

import numpy as np

from . import expr as E

_PREC = {E.Or: 1, E.And: 2, E.EQ: 3, E.NE: 3, E.LT: 3, E.LE: 3, E.GT: 3, E.GE: 3,
         E.Add: 4, E.Sub: 4, E.Mul: 5, E.Div: 5, E.Mod: 5}
_CALL_FORM = (E.FloorDiv, E.FloorMod, E.Min, E.Max)


def _float_str(v: float) -> str:
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    r = repr(v)
    return r


def expr_to_str(e: E.Expr, prec: int = 0) -> str:
    """Print ``e``; parenthesise when the surrounding operator binds tighter than ``prec``."""
    t = type(e)
    s: str
    if t is E.Var:
        return e.name
    if t is E.IntImm:
        if e.dtype.is_bool:
            return "true" if e.value else "false"
        if e.dtype.name == "int32":
            return str(e.value) if e.value >= 0 or prec == 0 else f"({e.value})"
        return f"{e.dtype.name}({e.value})"
    if t is E.FloatImm:
        v = e.value
        if e.dtype.name == "float32":
            s = (_float_str(v) if not math.isfinite(v) else repr(float(str(np.float32(v))))) + "f"
        else:
            s = _float_str(v)
        if e.dtype.name not in ("float32", "float64"):
            return f"{e.dtype.name}({s})"
        return s if not s.startswith("-") or prec == 0 else f"({s})"
    if t in _PREC:
        p = _PREC[t]
        # left-associative: the right operand needs parens at equal precedence
        s = f"{expr_to_str(e.a, p)} {e.symbol} {expr_to_str(e.b, p + 1)}"
        return f"({s})" if p < prec else s
    if t in _CALL_FORM:
        return f"{e.symbol}({expr_to_str(e.a)}, {expr_to_str(e.b)})"
    if t is E.Not:
        return f"!{expr_to_str(e.a, 9)}"
    if t is E.Cast:
        return f"{e.dtype.name}({expr_to_str(e.value)})"
    if t is E.Select:
        return f"select({expr_to_str(e.cond)}, {expr_to_str(e.t)}, {expr_to_str(e.f)})"
    if t is E.IfThenElse:
        return f"if_then_else({expr_to_str(e.cond)}, {expr_to_str(e.t)}, {expr_to_str(e.f)})"
    if t is E.Load:
        return f"{e.buffer.name}[{', '.join(expr_to_str(i) for i in e.indices)}]"
    if t is E.Let:
        s = f"let {e.var.name} = {expr_to_str(e.value)} in {expr_to_str(e.body)}"
        return f"({s})" if prec else s
    if t is E.Call:
        return f"{e.name}({', '.join(expr_to_str(a) for a in e.args)})"
    if t is E.Ramp:
        return f"ramp({expr_to_str(e.base)}, {expr_to_str(e.stride)}, {e.lanes})"
    if t is E.Broadcast:
        return f"broadcast({expr_to_str(e.value)}, {e.lanes})"
    return f"<{t.__name__}>"
