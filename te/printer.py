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
from .bitops import BIT_OPS
from .functor import Functor
from .queries import expr_depth
from .recursion import recursion_guard

_PREC = {E.Or: 1, E.And: 2, E.EQ: 6, E.NE: 6, E.LT: 6, E.LE: 6, E.GT: 6, E.GE: 6,
         E.Add: 8, E.Sub: 8, E.Mul: 9, E.Div: 9, E.Mod: 9}
#: the bit operations (``te.bitops`` calls) print as C operators, with C's precedences
_BIT_PREC = {"bitwise_or": 3, "bitwise_xor": 4, "bitwise_and": 5, "shift_left": 7, "shift_right": 7}
_UNARY_PREC = 10
_OPERAND_PREC = 9       # what the operands of a bit operation are printed at (a product needs no parens)


def _float_str(v: float) -> str:
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    r = repr(v)
    return r


class _Printer(Functor):
    """``visit(e, prec)``: the text of ``e``, parenthesised when the surrounding operator binds
    tighter than ``prec``."""

    def visit_Var(self, e, prec):
        return e.name

    def visit_IntImm(self, e, prec):
        if e.dtype.is_bool:
            return "true" if e.value else "false"
        if e.dtype.name == "int32":
            return str(e.value) if e.value >= 0 or prec == 0 else f"({e.value})"
        return f"{e.dtype.name}({e.value})"

    def visit_FloatImm(self, e, prec):
        v = e.value
        if e.dtype.name == "float32":
            s = (_float_str(v) if not math.isfinite(v) else repr(float(str(np.float32(v))))) + "f"
        else:
            s = _float_str(v)
        if e.dtype.name not in ("float32", "float64"):
            return f"{e.dtype.name}({s})"
        return s if not s.startswith("-") or prec == 0 else f"({s})"

    def _infix(self, e, prec):
        p = _PREC[type(e)]
        # left-associative: the right operand needs parens at equal precedence
        s = f"{self.visit(e.a, p)} {e.symbol} {self.visit(e.b, p + 1)}"
        return f"({s})" if p < prec else s

    visit_Or = visit_And = visit_EQ = visit_NE = visit_LT = visit_LE = visit_GT = visit_GE = _infix
    visit_Add = visit_Sub = visit_Mul = visit_Div = visit_Mod = _infix

    def _call_form(self, e, prec):
        return f"{e.symbol}({self.visit(e.a, 0)}, {self.visit(e.b, 0)})"

    visit_FloorDiv = visit_FloorMod = visit_Min = visit_Max = _call_form

    def visit_Not(self, e, prec):
        return f"!{self.visit(e.a, _UNARY_PREC)}"

    def visit_Cast(self, e, prec):
        return f"{e.dtype.name}({self.visit(e.value, 0)})"

    def visit_Select(self, e, prec):
        return f"select({self.visit(e.cond, 0)}, {self.visit(e.t, 0)}, {self.visit(e.f, 0)})"

    def visit_IfThenElse(self, e, prec):
        return f"if_then_else({self.visit(e.cond, 0)}, {self.visit(e.t, 0)}, {self.visit(e.f, 0)})"

    def visit_Load(self, e, prec):
        return f"{e.buffer.name}[{', '.join(self.visit(i, 0) for i in e.indices)}]"

    def visit_Let(self, e, prec):
        s = f"let {e.var.name} = {self.visit(e.value, 0)} in {self.visit(e.body, 0)}"
        return f"({s})" if prec else s

    def visit_Call(self, e, prec):
        p = _BIT_PREC.get(e.name)
        if p is not None:
            # operands other than a chain of the same operation are parenthesised unless they
            # are products or tighter: C's precedences here surprise (`a | b << 8`, `x & 1 == 0`)
            a, b = e.args
            chain = type(a) is E.Call and a.name == e.name
            s = f"{self.visit(a, p if chain else _OPERAND_PREC)} {BIT_OPS[e.name]} {self.visit(b, _OPERAND_PREC)}"
            return f"({s})" if p < prec else s
        if e.name == "bitwise_not":
            return f"~{self.visit(e.args[0], _UNARY_PREC)}"
        if e.name == "bitcast":
            return f"bitcast({self.visit(e.args[0], 0)}, {e.dtype.name})"
        return f"{e.name}({', '.join(self.visit(a, 0) for a in e.args)})"

    def visit_IndexCheck(self, e, prec):
        return f"check_index({self.visit(e.index, 0)}, {self.visit(e.extent, 0)}, {e.buffer}, {e.dim})"

    def visit_Ramp(self, e, prec):
        return f"ramp({self.visit(e.base, 0)}, {self.visit(e.stride, 0)}, {e.lanes})"

    def visit_Broadcast(self, e, prec):
        return f"broadcast({self.visit(e.value, 0)}, {e.lanes})"

    def visit_MakeVector(self, e, prec):
        return f"make_vector({', '.join(self.visit(v, 0) for v in e.values)})"

    def visit_ExtractLane(self, e, prec):
        return f"extract_lane({self.visit(e.value, 0)}, {e.lane})"

    def generic(self, e, prec):
        return f"<{type(e).__name__}>"


_PRINTER = _Printer()


@recursion_guard(depth=lambda e, prec=0: expr_depth(e))
def expr_to_str(e: E.Expr, prec: int = 0) -> str:
    """Print ``e``; parenthesise when the surrounding operator binds tighter than ``prec``.

    >>> from te import Var
    >>> print(expr_to_str(Var("i") * 2 + 1))
    i * 2 + 1
    """
    return _PRINTER.visit(e, prec)
