"""The GPU schedules of the benchmark kernels, checked on every CI run without a GPU.

For every workload of ``bench.kernels.WORKLOADS`` (plus the 128 x 128-tile and float16
matmuls the GPU benchmark times):

1. the CUDA C compiles with nvcc for sm_80, sm_90 and sm_90a (one nvcc run per kernel covering all
   architectures, runs in parallel), and ptxas's registers / shared memory are within limits
   (no spills; the matmul small enough for two 256-thread blocks per SM) -- at the test sizes
   and at the benchmark's own sizes;
2. the GPU-bound nest runs on IREval (GPU axes as serial loops) and agrees with the
   workload's numpy float64 reference;
3. for the matmul and the softmax, the generated CUDA C itself runs on CPU threads
   (``codegen.cuda.emulate``) and agrees too.

And ``bench.gpu``'s harness runs end to end on a fake backend backed by that emulation.
"""
from __future__ import annotations

import concurrent.futures
import functools
import json
import os
import re

import numpy as np
import pytest

from bench import gpu as bench_gpu
from bench.gpu_schedules import (GPU_SCHEDULES, TEST_SIZES, gpu_nest, make_matmul_lowp, matmul_config,
                                 thread_strided)
from bench.kernels import WORKLOADS
from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host

HAVE_NVCC = nvcc_available()
HAVE_EMU = HAVE_NVCC and host_compiler() is not None    # the emulation needs the CUDA headers
ARCHS = ("sm_80", "sm_90", "sm_90a")
requires_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")
requires_emu = pytest.mark.skipif(not HAVE_EMU, reason="g++ or the CUDA headers not found")

BIG128 = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}

# case -> (workload, spec factory, schedule parameters)
CASES = {name: (name, functools.partial(WORKLOADS[name].make, TEST_SIZES[name]), {}) for name in GPU_SCHEDULES}
CASES.update({
    "matmul_tile128": ("matmul", functools.partial(WORKLOADS["matmul"].make, 128), BIG128),
    "matmul_float16": ("matmul", functools.partial(make_matmul_lowp, 128), BIG128),
    "softmax_ragged": ("softmax", functools.partial(WORKLOADS["softmax"].make, (3, 300)), {}),
    "conv2d_batch2": ("conv2d", functools.partial(WORKLOADS["conv2d"].make, (2, 3, 5, 7, 2)), {}),
    "conv2d_one_block": ("conv2d", functools.partial(WORKLOADS["conv2d"].make, (1, 2, 6, 8, 1)), {}),
})
# the kernels bench/gpu.py times, at its sizes (the other workloads' full sizes change only
# constants of the test-size kernels)
FULL = {
    "elementwise_full": ("elementwise", functools.partial(WORKLOADS["elementwise"].make, 1 << 24), {}),
    "softmax_full": ("softmax", functools.partial(WORKLOADS["softmax"].make, (4096, 1024)), {}),
    "matmul_4096": ("matmul", functools.partial(WORKLOADS["matmul"].make, 4096), {}),
    "matmul_float16_4096": ("matmul", functools.partial(make_matmul_lowp, 4096), {}),
}
ALL = {**CASES, **FULL}
# compiled with nvcc: all but the 128-tile matmuls at 128, which differ from the 4096 ones only in K
COMPILED = sorted(set(ALL) - {"matmul_tile128", "matmul_float16"})


@functools.lru_cache(maxsize=None)
def _case(case: str):
    """(spec, scheduled nest, CUDA kernel) of a case, built once per session."""
    name, make, params = ALL[case]
    spec = make()
    nest = gpu_nest(name, spec, **params)
    return spec, nest, build(nest, spec.args, target="cuda")


@functools.lru_cache(maxsize=None)
def _reports() -> dict:
    """ptxas reports of every case for every architecture, one nvcc run each, in parallel."""
    kernels = {c: _case(c)[2] for c in COMPILED}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futs = {c: pool.submit(k.compile, list(ARCHS)) for c, k in kernels.items()}
        return {c: f.result() for c, f in futs.items()}


def _outputs(spec) -> dict:
    return {k: np.zeros(shape, np.float32) for k, shape in spec.out_shapes.items()}


