"""The LLVM backend against the interpreter (IREval) and against exact references.

Every numeric test builds the same nest for ``ireval`` and ``llvm`` and compares: integers
bit for bit, floats exactly for basic arithmetic (non-fast-math) and to a couple of ulps for
the transcendental intrinsics (libm vs numpy). Several expressions share one kernel (one
output each) to keep the number of compiled kernels small.
"""
from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest

import te
from codegen import BuildError, build
from codegen.kernel import KernelArgumentError
from codegen.llvm import cache_stats, clear_cache
from codegen.llvm import jit
from codegen.llvm.emit import buffer_alignment
from loopnest import LoopNest
from loopnest.stmt import Allocate, Block, Cond, For, ForKind, Free, Let as LetStmt, StmtMutator, Store
from te import (Broadcast, Buffer, Compute, IfThenElse, IntImm, Let, Load, Ramp, Reduce, Sum, Var,
                bfloat16, bool_, cast, float8_e4m3, float8_e5m2, float16, float32, float64, floordiv, floormod,
                if_then_else, int8, int16, int32, int64, select, tf32, truncdiv, truncmod, uint8, uint16,
                uint32, uint64)
from te.lowprec import convert, float_to_int, int_to_int


# ------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------
class HandNest:
    """A prepared nest built from statements by hand (vector forms, Allocate inside loops...)."""

    prepared = True

    def __init__(self, root, inputs, outputs, intermediates=()):
        self.root = root if isinstance(root, Block) else Block((root,))
        self.inputs, self.outputs, self.intermediates = list(inputs), list(outputs), list(intermediates)


def run_kernel(k, args, inputs: dict, sizes: dict | None = None):
    """Call ``k`` with ``inputs`` (copied) and zeroed arrays for the other buffers; return the
    arrays of every buffer argument by name."""
    arrays = {}
    for a in args:
        if isinstance(a, Var):
            continue
        if a.name in inputs:
            arrays[a.name] = np.array(inputs[a.name], copy=True)
        else:
            env = dict(sizes or {})
            for b in args:
                if not isinstance(b, Var) and b.name in inputs:
                    for d, n in zip(b.dims, inputs[b.name].shape):
                        if isinstance(d, Var):
                            env[d.name] = n
            shape = [d.value if isinstance(d, IntImm) else env[d.name] for d in a.dims]
            arrays[a.name] = np.zeros(shape, a.dtype.numpy)
    k(**arrays, **(sizes or {}))
    return arrays


def both(nest, args, inputs, sizes=None, **llvm_opts):
    """(ireval arrays, llvm arrays, llvm kernel) of one nest."""
    ref = run_kernel(build(nest, args, target="ireval"), args, inputs, sizes)
    k = build(nest, args, target="llvm", **llvm_opts)
    got = run_kernel(k, args, inputs, sizes)
    return ref, got, k


def hand_both(root, inputs, outputs, data, intermediates=(), **llvm_opts):
    nest = HandNest(root, inputs, outputs, intermediates)
    args = list(inputs) + list(outputs)
    ref = run_kernel(build(nest, args, target="ireval"), args, data)
    k = build(nest, args, target="llvm", **llvm_opts)
    return ref, run_kernel(k, args, data), k


def assert_same(ref, got, names, exact=True, ulps=0):
    with np.errstate(all="ignore"):
        _assert_same(ref, got, names, exact, ulps)


def _assert_same(ref, got, names, exact, ulps):
    for n in names:
        r, g = ref[n], got[n]
        assert r.dtype == g.dtype
        if exact or not np.issubdtype(np.dtype(r.dtype), np.inexact) and r.dtype.kind not in "V":
            if r.dtype.kind in "fcV" or r.dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                                      ml_dtypes.float8_e5m2):
                rf, gf = r.astype(np.float64), g.astype(np.float64)
                ok = (rf == gf) | (np.isnan(rf) & np.isnan(gf))
                assert ok.all(), f"{n}: ireval {rf[~ok][:5]} llvm {gf[~ok][:5]}"
            else:
                assert np.array_equal(r, g), f"{n}: ireval {r[r != g][:5]} llvm {g[r != g][:5]}"
        else:
            rf, gf = r.astype(np.float64), g.astype(np.float64)
            tol = ulps * np.spacing(np.abs(rf).astype(r.dtype)).astype(np.float64)
            ok = (np.abs(rf - gf) <= tol) | (np.isnan(rf) & np.isnan(gf)) | (rf == gf)
            assert ok.all(), f"{n}: ireval {rf[~ok][:5]} llvm {gf[~ok][:5]}"


def elementwise(fns, dtypes, arrays, out_dtype=None):
    """One kernel with outputs O<k>[i] = fns[k](A0[i], A1[i], ...); returns (ref, got, kernel)."""
    n = len(arrays[0])
    bufs = [Buffer(f"A{k}", (n,), dt) for k, dt in enumerate(dtypes)]
    outs = [Compute(f"O{k}", (n,), (lambda f: lambda i: f(*[b[i] for b in bufs]))(f), dtype=out_dtype)
            for k, f in enumerate(fns)]
    ref, got, k = both(LoopNest(outs), bufs + outs, {f"A{j}": a for j, a in enumerate(arrays)})
    return ref, got, k, [o.name for o in outs]


def run_llvm1(fn, dtypes, arrays, out_dtype=None, **opts):
    """Out[i] = fn(A0[i], ...) on llvm only (for checks against exact Python references)."""
    n = len(arrays[0])
    bufs = [Buffer(f"A{k}", (n,), dt) for k, dt in enumerate(dtypes)]
    out = Compute("Out", (n,), lambda i: fn(*[b[i] for b in bufs]), dtype=out_dtype)
    k = build(LoopNest([out]), bufs + [out], target="llvm", **opts)
    res = np.zeros(n, out.dtype.numpy)
    k(*arrays, res)
    return res


class SetKind(StmtMutator):
    def __init__(self, kinds: dict):
        self.kinds = kinds

    def visit_For(self, s):
        s2 = self.generic(s)
        k = self.kinds.get(s.var.name)
        return s2.replace(kind=k) if k else s2


def prepared(outputs, kinds=None):
    nest = LoopNest(outputs).prepare_for_codegen()
    if kinds:
        nest.root = SetKind(kinds).visit(nest.root)
    return nest


INT_DTYPES = [int8, int16, int32, int64, uint8, uint16, uint32, uint64]


def int_samples(dt, n=64, seed=0):
    info = np.iinfo(dt.numpy)
    rng = np.random.default_rng(seed)
    a = rng.integers(info.min, info.max, n, dtype=dt.numpy, endpoint=True)
    b = rng.integers(info.min, info.max, n, dtype=dt.numpy, endpoint=True)
    small = rng.integers(max(info.min, -9), 10, n).astype(dt.numpy)
    b[::3] = small[::3]
    edge_a = [info.min, info.max, 0, 7, info.min, 1]
    edge_b = [1, info.max, 5, 3, info.max, info.max]
    if dt.is_int:
        edge_a += [-7, -7, 7, info.min, -1, info.min]
        edge_b += [2, -2, -2, -1, -1, 7]
    a[:len(edge_a)] = edge_a
    b[:len(edge_b)] = edge_b
    b[b == 0] = 3
    return a, b


