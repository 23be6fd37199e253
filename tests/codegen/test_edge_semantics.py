"""Every edge case of docs/semantics.md, on every backend, against IREval and an independent
reference: integer division and remainder by zero and INT_MIN / -1, signed zeros and NaN in
maximum / minimum (IEEE 754-2019) and in comparisons, out-of-range float -> int casts, float16 overflow, and
flat indices past 2^31 elements."""
from __future__ import annotations

import math

import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest
from te import Buffer, Compute, cast, float16, float32, floordiv, floormod, int8, int32, maximum, minimum, uint32

from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host

HAVE_EMU = host_compiler() is not None and nvcc_available()   # the emulation needs the CUDA headers

TARGETS = ["ireval", "llvm"] + (["cuda"] if HAVE_EMU else [])
I32_MIN = np.iinfo(np.int32).min
NAN = np.nan


def _run(target: str, fn, inputs: list[np.ndarray], out_dtype) -> np.ndarray:
    """``fn`` of the inputs, element by element, compiled for ``target``."""
    n = len(inputs[0])
    bufs = [Buffer(f"X{k}", (n,), a.dtype.name) for k, a in enumerate(inputs)]
    out = Compute("Out", (n,), lambda i: fn(*[b[i] for b in bufs]), dtype=out_dtype)
    kernel = build(LoopNest([out]), bufs + [out], target=target)
    res = np.zeros(n, out.dtype.numpy)
    if target == "cuda":
        run_on_host(kernel, *inputs, res)
    else:
        kernel(*inputs, res)
    return res


def _trunc_div(a: int, b: int) -> int:
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


A_INT = [7, -7, I32_MIN, 5, I32_MIN, -9, 0]
B_INT = [0, 0, -1, 2, 0, -2, -1]
INT_CASES = {   # name -> (expression, numpy reference on Python ints)
    "div": (lambda x, y: x / y, lambda a, b: _wrap32(_trunc_div(a, b))),
    "mod": (lambda x, y: x % y, lambda a, b: 0 if b == 0 else _wrap32(a - b * _trunc_div(a, b))),
    "floordiv": (floordiv, lambda a, b: 0 if b == 0 else _wrap32(a // b)),
    "floormod": (floormod, lambda a, b: 0 if b == 0 else a % b),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(INT_CASES))
def test_integer_division_by_zero_is_zero_and_int_min_by_minus_one_wraps(target, case):
    expr, ref = INT_CASES[case]
    a, b = np.array(A_INT, np.int32), np.array(B_INT, np.int32)
    want = [ref(x, y) for x, y in zip(A_INT, B_INT)]
    assert _run(target, expr, [a, b], int32).tolist() == want
    assert _run("ireval", expr, [a, b], int32).tolist() == want


@pytest.mark.parametrize("target", TARGETS)
def test_unsigned_and_narrow_division_by_zero(target):
    a, b = np.array([7, 2**32 - 1, 9], np.uint32), np.array([0, 2, 0], np.uint32)
    assert _run(target, lambda x, y: x / y, [a, b], uint32).tolist() == [0, 2**31 - 1, 0]
    assert _run(target, lambda x, y: x % y, [a, b], uint32).tolist() == [0, 1, 0]
    c, d = np.array([-128, 100, -128], np.int8), np.array([-1, 0, 3], np.int8)
    assert _run(target, lambda x, y: x / y, [c, d], int8).tolist() == [-128, 0, -42]


def _ieee(fn, a: float, b: float) -> float:
    """IEEE 754-2019 maximum / minimum, written out: NaN propagates, -0.0 < +0.0."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b:
        neg_a = math.copysign(1.0, a) < 0
        if fn is maximum:
            return b if neg_a else a
        return a if neg_a else b
    return max(a, b) if fn is maximum else min(a, b)


@pytest.mark.parametrize("target", TARGETS)
def test_maximum_minimum_are_ieee_on_signed_zeros_and_nan(target):
    x = np.array([0.0, -0.0, 1.0, NAN, NAN, 2.0, -1.0, -0.0, 0.0], np.float32)
    y = np.array([-0.0, 0.0, NAN, 1.0, NAN, 2.0, -2.0, -0.0, 0.0], np.float32)
    for fn in (maximum, minimum):
        got = _run(target, fn, [x, y], float32)
        want = [_ieee(fn, float(a), float(b)) for a, b in zip(x, y)]
        assert [repr(float(v)) for v in got] == [repr(v) for v in want], fn.__name__
        # a constant operand takes the same rule (relu-style max(x, 0.0))
        got0 = _run(target, lambda v: fn(v, -0.0), [x], float32)
        assert [repr(float(v)) for v in got0] == [repr(_ieee(fn, float(a), -0.0)) for a in x]


@pytest.mark.parametrize("target", TARGETS)
def test_comparisons_with_nan_are_false_except_not_equal(target):
    x = np.array([NAN, 1.0, NAN, -0.0], np.float32)
    y = np.array([1.0, NAN, NAN, 0.0], np.float32)
    for op, ref in ((lambda a, b: a < b, np.less), (lambda a, b: a >= b, np.greater_equal),
                    (lambda a, b: a.eq(b), np.equal), (lambda a, b: a.ne(b), np.not_equal)):
        got = _run(target, lambda a, b: cast(op(a, b), int32), [x, y], int32)
        assert got.tolist() == ref(x, y).astype(np.int32).tolist()


@pytest.mark.parametrize("target", TARGETS)
def test_float_to_int_casts_truncate_and_saturate_nan_is_zero(target):
    x = np.array([2.7, -2.7, 3e9, -3e9, NAN, np.inf, -np.inf, 200.5], np.float32)
    want32 = [2, -2, 2**31 - 1, -2**31, 0, 2**31 - 1, -2**31, 200]
    assert _run(target, lambda v: cast(v, int32), [x], int32).tolist() == want32
    want8 = [2, -2, 127, -128, 0, 127, -128, 127]
    assert _run(target, lambda v: cast(v, int8), [x], int8).tolist() == want8


@pytest.mark.parametrize("target", TARGETS)
def test_float16_overflows_to_infinity(target):
    x = np.array([60000.0, 70000.0, -70000.0, 65519.0], np.float32)
    got = _run(target, lambda v: cast(v, float16) + cast(v, float16), [x], float16)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16) + x.astype(np.float16)
    assert got.tolist() == want.tolist()


def test_flat_index_past_two_to_the_31_elements():
    """A 43000 x 50000 int8 buffer: the flat index 2,149,999,998 does not fit int32."""
    A = Buffer("A", (43000, 50000), int8)
    B = Compute("B", (2,), lambda i: A[42999, 49998 + i])
    a = np.zeros((43000, 50000), np.int8)       # zero pages: only the touched page is written
    a[42999, 49998:] = [5, 7]
    for target in ("ireval", "llvm"):
        b = np.zeros(2, np.int8)
        build(LoopNest([B]), [A, B], target=target)(a, b)
        assert b.tolist() == [5, 7], target
    src = build(LoopNest([B]), [A, B], target="cuda").source
    assert "b_A[(((long long)(v_i)) + 2149999998LL)]" in src
