"""Data types: a scalar kind, a bit width and a number of vector lanes.

>>> from te.dtypes import float32, as_dtype
>>> float32.with_lanes(4)
float32x4
>>> as_dtype("int8"), as_dtype(np.dtype("uint16"))
(int8, uint16)

Promotion rules for mixed operands (applied by the expression operators):

* Two expressions must have the same dtype; otherwise a ``TypeError`` names both
  operands and their dtypes (cast one of them explicitly with ``te.cast``).
* A Python literal takes the dtype of the expression it meets: ``A[i] * 2`` on a
  float32 ``A`` is ``A[i] * 2.0f``, ``i + 1`` on an int32 ``i`` is int32.
* A float literal never meets an integer expression silently: ``i * 0.5`` raises
  ``TypeError`` (it would truncate); an integral float such as ``2.0`` is accepted.
* A ``bool`` literal meets only bool expressions.
* A scalar literal meeting a vector expression becomes a Broadcast of the vector's lanes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

try:  # ml_dtypes provides numpy dtypes for bfloat16 and float8
    import ml_dtypes as _mld
except ImportError:  # pragma: no cover - ml_dtypes is a core dependency
    _mld = None

__all__ = [
    "Dtype", "as_dtype", "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16",
    "uint32", "uint64", "float16", "bfloat16", "float32", "float64", "tf32",
    "float8_e4m3", "float8_e5m2", "ALL_SCALAR_DTYPES",
]

# kind -> valid bit widths
_KINDS = {
    "bool": (1,),
    "int": (8, 16, 32, 64),
    "uint": (8, 16, 32, 64),
    "float": (16, 32, 64),
    "bfloat": (16,),
    "tf32": (32,),
    "float8_e4m3": (8,),
    "float8_e5m2": (8,),
}


@dataclass(frozen=True, slots=True)
class Dtype:
    """A scalar or vector data type: ``kind`` (bool, int, uint, float, bfloat, tf32,
    float8_e4m3, float8_e5m2), ``bits`` per lane and ``lanes``.

    >>> Dtype("float", 32, 4)
    float32x4
    """

    kind: str
    bits: int
    lanes: int = 1

    def __post_init__(self):
        if self.kind not in _KINDS or self.bits not in _KINDS[self.kind]:
            raise TypeError(f"unknown dtype kind/bits: {self.kind}{self.bits}")
        if not isinstance(self.lanes, int) or self.lanes < 1:
            raise TypeError(f"dtype lanes must be a positive int, got {self.lanes!r}")

    # -- naming -----------------------------------------------------------------
    @property
    def scalar_name(self) -> str:
        if self.kind == "bool":
            return "bool"
        if self.kind in ("tf32", "float8_e4m3", "float8_e5m2"):
            return self.kind
        return f"{self.kind}{self.bits}"

    @property
    def name(self) -> str:
        return self.scalar_name if self.lanes == 1 else f"{self.scalar_name}x{self.lanes}"

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    # -- predicates ---------------------------------------------------------------
    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_int(self) -> bool:
        """Signed integer."""
        return self.kind == "int"

    @property
    def is_uint(self) -> bool:
        return self.kind == "uint"

    @property
    def is_integer(self) -> bool:
        """Signed or unsigned integer (not bool)."""
        return self.kind in ("int", "uint")

    @property
    def is_float(self) -> bool:
        return self.kind in ("float", "bfloat", "tf32", "float8_e4m3", "float8_e5m2")

    @property
    def is_scalar(self) -> bool:
        return self.lanes == 1

    @property
    def is_vector(self) -> bool:
        return self.lanes > 1

    @property
    def is_lowp_float(self) -> bool:
        """Floats computed in float32 by the backends (float16, bfloat16, tf32, float8)."""
        return self.is_float and not (self.kind == "float" and self.bits in (32, 64))

    # -- derived types ------------------------------------------------------------
    def with_lanes(self, lanes: int) -> "Dtype":
        """The same element type with ``lanes`` lanes: ``float32.with_lanes(4)`` is float32x4."""
        return Dtype(self.kind, self.bits, lanes)

    @property
    def element(self) -> "Dtype":
        """The scalar element type."""
        return self if self.lanes == 1 else Dtype(self.kind, self.bits, 1)

    @property
    def storage_bits(self) -> int:
        return 8 if self.kind == "bool" else self.bits

    @property
    def itemsize(self) -> int:
        """Bytes per element (one lane) in memory."""
        return self.storage_bits // 8

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype of arrays holding this (scalar) type."""
        return _to_numpy(self)

    def min_value(self):
        """Smallest finite value (integers exact, floats as Python float)."""
        if self.is_bool:
            return False
        if self.is_int:
            return -(1 << (self.bits - 1))
        if self.is_uint:
            return 0
        return -float(_finfo_max(self))

    def max_value(self):
        if self.is_bool:
            return True
        if self.is_int:
            return (1 << (self.bits - 1)) - 1
        if self.is_uint:
            return (1 << self.bits) - 1
        return float(_finfo_max(self))


