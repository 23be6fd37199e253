"""Intrinsic functions: math calls, min/max, select and cast.

>>> from te import Var, exp, cast, float32
>>> x = cast(Var("i"), float32)
>>> print(exp(x) + 1.0)
exp(float32(i)) + 1.0f

Each math intrinsic is a ``Call`` whose dtype is its argument's dtype (``isnan`` gives bool).
Floating-point-only intrinsics refuse integer arguments with a ``TypeError`` that suggests a cast.
"""
from __future__ import annotations

import builtins
from typing import Any

from .dtypes import as_dtype, bool_
from .expr import Call, Cast, Expr, Max, Min, Select, _unify, as_expr

__all__ = ["INTRINSICS", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "abs",
           "floor", "ceil", "round", "sin", "cos", "erf", "pow", "isnan", "maximum", "minimum",
           "select", "cast", "call_intrinsic"]

#: name -> (number of arguments, float_only, result is bool)
INTRINSICS: dict[str, tuple[int, bool, bool]] = {
    "exp": (1, True, False), "exp2": (1, True, False), "log": (1, True, False),
    "log2": (1, True, False), "sqrt": (1, True, False), "rsqrt": (1, True, False),
    "tanh": (1, True, False), "sigmoid": (1, True, False), "abs": (1, False, False),
    "floor": (1, True, False), "ceil": (1, True, False), "round": (1, True, False),
    "sin": (1, True, False), "cos": (1, True, False), "erf": (1, True, False),
    "pow": (2, True, False), "isnan": (1, True, True),
}


def call_intrinsic(name: str, *args: Any) -> Expr:
    """Build ``Call(name, args)`` after checking arity and argument dtypes.

    >>> from te import Var, float32
    >>> call_intrinsic("sqrt", Var("x", float32)).dtype
    float32
    """
    if name not in INTRINSICS:
        raise ValueError(f"unknown intrinsic {name!r}; known: {sorted(INTRINSICS)}")
    nargs, float_only, result_bool = INTRINSICS[name]
    if len(args) != nargs:
        raise TypeError(f"{name} takes {nargs} argument(s), got {len(args)}")
    if nargs == 2:
        a, b = _unify(args[0], args[1])
        if a.dtype != b.dtype:
            raise TypeError(f"{name} arguments have different dtypes: `{a}` is {a.dtype}, `{b}` is {b.dtype}")
        exprs = [a, b]
    else:
        exprs = [as_expr(args[0])]
    dt = exprs[0].dtype
    if float_only and not dt.is_float:
        raise TypeError(f"{name} needs a floating-point argument, got `{exprs[0]}` of dtype {dt}; "
                        f"use te.cast(x, 'float32') first")
    if dt.is_bool:
        raise TypeError(f"{name} is not defined on bool (`{exprs[0]}`)")
    return Call(name, exprs, bool_.with_lanes(dt.lanes) if result_bool else dt)


def exp(x): """e**x.  ``exp(x)``"""; return call_intrinsic("exp", x)
def exp2(x): """2**x."""; return call_intrinsic("exp2", x)
def log(x): """Natural logarithm."""; return call_intrinsic("log", x)
def log2(x): """Base-2 logarithm."""; return call_intrinsic("log2", x)
def sqrt(x): """Square root."""; return call_intrinsic("sqrt", x)
def rsqrt(x): """1 / sqrt(x)."""; return call_intrinsic("rsqrt", x)
def tanh(x): """Hyperbolic tangent."""; return call_intrinsic("tanh", x)
def sigmoid(x): """1 / (1 + exp(-x))."""; return call_intrinsic("sigmoid", x)
def abs(x): """Absolute value (integers and floats)."""; return call_intrinsic("abs", x)
def floor(x): """Round toward minus infinity (floats)."""; return call_intrinsic("floor", x)
def ceil(x): """Round toward plus infinity (floats)."""; return call_intrinsic("ceil", x)
def round(x): """Round half to even (floats)."""; return call_intrinsic("round", x)
def sin(x): """Sine."""; return call_intrinsic("sin", x)
def cos(x): """Cosine."""; return call_intrinsic("cos", x)
def erf(x): """Gauss error function."""; return call_intrinsic("erf", x)
def pow(x, y): """x ** y (floats)."""; return call_intrinsic("pow", x, y)
def isnan(x): """True where x is NaN (bool result)."""; return call_intrinsic("isnan", x)


def maximum(a, b) -> Expr:
    """Elementwise max: ``maximum(x, 0.0)``."""
    a, b = _unify(a, b)
    return Max(a, b)


def minimum(a, b) -> Expr:
    """Elementwise min: ``minimum(i, 7)``."""
    a, b = _unify(a, b)
    return Min(a, b)


def select(cond, t, f) -> Expr:
    """``cond ? t : f``; both sides are evaluated (use ``if_then_else`` to guard a load).
    ``select(c == 0, a, b)`` compares ``c`` with 0; a Python bool condition is refused."""
    return Select(cond, t, f)


def cast(x, dtype) -> Expr:
    """Convert ``x`` to ``dtype`` with C semantics: ``cast(i, "float32")``."""
    x = as_expr(x)
    dtype = as_dtype(dtype)
    if x.dtype.is_vector and dtype.is_scalar:
        dtype = dtype.with_lanes(x.dtype.lanes)
    return x if x.dtype == dtype else Cast(dtype, x)
