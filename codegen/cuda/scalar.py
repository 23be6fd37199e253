"""C text of CUDA scalar literals, conversions and intrinsic calls (used by the printer,
``codegen.cuda.emit``). Each function takes the C text of its operands (in their compute
types, ``codegen.cuda.types.compute_type``) and returns the C text of the result; the helpers
and headers the text uses are requested from a :class:`~codegen.cuda.helpers.HelperSet`.

>>> from te.dtypes import as_dtype
>>> h = HelperSet()
>>> int_literal(-2**31, as_dtype("int32")), float_literal(-0.5, as_dtype("float32"))
('(-2147483647 - 1)', '(-0.5f)')
>>> cast_text(h, "x", as_dtype("float32"), as_dtype("uint8"))
'tc_f2i<unsigned char, float>(x, 0.0f, 256.0f, ((unsigned char)0u), ((unsigned char)255u))'
"""
from __future__ import annotations

import math

import numpy as np

from te import expr as E
from te.bitops import BIT_CALLS
from te.dtypes import Dtype

from ..kernel import BuildError
from .helpers import HelperSet
from .types import c_type, compute_type

__all__ = ["int_literal", "float_literal", "cast_text", "call_text", "unsigned_of", "is_narrow",
           "refuse_low_precision"]

_MATH = {  # name -> (float, double, fast float)
    "exp": ("expf", "exp", "__expf"), "exp2": ("exp2f", "exp2", "exp2f"),
    "log": ("logf", "log", "__logf"), "log2": ("log2f", "log2", "__log2f"),
    "sqrt": ("sqrtf", "sqrt", "sqrtf"), "rsqrt": ("rsqrtf", "rsqrt", "rsqrtf"),
    "tanh": ("tanhf", "tanh", "tanhf"), "floor": ("floorf", "floor", "floorf"),
    "ceil": ("ceilf", "ceil", "ceilf"), "round": ("rintf", "rint", "rintf"),
    "sin": ("sinf", "sin", "__sinf"), "cos": ("cosf", "cos", "__cosf"),
    "erf": ("erff", "erf", "erff"), "pow": ("powf", "pow", "__powf"),
    "abs": ("fabsf", "fabs", "fabsf"), "asin": ("asinf", "asin", "asinf"),
    "acos": ("acosf", "acos", "acosf"), "atan": ("atanf", "atan", "atanf"),
    "atan2": ("atan2f", "atan2", "atan2f"), "sinh": ("sinhf", "sinh", "sinhf"),
    "cosh": ("coshf", "cosh", "coshf"), "tan": ("tanf", "tan", "__tanf"),
    "log10": ("log10f", "log10", "__log10f"), "log1p": ("log1pf", "log1p", "log1pf"),
    "expm1": ("expm1f", "expm1", "expm1f"), "erfc": ("erfcf", "erfc", "erfcf"),
    "lgamma": ("lgammaf", "lgamma", "lgammaf"), "trunc": ("truncf", "trunc", "truncf"),
    "fmod": ("fmodf", "fmod", "fmodf"), "copysign": ("copysignf", "copysign", "copysignf"),
}
#: C operators of the integer bit operations (te.bitops)
_BIT_C = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "shift_right": ">>"}


def unsigned_of(dt: Dtype) -> str:
    """The unsigned C type integer arithmetic on ``dt`` wraps in (C promotes narrow types to int)."""
    return "unsigned long long" if dt.bits == 64 else "unsigned int"


def is_narrow(dt: Dtype) -> bool:
    """An integer type narrower than int (its operands are promoted to int in C)."""
    return dt.is_integer and dt.bits < 32


def _is_double(dt: Dtype) -> bool:
    return dt.kind == "float" and dt.bits == 64


def refuse_low_precision(what: str, dt: Dtype) -> None:
    """A BuildError for arithmetic on a low-precision float, which the pass
    ``lower_low_precision`` computes in float32 before the printer."""
    if dt.is_lowp_float:
        raise BuildError(f"{what} on {dt} reached the CUDA printer: low-precision arithmetic is computed in "
                         "float32 by the lower_low_precision pass; build through codegen.build or run "
                         "loopnest.passes.legalize_for_target(nest, 'cuda') first")


def int_literal(value: int, dt: Dtype) -> str:
    """The C literal of the integer (or bool) ``value`` of type ``dt``."""
    dt = dt.element
    if dt.is_bool:
        return "true" if value else "false"
    ct = c_type(dt)
    if dt.is_uint:
        suf = "ull" if dt.bits == 64 else "u"
        s = f"{value}{suf}"
        return s if dt.bits >= 32 else f"(({ct}){s})"
    suf = "LL" if dt.bits == 64 else ""
    if value == dt.min_value():
        s = f"(-{-value - 1}{suf} - 1)"
    elif value < 0:
        s = f"({value}{suf})"
    else:
        s = f"{value}{suf}"
    return s if dt.bits >= 32 else f"(({ct}){s})"


def float_literal(value: float, dt: Dtype) -> str:
    """The C literal of the float ``value`` (a ``te.FloatImm``'s, already rounded to ``dt``),
    in ``dt``'s compute type; NaN and infinities through their bits."""
    dbl = _is_double(dt.element)
    if math.isnan(value):
        return "__longlong_as_double(0x7ff8000000000000LL)" if dbl else "__int_as_float(0x7fc00000)"
    if math.isinf(value):
        if dbl:
            return f"__longlong_as_double({'(long long)0xfff0000000000000ULL' if value < 0 else '0x7ff0000000000000LL'})"
        return f"__int_as_float({'(int)0xff800000u' if value < 0 else '0x7f800000'})"
    s = repr(float(value)) if dbl else repr(float(np.float32(value)))
    if "e" not in s and "." not in s and "inf" not in s:
        s += ".0"
    s = s + ("" if dbl else "f")
    return f"({s})" if s.startswith("-") else s


