"""Tests for te.lowprec: the reference float-format conversions.

Three independent references are used:

* an exact rounding model (``ref_round``) that enumerates every finite value of the
  target format and picks the neighbour required by the rounding mode;
* numpy / ml_dtypes casting, compared only where the type-system document agrees
  with them (the rest of the special-value table is asserted value by value);
* hand-written bit-pattern examples (ties, subnormal boundaries, double rounding, tf32).
"""
from __future__ import annotations

import doctest
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from te import lowprec
from te.lowprec import (FLOAT_FORMATS, convert, float_to_int, int_to_int, numpy_dtype,
                        round_to_tf32, to_bfloat16, to_float16, to_float8_e4m3,
                        to_float8_e5m2)

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
NARROW = ("tf32", "float16", "bfloat16", "float8_e4m3", "float8_e5m2")
SMALL = ("float16", "bfloat16", "float8_e4m3", "float8_e5m2")  # enumerable storage
MODES = ("rn", "rz", "rm", "rp")
# ml_dtypes warns when casting NaN; the NaN handling is asserted explicitly below.
pytestmark = [pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")]
SATURATING = ("float8_e4m3", "float8_e5m2")


# ----------------------------------------------------------------------------- helpers
def bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view(UINT[a.dtype.itemsize])


def from_bits(b, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    return np.asarray(b, dtype=UINT[dtype.itemsize]).view(dtype)


def all_patterns(name: str) -> np.ndarray:
    dt = numpy_dtype(name)
    return np.arange(1 << (8 * dt.itemsize), dtype=np.uint64).astype(UINT[dt.itemsize]).view(dt)


def as_f64(a) -> np.ndarray:
    """Exact widening through numpy/ml_dtypes (verified against lowprec in a test)."""
    with np.errstate(invalid="ignore"):
        return np.asarray(a).astype(np.float64)


def same_values(a, b) -> bool:
    """Equal as values, including the sign of zero; NaN equals NaN."""
    a, b = as_f64(a), as_f64(b)
    return bool(np.array_equal(a, b, equal_nan=True)
                and np.array_equal(np.signbit(a), np.signbit(b)))


def positive_table(name: str) -> np.ndarray:
    """All non-negative finite values of a format, ascending, index == compact bits."""
    f = FLOAT_FORMATS[name]
    if name == "tf32":
        n = 255 << 10
        return (np.arange(n, dtype=np.uint32) << np.uint32(13)).view(np.float32).astype(np.float64)
    pats = all_patterns(name)
    pos = pats[: 1 << (f.exponent_bits + f.mantissa_bits)]
    v = as_f64(pos)
    v = v[np.isfinite(v)]
    assert np.all(np.diff(v) > 0)
    return v


TABLES = {name: positive_table(name) for name in NARROW}


def ref_round(x, name: str, mode: str = "rn", saturate: bool | None = None) -> np.ndarray:
    """Independent exact model: round finite float64 ``x`` to format ``name``."""
    if saturate is None:
        saturate = name in SATURATING
    vals = TABLES[name]
    top = vals[-1] + (vals[-1] - vals[-2])  # max + ulp: where the next binade would start
    ext = np.append(vals, top)
    x = np.asarray(x, dtype=np.float64)
    assert np.all(np.isfinite(x))
    a, neg = np.abs(x), np.signbit(x)
    i = np.minimum(np.searchsorted(ext, a, side="right") - 1, len(ext) - 2)
    lo, hi = ext[i], ext[i + 1]
    exact = a == lo
    if mode == "rn":  # differences are exact (Sterbenz / multiples of min_subnormal)
        d_lo, d_hi = a - lo, hi - a
        up = (d_hi < d_lo) | ((d_hi == d_lo) & (i % 2 == 1))
    elif mode == "rz":
        up = np.zeros(a.shape, dtype=bool)
    elif mode == "rp":
        up = ~neg
    else:
        up = neg.copy()
    up &= ~exact
    idx = i + up
    mag = ext[idx]
    over = idx == len(ext) - 1
    mag = np.where(over, vals[-1] if saturate else np.inf, mag)
    return np.copysign(mag, np.where(neg, -1.0, 1.0))


def dense_sample(name: str) -> np.ndarray:
    """float32 sample for target ``name``: its values, all midpoints, +-1 ulp around them."""
    vals = TABLES[name]
    top = vals[-1] + (vals[-1] - vals[-2])
    ext = np.append(vals, [top, 2 * top])
    if len(ext) > 70_000:  # tf32: the seams (zero/subnormal, 1.0, max) plus a random subset
        one = int(np.searchsorted(ext, 1.0))
        keep = np.unique(np.concatenate([
            np.arange(4000), np.arange(one - 2000, one + 2000), np.arange(len(ext) - 4000, len(ext)),
            np.random.default_rng(7).integers(0, len(ext), 30_000)]))
        # consecutive pairs only: midpoints are taken between ext[k] and ext[k + 1]
        ext = np.unique(np.concatenate([ext[keep], ext[np.minimum(keep + 1, len(ext) - 1)]]))
    ext = ext[ext <= np.finfo(np.float32).max]
    mids64 = (ext[:-1] + ext[1:]) / 2
    mids = mids64.astype(np.float32)
    assert np.array_equal(mids.astype(np.float64), mids64)  # exact
    if ext[-1] < np.finfo(np.float32).max:
        ext = np.append(ext, np.finfo(np.float32).max)
    pts = np.concatenate([
        ext.astype(np.float32), mids,
        np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(0)),
    ])
    return np.concatenate([pts, -pts])


RNG = np.random.default_rng(1234)
RANDOM_F32 = RNG.integers(0, 1 << 32, size=200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
F16_WIDE = all_patterns("float16").astype(np.float32)
BF16_WIDE = all_patterns("bfloat16").astype(np.float32)
GENERIC_F32 = np.concatenate([RANDOM_F32, F16_WIDE, BF16_WIDE,
                              np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0], np.float32)])


