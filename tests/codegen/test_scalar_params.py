"""Scalar parameters of every dtype, and size variables that appear only in a shape, on
every backend; LLVM emitter bugs are not disguised as BuildError.

Regression tests for ``shared/repros/float_scalar_param.py`` (the llvm target refused a
float32 scalar parameter) and ``shared/repros/unused_size_var_llvm.py`` (a size used only
in a buffer's shape made the default llvm build fail with "variable M is used but not bound").
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from codegen import BuildError, build
from codegen.cuda.emulate import EmulationError, host_compiler, run_on_host
from codegen.cuda.launch import scalar_arg, scalar_value
from loopnest import LoopNest
from te import (ALL_SCALAR_DTYPES, Buffer, Compute, Var, bfloat16, bool_, cast, float16, float32, float64, int32,
                logical_not, select)
from te.lowprec import convert

CPU_TARGETS = ("ireval", "llvm")

try:
    from codegen.cuda.emulate import _cuda_include
    _cuda_include()
    HAVE_EMU = host_compiler() is not None
except EmulationError:  # no CUDA headers on this machine
    HAVE_EMU = False

requires_emu = pytest.mark.skipif(not HAVE_EMU, reason="g++ or the CUDA headers not found")

DTYPES = list(ALL_SCALAR_DTYPES)


def rounded(value: float, dt) -> float:
    """``value`` rounded once (from float64) to the float dtype ``dt``."""
    if dt == float64:
        return float(value)
    if dt == float32:
        return float(np.float32(value))
    return float(np.asarray(convert(np.array([value]), "float64", dt.scalar_name), np.float64)[0])


def scaled_kernel(dt, target, **options):
    """``B[i] = A[i] + s`` (bool: ``s ? A[i] : !A[i]``) with ``s`` a scalar parameter of ``dt``."""
    N = Var("N", int32)
    s = Var("s", dt)
    A = Buffer("A", (N,), dt)
    if dt == bool_:
        B = Compute("B", (N,), lambda i: select(s, A[i], logical_not(A[i])))
    else:
        B = Compute("B", (N,), lambda i: A[i] + s)
    return build(LoopNest([B]), [A, B, s], target=target, **options)


def run(k, a, value):
    b = np.zeros(a.shape, a.dtype)
    k(a, b, value)
    return b


# ------------------------------------------------------------------------------------
# part A: every scalar dtype
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_scalar_param_of_every_dtype(backend, dt):
    k = scaled_kernel(dt, backend)
    if dt == bool_:
        a = np.array([True, False, True])
        assert run(k, a, True).tolist() == [True, False, True]
        assert run(k, a, False).tolist() == [False, True, False]
        return
    a = np.arange(4).astype(dt.numpy)
    if dt.is_float:
        # -2.5 and the sums are exact in every format: no rounding at all
        assert run(k, a, -2.5).astype(np.float64).tolist() == [-2.5, -1.5, -0.5, 0.5]
        # 1.3 is not: the kernel sees it rounded once to the dtype
        assert float(run(k, a, 1.3)[0]) == rounded(1.3, dt)
    else:
        for v in (dt.min_value(), dt.max_value(), 7):
            got = run(k, np.zeros(3, dt.numpy), v)
            assert got.tolist() == [v] * 3, (dt, v)


def test_repro_float32_scalar_param(backend):
    """``shared/repros/float_scalar_param.py``."""
    N = Var("N", int32)
    s = Var("s", float32)
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i] * s)
    k = build(LoopNest([B]), [A, B, s], target=backend)
    b = np.zeros(4, np.float32)
    k(np.ones(4, np.float32), b, 2.5)
    assert b.tolist() == [2.5] * 4


@pytest.mark.parametrize("backend, dt", [(t, d) for t in CPU_TARGETS for d in (float16, bfloat16)], ids=str)
def test_half_scalars_are_rounded_once(backend, dt):
    """A value half an ulp of float32 below a tie of the 16-bit format: rounding through
    float32 first would land on the tie and round to even; one rounding goes up."""
    half_ulp = {float16: 2.0 ** -11, bfloat16: 2.0 ** -8}[dt]
    value = 1.0 + half_ulp + half_ulp * 2.0 ** -20
    N = Var("N", int32)
    s = Var("s", dt)
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i] + cast(s, float32))
    k = build(LoopNest([B]), [A, B, s], target=backend)
    b = run(k, np.zeros(2, np.float32), value)
    assert b.tolist() == [1.0 + 2 * half_ulp] * 2


@pytest.mark.parametrize("backend", CPU_TARGETS)
def test_float_scalar_range_nan_and_infinity(backend):
    k = scaled_kernel(float16, backend)
    a = np.zeros(2, np.float16)
    assert np.isnan(run(k, a, math.nan)).all()
    assert run(k, a, -math.inf).tolist() == [-math.inf] * 2
    with pytest.raises(ValueError, match=r"s = 70000.0 does not fit its dtype float16"):
        run(k, a, 70000.0)
    with pytest.raises(TypeError, match="float16 scalar and must be a number"):
        run(k, a, "1.0")


def test_llvm_scalar_params_in_parallel_and_vector_loops():
    """Scalars captured by an outlined parallel body and broadcast into vector code."""
    N = Var("N", int32)
    h, flag = Var("h", float16), Var("flag", bool_)
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: select(flag, A[i] * cast(h, float32), A[i]))
    nest = LoopNest([B])
    outer, inner, _ = nest.split_with_tail(nest.get_loops_for(B)[0], 8)
    nest.parallelize(outer)
    nest.vectorize(inner)
    k = build(nest, [A, B, h, flag], target="llvm")
    a = np.arange(37, dtype=np.float32)
    b = np.zeros_like(a)
    k(a, b, 0.1, True)
    np.testing.assert_array_equal(b, a * np.float32(np.float16(0.1)))
    k(a, b, 0.1, False)
    np.testing.assert_array_equal(b, a)


def test_llvm_entry_point_passes_bool_as_a_byte_and_float16_as_float():
    k = scaled_kernel(float16, "llvm")
    assert re.search(r'define i32 @"?te_B"?\(.*float %"?s"?[,)]', k.source)
    assert re.search(r'fptrunc float %"?s"? to half', k.source)
    kb = scaled_kernel(bool_, "llvm")
    assert re.search(r'define i32 @"?te_B"?\(.*i8 %"?s"?[,)]', kb.source)
    assert re.search(r'icmp ne i8 %"?s"?, 0', kb.source)


def test_llvm_vector_scalar_param_is_refused_with_a_build_error():
    N = Var("N", int32)
    v = Var("v", float32.with_lanes(4))
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i] * 2.0)
    with pytest.raises(BuildError, match=r"scalar parameter v has the vector dtype float32x4.*pass a buffer"):
        from codegen.kernel import Param
        from codegen.llvm import build_llvm
        nest = LoopNest([B]).prepare_for_codegen()
        build_llvm(nest, [Param("A", buffer=A), Param("B", buffer=nest.outputs[0]), Param("v", var=v)])


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_cuda_scalar_arguments_match_their_declared_c_type(dt):
    """What the launcher packs for a parameter declared ``compute_type(dt)``."""
    s = Var("s", dt)
    if dt == bool_:
        assert scalar_arg(s, True) == np.uint8(1) and scalar_arg(s, True).dtype == np.uint8
        return
    if dt.is_integer:
        arg = scalar_arg(s, dt.max_value())
        assert arg.dtype == dt.numpy and int(arg) == dt.max_value()
        with pytest.raises(ValueError, match="does not fit its dtype"):
            scalar_arg(s, dt.max_value() + 1)
        return
    arg = scalar_arg(s, 1.3)
    assert arg.dtype == (np.float64 if dt == float64 else np.float32)
    assert float(arg) == rounded(1.3, dt) and scalar_value(s, 1.3) == rounded(1.3, dt)
    assert math.isinf(scalar_value(s, math.inf)) or dt.scalar_name.startswith("float8")


@requires_emu
@pytest.mark.parametrize("dt", [bool_, float16, bfloat16, float32, float64], ids=str)
def test_cuda_emulation_passes_non_integer_scalars(dt):
    k = scaled_kernel(dt, "cuda")
    if dt == bool_:
        a = np.array([True, False, True])
        b = np.zeros_like(a)
        run_on_host(k, a, b, False)
        assert b.tolist() == [False, True, False]
        return
    a = np.arange(4).astype(dt.numpy)
    b = np.zeros_like(a)
    run_on_host(k, a, b, -2.5)
    assert b.astype(np.float64).tolist() == [-2.5, -1.5, -0.5, 0.5]


# ------------------------------------------------------------------------------------
# part B: a size that appears only in a shape
# ------------------------------------------------------------------------------------
def shape_only_nest():
    N, M = Var("N", int32), Var("M", int32)
    A = Buffer("A", (M,), float32)
    B = Compute("B", (N,), lambda i: A[i])
    return LoopNest([B]), A, B, M


def test_repro_size_only_in_a_shape(backend):
    """``shared/repros/unused_size_var_llvm.py``."""
    nest, A, B, _ = shape_only_nest()
    k = build(nest, [A, B], target=backend)
    b = np.zeros(4, np.float32)
    k(np.arange(8, dtype=np.float32), b)
    assert b.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("noalias", [None, True, False])
@pytest.mark.parametrize("explicit", [False, True])
def test_llvm_size_only_in_a_shape_every_variant(noalias, explicit):
    nest, A, B, M = shape_only_nest()
    k = build(nest, [A, B, M] if explicit else [A, B], target="llvm", noalias=noalias)
    a = np.arange(8, dtype=np.float32)
    b = np.zeros(4, np.float32)
    k(a, b, 8) if explicit else k(a, b)
    assert b.tolist() == [0, 1, 2, 3]
    # overlapping arguments still take the variant compiled without noalias
    both = np.arange(8, dtype=np.float32)
    k(both, both[:4], 8) if explicit else k(both, both[:4])
    assert both[:4].tolist() == [0, 1, 2, 3]


def test_llvm_shape_only_size_of_an_output():
    N, M = Var("N", int32), Var("M", int32)
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i] + 1.0)
    C = Compute("C", (M,), lambda i: A[0] * 0.0 + 5.0)   # M: the extent of C's own loop
    k = build(LoopNest([B, C]), [A, B, C], target="llvm")
    a, b, c = np.zeros(3, np.float32), np.zeros(3, np.float32), np.zeros(2, np.float32)
    k(a, b, c)
    assert b.tolist() == [1.0] * 3 and c.tolist() == [5.0] * 2


def test_cuda_size_only_in_a_shape_is_no_kernel_argument():
    nest, A, B, _ = shape_only_nest()
    k = build(nest, [A, B], target="cuda")
    assert "v_M" not in k.source and "int v_N" in k.source


@requires_emu
def test_cuda_emulation_size_only_in_a_shape():
    nest, A, B, _ = shape_only_nest()
    outer, inner, _ = nest.split_with_tail(nest.get_loops_for(B)[0], 32)
    nest.set_gpu_block_index(outer, 0)
    nest.set_gpu_thread_index(inner, 0)
    k = build(nest, [A, B], target="cuda")
    b = np.zeros(40, np.float32)
    run_on_host(k, np.arange(50, dtype=np.float32), b)
    assert b.tolist() == list(range(40))


# ------------------------------------------------------------------------------------
# part C: emitter bugs surface
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("exc", [KeyError("internal table"), TypeError("bad operand"), AssertionError("invariant")],
                         ids=lambda e: type(e).__name__)
def test_llvm_emitter_internal_error_is_not_a_build_error(monkeypatch, exc):
    from codegen.llvm import emit

    def broken(self, e, st):
        raise exc
    monkeypatch.setattr(emit._Emitter, "visit_FloatImm", broken)
    monkeypatch.setattr(emit._Emitter, "_table", {})   # the dispatch table keeps the methods it found
    A = Buffer("A", (4,), float32)
    B = Compute("B", (4,), lambda i: A[i] * 3.0)
    with pytest.raises(type(exc)) as info:
        build(LoopNest([B]), [A, B], target="llvm", cache=False)
    assert not isinstance(info.value, BuildError)


def test_llvm_deliberate_refusal_is_a_build_error_saying_what_to_do():
    A = Buffer("A", (64,), float32)
    B = Compute("B", (64,), lambda i: A[i] + 1.0)
    nest = LoopNest([B])
    outer, inner, _ = nest.split_with_tail(nest.get_loops_for(B)[0], 32)
    nest.set_gpu_thread_index(inner, 0)
    with pytest.raises(BuildError, match="GPU gpu_thread index; the llvm target runs on the CPU"):
        build(nest, [A, B], target="llvm", cache=False)


@pytest.mark.parametrize("module", ["codegen.llvm.types", "codegen.llvm.build", "codegen.cuda.launch"])
def test_docstring_examples(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
