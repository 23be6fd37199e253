"""The float32 math functions the LLVM backend emits inline (``codegen.llvm.mathfns``), against
float64 references over their whole ranges, special values included, and vector code against
scalar code bit for bit."""
import math
import zlib

import numpy as np
import pytest

import te
from codegen import build
from loopnest import LoopNest
from te import Buffer, Compute, float32

RNG = np.random.default_rng(7)
N = 1 << 15


def _uniform(lo, hi):
    return RNG.uniform(lo, hi, N).astype(np.float32)


def _log_uniform(lo, hi):
    return np.exp(RNG.uniform(np.log(lo), np.log(hi), N)).astype(np.float32)


SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-45, -1e-45, 3.4e38, -3.4e38]


def _log(v):
    if math.isnan(v) or v < 0:
        return math.nan
    return -math.inf if v == 0 else math.inf if math.isinf(v) else math.log(v)


def _odd(f, limit):
    return lambda v: math.nan if math.isnan(v) else math.copysign(1.0, v) if math.isinf(v) else f(v)


#: name -> (te function, float64 reference, samples, the most ulps measured allowed)
CASES = {
    "log": (te.log, _log, lambda: [_log_uniform(1e-45, 3e38), _uniform(0.5, 2.0), _uniform(0.99, 1.01),
                                  [1e-40, 5e-39, 1.17e-38, 0.70710677, 0.7071068, -2.0]], 1.0),
    "tanh": (te.tanh, _odd(math.tanh, 9), lambda: [_uniform(-12, 12), _uniform(-1, 1), _log_uniform(1e-30, 1),
                                                  -_log_uniform(1e-30, 1), [0.8999999, 0.9, 9.0, 1e-40]], 1.5),
    "erf": (te.erf, _odd(math.erf, 4), lambda: [_uniform(-5, 5), _uniform(-1.2, 1.2), _log_uniform(1e-30, 1),
                                               -_log_uniform(1e-30, 1), [0.8999999, 0.9, 3.9, 4.0, 4.1, 1e-40]], 1.5),
    "log2": (te.log2, lambda v: _log(v) / math.log(2) if _log(v) == _log(v) and math.isfinite(_log(v)) else _log(v),
             lambda: [_log_uniform(1e-45, 3e38), _uniform(0.5, 2.0), _uniform(0.99, 1.01), [0.5, 2.0, 1024.0]], 1.5),
    "log10": (te.log10, lambda v: math.log10(v) if v > 0 and math.isfinite(v) else _log(v),
              lambda: [_log_uniform(1e-45, 3e38), _uniform(0.5, 2.0), _uniform(0.99, 1.01), [10.0, 1000.0]], 1.5),
    "log1p": (te.log1p, lambda v: _log(v + 1) if v <= -1 or math.isinf(v) or math.isnan(v) else math.log1p(v),
              lambda: [_log_uniform(1e-30, 3e38), -_log_uniform(1e-30, 1), _uniform(-1, 3),
                       [-0.99999994, 1e-8, -1e-8, 16777216.0, -2.0]], 2.0),
    "exp2": (te.exp2, lambda v: math.nan if math.isnan(v) else 2.0 ** v if v < 1024 else math.inf,
             lambda: [_uniform(-155, 130), _uniform(-2, 2), [-149.0, -149.5, -150.0, 127.99999, 128.0, 0.5]], 1.5),
    "expm1": (te.expm1, lambda v: math.nan if math.isnan(v) else math.expm1(v) if v < 700 else math.inf,
              lambda: [_uniform(-20, 90), _uniform(-1, 1), _log_uniform(1e-30, 1), -_log_uniform(1e-30, 1),
                       [88.7, 88.8, -88.0, -104.0, 16.0, 16.000002, -30.0, 0.34657359]], 1.5),
    "sin": (te.sin, lambda v: math.sin(v) if math.isfinite(v) else math.nan, lambda: _trig_samples(), 1.6),
    "cos": (te.cos, lambda v: math.cos(v) if math.isfinite(v) else math.nan, lambda: _trig_samples(), 1.6),
    "tan": (te.tan, lambda v: math.tan(v) if math.isfinite(v) else math.nan,
            lambda: _trig_samples() + [[1.5707963, -1.5707964, 4.712389, 0.3926991, 1e-40]], 1.0),
    "atan": (te.atan, math.atan, lambda: [_uniform(-5, 5), _log_uniform(1e-30, 3e38), -_log_uniform(1e-30, 3e38),
                                                  _uniform(0.35, 0.45), _uniform(0.6, 0.75), _uniform(2.3, 2.5),
                                                  [0.66817856, 0.6681787, 2.4142134, 2.4142137, 1e-40]], 1.0),
    "asin": (te.asin, lambda v: math.asin(v) if abs(v) <= 1 else math.nan,
             lambda: [_uniform(-1, 1), _uniform(0.45, 0.55), _uniform(0.999, 1.0), _log_uniform(1e-30, 1),
                      -_log_uniform(1e-30, 1), [0.5, -0.5, 0.50000006, 0.99999994, 1.00000012, 2.0, 1e-40]], 1.0),
    "acos": (te.acos, lambda v: math.acos(v) if abs(v) <= 1 else math.nan,
             lambda: [_uniform(-1, 1), _uniform(0.45, 0.55), _uniform(-0.55, -0.45), _uniform(0.999, 1.0),
                      _uniform(-1.0, -0.999), _log_uniform(1e-30, 1), [0.5, -0.5, 0.99999994, -0.99999994, 2.0]], 1.0),
    "sinh": (te.sinh,
             lambda v: math.nan if math.isnan(v) else math.copysign(math.inf, v) if abs(v) > 710 else math.sinh(v),
             lambda: [_uniform(-95, 95), _uniform(-2, 2), _uniform(0.9, 1.1), _log_uniform(1e-30, 1),
                      -_log_uniform(1e-30, 1), [0.99999994, 1.0, 89.0, 89.41, 89.42, 89.5, -89.41, 1e-40]], 2.0),
    "cosh": (te.cosh, lambda v: math.nan if math.isnan(v) else math.inf if abs(v) > 710 else math.cosh(v),
             lambda: [_uniform(-95, 95), _uniform(-2, 2), _log_uniform(1e-30, 1), -_log_uniform(1e-30, 1),
                      [89.0, 89.41, 89.42, 89.5, -89.41, 1e-40]], 1.5),
}