def _check(spec, outs, what):
    for k, want in spec.reference(spec.inputs).items():
        got = outs[k].astype(np.float64)
        err = float(np.max(np.abs(got - want))) / max(1.0, float(np.max(np.abs(want))))
        assert err <= spec.tol, f"{what}: {k} differs from numpy by {err:.3g} (tolerance {spec.tol})"


def test_every_workload_has_a_gpu_schedule_and_a_test_size():
    assert set(GPU_SCHEDULES) == set(WORKLOADS) == set(TEST_SIZES)


# ------------------------------------------------------------------------------------
# 2. IREval
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", sorted(CASES))
def test_gpu_bound_nest_agrees_with_numpy_on_ireval(case):
    spec, nest, kernel = _case(case)
    assert all(ks.bound for ks in kernel.kernels), "every kernel must be bound to blocks/threads"
    outs = _outputs(spec)
    build(nest, spec.args, target="ireval")(**spec.inputs, **outs)
    _check(spec, outs, f"{case} on IREval")


# ------------------------------------------------------------------------------------
# 1. nvcc for sm_80, sm_90 and sm_90a, resources from ptxas
# ------------------------------------------------------------------------------------
@requires_nvcc
@pytest.mark.parametrize("case", COMPILED)
def test_cuda_compiles_for_sm80_sm90_and_sm90a_within_resource_limits(case, record_property):
    spec, nest, kernel = _case(case)
    reports = _reports()[case]
    for arch in ARCHS:
        rep = reports[arch]
        assert set(rep["kernels"]) == {ks.name for ks in kernel.kernels}, rep["log"]
        for ks in kernel.kernels:
            info = rep["kernels"][ks.name]
            # in the JUnit report (--junitxml): registers and static shared memory per kernel
            record_property(f"{arch}:{ks.name}", f"{info['registers']} registers, {info['shared_bytes']} B shared")
            threads = ks.static_threads
            assert threads and threads <= 1024
            assert 0 < info["registers"] <= 255
            assert info["registers"] * threads <= 65536, f"{case}: one block does not fit the register file"
            assert info["spill_stores"] == 0 and info["spill_loads"] == 0, f"{case} spills on {arch}"
            assert info["stack_bytes"] == 0
            n_shared = kernel.source.count("__shared__")
            assert abs(info["shared_bytes"] - ks.shared_bytes) < 16 * max(1, n_shared)
            assert info["shared_bytes"] <= 48 * 1024
            if ALL[case][0] == "matmul":
                # two blocks per SM: 128 registers per thread at most for 256 threads (SIMT),
                # 255 for the 128 threads of the tensor-core kernel (128 accumulators each)
                limit = 128 if threads >= 256 else 255
                assert info["registers"] <= limit, f"{case} uses {info['registers']} registers on {arch}"