def _finfo_max(dt: Dtype) -> float:
    if dt.kind == "tf32":
        return float(np.finfo(np.float32).max)
    return float(_mld.finfo(_to_numpy(dt)).max) if _mld else float(np.finfo(_to_numpy(dt)).max)


bool_ = Dtype("bool", 1)
int8, int16, int32, int64 = (Dtype("int", b) for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (Dtype("uint", b) for b in (8, 16, 32, 64))
float16, float32, float64 = (Dtype("float", b) for b in (16, 32, 64))
bfloat16 = Dtype("bfloat", 16)
tf32 = Dtype("tf32", 32)
float8_e4m3 = Dtype("float8_e4m3", 8)
float8_e5m2 = Dtype("float8_e5m2", 8)

ALL_SCALAR_DTYPES = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                     float16, bfloat16, float32, float64, tf32, float8_e4m3, float8_e5m2)

_BY_NAME = {d.name: d for d in ALL_SCALAR_DTYPES}
_BY_NAME.update({"bool_": bool_, "float": float32, "int": int32, "double": float64,
                 "half": float16, "e4m3": float8_e4m3, "e5m2": float8_e5m2,
                 "float8_e4m3fn": float8_e4m3})


def _to_numpy(dt: Dtype) -> np.dtype:
    dt = dt.element
    if dt.kind == "bool":
        return np.dtype(np.bool_)
    if dt.kind in ("int", "uint"):
        return np.dtype(f"{'i' if dt.kind == 'int' else 'u'}{dt.bits // 8}")
    if dt.kind == "float":
        return np.dtype(f"f{dt.bits // 8}")
    if dt.kind == "tf32":
        return np.dtype(np.float32)
    if _mld is None:  # pragma: no cover
        raise TypeError(f"{dt} arrays need the ml_dtypes package")
    return np.dtype({"bfloat": _mld.bfloat16, "float8_e4m3": _mld.float8_e4m3fn,
                     "float8_e5m2": _mld.float8_e5m2}[dt.kind])


def _from_numpy(nd: np.dtype) -> Dtype | None:
    for d in (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
              float16, float32, float64, bfloat16, float8_e4m3, float8_e5m2):
        try:
            if _to_numpy(d) == nd:
                return d
        except TypeError:  # pragma: no cover
            pass
    return None


def as_dtype(x: Any) -> Dtype:
    """Parse a dtype from a ``Dtype``, a name (``"float32"``, ``"float32x4"``) or a numpy dtype.

    >>> as_dtype("float16x2")
    float16x2
    >>> as_dtype(np.float64)
    float64

    Raises ``TypeError`` for anything else.
    """
    if isinstance(x, Dtype):
        return x
    if isinstance(x, str):
        name = x.strip()
        if name in _BY_NAME:
            return _BY_NAME[name]
        base, sep, lanes = name.rpartition("x")
        if sep and base in _BY_NAME and lanes.isdigit() and int(lanes) > 1:
            return _BY_NAME[base].with_lanes(int(lanes))
        raise TypeError(f"unknown dtype {x!r}; expected one of {sorted(d.name for d in ALL_SCALAR_DTYPES)}"
                        " or a vector form such as 'float32x4'")
    if x is None:
        raise TypeError("dtype must not be None: expected a te Dtype, a dtype name or a numpy dtype")
    if x is bool:
        return bool_
    if x is int:
        return int32
    if x is float:
        return float32
    try:
        nd = np.dtype(x)
    except TypeError:
        nd = None
    if nd is not None:
        d = _from_numpy(nd)
        if d is not None:
            return d
    raise TypeError(f"unknown dtype {x!r}: expected a te Dtype, a dtype name or a numpy dtype")