def _trig_samples():
    """Reduced in float32 below 2**16, in float64 up to 2**24, libm beyond (``mathfns._TRIG_F32_LIMIT``,
    ``_TRIG_LIMIT``), and the float32 values nearest the multiples of pi/2 up to 2**16 (where the
    reduced argument is smallest)."""
    k = np.arange(1, 41722)
    near = (k * (np.pi / 2)).astype(np.float32)
    return [_uniform(-10, 10), _uniform(-1e4, 1e4), _uniform(-7e4, 7e4), _log_uniform(1e-30, 1),
            -_log_uniform(1e-30, 1), _uniform(-1.7e7, 1.7e7), near, -near,
            [2.0 ** 24, -2.0 ** 24, 16777215.0, 1e30, 0.7853982, 1.5707964, 3.1415927, 65535.996, 65536.0]]


def _inputs(name):
    """The special values and ``name``'s samples, the same in every process."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(name.encode()))
    return np.concatenate([np.array(SPECIAL, np.float32)] + [np.asarray(s, np.float32) for s in CASES[name][2]()])


def _run(fn, x, lanes, *more):
    """``fn`` of ``x`` (and of the arrays ``more``: its further arguments) on LLVM, its loop
    vectorized ``lanes`` wide (0: scalar code); the outputs and the kernel's IR."""
    ins = [Buffer(f"A{k}", a.shape, float32) for k, a in enumerate((x, *more))]
    B = Compute("B", x.shape, lambda i: fn(*(a[i] for a in ins)))
    nest = LoopNest([B])
    if lanes:
        _, inner, _ = nest.split_with_tail(nest.get_loops_for(B)[0], lanes)
        nest.vectorize(inner)
    k = build(nest, [*ins, B], target="llvm")
    out = np.full_like(x, np.nan)
    k(x, *more, out)
    return out, k.source


def _assert_within(got, ref, ulps, *args):
    """``got`` within ``ulps`` of the float64 ``ref`` where the rounded reference is finite and
    not zero; infinities, zeros (their signs) and NaNs exactly. ``args``: the arguments, named
    in the message of a failure."""
    with np.errstate(all="ignore"):
        want = ref.astype(np.float32)
    finite = np.isfinite(want) & (want != 0)
    err = np.abs(got[finite] - ref[finite]) / np.spacing(np.abs(want[finite])).astype(np.float64)
    assert err.max() <= ulps, ([a[finite][np.argmax(err)] for a in args], err.max())
    rest = ~finite
    assert np.array_equal(np.isnan(got[rest]), np.isnan(want[rest])), [a[rest] for a in args]
    same = ~np.isnan(want[rest])
    assert np.array_equal(got[rest][same].view(np.int32), want[rest][same].view(np.int32))


@pytest.mark.parametrize("name", sorted(CASES))
def test_inline_float32_function_is_within_its_ulps_everywhere(name):
    fn, ref_fn, _, ulps = CASES[name]
    x = _inputs(name)
    ref = np.array([ref_fn(float(v)) for v in x])
    got, source = _run(fn, x, 0)
    assert f"@{name}f(" not in source and f"llvm.{name}." not in source    # no libm call per element
    _assert_within(got, ref, ulps, x)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("lanes", [4, 16])
def test_vector_code_of_an_inline_function_gives_the_scalar_results(name, lanes):
    x = _inputs(name)
    fn = CASES[name][0]
    scalar, _ = _run(fn, x, 0)
    vector, _ = _run(fn, x, lanes)
    assert np.array_equal(scalar.view(np.int32), vector.view(np.int32))


