"""Vector element types and vector loads/stores on the CUDA backend, without a GPU.

* Every backend-parametrised test of ``test_vector_types.py`` (the ones ``tests/gpu`` reruns
  on a GPU) runs here on the CUDA target through the host emulation of the generated CUDA C
  (``codegen.cuda.emulate``), each kernel also on IREval from the same inputs, bit for bit,
  and compiled by nvcc for sm_80.
* The CUDA types chosen for vector dtypes (``codegen.cuda.types``).
* Whole-vector accesses (``codegen.cuda.vectors``): elements of vector buffers, and
  vectorized loops over float32 buffers as ``float4``/``float2`` loads and stores when the
  alignment is provable (the PTX has ``ld.global.v4.f32``), single lanes otherwise; device
  arrays whose pointer is not aligned are refused at launch.
"""
from __future__ import annotations

import inspect
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import te
from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.compile import compile_ptx
from codegen.cuda.emulate import host_compiler, run_on_host
from codegen.cuda.types import natural_alignment, vector_type
from loopnest import LoopNest
from te import Buffer, Compute, Var, cast, int32

import test_vector_types as vector_tests

HAVE_NVCC = nvcc_available()
HAVE_EMU = host_compiler() is not None and HAVE_NVCC  # the emulation needs the CUDA headers
requires_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")
requires_emu = pytest.mark.skipif(not HAVE_EMU, reason="g++ or the CUDA headers not found")

RNG = np.random.default_rng(11)
BACKEND_TESTS = sorted(name for name, fn in vars(vector_tests).items()
                       if name.startswith("test_") and "backend" in inspect.signature(fn).parameters)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


class _EmulatedAndChecked:
    """A CUDA kernel called through the host emulation, then IREval's kernel of the same nest
    on copies of the same arguments; every array must come out bit for bit the same."""

    def __init__(self, cuda, ireval):
        self.cuda, self.ireval = cuda, ireval

    def __call__(self, *args, **kwargs):
        copy = lambda x: np.copy(x, order="K") if isinstance(x, np.ndarray) else x
        ref_args = [copy(a) for a in args]
        ref_kwargs = {k: copy(v) for k, v in kwargs.items()}
        out = run_on_host(self.cuda, *args, **kwargs)
        self.ireval(*ref_args, **ref_kwargs)
        for got, want in zip([*args, *kwargs.values()], [*ref_args, *ref_kwargs.values()]):
            if isinstance(got, np.ndarray):
                np.testing.assert_array_equal(_bits(got), _bits(want), err_msg="CUDA (host emulation) vs IREval")
        return out


@requires_emu
@pytest.mark.parametrize("name", BACKEND_TESTS)
def test_vector_type_test_runs_on_cuda_emulation_like_ireval_and_compiles(name, monkeypatch):
    kernels = []

    def cuda_build(nest, args, target, **opts):
        assert target == "cuda"
        k = build(nest, args, target="cuda", **opts)
        kernels.append(k)
        return _EmulatedAndChecked(k, build(nest, args, target="ireval"))

    monkeypatch.setattr(vector_tests, "build", cuda_build)
    getattr(vector_tests, name)("cuda")
    assert kernels
    for k in kernels:
        assert k.compile("sm_80")["kernels"]


# ------------------------------------------------------------------------------------
# the CUDA types of vector dtypes
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,name,align", [
    ("float32x4", "float4", 16), ("float32x2", "float2", 8), ("float32x3", "float3", 4),
    ("float16x2", "__half2", 4), ("bfloat16x2", "__nv_bfloat162", 4), ("int8x4", "char4", 4),
    ("uint8x4", "uchar4", 4), ("int16x2", "short2", 4), ("int32x4", "int4", 16), ("uint32x2", "uint2", 8),
    ("float64x2", "double2", 16), ("int64x2", "longlong2", 16),
    ("float16x4", "tc_float16x4", 8), ("float64x4", "tc_float64x4", 16), ("boolx4", "tc_boolx4", 4),
    ("float8_e4m3x4", "tc_float8_e4m3x4", 4), ("int16x3", "short3", 2), ("int16x5", "tc_int16x5", 2),
    ("float32x8", "tc_float32x8", 16),
])
def test_vector_dtypes_map_to_cuda_types_of_their_size_and_natural_alignment(dtype, name, align):
    dt = te.as_dtype(dtype)
    vt = vector_type(dt)
    assert (vt.name, vt.align, vt.nbytes) == (name, align, dt.lanes * dt.itemsize)
    assert vt.align == natural_alignment(vt.nbytes)
    assert vt.builtin == (not name.startswith("tc_"))