def finite(a):
    return a[np.isfinite(a)]


# ----------------------------------------------------------------------------- formats
def test_format_table():
    for name, f in FLOAT_FORMATS.items():
        assert f.name == name
        assert numpy_dtype(name) == f.storage_numpy_dtype
        if name == "tf32":
            assert (f.exponent_bits, f.mantissa_bits) == (8, 10)
            assert f.max_normal == (2 - 2.0 ** -10) * 2.0 ** 127
            assert (f.min_normal, f.min_subnormal) == (2.0 ** -126, 2.0 ** -136)
            assert f.storage_numpy_dtype == np.float32 and f.storage_shift == 13
            continue
        fi = ml_dtypes.finfo(f.storage_numpy_dtype)
        assert f.mantissa_bits == fi.nmant and f.exponent_bits == fi.nexp
        assert f.max_normal == float(fi.max)
        assert f.min_normal == float(fi.smallest_normal)
        assert f.min_subnormal == float(fi.smallest_subnormal)
        assert f.storage_shift == 0
    e4, e5 = FLOAT_FORMATS["float8_e4m3"], FLOAT_FORMATS["float8_e5m2"]
    assert (e4.has_inf, e4.has_nan, e4.max_normal) == (False, False, 448.0)
    assert (e5.has_inf, e5.has_nan, e5.max_normal) == (True, True, 57344.0)
    assert numpy_dtype("bfloat16") == BF16 and numpy_dtype("float8_e4m3") == E4M3
    assert numpy_dtype("float8_e5m2") == E5M2 and numpy_dtype("tf32") == np.float32
    with pytest.raises(Exception):
        FLOAT_FORMATS["float16"].mantissa_bits = 3  # frozen
    with pytest.raises(ValueError):
        numpy_dtype("float128")