@pytest.mark.parametrize("n", [1, 17, 100])
def test_inline_functions_in_scheduled_nests_agree_with_ireval(n):
    """The functions inside the automatic scheduler's vector loops, partial vectors and
    reductions of a symbolic size (sin and cos branch to libm for large arguments inside
    them), with arguments past the float64 reduction's limit in some lanes."""
    from te import Reduce, Sum, Var
    N = Var("N")
    A = Buffer("A", (4, N), float32)
    R = Reduce("R", (4,), Sum(), lambda i, k: te.sin(A[i, k]) * te.cos(A[i, k]) + te.tanh(A[i, k]), (N,))
    E = Compute("E", (4, N), lambda i, j: te.erf(A[i, j]) + te.log(te.abs(A[i, j]) + 1.0) + te.sin(A[i, j] * 2.0))
    a = _uniform(-20, 20)[: 4 * n].reshape(4, n)
    a[:, ::7] *= np.float32(1e7)            # past 2**24 in some lanes
    outs = {}
    for target, schedule in (("ireval", False), ("llvm", True)):
        nest = LoopNest([R, E])
        if schedule:
            nest.auto_schedule()
        r, e = np.full(4, np.nan, np.float32), np.full((4, n), np.nan, np.float32)
        build(nest, [A, R, E], target=target)(a, r, e)
        outs[target] = (r, e)
    np.testing.assert_allclose(outs["llvm"][0], outs["ireval"][0], rtol=1e-5, atol=1e-4 * n)
    np.testing.assert_allclose(outs["llvm"][1], outs["ireval"][1], rtol=3e-7, atol=1e-6)


def test_inline_atan2_is_within_one_ulp_with_c_special_values_and_vector_code_agrees():
    """atan2 in every quadrant, at every ratio of magnitudes (the reduction's thresholds
    included), against float64; the special values of C (signed zeros, infinities, NaN)
    bit for bit; vector code gives the scalar bits."""
    rng = np.random.default_rng(11)
    mags = np.exp(rng.uniform(np.log(1e-30), np.log(3e36), N)).astype(np.float32)
    ratio = np.exp(rng.uniform(-4, 4, N)).astype(np.float32)
    near = np.float32(np.tan(3 * np.pi / 16)) * rng.uniform(0.99, 1.01, 2000).astype(np.float32)
    y = np.concatenate([mags * rng.choice([-1, 1], N), rng.uniform(-5, 5, N), near, 2.4142135 * np.ones(4)])
    x = np.concatenate([(mags / ratio) * rng.choice([-1, 1], N), rng.uniform(-5, 5, N), np.ones(2000), np.ones(4)])
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -3e38], np.float32)
    sy, sx = (a.ravel() for a in np.meshgrid(special, special))
    y = np.concatenate([y, sy]).astype(np.float32)
    x = np.concatenate([x, sx]).astype(np.float32)
    got, source = _run(te.atan2, y, 0, x)
    assert "atan2f" not in source
    _assert_within(got, np.arctan2(y.astype(np.float64), x.astype(np.float64)), 1.0, y, x)
    for lanes in (4, 16):
        assert np.array_equal(_run(te.atan2, y, lanes, x)[0].view(np.int32), got.view(np.int32))


def test_inline_pow_is_within_one_ulp_with_c_special_values_and_vector_code_agrees():
    """pow over bases from subnormal to huge and exponents whose results span float32 (into
    subnormals and past overflow), negative bases with integer exponents (odd: negative
    results), against float64; C's special values (zeros, infinities, NaN, 1 and -1, integer
    and fractional exponents of negative bases) bit for bit; vector code gives the scalar bits."""
    rng = np.random.default_rng(12)
    base = np.exp(rng.uniform(np.log(1e-40), np.log(3e38), N)).astype(np.float32)
    expo = (rng.uniform(-150, 150, N) / np.maximum(np.abs(np.log2(base.astype(np.float64))), 1)).astype(np.float32)
    neg = -np.exp(rng.uniform(-5, 5, 4000)).astype(np.float32)
    y = np.concatenate([expo, rng.uniform(-8, 8, N), rng.integers(-20, 21, 4000), [0.5, 2.0, 3.0, -1.0]])
    x = np.concatenate([base, rng.uniform(0, 10, N), neg, [1 - 2 ** -24, 1 + 2 ** -23, 1e-45, 2 ** -149]])
    special = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5, np.inf, -np.inf, np.nan,
                        1e-45, 3e38, 16777216.0, 16777217.0], np.float32)
    sx, sy = (a.ravel() for a in np.meshgrid(special, special))
    x = np.concatenate([x, sx]).astype(np.float32)
    y = np.concatenate([y, sy]).astype(np.float32)
    got, source = _run(te.pow, x, 0, y)
    assert "powf" not in source and "llvm.pow" not in source
    with np.errstate(all="ignore"):
        _assert_within(got, np.power(x.astype(np.float64), y.astype(np.float64)), 1.0, x, y)
    for lanes in (4, 16):
        assert np.array_equal(_run(te.pow, x, lanes, y)[0].view(np.int32), got.view(np.int32))