# ------------------------------------------------------------------------------------
# vector elements under blocks and threads
# ------------------------------------------------------------------------------------
def _threaded(tensors, block=32):
    nest = LoopNest(tensors)
    for t in tensors:
        i, = nest.get_loops_for(t)
        o, inner = nest.split_with_mask(i, block)
        nest.set_gpu_block_index(o, 0)
        nest.set_gpu_thread_index(inner, 0)
    return nest


@requires_emu
def test_vector_elements_are_loaded_and_stored_whole_by_each_thread():
    n = 100
    H = Buffer("H", (n,), "float16x2")
    F = Buffer("F", (n,), "float32x4")
    C = Compute("C", (n,), lambda i: cast(H[i] * H[i], "float32x2"))
    D = Compute("D", (n,), lambda i: F[i] * F[i] - 1.0)
    nest = _threaded([C, D])
    k = build(nest, [H, F, C, D], target="cuda")
    src = k.source
    assert "const __half2* __restrict__ b_H" in src and "const float4* __restrict__ b_F" in src
    thread = r"\(\(v_i_1_outer \* 32\) \+ v_i_1_inner\)"
    assert re.search(rf"const float4 tc_e\d+\[1\] = \{{b_F\[{thread}\]\}};", src)     # one 16-byte load
    assert re.search(rf"b_D\[{thread}\] = tc_w\d+\[0\];", src)                     # one 16-byte store
    assert "float2* b_C" in src and "tc_get<__half>(" in src
    assert "store D[i_1_outer * 32 + i_1_inner]: 1 x float4 (16 B aligned)" in k.module.plan.describe_vectors()
    assert k.module.param_alignment == {0: 4, 1: 16, 2: 8, 3: 16}
    h = RNG.uniform(-10, 10, (n, 2)).astype(np.float16)
    f = RNG.standard_normal((n, 4)).astype(np.float32)
    ref = build(nest, [H, F, C, D], target="ireval")
    want = {"C": np.zeros((n, 2), np.float32), "D": np.zeros((n, 4), np.float32)}
    ref(h, f, want["C"], want["D"])
    got = {"C": np.zeros((n, 2), np.float32), "D": np.zeros((n, 4), np.float32)}
    run_on_host(k, h, f, got["C"], got["D"])
    for name in got:
        np.testing.assert_array_equal(got[name], want[name])
    np.testing.assert_array_equal(got["D"], f * f - np.float32(1))


@requires_nvcc
def test_vector_elements_compile_to_vector_instructions():
    n = 256
    F = Buffer("F", (n,), "float32x4")
    D = Compute("D", (n,), lambda i: F[i] * 3.0)
    k = build(_threaded([D]), [F, D], target="cuda")
    ptx = compile_ptx(k.source, "sm_80")
    assert re.search(r"ld\.global(\.nc)?\.v4\.f32", ptx) and re.search(r"st\.global\.v4\.f32", ptx)


# ------------------------------------------------------------------------------------
# vectorized loops over scalar buffers
# ------------------------------------------------------------------------------------
def _vectorized(n, lanes, offset=0, threads=32, dtype="float32"):
    A = Buffer("A", (n + offset,), dtype)
    B = Compute("B", (n,), lambda i: A[i + offset] * 2.0 + 1.0)
    nest = LoopNest([B])
    i, = nest.get_loops_for(B)
    o, inner, _ = nest.split_with_tail(i, lanes)
    bo, t = nest.split_with_mask(o, threads)
    nest.set_gpu_block_index(bo, 0)
    nest.set_gpu_thread_index(t, 0)
    nest.vectorize(inner)
    return nest, A, B


def _run_both(nest, args, inputs, out_shape):
    k = build(nest, args, target="cuda")
    ref, got = np.zeros(out_shape, np.float32), np.zeros(out_shape, np.float32)
    build(nest, args, target="ireval")(*inputs, ref)
    run_on_host(k, *inputs, got)
    np.testing.assert_array_equal(got, ref)
    return k