def test_doctests():
    res = doctest.testmod(lowprec, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.attempted > 10 and res.failed == 0


# ----------------------------------------------------------------------------- widening
@pytest.mark.parametrize("name", SMALL + ("float32",))
def test_widening_is_exact_and_round_trips(name):
    x = all_patterns(name) if name != "float32" else GENERIC_F32
    for wide, wdt in (("float32", np.float32), ("float64", np.float64)):
        if name == wide:
            continue
        w = convert(x, name, wide)
        assert w.dtype == wdt and w.shape == x.shape
        ref = x.astype(wdt)  # numpy / ml_dtypes widening is exact for non-NaN values
        nan = np.isnan(ref)
        assert np.array_equal(bits(w[~nan]), bits(ref[~nan]))
        assert np.array_equal(np.isnan(w), nan)
        # round trip of every finite value: identical bits
        fin = np.isfinite(ref)
        back = convert(w, wide, name)
        assert back.dtype == x.dtype
        assert np.array_equal(bits(back[fin]), bits(x[fin]))
        # round trip in every rounding mode (the value is exact, nothing to round)
        for mode in MODES[1:]:
            assert np.array_equal(bits(convert(w[fin], wide, name, rounding=mode)), bits(x[fin]))
        # infinities round-trip for IEEE-like formats; e5m2 saturates them (document)
        inf = np.isinf(ref)
        if name == "float8_e5m2":
            assert as_f64(back[inf]).tolist() == [57344.0, -57344.0]
            assert np.array_equal(bits(convert(w[inf], wide, name, saturate=False)), bits(x[inf]))
        elif FLOAT_FORMATS[name].has_inf:
            assert np.array_equal(bits(back[inf]), bits(x[inf]))


@pytest.mark.parametrize("name", ("float16", "bfloat16", "float8_e5m2"))
def test_nan_sign_and_payload(name):
    """NaN is preserved with its sign; quiet NaNs round-trip bit-exactly through wider formats."""
    f = FLOAT_FORMATS[name]
    x = all_patterns(name)
    b = bits(x).astype(np.int64)
    m = f.mantissa_bits
    expf = (b >> m) & ((1 << f.exponent_bits) - 1)
    nan = (expf == (1 << f.exponent_bits) - 1) & ((b & ((1 << m) - 1)) != 0)
    quiet = nan & ((b >> (m - 1)) & 1 == 1)
    for wide in ("float32", "float64"):
        w = convert(x[nan], name, wide)
        assert np.all(np.isnan(w))
        assert np.array_equal(np.signbit(w), np.signbit(x[nan].astype(np.float32)))
        qb = bits(w).astype(np.uint64) >> np.uint64(8 * w.itemsize - 10)
        assert np.all(qb & np.uint64(1)), "widened NaNs are quiet"
        back = convert(convert(x[quiet], name, wide), wide, name)
        assert np.array_equal(bits(back), bits(x[quiet]))
        # signalling NaNs come back quiet, same sign
        sn = convert(convert(x[nan & ~quiet], name, wide), wide, name)
        assert np.array_equal(bits(sn), bits(x[nan & ~quiet]) | np.asarray(1 << (m - 1), bits(sn).dtype))


def test_float32_to_float64_matches_hardware():
    w = convert(GENERIC_F32, "float32", "float64")
    assert np.array_equal(bits(w), bits(GENERIC_F32.astype(np.float64)))  # incl. NaN quieting


# ----------------------------------------------------------------------------- narrowing
@pytest.mark.parametrize("name", NARROW)
@pytest.mark.parametrize("mode", MODES)
def test_narrowing_matches_exact_model(name, mode):
    x32 = np.concatenate([dense_sample(name), finite(GENERIC_F32)])
    expect = ref_round(x32.astype(np.float64), name, mode)
    got = convert(x32, "float32", name, rounding=mode)
    assert got.dtype == numpy_dtype(name)
    assert same_values(got, expect)
    got64 = convert(x32.astype(np.float64), "float64", name, rounding=mode)
    assert np.array_equal(bits(got64), bits(got))
    if name == "float8_e5m2":  # IEEE behaviour on request
        got = convert(x32, "float32", name, rounding=mode, saturate=False)
        assert same_values(got, ref_round(x32.astype(np.float64), name, mode, saturate=False))
    if name in ("float16", "bfloat16", "tf32"):  # satfinite on request
        got = convert(x32, "float32", name, rounding=mode, saturate=True)
        assert same_values(got, ref_round(x32.astype(np.float64), name, mode, saturate=True))


def _ml_cast(x, name):
    return x.astype({"float16": np.float16, "bfloat16": BF16, "float8_e4m3": E4M3,
                     "float8_e5m2": E5M2}[name])


def check_against_ml_dtypes(x32: np.ndarray, name: str) -> None:
    """Narrowing float32 -> ``name`` (rn) agrees with numpy/ml_dtypes where the document
    agrees with them; everywhere else the document's table is asserted element-wise."""
    ours = convert(x32, "float32", name)
    ml = _ml_cast(x32, name)
    ml64, ours64 = as_f64(ml), as_f64(ours)
    xnan = np.isnan(x32)
    f = FLOAT_FORMATS[name]
    ml_special = ~np.isfinite(ml64)
    agree = ~ml_special & ~xnan
    assert np.array_equal(bits(ours[agree]), bits(ml[agree]))
    if name in ("float16", "bfloat16"):  # IEEE-like: overflow/Inf agree too, NaN stays NaN
        inf = np.isinf(ml64)
        assert np.array_equal(bits(ours[inf]), bits(ml[inf]))
        assert np.all(np.isnan(ours64[xnan]))
        assert np.array_equal(np.signbit(ours64[xnan]), np.signbit(x32[xnan]))
        return
    # saturating formats: never Inf; out-of-range finite and +-Inf -> +-MAX_NORM
    assert not np.any(np.isinf(ours64))
    ovf = ml_special & ~xnan
    assert np.all(np.abs(x32[ovf].astype(np.float64)) > f.max_normal)
    assert np.array_equal(ours64[ovf], np.copysign(f.max_normal, x32[ovf].astype(np.float64)))
    if name == "float8_e5m2":
        assert np.all(np.isinf(ml64[ovf]))  # ml_dtypes: IEEE overflow to Inf
        assert np.all(np.isnan(ours64[xnan]))  # NaN -> NaN
        ieee = convert(x32, "float32", name, saturate=False)  # = ml_dtypes exactly
        nn = ~xnan
        assert np.array_equal(bits(ieee[nn]), bits(ml[nn]))
        assert np.all(np.isnan(as_f64(ieee[xnan])))
    else:
        assert np.all(np.isnan(ml64[ovf]))  # ml_dtypes: overflow to NaN (0x7F/0xFF)
        assert np.all(bits(ours[xnan]) == 0x7E)  # NaN -> +MAX_NORM
        assert not np.any((bits(ours) & 0x7F) == 0x7F), "e4m3 NaN encoding never produced"


@pytest.mark.parametrize("name", SMALL)
def test_narrowing_matches_ml_dtypes_dense(name):
    check_against_ml_dtypes(np.concatenate([dense_sample(name), GENERIC_F32]), name)


@settings(max_examples=150, deadline=None, database=None)
@given(st.lists(st.integers(0, (1 << 32) - 1), min_size=1, max_size=64))
def test_narrowing_random_float32_bits(pats):
    x32 = np.array(pats, dtype=np.uint32).view(np.float32)
    for name in SMALL:
        check_against_ml_dtypes(x32, name)
    fin = x32[np.isfinite(x32)].astype(np.float64)
    assert same_values(convert(fin.astype(np.float32), "float32", "tf32"), ref_round(fin, "tf32"))


@settings(max_examples=150, deadline=None, database=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=32),
       st.sampled_from(MODES))
