"""Intrinsic functions: math calls, min/max, select and cast.

>>> from te import Var, exp, cast, float32
>>> x = cast(Var("i"), float32)
>>> print(exp(x) + 1.0)
exp(float32(i)) + 1.0f

Each math intrinsic is a ``Call`` whose dtype is its argument's dtype (``isnan`` gives bool).
Floating-point-only intrinsics refuse integer arguments with a ``TypeError`` that suggests a cast.
``power`` (the ``**`` operator), ``clamp`` and ``lerp`` are built from other nodes; the integer
bit operations and ``bitcast`` live in ``te.bitops``.
"""
from __future__ import annotations

import builtins
import numbers
from typing import Any

from .dtypes import as_dtype, bool_
from .expr import Call, Cast, Expr, FloatImm, IntImm, Max, Min, Mul, Select, _unify, as_expr, const

__all__ = ["INTRINSICS", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sigmoid", "abs",
           "floor", "ceil", "round", "sin", "cos", "erf", "pow", "isnan", "maximum", "minimum",
           "select", "cast", "call_intrinsic", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tan",
           "log10", "log1p", "expm1", "erfc", "lgamma", "trunc", "fmod", "copysign", "clamp", "lerp",
           "power"]

#: name -> (number of arguments, float_only, result is bool)
INTRINSICS: dict[str, tuple[int, bool, bool]] = {
    "exp": (1, True, False), "exp2": (1, True, False), "log": (1, True, False),
    "log2": (1, True, False), "sqrt": (1, True, False), "rsqrt": (1, True, False),
    "tanh": (1, True, False), "sigmoid": (1, True, False), "abs": (1, False, False),
    "floor": (1, True, False), "ceil": (1, True, False), "round": (1, True, False),
    "sin": (1, True, False), "cos": (1, True, False), "erf": (1, True, False),
    "pow": (2, True, False), "isnan": (1, True, True),
    "asin": (1, True, False), "acos": (1, True, False), "atan": (1, True, False),
    "atan2": (2, True, False), "sinh": (1, True, False), "cosh": (1, True, False),
    "tan": (1, True, False), "log10": (1, True, False), "log1p": (1, True, False),
    "expm1": (1, True, False), "erfc": (1, True, False), "lgamma": (1, True, False),
    "trunc": (1, True, False), "fmod": (2, True, False), "copysign": (2, True, False),
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


def asin(x):
    """Arc sine (radians), NaN outside [-1, 1].

    >>> from te import Var; x = Var("x", "float32")
    >>> print(asin(x))
    asin(x)
    """
    return call_intrinsic("asin", x)


def acos(x):
    """Arc cosine (radians), NaN outside [-1, 1].

    >>> from te import Var; x = Var("x", "float32")
    >>> print(acos(x))
    acos(x)
    """
    return call_intrinsic("acos", x)


def atan(x):
    """Arc tangent (radians, in [-pi/2, pi/2]).

    >>> from te import Var; x = Var("x", "float32")
    >>> print(atan(x))
    atan(x)
    """
    return call_intrinsic("atan", x)


def atan2(y, x):
    """The angle of the point ``(x, y)``, in [-pi, pi] (C's ``atan2``, numpy's ``arctan2``).

    >>> from te import Var; x = Var("x", "float32")
    >>> print(atan2(x, 1.0))
    atan2(x, 1.0f)
    """
    return call_intrinsic("atan2", y, x)


def sinh(x):
    """Hyperbolic sine.

    >>> from te import Var; x = Var("x", "float32")
    >>> print(sinh(x))
    sinh(x)
    """
    return call_intrinsic("sinh", x)


def cosh(x):
    """Hyperbolic cosine.

    >>> from te import Var; x = Var("x", "float32")
    >>> print(cosh(x))
    cosh(x)
    """
    return call_intrinsic("cosh", x)


def tan(x):
    """Tangent (radians).

    >>> from te import Var; x = Var("x", "float32")
    >>> print(tan(x))
    tan(x)
    """
    return call_intrinsic("tan", x)


def log10(x):
    """Base-10 logarithm.

    >>> from te import Var; x = Var("x", "float32")
    >>> print(log10(x))
    log10(x)
    """
    return call_intrinsic("log10", x)


def log1p(x):
    """``log(1 + x)``, accurate for small ``x``.

    >>> from te import Var; x = Var("x", "float32")
    >>> print(log1p(x))
    log1p(x)
    """
    return call_intrinsic("log1p", x)


def expm1(x):
    """``exp(x) - 1``, accurate for small ``x``.

    >>> from te import Var; x = Var("x", "float32")
    >>> print(expm1(x))
    expm1(x)
    """
    return call_intrinsic("expm1", x)


def erfc(x):
    """Complementary error function ``1 - erf(x)``, accurate for large ``x``.

    >>> from te import Var; x = Var("x", "float32")
    >>> print(erfc(x))
    erfc(x)
    """
    return call_intrinsic("erfc", x)


def lgamma(x):
    """``log|Gamma(x)|`` (C's ``lgamma``): ``+inf`` at 0 and the negative integers.

    >>> from te import Var; x = Var("x", "float32")
    >>> print(lgamma(x))
    lgamma(x)
    """
    return call_intrinsic("lgamma", x)


def trunc(x):
    """Round toward zero (floats).

    >>> from te import Var; x = Var("x", "float32")
    >>> print(trunc(x))
    trunc(x)
    """
    return call_intrinsic("trunc", x)


def fmod(x, y):
    """C's ``fmod``: ``x - trunc(x / y) * y`` computed exactly, with ``x``'s sign; NaN when
    ``y`` is 0 (numpy's ``fmod``; for integers use ``%``).

    >>> from te import Var; x = Var("x", "float32")
    >>> print(fmod(x, 2.0))
    fmod(x, 2.0f)
    """
    return call_intrinsic("fmod", x, y)


def copysign(x, y):
    """``|x|`` with the sign bit of ``y`` (``-0.0`` and NaN signs count).

    >>> from te import Var; x = Var("x", "float32")
    >>> print(copysign(1.0, x))
    copysign(1.0f, x)
    """
    return call_intrinsic("copysign", x, y)


#: the largest integer exponent of a float power built by multiplication (``x ** 3`` is
#: ``x * x * x``: two roundings, within 2 ulps of ``pow``, 1.3 measured, and no float64 log and
#: exp per element as LLVM's ``pow`` takes; ``(x * x) * (x * x)`` measured 1.9 ulps)
FLOAT_POWER_BY_PRODUCT = 3


def power(x, n) -> Expr:
    """``x ** n`` (what the ``**`` operator builds): for an integer ``x``, ``n`` must be a
    non-negative integer constant and the power is repeated multiplication (wrapping, as
    ``*``; ``x ** 0`` is 1); for a float ``x`` it is repeated multiplication too where ``n``
    is an integer constant from 0 to ``FLOAT_POWER_BY_PRODUCT`` (``x ** 0`` is 1, NaN
    included, as ``pow``), else ``pow(x, n)``.

    >>> from te import Var, float32
    >>> print(power(Var("i"), 4))
    i * i * (i * i)
    >>> x = Var("x", float32)
    >>> print(power(x, 3))
    x * x * x
    >>> print(power(x, 2.5))
    pow(x, 2.5f)
    >>> power(Var("i"), -1)
    Traceback (most recent call last):
        ...
    TypeError: integer power `i` ** -1: the exponent must be a non-negative integer constant (cast to a float type for pow)
    """
    if not isinstance(x, Expr) and not hasattr(x, "as_expr"):   # 2 ** e: a literal base
        e = as_expr(n)
        if e.dtype.is_integer:
            raise TypeError(f"{x!r} ** `{e}`: an integer power needs a constant exponent (write "
                            f"1 << `{e}` for powers of two, or cast to a float type for pow)")
        return pow(x, e)
    x = as_expr(x)
    if x.dtype.is_float:
        k = n.value if isinstance(n, (IntImm, FloatImm)) else n
        if isinstance(k, numbers.Real) and not isinstance(k, bool) and float(k).is_integer() \
                and 0 <= k <= FLOAT_POWER_BY_PRODUCT:
            return _int_power(x, int(k))
        return pow(x, n)
    if not x.dtype.is_integer:
        raise TypeError(f"`{x}` ** {n!r}: ** needs an integer or float base, got {x.dtype}")
    k = n.value if isinstance(n, IntImm) else n
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
        raise TypeError(f"integer power `{x}` ** {n!r}: the exponent must be a non-negative integer "
                        "constant (cast to a float type for pow)")
    return _int_power(x, int(k))


def _int_power(x: Expr, k: int) -> Expr:
    """Square and multiply: about 2 log2(k) multiplications (the squares are shared nodes)."""
    if k == 0:
        return const(1, x.dtype)
    if k == 1:
        return x
    half = _int_power(x, k // 2)
    sq = Mul(half, half)
    return Mul(sq, x) if k % 2 else sq


def clamp(x, lo, hi) -> Expr:
    """``minimum(maximum(x, lo), hi)``: ``x`` limited to ``[lo, hi]`` (``hi`` when ``lo > hi``);
    a NaN ``x`` stays NaN (float ``maximum`` / ``minimum`` propagate NaN).

    >>> from te import Var
    >>> print(clamp(Var("i"), 0, 255))
    min(max(i, 0), 255)
    """
    return minimum(maximum(x, lo), hi)


def lerp(a, b, t) -> Expr:
    """Linear interpolation ``a + (b - a) * t`` of floats (``a`` at ``t = 0``; at ``t = 1`` it
    is ``b`` up to the rounding of ``b - a``).

    >>> from te import Var
    >>> print(lerp(Var("a", "float32"), Var("b", "float32"), 0.25))
    a + (b - a) * 0.25f
    """
    a, b = _unify(a, b)
    if not a.dtype.is_float:
        raise TypeError(f"lerp needs float operands, got {a.dtype} (`{a}`); cast with te.cast first")
    return a + (b - a) * t


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
