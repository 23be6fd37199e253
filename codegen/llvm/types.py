"""LLVM types and constants for te dtypes.

Every dtype has two LLVM types: the *storage* type (how an element sits in memory) and
the *value* type (how it is held in registers while computing):

==============  ============  ==========================================
dtype           storage       value
==============  ============  ==========================================
bool            i8            i1
int/uint N      iN            iN
float16         half          half (arithmetic done in float32, see emit)
float32/64      float/double  float/double
bfloat16        i16           float (always a value exact in bfloat16)
tf32            float         float (always a value exact in tf32)
float8_*        i8            float (exact in the float8 format)
==============  ============  ==========================================

Vector dtypes (``lanes > 1``) map to ``<lanes x T>``.

>>> from te.dtypes import bfloat16, float32
>>> str(value_type(bfloat16)), str(storage_type(bfloat16)), str(value_type(float32.with_lanes(4)))
('float', 'i16', '<4 x float>')
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from te.dtypes import Dtype

__all__ = ["value_type", "storage_type", "scalar_value_type", "arg_type", "round_to_dtype", "const",
           "splat_const", "intrinsic_suffix", "PTR", "I1", "I8", "I16", "I32", "I64", "F32", "F64", "HALF", "VOID",
           "is_bit_float"]

PTR = ir.PointerType()
VOID = ir.VoidType()
I1, I8, I16, I32, I64 = (ir.IntType(b) for b in (1, 8, 16, 32, 64))
F32, F64, HALF = ir.FloatType(), ir.DoubleType(), ir.HalfType()

#: float kinds held as float32 values in registers and stored as integer bits (or float32 for tf32)
_BIT_FLOATS = ("bfloat", "tf32", "float8_e4m3", "float8_e5m2")


def is_bit_float(dt: Dtype) -> bool:
    """True for the float formats the backend converts with integer operations."""
    return dt.kind in _BIT_FLOATS


def _vec(t: ir.Type, lanes: int) -> ir.Type:
    return t if lanes == 1 else ir.VectorType(t, lanes)


def scalar_value_type(dt: Dtype) -> ir.Type:
    """The register type of one lane of ``dt``."""
    k = dt.kind
    if k == "bool":
        return I1
    if k in ("int", "uint"):
        return ir.IntType(dt.bits)
    if k == "float":
        return {16: HALF, 32: F32, 64: F64}[dt.bits]
    if k in _BIT_FLOATS:
        return F32
    raise TypeError(f"no LLVM type for dtype {dt}")  # pragma: no cover - Dtype validates kinds


def value_type(dt: Dtype) -> ir.Type:
    """The register type of ``dt`` (a vector type when ``dt`` has lanes)."""
    return _vec(scalar_value_type(dt), dt.lanes)


def scalar_storage_type(dt: Dtype) -> ir.Type:
    k = dt.kind
    if k == "bool":
        return I8
    if k == "bfloat":
        return I16
    if k == "tf32":
        return F32
    if k in ("float8_e4m3", "float8_e5m2"):
        return I8
    return scalar_value_type(dt)


def arg_type(dt: Dtype) -> ir.Type:
    """The type a scalar kernel parameter of dtype ``dt`` is passed as (the C ABI of the
    kernel entry points, called through ctypes).

    bool is ``i8`` (0 or 1; the kernel compares it with 0); float16 is ``float``, holding a
    value already rounded to float16 by the caller, so the kernel's ``fptrunc`` to ``half``
    is exact (ctypes has no half type, and C compilers disagree on how ``_Float16`` is
    passed); every other dtype is its value type (bfloat16, tf32 and float8 are ``float``
    values rounded to their format by the caller).

    >>> from te.dtypes import bool_, float16, bfloat16, int64
    >>> [str(arg_type(d)) for d in (bool_, float16, bfloat16, int64)]
    ['i8', 'float', 'float', 'i64']
    """
    if dt.lanes != 1:
        raise TypeError(f"kernel parameters are scalars, got the vector dtype {dt}; pass a buffer instead")
    t = scalar_value_type(dt)
    if t is I1:
        return I8
    if t is HALF:
        return F32
    return t


def round_to_dtype(value, dt: Dtype) -> float | int:
    """``value`` rounded once to scalar ``dt`` as a Python number (what a ``Cast`` of the
    constant gives): floats to the nearest value of the format, ties to even (IEEE formats
    keep NaN and overflow to infinity; the float8 formats saturate to their largest finite
    value, ``te.lowprec``'s rule); integers wrap; bool is 0 or 1.

    >>> from te.dtypes import bfloat16, float16, int8
    >>> round_to_dtype(1.00390625, bfloat16), round_to_dtype(1e-8, float16), round_to_dtype(300, int8)
    (1.0, 0.0, 44)
    """
    return _round_scalar(value, dt.element)


def storage_type(dt: Dtype) -> ir.Type:
    """The in-memory type of ``dt`` (``<lanes x T>`` for vectors)."""
    return _vec(scalar_storage_type(dt), dt.lanes)


def intrinsic_suffix(t: ir.Type) -> str:
    """The overload suffix LLVM uses for ``t`` in intrinsic names: ``f32``, ``v8f32``, ``i64``."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{intrinsic_suffix(t.element)}"
    if isinstance(t, ir.PointerType):
        return "p0"
    return t.intrinsic_name


def _round_scalar(value, dt: Dtype):
    """``value`` as the register constant of scalar ``dt`` (floats rounded once to the format)."""
    if dt.is_bool:
        return 1 if value else 0
    if dt.is_integer:
        v = int(value) & ((1 << dt.bits) - 1)
        return v - (1 << dt.bits) if dt.is_int and v >= 1 << (dt.bits - 1) else v
    v = float(value)
    if dt.kind == "float" and dt.bits == 64:
        return v
    if dt.kind == "float" and dt.bits == 32:
        return float(np.float32(v)) if math.isfinite(v) or math.isnan(v) else v
    from te.lowprec import convert
    name = {"float": "float16", "bfloat": "bfloat16", "tf32": "tf32"}.get(dt.kind, dt.kind)
    return float(convert(np.array([v], np.float64), "float64", name).astype(np.float64)[0])


def const(value, dt: Dtype) -> ir.Constant:
    """An LLVM constant of dtype ``dt`` (splat for vector dtypes), rounded like a Cast would.

    >>> from te.dtypes import int8
    >>> str(const(300, int8))
    'i8 44'
    """
    t = scalar_value_type(dt)
    c = ir.Constant(t, _round_scalar(value, dt.element))
    if dt.lanes > 1:
        return ir.Constant(ir.VectorType(t, dt.lanes), [c] * dt.lanes)
    return c


def splat_const(t: ir.Type, value) -> ir.Constant:
    """A constant of LLVM type ``t`` (scalar or vector) with every lane ``value``."""
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [ir.Constant(t.element, value)] * t.count)
    return ir.Constant(t, value)