def test_narrowing_random_float64(xs, mode):
    x = np.array(xs, dtype=np.float64)
    for name in NARROW:
        assert same_values(convert(x, "float64", name, rounding=mode), ref_round(x, name, mode))


def test_float64_to_float32_and_float16_match_numpy():
    x = RNG.integers(0, 1 << 63, size=200_000, dtype=np.uint64)
    x = np.concatenate([x, x | np.uint64(1 << 63)]).view(np.float64)
    with np.errstate(over="ignore"):
        ref32, ref16 = x.astype(np.float32), x.astype(np.float16)  # both correctly rounded
    got32 = convert(x, "float64", "float32")
    assert np.array_equal(bits(got32), bits(ref32))  # NaN payload/sign as hardware cvtsd2ss
    got16 = convert(x, "float64", "float16")
    nn = ~np.isnan(x)
    assert np.array_equal(bits(got16[nn]), bits(ref16[nn]))
    # and a dense sample around float32's own rounding points (subnormals included)
    y = np.concatenate([dense_sample("float16").astype(np.float64),
                        (finite(all_patterns("float16").astype(np.float64)) * 2.0 ** -120)])
    y = np.concatenate([y, np.nextafter(y, np.inf), np.nextafter(y, -np.inf)])
    assert np.array_equal(bits(convert(y, "float64", "float32")), bits(y.astype(np.float32)))


# ----------------------------------------------------------------------------- special values
SOURCES = ("float64", "float32", "float16", "bfloat16")


def _src_array(vals, src):
    if src == "float64":
        return np.array(vals, dtype=np.float64)
    return convert(np.array(vals, dtype=np.float64), "float64", src, saturate=False)


@pytest.mark.parametrize("src", SOURCES + ("float8_e5m2",))
@pytest.mark.parametrize("mode", MODES)
def test_special_value_table(src, mode):
    """Table 'Floating-Point Conversion: Special Value and Saturation Behavior', row by row."""
    x = _src_array([np.inf, -np.inf, np.nan, -np.nan], src)
    pinf, ninf, pnan, nnan = x
    for dst in ("float64", "float32", "tf32", "float16", "bfloat16"):
        if dst == src:
            continue
        y = as_f64(convert(x, src, dst, rounding=mode))
        assert y[0] == np.inf and y[1] == -np.inf  # +-Inf -> +-Inf
        assert np.isnan(y[2]) and np.isnan(y[3])  # NaN -> NaN, sign kept
        assert not np.signbit(y[2]) and np.signbit(y[3])
    for dst, nan_expect in (("float8_e5m2", "nan"), ("float8_e4m3", 448.0)):
        if dst == src:
            continue
        out = convert(x, src, dst, rounding=mode)
        y = as_f64(out)
        mx = FLOAT_FORMATS[dst].max_normal
        assert y[0] == mx and y[1] == -mx  # +-Inf -> +-MAX_NORM
        if nan_expect == "nan":
            assert np.isnan(y[2]) and np.isnan(y[3])
        else:  # both NaN signs -> +MAX_NORM
            assert y[2] == 448.0 and y[3] == 448.0
            assert bits(out)[2] == 0x7E and bits(out)[3] == 0x7E