# ------------------------------------------------------------------------------------
# integers
# ------------------------------------------------------------------------------------
INT_OPS = [lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, truncdiv, truncmod, floordiv, floormod,
           te.minimum, te.maximum, lambda x, y: select(x < y, x, y), lambda x, y: te.abs(x),
           lambda x, y: cast(x.eq(y) | (x >= y), x.dtype), lambda x, y: cast(x.ne(y) & (x <= y), x.dtype),
           lambda x, y: cast(x > y, x.dtype)]


@pytest.mark.parametrize("dt", INT_DTYPES, ids=str)
def test_integer_operations_are_bit_exact(dt):
    a, b = int_samples(dt)
    ref, got, _, names = elementwise(INT_OPS, [dt, dt], [a, b])
    assert_same(ref, got, names)


@pytest.mark.parametrize("dt", [int8, int32, int64], ids=str)
def test_c_and_floor_division_on_negative_operands(dt):
    lo = dt.min_value()
    pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (-8, 3), (8, -3), (0, -5), (-1, 7), (-6, 3),
             (lo, -1), (lo, 7), (dt.max_value(), -3)]
    a = np.array([p[0] for p in pairs], dt.numpy)
    b = np.array([p[1] for p in pairs], dt.numpy)

    def c_div(x, y):
        q = abs(x) // abs(y)
        return q if (x < 0) == (y < 0) else -q

    def wrap(v):
        return int(int_to_int(v, dt.numpy))
    refs = {truncdiv: lambda x, y: wrap(c_div(x, y)), truncmod: lambda x, y: x - y * c_div(x, y),
            floordiv: lambda x, y: wrap(x // y), floormod: lambda x, y: x % y}
    for op, ref in refs.items():
        got = run_llvm1(op, [dt, dt], [a, b])
        assert got.tolist() == [ref(x, y) for x, y in pairs], op.__name__


def test_unsigned_division_and_floor_forms():
    a = np.array([2**32 - 1, 7, 2**31, 5], np.uint32)
    b = np.array([2, 2, 3, 7], np.uint32)
    assert run_llvm1(truncdiv, [uint32, uint32], [a, b]).tolist() == [(2**32 - 1) // 2, 3, 2**31 // 3, 0]
    assert run_llvm1(floormod, [uint32, uint32], [a, b]).tolist() == [1, 1, 2**31 % 3, 5]


def test_wraparound():
    a = np.array([2**31 - 1, -2**31, 46341], np.int32)
    assert run_llvm1(lambda x: x + 1, [int32], [a]).tolist() == [-2**31, -2**31 + 1, 46342]
    assert run_llvm1(lambda x: x * x, [int32], [a]).tolist() == [1, 0, int(int_to_int(46341 * 46341, np.int32))]
    u = np.array([0, 255, 16], np.uint8)
    assert run_llvm1(lambda x: x - 1, [uint8], [u]).tolist() == [255, 254, 15]
    assert run_llvm1(lambda x: x * 16, [uint8], [u]).tolist() == [0, 240, 0]


def test_integer_division_by_zero_does_not_trap():
    # unspecified by the spec (IREval raises); the LLVM backend defines x / 0 == x % 0 == 0
    a = np.array([5, -5, -2**31, 7], np.int32)
    b = np.array([0, 0, -1, 0], np.int32)
    assert run_llvm1(truncdiv, [int32, int32], [a, b]).tolist() == [0, 0, -2**31, 0]
    assert run_llvm1(truncmod, [int32, int32], [a, b]).tolist() == [0, 0, 0, 0]
    assert run_llvm1(floordiv, [int32, int32], [a, b]).tolist() == [0, 0, -2**31, 0]


def test_integer_division_by_constants():
    a = np.arange(-20, 20, dtype=np.int32)
    fns = [lambda x: x / 4, lambda x: x % 4, lambda x: floordiv(x, 4), lambda x: floormod(x, 4),
           lambda x: x / -3, lambda x: floormod(x, -3), lambda x: x / -1, lambda x: x % -1]
    ref, got, _, names = elementwise([(lambda f: lambda x: f(x))(f) for f in fns], [int32], [a])
    assert_same(ref, got, names)
    assert got["O2"].tolist() == (a // 4).tolist()


# ------------------------------------------------------------------------------------
# floats
# ------------------------------------------------------------------------------------
def float_inputs(dt, n=80, seed=1):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(n) * 3).astype(np.float32)
    b = (rng.standard_normal(n) * 3).astype(np.float32)
    a[:8] = [np.nan, np.inf, -np.inf, 1e6, -0.0, 2.5, 3.5, -2.5]
    b[:8] = [1.0, 2.0, 3.0, np.nan, 0.5, 2.0, -0.0, 1e-3]
    if dt == tf32 or dt == float32:
        return a, b
    if dt == float64:
        return a.astype(np.float64) / 3, b.astype(np.float64) / 7
    with np.errstate(over="ignore"):
        return a.astype(dt.numpy), b.astype(dt.numpy)


FLOAT_DTYPES = [float32, float64, float16, bfloat16, tf32, float8_e4m3, float8_e5m2]
ARITH = [lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x / y, te.minimum, te.maximum,
         floordiv, floormod, lambda x, y: select(x < y, x * 2.0, y), lambda x, y: cast(x.ne(y), x.dtype),
         lambda x, y: cast((x <= y) | (x > y + 1.0), x.dtype), lambda x, y: te.abs(x), lambda x, y: te.floor(x),
         lambda x, y: te.ceil(x), lambda x, y: te.round(x), lambda x, y: te.sqrt(te.abs(x)),
         lambda x, y: cast(te.isnan(x), x.dtype)]
TRANSCENDENTAL = [te.exp, te.tanh, te.sigmoid, lambda x: te.rsqrt(te.abs(x) + 1.0), te.erf, te.sin, te.cos,
                  lambda x: te.log(te.abs(x) + 1.0), te.exp2, lambda x: te.log2(te.abs(x) + 1.0),
                  lambda x: te.pow(te.abs(x), x * 0.5)]


def _ops_for(dt, ops):
    # float8 kernels are large (integer-coded conversions after every operation): test fewer ops per kernel
    return ops[::2] if dt.kind.startswith("float8") else ops


@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
def test_float_arithmetic_matches_ireval_exactly(dt):
    a, b = float_inputs(dt)
    ref, got, _, names = elementwise(_ops_for(dt, ARITH), [dt, dt], [a, b])
    assert_same(ref, got, names)


@pytest.mark.parametrize("dt", FLOAT_DTYPES, ids=str)
def test_transcendental_intrinsics_within_ulps(dt):
    a, _ = float_inputs(dt)
    fns = [(lambda f: lambda x: f(x))(f) for f in _ops_for(dt, TRANSCENDENTAL)]
    ref, got, _, names = elementwise(fns, [dt], [a])
    # libm vs numpy: a couple of float32 ulps, i.e. at most one ulp of the narrow formats
    assert_same(ref, got, names, exact=False, ulps=2 if dt in (float32, float64) else 1)


def test_float32_arithmetic_rounds_in_float32():
    a = np.array([16777216.0, 0.1, 1e-45], np.float32)
    got = run_llvm1(lambda x: x + 1.0, [float32], [a])
    assert got.tolist() == (a + np.float32(1)).tolist()


def test_min_max_propagate_nan():
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([1.0, np.nan, 3.0], np.float32)
    lo = run_llvm1(te.minimum, [float32, float32], [a, b])
    hi = run_llvm1(te.maximum, [float32, float32], [a, b])
    assert np.isnan(lo[:2]).all() and np.isnan(hi[:2]).all() and lo[2] == 2.0 and hi[2] == 3.0


def test_fast_math_flags_only_when_asked():
    A = Buffer("A", (16,), float32)
    B = Compute("B", (16,), lambda i: A[i] * 2.0 + 1.0)
    plain = build(LoopNest([B]), [A, B], target="llvm")
    fast = build(LoopNest([B]), [A, B], target="llvm", fast_math=True)
    assert " fast " not in plain.source and "fmul fast" in fast.source
    a = np.arange(16, dtype=np.float32)
    b1, b2 = np.zeros(16, np.float32), np.zeros(16, np.float32)
    plain(a, b1)
    fast(a, b2)
    assert np.array_equal(b1, a * 2 + 1) and np.array_equal(b2, b1)


def test_fp_contract_fuses_multiply_add_into_one_rounding():
    """By default a float multiply and the add that uses it may become one FMA (one rounding,
    as nvcc does); ``fp_contract=False`` rounds the product first, as IREval does."""
    A = Buffer("A", (8,), float32)
    B = Buffer("B", (8,), float32)
    C = Compute("C", (8,), lambda i: A[i] * A[i] - B[i])
    fused = build(LoopNest([C]), [A, B, C], target="llvm")
    plain = build(LoopNest([C]), [A, B, C], target="llvm", fp_contract=False)
    assert "fmul contract" in fused.source and "contract" not in plain.source
    # a = 1 + 2^-12: a*a = 1 + 2^-11 + 2^-24, whose last term float32 rounding drops
    a = np.full(8, 1 + 2.0 ** -12, np.float32)
    b = (a.astype(np.float64) ** 2).astype(np.float32)          # the rounded product
    c1, c2, c3 = (np.zeros(8, np.float32) for _ in range(3))
    fused(a, b, c1)
    plain(a, b, c2)
    build(LoopNest([C]), [A, B, C], target="ireval")(a, b, c3)
    assert np.array_equal(c2, c3) and (c2 == 0).all()
    if "+fma" in jit.host_info()["features"].split(","):
        assert (c1 == np.float32(2.0 ** -24)).all()             # the exact residual: fused
    with pytest.raises(BuildError, match="fp_contract"):
        build(LoopNest([C]), [A, B, C], target="llvm", fp_contract="yes")


# ------------------------------------------------------------------------------------
# casts
# ------------------------------------------------------------------------------------
def test_float_to_int_casts_saturate_and_nan_is_zero():
    x = np.array([-2.7, 2.7, -0.5, np.nan, 1e10, -1e10, np.inf, -np.inf, 2147483520.0, 300.0, -3.0], np.float32)
    for dst in (int32, int8, uint8, uint32, int64, uint64):
        got = run_llvm1(lambda v: cast(v, dst), [float32], [x])
        assert got.tolist() == float_to_int(x, dst.numpy).tolist(), dst
    d = np.array([-2.5e18, 9.3e18, -1.5, np.nan], np.float64)
    assert run_llvm1(lambda v: cast(v, int64), [float64], [d]).tolist() == [-2500000000000000000, 2**63 - 1, -1, 0]


def test_int_to_int_casts_wrap():
    a = np.array([300, -1, 128, -129, 2**31 - 1], np.int32)
    for dst in (int8, uint8, int16, uint64, int64):
        assert run_llvm1(lambda v: cast(v, dst), [int32], [a]).tolist() == int_to_int(a, dst.numpy).tolist()
    b = np.array([255, 128, 0], np.uint8)
    assert run_llvm1(lambda v: cast(v, int32), [uint8], [b]).tolist() == [255, 128, 0]


def test_int_to_float_rounds_once():
    a = np.array([16777217, 16777219, -16777217], np.int32)
    assert run_llvm1(lambda v: cast(v, float32), [int32], [a]).tolist() == [16777216.0, 16777220.0, -16777216.0]
    big = np.array([2**53 + 2**29 + 1], np.int64)
    assert run_llvm1(lambda v: cast(v, float32), [int64], [big]).tolist() == [float(2**53 + 2**30)]
    bb = np.array([2**60 + 2**52 + 1, 2**60 + 2**52, -(2**60 + 2**52 + 1), 2**63 - 1, -2**63], np.int64)
    got = run_llvm1(lambda v: cast(v, bfloat16), [int64], [bb]).astype(np.float64)
    assert got.tolist() == [2.0**60 + 2**53, 2.0**60, -(2.0**60 + 2**53), 2.0**63, -2.0**63]
    ub = np.array([2**64 - 1, 2**63 + 2**55 + 1], np.uint64)
    assert run_llvm1(lambda v: cast(v, bfloat16), [uint64], [ub]).astype(np.float64).tolist() == \
        [2.0**64, 2.0**63 + 2**56]
    h = np.array([2049, 2051, 70000, -3], np.int32)
    assert run_llvm1(lambda v: cast(v, float16), [int32], [h]).astype(np.float64).tolist() == \
        [2048.0, 2052.0, math.inf, -3.0]


def test_bool_casts():
    f = np.array([0.5, 0.0, -0.0, np.nan, -3.0], np.float32)
    assert run_llvm1(lambda v: cast(v, bool_), [float32], [f]).tolist() == [True, False, False, True, True]
    i = np.array([0, 2, -1], np.int8)
    assert run_llvm1(lambda v: cast(cast(v, bool_), int32), [int8], [i]).tolist() == [0, 1, 1]


@pytest.mark.parametrize("dst", ["float16", "bfloat16", "tf32", "float8_e4m3", "float8_e5m2"])
def test_narrowing_float_casts_round_to_nearest_even(dst):
    rng = np.random.default_rng(7)
    x = np.concatenate([
        (rng.standard_normal(200) * 10).astype(np.float32),
        np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-42, 65504.0, 65520.0, 70000.0, 448.0, 464.0,
                  500.0, 57344.0, 61440.0, 1e30, 3.4e38, 1 + 2.0**-8, 1 + 3 * 2.0**-8, 1 + 2.0**-11,
                  1 + 3 * 2.0**-11, 2.0**-14, 2.0**-24, 2.0**-25, 3 * 2.0**-26, 2.0**-9, 2.0**-10, 1.5 * 2.0**-10,
                  2.0**-16, 1.5 * 2.0**-16, 2.0**-17], np.float32)])
    dt = te.dtypes.as_dtype(dst)
    got = run_llvm1(lambda v: cast(v, dt), [float32], [x])
    want = convert(x, "float32", dst)
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    assert ((g == w) | (np.isnan(g) & np.isnan(w))).all(), (x[g != w], g[g != w], w[g != w])
    # from float64: a single rounding (no double rounding through float32)
    xd = np.array([1 + 2.0**-8 + 2.0**-30, 1 + 2.0**-11 + 2.0**-40, 65519.999, 448 + 16 + 1e-9, -1 - 2.0**-8 - 2.0**-40,
                   1e-300, 1e300, np.nan], np.float64)
    got = run_llvm1(lambda v: cast(v, dt), [float64], [xd]).astype(np.float64)
    want = convert(xd, "float64", dst).astype(np.float64)
    assert ((got == want) | (np.isnan(got) & np.isnan(want))).all(), (xd, got, want)


def test_widening_float_casts_are_exact():
    bits = np.arange(0, 2**16, 7, dtype=np.uint16)
    h = bits.view(np.float16)
    bf = bits.view(ml_dtypes.bfloat16)
    e4 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    e5 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e5m2)
    for arr, dt in ((h, float16), (bf, bfloat16), (e4, float8_e4m3), (e5, float8_e5m2)):
        got = run_llvm1(lambda v: cast(v, float32), [dt], [arr])
        want = arr.astype(np.float32)
        assert ((got == want) | (np.isnan(got) & np.isnan(want))).all(), dt
        got64 = run_llvm1(lambda v: cast(v, float64), [dt], [arr])
        with np.errstate(invalid="ignore"):
            assert ((got64 == want.astype(np.float64)) | np.isnan(want)).all(), dt
        assert np.isnan(got64[np.isnan(want)]).all()