@requires_emu
@pytest.mark.parametrize("lanes,vt", [(4, "float4"), (2, "float2"), (8, "float4")])
def test_aligned_vectorized_loop_is_a_wide_load_and_store(lanes, vt):
    n = 1000
    nest, A, B = _vectorized(n, lanes)
    a = RNG.standard_normal(n).astype(np.float32)
    k = _run_both(nest, [A, B], [a], (n,))
    chunks = max(lanes * 4 // 16, 1)
    assert f"reinterpret_cast<const {vt}*>(&b_A[" in k.source and f"reinterpret_cast<{vt}*>(&b_B[" in k.source
    lines = k.module.plan.describe_vectors().splitlines()
    assert any(ln.startswith("load A[") and ln.endswith(f"{chunks} x {vt} ({lanes * 4 // chunks} B aligned)")
               for ln in lines), lines
    assert k.module.param_alignment == {0: lanes * 4 // chunks, 1: lanes * 4 // chunks}


@requires_nvcc
def test_vectorized_float32_loop_compiles_to_ld_global_v4():
    nest, A, B = _vectorized(4096, 4)
    k = build(nest, [A, B], target="cuda")
    ptx = compile_ptx(k.source, "sm_80")
    assert re.search(r"ld\.global(\.nc)?\.v4\.f32", ptx), ptx
    assert re.search(r"st\.global\.v4\.f32", ptx), ptx


@requires_emu
def test_unprovable_alignment_keeps_single_lane_accesses():
    n = 1000
    nest, A, B = _vectorized(n, 4, offset=1)           # reads A[4k + 1 ...]: not 16-byte aligned
    a = RNG.standard_normal(n + 1).astype(np.float32)
    k = _run_both(nest, [A, B], [a], (n,))
    assert "reinterpret_cast<const float4*>(&b_A[" not in k.source
    assert "reinterpret_cast<float4*>(&b_B[" in k.source   # the store is aligned
    assert k.module.param_alignment == {1: 16}
    # rows of 8 floats: runs of 4 stay aligned; rows of M floats (known at launch) do not
    for cols in (8, Var("M", int32)):
        N = Var("N", int32)
        X = Buffer("X", (N, cols), "float32")
        Y = Compute("Y", (N, cols), lambda i, j: X[(i + 1) % N, j] + 1.0)
        nest = LoopNest([Y])
        _, ji, _ = nest.split_with_tail(nest.get_loops_for(Y)[1], 4)
        nest.vectorize(ji)
        k = build(nest, [X, Y], target="cuda")
        assert k.module.param_alignment == ({0: 16, 1: 16} if cols == 8 else {})
        x = RNG.standard_normal((5, 8)).astype(np.float32)
        got = np.zeros_like(x)
        run_on_host(k, x, got)
        np.testing.assert_array_equal(got, np.roll(x, -1, axis=0) + np.float32(1))


class _FakeDeviceArray:
    def __init__(self, shape, ptr, typestr="<f4"):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr,
                                         "strides": None, "version": 3}


def test_device_arrays_must_be_aligned_for_vector_accesses():
    n = 64
    F = Buffer("F", (n,), "float32x4")
    D = Compute("D", (n,), lambda i: F[i] + 1.0)
    k = build(LoopNest([D]), [F, D], target="cuda")
    arrays, _ = k.bind((_FakeDeviceArray((n, 4), 0x10000), _FakeDeviceArray((n, 4), 0x20000)), {})
    assert [a.ptr for a in arrays] == [0x10000, 0x20000]
    with pytest.raises(ValueError, match="argument F .*not a multiple of 16 bytes"):
        k.bind((_FakeDeviceArray((n, 4), 0x10004), _FakeDeviceArray((n, 4), 0x20000)), {})
    with pytest.raises(ValueError, match=r"argument F .*rank 1 .*\(64, 4\)"):
        k.bind((_FakeDeviceArray((n * 4,), 0x10000), _FakeDeviceArray((n, 4), 0x20000)), {})
    nest, A, B = _vectorized(1024, 4)
    k = build(nest, [A, B], target="cuda")
    with pytest.raises(ValueError, match="argument A .*not a multiple of 16 bytes"):
        k.bind((_FakeDeviceArray((1024,), 0x10008), _FakeDeviceArray((1024,), 0x20000)), {})


# ------------------------------------------------------------------------------------
# tests/gpu on its own
# ------------------------------------------------------------------------------------
def test_gpu_tests_collect_on_their_own_when_a_device_is_reported(tmp_path):
    """``pytest tests/gpu`` alone imports the re-exported test modules with their helper
    modules (tests/loopnest/nests.py...) importable; a stand-in driver reports a device, so
    the collection goes past the no-GPU skip."""
    fake = tmp_path / "pycuda"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "driver.py").write_text("def init():\n    pass\n\n\nclass Device:\n    @staticmethod\n"
                                    "    def count():\n        return 1\n")
    root = pathlib.Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(root)]))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:randomly", "tests/gpu"],
                       cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    collected = p.stdout.splitlines()
    assert any("test_backends_cuda.py::test_loopnest_" in ln for ln in collected)
    assert sum("test_codegen_test_vector_types__" in ln for ln in collected) == len(BACKEND_TESTS)