@pytest.mark.parametrize("mode", MODES)
def test_out_of_range_finite(mode):
    big = np.array([1e300, -1e300, 3.5e38, -3.5e38], np.float64)
    for dst in ("float8_e4m3", "float8_e5m2"):  # satfinite: +-MAX_NORM in every mode
        mx = FLOAT_FORMATS[dst].max_normal
        y = as_f64(convert(big, "float64", dst, rounding=mode))
        assert np.array_equal(y, [mx, -mx, mx, -mx])
        y = as_f64(convert(np.float32([65504.0, -1e30]), "float32", dst, rounding=mode))
        assert np.array_equal(y, [mx, -mx])
    # IEEE(-like): the nearest value in the rounding direction (IEEE 754 overflow rules)
    expect_pos = {"rn": np.inf, "rz": "max", "rm": "max", "rp": np.inf}[mode]
    expect_neg = {"rn": -np.inf, "rz": "-max", "rm": -np.inf, "rp": "-max"}[mode]
    for dst in ("float32", "tf32", "float16", "bfloat16"):
        mx = FLOAT_FORMATS[dst].max_normal
        y = as_f64(convert(np.array([1e300, -1e300]), "float64", dst, rounding=mode))
        ep = mx if expect_pos == "max" else expect_pos
        en = -mx if expect_neg == "-max" else expect_neg
        assert y[0] == ep and y[1] == en, (dst, mode, y)


def test_overflow_boundaries_rn():
    # float16: 65504 = max, 65520 = midpoint to 2**16 -> ties to even -> Inf
    x = np.array([65504.0, 65519.99, 65520.0, -65520.0], np.float64)
    assert as_f64(convert(x, "float64", "float16")).tolist() == [65504.0, 65504.0, np.inf, -np.inf]
    # e4m3: above 448 saturates instead of NaN (ml_dtypes would give NaN from 464 on)
    x = np.array([448.0, 463.0, 464.0, 465.0, 1e4, -464.0], np.float32)
    assert as_f64(convert(x, "float32", "float8_e4m3")).tolist() == [448.0] * 5 + [-448.0]
    assert np.isnan(as_f64(_ml_cast(x, "float8_e4m3"))[3])
    # e5m2: 61440 is the tie between 57344 and 2**16: IEEE -> Inf, satfinite -> 57344
    x = np.array([57344.0, 61439.0, 61440.0, -61440.0], np.float32)
    assert as_f64(convert(x, "float32", "float8_e5m2")).tolist() == [57344.0] * 3 + [-57344.0]
    assert as_f64(convert(x, "float32", "float8_e5m2", saturate=False)).tolist() == \
        [57344.0, 57344.0, np.inf, -np.inf]
    # bfloat16 / tf32 share float32's exponent range: rounding up from FLT_MAX overflows
    fmax = np.array([np.finfo(np.float32).max], np.float32)
    assert as_f64(convert(fmax, "float32", "bfloat16")).tolist() == [np.inf]
    assert round_to_tf32(fmax).tolist() == [np.inf]
    assert round_to_tf32(fmax).dtype == np.float32
    assert bits(convert(fmax, "float32", "bfloat16", rounding="rz"))[0] == 0x7F7F


def test_e4m3_nan_patterns_as_source():
    nan_pats = from_bits([0x7F, 0xFF], E4M3)
    assert np.all(np.isnan(convert(nan_pats, "float8_e4m3", "float32")))
    assert bits(convert(nan_pats, "float8_e4m3", "float8_e5m2")).tolist() != []
    assert np.all(np.isnan(as_f64(convert(nan_pats, "float8_e4m3", "float8_e5m2"))))
    # through a wider format and back, a NaN becomes +MAX_NORM (e4m3 has no NaN)
    assert bits(convert(convert(nan_pats, "float8_e4m3", "float32"), "float32", "float8_e4m3")).tolist() == [0x7E, 0x7E]


def test_saturating_targets_never_produce_inf():
    x = np.concatenate([GENERIC_F32, np.float32([np.inf, -np.inf])])
    for dst in SATURATING:
        for mode in MODES:
            assert not np.any(np.isinf(as_f64(convert(x, "float32", dst, rounding=mode))))