def cast_text(helpers: HelperSet, x: str, src: Dtype, dst: Dtype) -> str:
    """Convert the C value ``x`` (compute type of ``src``) to ``dst``'s compute type: to a
    low-precision float rounding to nearest even, from a float to an integer as
    ``te.lowprec.float_to_int`` (truncating, saturating, 0 for NaN)."""
    if src == dst:
        return x
    if dst.is_bool:
        return f"({x} != 0)"
    if dst.is_lowp_float:
        k = helpers.lowp(dst)[1]
        if src.is_lowp_float or (src.kind == "float" and src.bits == 32):
            return f"tc_rnd_{k}({x})"
        if _is_double(src):
            return f"tc_rndd_{k}({x})"
        if src.is_bool or (src.is_integer and src.bits < 64):
            return f"tc_rndd_{k}((double)({x}))"
        if src.is_int:
            return f"tc_rndll_{k}({x})"
        return f"tc_rndull_{k}({x})"
    ct = compute_type(dst)
    if src.is_lowp_float and ct == "float":   # the float holding the value already
        return x
    if dst.is_float:  # float32 / float64 from anything
        return f"(({ct})({x}))"
    if src.is_float:  # integer destination
        helpers.need("tc_f2i")
        ft = "double" if _is_double(src) else "float"
        if dst.is_int:
            lo, hi = -(2 ** (dst.bits - 1)), 2 ** (dst.bits - 1)
        else:
            lo, hi = 0, 2 ** dst.bits
        fl = (lambda v: f"{float(v)!r}" + ("" if ft == "double" else "f"))
        return (f"tc_f2i<{ct}, {ft}>({x}, {fl(lo)}, {fl(hi)}, {int_literal(dst.min_value(), dst)}, "
                f"{int_literal(dst.max_value(), dst)})")
    return f"(({ct})({x}))"


def call_text(helpers: HelperSet, e: E.Call, args: list[str], fast_math: bool) -> str:
    """The C text of the intrinsic call ``e`` with argument texts ``args``: bit operations,
    ``bitcast``, ``isnan``, integer ``abs`` and the math functions (CUDA's precise ones, the
    ``__expf``-style fast variants with ``fast_math``).

    >>> from te import Var, exp
    >>> call_text(HelperSet(), exp(Var("x", "float32")), ["v_x"], fast_math=True)
    '__expf(v_x)'
    """
    adt = e.args[0].dtype.element if e.args else e.dtype.element
    name = e.name
    if name == "bitcast":
        return _bitcast(helpers, args[0], adt, e.dtype.element)
    if name in BIT_CALLS:
        return _bit_op(name, adt, args)
    if name == "isnan":
        return f"isnan({args[0]})" if adt.is_float else "false"
    if name == "abs" and adt.is_integer:
        if adt.is_uint:
            return args[0]
        if is_narrow(adt):
            return f"(({c_type(adt)})({args[0]} < 0 ? -({args[0]}) : ({args[0]})))"
        helpers.need("tc_abs")
        return f"tc_abs<{c_type(adt)}, {unsigned_of(adt)}>({args[0]})"
    refuse_low_precision(f"the intrinsic {name}", adt)
    if name == "sigmoid":
        helpers.need("tc_sigmoid")
        fn = "tc_sigmoid_fast" if (fast_math and not _is_double(adt)) else "tc_sigmoid"
        return f"{fn}({args[0]})"
    if name not in _MATH:
        raise BuildError(f"the CUDA backend has no translation for the intrinsic {name!r}")
    if not adt.is_float:
        raise BuildError(f"{name} needs a float argument, got {adt} (`{e}`)")
    f32, f64, fast = _MATH[name]
    fn = f64 if _is_double(adt) else (fast if fast_math else f32)
    return f"{fn}({', '.join(args)})"


def _bit_op(name: str, dt: Dtype, args: list[str]) -> str:
    """Integer bit operations; the shift amount is already in [0, bits) (the pass
    ``mask_shift_amounts``). A left shift is done on the unsigned type (a signed one
    overflowing is undefined in C); ``>>`` of a signed value is arithmetic (in nvcc and
    g++, as C++20 requires)."""
    ct = compute_type(dt)
    if name == "bitwise_not":
        r = f"(~{args[0]})"
    elif name == "shift_left":
        r = f"(({unsigned_of(dt)}){args[0]} << {args[1]})"
    else:
        r = f"({args[0]} {_BIT_C[name]} {args[1]})"
    if is_narrow(dt) or name == "shift_left":   # narrow operands are promoted to int
        return f"(({ct}){r})"
    return r


def _bitcast(helpers: HelperSet, x: str, src: Dtype, dst: Dtype) -> str:
    """``x``'s bits as ``dst``; float16 / bfloat16 go through their storage type."""
    helpers.need("tc_bitcast")
    if src.is_lowp_float:
        info = helpers.lowp(src)
        x, src_t = f"{info[0]}_st({x})", info[3]
    else:
        src_t = c_type(src)
    if dst.is_lowp_float:
        info = helpers.lowp(dst)
        return f"{info[0]}_ld(tc_bitcast<{info[3]}, {src_t}>({x}))"
    return f"tc_bitcast<{c_type(dst)}, {src_t}>({x})"
