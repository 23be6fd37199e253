"""Vector element types (hidet's f16x2, f32x4, i8x4, ...) on IREval and LLVM, against numpy.

The model: a buffer of dtype ``float32x4`` and shape ``(n,)`` holds ``n`` vector elements;
its numpy array has shape ``(n, 4)`` and dtype float32 (the lanes are a trailing axis, stored
contiguously). ``A[i]`` loads a float32x4 value, arithmetic on vector values is lane-wise,
a Compute whose body is a vector makes a tensor of vector elements, and casts between vector
types of equal lanes convert each lane. Every test runs on both CPU backends (the
``backend`` fixture); tests/gpu reruns them on the CUDA backend, and
tests/codegen/test_cuda_vector_types.py in its host emulation.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import te
from codegen import build
from loopnest import LoopNest
from loopnest.stmt import Block, For, Store
from te import (Broadcast, Buffer, Compute, Load, Ramp, Reduce, Sum, Var, cast, if_then_else, maximum,
                select, truncdiv, truncmod)
from te.layout import column_major
from te.lowprec import convert, float_to_int

RNG = np.random.default_rng(7)



def assert_float32_results(backend, got, want):
    """Bit for bit on the CPU backends; on CUDA within an ulp or so, since nvcc contracts a
    multiply and an add into one FMA (codegen.cuda.compile: the documented contract)."""
    if backend == "cuda":
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)

def run(nest_or_tensors, args, inputs: dict, backend: str, **opts) -> dict:
    """Build for ``backend``, call with ``inputs`` and zeroed outputs; return outputs by name."""
    nest = nest_or_tensors if not isinstance(nest_or_tensors, list) else LoopNest(nest_or_tensors)
    if backend == "llvm":
        opts.setdefault("fp_contract", False)    # round every operation, as numpy does: exact checks
    k = build(nest, args, target=backend, **opts)
    arrays = {}
    for a in args:
        if a.name in inputs:
            arrays[a.name] = np.copy(inputs[a.name], order="K")   # keeps the strides
        else:
            shape = tuple(a.shape) + ((a.dtype.lanes,) if a.dtype.lanes > 1 else ())
            arrays[a.name] = np.zeros(shape, a.dtype.numpy)
    k(**arrays)
    return arrays


# ------------------------------------------------------------------------------------
# dtypes and the array model
# ------------------------------------------------------------------------------------
def test_vector_dtypes_parse_and_map_to_element_arrays():
    assert str(te.as_dtype("float16x2")) == "float16x2"
    assert te.as_dtype("int8x4").element == te.int8 and te.as_dtype("int8x4").lanes == 4
    assert te.as_dtype("float32x4").numpy == np.float32          # the element's numpy dtype
    A = Buffer("A", (5,), "float32x4")
    assert A[2].dtype == te.as_dtype("float32x4")
    assert A[Ramp(0, 1, 2)].dtype == te.as_dtype("float32x8")     # two vector elements


def test_elementwise_float32x4(backend):
    n = 7
    A = Buffer("A", (n,), "float32x4")
    B = Buffer("B", (n,), "float32x4")
    C = Compute("C", (n,), lambda i: A[i] * B[i] + 1.5)
    D = Compute("D", (n,), lambda i: maximum(A[i], B[i]) - A[i] / B[i])
    assert C.dtype == te.as_dtype("float32x4")
    a = RNG.standard_normal((n, 4)).astype(np.float32)
    b = RNG.uniform(0.5, 2.0, (n, 4)).astype(np.float32)
    out = run([C, D], [A, B, C, D], {"A": a, "B": b}, backend)
    assert_float32_results(backend, out["C"], a * b + np.float32(1.5))
    assert_float32_results(backend, out["D"], np.maximum(a, b) - a / b)


def test_integer_vectors_wrap_and_divide_like_c(backend):
    n = 5
    A = Buffer("A", (n,), "int8x4")
    B = Buffer("B", (n,), "int8x4")
    S = Compute("S", (n,), lambda i: A[i] + B[i] * 3)
    Q = Compute("Q", (n,), lambda i: truncdiv(A[i], B[i]))
    R = Compute("R", (n,), lambda i: truncmod(A[i], B[i]))
    a = RNG.integers(-128, 128, (n, 4)).astype(np.int8)
    b = RNG.integers(1, 20, (n, 4)).astype(np.int8) * np.where(RNG.random((n, 4)) < 0.5, -1, 1).astype(np.int8)
    out = run([S, Q, R], [A, B, S, Q, R], {"A": a, "B": b}, backend)
    wide_a, wide_b = a.astype(np.int64), b.astype(np.int64)
    np.testing.assert_array_equal(out["S"], (wide_a + wide_b * 3).astype(np.int8))   # wraps at 8 bits
    q = np.trunc(wide_a / wide_b).astype(np.int64)
    np.testing.assert_array_equal(out["Q"], q.astype(np.int8))
    np.testing.assert_array_equal(out["R"], (wide_a - q * wide_b).astype(np.int8))


def test_float16x2_arithmetic_rounds_each_operation(backend):
    n = 9
    A = Buffer("A", (n,), "float16x2")
    C = Compute("C", (n,), lambda i: A[i] * A[i] + A[i])
    a = RNG.uniform(-300, 300, (n, 2)).astype(np.float16)
    out = run([C], [A, C], {"A": a}, backend)
    with np.errstate(over="ignore"):                                # some lanes overflow to Inf
        want = a * a + a
    np.testing.assert_array_equal(out["C"].view(np.uint16), want.view(np.uint16))


# ------------------------------------------------------------------------------------
# casts between vector types of equal lanes
# ------------------------------------------------------------------------------------
def test_casts_f16x2_f32x2(backend):
    n = 6
    H = Buffer("H", (n,), "float16x2")
    F = Buffer("F", (n,), "float32x2")
    H2F = Compute("H2F", (n,), lambda i: cast(H[i], "float32x2"))
    F2H = Compute("F2H", (n,), lambda i: cast(F[i], "float16x2"))
    h = RNG.standard_normal((n, 2)).astype(np.float16)
    f = np.array([[1 + 2**-11, 65520.0], [-1e-8, np.inf], [np.nan, -0.0], [3.14159, 1e5],
                  [2.0**-24, -(2.0**-25) * 3], [70000.0, -65504.0]], np.float32)
    out = run([H2F, F2H], [H, F, H2F, F2H], {"H": h, "F": f}, backend)
    np.testing.assert_array_equal(out["H2F"], h.astype(np.float32))
    want = convert(f, "float32", "float16")
    np.testing.assert_array_equal(out["F2H"].view(np.uint16), want.view(np.uint16))
    assert out["F2H"][0].tolist() == [1.0, np.inf]                  # tie to even, overflow to Inf


def test_casts_i8x4_f32x4(backend):
    n = 4
    I = Buffer("I", (n,), "int8x4")
    F = Buffer("F", (n,), "float32x4")
    I2F = Compute("I2F", (n,), lambda i: cast(I[i], "float32x4"))
    F2I = Compute("F2I", (n,), lambda i: cast(F[i], "int8x4"))
    i8 = np.array([[-128, -1, 0, 127], [1, 2, 3, 4], [-5, 6, -7, 8], [100, -100, 50, -50]], np.int8)
    f = np.array([[-2.7, 2.7, 127.9, 128.0], [-128.9, -129.0, np.nan, np.inf], [-np.inf, 0.5, -0.5, 1e9],
                  [3.0, -3.0, 99.99, -0.0]], np.float32)
    out = run([I2F, F2I], [I, F, I2F, F2I], {"I": i8, "F": f}, backend)
    np.testing.assert_array_equal(out["I2F"], i8.astype(np.float32))
    np.testing.assert_array_equal(out["F2I"], float_to_int(f, np.int8))   # truncate, saturate, NaN -> 0
    assert out["F2I"][1].tolist() == [-128, -128, 0, 127]


def test_casts_to_low_precision_vectors(backend):
    n = 3
    F = Buffer("F", (n,), "float32x4")
    B16 = Compute("B16", (n,), lambda i: cast(F[i], "bfloat16x4"))
    E4 = Compute("E4", (n,), lambda i: cast(F[i], "float8_e4m3x4"))
    E5 = Compute("E5", (n,), lambda i: cast(cast(F[i], "float8_e5m2x4"), "float32x4"))
    f = np.array([[1 + 2**-8, 1 + 3 * 2**-8, 500.0, np.nan], [-1e9, np.inf, 2.0**-10, 0.3],
                  [61440.0, -57344.0, 1e-6, -0.0]], np.float32)
    out = run([B16, E4, E5], [F, B16, E4, E5], {"F": f}, backend)
    assert out["B16"].dtype == ml_dtypes.bfloat16 and out["B16"].shape == (n, 4)
    np.testing.assert_array_equal(out["B16"].view(np.uint16), convert(f, "float32", "bfloat16").view(np.uint16))
    np.testing.assert_array_equal(out["E4"].view(np.uint8), convert(f, "float32", "float8_e4m3").view(np.uint8))
    assert out["E4"].astype(np.float32)[0, 2:].tolist() == [448.0, 448.0]      # saturate; NaN -> +MAX
    e5 = convert(convert(f, "float32", "float8_e5m2"), "float8_e5m2", "float32")
    np.testing.assert_array_equal(out["E5"].view(np.uint32), e5.view(np.uint32))


def test_compare_select_and_bool_vectors(backend):
    n = 8
    A = Buffer("A", (n,), "float32x4")
    M = Compute("M", (n,), lambda i: A[i] > 0.0)                      # boolx4
    R = Compute("R", (n,), lambda i: select(A[i] > 0.0, A[i], A[i] * 0.1))
    K = Compute("K", (n,), lambda i: cast(A[i] > 0.5, "int32x4") + cast(A[i] < -0.5, "int32x4") * 2)
    a = RNG.standard_normal((n, 4)).astype(np.float32)
    out = run([M, R, K], [A, M, R, K], {"A": a}, backend)
    assert out["M"].dtype == np.bool_ and out["M"].shape == (n, 4)
    np.testing.assert_array_equal(out["M"], a > 0)
    np.testing.assert_array_equal(out["R"], np.where(a > 0, a, a * np.float32(0.1)))
    np.testing.assert_array_equal(out["K"], (a > 0.5).astype(np.int32) + (a < -0.5).astype(np.int32) * 2)


def test_if_then_else_with_vector_condition_guards_each_lane(backend):
    n = 6
    A = Buffer("A", (n,), "int32x4")
    B = Buffer("B", (n,), "int32x4")
    Q = Compute("Q", (n,), lambda i: if_then_else(B[i].ne(0), truncdiv(A[i], B[i]), A[i]))
    a = RNG.integers(-100, 100, (n, 4)).astype(np.int32)
    b = RNG.integers(-3, 4, (n, 4)).astype(np.int32)
    b[0] = [0, 0, 1, 0]
    out = run([Q], [A, B, Q], {"A": a, "B": b}, backend)
    safe = np.where(b == 0, 1, b)
    want = np.where(b == 0, a, np.trunc(a / safe).astype(np.int32))
    np.testing.assert_array_equal(out["Q"], want)


# ------------------------------------------------------------------------------------
# building vectors from scalars, intermediates, schedules, reductions
# ------------------------------------------------------------------------------------
def test_vectors_from_scalar_buffers_and_back(backend):
    n = 5
    S = Buffer("S", (4 * n,), "float32")
    V = Compute("V", (n,), lambda i: S[Ramp(i * 4, 1, 4)] * 2.0 + Broadcast(S[i], 4))
    s = RNG.standard_normal(4 * n).astype(np.float32)
    out = run([V], [S, V], {"S": s}, backend)
    want = s.reshape(n, 4) * np.float32(2) + s[:n, None]
    np.testing.assert_array_equal(out["V"], want)


def test_vector_intermediate_is_allocated(backend):
    n = 6
    A = Buffer("A", (n,), "float32x2")
    T = Compute("T", (n,), lambda i: A[i] * 3.0)                  # intermediate, float32x2
    C = Compute("C", (n,), lambda i: T[(i + 1) % n] - A[i])
    nest = LoopNest([C])
    assert T in nest.intermediates
    a = RNG.standard_normal((n, 2)).astype(np.float32)
    out = run(nest, [A, C], {"A": a}, backend, **({"poison": True} if backend == "ireval" else {}))
    np.testing.assert_array_equal(out["C"], np.roll(a * np.float32(3), -1, axis=0) - a)


def test_scheduled_vector_tensor_matches_unscheduled(backend):
    n, m = 6, 10
    A = Buffer("A", (n, m), "float32x4")
    C = Compute("C", (n, m), lambda i, j: A[i, j] * A[i, (j + 1) % m] + 1.0)
    a = RNG.standard_normal((n, m, 4)).astype(np.float32)
    want = a * np.roll(a, -1, axis=1) + np.float32(1)
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    _, ji, _ = nest.split_with_tail(j, 4)
    nest.vectorize(ji)
    nest.parallelize(i)
    out = run(nest, [A, C], {"A": a}, backend)
    assert_float32_results(backend, out["C"], want)


def test_reduction_of_vector_elements_is_lane_wise(backend):
    n = 12
    A = Buffer("A", (n,), "float32x4")
    S = Reduce("S", (1,), Sum(), lambda i, k: A[k], (n,))
    a = RNG.standard_normal((n, 4)).astype(np.float32)
    out = run([S], [A, S], {"A": a}, backend)
    want = np.add.accumulate(a, axis=0, dtype=np.float32)[-1]     # serial order, lane by lane
    np.testing.assert_array_equal(out["S"][0], want)


def test_vector_buffer_with_column_major_layout(backend):
    n, m = 3, 5
    A = Buffer("A", (n, m), "float32x2", layout=column_major(n, m))
    C = Compute("C", (n, m), lambda i, j: A[i, j] * 2.0)
    a = np.empty((m, n, 2), np.float32).transpose(1, 0, 2)       # column-major elements, lanes inner
    a[...] = RNG.standard_normal((n, m, 2))
    out = run([C], [A, C], {"A": a}, backend)
    np.testing.assert_array_equal(out["C"], a * np.float32(2))
    with pytest.raises(ValueError, match="strides"):
        run([C], [A, C], {"A": np.ascontiguousarray(a)}, backend)


# ------------------------------------------------------------------------------------
# vector indices into vector buffers (hand-written prepared nests)
# ------------------------------------------------------------------------------------
class HandNest:
    prepared = True

    def __init__(self, root, inputs, outputs):
        self.root = Block((root,))
        self.inputs, self.outputs, self.intermediates = list(inputs), list(outputs), []


def test_ramp_index_reads_several_vector_elements(backend):
    m = 4
    A = Buffer("A", (2 * m,), "int16x2")
    C = Buffer("C", (2 * m,), "int16x2")     # contiguous: two elements at a time
    D = Buffer("D", (2 * m,), "int16x2")     # strided: elements i and i + m
    i = Var("i")
    body = Block((Store(C, (Ramp(i * 2, 1, 2),), Load(A, (Ramp(i * 2, 1, 2),)) * 3),
                  Store(D, (Ramp(i, m, 2),), Load(A, (Ramp(i, m, 2),)) + 1)))
    assert Load(A, (Ramp(i * 2, 1, 2),)).dtype == te.as_dtype("int16x4")
    nest = HandNest(For(i, 0, m, body), [A], [C, D])
    a = RNG.integers(-1000, 1000, (2 * m, 2)).astype(np.int16)
    out = run(nest, [A, C, D], {"A": a}, backend)
    np.testing.assert_array_equal(out["C"], a * 3)
    np.testing.assert_array_equal(out["D"], a + 1)


# ------------------------------------------------------------------------------------
# argument checking and the CUDA backend
# ------------------------------------------------------------------------------------
def test_kernel_checks_the_lanes_axis(backend):
    n = 4
    A = Buffer("A", (n,), "float32x4")
    C = Compute("C", (n,), lambda i: A[i] + 1.0)
    k = build(LoopNest([C]), [A, C], target=backend)
    c = np.zeros((n, 4), np.float32)
    with pytest.raises(ValueError, match=r"argument A .*\(4, 4\)"):
        k(np.zeros(n, np.float32), c)                                 # lanes axis missing
    with pytest.raises(ValueError, match="argument A"):
        k(np.zeros((n, 2), np.float32), c)                            # wrong number of lanes
    with pytest.raises(TypeError, match="argument A .*dtype"):
        k(np.zeros((n, 4), np.float64), c)                            # element dtype
    k(np.zeros((4, n), np.float32).T, c)                             # strided: bound through a copy
    np.testing.assert_array_equal(c, np.ones((n, 4), np.float32))
    a = np.arange(4 * n, dtype=np.float32).reshape(n, 4)
    k(a, c)
    np.testing.assert_array_equal(c, a + 1)


def test_cuda_builds_vector_element_types_as_cuda_vector_types():
    n = 64
    A = Buffer("A", (n,), "float32x4")
    C = Compute("C", (n,), lambda i: A[i] * 2.0)
    nest = LoopNest([C])
    i, = nest.get_loops_for(C)
    o, inner, _ = nest.split_with_tail(i, 32)
    nest.set_gpu_block_index(o, 0)
    nest.set_gpu_thread_index(inner, 0)
    k = build(nest, [A, C], target="cuda")
    assert "const float4* __restrict__ b_A, float4* b_C" in k.source