# ----------------------------------------------------------------------------- rounding cases
def test_ties_to_even():
    # float16 around 1: ulp 2**-10
    x = 1.0 + np.array([1, 3, 5, -0.5], np.float64) * 2.0 ** -11
    assert as_f64(to_float16(x)).tolist() == [1.0, 1 + 2 * 2.0 ** -10, 1 + 2 * 2.0 ** -10, 1.0]
    # bfloat16: ulp 2**-7 at 1
    x = 1.0 + np.array([1, 3, 5], np.float64) * 2.0 ** -8
    assert as_f64(to_bfloat16(x)).tolist() == [1.0, 1 + 2 * 2.0 ** -7, 1 + 2 * 2.0 ** -7]
    assert as_f64(to_bfloat16(-x)).tolist() == [-1.0, -(1 + 2 * 2.0 ** -7), -(1 + 2 * 2.0 ** -7)]
    # e4m3: 1.0625 (tie 1 / 1.125) -> 1, 1.1875 (tie 1.125 / 1.25) -> 1.25
    assert as_f64(to_float8_e4m3(np.float32([1.0625, 1.1875, 17.0, 19.0]))).tolist() == [1.0, 1.25, 16.0, 20.0]
    # e5m2: 1.125 (tie 1 / 1.25) -> 1, 1.375 -> 1.5
    assert as_f64(to_float8_e5m2(np.float32([1.125, 1.375, -1.125]))).tolist() == [1.0, 1.5, -1.0]
    # a hair above / below a tie goes to the nearer neighbour
    assert as_f64(to_float16([1 + 2.0 ** -11 + 2.0 ** -30, 1 + 3 * 2.0 ** -11 - 2.0 ** -30])).tolist() == \
        [1 + 2.0 ** -10, 1 + 2.0 ** -10]


def test_directed_rounding_examples():
    x = np.float32([1.3, -1.3, 2.0 ** -30, -(2.0 ** -30), 0.0, -0.0])
    rz = as_f64(convert(x, "float32", "float8_e4m3", rounding="rz"))
    rm = as_f64(convert(x, "float32", "float8_e4m3", rounding="rm"))
    rp = as_f64(convert(x, "float32", "float8_e4m3", rounding="rp"))
    assert rz.tolist() == [1.25, -1.25, 0.0, -0.0, 0.0, -0.0]
    assert np.array_equal(np.signbit(rz), [0, 1, 0, 1, 0, 1])
    assert rm.tolist() == [1.25, -1.375, 0.0, -(2.0 ** -9), 0.0, -0.0]
    assert rp.tolist() == [1.375, -1.25, 2.0 ** -9, -0.0, 0.0, -0.0]
    assert np.array_equal(np.signbit(rp), [0, 1, 0, 1, 0, 1])
    with pytest.raises(ValueError):
        convert(x, "float32", "float16", rounding="rna")


@pytest.mark.parametrize("name", SMALL + ("tf32",))
def test_subnormal_boundaries(name):
    f = FLOAT_FORMATS[name]
    s, n = f.min_subnormal, f.min_normal
    x = np.array([s, s / 2, s / 2 * (1 + 2.0 ** -10), s * 0.75, s * 1.5, s * 2.5, s / 4,
                  n - s, n - s / 2, n - s / 2 - s / 1024, n, -s / 2, -s * 0.75], np.float64)
    expect = [s, 0.0, s, s, 2 * s, 2 * s, 0.0,
              n - s, n, n - s, n, -0.0, -s]
    for src in ("float64", "float32"):
        y = as_f64(convert(x.astype(numpy_dtype(src)), src, name))
        assert y.tolist() == expect, (name, src, y)
        assert np.signbit(y[11])
    # directed: anything positive below the smallest subnormal
    tiny = np.array([s / 8], np.float64)
    assert as_f64(convert(tiny, "float64", name, rounding="rp")).tolist() == [s]
    assert as_f64(convert(tiny, "float64", name, rounding="rz")).tolist() == [0.0]
    assert as_f64(convert(-tiny, "float64", name, rounding="rm")).tolist() == [-s]
    # float64 subnormals
    d = np.array([5e-324, -5e-324], np.float64)
    assert bits(convert(d, "float64", name)).tolist() == \
        [0, 1 << (8 * numpy_dtype(name).itemsize - 1)]


def test_subnormal_bits_float16():
    # exact bit patterns at the float16 subnormal / normal seam
    x = np.array([2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25, 1023 * 2.0 ** -24, 2047 * 2.0 ** -25, 2.0 ** -14],
                 np.float32)
    assert bits(to_float16(x)).tolist() == [0x0001, 0x0000, 0x0002, 0x03FF, 0x0400, 0x0400]