def test_float16_and_bfloat16_round_after_every_operation():
    # 1 + 2**-11 is not a float16: (1 + 2**-11) + 2**-11 is 1 + 2**-11 + 2**-11 in float32 but 1.0 in float16
    h = np.array([1.0, 2048.0], np.float16)
    got = run_llvm1(lambda x: (x + np.float16(2.0**-11).item()) + np.float16(2.0**-11).item(), [float16], [h])
    assert got.tolist() == [1.0, 2048.0]
    b = np.array([1.0, 256.0], ml_dtypes.bfloat16)
    got = run_llvm1(lambda x: (x + 2.0**-8) + 2.0**-8, [bfloat16], [b])
    assert got.astype(np.float64).tolist() == [1.0, 256.0]


# ------------------------------------------------------------------------------------
# select / if_then_else / and / or / let / bool
# ------------------------------------------------------------------------------------
def test_if_then_else_and_short_circuit_guard_far_out_of_bounds_loads():
    # the guarded loads would touch unmapped memory (a crash) if they were evaluated
    N = Var("N")
    A = Buffer("A", (N,), float32)

    def far(i):
        return cast(i, int64) + (1 << 44)
    B = Compute("B", (N,), lambda i: if_then_else(i < N, A[i], A[far(i)]))
    C = Compute("C", (N,), lambda i: select((i >= N) & (A[far(i)] > 0.0), 1.0, 2.0))
    D = Compute("D", (N,), lambda i: select((i < N) | (A[far(i)] > 0.0), A[i], 0.0))
    a = np.arange(5, dtype=np.float32)
    ref, got, _ = both(LoopNest([B, C, D]), [A, B, C, D], {"A": a})
    assert_same(ref, got, ["B", "C", "D"])
    assert got["B"].tolist() == a.tolist() and got["C"].tolist() == [2.0] * 5 and got["D"].tolist() == a.tolist()


