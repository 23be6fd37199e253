"""The CUDA C types of the language's dtypes: scalars, and vector elements with their alignment.

A scalar dtype is stored as its C type (``c_type``) and computed in ``compute_type`` (float
for the low-precision floats). A vector dtype (``float32x4``, ``float16x2``, ``int8x4``...)
is stored as one CUDA type holding its lanes contiguously, lane 0 first -- the memory a
numpy array of shape ``(..., lanes)`` has -- chosen by :func:`vector_type`:

* CUDA's own vector type where one has exactly that layout and the natural alignment:
  ``float2``/``float3``/``float4``, ``char4``, ``uchar4``, ``short2``, ``int4``, ``uint2``...,
  ``double2``, ``longlong2``, ``__half2``, ``__nv_bfloat162``;
* otherwise a generated ``struct __align__(A) tc_<dtype> { E v[lanes]; }`` (``tc_float16x4``,
  ``tc_float8_e4m3x4``, ``tc_boolx4``, ``tc_float32x8``...). CUDA 13 deprecates the 4-lane
  64-bit types (``double4``...), so those are generated too.

The alignment ``A`` is the largest power of two dividing the size, at most 16 bytes (what
CUDA's own types have: ``float4`` 16, ``float3`` 4, ``short3`` 2), so an array of elements
is exactly the lanes of the numpy array, and a whole element is one 2-, 4-, 8- or 16-byte
access when the size is a power of two. The pointer of a buffer argument of vector
elements must be aligned to ``A`` (checked at launch).

>>> from te import as_dtype
>>> [vector_type(as_dtype(n)).name for n in ("float32x4", "float16x2", "int8x4", "uint8x4")]
['float4', '__half2', 'char4', 'uchar4']
>>> v = vector_type(as_dtype("float16x4"))
>>> v.name, v.align, v.nbytes
('tc_float16x4', 8, 8)
>>> print(v.definition)
struct __align__(8) tc_float16x4 { __half v[4]; };
"""
from __future__ import annotations

from dataclasses import dataclass

from te.dtypes import Dtype

from .helpers import LOWP_INFO

__all__ = ["c_type", "compute_type", "storage_type", "vector_type", "VectorType", "MAX_VECTOR_BYTES"]

#: the widest single load/store a thread issues (ld.global.v4.b32)
MAX_VECTOR_BYTES = 16

_INT_C = {("int", 8): "signed char", ("int", 16): "short", ("int", 32): "int", ("int", 64): "long long",
          ("uint", 8): "unsigned char", ("uint", 16): "unsigned short", ("uint", 32): "unsigned int",
          ("uint", 64): "unsigned long long"}

# storage C type of a lane -> (CUDA vector type prefix, lane counts CUDA defines without deprecation)
_CUDA_VECTORS = {"float": ("float", (2, 3, 4)), "signed char": ("char", (2, 3, 4)),
                 "unsigned char": ("uchar", (2, 3, 4)), "short": ("short", (2, 3, 4)),
                 "unsigned short": ("ushort", (2, 3, 4)), "int": ("int", (2, 3, 4)),
                 "unsigned int": ("uint", (2, 3, 4)), "double": ("double", (2,)),
                 "long long": ("longlong", (2,)), "unsigned long long": ("ulonglong", (2,))}
_CUDA_PAIRS = {"__half": "__half2", "__nv_bfloat16": "__nv_bfloat162"}


def c_type(dt: Dtype) -> str:
    """The C storage type of a scalar dtype (of one lane of a vector dtype).

    >>> from te import float16, int64
    >>> c_type(float16), c_type(int64)
    ('__half', 'long long')
    """
    dt = dt.element
    if dt.is_bool:
        return "bool"
    if dt.is_integer:
        return _INT_C[(dt.kind, dt.bits)]
    if dt.kind == "float" and dt.bits == 32:
        return "float"
    if dt.kind == "float" and dt.bits == 64:
        return "double"
    return LOWP_INFO[dt.scalar_name][3]


def compute_type(dt: Dtype) -> str:
    """The C type values of ``dt`` (of each lane) are computed in (float for the
    low-precision floats).

    >>> from te import bfloat16, int64
    >>> compute_type(bfloat16), compute_type(int64)
    ('float', 'long long')
    """
    dt = dt.element
    if dt.is_lowp_float:
        return "float"
    return c_type(dt)


@dataclass(frozen=True)
class VectorType:
    """The CUDA type of one vector element: C ``name``, the storage C type of a lane
    (``lane``), ``lanes``, ``align`` in bytes, and the struct ``definition`` for a generated
    type (None for CUDA's own).

    >>> VectorType("float4", "float", 4, 16).nbytes
    16
    """

    name: str
    lane: str
    lanes: int
    align: int
    definition: str | None = None

    @property
    def nbytes(self) -> int:
        return self.lanes * _LANE_BYTES[self.lane]

    @property
    def builtin(self) -> bool:
        """A type CUDA defines (``vector_types.h`` or the fp16/bf16 headers)."""
        return self.definition is None


_LANE_BYTES = {"float": 4, "double": 8, "bool": 1, "__half": 2, "__nv_bfloat16": 2, "__nv_fp8_storage_t": 1,
               **{c: bits // 8 for (_, bits), c in _INT_C.items()}}


def natural_alignment(nbytes: int) -> int:
    """The largest power of two dividing ``nbytes``, at most ``MAX_VECTOR_BYTES``.

    >>> natural_alignment(12), natural_alignment(32), natural_alignment(6)
    (4, 16, 2)
    """
    return min(nbytes & -nbytes, MAX_VECTOR_BYTES)


def vector_type(dt: Dtype) -> VectorType:
    """The CUDA type of one element of the vector dtype ``dt`` (see the module docstring).

    >>> from te import as_dtype
    >>> vector_type(as_dtype("float64x4")).definition
    'struct __align__(16) tc_float64x4 { double v[4]; };'
    """
    if not dt.is_vector:
        raise ValueError(f"vector_type takes a vector dtype, got {dt}")
    lane = c_type(dt)
    nbytes = dt.lanes * dt.itemsize
    align = natural_alignment(nbytes)
    if lane in _CUDA_PAIRS and dt.lanes == 2:
        return VectorType(_CUDA_PAIRS[lane], lane, 2, align)
    prefix, counts = _CUDA_VECTORS.get(lane, (None, ()))
    if dt.lanes in counts and not dt.is_lowp_float:        # tf32 lanes are stored as float, but keep their name
        return VectorType(f"{prefix}{dt.lanes}", lane, dt.lanes, align)
    name = f"tc_{dt.name}"
    return VectorType(name, lane, dt.lanes, align, f"struct __align__({align}) {name} {{ {lane} v[{dt.lanes}]; }};")


def storage_type(dt: Dtype) -> str:
    """The C type of one element of a buffer of ``dt``: ``c_type`` of a scalar, the
    :func:`vector_type` of a vector.

    >>> from te import as_dtype
    >>> storage_type(as_dtype("int8")), storage_type(as_dtype("int8x4"))
    ('signed char', 'char4')
    """
    return vector_type(dt).name if dt.is_vector else c_type(dt)