def test_no_double_rounding():
    # float64 -> bfloat16: 1 + 2**-8 + 2**-30 is just above the midpoint between 1 and
    # 1 + 2**-7.  Via float32 it first becomes exactly the midpoint, then ties to 1.0.
    x = np.array([1 + 2.0 ** -8 + 2.0 ** -30, -(1 + 2.0 ** -8 + 2.0 ** -30)])
    via32 = convert(convert(x, "float64", "float32"), "float32", "bfloat16")
    assert as_f64(via32).tolist() == [1.0, -1.0]
    assert as_f64(convert(x, "float64", "bfloat16")).tolist() == [1 + 2.0 ** -7, -(1 + 2.0 ** -7)]
    assert as_f64(to_bfloat16(x)).tolist() == [1 + 2.0 ** -7, -(1 + 2.0 ** -7)]
    # (ml_dtypes 0.6 x.astype(bfloat16) gives 1.0 here: it goes through float32.)
    # float64 -> float16: 1 + 2**-11 + 2**-40
    x = np.array([1 + 2.0 ** -11 + 2.0 ** -40])
    assert as_f64(convert(convert(x, "float64", "float32"), "float32", "float16")).tolist() == [1.0]
    assert as_f64(to_float16(x)).tolist() == [1 + 2.0 ** -10]
    # float64 -> e4m3 / e5m2 / tf32, same construction
    for name, ulp in (("float8_e4m3", 2.0 ** -3), ("float8_e5m2", 2.0 ** -2), ("tf32", 2.0 ** -10)):
        x = np.array([1 + ulp / 2 + 2.0 ** -35])
        assert as_f64(convert(x, "float64", name)).tolist() == [1 + ulp]
    # subnormal double rounding: float16 just above half the min subnormal
    x = np.array([2.0 ** -25 + 2.0 ** -60])
    assert as_f64(to_float16(x)).tolist() == [2.0 ** -24]


def test_round_to_tf32():
    b = np.array([0x3F801000, 0x3F803000, 0x3F801001, 0x3F800FFF, 0x3F9FFFFF, 0xBF803000,
                  0x7F7FFFFF, 0x7F7FEFFF, 0x00000FFF, 0x00001000, 0x00001001, 0x7F800000,
                  0xFF800000, 0x80000000], np.uint32)
    expect = [0x3F800000, 0x3F804000, 0x3F802000, 0x3F800000, 0x3FA00000, 0xBF804000,
              0x7F800000, 0x7F7FE000, 0x00000000, 0x00000000, 0x00002000, 0x7F800000,
              0xFF800000, 0x80000000]
    out = round_to_tf32(b.view(np.float32))
    assert out.dtype == np.float32
    assert bits(out).tolist() == expect
    assert np.array_equal(out, convert(b.view(np.float32), "float32", "tf32"))
    # NaN: sign and leading payload kept, quiet; a signalling NaN whose payload is all
    # in the dropped bits stays a NaN
    nan = np.array([0x7FC00001, 0xFFA02345, 0x7F800001], np.uint32).view(np.float32)
    assert bits(round_to_tf32(nan)).tolist() == [0x7FC00000, 0xFFE02000, 0x7FC00000]
    # the result is always tf32-representable and re-rounding is idempotent
    r = round_to_tf32(GENERIC_F32)
    assert np.all(bits(r) & 0x1FFF == 0)
    assert np.array_equal(bits(round_to_tf32(r)), bits(r))
    # float64 input is rounded once
    assert round_to_tf32([1 + 2.0 ** -11 + 2.0 ** -40]).tolist() == [1 + 2.0 ** -10]
    # tf32 source: read as the stored float32; widening to float32/float64 is exact
    assert np.array_equal(bits(convert(r, "tf32", "float32")), bits(r))
    assert np.array_equal(convert(r, "tf32", "float64"), r.astype(np.float64), equal_nan=True)


# ----------------------------------------------------------------------------- API details
def test_input_handling_and_shapes():
    y = convert([[1.0, 2.5], [3.0, -0.0]], "float64", "bfloat16")
    assert y.shape == (2, 2) and y.dtype == BF16
    assert as_f64(y).tolist() == [[1.0, 2.5], [3.0, -0.0]]
    z = convert(1.5, "float32", "float8_e4m3")  # Python float, rounded into float32 first
    assert z.shape == () and z.dtype == E4M3 and float(z) == 1.5
    assert float(convert(np.float32(0.1), "float32", "float64")) == float(np.float32(0.1))
    with pytest.raises(TypeError):
        convert(np.zeros(3, np.float64), "float32", "float16")
    with pytest.raises(ValueError):
        convert([1.0], "float32", "float7")
    with pytest.raises(ValueError):
        convert([1.0], "float32", "float8_e4m3", saturate=False)
    x = np.float32([1.0, 2.0])
    c = convert(x, "float32", "float32")
    assert c is not x and np.array_equal(c, x)
    for fn in (to_float16, to_bfloat16, to_float8_e4m3, to_float8_e5m2, round_to_tf32):
        assert fn(np.float32([0.5])).dtype == fn([0.5]).dtype
    assert to_float8_e4m3([float("nan")]).view(np.uint8).tolist() == [0x7E]
    assert np.isnan(float(to_float8_e5m2([float("nan")])[0]))
    # the wrappers accept any float storage dtype as the source, e.g. bfloat16
    assert as_f64(to_float8_e5m2(np.array([3.0], BF16))).tolist() == [3.0]