def test_if_then_else_guards_boundary_load():
    A = Buffer("A", (10,), int32)
    B = Compute("B", (10,), lambda i: if_then_else(i + 1 < 10, A[i + 1], -1) + A[i])
    a = np.arange(10, dtype=np.int32) * 3
    ref, got, _ = both(LoopNest([B]), [A, B], {"A": a})
    assert_same(ref, got, ["B"])


def test_bool_buffers_and_logic():
    n = 16
    A = Buffer("A", (n,), bool_)
    Bb = Buffer("Bb", (n,), bool_)
    X = Buffer("X", (n,), int32)
    outs = [Compute("O0", (n,), lambda i: A[i] & Bb[i]), Compute("O1", (n,), lambda i: A[i] | ~Bb[i]),
            Compute("O2", (n,), lambda i: select(A[i], X[i], -X[i])), Compute("O3", (n,), lambda i: X[i] > 3),
            Compute("O4", (n,), lambda i: te.maximum(A[i], Bb[i])), Compute("O5", (n,), lambda i: A[i].ne(Bb[i]))]
    rng = np.random.default_rng(3)
    data = {"A": rng.random(n) > 0.5, "Bb": rng.random(n) > 0.5, "X": np.arange(n, dtype=np.int32)}
    ref, got, _ = both(LoopNest(outs), [A, Bb, X] + outs, data)
    assert_same(ref, got, [o.name for o in outs])
    assert got["O0"].tolist() == (data["A"] & data["Bb"]).tolist()


def test_bool_arithmetic_is_rejected():
    A = Buffer("A", (4,), bool_)
    B = Compute("B", (4,), lambda i: A[i] + A[i])
    with pytest.raises(BuildError, match="bool"):
        build(LoopNest([B]), [A, B], target="llvm")


def test_let_expression_and_statement():
    n = 8
    A = Buffer("A", (n,), int32)
    B = Buffer("B", (n,), int32)
    i, t, u = Var("i"), Var("t"), Var("u")
    body = LetStmt(t, A[i] * 3, Block([Store(B, (i,), Let(u, t + 1, u * u) - t)]))
    root = For(i, 0, n, Block([body]))
    data = {"A": np.arange(n, dtype=np.int32) - 3}
    ref, got, _ = hand_both(root, [A], [B], data)
    assert_same(ref, got, ["B"])
    a = data["A"]
    assert got["B"].tolist() == ((3 * a + 1) ** 2 - 3 * a).tolist()


def test_cond_statement_with_else():
    n = 10
    A = Buffer("A", (n,), float32)
    B = Buffer("B", (n,), float32)
    i = Var("i")
    root = For(i, 0, n, Block([Cond(A[i] > 0.0, Block([Store(B, (i,), A[i] * 2.0)]),
                                    Block([Store(B, (i,), A[i] - 1.0)]))]))
    data = {"A": np.linspace(-2, 2, n).astype(np.float32)}
    ref, got, _ = hand_both(root, [A], [B], data)
    assert_same(ref, got, ["B"])


