"""Integer bit operations and shifts, bitcast, ``**`` / ``abs()`` / ``round()``, the extra
math intrinsics, clamp and lerp: on IREval and LLVM against numpy, and the CUDA C (nvcc
compile and host emulation where available)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import te
from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from loopnest import LoopNest
from te import Buffer, Compute, Var, bfloat16, float16, float32, float64

TARGETS = ["ireval", "llvm"]
HAVE_NVCC = nvcc_available()
HAVE_EMU = host_compiler() is not None and HAVE_NVCC


def run(fn, in_dtypes, arrays, target, out_dtype=None):
    """``fn(*loads)`` elementwise over 1-D inputs, built for ``target``; returns the output."""
    n = len(arrays[0])
    bufs = [Buffer(f"A{k}", (n,), dt) for k, dt in enumerate(in_dtypes)]
    out = Compute("Y", (n,), lambda i: fn(*[b[i] for b in bufs]))
    k = build(LoopNest([out]), bufs + [out], target=target)
    y = np.zeros(n, (out_dtype or out.dtype).numpy)
    k(*arrays, y)
    return y


# ------------------------------------------------------------------------------------
# integer bit operations and shifts
# ------------------------------------------------------------------------------------
INT_DTYPES = ["int8", "uint8", "int16", "int32", "uint32", "int64", "uint64"]


def _int_inputs(dt: te.Dtype, n: int = 64):
    rng = np.random.default_rng(dt.bits)
    npdt = dt.numpy
    info = np.iinfo(npdt)
    edge = [info.min, info.max, 0, 1, -1 if dt.is_int else 2, info.min + 1 if dt.is_int else 3]
    a = np.concatenate([np.array(edge, npdt), rng.integers(info.min, info.max, n - len(edge), dtype=npdt,
                                                           endpoint=True)])
    w = dt.bits
    amounts = [0, 1, w - 1, w, w + 1, 2 * w, 3 * w - 1, 100]
    if dt.is_int:
        amounts += [-1, -w, -w - 1, -2]
    amounts = [s for s in amounts if info.min <= s <= info.max]
    s = np.array((amounts * n)[:n], npdt)
    return a, s


def _ref_shl(a, s, dt):
    u = np.dtype(f"u{dt.bits // 8}")
    m = (s & np.array(dt.bits - 1, a.dtype)).astype(u)
    return np.left_shift(a.astype(u), m).astype(a.dtype)


def _ref_shr(a, s, dt):
    return np.right_shift(a, s & np.array(dt.bits - 1, a.dtype))


BIT_CASES = {
    "and": (lambda a, b: a & b, np.bitwise_and),
    "or": (lambda a, b: a | b, np.bitwise_or),
    "xor": (lambda a, b: a ^ b, np.bitwise_xor),
    "not": (lambda a, b: ~a, lambda a, b: np.invert(a)),
    "shl": (lambda a, b: a << b, None),
    "shr": (lambda a, b: a >> b, None),
    "literal": (lambda a, b: (a >> 3) & 0x5A | (1 << b), None),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", sorted(BIT_CASES))
@pytest.mark.parametrize("dtname", INT_DTYPES)
def test_integer_bit_operations_match_numpy_exactly(target, op, dtname):
    dt = te.as_dtype(dtname)
    a, s = _int_inputs(dt)
    fn, ref = BIT_CASES[op]
    got = run(fn, [dt, dt], [a, s], target)
    if op == "shl":
        want = _ref_shl(a, s, dt)
    elif op == "shr":
        want = _ref_shr(a, s, dt)
    elif op == "literal":
        t = a.dtype.type
        want = (_ref_shr(a, np.full_like(a, 3), dt) & t(0x5A)) | _ref_shl(np.ones_like(a), s, dt)
    else:
        want = ref(a, s)
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", TARGETS)
def test_shift_edges_are_modulo_the_width(target):
    i32 = te.int32
    a = np.array([1, -1, -2**31, 2**31 - 1, 5, -8, 1, 1], np.int32)
    s = np.array([32, 33, 31, -1, 64, 1, -31, 31], np.int32)
    assert run(lambda x, k: x << k, [i32, i32], [a, s], target).tolist() == \
        [1, -2, 0, -2**31, 5, -16, 2, -2**31]
    assert run(lambda x, k: x >> k, [i32, i32], [a, s], target).tolist() == \
        [1, -1, -1, 0, 5, -4, 0, 0]
    u = np.array([2**32 - 1, 2**31, 1], np.uint32)
    k = np.array([31, 32, 33], np.uint32)
    assert run(lambda x, k: x >> k, [te.uint32] * 2, [u, k], target).tolist() == [1, 2**31, 0]
    # constant amounts are reduced the same way
    assert run(lambda x, k: (x << 33) + (x >> 32), [i32, i32], [a[:2], s[:2]], target).tolist() == [3, -3]


@pytest.mark.parametrize("target", TARGETS)
def test_vectorized_bit_operations(target):
    n = 64
    A = Buffer("A", (n,), "uint32")
    S = Buffer("S", (n,), "uint32")
    Y = Compute("Y", (n,), lambda i: ((A[i] << S[i]) ^ (A[i] >> 7)) & ~S[i])
    nest = LoopNest([Y])
    _, inner, _ = nest.split_with_tail(nest.get_loops_for(Y)[0], 8)
    nest.vectorize(inner)
    k = build(nest, [A, S, Y], target=target)
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2**32, n, dtype=np.uint32)
    s = rng.integers(0, 70, n, dtype=np.uint32)
    y = np.zeros(n, np.uint32)
    k(a, s, y)
    np.testing.assert_array_equal(y, ((a << (s & 31)) ^ (a >> 7)) & ~s)


@pytest.mark.parametrize("target", TARGETS)
def test_vectorized_bitcasts(target):
    n = 32
    F = Buffer("F", (n,), float32)
    H = Buffer("H", (n,), float16)
    B = Buffer("B", (n,), bfloat16)
    Y = Compute("Y", (n,), lambda i: te.bitcast(te.bitcast(F[i], "uint32") & 0x7FFFFFFF, "float32"))
    Z = Compute("Z", (n,), lambda i: te.bitcast(H[i], "int16") ^ te.bitcast(B[i], "int16"))
    nest = LoopNest([Y, Z])
    for t in (Y, Z):
        _, inner, _ = nest.split_with_tail(nest.get_loops_for(t)[0], 8)
        nest.vectorize(inner)
    k = build(nest, [F, H, B, Y, Z], target=target)
    rng = np.random.default_rng(2)
    f = rng.standard_normal(n).astype(np.float32)
    h = rng.standard_normal(n).astype(np.float16)
    b = rng.standard_normal(n).astype(bfloat16.numpy)
    y, z = np.zeros(n, np.float32), np.zeros(n, np.int16)
    k(f, h, b, y, z)
    np.testing.assert_array_equal(y, np.abs(f))
    np.testing.assert_array_equal(z, h.view(np.int16) ^ b.view(np.int16))


def test_cuda_fast_math_intrinsics_emulate():
    n = 8
    F = Buffer("F", (n,), float32)
    Y = Compute("Y", (n,), lambda i: te.tan(F[i]) + te.log10(te.abs(F[i]) + 1.0))
    k = build(LoopNest([Y]), [F, Y], target="cuda", fast_math=True)
    assert "__tanf(" in k.source and "__log10f(" in k.source
    if HAVE_EMU:
        f = np.linspace(-1, 1, n).astype(np.float32)
        y = np.zeros(n, np.float32)
        run_on_host(k, f, y)
        np.testing.assert_allclose(y, np.tan(f) + np.log10(np.abs(f) + 1), rtol=1e-5, atol=1e-6)


def test_halide_blur_division_by_multiply_and_shift():
    A = Buffer("A", (256,), "uint32")
    Y = Compute("Y", (256,), lambda i: (A[i] * 21845) >> 16)
    a = np.arange(256, dtype=np.uint32) * 3
    for target in TARGETS:
        y = np.zeros(256, np.uint32)
        build(LoopNest([Y]), [A, Y], target=target)(a, y)
        np.testing.assert_array_equal(y, (a * np.uint32(21845)) >> np.uint32(16))
        assert (y[1:] == (a[1:] - 1) // 3).all()  # a - 1 divided by 3, for the multiples of 3


def test_logical_operators_stay_logical_on_bools():
    i, j = Var("i"), Var("j")
    c = (i < 3) & (j > 1)
    assert isinstance(c, te.And) and isinstance((i < 3) | (j > 1), te.Or)
    assert isinstance(~(i < 3), te.Not)
    assert isinstance((i < 3) ^ (j < 2), te.NE)
    assert isinstance(i & j, te.Call) and (i & j).name == "bitwise_and"
    with pytest.raises(TypeError, match="Python bool"):
        (i < 3) & True
    with pytest.raises(TypeError, match="Python bool"):
        False | (i < 3)
    with pytest.raises(TypeError, match="bool literal"):
        i & True
    f = Var("f", float32)
    for bad in (lambda: f & 1.0, lambda: f | f, lambda: f ^ f, lambda: ~f, lambda: f << 1.0, lambda: f >> f):
        with pytest.raises(TypeError, match="integer"):
            bad()
    with pytest.raises(TypeError, match="different dtypes"):
        i << Var("k", "int64")


# ------------------------------------------------------------------------------------
# bitcast
# ------------------------------------------------------------------------------------
BITCASTS = [("float32", "int32"), ("float32", "uint32"), ("int32", "float32"), ("float64", "int64"),
            ("uint64", "float64"), ("float16", "int16"), ("uint16", "float16"), ("bfloat16", "uint16"),
            ("int16", "bfloat16"), ("int32", "uint32"), ("int8", "uint8")]


def _bit_inputs(dt: te.Dtype):
    if dt.is_integer:
        info = np.iinfo(dt.numpy)
        vals = [0, 1, info.max, info.min, 0x3F80 if dt.bits == 16 else 100]
        if dt.bits >= 16:
            vals += [0x7F80 if dt.bits == 16 else 0x7F800000 if dt.bits == 32 else 0x7FF0000000000000]
        return np.array(vals, dt.numpy)
    return np.array([1.0, -2.5, 0.0, -0.0, np.inf, -np.inf, 3.140625, 65504.0 if dt == float16 else 1e4],
                    dt.numpy)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("src,dst", BITCASTS)
def test_bitcast_matches_numpy_view(target, src, dst):
    s, d = te.as_dtype(src), te.as_dtype(dst)
    x = _bit_inputs(s)
    got = run(lambda v: te.bitcast(v, d), [s], [x], target)
    np.testing.assert_array_equal(got.view(np.dtype(f"u{d.bits // 8}")), x.view(np.dtype(f"u{s.bits // 8}")))


def test_bitcast_round_trip_and_arithmetic_on_bits():
    # the sign bit of a float cleared through its bits is fabs
    x = np.array([-1.5, 2.0, -0.0, -np.inf], np.float32)
    for target in TARGETS:
        got = run(lambda v: te.bitcast(te.bitcast(v, "uint32") & 0x7FFFFFFF, "float32"), [float32], [x], target)
        np.testing.assert_array_equal(got, np.abs(x))


def test_bitcast_refuses_different_widths_and_unsupported_types():
    f = Var("f", float32)
    with pytest.raises(TypeError, match="widths differ"):
        te.bitcast(f, "int16")
    with pytest.raises(TypeError, match="widths differ"):
        te.bitcast(Var("h", float16), "float32")
    with pytest.raises(TypeError, match="not supported"):
        te.bitcast(Var("t", "float8_e4m3"), "uint8")
    assert te.bitcast(f, "float32") is f


# ------------------------------------------------------------------------------------
# operators ** abs() round()
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_power_abs_round_operators(target):
    i32 = te.int32
    a = np.array([0, 1, -3, 7, 46341, -2**31, 2**31 - 1, 12], np.int32)
    with np.errstate(over="ignore"):
        for n in (0, 1, 2, 3, 5, 8):
            want = np.ones_like(a)
            for _ in range(n):
                want = want * a          # wraps like the int32 multiplication
            np.testing.assert_array_equal(run(lambda v: v ** n, [i32], [a], target), want)
    np.testing.assert_array_equal(run(lambda v: abs(v), [i32], [a], target), np.abs(a))
    np.testing.assert_array_equal(run(lambda v: round(v), [i32], [a], target), a)
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4999998, 3.7, -7.2], np.float32)
    np.testing.assert_array_equal(run(lambda v: round(v), [float32], [x], target), np.round(x))
    np.testing.assert_array_equal(run(lambda v: abs(v), [float32], [x], target), np.abs(x))
    p = np.array([2.0, 9.0, 0.5, 3.0], np.float32)
    np.testing.assert_allclose(run(lambda v: v ** 0.5, [float32], [p], target), np.sqrt(p), rtol=1e-6)
    np.testing.assert_allclose(run(lambda v: 2.0 ** v, [float32], [p], target), 2.0 ** p, rtol=1e-6)
    np.testing.assert_allclose(run(lambda v: v ** 3, [float32], [p], target), p ** 3, rtol=1e-6)


def test_small_integer_float_powers_are_products_without_a_libm_call():
    """``x ** 3`` of a float is a product (LLVM kept ``pow(x, 3.0)`` as one ``powf`` call per
    vector lane), within 2 ulps of float64; ``x ** 0`` is 1 for NaN too; a fractional or larger
    exponent stays ``pow``."""
    x = te.Var("x", float32)
    assert str(x ** 3) == "x * x * x" and str(x ** 2.0) == "x * x" and str(x ** 1) == "x"
    assert str(x ** 2.5) == "pow(x, 2.5f)" and str(x ** 4) == "pow(x, 4.0f)"
    A = Buffer("A", (4096,), float32)
    outs = [Compute(f"P{k}", (4096,), lambda i, k=k: A[i] ** k) for k in (0, 2, 3)]
    nest = LoopNest(outs)
    nest.auto_schedule()
    k = build(nest, [A, *outs], target="llvm")
    assert "pow" not in k.optimized_source
    a = np.random.default_rng(3).uniform(-40, 40, 4096).astype(np.float32)
    a[:3] = [np.nan, np.inf, -0.0]
    got = [np.empty_like(a) for _ in outs]
    k(a, *got)
    assert (got[0] == 1).all()
    for g, n in zip(got[1:], (2, 3)):
        want = a.astype(np.float64) ** n
        finite = np.isfinite(want) & (want != 0)
        err = np.abs(g[finite] - want[finite]) / np.spacing(np.abs(want[finite]).astype(np.float32))
        assert err.max() <= 2, (n, err.max())
        assert np.isnan(g[0]) and g[1] == np.inf and np.signbit(g[2]) == (n == 3)


def test_power_refusals():
    i = Var("i")
    with pytest.raises(TypeError, match="non-negative integer constant"):
        i ** -2
    with pytest.raises(TypeError, match="non-negative integer constant"):
        i ** Var("n")
    with pytest.raises(TypeError, match="1 <<"):
        2 ** i
    with pytest.raises(TypeError, match="round"):
        round(Var("f", float32), 2)


# ------------------------------------------------------------------------------------
# intrinsics, clamp, lerp
# ------------------------------------------------------------------------------------
_lgamma64 = np.vectorize(math.lgamma, otypes=[np.float64])
_erfc64 = np.vectorize(math.erfc, otypes=[np.float64])

UNARY = {
    "asin": (te.asin, np.arcsin, (-1, 1)), "acos": (te.acos, np.arccos, (-1, 1)),
    "atan": (te.atan, np.arctan, (-20, 20)), "sinh": (te.sinh, np.sinh, (-5, 5)),
    "cosh": (te.cosh, np.cosh, (-5, 5)), "tan": (te.tan, np.tan, (-1.5, 1.5)),
    "log10": (te.log10, np.log10, (0.01, 1e4)), "log1p": (te.log1p, np.log1p, (-0.9, 10)),
    "expm1": (te.expm1, np.expm1, (-3, 3)), "erfc": (te.erfc, _erfc64, (-3, 3)),
    "lgamma": (te.lgamma, _lgamma64, (0.1, 20)), "trunc": (te.trunc, np.trunc, (-9, 9)),
}
BINARY = {
    "atan2": (te.atan2, np.arctan2), "fmod": (te.fmod, np.fmod), "copysign": (te.copysign, np.copysign),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", [float32, float64])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_intrinsics_match_numpy_float64(name, dt, target):
    fn, ref, (lo, hi) = UNARY[name]
    x = np.random.default_rng(len(name)).uniform(lo, hi, 101).astype(dt.numpy)
    got = run(fn, [dt], [x], target)
    tol = 4e-6 if dt == float32 else 1e-13
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=tol, atol=tol)
    assert got.dtype == dt.numpy


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", [float32, float64])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_intrinsics_match_numpy_float64(name, dt, target):
    fn, ref = BINARY[name]
    rng = np.random.default_rng(len(name))
    x = rng.uniform(-10, 10, 101).astype(dt.numpy)
    y = rng.uniform(-3, 3, 101).astype(dt.numpy)
    y[:4] = [0.0, -0.0, 1.0, -1.0]
    x[:4] = [2.0, 2.0, -0.0, 5.5]
    got = run(fn, [dt, dt], [x, y], target)
    with np.errstate(invalid="ignore"):
        want = ref(x.astype(np.float64), y.astype(np.float64))
    tol = 4e-6 if dt == float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    if name != "atan2":       # fmod and copysign are exact
        np.testing.assert_array_equal(got, ref(x, y) if name == "copysign" else np.fmod(x, np.where(y == 0, 1, y))
                                      * np.where(y == 0, np.nan, 1))


@pytest.mark.parametrize("target", TARGETS)
def test_special_values(target):
    x = np.array([0.0, -1.0, -2.0, np.inf, -np.inf, np.nan, 1.0, 2.0], np.float32)
    got = run(te.lgamma, [float32], [x], target)
    np.testing.assert_array_equal(got[:5], [np.inf] * 5)
    assert np.isnan(got[5]) and got[6] == 0 and got[7] == 0
    got = run(te.trunc, [float32], [x], target)
    np.testing.assert_array_equal(got, np.trunc(x))
    got = run(lambda v: te.copysign(1.0, v), [float32], [np.array([-0.0, 0.0, -np.inf], np.float32)], target)
    assert got.tolist() == [-1.0, 1.0, -1.0]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dt", [float16, bfloat16])
def test_low_precision_intrinsics_round_to_the_format(dt, target):
    x = np.linspace(0.1, 0.9, 33).astype(dt.numpy)
    for fn, ref in [(te.asin, np.arcsin), (te.log1p, np.log1p), (te.atan, np.arctan)]:
        got = run(fn, [dt], [x], target)
        assert got.dtype == dt.numpy
        want = ref(x.astype(np.float64)).astype(dt.numpy).astype(np.float64)
        ulp = 2.0 ** -10 if dt == float16 else 2.0 ** -7
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=ulp, atol=0)


@pytest.mark.parametrize("target", TARGETS)
def test_clamp_and_lerp(target):
    x = np.array([-2.0, 0.25, 3.0, np.nan, 1.0], np.float32)
    got = run(lambda v: te.clamp(v, 0.0, 1.0), [float32], [x], target)
    np.testing.assert_array_equal(got, [0.0, 0.25, 1.0, np.nan, 1.0])
    i = np.array([-5, 3, 300, 255], np.int32)
    assert run(lambda v: te.clamp(v, 0, 255), [te.int32], [i], target).tolist() == [0, 3, 255, 255]
    a = np.array([0.0, 1.0, -2.0], np.float32)
    b = np.array([10.0, 3.0, 2.0], np.float32)
    t = np.array([0.25, 0.5, 1.0], np.float32)
    got = run(te.lerp, [float32] * 3, [a, b, t], target)
    np.testing.assert_allclose(got, a + (b - a) * t, rtol=1e-7)
    with pytest.raises(TypeError, match="float"):
        te.lerp(Var("i"), Var("j"), 1)


# ------------------------------------------------------------------------------------
# CUDA: the emitted C, nvcc, host emulation
# ------------------------------------------------------------------------------------
def _cuda_nest():
    n = 40
    A = Buffer("A", (n,), "int32")
    S = Buffer("S", (n,), "int32")
    U = Buffer("U", (n,), "uint8")
    F = Buffer("F", (n,), float32)
    H = Buffer("H", (n,), float16)
    outs = [
        Compute("Y0", (n,), lambda i: ((A[i] << S[i]) ^ (A[i] >> S[i])) | (~A[i] & 0x0F0F)),
        Compute("Y1", (n,), lambda i: (U[i] << 3) | (U[i] >> 9) ^ ~U[i]),
        Compute("Y2", (n,), lambda i: te.bitcast(te.bitcast(F[i], "uint32") ^ 0x80000000, "float32")),
        Compute("Y3", (n,), lambda i: te.bitcast(te.bitcast(H[i], "int16") + 1, "float16")),
        Compute("Y4", (n,), lambda i: te.atan2(F[i], 2.0) + te.lgamma(te.abs(F[i]) + 0.5) + te.fmod(F[i], 0.7)
                + te.copysign(te.trunc(F[i]), F[i]) + te.asin(F[i] * 0.01) + te.acos(F[i] * 0.01)
                + te.atan(F[i]) + te.sinh(F[i] * 0.1) + te.cosh(F[i] * 0.1) + te.tan(F[i] * 0.1)
                + te.log10(te.abs(F[i]) + 1.0) + te.log1p(te.abs(F[i])) + te.expm1(F[i] * 0.1)
                + te.erfc(F[i]) + round(F[i]) + te.clamp(F[i], -1.0, 1.0) + te.lerp(F[i], 1.0, 0.5)),
        Compute("Y5", (n,), lambda i: A[i] ** 3),
    ]
    rng = np.random.default_rng(5)
    arrays = [rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32),
              rng.integers(-40, 70, n).astype(np.int32),
              rng.integers(0, 256, n).astype(np.uint8),
              rng.uniform(-5, 5, n).astype(np.float32),
              rng.uniform(-5, 5, n).astype(np.float16)]
    return [A, S, U, F, H], outs, arrays


def test_cuda_emits_the_operators_and_agrees_with_ireval():
    ins, outs, arrays = _cuda_nest()
    args = ins + outs
    k = build(LoopNest(outs), args, target="cuda")
    src = k.source
    for piece in ("tc_bitcast<unsigned int, float>", "tc_bitcast<short, __half>(tc_f16_st(", "atan2f(",
                  "lgammaf(", "fmodf(", "copysignf(", "truncf(", "erfcf(", "expm1f(", "log1pf(", "log10f(",
                  "rintf(", "(unsigned int)", " & 31)"):
        assert piece in src, piece
    if HAVE_NVCC:
        k.compile(["sm_80"])
    ref = build(LoopNest(outs), args, target="ireval")
    want = [np.zeros(len(arrays[0]), o.dtype.numpy) for o in outs]
    ref(*arrays, *want)
    if HAVE_EMU:
        got = [np.zeros_like(w) for w in want]
        run_on_host(k, *arrays, *got)
        for o, g, w in zip(outs, got, want):
            if o.dtype.is_integer or o.name in ("Y2", "Y3"):
                np.testing.assert_array_equal(g, w, err_msg=o.name)
            else:
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=o.name)


def test_ireval_serial_and_batched_paths_agree():
    n = 6
    A, S = Buffer("A", (n,), "int8"), Buffer("S", (n,), "int8")
    F, G = Buffer("F", (n,), float16), Buffer("G", (n,), bfloat16)
    Y = Compute("Y", (n,), lambda i: (A[i] << S[i]) ^ (A[i] >> S[i]) | ~A[i])
    Z = Compute("Z", (n,), lambda i: te.bitcast(F[i], "int16") ^ te.bitcast(G[i], "int16"))
    W = Compute("W", (n,), lambda i: te.lgamma(F[i]) + te.erfc(F[i]) + te.atan2(F[i], F[i]))
    a = np.array([-128, 127, -1, 5, 3, 1], np.int8)
    s = np.array([7, 8, -1, 9, 1, 100], np.int8)
    f = np.array([0, 1, 2, -3.5, 0.25, 7], np.float16)
    g = f.astype(bfloat16.numpy)
    runs = []
    for batch in (True, False):
        k = build(LoopNest([Y, Z, W]), [A, S, F, G, Y, Z, W], target="ireval", batch=batch)
        outs = [np.zeros(n, np.int8), np.zeros(n, np.int16), np.zeros(n, np.float16)]
        k(a, s, f, g, *outs)
        runs.append(outs)
    for p, q in zip(*runs):
        np.testing.assert_array_equal(p, q)
    assert runs[0][0].tolist() == [-1, -128, 127, -6, -1, -2]
