"""The TIR semantics, checked on IREval (the executable specification).

Every kernel test runs twice: batched (numpy over whole loop nests) and serial
(``batch=False``, one iteration at a time), which are two independent implementations
of each operation inside IREval.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import te
from codegen import BuildError, build
from codegen.ireval import build_ireval, evaluate
from codegen.kernel import make_params
from loopnest import LoopNest
from loopnest.stmt import Allocate, Block, Cond, For, ForKind, Free, Let as LetStmt, Store
from te import (Broadcast, Buffer, Compute, IfThenElse, IntImm, Let, Load, Ramp, Reduce, Select, Sum, Var,
                bool_, cast, float16, float32, float64, floordiv, floormod, if_then_else, int8, int32, int64,
                logical_and, logical_or, select, truncdiv, truncmod, uint8, uint64)


@pytest.fixture(params=[True, False], ids=["batched", "serial"])
def batch(request) -> bool:
    return request.param


class HandNest:
    """A prepared 'nest' built by hand from statements (for forms lowering does not make yet)."""

    prepared = True

    def __init__(self, root, inputs, outputs, intermediates=()):
        self.root = root if isinstance(root, Block) else Block((root,))
        self.inputs, self.outputs, self.intermediates = list(inputs), list(outputs), list(intermediates)


def hand_kernel(root, inputs, outputs, intermediates=(), **opts):
    nest = HandNest(root, inputs, outputs, intermediates)
    return build_ireval(nest, make_params(nest, list(inputs) + list(outputs)), **opts)


def run1(fn, dtypes, arrays, out_dtype=None, batch=True, **opts):
    """Build ``Out[i] = fn(A0[i], A1[i], ...)`` over 1-D inputs and run it."""
    n = len(arrays[0])
    bufs = [Buffer(f"A{k}", (n,), dt) for k, dt in enumerate(dtypes)]
    out = Compute("Out", (n,), lambda i: fn(*[b[i] for b in bufs]), dtype=out_dtype)
    k = build(LoopNest([out]), bufs + [out], target="ireval", batch=batch, **opts)
    res = np.zeros(n, out.dtype.numpy)
    k(*arrays, res)
    return res


# ------------------------------------------------------------------------------------
# integer division and modulo
# ------------------------------------------------------------------------------------
def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


PAIRS = [(7, 2), (-7, 2), (7, -2), (-7, -2), (-8, 3), (8, -3), (0, -5), (-1, 7), (6, 3), (-6, 3)]


@pytest.mark.parametrize("dt", [int8, int32, int64])
def test_c_and_floor_division_on_negative_operands(dt, batch):
    lo = dt.min_value()
    pairs = PAIRS + [(lo, -1), (lo, 1), (lo, 7), (dt.max_value(), -3)]
    a = np.array([p[0] for p in pairs], dt.numpy)
    b = np.array([p[1] for p in pairs], dt.numpy)
    for op, ref in [(truncdiv, lambda x, y: wrap(c_div(x, y), dt.bits)),
                    (truncmod, lambda x, y: x - y * c_div(x, y)),
                    (floordiv, lambda x, y: wrap(x // y, dt.bits)),
                    (floormod, lambda x, y: x % y)]:
        got = run1(op, [dt, dt], [a, b], batch=batch)
        want = [ref(x, y) for x, y in pairs]
        assert got.tolist() == want, op.__name__


def test_division_examples_from_the_spec(batch):
    a = np.array([5, -5, 5, -5], np.int32)
    b = np.array([2, 2, -2, -2], np.int32)
    assert run1(lambda x, y: x / y, [int32, int32], [a, b], batch=batch).tolist() == [2, -2, -2, 2]
    assert run1(lambda x, y: x % y, [int32, int32], [a, b], batch=batch).tolist() == [1, -1, 1, -1]
    assert run1(lambda x, y: x // y, [int32, int32], [a, b], batch=batch).tolist() == [2, -3, -3, 2]
    assert run1(floormod, [int32, int32], [a, b], batch=batch).tolist() == [1, 1, -1, -1]


@pytest.mark.parametrize("op, want", [(truncdiv, [4, 0, 3, -2**31]), (truncmod, [0, 0, 0, 0]),
                                      (floordiv, [4, 0, 3, -2**31]), (floormod, [0, 0, 0, 0])])
def test_integer_division_by_zero_is_zero_and_int_min_by_minus_one_wraps(op, want, batch):
    a = np.array([4, 5, 6, -2**31], np.int32)
    b = np.array([1, 0, 2, -1], np.int32)
    assert run1(op, [int32, int32], [a, b], batch=batch).tolist() == want


def test_unsigned_division(batch):
    a = np.array([2**64 - 1, 7, 2**63], np.uint64)
    b = np.array([2, 2, 3], np.uint64)
    assert run1(lambda x, y: x / y, [uint64, uint64], [a, b], batch=batch).tolist() == \
        [(2**64 - 1) // 2, 3, 2**63 // 3]
    assert run1(lambda x, y: x % y, [uint64, uint64], [a, b], batch=batch).tolist() == [1, 1, 2**63 % 3]


def test_float_floordiv_and_floormod(batch):
    a = np.array([-7.0, 7.0, -7.5], np.float32)
    b = np.array([2.0, -2.0, 2.0], np.float32)
    assert run1(floordiv, [float32, float32], [a, b], batch=batch).tolist() == [-4.0, -4.0, -4.0]
    assert run1(floormod, [float32, float32], [a, b], batch=batch).tolist() == [1.0, -1.0, 0.5]


# ------------------------------------------------------------------------------------
# wrap-around
# ------------------------------------------------------------------------------------
def test_int32_wraps_around(batch):
    a = np.array([2147483647, -2147483648, 65536, 46341], np.int32)
    assert run1(lambda x: x + 1, [int32], [a], batch=batch).tolist() == [-2147483648, -2147483647, 65537, 46342]
    assert run1(lambda x: x - 1, [int32], [a], batch=batch).tolist() == [2147483646, 2147483647, 65535, 46340]
    assert run1(lambda x: x * x, [int32], [a], batch=batch).tolist() == \
        [wrap(v * v, 32) for v in a.tolist()]


def test_int64_and_int8_wrap(batch):
    a = np.array([2**63 - 1, -2**63], np.int64)
    assert run1(lambda x: x + 1, [int64], [a], batch=batch).tolist() == [-2**63, -2**63 + 1]
    b = np.array([100, -100, 127], np.int8)
    assert run1(lambda x: x + x, [int8], [b], batch=batch).tolist() == [-56, 56, -2]


def test_uint8_wraps_around(batch):
    a = np.array([250, 0, 255, 16], np.uint8)
    assert run1(lambda x: x + 10, [uint8], [a], batch=batch).tolist() == [4, 10, 9, 26]
    assert run1(lambda x: x - 1, [uint8], [a], batch=batch).tolist() == [249, 255, 254, 15]
    assert run1(lambda x: x * 16, [uint8], [a], batch=batch).tolist() == [160, 0, 240, 0]


def test_uint64_arithmetic_and_comparison_above_2_63(batch):
    a = np.array([2**63 + 5, 2**64 - 1], np.uint64)
    assert run1(lambda x: x + 1, [uint64], [a], batch=batch).tolist() == [2**63 + 6, 0]
    got = run1(lambda x: x > np.uint64(2**63), [uint64], [a], batch=batch)
    assert got.tolist() == [True, True]


def test_integer_abs_wraps_at_int_min(batch):
    a = np.array([-2**31, -5, 7], np.int32)
    assert run1(te.abs, [int32], [a], batch=batch).tolist() == [-2**31, 5, 7]


# ------------------------------------------------------------------------------------
# casts
# ------------------------------------------------------------------------------------
def test_float_to_int_truncates_toward_zero_and_saturates(batch):
    a = np.array([-2.7, 2.7, -0.5, 0.99, np.nan, 1e10, -1e10, np.inf, -np.inf, 2147483520.0], np.float32)
    got = run1(lambda x: cast(x, int32), [float32], [a], batch=batch)
    assert got.tolist() == [-2, 2, 0, 0, 0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 2147483520]
    got8 = run1(lambda x: cast(x, uint8), [float32], [np.array([-0.5, 300.0, 255.9, -3.0], np.float32)],
                batch=batch)
    assert got8.tolist() == [0, 255, 255, 0]


def test_float64_to_int64(batch):
    a = np.array([-2.5e18, 9.3e18, -1.5], np.float64)
    got = run1(lambda x: cast(x, int64), [float64], [a], batch=batch)
    assert got.tolist() == [-2500000000000000000, 2**63 - 1, -1]


def test_int_to_int_casts_wrap(batch):
    a = np.array([300, -1, 128, -129], np.int32)
    assert run1(lambda x: cast(x, int8), [int32], [a], batch=batch).tolist() == [44, -1, -128, 127]
    assert run1(lambda x: cast(x, uint8), [int32], [a], batch=batch).tolist() == [44, 255, 128, 127]
    b = np.array([-1, 5], np.int8)
    assert run1(lambda x: cast(x, uint64), [int8], [b], batch=batch).tolist() == [2**64 - 1, 5]


def test_int_to_float_rounds_to_nearest_once(batch):
    a = np.array([16777217, 16777219, -16777217], np.int32)
    assert run1(lambda x: cast(x, float32), [int32], [a], batch=batch).tolist() == \
        [16777216.0, 16777220.0, -16777216.0]
    # float32 rounding straight from int64 (rounding through float64 first would give 2**53)
    big = np.array([2**53 + 2**29 + 1], np.int64)
    assert run1(lambda x: cast(x, float32), [int64], [big], batch=batch).tolist() == [float(2**53 + 2**30)]
    # bfloat16 from int64: a single rounding (float64 first would round the tie to even, 2**60)
    bb = np.array([2**60 + 2**52 + 1, 2**60 + 2**52, -(2**60 + 2**52 + 1)], np.int64)
    got = run1(lambda x: cast(x, te.bfloat16), [int64], [bb], batch=batch)
    assert got.astype(np.float64).tolist() == [2.0**60 + 2**53, 2.0**60, -(2.0**60 + 2**53)]
    h = np.array([2049, 2051, 70000, -3], np.int32)
    assert run1(lambda x: cast(x, float16), [int32], [h], batch=batch).astype(np.float64).tolist() == \
        [2048.0, 2052.0, math.inf, -3.0]


def test_bool_casts(batch):
    f = np.array([0.5, 0.0, -0.0, np.nan, -3.0], np.float32)
    assert run1(lambda x: cast(x, bool_), [float32], [f], batch=batch).tolist() == [True, False, False, True, True]
    i = np.array([7, 0, -1], np.int32)
    assert run1(lambda x: cast(x, bool_), [int32], [i], batch=batch).tolist() == [True, False, True]
    b = np.array([True, False], np.bool_)
    assert run1(lambda x: cast(x, int32), [bool_], [b], batch=batch).tolist() == [1, 0]
    assert run1(lambda x: cast(x, float32), [bool_], [b], batch=batch).tolist() == [1.0, 0.0]


def test_float_to_float_casts_round_once(batch):
    x = np.array([1 + 2.0**-8 + 2.0**-30, 70000.0, 1e-30], np.float64)
    got = run1(lambda v: cast(v, te.bfloat16), [float64], [x], batch=batch)
    assert got.astype(np.float64).tolist()[0] == 1.0078125        # not 1.0 (no double rounding)
    h = run1(lambda v: cast(v, float16), [float64], [x], batch=batch).astype(np.float64)
    assert h[1] == math.inf and h[2] == 0.0
    e4 = run1(lambda v: cast(v, te.float8_e4m3), [float64], [np.array([1000.0, -1e9, np.nan])], batch=batch)
    assert e4.astype(np.float64).tolist() == [448.0, -448.0, 448.0]      # saturating, NaN -> +448


# ------------------------------------------------------------------------------------
# float precision
# ------------------------------------------------------------------------------------
def test_float32_arithmetic_rounds_in_float32(batch):
    a = np.array([16777216.0], np.float32)
    assert run1(lambda x: x + 1.0, [float32], [a], batch=batch).tolist() == [16777216.0]
    b = np.array([16777216.0], np.float64)
    assert run1(lambda x: x + 1.0, [float64], [b], batch=batch).tolist() == [16777217.0]
    c = np.array([0.1], np.float32)
    got = run1(lambda x: x * 3.0 - 0.3, [float32], [c], batch=batch)
    assert got[0] == np.float32(np.float32(0.1) * np.float32(3.0)) - np.float32(0.3)


def test_float16_and_bfloat16_round_after_every_operation(batch):
    a = np.array([2048.0, 1.0, 0.1], np.float16)
    got = run1(lambda x: (x + 1.0) + 1.0, [float16], [a], batch=batch)
    want = [(np.float16(np.float32(np.float16(np.float32(v) + 1)) + 1)) for v in a]
    assert got.tolist() == [float(w) for w in want]
    assert got[0] == 2048.0                         # each +1 is lost in float16
    bf = np.array([256.0, 1.0], ml_dtypes.bfloat16)
    gb = run1(lambda x: x + 1.0 + 1.0, [te.bfloat16], [bf], batch=batch)
    assert gb.astype(np.float32).tolist() == [256.0, 3.0]


def test_float8_e4m3_arithmetic_saturates(batch):
    a = np.array([448.0, 1.0], ml_dtypes.float8_e4m3fn)
    got = run1(lambda x: x + x, [te.float8_e4m3], [a], batch=batch)
    assert got.astype(np.float32).tolist() == [448.0, 2.0]


def test_tf32_arithmetic_rounds_to_10_mantissa_bits(batch):
    a = np.array([1.0, 3.0], np.float32)
    got = run1(lambda x: x + 2.0**-11, [te.tf32], [a], batch=batch)
    assert got.tolist() == [1.0, 3.0]        # 1 + 2**-11 is a tie in tf32: rounds to even


def test_float16_sum_reduction_rounds_each_step(batch):
    vals = np.full(3000, 1.0, np.float16)
    A = Buffer("A", (3000,), float16)
    C = Reduce("C", (1,), Sum(), lambda i, k: A[k], (3000,))
    k = build(LoopNest([C]), [A, C], batch=batch)
    c = np.zeros(1, np.float16)
    k(vals, c)
    assert c[0] == 2048.0                  # 2048 + 1 == 2048 in float16


def test_min_max_propagate_nan(batch):
    a = np.array([np.nan, 1.0, 2.0], np.float32)
    b = np.array([1.0, np.nan, 1.0], np.float32)
    mx = run1(te.maximum, [float32, float32], [a, b], batch=batch)
    mn = run1(te.minimum, [float32, float32], [a, b], batch=batch)
    assert np.isnan(mx[:2]).all() and mx[2] == 2.0
    assert np.isnan(mn[:2]).all() and mn[2] == 1.0


# ------------------------------------------------------------------------------------
# select / if_then_else / and / or / let
# ------------------------------------------------------------------------------------
def test_select_evaluates_both_sides_if_then_else_only_the_taken_one(batch):
    a = np.array([6, 7, 8], np.int32)
    b = np.array([2, 0, 4], np.int32)
    A = Buffer("A", (8,), int32)
    B = Compute("B", (8,), lambda i: select(i < 7, A[i + 1], -1))
    with pytest.raises((IndexError, ValueError, BuildError)):   # A[8] is read although not selected
        build(LoopNest([B]), [A, B], batch=batch)(np.arange(8, dtype=np.int32), np.zeros(8, np.int32))
    got = run1(lambda x, y: if_then_else(y.ne(0), x / y, -1), [int32, int32], [a, b], batch=batch)
    assert got.tolist() == [3, -1, 2]


def test_if_then_else_guards_an_out_of_bounds_load(batch):
    A = Buffer("A", (8,), int32)
    B = Compute("B", (8,), lambda i: if_then_else(i < 7, A[i + 1], -1))
    k = build(LoopNest([B]), [A, B], batch=batch)
    b = np.zeros(8, np.int32)
    k(np.arange(8, dtype=np.int32) * 10, b)
    assert b.tolist() == [10, 20, 30, 40, 50, 60, 70, -1]
    C = Compute("C", (8,), lambda i: select(i < 7, A[i + 1], -1))
    k2 = build(LoopNest([C]), [A, C], batch=batch, bounds_check=False)   # IREval's own check, at run time
    with pytest.raises(IndexError, match=r"A.*index 8.*\[0, 8\)"):
        k2(np.arange(8, dtype=np.int32), b)


def test_out_of_bounds_accesses_raise_and_never_wrap(batch):
    A = Buffer("A", (8,), float32)
    B = Compute("B", (8,), lambda i: A[i - 1])
    k = build(LoopNest([B]), [A, B], batch=batch, bounds_check=False)   # IREval's own check, at run time
    b = np.full(8, 7.0, np.float32)
    with pytest.raises(IndexError, match=r"load from A: flat element index -1"):
        k(np.arange(8, dtype=np.float32), b)
    i = Var("i")
    S = hand_kernel(For(i, 0, 8, Block([Store(A, (i * 2,), 1.0)])), [], [A], batch=batch)
    with pytest.raises(IndexError, match=r"store to A: flat element index 8"):
        S(np.zeros(8, np.float32))


def test_and_or_short_circuit(batch):
    A = Buffer("A", (8,), int32)
    B = Compute("B", (8,), lambda i: select(logical_and(i < 7, A[i + 1] > 3), 1, 0))
    C = Compute("C", (8,), lambda i: select(logical_or(i >= 7, A[i + 1] > 3), 1, 0))
    k = build(LoopNest([B, C]), [A, B, C], batch=batch)
    b, c = np.zeros(8, np.int32), np.zeros(8, np.int32)
    k(np.arange(8, dtype=np.int32), b, c)
    assert b.tolist() == [0, 0, 0, 1, 1, 1, 1, 0]
    assert c.tolist() == [0, 0, 0, 1, 1, 1, 1, 1]


def test_let_binds_and_scopes(batch):
    A = Buffer("A", (5,), float32)
    B = Buffer("B", (5,), float32)
    x, i = Var("x", float32), Var("i")
    # built by hand: loopnest.verify does not yet know expression-level Let bindings
    k = hand_kernel(For(i, 0, 5, Block([Store(B, (i,), Let(x, Load(A, (i,)) * 2.0, x + x * x))])), [A], [B],
                    batch=batch)
    a = np.arange(5, dtype=np.float32)
    b = np.zeros(5, np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, 2 * a + (2 * a) ** 2)
    y = Var("y")
    shadow = Let(y, 1, Let(y, 2, y) + y)      # inner y is 2, outer y is still 1 afterwards
    assert int(evaluate(shadow)) == 3


def test_let_statement(batch):
    A = Buffer("A", (6,), int32)
    B = Buffer("B", (6,), int32)
    i, t = Var("i"), Var("t")
    root = For(i, 0, 6, Block([LetStmt(t, A[i] * 3, Block([Store(B, (i,), t + t)]))]))
    k = hand_kernel(root, [A], [B], batch=batch)
    b = np.zeros(6, np.int32)
    k(np.arange(6, dtype=np.int32), b)
    assert b.tolist() == [6 * v for v in range(6)]


def test_evaluate_helper_wraps_like_kernels():
    x = Var("x", int8)
    assert int(evaluate((x + 100) / 3, {x: 100})) == -18
    assert int(evaluate(floormod(x, 3), {x: -7})) == 2
    assert bool(evaluate(x < 5, {x: -128}))


# ------------------------------------------------------------------------------------
# intrinsics
# ------------------------------------------------------------------------------------
def _erf64(x):
    return np.vectorize(math.erf)(x)


INTRINSICS = {
    "exp": (te.exp, np.exp, (-5, 5)), "exp2": (te.exp2, np.exp2, (-5, 5)),
    "log": (te.log, np.log, (0.01, 50)), "log2": (te.log2, np.log2, (0.01, 50)),
    "sqrt": (te.sqrt, np.sqrt, (0, 50)), "rsqrt": (te.rsqrt, lambda x: 1 / np.sqrt(x), (0.01, 50)),
    "tanh": (te.tanh, np.tanh, (-4, 4)), "sigmoid": (te.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-8, 8)),
    "abs": (te.abs, np.abs, (-5, 5)), "floor": (te.floor, np.floor, (-5, 5)),
    "ceil": (te.ceil, np.ceil, (-5, 5)), "round": (te.round, np.rint, (-5, 5)),
    "sin": (te.sin, np.sin, (-4, 4)), "cos": (te.cos, np.cos, (-4, 4)), "erf": (te.erf, _erf64, (-3, 3)),
}


@pytest.mark.parametrize("name", sorted(INTRINSICS))
@pytest.mark.parametrize("dt", [float32, float64])
def test_intrinsics_match_numpy_float64(name, dt, batch):
    fn, ref, (lo, hi) = INTRINSICS[name]
    rng = np.random.default_rng(len(name))
    x = rng.uniform(lo, hi, 257).astype(dt.numpy)
    got = run1(fn, [dt], [x], batch=batch)
    want = ref(x.astype(np.float64))
    tol = 2e-6 if dt is float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    assert got.dtype == dt.numpy


def test_pow_and_isnan(batch):
    x = np.array([2.0, 9.0, 0.5, np.nan], np.float32)
    y = np.array([3.0, 0.5, -2.0, 1.0], np.float32)
    got = run1(te.pow, [float32, float32], [x, y], batch=batch)
    np.testing.assert_allclose(got[:3], [8.0, 3.0, 4.0], rtol=1e-6)
    assert run1(te.isnan, [float32], [x], batch=batch).tolist() == [False, False, False, True]


def test_round_is_half_to_even(batch):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4999998], np.float32)
    assert run1(te.round, [float32], [x], batch=batch).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 2.0]


def test_float16_intrinsics_round_to_float16(batch):
    x = np.linspace(-3, 3, 50).astype(np.float16)
    got = run1(te.exp, [float16], [x], batch=batch)
    want = np.exp(x.astype(np.float32)).astype(np.float16)      # computed in float32, rounded once
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------------
# vectors: Ramp / Broadcast loads and stores (built by hand)
# ------------------------------------------------------------------------------------
def test_vector_ramp_broadcast_load_store(batch):
    A = Buffer("A", (16,), float32)
    B = Buffer("B", (16,), float32)
    io = Var("io")
    idx = Ramp(io * 4, 1, 4)
    value = Load(A, (idx,)) * Broadcast(te.FloatImm(2.0, float32), 4) + 1.0
    k = hand_kernel(For(io, 0, 4, Block([Store(B, (idx,), value)])), [A], [B], batch=batch)
    a = np.arange(16, dtype=np.float32)
    b = np.zeros(16, np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)


def test_vector_gather_and_scatter(batch):
    A = Buffer("A", (16,), int32)
    B = Buffer("B", (16,), int32)
    io = Var("io")
    gather = Store(B, (Ramp(io * 4, 1, 4),), Load(A, (Ramp(io, 4, 4),)))       # B[4r+c] = A[4c+r]
    k = hand_kernel(For(io, 0, 4, Block([gather])), [A], [B], batch=batch)
    a = np.arange(16, dtype=np.int32)
    b = np.zeros(16, np.int32)
    k(a, b)
    assert b.reshape(4, 4).tolist() == a.reshape(4, 4).T.tolist()
    scatter = Store(B, (Ramp(io, 4, 4),), Load(A, (Ramp(io * 4, 1, 4),)))
    b2 = np.zeros(16, np.int32)
    hand_kernel(For(io, 0, 4, Block([scatter])), [A], [B], batch=batch)(a, b2)
    assert b2.reshape(4, 4).tolist() == a.reshape(4, 4).T.tolist()


def test_vector_if_then_else_does_not_load_untaken_lanes(batch):
    n = 10
    A = Buffer("A", (n,), float32)
    B = Buffer("B", (12,), float32)
    io = Var("io")
    lanes = Ramp(io * 4, 1, 4)
    guarded = IfThenElse(lanes < Broadcast(IntImm(n), 4), Load(A, (lanes,)), Broadcast(te.FloatImm(-1.0), 4))
    k = hand_kernel(For(io, 0, 3, Block([Store(B, (lanes,), guarded)])), [A], [B], batch=batch)
    a = np.arange(n, dtype=np.float32) + 1
    b = np.zeros(12, np.float32)
    k(a, b)
    assert b.tolist() == list(a) + [-1.0, -1.0]
    unguarded = Select(lanes < Broadcast(IntImm(n), 4), Load(A, (lanes,)), Broadcast(te.FloatImm(-1.0), 4))
    k2 = hand_kernel(For(io, 0, 3, Block([Store(B, (lanes,), unguarded)])), [A], [B], batch=batch)
    with pytest.raises(IndexError, match=r"A: flat element index 10"):
        k2(a, b)


def test_scalar_condition_with_vector_branches(batch):
    A = Buffer("A", (8,), int32)
    B = Buffer("B", (8,), int32)
    io = Var("io")
    lanes = Ramp(io * 4, 1, 4)
    v = IfThenElse(io < 1, Load(A, (lanes,)), Broadcast(IntImm(0), 4) - Load(A, (lanes,)))
    s = Select(io < 1, Load(A, (lanes,)) * 2, Load(A, (lanes,)))
    root = For(io, 0, 2, Block([Store(B, (lanes,), v + s)]))
    b = np.zeros(8, np.int32)
    hand_kernel(root, [A], [B], batch=batch)(np.arange(8, dtype=np.int32), b)
    assert b.tolist() == [0, 3, 6, 9, 0, 0, 0, 0]


def test_vector_let_and_cast(batch):
    A = Buffer("A", (8,), int32)
    B = Buffer("B", (8,), float32)
    io = Var("io")
    lanes = Ramp(io * 4, 1, 4)
    x = Var("x", te.Dtype("int", 32, 4))
    val = Let(x, Load(A, (lanes,)) * 3, cast(x + x, float32))
    root = For(io, 0, 2, Block([Store(B, (lanes,), val)]))
    b = np.zeros(8, np.float32)
    hand_kernel(root, [A], [B], batch=batch)(np.arange(8, dtype=np.int32), b)
    assert b.tolist() == [6.0 * v for v in range(8)]


# ------------------------------------------------------------------------------------
# loops, allocations
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ForKind.ALL)
def test_every_loop_kind_runs_like_a_serial_loop(kind, batch):
    A = Buffer("A", (6, 5), float32)
    B = Buffer("B", (6, 5), float32)
    i, j = Var("i"), Var("j")
    axis = 0 if kind in (ForKind.GPU_BLOCK, ForKind.GPU_THREAD) else None
    inner = For(j, 0, 5, Block([Store(B, (i * 5 + j,), Load(A, (i * 5 + j,)) * 3.0 - 1.0)]), kind, axis)
    k = hand_kernel(For(i, 0, 6, Block([inner]), kind, axis), [A], [B], batch=batch)
    a = np.random.default_rng(0).random((6, 5), dtype=np.float32)
    b = np.zeros((6, 5), np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, a * np.float32(3) - np.float32(1))


def test_intermediate_allocate_and_free(batch):
    A = Buffer("A", (4, 5), float32)
    T = Compute("T", (4, 5), lambda i, j: A[i, j] * A[i, j])
    C = Compute("C", (4,), lambda i: T[i, 0] + T[i, 4])
    nest = LoopNest([C]).prepare_for_codegen()
    assert "alloc" in str(nest) and "free(T)" in str(nest)
    k = build(nest, [A, C], batch=batch, poison=True)
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    c = np.zeros(4, np.float32)
    k(a, c)
    np.testing.assert_array_equal(c, a[:, 0] ** 2 + a[:, 4] ** 2)


@pytest.mark.parametrize("poison", [False, True])
def test_reading_uninitialised_memory_is_visible_with_poison(poison, batch):
    T = Buffer("T", (4,), float32)
    Ti = Buffer("Ti", (4,), int32)
    B = Buffer("B", (4,), float32)
    Bi = Buffer("Bi", (4,), int32)
    i = Var("i")
    root = Block([Allocate(T), Allocate(Ti),
                  For(i, 0, 4, Block([Store(B, (i,), Load(T, (i,))), Store(Bi, (i,), Load(Ti, (i,)))])),
                  Free(T), Free(Ti)])
    b, bi = np.full(4, 5.0, np.float32), np.full(4, 5, np.int32)
    hand_kernel(root, [], [B, Bi], [T, Ti], poison=poison, batch=batch)(b, bi)
    if poison:
        assert np.isnan(b).all() and (bi.view(np.uint32) == 0xCDCDCDCD).all()
    else:
        assert (b == 0).all() and (bi == 0).all()


def test_access_after_free_raises(batch):
    T = Buffer("T", (4,), float32)
    B = Buffer("B", (4,), float32)
    i = Var("i")
    root = Block([Allocate(T), Free(T), For(i, 0, 4, Block([Store(B, (i,), Load(T, (i,)))]))])
    with pytest.raises(RuntimeError, match="T is accessed outside its allocation"):
        hand_kernel(root, [], [B], [T], batch=batch)(np.zeros(4, np.float32))


def test_cond_statement_with_else(batch):
    A = Buffer("A", (10,), int32)
    B = Buffer("B", (10,), int32)
    i = Var("i")
    root = For(i, 0, 10, Block([Cond(i % 3 < 1, Block([Store(B, (i,), Load(A, (i,)) * 10)]),
                                     Block([Store(B, (i,), IntImm(0) - Load(A, (i,)))]))]))
    b = np.zeros(10, np.int32)
    hand_kernel(root, [A], [B], batch=batch)(np.arange(10, dtype=np.int32), b)
    assert b.tolist() == [v * 10 if v % 3 == 0 else -v for v in range(10)]


def test_guarded_split_loop_does_not_touch_the_padding(batch):
    """The split_with_mask form: the guard hides iterations past the end."""
    n = 13
    A = Buffer("A", (n,), float32)
    B = Buffer("B", (n,), float32)
    io, ii = Var("io"), Var("ii")
    body = Cond(io * 4 + ii < n, Block([Store(B, (io * 4 + ii,), Load(A, (io * 4 + ii,)) + 1.0)]))
    root = For(io, 0, 4, Block([For(ii, 0, 4, Block([body]))]))
    b = np.zeros(n, np.float32)
    hand_kernel(root, [A], [B], batch=batch)(np.arange(n, dtype=np.float32), b)
    np.testing.assert_array_equal(b, np.arange(n, dtype=np.float32) + 1)