# ----------------------------------------------------------------------------- integer casts
def test_float_to_int():
    x = np.array([-2.9, -2.5, -0.7, -0.0, 0.7, 2.5, 2.9, np.nan, -np.nan, np.inf, -np.inf,
                  1e20, -1e20, 127.9, 128.0, -128.9, -129.0], np.float64)
    assert float_to_int(x, np.int8).tolist() == [-2, -2, 0, 0, 0, 2, 2, 0, 0, 127, -128,
                                                 127, -128, 127, 127, -128, -128]
    u = float_to_int(x, np.uint8)
    assert u.dtype == np.uint8
    assert u.tolist() == [0, 0, 0, 0, 0, 2, 2, 0, 0, 255, 0, 255, 0, 127, 128, 0, 0]
    # int64 / uint64 bounds: 2**63 is out of range, the float below it is in range
    b = np.array([2.0 ** 63, np.nextafter(2.0 ** 63, 0), -(2.0 ** 63), -(2.0 ** 63) - 4096,
                  2.0 ** 64, np.nextafter(2.0 ** 64, 0)])
    i64 = float_to_int(b, np.int64)
    assert i64.tolist() == [2 ** 63 - 1, 2 ** 63 - 1024, -(2 ** 63), -(2 ** 63),
                            2 ** 63 - 1, 2 ** 63 - 1]
    assert float_to_int(b, np.uint64).tolist() == [2 ** 63, 2 ** 63 - 1024, 0, 0,
                                                   2 ** 64 - 1, 2 ** 64 - 2048]
    assert float_to_int(np.float32([2147483520.0, 2147483648.0, -2147483648.0]), np.int32).tolist() == \
        [2147483520, 2147483647, -2147483648]
    # low-precision sources
    assert float_to_int(np.array([-1.75, 448.0], E4M3), np.int16).tolist() == [-1, 448]
    assert float_to_int(from_bits([0x7F], E4M3), np.int32).tolist() == [0]
    assert float_to_int(np.array([65504.0, np.inf], np.float16), np.int16).tolist() == [32767, 32767]
    assert float_to_int(np.array([-3.5], BF16), np.uint16).tolist() == [0]
    assert float_to_int(2.5, np.int32).shape == ()
    with pytest.raises(TypeError):
        float_to_int([1.0], np.float32)


def test_int_to_int():
    x = np.array([0, 1, -1, 127, 128, 255, 256, -128, -129, 300, -300], np.int32)
    assert int_to_int(x, np.int8).tolist() == [0, 1, -1, 127, -128, -1, 0, -128, 127, 44, -44]
    assert int_to_int(x, np.uint8).tolist() == [0, 1, 255, 127, 128, 255, 0, 128, 127, 44, 212]
    assert int_to_int(np.array([-1, -2], np.int8), np.int64).tolist() == [-1, -2]  # sign-extend
    assert int_to_int(np.array([255, 254], np.uint8), np.int64).tolist() == [255, 254]  # zero-extend
    assert int_to_int(np.array([-1], np.int16), np.uint32).tolist() == [2 ** 32 - 1]
    assert int_to_int(np.array([2 ** 64 - 1], np.uint64), np.int64).tolist() == [-1]
    assert int_to_int(np.array([-(2 ** 63)], np.int64), np.uint64).tolist() == [2 ** 63]
    assert int_to_int(np.array([True, False]), np.int32).tolist() == [1, 0]
    # Python ints of any size wrap modulo 2**bits
    assert int_to_int([2 ** 70 + 5, -(2 ** 70) - 1, 200], np.int8).tolist() == [5, -1, -56]
    assert int_to_int(-1, np.uint16).tolist() == 65535
    assert int_to_int(2 ** 64 + 3, np.uint64).dtype == np.uint64
    with pytest.raises(TypeError):
        int_to_int(np.array([1.5]), np.int32)
    with pytest.raises(TypeError):
        int_to_int([1], np.float32)


@settings(max_examples=100, deadline=None, database=None)
@given(st.integers(-(2 ** 80), 2 ** 80),
       st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]))
def test_int_to_int_matches_modular_model(v, dt):
    bits_ = np.dtype(dt).itemsize * 8
    r = v % (1 << bits_)
    if np.dtype(dt).kind == "i" and r >= 1 << (bits_ - 1):
        r -= 1 << bits_
    assert int(int_to_int(v, dt)) == r
    if -(2 ** 63) <= v < 2 ** 63:
        assert int(int_to_int(np.array([v], np.int64), dt)[0]) == r


@settings(max_examples=100, deadline=None, database=None)
@given(st.floats(allow_nan=True, allow_infinity=True, width=64),
       st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64]))
def test_float_to_int_matches_model(v, dt):
    info = np.iinfo(dt)
    if math.isnan(v):
        expect = 0
    elif math.isinf(v):
        expect = info.max if v > 0 else info.min
    else:
        expect = min(max(math.trunc(v), info.min), info.max)
    assert int(float_to_int(v, dt)) == expect
