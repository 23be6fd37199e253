"""Kernel arguments from the arrays people already use (issue 16, items 1 and 2): DLPack
objects without a copy and a device check, strided views bound through their strides,
outputs left out of a call allocated and returned, on IREval, LLVM and the CUDA host
emulation."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from codegen.kernel import ArgumentDeviceError, KernelArgumentError, OutputShapeError
from loopnest import LoopNest
from te import Buffer, Compute, Var, float32, int32


class Wrapped:
    """An array type of another library: it only speaks DLPack (as a PyTorch CPU tensor or a
    JAX array would). ``device`` overrides what ``__dlpack_device__`` reports."""

    def __init__(self, array, device=None):
        self.array = array
        self.device = device

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.device or self.array.__dlpack_device__()


def from_dlpack(x):
    """This module's ``from_dlpack``: the kernel returns outputs as ``Wrapped`` for
    ``Wrapped`` inputs through it (as ``torch.from_dlpack`` for PyTorch tensors)."""
    return Wrapped(np.from_dlpack(x))


class Plain:
    """A DLPack array type whose module has no ``from_dlpack``: outputs come back as numpy."""

    __module__ = "a_module_without_from_dlpack"

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def _add_bias(target):
    """C[i, j] = A[i, j] * 2 + bias[j]; params (A, bias, C)."""
    N, M = Var("N", int32), Var("M", int32)
    A, bias = Buffer("A", (N, M), float32), Buffer("bias", (M,), float32)
    C = Compute("C", (N, M), lambda i, j: A[i, j] * 2.0 + bias[j])
    return build(LoopNest([C]), [A, bias, C], target=target)


def _two_outputs(target):
    """S = A + B, D = A - B; params (A, S, B, D): outputs between the inputs."""
    N = Var("N", int32)
    A, B = Buffer("A", (N,), float32), Buffer("B", (N,), float32)
    S = Compute("S", (N,), lambda i: A[i] + B[i])
    D = Compute("D", (N,), lambda i: A[i] - B[i])
    return build(LoopNest([S, D]), [A, S, B, D], target=target)


def _data(n=5, m=6):
    rng = np.random.default_rng(16)
    return rng.standard_normal((n, m)).astype(np.float32), rng.standard_normal(m).astype(np.float32)


# ---- DLPack -------------------------------------------------------------------------
def test_dlpack_inputs_are_read_without_a_copy(backend):
    k = _add_bias(backend)
    a, bias = _data()
    c = np.zeros_like(a)
    k(Wrapped(a), Wrapped(bias), c)
    np.testing.assert_allclose(c, a * 2 + bias, rtol=1e-6)
    a[0, 0] = 100.0                  # the kernel reads the caller's memory, not a copy
    k(Wrapped(a), bias, c)
    assert c[0, 0] == pytest.approx(200.0 + bias[0])


def test_dlpack_output_is_written_in_place(backend):
    k = _add_bias(backend)
    a, bias = _data()
    c = np.zeros_like(a)
    assert k(a, bias, Wrapped(c)) is None
    np.testing.assert_allclose(c, a * 2 + bias, rtol=1e-6)


def test_dlpack_device_is_checked_against_the_target(backend):
    k = _add_bias(backend)
    a, bias = _data()
    c = np.zeros_like(a)
    with pytest.raises(ArgumentDeviceError, match=r"argument A .* lives on cuda:0, but the .* kernel reads host "
                                                  r"memory; (copy it to the CPU|pass an array with)"):
        k(Wrapped(a, device=(2, 0)), bias, c)
    with pytest.raises(KernelArgumentError, match="argument bias .*(__dlpack__|device array).*got list"):
        k(a, bias.tolist(), c)
    assert not c.any()


def test_allocated_outputs_take_the_callers_array_type(backend):
    k = _add_bias(backend)
    a, bias = _data()
    c = k(Wrapped(a), Wrapped(bias))
    assert isinstance(c, Wrapped)
    np.testing.assert_allclose(np.from_dlpack(c), a * 2 + bias, rtol=1e-6)
    plain = k(Plain(a), bias)                   # no from_dlpack in the type's module: numpy
    assert type(plain) is np.ndarray
    np.testing.assert_allclose(plain, a * 2 + bias, rtol=1e-6)


# ---- strided arrays -----------------------------------------------------------------
def _views():
    """A strided view of each kind, by name."""
    base = np.arange(12 * 14, dtype=np.float32).reshape(12, 14) / 7
    return {"step": base[::2, 1::2], "transpose": base[:6, :7].T, "negative": base[::-2, ::-1][:, :6],
            "fortran": np.asfortranarray(base[:4, :5]), "broadcast": np.broadcast_to(base[0, :6], (5, 6))}


@pytest.mark.parametrize("kind", ["step", "transpose", "negative", "fortran", "broadcast"])
def test_strided_inputs_are_bound_through_their_strides(backend, kind):
    k = _add_bias(backend)
    view = _views()[kind]
    assert not view.flags.c_contiguous
    bias = np.linspace(-1, 1, view.shape[1]).astype(np.float32)
    before = view.copy()
    c = np.zeros(view.shape, np.float32)
    k(view, bias[::-1].copy()[::-1], c)
    np.testing.assert_allclose(c, view * 2 + bias, rtol=1e-6)
    np.testing.assert_array_equal(view, before)
    np.testing.assert_allclose(np.from_dlpack(k(Wrapped(view), bias)), view * 2 + bias, rtol=1e-6)


_OUT_VIEWS = {"step": lambda w: w[::2, 1::2][:6, :7], "transpose": lambda w: w[:7, :6].T,
              "negative": lambda w: w[::-2, ::-2][:6, :7]}


@pytest.mark.parametrize("kind", sorted(_OUT_VIEWS))
def test_strided_outputs_are_written_through_their_strides(backend, kind):
    k = _add_bias(backend)
    a, bias = _data(6, 7)
    wide = np.full((14, 14), -5.0, np.float32)
    out = _OUT_VIEWS[kind](wide)
    assert out.shape == a.shape and not out.flags.c_contiguous
    assert k(a, bias, out) is None
    np.testing.assert_allclose(out, a * 2 + bias, rtol=1e-6)
    written = np.zeros(wide.shape, bool)
    _OUT_VIEWS[kind](written)[...] = True
    assert (wide[~written] == -5.0).all()           # nothing outside the view was touched


def test_strided_read_only_output_is_refused(backend):
    k = _add_bias(backend)
    a, bias = _data()
    out = np.zeros((a.shape[1], a.shape[0]), np.float32).T
    out.flags.writeable = False
    with pytest.raises(ValueError, match="argument C .*read-only"):
        k(a, bias, out)


def test_interleaved_views_of_one_array(backend):
    """An input and an output that are interleaved views of one array."""
    N = Var("N", int32)
    X = Buffer("X", (N,), float32)
    Y = Compute("Y", (N,), lambda i: X[i] + 1.0)
    nest = LoopNest([Y])
    k = build(nest, [X, Y], target=backend)
    x = np.arange(12, dtype=np.float32)
    k(x[::3], x[1::3])
    np.testing.assert_array_equal(x[1::3], np.array([1, 4, 7, 10], np.float32))
    np.testing.assert_array_equal(x[::3], np.array([0, 3, 6, 9], np.float32))


# ---- returned outputs ---------------------------------------------------------------
def test_single_output_is_returned(backend):
    k = _add_bias(backend)
    a, bias = _data()
    c = k(a, bias)
    assert type(c) is np.ndarray and c.shape == a.shape and c.dtype == np.float32
    np.testing.assert_allclose(c, a * 2 + bias, rtol=1e-6)
    np.testing.assert_allclose(k(A=a, bias=bias), c)           # by name
    c2 = np.zeros_like(a)
    assert k(a, bias, c2) is None                              # passed: in place, as before
    np.testing.assert_array_equal(c2, c)


def test_several_outputs_are_returned_in_argument_order(backend):
    k = _two_outputs(backend)
    a = np.arange(5, dtype=np.float32)
    b = np.full(5, 2.0, np.float32)
    s, d = k(a, b)                                             # (A, B): the inputs only
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(d, a - b)
    d_given = np.zeros(5, np.float32)
    s2, d2 = k(A=a, B=b, D=d_given)                            # one passed, one allocated
    assert d2 is d_given
    np.testing.assert_array_equal(s2, a + b)
    np.testing.assert_array_equal(d_given, a - b)
    s3, d3 = k(a, np.zeros(5, np.float32), b)                  # (A, S, B): D allocated, S in place
    np.testing.assert_array_equal(d3, a - b)


def test_sizes_given_positionally_with_outputs_left_out(backend):
    """build(nest, [A, C, N]) with C an output: k(a, c) passes C, k(a, 5) passes N."""
    N = Var("N", int32)
    A = Buffer("A", (8,), float32)
    C = Compute("C", (N,), lambda i: A[i] * 3.0)
    k = build(LoopNest([C]), [A, C, N], target=backend)
    a = np.arange(8, dtype=np.float32)
    c = np.zeros(5, np.float32)
    k(a, c)
    np.testing.assert_array_equal(c, a[:5] * 3)
    np.testing.assert_array_equal(k(a, 5), a[:5] * 3)
    np.testing.assert_array_equal(k(a, N=6), a[:6] * 3)
    c7 = np.zeros(7, np.float32)
    k(a, c7, 7)
    np.testing.assert_array_equal(c7, a[:7] * 3)


def test_output_shape_that_no_input_gives_is_a_typed_error(backend):
    N = Var("N", int32)
    A = Buffer("A", (8,), float32)
    C = Compute("C", (N,), lambda i: A[i] * 3.0)
    k = build(LoopNest([C]), [A, C], target=backend)
    with pytest.raises(OutputShapeError, match=r"output C .*left out.*needs N, which no input's shape or size "
                                               r"argument gives; pass C$"):
        k(np.zeros(8, np.float32))
    k2 = build(LoopNest([C]), [A, C, N], target=backend)
    with pytest.raises(OutputShapeError, match=r"needs N.*pass C or the size N"):
        k2(A=np.zeros(8, np.float32))


def test_missing_inputs_are_still_refused(backend):
    k = _two_outputs(backend)
    with pytest.raises(KernelArgumentError, match="missing argument B"):
        k(np.zeros(3, np.float32))


def test_vector_element_output_is_allocated_with_its_lanes_axis(backend):
    N = Var("N", int32)
    A = Buffer("A", (N,), "float32x4")
    C = Compute("C", (N,), lambda i: A[i] + 1.0)
    k = build(LoopNest([C]), [A, C], target=backend)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(k(a), a + 1)


# ---- CUDA host emulation (the CUDA kernel shares the binding) -------------------------
def _emulation_available():
    from codegen.cuda import nvcc_available
    from codegen.cuda.emulate import host_compiler
    return host_compiler() is not None and nvcc_available()


@pytest.mark.skipif("not _emulation_available()")
def test_cuda_kernel_binding_on_the_host_emulation():
    from codegen.cuda import examples
    from codegen.cuda.emulate import run_on_host
    ex = examples.elementwise(n=40, threads=32)
    k = build(ex.nest, ex.args, target="cuda")
    x = np.linspace(-1, 1, 80).astype(np.float32)
    want = np.exp(x[::2].astype(np.float64)) * 2 + 1
    y = run_on_host(k, Wrapped(x[::2]))                        # strided DLPack input, output allocated
    assert isinstance(y, Wrapped)
    np.testing.assert_allclose(np.from_dlpack(y), want, rtol=1e-5)
    out = np.zeros(80, np.float32)
    assert run_on_host(k, x[::2], out[::-2]) is None           # strided output, in place
    np.testing.assert_allclose(out[::-2], want, rtol=1e-5)
    with pytest.raises(ArgumentDeviceError, match="lives on cuda:0.*__cuda_array_interface__"):
        k(Wrapped(x, device=(2, 0)), out)



def test_strided_benchmark_examples():
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module("bench.bench_strided"), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