# ------------------------------------------------------------------------------------
# the shapes that make the schedules fast (checked on the emitted CUDA C)
# ------------------------------------------------------------------------------------
def test_elementwise_256_threads_each_four_coalesced_elements():
    _, _, k = _case("elementwise_full")
    assert k.launch_dims() == [("k0_Y", ((1 << 24) // 1024, 1, 1), (256, 1, 1))]
    src = k.source
    assert src.count("b_Y[") == 4 and "+ 768)]" in src          # strides of 256 elements
    assert "if (" not in src.split("k0_Y(")[1]                   # a multiple of 1024: no mask


def test_row_kernels_are_one_block_per_row_with_the_row_in_shared_memory():
    spec, _, k = _case("softmax_full")
    assert k.launch_dims() == [("k0_Y", (4096, 1, 1), (32, 1, 1))]    # NORM_THREADS
    src = k.source
    # each thread reads only its own 32 elements of the row: they stay in its own array
    assert "  __align__(16) float b_X_sh[32];" in src and "__shared__ __align__(16) float b_X_sh" not in src
    assert src.count("b_X[") == 1 and src.count("b_Y[") == 1      # X read once, Y written once
    # register partials, then 4 partials (NORM_SECOND), then one thread; for the max and for the sum
    assert len(re.findall(r"float b_\w+_rf_reg\[1\];", src)) == 2
    assert len(re.findall(r"float b_\w+_rf_1_reg\[1\];", src)) == 2
    assert src.count("if ((int)threadIdx.x < 4) {") == 2 and src.count("if (threadIdx.x == 0) {") == 2
    _, _, ln = _case("layernorm")
    assert "  __align__(16) float b_X_sh[16];" in ln.source and ln.source.count("b_X[") == 1    # 512 / 32


def test_row_sum_partials_accumulate_in_registers():
    _, _, k = _case("row_sum")
    src = k.source
    assert k.launch_dims() == [("k0_S", (4, 1, 1), (128, 1, 1))]
    assert "float b_S_rf_reg[1];" in src and "b_S[v_i] = b_S_sh[0];" in src


def test_matmul_keeps_an_8x8_micro_tile_in_registers_with_one_barrier_per_k_tile():
    _, _, k = _case("matmul_4096")
    src = k.source
    assert k.launch_dims() == [("k0_C", (32, 32, 1), (16, 16, 1))]
    assert "float b_acc[64];" in src and "__shared__ __align__(16) float b_acc" not in src
    assert k.kernels[0].shared_bytes == 2 * 2 * 16 * 128 * 4             # two stages of A and B, k-tiles of 16
    kloop = src[src.index("for (int v_ko"):]
    # the next k-tile goes through registers while this one is multiplied: one barrier per k-tile
    assert "float b_ra[8];" in kloop and "float b_rb[8];" in kloop
    assert kloop.count("__syncthreads();") == 1 and src.count("__syncthreads();") == 1
    assert re.search(r"for \(int v_kk\d* = 1; v_kk\d* < 16; \+\+v_kk\d*\)", kloop)   # no barrier inside the k steps
    # each thread's share of a k-tile of A, and of B, in 128-bit global loads (an unrolled loop of two each)
    loads = re.findall(r"\*reinterpret_cast<float4\*>\(&b_r([ab])\[\(v_c\d+ \* 4\)\]\) = "
                       r"\*reinterpret_cast<const float4\*>\(&b_([AB])\[", kloop)
    assert loads == [("a", "A"), ("b", "B")]


def test_single_buffered_matmul_takes_two_barriers_per_k_tile():
    spec = WORKLOADS["matmul"].make(128)
    k = build(gpu_nest("matmul", spec, **BIG128, stages=1), spec.args, target="cuda")
    kloop = k.source[k.source.index("for (int v_ko"):]
    assert k.kernels[0].shared_bytes == 2 * 8 * 128 * 4
    assert kloop.count("__syncthreads();") == 2 and "b_ra" not in k.source


@requires_nvcc
def test_matmul_shared_loads_are_128_bit():
    from codegen.cuda.compile import compile_ptx
    ptx = compile_ptx(_case("matmul_tile128")[2].source, "sm_90")
    assert len(re.findall(r"ld\.shared\.v4\.f32", ptx)) == 8 * 4    # 8 k steps x (2 of A + 2 of B)
    assert not re.search(r"ld\.shared\.f32", ptx)


def test_float16_matmul_runs_on_tensor_cores_and_sums_in_float32():
    _, _, k = _case("matmul_float16_4096")
    src = k.source
    assert "__shared__ __align__(16) __half b_As[9216];" in src and "float b_acc[64];" in src
    assert "const __half* __restrict__ b_A" in src and "float* b_C)" in src     # written: no __restrict__
    assert "tc_ldmatrix_x4(" in src and "tc_ldmatrix_x2_trans(" in src and src.count("tc_mma_f16(b_acc[") == 64


def test_transpose_stores_are_coalesced():
    _, _, k = _case("transpose")                 # A is 40 x 72, T is 72 x 40
    assert k.launch_dims() == [("k0_T", (2, 3, 1), (32, 8, 1))]
    # threadIdx.x (v_j_inner) runs along T's rows: unit stride in the store index
    assert re.search(r"b_T\[\(+v_i_outer \* 1280\) \+ \(v_i_inner_inner \* 40\)\) \+ \(v_j_outer \* 32\)\) "
                     r"\+ v_j_inner\)", k.source)


def test_conv2d_stages_the_padded_window_in_shared_memory():
    _, _, k = _case("conv2d")                    # 1 x 4 x 8 x 12 -> 4 channels
    # a block per pair of output channels, a thread's two accumulators in registers
    assert k.launch_dims() == [("k0_Y", (1, 2, 1), (12, 8, 1))]
    assert "__shared__ __align__(16) float b_P_sh[140];" in k.source      # (8 + 2) x (12 + 2)
    assert "float b_acc[2];" in k.source
    ci_loop = k.source[k.source.index("for (int v_ci"):]
    assert ci_loop.count("__syncthreads();") == 2                 # window written, window read


@requires_emu
@pytest.mark.parametrize("params", [dict(channels=1, pixels=1), dict(channels=8, pixels=4), dict(channels=3, pixels=3)])
def test_conv2d_register_blocks_on_the_host_emulation(params):
    spec = WORKLOADS["conv2d"].make((1, 5, 7, 9, 6))
    k = build(gpu_nest("conv2d", spec, **params), spec.args, target="cuda")
    assert any(p.buffer.name == "acc" and p.scope == "local" for p in k.module.plan.placements.values())
    out = np.zeros(spec.out_shapes["Y"], np.float32)
    run_on_host(k, X=spec.inputs["X"].copy(), W=spec.inputs["W"].copy(), Y=out)
    np.testing.assert_allclose(out, spec.reference(spec.inputs)["Y"], rtol=1e-4, atol=1e-4)


def test_thread_strided_spreads_a_loop_over_threads():
    from te import Buffer, Compute
    from loopnest import LoopNest
    A = Buffer("A", (1000,), "float32")
    B = Compute("B", (1000,), lambda i: A[i] + 1.0)
    nest = LoopNest([B])
    t = thread_strided(nest, nest.get_loops_for(B)[0], 256)
    assert t.kind == "gpu_thread" and t.extent == 256
    a = np.arange(1000, dtype=np.float32)
    b = np.zeros_like(a)
    build(nest, [A, B], target="ireval")(a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_matmul_config_picks_tiles_by_problem_size():
    assert matmul_config(4096, 4096, 4096) == {**BIG128, "BK": 16, "stages": 2, "vector": 4}
    assert matmul_config(512, 512, 512)["BM"] == 64            # 16 tiles of 128 would idle most SMs
    assert matmul_config(96, 96, 12) == {"BM": 32, "BN": 32, "BK": 6, "TM": 2, "TN": 2, "stages": 2}
    with pytest.raises(ValueError, match="multiples of 32"):
        matmul_config(100, 64, 64)


# ------------------------------------------------------------------------------------
# 3. the generated CUDA C on CPU threads
# ------------------------------------------------------------------------------------
@requires_emu
@pytest.mark.parametrize("case", ["matmul", "matmul_tile128", "softmax", "layernorm"])
def test_generated_cuda_runs_on_host_emulation(case):
    spec, _, kernel = _case(case)
    outs = _outputs(spec)
    run_on_host(kernel, **spec.inputs, **outs)
    _check(spec, outs, f"{case} (emulated CUDA C)")


@requires_emu
@pytest.mark.parametrize("tiles", [dict(stages=1, vector=1), dict(stages=1, vector=4), dict(stages=2, vector=1),
                                   dict(stages=2, vector=2)])
def test_the_register_tiled_matmul_runs_on_host_emulation_buffered_and_read_either_way(tiles):
    """The CUDA C of the float32 register-tiled tree, single- or double-buffered, in 32-,
    64- or 128-bit loads (the bench's own configuration is the ``matmul`` case above)."""
    spec = WORKLOADS["matmul"].make(64)
    kernel = build(gpu_nest("matmul", spec, BM=64, BN=64, BK=16, TM=4, TN=4, **tiles), spec.args, target="cuda")
    k_loop = kernel.source[kernel.source.index("for (int v_ko"):]
    assert k_loop.count("__syncthreads();") == 3 - tiles["stages"]
    assert ("float4" in k_loop) == (tiles["vector"] == 4) and ("float2" in k_loop) == (tiles["vector"] == 2)
    outs = _outputs(spec)
    run_on_host(kernel, **spec.inputs, **outs)
    _check(spec, outs, f"register-tiled matmul {tiles} (emulated CUDA C)")


# ------------------------------------------------------------------------------------
# bench.gpu's harness on a fake backend (numpy arrays, kernels run by the emulation)
# ------------------------------------------------------------------------------------
class _EmulatedBackend(bench_gpu.Backend):
    name = "host-emulation"

    def device_info(self):
        return {"name": "CPU emulation", "arch": "sm_90", "launcher": self.name}

    def arch(self):
        return "sm_90"

    def to_device(self, a):
        return np.array(a, copy=True)

    def empty(self, shape, dtype):
        return np.zeros(shape, dtype)

    def to_host(self, d):
        return np.array(d, copy=True)

    def copy(self, dst, src):
        dst[...] = src

    def load(self, kernel, arrays):
        return lambda: run_on_host(kernel, **arrays)

    def time(self, fn, repeats=10):
        fn()
        return bench_gpu.GpuTiming(1e-3, 1e-3, 1)


@requires_emu
def test_bench_gpu_entries_run_and_report_on_an_emulated_device(tmp_path):
    # the sizes of the IREval cases: the emulation reuses their compiled kernels
    sizes = {"device_copy": 1 << 12, "elementwise": TEST_SIZES["elementwise"], "matmul_float32": 64,
             "matmul_float16": 64, "matmul_bfloat16": 64, "matmul_tf32": 64, "softmax": TEST_SIZES["softmax"],
             "transpose": TEST_SIZES["transpose"], "row_sum": TEST_SIZES["row_sum"]}
    rows = bench_gpu.run(_EmulatedBackend(), sizes, only=list(sizes), repeats=1, keep=True, log=lambda s: None)
    by = {r["name"]: r for r in rows}
    assert [r["name"] for r in rows] == list(sizes)
    assert all("error" not in r and r["correct"] for r in rows), [r.get("error") for r in rows]
    spec = WORKLOADS["elementwise"].make(TEST_SIZES["elementwise"])
    np.testing.assert_allclose(by["elementwise"]["output"], spec.reference(spec.inputs)["Y"], rtol=1e-5, atol=1e-6)
    assert by["elementwise"]["gbs"] == pytest.approx(spec.bytes / 1e-3 / 1e9)
    assert by["elementwise"]["ratio"] == pytest.approx(by["elementwise"]["gbs"] / by["device_copy"]["gbs"])
    spec = WORKLOADS["matmul"].make(64)
    np.testing.assert_allclose(by["matmul_float32"]["output"], spec.inputs["A"].astype(np.float64) @ spec.inputs["B"],
                               rtol=1e-4, atol=1e-4)
    assert by["matmul_float32"]["tflops"] == pytest.approx(2 * 64 ** 3 / 1e-3 / 1e12)
    for r in rows:   # no CuPy / PyTorch here: no peers, so the aims cannot be judged
        if r["name"] in bench_gpu.AIMS and r.get("ratio") is None:
            assert r["aim_met"] is None
    table = bench_gpu.format_table(rows, {"name": "CPU emulation", "arch": "sm_90", "launcher": "emu"})
    assert "matmul_float16" in table and "ERROR" not in table
    json.dumps(bench_gpu._jsonable(rows), default=str)


def test_bench_gpu_entry_errors_are_reported_not_raised():
    class Broken(_EmulatedBackend):
        def load(self, kernel, arrays):
            raise RuntimeError("launch failed")
    rows = bench_gpu.run(Broken(), {"elementwise": 1024, "device_copy": 1024}, only=["elementwise"],
                         repeats=1, log=lambda s: None)
    assert rows[0]["error"] == "RuntimeError: launch failed"
    assert "ERROR RuntimeError: launch failed" in bench_gpu.format_table(rows, {})


def test_bench_gpu_exits_cleanly_without_a_gpu(capsys, tmp_path):
    try:
        bench_gpu.find_backend()
    except bench_gpu.NoGPU:
        pass
    else:
        pytest.skip("a GPU is available here")
    assert bench_gpu.main(["--out", str(tmp_path)]) == 0
    assert "Nothing to benchmark" in capsys.readouterr().out
    assert not (tmp_path / "gpu.json").exists()


# ------------------------------------------------------------------------------------
# bench.gpu's CuPy backend on a fake ``cupy`` whose device memory is host memory and whose
# kernel launches run the generated CUDA C in the host emulation
# ------------------------------------------------------------------------------------
class _FakeCupyArray:
    def __init__(self, a: np.ndarray):
        self.a = np.ascontiguousarray(a)
        self.shape, self.dtype, self.nbytes = self.a.shape, self.a.dtype, self.a.nbytes
        self.data = type("Ptr", (), {"ptr": self.a.ctypes.data})()

    @property
    def __cuda_array_interface__(self):
        return {"data": (self.a.ctypes.data, False), "shape": self.a.shape, "typestr": self.a.dtype.str,
                "strides": None, "version": 3}


def _fake_cupy(kernels: dict, launches: list):
    """A module with the parts of CuPy bench.gpu uses; ``kernels`` maps a source-hash
    prefix (the cubin file name) to the CudaKernel whose emulation runs its launches."""
    import ctypes
    import types
    from codegen.cuda import emulate

    cp = types.ModuleType("cupy")
    cp.__version__ = "fake"
    cp.uint8 = np.uint8
    cp.asarray = lambda a: _FakeCupyArray(np.array(a, copy=True))
    cp.empty = lambda shape, dtype: _FakeCupyArray(np.zeros(shape, dtype))
    cp.asnumpy = lambda d: d.a.copy()

    def matmul(x, y, out=None):
        r = (x.a.astype(np.float32) @ y.a.astype(np.float32)).astype(x.dtype)
        if out is None:
            return _FakeCupyArray(r)
        out.a[...] = r
        return out
    cp.matmul = matmul

    class Event:
        def record(self):
            pass

        def synchronize(self):
            pass

    class RawModule:
        def __init__(self, path):
            self.kernel = kernels[os.path.basename(path).split("_")[0]]
            self.lib = ctypes.CDLL(emulate._build(self.kernel))

        def get_function(self, name):
            fn = getattr(self.lib, f"tc_launch_{name}")

            class RawKernel:
                max_dynamic_shared_size_bytes = 0

                def __call__(self, grid, block, args, shared_mem=0):
                    # as the driver: beyond 48 KiB only after the kernel opted in
                    assert shared_mem <= max(self.max_dynamic_shared_size_bytes, 48 * 1024)
                    cp.dynamic_shared.append(shared_mem)
                    launches.append((name, grid, block))
                    vals = [a.a.ctypes.data if isinstance(a, _FakeCupyArray) else int(a) for a in args]
                    fn((ctypes.c_longlong * len(vals))(*vals), (ctypes.c_uint * 3)(*grid),
                       (ctypes.c_uint * 3)(*block))
            return RawKernel()

    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 1, memcpyDeviceToDevice=3,
        getDeviceProperties=lambda i: {"name": b"Fake H100", "multiProcessorCount": 132, "totalGlobalMem": 1 << 36,
                                       "sharedMemPerBlockOptin": 227 * 1024},
        memcpyAsync=lambda dst, src, n, kind, stream: ctypes.memmove(dst, src, n))
    cp.cuda = types.SimpleNamespace(
        runtime=runtime, Event=Event, get_elapsed_time=lambda s, e: 0.5,
        Device=lambda: types.SimpleNamespace(id=0, compute_capability="90"),
        get_current_stream=lambda: types.SimpleNamespace(ptr=0))
    cp.RawModule = RawModule
    cp.dynamic_shared = []          # the shared_mem of every launch
    return cp


@requires_emu
def test_bench_gpu_cupy_backend_launches_kernels_with_more_than_48_kib_of_shared_memory(monkeypatch):
    import sys
    from codegen.cuda.compile import source_hash
    from codegen.cuda.mma_matmul import mma_matmul_example
    kernels = {}
    fake = _fake_cupy(kernels, [])
    monkeypatch.setitem(sys.modules, "cupy", fake)
    be = bench_gpu.find_backend()
    assert be.max_shared_bytes() == 227 * 1024
    ex = mma_matmul_example(128, 128, 128, BM=128, BN=128, BK=64, WM=64, WN=32, stages=2, prefetch="shared")
    kernel = build(ex.nest, ex.args, target="cuda", max_shared_bytes=be.max_shared_bytes())
    assert kernel.kernels[0].dynamic_shared == 71680
    kernels[source_hash(kernel.source)[:24]] = kernel
    arrays, expected = ex.make(np.random.default_rng(0))
    dev = {k: be.to_device(v) for k, v in arrays.items()}
    be.load(kernel, dev)()
    assert fake.dynamic_shared == [71680]
    np.testing.assert_allclose(be.to_host(dev["C"]), expected["C"], rtol=1e-5, atol=1e-4)


@requires_emu
def test_bench_gpu_cupy_backend_on_a_fake_cupy(monkeypatch):
    import sys
    from codegen.cuda.compile import source_hash
    kernels, launches = {}, []
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(kernels, launches))
    real_build = bench_gpu.build

    def build_and_register(nest, args, target, **options):
        k = real_build(nest, args, target=target, **options)
        kernels[source_hash(k.source)[:24]] = k
        return k
    monkeypatch.setattr(bench_gpu, "build", build_and_register)
    monkeypatch.setattr(bench_gpu, "_torch_cuda", lambda: None)     # the peers are the fake CuPy's
    be = bench_gpu.find_backend()
    assert isinstance(be, bench_gpu.CupyBackend)
    assert be.device_info()["name"] == "Fake H100" and be.arch() == "sm_90"
    sizes = {"device_copy": 1 << 12, "elementwise": TEST_SIZES["elementwise"], "matmul_float32": 64,
             "matmul_float16": 64, "matmul_bfloat16": 64, "softmax": TEST_SIZES["softmax"]}
    rows = bench_gpu.run(be, sizes, only=list(sizes), repeats=2, keep=True, log=lambda s: None)
    by = {r["name"]: r for r in rows}
    assert all("error" not in r and r["correct"] for r in rows), [r.get("error") for r in rows]
    assert ("k0_C", (1, 1, 1), (16, 16, 1)) in launches and ("k0_Y", (3, 1, 1), (256, 1, 1)) in launches
    # every event pair reads 0.5 ms: one call "takes" 0.5 ms, so samples batch 4 calls
    assert all(r["time_s"] == pytest.approx(0.5e-3 / 4) for r in rows)
    # the matmul peer is "cuBLAS" through the fake CuPy, with the same product
    assert by["matmul_float32"]["peer"].startswith("cuBLAS via CuPy")
    assert by["matmul_float32"]["ratio"] == pytest.approx(1.0)
    assert by["matmul_float32"]["peer_max_rel_err"] < 1e-5
    # the fake has no cupy.exp: a failing peer is reported, our result still counts
    assert by["softmax"]["peer"].startswith("peer_softmax failed: AttributeError") and by["softmax"]["ratio"] is None
    spec = WORKLOADS["softmax"].make(TEST_SIZES["softmax"])
    np.testing.assert_allclose(by["softmax"]["output"], spec.reference(spec.inputs)["Y"], rtol=1e-5, atol=1e-7)


def test_the_stencil_takes_one_kernel_per_run_of_three_stages():
    spec = WORKLOADS["stencil"].make(TEST_SIZES["stencil"])
    fused = build(gpu_nest("stencil", spec), spec.args, target="cuda")
    apart = build(gpu_nest("stencil", spec, fuse=False), spec.args, target="cuda")
    assert (len(fused.module.kernels), len(apart.module.kernels)) == (5, 13)
    if HAVE_EMU:
        out = np.zeros(spec.out_shapes["S13"], np.float32)
        run_on_host(fused, A=spec.inputs["A"].copy(), S13=out)
        np.testing.assert_allclose(out, spec.reference(spec.inputs)["S13"], rtol=1e-4, atol=1e-5)


def test_the_convolution_peer_is_also_timed_with_cudnn_tf32_off(monkeypatch):
    """PyTorch computes a float32 convolution in TF32 by default; ``peer_torch`` times the
    workloads of ``CUDNN_WORKLOADS`` eagerly a second time with TF32 off (the precision ours
    computes in), and puts the setting back."""
    import time
    from types import SimpleNamespace

    class Event:
        def __init__(self, enable_timing=False):
            self.t = 0.0

        def record(self):
            self.t = time.perf_counter()

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return max(end.t - self.t, 1e-6) * 1e3
    cudnn = SimpleNamespace(allow_tf32=True)
    torch = SimpleNamespace(__version__="2.11.0+cu130", backends=SimpleNamespace(cudnn=cudnn),
                            cuda=SimpleNamespace(Event=Event))
    seen = set()
    spec = SimpleNamespace(inputs={}, torch_fn=lambda t, x: lambda: seen.add(torch.backends.cudnn.allow_tf32))
    monkeypatch.setattr(bench_gpu, "_torch_cuda", lambda: torch)
    assert bench_gpu.CUDNN_WORKLOADS == {"conv2d"}
    peers = bench_gpu.peer_torch(spec, 2, torch_compile=False, cudnn_float32=True)
    assert [label for label, _ in peers] == ["PyTorch 2.11.0 eager", "PyTorch 2.11.0 eager, cuDNN TF32 off"]
    assert seen == {True, False} and torch.backends.cudnn.allow_tf32 is True
    assert [label for label, _ in bench_gpu.peer_torch(spec, 2, torch_compile=False)] == ["PyTorch 2.11.0 eager"]


def test_bench_gpu_passes_matmul_params_to_the_matmul_entries_only(monkeypatch):
    from bench import gpu as bench_gpu
    seen = {}

    def entry_matmul(be, n, dtype, repeats, keep, **params):
        seen[dtype] = params
        return {"name": f"matmul_{dtype}", "time_s": 1.0}
    monkeypatch.setattr(bench_gpu, "entry_matmul", entry_matmul)
    rows = bench_gpu.run(backend=object(), only=["matmul_float16", "matmul_float32"], log=lambda s: None,
                         matmul_params={"wgmma": True, "stages": 4})
    assert seen == {"float16": {"wgmma": True, "stages": 4}, "float32": {"wgmma": True, "stages": 4}}
    assert [r["name"] for r in rows] == ["matmul_float16", "matmul_float32"]
    with pytest.raises(SystemExit):
        bench_gpu.main(["--matmul-params", "[4]"])


@requires_emu
def test_bench_tf32_matmul_on_sm90_transposes_b_then_takes_the_warpgroup_tree():
    class Hopper(_EmulatedBackend):
        def max_shared_bytes(self):
            return 227 * 1024
    # tensor_cores=True is what tf32 means; max_shared_bytes is what the two kernels are built with
    row = bench_gpu.entry_matmul(Hopper(), 256, "tf32", repeats=1, wgmma=True, BN=128, stages=2,
                                 tensor_cores=True, max_shared_bytes=200 * 1024)
    assert row["correct"] and 0 < row["max_rel_err"] < 1e-3, row        # B rounded to tf32, A exact
    assert [name for name, _, _ in row["launch"]] == ["k0_BT", "k0_C"]
    assert row["schedule"].startswith("tf32 warpgroup MMA")


def test_bench_tf32_matmul_refuses_what_it_cannot_honour():
    """tf32 without the tensor cores is the float32 matmul, and a tile the warpgroup tree does
    not take is named: ValueErrors that say what to pass, before anything is built."""
    from bench.gpu_schedules import WGMMA_TF32_TILE_NAMES, tf32_wgmma_matmul
    from te import Buffer
    with pytest.raises(ValueError, match=r"tensor_cores=False is a float32 SIMT matmul: pass dtype='float32'"):
        bench_gpu.entry_matmul(object(), 64, "tf32", tensor_cores=False)
    A, B = Buffer("A", (128, 64), "float32"), Buffer("B", (64, 128), "float32")
    with pytest.raises(ValueError, match=r"unknown tile parameter\(s\) BQ, WM; it takes BK, BM, BN, ahead, stages, "
                                         r"swizzle"):
        tf32_wgmma_matmul(A, B, BQ=64, WM=32)
    assert WGMMA_TF32_TILE_NAMES == {"BM", "BN", "BK", "stages", "ahead", "swizzle"}