# ------------------------------------------------------------------------------------
# shapes, reductions, intermediates
# ------------------------------------------------------------------------------------
def test_symbolic_sizes():
    N, M = Var("N"), Var("M")
    A = Buffer("A", (N, M), float32)
    B = Compute("B", (N, M), lambda i, j: A[i, j] * 2.0 + cast(j, float32))
    C = Reduce("C", (N,), Sum(), lambda i, k: B[i, k], (M,))
    k = build(LoopNest([C]), [A, C], target="llvm")
    kr = build(LoopNest([C]), [A, C], target="ireval")
    for n, m in [(0, 3), (1, 1), (3, 0), (7, 13), (2, 64)]:
        a = np.random.default_rng(n).standard_normal((n, m)).astype(np.float32)
        c, cr = np.zeros(n, np.float32), np.zeros(n, np.float32)
        k(a, c)
        kr(a, cr)
        assert np.array_equal(c, cr)
        assert np.allclose(c, (a * 2 + np.arange(m)).sum(1), rtol=1e-5, atol=1e-5)


def test_explicit_size_argument():
    N = Var("N")
    A = Buffer("A", (N,), int64)
    B = Compute("B", (N,), lambda i: A[i] + cast(N, int64))
    k = build(LoopNest([B]), [A, B, N], target="llvm")
    a = np.arange(5, dtype=np.int64)
    b = np.zeros(5, np.int64)
    k(a, b, 5)
    assert b.tolist() == (a + 5).tolist()
    b2 = np.zeros(5, np.int64)
    k(A=a, B=b2, N=5)
    assert b2.tolist() == b.tolist()


@pytest.mark.parametrize("n,where", [(64, "alloca"), (100_000, "aligned_alloc")])
def test_intermediate_buffers_stack_and_heap(n, where):
    """Small intermediates are allocas, large ones heap buffers; both aligned to a cache line
    (or the host's native vector where wider), a heap buffer's size rounded up to that."""
    A = Buffer("A", (n,), float32)
    B = Compute("B", (n,), lambda i: A[i] * 2.0)
    C = Compute("C", (n,), lambda i: B[i] + B[n - 1 - i])
    data = {"A": np.random.default_rng(0).standard_normal(n).astype(np.float32)}
    ref, got, k = both(LoopNest([C]), [A, C], data)
    assert_same(ref, got, ["C"])
    assert where in k.source
    align = buffer_alignment()
    if where == "alloca":
        assert re.search(rf'%"B" = alloca \[\d+ x float\], align {align}', k.source), k.source
    else:
        assert f"call ptr @\"aligned_alloc\"(i64 {align}, " in k.source and "malloc" not in k.source
        assert f"and i64 %" in k.source and f", {-align}" in k.source        # the size rounded up


@pytest.mark.parametrize("n", [64, 100_001])     # a stack and a heap intermediate, one of an odd size
def test_intermediates_start_aligned_at_run_time(n):
    """An external call receives the data pointer of the intermediate T: it is a multiple of
    buffer_alignment() (malloc's 16 bytes failed this for heap buffers), and the values flow."""
    import ctypes
    from te import Extern
    from te.extern import extern_c_fn
    seen = []

    def shim(nbufs, data, ndims, shapes, strides):
        seen.append(data[0] % buffer_alignment())
        src = np.frombuffer((ctypes.c_float * n).from_address(data[0]), np.float32)
        np.frombuffer((ctypes.c_float * n).from_address(data[1]), np.float32)[:] = src + 1.0
        return 0
    c_fn = extern_c_fn(shim)
    A = Buffer("A", (n,), float32)
    T = Compute("T", (n,), lambda i: A[i] * 2.0)
    E = Extern("E", (n,), [T], c_fn=c_fn, func_name="plus_one")
    a = np.arange(n, dtype=np.float32)
    e = np.zeros(n, np.float32)
    build(LoopNest([E]), [A, E], target="llvm")(a, e)
    assert seen == [0]
    np.testing.assert_array_equal(e, a * 2 + 1)


def test_symbolic_intermediate_uses_the_heap_and_frees_it():
    N = Var("N")
    A = Buffer("A", (N, 8), float32)
    B = Compute("B", (N, 8), lambda i, j: A[i, j] + 1.0)
    C = Reduce("C", (N,), te.Max(), lambda i, k: B[i, k], (8,))
    data = {"A": np.random.default_rng(1).standard_normal((9, 8)).astype(np.float32)}
    ref, got, k = both(LoopNest([C]), [A, C], data)
    assert_same(ref, got, ["C"])
    assert "aligned_alloc" in k.source and "free" in k.source


def test_allocate_inside_a_loop_is_hoisted_to_the_entry_block():
    n = 6
    A = Buffer("A", (n, 4), float32)
    B = Buffer("B", (n, 4), float32)
    T = Buffer("T", (4,), float32)
    i, j, j2 = Var("i"), Var("j"), Var("j2")
    root = For(i, 0, n, Block([
        Allocate(T),
        For(j, 0, 4, Block([Store(T, (j,), Load(A, (i * 4 + j,)) * 2.0)])),
        For(j2, 0, 4, Block([Store(B, (i * 4 + j2,), Load(T, (j2,)) + Load(T, (3 - j2,)))])),
        Free(T)]))
    data = {"A": np.arange(n * 4, dtype=np.float32).reshape(n, 4)}
    ref, got, k = hand_both(root, [A], [B], data, intermediates=[T])
    assert_same(ref, got, ["B"])
    entry = k.source.split("start:")[0]
    assert '%"T" = alloca' in entry


# ------------------------------------------------------------------------------------
# loop kinds and vectors
# ------------------------------------------------------------------------------------
def test_unrolled_small_loop_is_copied():
    A = Buffer("A", (5, 4), int32)
    B = Compute("B", (5, 4), lambda i, j: A[i, j] * (j + 1))
    nest = prepared([B], {"j": ForKind.UNROLLED})
    data = {"A": np.arange(20, dtype=np.int32).reshape(5, 4)}
    ref, got, k = both(nest, [A, B], data)
    assert_same(ref, got, ["B"])
    assert "j_loop" not in k.source and "i_loop" in k.source


def test_unrolled_long_or_symbolic_loop_gets_unroll_metadata():
    N = Var("N")
    A = Buffer("A", (N,), int32)
    B = Compute("B", (N,), lambda i: A[i] + 1)
    nest = prepared([B], {"i": ForKind.UNROLLED})
    ref, got, k = both(nest, [A, B], {"A": np.arange(100, dtype=np.int32)})
    assert_same(ref, got, ["B"])
    assert "llvm.loop.unroll.count" in k.source


def test_vectorized_loop_kind_gets_vectorize_metadata():
    A = Buffer("A", (37,), float32)
    B = Compute("B", (37,), lambda i: A[i] * 3.0)
    nest = prepared([B], {"i": ForKind.VECTORIZED})
    ref, got, k = both(nest, [A, B], {"A": np.arange(37, dtype=np.float32)})
    assert_same(ref, got, ["B"])
    assert "llvm.loop.vectorize.enable" in k.source


