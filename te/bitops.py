"""Integer bit operations, shifts and ``bitcast``.

Each is a ``Call`` (as TVM's ``tir.bitwise_and`` ...) whose dtype is its operands' dtype
(``bitcast``: the target dtype). The operators ``&``, ``|``, ``^``, ``~``, ``<<`` and ``>>`` on
integer expressions build them; on bool expressions ``&``, ``|`` and ``~`` stay logical.

>>> from te import Var
>>> x = Var("x")
>>> e = (x >> 3) & 0xFF
>>> print(e, e.name)
(x >> 3) & 255 bitwise_and

Shifts take the amount modulo the width (``x << s`` is ``x << (s & (bits - 1))``, Java's and
Rust's ``wrapping_shl`` rule), so a shift by a negative amount or by the width or more is
defined, identically on every backend; ``>>`` is arithmetic on signed types and logical on
unsigned ones (``docs/semantics.md``).
"""
from __future__ import annotations

from typing import Any

from .dtypes import Dtype, as_dtype
from .expr import Call, Expr, _unify, as_expr

__all__ = ["BIT_OPS", "BIT_CALLS", "SHIFTS", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
           "shift_left", "shift_right", "bitcast", "bitcast_supported"]

#: the two-operand bit operations (``Call`` names) and their operator symbols
BIT_OPS = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "shift_left": "<<",
           "shift_right": ">>"}
#: the names of every bit-operation ``Call`` (``bitcast`` aside)
BIT_CALLS = frozenset(BIT_OPS) | {"bitwise_not"}
#: the shifts, whose amount is taken modulo the width
SHIFTS = ("shift_left", "shift_right")


def _binary(name: str, a: Any, b: Any) -> Expr:
    a, b = _unify(a, b)
    if a.dtype != b.dtype:
        raise TypeError(f"operands of {BIT_OPS[name]} have different dtypes: `{a}` is {a.dtype}, "
                        f"`{b}` is {b.dtype}; cast one of them with te.cast")
    if not a.dtype.is_integer:
        logical = " (on bool operands & and | are logical; ^ is logical xor)" if a.dtype.is_bool else ""
        raise TypeError(f"{BIT_OPS[name]} needs integer operands, got {a.dtype} (`{a}`, `{b}`){logical}; "
                        "cast a float with te.cast, or reinterpret its bits with te.bitcast")
    return Call(name, (a, b), a.dtype)


def bitwise_and(a, b) -> Expr:
    """Bitwise and of integers (``a & b`` on integer expressions).

    >>> from te import Var
    >>> print(bitwise_and(Var("i"), 7))
    i & 7
    """
    return _binary("bitwise_and", a, b)


def bitwise_or(a, b) -> Expr:
    """Bitwise or of integers (``a | b`` on integer expressions).

    >>> from te import Var
    >>> print(Var("i") | 1)
    i | 1
    """
    return _binary("bitwise_or", a, b)


def bitwise_xor(a, b) -> Expr:
    """Bitwise exclusive or of integers (``a ^ b`` on integer expressions).

    >>> from te import Var
    >>> print(Var("i") ^ Var("j"))
    i ^ j
    """
    return _binary("bitwise_xor", a, b)


def bitwise_not(a) -> Expr:
    """Bitwise complement of an integer (``~a`` on integer expressions; ``~c`` on a bool is
    logical not).

    >>> from te import Var
    >>> print(~Var("i"))
    ~i
    """
    a = as_expr(a)
    if not a.dtype.is_integer:
        raise TypeError(f"~ needs an integer (bitwise) or bool (logical) operand, got {a.dtype} (`{a}`)")
    return Call("bitwise_not", (a,), a.dtype)


def shift_left(a, s) -> Expr:
    """``a << (s mod bits)``: the bits shifted out are dropped (wraps like multiplication by a
    power of two); the amount has ``a``'s dtype and is taken modulo the width.

    >>> from te import Var, uint8
    >>> print(Var("x", uint8) << 9)
    x << uint8(9)
    """
    return _binary("shift_left", a, s)


def shift_right(a, s) -> Expr:
    """``a >> (s mod bits)``: arithmetic (sign-filling) on signed types, logical on unsigned.

    >>> from te import Var
    >>> print(Var("i") >> 16)
    i >> 16
    """
    return _binary("shift_right", a, s)


def bitcast_supported(dt: Dtype) -> bool:
    """True when ``bitcast`` accepts ``dt``: integers and float16 / bfloat16 / float32 / float64
    (tf32 and the float8 formats have no bit pattern of their own in registers).

    >>> from te import float16, tf32
    >>> bitcast_supported(float16), bitcast_supported(tf32)
    (True, False)
    """
    dt = dt.element
    return dt.is_integer or (dt.kind == "float" and dt.bits in (16, 32, 64)) or dt.kind == "bfloat"


def bitcast(x, dtype) -> Expr:
    """Reinterpret the bits of ``x`` as ``dtype``, a type of the same width (float32 <->
    int32 / uint32, float16 / bfloat16 <-> int16 / uint16, float64 <-> int64 ...); a vector
    keeps its lanes. Different widths are a TypeError.

    >>> from te import Var, float32
    >>> e = bitcast(Var("f", float32), "int32")
    >>> print(e, e.dtype)
    bitcast(f, int32) int32
    >>> bitcast(Var("f", float32), "int16")
    Traceback (most recent call last):
        ...
    TypeError: bitcast of `f` (float32, 32 bits) to int16 (16 bits): the widths differ; bitcast reinterprets bits of one width (convert values with te.cast)
    """
    x = as_expr(x)
    dtype = as_dtype(dtype)
    if x.dtype.is_vector and dtype.is_scalar:
        dtype = dtype.with_lanes(x.dtype.lanes)
    if dtype.lanes != x.dtype.lanes:
        raise TypeError(f"bitcast of `{x}` ({x.dtype}) to {dtype}: the lane counts differ")
    for dt in (x.dtype, dtype):
        if not bitcast_supported(dt):
            raise TypeError(f"bitcast of `{x}` ({x.dtype}) to {dtype}: {dt.element} is not supported "
                            "(integers, float16, bfloat16, float32 and float64 are)")
    if x.dtype.bits != dtype.bits:
        raise TypeError(f"bitcast of `{x}` ({x.dtype.element}, {x.dtype.bits} bits) to {dtype.element} "
                        f"({dtype.bits} bits): the widths differ; bitcast reinterprets bits of one "
                        "width (convert values with te.cast)")
    return x if x.dtype == dtype else Call("bitcast", (x,), dtype)
