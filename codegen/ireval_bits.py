"""IREval's integer bit operations, shifts and ``bitcast`` (``te.bitops``), on numpy scalars
and arrays of the interpreter's internal types (float16 / bfloat16 held in float32).

Shifts take the amount modulo the width (``docs/semantics.md``); a left shift is done on the
unsigned type of the same width (the bits shifted out are dropped), a right shift is
arithmetic on signed types and logical on unsigned ones.

>>> import numpy as np
>>> from te.dtypes import as_dtype
>>> shl = bit_fn("shift_left", as_dtype("int8"))
>>> int(shl(np.int8(-1), np.int8(7))), int(shl(np.int8(1), np.int8(9)))
(-128, 2)
>>> int(bitcast_fn(as_dtype("float32"), as_dtype("int32"))(np.float32(1.0)))
1065353216
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from te.dtypes import Dtype

__all__ = ["bit_fn", "bitcast_fn"]

_SIMPLE = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
           "bitwise_not": np.invert}


def _scalar(x):
    return x[()] if type(x) is np.ndarray and x.ndim == 0 else x


def bit_fn(name: str, dt: Dtype) -> Callable[..., Any]:
    """The function of the bit operation ``name`` on operands of integer dtype ``dt``."""
    if name in _SIMPLE:
        return _SIMPLE[name]
    st = dt.element.numpy
    ut = np.dtype(f"u{st.itemsize}")
    mask = st.type(dt.bits - 1)
    if name == "shift_left":
        def shl(a, s):
            r = np.left_shift(np.asarray(a).astype(ut), (np.asarray(s) & mask).astype(ut))
            return _scalar(r.astype(st))
        return shl
    if name == "shift_right":
        def shr(a, s):
            return _scalar(np.right_shift(np.asarray(a), np.asarray(s) & mask))
        return shr
    raise KeyError(name)


def _bits_dtype(dt: Dtype) -> np.dtype:
    return np.dtype(f"u{dt.bits // 8}")


def bitcast_fn(src: Dtype, dst: Dtype) -> Callable[[Any], Any]:
    """Reinterpret values of ``src`` as ``dst`` (one width; see ``te.bitops.bitcast``)."""
    src, dst = src.element, dst.element
    ut = _bits_dtype(src)

    def to_bits(x):
        a = np.asarray(x)
        if src.kind == "bfloat":       # a float32 register holding a bfloat16 value: its top half
            return (a.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        if src.kind == "float" and src.bits == 16:
            return a.astype(np.float32).astype(np.float16).view(ut)
        return a.view(ut)

    def from_bits(u):
        if dst.kind == "bfloat":
            return (u.astype(np.uint32) << np.uint32(16)).view(np.float32)
        if dst.kind == "float" and dst.bits == 16:
            return u.view(np.float16).astype(np.float32)
        return u.view(dst.numpy)

    return lambda x: _scalar(from_bits(to_bits(x)))