def test_vector_ramp_broadcast_contiguous_load_and_store():
    n, w = 32, 8
    A = Buffer("A", (n,), float32)
    S = Buffer("S", (1,), float32)
    B = Buffer("B", (n,), float32)
    io = Var("io")
    idx = Ramp(io * w, 1, w)
    val = Load(A, (idx,)) * Broadcast(Load(S, (IntImm(0),)), w) + Broadcast(te.FloatImm(1.0, float32), w)
    root = For(io, 0, n // w, Block([Store(B, (idx,), val)]))
    data = {"A": np.arange(n, dtype=np.float32), "S": np.array([0.5], np.float32)}
    ref, got, k = hand_both(root, [A, S], [B], data)
    assert_same(ref, got, ["B"])
    assert "load <8 x float>" in k.source and "store <8 x float>" in k.source


def test_vector_gather_scatter_and_strided_access():
    n = 16
    A = Buffer("A", (2 * n,), int32)
    P = Buffer("P", (n,), int32)
    B = Buffer("B", (2 * n,), int32)
    io = Var("io")
    w = 4
    lanes = Ramp(io * w, 1, w)
    gathered = Load(A, (Load(P, (lanes,)),))                 # A[P[i]]: a gather
    strided = Load(A, (Ramp(io * (2 * w), 2, w),))         # A[2i]: stride 2
    root = For(io, 0, n // w, Block([
        Store(B, (Ramp(io * (2 * w) + 1, 2, w),), gathered + strided),   # scatter to odd slots
        Store(B, (Ramp(io * (2 * w), 2, w),), strided * Broadcast(IntImm(10, int32), w))]))
    rng = np.random.default_rng(5)
    data = {"A": np.arange(2 * n, dtype=np.int32) * 7, "P": rng.permutation(2 * n)[:n].astype(np.int32)}
    ref, got, k = hand_both(root, [A, P], [B], data)
    assert_same(ref, got, ["B"])
    # one gather per lane set: A[P[i]] from the buffer's start, A[2i] at constant offsets
    assert k.source.count("call <4 x i32> @\"llvm.masked.gather.v4i32.v4p0\"") == 3
    assert "<4 x i32> <i32 0, i32 2, i32 4, i32 6>" in k.source


@pytest.mark.parametrize("dt", ["bool", "int8", "uint8", "int16", "float16", "bfloat16", "float64", "int64"])
def test_strided_vector_loads_gather_every_element_type(dt):
    """``A[3 i]`` vectorized is one ``llvm.masked.gather`` of the storage type (i8 bools,
    i16 bit patterns of the 16-bit floats), equal to IREval and numpy's slice."""
    A = Buffer("A", (64,), dt)
    B = Compute("B", (20,), lambda i: A[i * 3])
    nest = LoopNest([B])
    _, v, _ = nest.split_with_tail(nest.get_loops_for(B)[0], 8)
    nest.vectorize(v)
    np_dt = ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype(dt)
    a = (np.arange(64) % 3 == 0) if dt == "bool" else (np.arange(64) % 7).astype(np_dt)
    got = {}
    for target in ("ireval", "llvm"):
        k = build(nest, [A, B], target=target)
        got[target] = np.zeros(20, np_dt)
        k(a, got[target])
    assert "llvm.masked.gather" in k.source
    assert np.array_equal(got["llvm"], got["ireval"]) and np.array_equal(got["llvm"], a[::3][:20])


def test_vector_if_then_else_loads_only_the_taken_lanes():
    n, w = 10, 4
    A = Buffer("A", (n,), float32)
    B = Buffer("B", (12,), float32)
    io = Var("io")
    idx = Ramp(io * w, 1, w)
    inside = idx < Broadcast(IntImm(n, int32), w)
    val = IfThenElse(inside, Load(A, (idx,)), Broadcast(te.FloatImm(-1.0, float32), w))
    bad = IfThenElse(~inside | inside, val, Load(A, (Ramp(io * w + (1 << 28), 1, w),)))
    root = For(io, 0, 3, Block([Store(B, (idx,), bad)]))
    data = {"A": np.arange(n, dtype=np.float32)}
    ref, got, _ = hand_both(root, [A], [B], data)
    assert_same(ref, got, ["B"])
    assert got["B"].tolist() == list(range(10)) + [-1.0, -1.0]


def test_vector_lowp_bool_casts_and_let():
    n, w = 16, 8
    A = Buffer("A", (n,), bfloat16)
    H = Buffer("H", (n,), float16)
    B = Buffer("B", (n,), bfloat16)
    M = Buffer("M", (n,), bool_)
    I = Buffer("I", (n,), int32)
    io, v = Var("io"), Var("v", float32.with_lanes(w))
    idx = Ramp(io * w, 1, w)
    wide = cast(Load(A, (idx,)), float32.with_lanes(w)) + cast(Load(H, (idx,)), float32.with_lanes(w))
    root = For(io, 0, n // w, Block([
        Store(B, (idx,), cast(Let(v, wide, v * Broadcast(te.FloatImm(1.5, float32), w)), bfloat16.with_lanes(w))),
        Store(M, (idx,), Load(A, (idx,)) > Broadcast(te.FloatImm(0.0, bfloat16), w)),
        Store(I, (idx,), cast(Load(H, (idx,)), int32.with_lanes(w)))]))
    rng = np.random.default_rng(11)
    data = {"A": (rng.standard_normal(n) * 5).astype(ml_dtypes.bfloat16),
            "H": (rng.standard_normal(n) * 5).astype(np.float16)}
    ref, got, _ = hand_both(root, [A, H], [B, M, I], data)
    assert_same(ref, got, ["B", "M", "I"])


def test_gpu_loops_are_rejected():
    A = Buffer("A", (8,), float32)
    B = Compute("B", (8,), lambda i: A[i])
    nest = LoopNest([B]).prepare_for_codegen()
    nest.root = Block((nest.root.stmts[0].replace(kind=ForKind.GPU_BLOCK, axis=0),))
    with pytest.raises(BuildError, match="GPU"):
        build(nest, [A, B], target="llvm")


# ------------------------------------------------------------------------------------
# source, names, errors
# ------------------------------------------------------------------------------------
def test_source_is_readable_llvm_ir():
    N = Var("N")
    A = Buffer("A", (N, 4), float32)
    B = Compute("B", (N, 4), lambda i, j: A[i, j] + 1.0)
    k = build(LoopNest([B]), [A, B], target="llvm")
    src = k.source
    assert re.search(r'define i32 @"te_B"\(ptr %"A", ptr %"B", i32 %"N"\)', src)
    assert '"i_loop"' in src and '"j_loop"' in src and "fadd contract float" in src
    assert k.optimized_source is not None and "define" in k.optimized_source
    assert k.target == "llvm" and k.name == "B"


