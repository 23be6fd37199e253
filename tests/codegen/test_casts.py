"""Casts between every ordered pair of scalar dtypes, on IREval and LLVM, bit for bit.

One kernel per source dtype writes all sixteen destination dtypes (``B_<dst>[i] =
cast(A[i], dst)``); it is built for ``ireval``, for ``llvm`` and for ``llvm`` with every loop
vectorized (8 lanes: the vector code paths of the casts). Each of the 256 ordered pairs is
then one test comparing the bits of every result with a numpy reference and with the
other backend.

The reference (documented rules; ``te.lowprec`` supplies the float conversions):

* same dtype: a bit-exact copy (NaN payloads and signalling NaNs included);
* to bool: ``x != 0`` (NaN is true, -0.0 false);
* from bool: 0 or 1, then as from an integer;
* int -> int: C wraparound (``te.lowprec.int_to_int``);
* float -> int: truncation toward zero, saturating at the destination's range, NaN -> 0
  (``te.lowprec.float_to_int``);
* int -> float: rounded once to nearest even from the exact integer (computed here with
  Python integers, independently of the backends), overflow -> +-Inf for the IEEE(-like)
  formats and +-MAX_NORM for float8 (saturation to finite);
* float -> float: ``te.lowprec.convert`` (rounds once, nearest even; float8 saturates; e4m3
  NaN -> +448; a NaN result is quiet and keeps the sign and the leading payload bits; a tf32
  source is read as the float32 it is stored as).

Inputs cover zeros, -0.0, small and large magnitudes, ties that round to even at each
destination's precision, subnormals of each format, out-of-range values (saturation and
overflow), NaNs (quiet, signalling, with payloads, negative), +-Inf, the e4m3 storage
patterns 0x7F/0xFF (read as NaN), and the integer extremes of every integer type.
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest
from te import ALL_SCALAR_DTYPES, Buffer, Compute, Dtype, cast
from te.lowprec import FLOAT_FORMATS, convert, float_to_int, int_to_int

DTYPES = ALL_SCALAR_DTYPES
LANES = 8

# ------------------------------------------------------------------------------------
# inputs
# ------------------------------------------------------------------------------------
_FLOAT_SEEDS = [
    0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.75, 0.1, 1 / 3, 100.0, -1e4,
    # ties to even at bf16 (8 bits), f16/tf32 (11), e4m3 (4), e5m2 (3), f32 (24), and beyond
    1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-11, -(1 + 3 * 2**-11), 1 + 2**-4, 1 + 3 * 2**-4, 1 + 2**-3,
    1 + 3 * 2**-3, 1 + 2**-24, 1 + 3 * 2**-24, 1 + 2**-14, 1 + 2**-30,
    # subnormals of f32, f16, e4m3, e5m2, bf16, and values rounding into / out of them
    2.0**-130, 2.0**-149, -(2.0**-140), 2.0**-20, 2.0**-24, 2.0**-25, 3 * 2.0**-26, 2.0**-9, 2.0**-10,
    3 * 2.0**-11, 2.0**-16, 2.0**-17, 3 * 2.0**-18, 5e-324,
    # near and past the largest finite values of the narrow formats
    448.0, 464.0, 480.0, -500.0, 57344.0, 61440.0, 65504.0, 65520.0, -7e4, 1e10, 3e38, 3.5e38, 1e300, -1e300,
    # around the integer ranges
    127.5, 128.0, -128.5, -129.0, 255.9, 256.0, 32767.5, -32769.0, 65535.5, 65536.0, 2.0**31,
    -2.0**31, -2.0**31 - 1, 4294967295.5, 2.0**32, 2.0**53 + 2, 2.0**63, -2.0**63, -2.0**63 - 2048,
    2.0**64, -1.5, -0.9, 0.9,
    np.nan, -np.nan, np.inf, -np.inf,
]

# raw NaN patterns per storage format: signalling, with payloads, negative
_NAN_PATTERNS = {
    "float64": (np.uint64, [0x7FF0000000000001, 0x7FF4000000000000, 0xFFF8123456789ABC]),
    "float32": (np.uint32, [0x7F800001, 0xFFC12345, 0x7FA00000]),
    "tf32": (np.uint32, [0x7F802000, 0xFFC02000]),
    "float16": (np.uint16, [0x7C01, 0xFE01, 0x7D00]),
    "bfloat16": (np.uint16, [0x7F81, 0xFFC1, 0x7FA0]),
    "float8_e5m2": (np.uint8, [0x7D, 0xFE]),
    "float8_e4m3": (np.uint8, [0x7F, 0xFF]),     # not values of e4m3: read as NaN
}

_INT_SEEDS = [
    0, 1, -1, 2, -2, 3, 9, 11, 17, 19, 100, -100, 127, 128, 255, 256, 257, 259, 448, 464, 480, 2049, 2051,
    -2051, 65504, 65519, 65520, 57344, 61440, 2**24 + 1, 2**24 + 3, -(2**24 + 1), 2**31 - 1, -2**31,
    2**53 + 1, 2**53 + 3, 2**62 + 2**38 + 1, 2**63 - 1, -2**63, 2**64 - 1, 2**64 - 2**39,
]


def _fmt(dt: Dtype) -> str:
    return {"float": f"float{dt.bits}", "bfloat": "bfloat16"}.get(dt.kind, dt.kind)


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return a.astype(np.uint8)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


def inputs(dt: Dtype) -> np.ndarray:
    """The test values of source dtype ``dt`` (padded to a multiple of LANES)."""
    if dt.is_bool:
        x = np.array([False, True, True, False], np.bool_)
    elif dt.is_integer:
        info = np.iinfo(dt.numpy)
        ext = [int(info.min), int(info.min) + 1, int(info.max) - 1, int(info.max), int(info.max) // 2 + 1]
        x = int_to_int(_INT_SEEDS + ext, dt.numpy)
    else:
        fmt = _fmt(dt)
        x = convert(np.array(_FLOAT_SEEDS, np.float64), "float64", fmt)
        ut, pats = _NAN_PATTERNS[fmt]
        x = np.concatenate([x, np.array(pats, ut).view(x.dtype)])
    pad = (-len(x)) % LANES
    return np.concatenate([x, x[:pad]]) if pad else x


# ------------------------------------------------------------------------------------
# the reference
# ------------------------------------------------------------------------------------
def _int_to_float(v: int, dst: Dtype) -> float:
    """The exact integer ``v`` rounded once (nearest even) to float format ``dst``."""
    f = FLOAT_FORMATS[_fmt(dst)]
    p = f.mantissa_bits + 1
    m = abs(v)
    if m.bit_length() > p:
        sh = m.bit_length() - p
        kept, rem, half = m >> sh, m & ((1 << sh) - 1), 1 << (sh - 1)
        if rem > half or (rem == half and kept & 1):
            kept += 1
        m = kept << sh
    if m > f.max_normal:
        r = f.max_normal if dst.kind.startswith("float8") else np.inf
    else:
        r = float(m)
    return -r if v < 0 else r


def reference(x: np.ndarray, src: Dtype, dst: Dtype) -> np.ndarray:
    """``cast(x, dst)`` for source values ``x`` of dtype ``src`` by the documented rules."""
    if src == dst:
        return x.copy()
    if dst.is_bool:
        if src.is_float:
            return convert(x, _fmt(src), "float64") != 0
        return x != 0
    if src.is_bool:
        x, src = x.astype(np.int64), None
    if dst.is_integer:
        if src is None or src.is_integer:
            return int_to_int(x, dst.numpy)
        return float_to_int(x, dst.numpy)
    if src is None or src.is_integer:
        exact = np.array([_int_to_float(int(v), dst) for v in x.tolist()], np.float64)
        return convert(exact, "float64", _fmt(dst))     # exact: already a value of dst
    return convert(x, _fmt(src), _fmt(dst))


def test_reference_int_to_float_rounds_to_even_and_saturates():
    from te import float8_e4m3, float8_e5m2, float16, float32
    assert _int_to_float(2**24 + 1, float32) == 2.0**24
    assert _int_to_float(2**24 + 3, float32) == 2.0**24 + 4
    assert _int_to_float(2049, float16) == 2048.0 and _int_to_float(2051, float16) == 2052.0
    assert _int_to_float(65520, float16) == np.inf and _int_to_float(-65520, float16) == -np.inf
    assert _int_to_float(17, float8_e4m3) == 16.0 and _int_to_float(19, float8_e4m3) == 20.0
    assert _int_to_float(464, float8_e4m3) == 448.0 and _int_to_float(-10**6, float8_e4m3) == -448.0
    assert _int_to_float(61440, float8_e5m2) == 57344.0


# ------------------------------------------------------------------------------------
# the kernels (one per source dtype and target, cached across the pair tests)
# ------------------------------------------------------------------------------------
def _nest(src: Dtype, n: int, vectorized: bool):
    A = Buffer("A", (n,), src)
    outs = [Compute(f"B_{d.name}", (n,), lambda i, d=d: cast(A[i], d)) for d in DTYPES]
    nest = LoopNest(outs)
    if vectorized:
        for t in outs:
            loop, = nest.get_loops_for(t)
            _, inner, tail = nest.split_with_tail(loop, LANES)
            assert tail is None
            nest.vectorize(inner)
    return nest, [A] + outs


@functools.lru_cache(maxsize=None)
def results(src_name: str) -> dict:
    """{variant: [array per destination dtype]} for the inputs of ``src_name``."""
    src = next(d for d in DTYPES if d.name == src_name)
    x = inputs(src)
    out = {}
    for variant, target, vec in (("ireval", "ireval", False), ("llvm", "llvm", False),
                                 ("llvm-vector", "llvm", True)):
        nest, args = _nest(src, len(x), vec)
        k = build(nest, args, target=target)
        arrays = [np.zeros(len(x), d.numpy) for d in DTYPES]
        k(x.copy(), *arrays)
        out[variant] = arrays
    return out


def _describe(x, got, want, bad) -> str:
    rows = [f"x={x[i]!r} (bits {int(_bits(x)[i]):#x}): got {got[i]!r} ({int(_bits(got)[i]):#x}), "
            f"want {want[i]!r} ({int(_bits(want)[i]):#x})" for i in bad[:5]]
    return "\n  ".join(rows)


@pytest.mark.parametrize("dst", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("src", DTYPES, ids=lambda d: d.name)
def test_cast_pair(src: Dtype, dst: Dtype):
    x = inputs(src)
    with np.errstate(invalid="ignore"):      # float -> int of NaN in the reference
        want = reference(x, src, dst)
    assert want.dtype == dst.numpy
    res = results(src.name)
    j = DTYPES.index(dst)
    for variant, arrays in res.items():
        got = arrays[j]
        bad = np.nonzero(_bits(got) != _bits(want))[0]
        assert bad.size == 0, f"{variant}: cast {src} -> {dst}:\n  {_describe(x, got, want, bad)}"
    # the backends agree with each other (implied by the above; stated for the failure message)
    assert np.array_equal(_bits(res["ireval"][j]), _bits(res["llvm"][j]))


def test_inputs_cover_the_special_values():
    from te import float8_e4m3, float32, int64, uint8
    f = inputs(float32)
    assert np.isnan(f).any() and np.isposinf(f).any() and np.isneginf(f).any()
    assert (_bits(f) == 0x80000000).any()                                   # -0.0
    assert ((np.abs(f) > 0) & (np.abs(f) < np.finfo(np.float32).tiny)).any()  # subnormal
    assert {int(v) for v in inputs(int64)} >= {-2**63, 2**63 - 1}
    assert {int(v) for v in inputs(uint8)} >= {0, 255}
    assert (_bits(inputs(float8_e4m3)) == 0x7F).any()
    assert ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max == 448