def test_user_names_are_sanitised():
    n = Var("n.rows")
    A = Buffer("in.put", (n,), float32)
    B = Compute("out.x", (n,), lambda i: A[i] * 2.0)
    k = build(LoopNest([B]), [A, B], target="llvm")
    for raw in ("n.rows", "in.put", "out.x"):
        assert raw not in k.source
    assert '@"te_out_x"' in k.source and '%"in_put"' in k.source
    a = np.arange(4, dtype=np.float32)
    b = np.zeros(4, np.float32)
    k(a, b)
    assert b.tolist() == (a * 2).tolist()


def test_llvm_rejection_raises_build_error_naming_the_kernel():
    with pytest.raises(BuildError, match=r"kernel mykernel.*"):
        jit.compile_ir("define i32 @f() {\n  ret i64 0\n}\n", "f", "mykernel")
    with pytest.raises(BuildError, match="mykernel"):
        jit.compile_ir("this is not IR", "f", "mykernel")


def test_unbound_variable_raises_build_error():
    A = Buffer("A", (4,), int32)
    B = Buffer("B", (4,), int32)
    i, stray = Var("i"), Var("stray")
    root = For(i, 0, 4, Block([Store(B, (i,), A[i] + stray)]))
    with pytest.raises(BuildError, match="stray"):
        build(HandNest(root, [A], [B]), [A, B], target="llvm")


def test_unknown_option_is_rejected():
    A = Buffer("A", (4,), int32)
    B = Compute("B", (4,), lambda i: A[i])
    with pytest.raises(TypeError):
        build(LoopNest([B]), [A, B], target="llvm", no_such_option=1)
    with pytest.raises(BuildError, match="parallel_runtime"):
        build(LoopNest([B]), [A, B], target="llvm", parallel_runtime="tbb")
    # options of the wrong type are refused by name (a truthy string is not taken as True)
    for opt, bad in (("fast_math", 1), ("opt_level", True), ("opt_level", 4), ("cache", "no"),
                     ("noalias", "no"), ("cache_dir", 42)):
        with pytest.raises(BuildError, match=opt):
            build(LoopNest([B]), [A, B], target="llvm", **{opt: bad})


def test_argument_errors_name_the_argument():
    A = Buffer("A", (4,), float32)
    B = Compute("B", (4,), lambda i: A[i])
    k = build(LoopNest([B]), [A, B], target="llvm")
    with pytest.raises(TypeError, match="A"):
        k(np.zeros(4, np.float64), np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="B"):
        k(np.zeros(4, np.float32), np.zeros(5, np.float32))
    with pytest.raises(TypeError, match="missing argument A"):
        k(B=np.zeros(4, np.float32))


def test_read_only_output_is_refused():
    A = Buffer("A", (4,), float32)
    B = Compute("B", (4,), lambda i: A[i])
    k = build(LoopNest([B]), [A, B], target="llvm")
    out = np.zeros(4, np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        k(np.ones(4, np.float32), out)
    a = np.ones(4, np.float32)
    a.flags.writeable = False                 # inputs may be read-only
    b = np.zeros(4, np.float32)
    k(a, b)
    assert b.tolist() == [1.0] * 4


# ------------------------------------------------------------------------------------
# caches
# ------------------------------------------------------------------------------------
def test_memory_cache_builds_the_same_nest_once():
    A = Buffer("A", (12,), float32)
    B = Compute("B", (12,), lambda i: A[i] * 5.0 - 1.0)
    clear_cache()
    k1 = build(LoopNest([B]), [A, B], target="llvm")
    k2 = build(LoopNest([B]), [A, B], target="llvm")
    s = cache_stats()
    assert s["compiles"] == 1 and s["memory_hits"] == 1
    k3 = build(LoopNest([B]), [A, B], target="llvm", fast_math=True)
    assert cache_stats()["compiles"] == 2 and k3.source != k1.source
    a = np.arange(12, dtype=np.float32)
    b1, b2 = np.zeros(12, np.float32), np.zeros(12, np.float32)
    k1(a, b1)
    k2(a, b2)
    assert np.array_equal(b1, b2) and np.array_equal(b1, a * 5 - 1)


def test_memory_cache_distinguishes_constants_and_dtypes():
    A = Buffer("A", (4,), float32)
    clear_cache()
    outs = []
    for c in (0.0, -0.0):
        B = Compute("B", (4,), lambda i: A[i] * c)
        k = build(LoopNest([B]), [A, B], target="llvm")
        b = np.zeros(4, np.float32)
        k(np.ones(4, np.float32), b)
        outs.append(b)
    assert np.signbit(outs[1]).all() and not np.signbit(outs[0]).any()
    assert cache_stats()["compiles"] == 2
    A16 = Buffer("A", (4,), float16)
    B16 = Compute("B", (4,), lambda i: A16[i] * 0.0)
    k16 = build(LoopNest([B16]), [A16, B16], target="llvm")
    assert cache_stats()["compiles"] == 3 and "half" in k16.source


def test_disk_cache_round_trip(tmp_path):
    A = Buffer("A", (10,), int32)
    B = Compute("B", (10,), lambda i: A[i] * A[i] - 3)
    clear_cache()
    k1 = build(LoopNest([B]), [A, B], target="llvm", cache_dir=tmp_path)
    s1 = cache_stats()
    assert s1["disk_writes"] == 1 and s1["compiles"] == 1
    files = sorted(p.suffix for p in tmp_path.iterdir())
    assert files == [".ll", ".o", ".sha256"]       # object code, optimised IR text and their checksums
    clear_cache()
    k2 = build(LoopNest([B]), [A, B], target="llvm", cache_dir=tmp_path)
    s2 = cache_stats()
    assert s2["disk_hits"] == 1 and s2["compiles"] == 0
    assert k2.optimized_source == k1.optimized_source
    a = np.arange(10, dtype=np.int32)
    b = np.zeros(10, np.int32)
    k2(a, b)
    assert b.tolist() == (a * a - 3).tolist()


def test_disk_cache_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TE_LLVM_CACHE_DIR", str(tmp_path))
    A = Buffer("A", (3,), int16)
    B = Compute("B", (3,), lambda i: A[i] + 7)
    clear_cache()
    build(LoopNest([B]), [A, B], target="llvm")
    assert any(p.suffix == ".o" for p in tmp_path.iterdir())


def test_kernel_call_paths_agree():
    N = Var("N")
    A = Buffer("A", (N, 3), float32)
    B = Compute("B", (N, 3), lambda i, j: A[i, j] + cast(i * 3 + j, float32))
    k = build(LoopNest([B]), [A, B], target="llvm")
    a = np.ones((4, 3), np.float32)
    b1, b2 = np.zeros((4, 3), np.float32), np.zeros((4, 3), np.float32)
    k(a, b1)                                 # fast path
    k(A=a, B=b2)                             # general binding
    assert np.array_equal(b1, b2) and b1.ravel().tolist() == [1.0 + v for v in range(12)]


def test_sizes_passed_with_the_arrays_take_the_fast_path_where_they_match_the_shapes():
    N = Var("N")
    A = Buffer("A", (N, 3), float32)
    B = Compute("B", (N, 3), lambda i, j: A[i, j] * 2.0)
    k = build(LoopNest([B]), [A, B, N], target="llvm")
    a, b = np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32)
    general = []
    original = k._call
    k._call = lambda args, kwargs: general.append(args) or original(args, kwargs)
    k(a, b, 4)
    assert not general and (b == 2.0).all()                 # the size equals a's rows: fast
    with pytest.raises(ValueError, match="dimension 0"):
        k(a, b, 5)                                          # it does not: the general binding reports it
    with pytest.raises(KernelArgumentError, match="must be an int"):
        k(a, b, 4.0)
    k(a, b, np.int64(4))                                    # a numpy int: the general binding, same result
    assert len(general) == 3 and (b == 2.0).all()


def test_inline_float32_exp_is_within_one_ulp_everywhere():
    # exp is emitted inline (vectorisable); check it against float64 over the whole range
    n = 1 << 16
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-110, 95, n), rng.uniform(-2, 2, n), rng.uniform(-104, -85, n // 4),
                        rng.uniform(85, 89, n // 4)]).astype(np.float32)
    x[:10] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72283, 88.72284, -87.33654, -103.97, -103.28]
    got = run_llvm1(te.exp, [float32], [x])
    ref = np.exp(x.astype(np.float64))
    with np.errstate(all="ignore"):
        refr = ref.astype(np.float32)
        finite = np.isfinite(refr)
        err = np.abs(got[finite].astype(np.float64) - ref[finite]) / np.spacing(np.abs(refr[finite]))
    assert err.max() <= 1.0
    assert np.array_equal(np.isinf(got), np.isinf(refr)) and np.array_equal(np.isnan(got), np.isnan(x))
    assert got[2] == 0.0 and got[3] == 1.0
    sig = run_llvm1(te.sigmoid, [float32], [x[10:1000]])
    want = 1 / (1 + np.exp(-x[10:1000].astype(np.float64)))
    assert np.allclose(sig, want, rtol=3e-7, atol=1e-37)   # float32 underflows to 0 below ~1e-38


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_vector_exp_gives_the_scalar_exp_bit_for_bit(lanes):
    """Explicit vectors of float32 take ``vscalefps`` for the scaling by 2**n where the CPU has
    AVX-512 (one instruction instead of nine): the same results, subnormal ones included."""
    n = 1 << 14
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-110, 95, n), rng.uniform(-104, -85, n)]).astype(np.float32)
    x[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72284, -103.97, -87.33654]
    A = Buffer("A", (2 * n,), float32)
    B = Compute("B", (2 * n,), lambda i: te.exp(A[i]))
    want, got = np.zeros_like(x), np.zeros_like(x)
    build(LoopNest([B]), [A, B], target="llvm", opt_level=0)(x, want)
    nest = LoopNest([B])
    _, inner, _ = nest.split_with_tail(nest.get_loops_for(B)[0], lanes)
    nest.vectorize(inner)
    k = build(nest, [A, B], target="llvm")
    k(x, got)
    assert np.array_equal(got.view(np.int32), want.view(np.int32))
    features = jit.host_info()["features"].split(",")
    if "+avx512f" in features and (lanes == 16 or "+avx512vl" in features):
        assert "llvm.x86.avx512.mask.scalef.ps" in k.source


def test_overlapping_arguments_run_the_alias_safe_variant():
    # C[i] = C-or-A[i-1] + A[i]: with C and A the same array, the serial program computes prefix sums
    N = Var("N")
    A = Buffer("A", (N,), float32)
    C = Compute("C", (N,), lambda i: if_then_else(i > 0, A[i - 1], 0.0) + A[i])
    k = build(LoopNest([C]), [A, C], target="llvm")
    kr = build(LoopNest([C]), [A, C], target="ireval")
    assert k.noalias and "noalias" in k.source
    x = np.arange(1, 65, dtype=np.float32)
    y = x.copy()
    k(x, x)                                   # in place
    kr(y, y)
    assert np.array_equal(x, y) and np.array_equal(x, np.cumsum(np.arange(1, 65, dtype=np.float32)))
    a = np.arange(1, 65, dtype=np.float32)
    c = np.zeros(64, np.float32)
    k(a, c)                                   # distinct arrays: the noalias kernel
    assert np.array_equal(c, a + np.concatenate([[0], a[:-1]]))
    big = np.arange(1, 130, dtype=np.float32)
    z = big.copy()
    k(A=big[1:65], C=big[0:64])               # partial overlap, keyword path
    kr(A=z[1:65], C=z[0:64])
    assert np.array_equal(big, z)



def test_the_entry_compares_only_pairs_with_a_written_buffer_and_stays_out_of_the_python_entry():
    A, B = Buffer("A", (64,), float32), Buffer("B", (64,), float32)
    C = Compute("C", (64,), lambda i: A[i] * B[i])
    k = build(LoopNest([C]), [A, B, C], target="llvm", cache=False)
    entry = k.source.split('define i32 @"te_C"(')[1].split("\n}")[0]
    assert entry.count("icmp ult") == 4 and "phi" not in entry   # (A, C) and (B, C), both ways; no loop
    assert "noinline" in k.source.split('define i32 @"te_C"(')[1].splitlines()[0]
    py_entry = k.optimized_source.split("@te_C_py(")[1].split("\n}")[0]
    assert "call" in py_entry and "fmul" not in py_entry       # it calls the kernel, holds no copy of it
    a = np.arange(64, dtype=np.float32)
    c = np.zeros(64, np.float32)
    k(a, a, c)                                # two reads of one array do not alias
    assert np.array_equal(c, a * a)


def test_scheduled_nest_with_split_vectorize_parallelize_matches_ireval():
    N = Var("N")
    A = Buffer("A", (N, 20), float32)
    B = Compute("B", (N, 20), lambda i, j: te.exp(A[i, j]) * 2.0 + cast(j, float32))
    C = Reduce("C", (N,), te.Max(), lambda i, k: B[i, k], (20,))
    nest = LoopNest([C])
    i, j = nest.get_loops_for(B)
    _, ji, _ = nest.split_with_tail(j, 8)
    nest.vectorize(ji)
    nest.parallelize(i)
    data = {"A": np.random.default_rng(2).standard_normal((11, 20)).astype(np.float32)}
    ref, got, k = both(nest, [A, C], data)
    assert_same(ref, got, ["C"], exact=False, ulps=2)
    assert "<8 x float>" in k.source


def test_narrow_integer_index_arithmetic_wraps():
    # T[x + 10] with uint8 x: the index wraps at 256 (spec), even though T is larger
    X = Buffer("X", (4,), uint8)
    T = Buffer("T", (300,), int32)
    B = Compute("B", (4,), lambda i: T[X[i] + 10])
    data = {"X": np.array([0, 245, 250, 255], np.uint8), "T": np.arange(300, dtype=np.int32)}
    ref, got, _ = both(LoopNest([B]), [X, T, B], data)
    assert got["B"].tolist() == [10, 255, 4, 9] and np.array_equal(ref["B"], got["B"])
