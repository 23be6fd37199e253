"""CUDA backend without a GPU: emission (golden substrings), nvcc compiles for sm_80 and
sm_90 with ptxas resource reports, refusals, name sanitisation, device-array binding, and
the GPU-bound example schedules run on IREval and (where g++ and the CUDA headers exist)
as the generated CUDA C itself on CPU threads (``codegen.cuda.emulate``).

nvcc runs are few and cached per source within the session: every example is compiled once
for both architectures (one nvcc call each, in parallel).
"""
from __future__ import annotations

import concurrent.futures
import functools
import os
import re

import numpy as np
import pytest

from codegen import BuildError, build
from codegen.cuda import CudaKernel, compile as cuda_compile, examples, nvcc_available
from codegen.cuda.emulate import EmulationError, host_compiler, run_on_host
from codegen.cuda.launch import DeviceArray, LaunchLimitError
from loopnest import LoopNest, ScheduleError
from loopnest.stmt import Block, For, ForKind, Store
from te import Buffer, Compute, Reduce, Sum, Var, float32, int32
from te.expr import FloatImm

HAVE_NVCC = nvcc_available()
HAVE_EMU = host_compiler() is not None and HAVE_NVCC  # the emulation needs the CUDA headers
ARCHS = ("sm_80", "sm_90")
requires_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")
requires_emu = pytest.mark.skipif(not HAVE_EMU, reason="g++ or the CUDA headers not found")

EXAMPLE_NAMES = ["elementwise", "elementwise_2d", "elementwise_tail", "softmax_rows", "softmax_block",
                 "matmul_tiled_float32", "matmul_tiled_float16", "matmul_regtile_float32", "lowp_float16",
                 "lowp_bfloat16",
                 "integer_ops", "float_to_int", "math_float32", "math_float64"]


@functools.lru_cache(maxsize=None)
def _examples() -> dict:
    exs = {ex.name: ex for ex in examples.ALL_EXAMPLES()}
    assert sorted(exs) == sorted(EXAMPLE_NAMES)
    return exs


@functools.lru_cache(maxsize=None)
def _kernel(name: str) -> CudaKernel:
    ex = _examples()[name]
    return build(ex.nest, ex.args, target="cuda")


@functools.lru_cache(maxsize=None)
def _reports() -> dict:
    """nvcc reports of every example for sm_80 and sm_90, compiled concurrently."""
    kernels = {n: _kernel(n) for n in EXAMPLE_NAMES}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futs = {n: pool.submit(k.compile, list(ARCHS)) for n, k in kernels.items()}
        return {n: f.result() for n, f in futs.items()}


def _check_on_ireval_and_host(nest, params, kernel, a, out, ref, rtol=0.0, atol=0.0):
    """Run ``nest`` on IREval, then (where it can be emulated) ``kernel``'s CUDA C on the host,
    each time from input ``a`` into a zeroed ``out``, which must then equal ``ref`` (exactly,
    unless tolerances are given)."""
    runs = [("IREval", build(nest, params, target="ireval"))]
    if HAVE_EMU:
        runs.append(("host emulation", lambda *xs: run_on_host(kernel, *xs)))
    for what, run in runs:
        out[...] = 0
        run(a, out)
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol, err_msg=what)


# ------------------------------------------------------------------------------------
# the example schedules: IREval, nvcc, emulation
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_gpu_bound_nest_agrees_with_numpy_on_ireval(name):
    ex = _examples()[name]
    arrays, expected = ex.make(np.random.default_rng(0))
    build(ex.nest, ex.args, target="ireval")(**arrays)
    for out, ref in expected.items():
        ex.check(out, arrays[out], ref)


@requires_nvcc
@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_compiles_for_sm80_and_sm90(name):
    k = _kernel(name)
    reports = _reports()[name]
    for arch in ARCHS:
        rep = reports[arch]
        assert set(rep["kernels"]) == {ks.name for ks in k.kernels}, rep["log"]
        for ks in k.kernels:
            info = rep["kernels"][ks.name]
            assert 0 < info["registers"] <= 255
            # the static shared memory ptxas allocates is what the emitter declared (up to
            # alignment padding)
            assert abs(info["shared_bytes"] - ks.shared_bytes) < 16 * max(1, k.source.count("__shared__"))
            assert info["barriers"] == (1 if "__syncthreads" in k.source.split(f" {ks.name}(")[1]
                                        .split("\n}\n")[0] else 0)


@requires_emu
@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_generated_cuda_runs_on_host_emulation(name):
    """The emitted CUDA C itself (threads, guards, barriers, helpers) agrees with numpy;
    integer and low-precision results are bit-identical to IREval."""
    ex = _examples()[name]
    arrays, expected = ex.make(np.random.default_rng(1))
    ref_arrays = {k: v.copy() for k, v in arrays.items()}
    run_on_host(_kernel(name), **arrays)
    build(ex.nest, ex.args, target="ireval")(**ref_arrays)
    for out, ref in expected.items():
        ex.check(out, arrays[out], ref)
        if arrays[out].dtype.kind in "iu" or arrays[out].dtype.itemsize < 4:
            assert arrays[out].tobytes() == ref_arrays[out].tobytes(), f"{name}:{out} differs from IREval"


# ------------------------------------------------------------------------------------
# golden emission
# ------------------------------------------------------------------------------------
def test_elementwise_binds_blocks_and_threads_with_launch_time_grid():
    k = _kernel("elementwise")
    src = k.source
    assert 'extern "C" __global__ void __launch_bounds__(128) k0_Y(' in src
    assert "(int)blockIdx.x" in src and "(int)threadIdx.x" in src
    assert "expf(" in src and "__expf" not in src
    assert k.launch_dims(N=1000) == [("k0_Y", (8, 1, 1), (128, 1, 1))]
    assert k.launch_dims(N=1) == [("k0_Y", (1, 1, 1), (128, 1, 1))]
    assert k.launch_dims(N=0)[0][1] == (0, 1, 1)
    # the mask compares with wrapping arithmetic; the indices of the (N,) buffers are 64-bit
    assert "b_Y[((((long long)(v_i_outer)) * 128LL) + ((long long)(v_i_inner)))]" in src


def test_fast_math_selects_fast_intrinsics_only_when_asked():
    ex = examples.elementwise()
    fast = build(ex.nest, ex.args, target="cuda", fast_math=True)
    assert "__expf(" in fast.source
    assert "__expf(" not in _kernel("elementwise").source


def test_tiled_2d_grid_uses_y_axes():
    k = _kernel("elementwise_2d")
    assert "blockIdx.y" in k.source and "threadIdx.y" in k.source
    assert k.launch_dims(R=45, C=70) == [("k0_Y", (3, 6, 1), (32, 8, 1))]


def test_tail_kernel_block_size_is_evaluated_at_launch():
    k = _kernel("elementwise_tail")
    assert [ks.name for ks in k.kernels] == ["k0_Y", "k1_Y"]
    dims = k.launch_dims(N=1000)
    assert dims[0][1:] == ((7, 1, 1), (128, 1, 1))
    assert dims[1][1:] == ((1, 1, 1), (1000 % 128, 1, 1))
    assert k.launch_dims(N=1024)[1][2] == (0, 1, 1)      # an empty tail launches nothing


def test_matmul_uses_shared_tiles_and_barriers_in_the_right_places():
    k = _kernel("matmul_tiled_float32")
    src = k.source
    for b in ("b_As", "b_Bs"):
        assert re.search(rf"__shared__ __align__\(16\) float {b}\[256\];", src)
    # each thread only touches acc[ty, tx]: promoted to a register
    assert "float b_acc[1];" in src and "b_acc[0] = 0.0f;" in src
    assert k.kernels[0].shared_bytes == 2 * 256 * 4
    assert k.launch_dims() == [("k0_C", (3, 4, 1), (16, 16, 1))]
    body = src[src.index("for (int v_ko"):]
    # in the K loop: barrier, copy A, copy B, barrier, compute
    first = body.index("__syncthreads();")
    second = body.index("__syncthreads();", first + 1)
    order = [first, body.index("b_As[((v_ty"), body.index("b_Bs[((v_ty"), second, body.index("#pragma unroll")]
    assert order == sorted(order)
    assert body[body.index("b_Bs[((v_ty"):body.index("#pragma unroll")].count("__syncthreads();") == 1
    assert src.count("__syncthreads();") == 2


def test_register_tiled_matmul_keeps_each_threads_micro_tile_in_registers():
    k = _kernel("matmul_regtile_float32")
    src = k.source
    assert "float b_acc[16];" in src and "__shared__ __align__(16) float b_acc" not in src
    assert re.search(r"b_acc\[\(\(v_i\d+ \* 4\) \+ v_j\d+\)\] = \(b_acc", src)
    assert k.kernels[0].shared_bytes == 2 * 512 * 4
    # index arithmetic on non-negative values uses plain C division
    assert "tc_floordiv" not in src and re.search(r"\(v_tx\d+ / 8\)", src)


def test_buffers_exchanged_between_threads_are_not_promoted():
    """S[ty, tx] is written by thread (ty, tx) and read transposed: it must stay shared,
    with a barrier between the two thread loops."""
    A = Buffer("A", (16, 16), float32)
    Y = Compute("Y", (16, 16), lambda i, j: A[j, i])
    S = Buffer("S", (16, 16), float32)
    ty1, tx1, ty2, tx2 = Var("ty1"), Var("tx1"), Var("ty2"), Var("tx2")

    def threads(ty, tx, body):
        return For(ty, 0, 16, Block([For(tx, 0, 16, Block(body), ForKind.GPU_THREAD, 0)]), ForKind.GPU_THREAD, 1)
    root = For(Var("b"), 0, 1, Block([threads(ty1, tx1, [Store(S, (ty1, tx1), A[ty1, tx1])]),
                                      threads(ty2, tx2, [Store(Y, (ty2, tx2), S[tx2, ty2])])]),
               ForKind.GPU_BLOCK, 0)
    nest = LoopNest([Y])
    nest.add_buffer(S)
    nest.root = Block((root,))
    k = build(nest, [A, Y], target="cuda")
    assert "__shared__ __align__(16) float b_S[256];" in k.source and k.source.count("__syncthreads();") == 1
    a = np.arange(256, dtype=np.float32).reshape(16, 16)
    y = np.zeros_like(a)
    _check_on_ireval_and_host(nest, [A, Y], k, a, y, a.T)


@pytest.mark.parametrize("unrolled", [False, True])
def test_a_threads_elements_spread_over_a_buffer_are_packed_into_registers(unrolled):
    """S[c, tx] (channel outermost) holds 4 elements per thread, 16 apart: packed into a
    4-element array per thread, indexed by c (a serial loop: strides) or by slot (the loops
    unrolled into copies: constant indices)."""
    A = Buffer("A", (4, 16), float32)
    Y = Compute("Y", (4, 16), lambda c, x: A[c, x])
    S = Buffer("S", (4, 16), float32)
    tx1, tx2, c1, c2 = Var("tx1"), Var("tx2"), Var("c1"), Var("c2")

    def per_thread(tx, c, body):
        return For(tx, 0, 16, Block([For(c, 0, 4, Block([body]))]), ForKind.GPU_THREAD, 0)
    root = For(Var("b"), 0, 1, Block([per_thread(tx1, c1, Store(S, (c1, tx1), A[c1, tx1] * 2.0)),
                                      per_thread(tx2, c2, Store(Y, (c2, tx2), S[c2, tx2] + 1.0))]),
               ForKind.GPU_BLOCK, 0)
    nest = LoopNest([Y])
    nest.add_buffer(S)
    nest.root = Block((root,))
    if unrolled:
        nest.unroll("c1")
        nest.unroll("c2")
    k = build(nest, [A, Y], target="cuda")
    p = next(p for p in k.module.plan.placements.values() if p.buffer is S)
    assert (p.scope, p.private_size) == ("local", 4)
    assert (p.private_slots is not None, p.private_strides is not None) == (unrolled, not unrolled)
    assert "float b_S[4];" in k.source and "__syncthreads" not in k.source
    a = np.arange(64, dtype=np.float32).reshape(4, 16)
    y = np.zeros_like(a)
    _check_on_ireval_and_host(nest, [A, Y], k, a, y, a * 2 + 1)


def test_softmax_block_single_thread_sections_are_guarded_and_synchronised():
    src = _kernel("softmax_block").source
    assert src.count("if (threadIdx.x == 0) {") == 2
    assert src.count("__syncthreads();") == 4
    # the partials are written by the thread loop, then combined by thread 0 after a barrier
    first = src.index("b_pmax[v_t1] = ")
    assert src.index("__syncthreads();", first) < src.index("if (threadIdx.x == 0)", first)


def test_top_level_intermediates_are_launcher_allocated_globals():
    k = _kernel("softmax_rows")
    assert [b.name for b in k.module.scratch] == ["mx", "e", "s"]
    assert len(k.kernels) == 4
    assert "float* b_mx," in k.source and "__shared__" not in k.source     # written: no __restrict__
    assert [a.kind for a in k.kernels[1].args] == ["param", "scratch", "scratch", "size"]


def test_low_precision_types_use_cuda_headers_and_round_every_operation():
    f16 = _kernel("lowp_float16").source
    assert "#include <cuda_fp16.h>" in f16 and "__float2half_rn" in f16
    assert "tc_rnd_f16((tc_f16_ld(b_X[" in f16          # X * X rounded to float16
    assert "const __half* __restrict__ b_X" in f16
    bf16 = _kernel("lowp_bfloat16").source
    assert "#include <cuda_bf16.h>" in bf16 and "__float2bfloat16_rn" in bf16 and "__nv_bfloat16* __restrict__" in bf16


def test_integer_semantics_use_helpers_for_values_and_plain_c_for_indices():
    src = _kernel("integer_ops").source
    assert "tc_floordiv<int>(" in src and "tc_floormod<int>(" in src
    assert "tc_div" not in src and "tc_mod<" not in src    # guard_int_division leaves no divisor -1
    assert "tc_mul<int, unsigned int>(" in src
    assert "((signed char)(" in src                        # narrowing cast wraps
    for m in re.finditer(r"b_\w+\[([^\]]*)\]", src):
        assert "tc_" not in m.group(1), m.group(0)
    f2i = _kernel("float_to_int").source
    assert "tc_f2i<int, float>(" in f2i and "tc_f2i<unsigned char, float>(" in f2i
    assert "tc_f2i<long long, double>(" in f2i


def test_math_intrinsics_map_to_precise_cuda_functions():
    s32, s64 = _kernel("math_float32").source, _kernel("math_float64").source
    for fn in ("expf(", "exp2f(", "logf(", "log2f(", "sqrtf(", "rsqrtf(", "tanhf(", "fabsf(", "floorf(",
               "ceilf(", "rintf(", "sinf(", "cosf(", "erff(", "powf(", "isnan(", "tc_sigmoid(",
               "tc_floormodf("):
        assert fn in s32, fn
    for fn in ("exp(", "rint(", "erf(", "rsqrt(", "pow("):
        assert fn in s64, fn
    assert "expf(" not in s64.split("// k0")[1]


def test_unbound_nest_is_a_single_thread_kernel():
    A = Buffer("A", (5,), float32)
    B = Compute("B", (5,), lambda i: A[i] + 1.0)
    k = build(LoopNest([B]), [A, B], target="cuda")
    assert "single-thread kernel" in k.source and "__launch_bounds__(1)" in k.source
    assert k.launch_dims() == [("k0_B", (1, 1, 1), (1, 1, 1))]


def _bound_nest(extents, body_fn, block_extent=4, outputs=None, intermediates=()):
    """A hand-built nest: one gpu_block loop around sibling thread loops (axis 0)."""
    b = Var("b")
    loops = []
    for k, ext in enumerate(extents):
        t = Var(f"t{k}")
        loops.append(For(t, 0, ext, Block(body_fn(k, b, t)), ForKind.GPU_THREAD, 0))
    nest = LoopNest(outputs)
    for buf in intermediates:
        nest.add_buffer(buf)
    nest.root = Block((For(b, 0, block_extent, Block(loops), ForKind.GPU_BLOCK, 0),))
    return nest


def test_shorter_thread_loops_on_an_axis_are_guarded():
    A = Buffer("A", (4, 64), float32)
    Y = Compute("Y", (4, 64), lambda i, j: A[i, j] * 2.0)
    def body(k, b, t):  # loop 0 writes all 64 columns, loop 1 (32 threads) rewrites the upper half
        return [Store(Y, (b, t), A[b, t] * 2.0)] if k == 0 else [Store(Y, (b, t + 32), A[b, t + 32] * 2.0)]
    nest = _bound_nest([64, 32], body, outputs=[Y])
    k = build(nest, [A, Y], target="cuda")
    assert k.launch_dims() == [("k0_Y", (4, 1, 1), (64, 1, 1))]
    assert k.source.count("if ((int)threadIdx.x < 32) {") == 1
    if HAVE_EMU:
        a = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
        y = np.zeros_like(a)
        run_on_host(k, a, y)
        np.testing.assert_allclose(y, a * 2, rtol=1e-6)


def test_buffers_inside_thread_loops_are_thread_local_arrays():
    A = Buffer("A", (64, 8), float32)
    B = Compute("B", (64, 8), lambda i, j: A[i, j] * 2.0)
    C = Reduce("C", (64,), Sum(), lambda i, j: B[i, j] * B[i, j], (8,))
    tmp = Buffer("tmp", (8,), float32)
    b, t, j1, j2 = Var("b"), Var("t"), Var("j1"), Var("j2")
    i = b * 16 + t
    body = [Store(tmp, (j1,), A[i, j1] * 2.0)]
    acc = [Store(C, (i,), FloatImm(0.0, float32)),
           For(j2, 0, 8, Block([Store(C, (i,), C[i] + tmp[j2] * tmp[j2])]))]
    nest = LoopNest([C])
    nest.add_buffer(tmp)
    nest.root = Block((For(b, 0, 4, Block([For(t, 0, 16, Block([For(j1, 0, 8, Block(body)), *acc]),
                                               ForKind.GPU_THREAD, 0)]), ForKind.GPU_BLOCK, 0),))
    k = build(nest, [A, C], target="cuda")
    src = k.source
    assert "float b_tmp[8];" in src and "__shared__" not in src
    assert src.index("(int)threadIdx.x;") < src.index("float b_tmp[8];")
    a = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)
    ref = ((2 * a.astype(np.float64)) ** 2).sum(1)
    c = np.zeros(64, np.float32)
    _check_on_ireval_and_host(nest, [A, C], k, a, c, ref, rtol=1e-5)


def test_compute_at_inside_thread_loop_and_vector_stores():
    N = Var("N", int32)
    A = Buffer("A", (N, 16), float32)
    B = Compute("B", (N, 16), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (N, 16), lambda i, j: B[i, j] + A[i, j] * B[i, j])
    nest = LoopNest([C])
    i, j = nest.get_loops_for(C)
    io, ii = nest.split_with_mask(i, 32)
    nest.set_gpu_block_index(io, 0)
    nest.set_gpu_thread_index(ii, 0)
    nest.compute_at(B, ii)
    jo, ji, _ = nest.split_with_tail(nest.get_loops_for(C)[-1], 4)
    nest.vectorize(ji)
    k = build(nest, [A, C], target="cuda")
    # B is stored at the thread loop: one row per thread, in the thread's local memory
    assert k.module.scratch == [] and "float b_B[16];" in k.source
    assert "float tc_v1[4] = {" in k.source                  # lanes computed, then stored
    a = np.random.default_rng(0).random((70, 16)).astype(np.float32)
    c = np.zeros_like(a)
    _check_on_ireval_and_host(nest, [A, C], k, a, c, a * 2 + a * a * 2, rtol=1e-6)


def test_let_expression_is_emitted_as_a_scoped_value():
    from te.expr import Let as LetE
    A = Buffer("A", (8,), float32)
    B = Compute("B", (8,), lambda i: A[i] + 1.0)
    nest = LoopNest([B]).prepare_for_codegen()
    i, v = Var("i"), Var("v", float32)
    nest.root = Block((For(i, 0, 8, Block([Store(B, (i,), LetE(v, A[i] * 2.0, v * v + v))]),
                           ForKind.GPU_THREAD, 0),))
    k = build(nest, [A, B], target="cuda")
    assert "([&]() -> float { const float v_v = (b_A[v_i] * 2.0f); return ((v_v * v_v) + v_v); }())" in k.source
    if HAVE_EMU:
        a = np.arange(8, dtype=np.float32)
        b = np.zeros(8, np.float32)
        run_on_host(k, a, b)
        np.testing.assert_array_equal(b, (2 * a) ** 2 + 2 * a)


# ------------------------------------------------------------------------------------
# refusals
# ------------------------------------------------------------------------------------
def _elementwise(n=4096):
    A = Buffer("A", (n,), float32)
    B = Compute("B", (n,), lambda i: A[i] + 1.0)
    return A, B, LoopNest([B])


def test_refuses_more_than_1024_threads_per_block():
    A, B, nest = _elementwise()
    o, i = nest.split_with_mask(nest.get_loops_for(B)[0], 2048)
    nest.set_gpu_block_index(o, 0)
    with pytest.raises(ScheduleError, match=r"2048 \(x\) = 2048 threads, more than the 1024"):
        nest.set_gpu_thread_index(i, 0)       # refused where it is bound


def test_refuses_two_dimensional_blocks_over_the_limit():
    A = Buffer("A", (64, 64), float32)
    B = Compute("B", (64, 64), lambda i, j: A[i, j] + 1.0)
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    nest.set_gpu_thread_index(i, 1)
    with pytest.raises(ScheduleError, match=r"64 \(x\) x 64 \(y\) = 4096 threads, more than the 1024"):
        nest.set_gpu_thread_index(j, 0)
    nest2 = LoopNest([B])
    i2, j2 = nest2.get_loops_for(B)
    _, j2_inner = nest2.split_with_mask(j2, 16)
    nest2.set_gpu_thread_index(i2, 1)
    nest2.set_gpu_thread_index(j2_inner, 0)
    assert build(nest2, [A, B], target="cuda").launch_dims()[0][2] == (16, 64, 1)
    with pytest.raises(BuildError, match="1024 threads per block, more than the limit of 512"):
        build(nest2, [A, B], target="cuda", max_threads_per_block=512)


def _read_across_threads_nest(size=13000):
    """``big`` (``size`` floats: 52000 bytes by default) is written by one thread loop and read
    across threads by the next: shared memory, more than a kernel may declare statically."""
    A = Buffer("A", (4, 64), float32)
    Y = Compute("Y", (4, 64), lambda i, j: A[i, j])
    big = Buffer("big", (size,), float32)
    nest = _bound_nest([64, 64], lambda k, b, t: [Store(big, (t,), A[b, t])] if k == 0 else
                       [Store(Y, (b, t), big[63 - t])], outputs=[Y], intermediates=[big])
    return nest, A, Y, big


def test_shared_buffers_over_the_limit_move_to_global_memory_one_slice_per_block():
    nest, A, Y, big = _read_across_threads_nest()
    k = build(nest, [A, Y], target="cuda")
    assert k.module.kernels[0].shared_bytes == 0
    assert k.module.plan.describe_memory().splitlines() == [
        "global, allocated by the launcher: big[4, 13000]",
        "  big: one slice of 13000 x float32 per block of kernel k0_Y (moved out of shared memory: the kernel's "
        "shared buffers need 52000 B, more than the limit of 49152 B)",
        "kernel k0_Y: no shared memory"]
    assert "__shared__" not in k.source and "__syncthreads()" in k.source
    if HAVE_EMU:
        a = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
        y = np.zeros_like(a)
        run_on_host(k, a, y)
        np.testing.assert_array_equal(y, a[:, ::-1])
    # the largest buffers go first, until the rest fits
    ex = examples.matmul_tiled(32, 32, 32, 16)
    k = build(ex.nest, ex.args, target="cuda", max_shared_bytes=1024)
    assert k.module.kernels[0].shared_bytes == 1024
    scopes = {p.buffer.name: p.scope for p in k.module.plan.placements.values()}
    assert sorted([scopes["As"], scopes["Bs"]]) == ["global", "shared"]
    if HAVE_EMU:
        arrays, expected = ex.make(np.random.default_rng(0))
        run_on_host(k, **arrays)
        np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-4, atol=1e-4)
    if HAVE_NVCC:
        assert k.compile("sm_80")


def test_a_buffer_allocated_in_shared_memory_stays_there_and_the_build_refuses_what_does_not_fit():
    nest, A, Y, big = _read_across_threads_nest()
    big.scope = "shared"
    with pytest.raises(BuildError, match=r"kernel 0 needs 52000 bytes of shared memory \(big \(52000 B\)\), more "
                                         r"than the limit of 49152 bytes, even with every buffer that does not ask "
                                         r"for shared memory moved to global memory \(allocated in shared memory: big\)"):
        build(nest, [A, Y], target="cuda")
    assert build(nest, [A, Y], target="cuda", max_shared_bytes=64 * 1024).module.kernels[0].shared_bytes == 52000


def _big_shared_nest():
    """52000 bytes of shared memory, read across threads: more than a kernel may declare statically."""
    A = Buffer("A", (4, 64), float32)
    Y = Compute("Y", (4, 64), lambda i, j: A[i, j])
    big = Buffer("big", (13000,), float32)
    nest = _bound_nest([64, 64], lambda k, b, t: [Store(big, (t + 12900,), A[b, t])] if k == 0 else
                       [Store(Y, (b, t), big[12900 + 63 - t] * 2.0)], outputs=[Y], intermediates=[big])
    return nest, A, Y


def test_more_than_48kib_of_shared_memory_is_dynamic_where_the_limit_allows_it():
    nest, A, Y = _big_shared_nest()
    k = build(nest, [A, Y], target="cuda", max_shared_bytes=100 * 1024)
    spec = k.module.kernels[0]
    assert spec.shared_bytes == 52000 and spec.dynamic_shared == 52000
    assert "extern __shared__ __align__(16) unsigned char tc_smem[];" in k.source
    assert "float* const b_big = reinterpret_cast<float*>(tc_smem + 0);" in k.source
    assert "__shared__ __align__(16) float b_big" not in k.source
    if HAVE_EMU:
        a = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
        y = np.zeros_like(a)
        run_on_host(k, a, y)
        np.testing.assert_array_equal(y, a[:, ::-1] * 2)
    if HAVE_NVCC:
        assert k.compile("sm_80")
    ex = examples.matmul_tiled(32, 32, 32, 16)
    small = build(ex.nest, ex.args, target="cuda", max_shared_bytes=100 * 1024)
    assert small.module.kernels[0].dynamic_shared == 0 and "extern __shared__" not in small.source


def test_shared_buffers_of_a_dynamic_kernel_sit_at_aligned_offsets():
    A = Buffer("A", (4, 64), float32)
    Y = Compute("Y", (4, 64), lambda i, j: A[i, j])
    big = Buffer("big", (12999,), float32)                  # 51996 bytes: padded to 52000
    small = Buffer("small", (64,), float32)
    nest = _bound_nest([64, 64], lambda k, b, t: [Store(big, (t,), A[b, t]), Store(small, (t,), A[b, t])]
                       if k == 0 else [Store(Y, (b, t), big[63 - t] + small[63 - t])], outputs=[Y],
                       intermediates=[big, small])
    k = build(nest, [A, Y], target="cuda", max_shared_bytes=64 * 1024)
    assert k.module.kernels[0].dynamic_shared == 52000 + 256
    assert "reinterpret_cast<float*>(tc_smem + 0)" in k.source
    assert "reinterpret_cast<float*>(tc_smem + 52000)" in k.source
    if HAVE_EMU:
        a = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
        y = np.zeros_like(a)
        run_on_host(k, a, y)
        np.testing.assert_allclose(y, 2 * a[:, ::-1], rtol=1e-6)


def test_refuses_block_loops_that_are_not_outermost():
    A = Buffer("A", (2, 4, 64), float32)
    B = Compute("B", (2, 4, 64), lambda h, i, j: A[h, i, j] * 2.0)
    nest = LoopNest([B])
    h, i, j = nest.get_loops_for(B)
    jo, ji = nest.split_with_mask(j, 16)
    nest.set_gpu_block_index(jo, 0)         # block loops may be bound inner first ...
    nest.set_gpu_block_index(h, 1)
    before = str(nest)
    with pytest.raises(ScheduleError, match="the gpu_block loop j_outer is inside loop i, which is not a "
                                            "gpu_block loop.*bind i to a block index too"):
        nest.set_gpu_thread_index(ji, 0)    # ... but once threads are bound, the grid must be outermost
    assert str(nest) == before
    nest.set_gpu_block_index(i, 2)
    nest.set_gpu_thread_index(ji, 0)
    build(nest, [A, B], target="cuda")
    # a nest written by hand that breaks the rule is still refused by the backend (a serial
    # loop above every block loop is a host loop: tests/codegen/test_cuda_host_loops.py)
    b0, b, t = Var("b0"), Var("b"), Var("t")
    nest.root = Block((For(b0, 0, 2, Block([For(t, 0, 4, Block([For(b, 0, 64, Block([
        Store(B, (b0, t, b), A[b0, t, b])]), ForKind.GPU_BLOCK, 0)]))]), ForKind.GPU_BLOCK, 1),))
    with pytest.raises(BuildError, match="gpu_block loop b is not among the outermost loops"):
        build(nest, [A, B], target="cuda")


def test_refuses_thread_extent_that_depends_on_a_loop_variable():
    A = Buffer("A", (64,), float32)
    B = Compute("B", (64,), lambda i: A[i])
    b, t = Var("b"), Var("t")
    nest = LoopNest([B])
    nest.root = Block((For(b, 0, 8, Block([For(t, 0, b + 1, Block([Store(B, (b * 8 + t,), A[b * 8 + t])]),
                                               ForKind.GPU_THREAD, 0)]), ForKind.GPU_BLOCK, 0),))
    with pytest.raises(BuildError, match=r"extent of gpu_thread loop t .* depends on b, which is neither a size"):
        build(nest, [A, B], target="cuda")


def _row_reverse_nest(extra_y_loop: bool):
    """ty { S = row ty of A (tx loop); Y row ty = S reversed (tx loop) }: the tx threads of one
    ty exchange data through S, allocated inside the ty loop."""
    A = Buffer("A", (8, 8), float32)
    Y = Compute("Y", (8, 8), lambda i, j: A[i, j])
    S = Buffer("S", (8, 8), float32)
    ty, tx1, tx2 = Var("ty"), Var("tx1"), Var("tx2")
    inner = [For(tx1, 0, 8, Block([Store(S, (ty, tx1), A[ty, tx1])]), ForKind.GPU_THREAD, 0),
             For(tx2, 0, 8, Block([Store(Y, (ty, tx2), S[ty, 7 - tx2])]), ForKind.GPU_THREAD, 0)]
    stmts = [For(ty, 0, 8, Block(inner), ForKind.GPU_THREAD, 1)]
    if extra_y_loop:  # a second y loop of 16 threads: the first becomes guarded (non-uniform)
        u = Var("u")
        stmts.append(For(u, 0, 16, Block([Store(Y, (u % 8, 0), A[u % 8, 7])]), ForKind.GPU_THREAD, 1))
    nest = LoopNest([Y])
    nest.add_buffer(S)
    nest.root = Block((For(Var("blk"), 0, 1, Block(stmts), ForKind.GPU_BLOCK, 0),))
    return A, Y, nest


def test_buffer_shared_by_nested_thread_loops_gets_a_slice_per_outer_thread_and_a_barrier():
    A, Y, nest = _row_reverse_nest(False)
    k = build(nest, [A, Y], target="cuda")
    src = k.source
    assert "__shared__ __align__(16) float b_S[512];" in src          # 8 slices (threadIdx.y) of 64
    assert "b_S[((int)threadIdx.y) * 64 + " in src
    assert src.index("__syncthreads();") > src.index("b_S[((int)threadIdx.y) * 64 + ((v_ty")
    assert k.kernels[0].shared_bytes == 2048
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    y = np.zeros_like(a)
    _check_on_ireval_and_host(nest, [A, Y], k, a, y, a[:, ::-1])


def _shared_then_serial_loop_nest(accumulate: bool):
    """Per block b: S = row b of A (thread loop); then a serial loop k around a thread loop
    reading S. With ``accumulate`` the k loop adds S[(t + k) % 32] into a per-thread register
    and Y is stored after the loop (nothing the iterations exchange); otherwise every
    iteration stores its own row of Y2 (a buffer the iterations all write)."""
    A = Buffer("A", (4, 32), float32)
    Y = Compute("Y", (4, 32), lambda b, t: A[b, t])
    Y2 = Compute("Y2", (4, 8, 32), lambda b, k, t: A[b, t])
    S, acc = Buffer("S", (32,), float32), Buffer("acc", (32,), float32)
    b, t0, t1, k, t2, t3 = (Var(n) for n in ("b", "t0", "t1", "k", "t2", "t3"))

    def threads(t, *body):
        return For(t, 0, 32, Block(list(body)), ForKind.GPU_THREAD, 0)
    fill = threads(t1, Store(S, (t1,), A[b, t1]))
    if accumulate:
        stmts = [threads(t0, Store(acc, (t0,), FloatImm(0.0, float32))), fill,
                 For(k, 0, 8, Block([threads(t2, Store(acc, (t2,), acc[t2] + S[(t2 + k) % 32]))])),
                 threads(t3, Store(Y, (b, t3), acc[t3]))]
        out = Y
    else:
        stmts = [fill, For(k, 0, 8, Block([threads(t2, Store(Y2, (b, k, t2), S[31 - t2] * 2.0))]))]
        out = Y2
    nest = LoopNest([out])
    nest.add_buffer(S)
    nest.add_buffer(acc)
    nest.root = Block((For(b, 0, 4, Block(stmts), ForKind.GPU_BLOCK, 0),))
    return A, out, nest


def test_barrier_for_data_written_before_a_serial_loop_is_placed_before_the_loop():
    """S is filled before the serial k loop and only read inside it: one barrier before the
    loop, none inside it (where it would run on every iteration)."""
    A, Y, nest = _shared_then_serial_loop_nest(accumulate=True)
    k = build(nest, [A, Y], target="cuda")
    src = k.source
    loop = src.index("for (int v_k = 0;")
    assert src.count("__syncthreads();") == 1
    assert src.index("b_S[v_t1] = ") < src.index("__syncthreads();") < loop
    a = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
    ref = sum(np.roll(a.astype(np.float64), -s, axis=1) for s in range(8))
    y = np.zeros_like(a)
    _check_on_ireval_and_host(nest, [A, Y], k, a, y, ref, rtol=1e-5, atol=1e-5)
    if HAVE_NVCC:
        assert k.compile(["sm_80"])["sm_80"]["kernels"]["k0_Y"]["barriers"] == 1


def test_serial_loop_needing_a_barrier_per_iteration_gets_no_extra_one_before_it():
    """Every iteration writes Y2, so the body keeps its barrier; it also covers S, filled
    before the loop, and none is added before the loop."""
    A, Y2, nest = _shared_then_serial_loop_nest(accumulate=False)
    k = build(nest, [A, Y2], target="cuda")
    src = k.source
    loop = src.index("for (int v_k = 0;")
    assert src.count("__syncthreads();") == 1 and src.index("__syncthreads();") > loop
    a = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)
    ref = np.broadcast_to(2.0 * a[:, None, ::-1], (4, 8, 32))
    y = np.zeros((4, 8, 32), np.float32)
    _check_on_ireval_and_host(nest, [A, Y2], k, a, y, ref, rtol=1e-6)


def test_refuses_data_exchange_where_a_barrier_would_be_divergent():
    A, Y, nest = _row_reverse_nest(True)
    with pytest.raises(BuildError, match=r"exchange data through buffer S .* __syncthreads\(\) there would be "
                                         "divergent"):
        build(nest, [A, Y], target="cuda")


def test_refuses_unknown_options():
    A, B, nest = _elementwise(8)
    with pytest.raises(BuildError, match="unknown option"):
        build(nest, [A, B], target="cuda", fastmath=True)


def test_calling_without_a_gpu_raises_runtime_error():
    try:
        import pycuda.driver as drv  # noqa: F401
        drv.init()
        if drv.Device.count() > 0:
            pytest.skip("a CUDA device is present")
    except Exception:
        pass
    A, B, nest = _elementwise(8)
    k = build(nest, [A, B], target="cuda")
    with pytest.raises(RuntimeError, match="no CUDA device/driver is available"):
        k(np.zeros(8, np.float32), np.zeros(8, np.float32))
    with pytest.raises(ValueError, match="shape"):              # arguments are checked first
        k(np.zeros(9, np.float32), np.zeros(8, np.float32))


# ------------------------------------------------------------------------------------
# names
# ------------------------------------------------------------------------------------
def test_user_names_are_sanitised_prefixed_and_unique():
    n = Var("threadIdx", int32)
    a1 = Buffer("int", (n,), float32)
    a2 = Buffer("__global__", (n,), float32)
    a3 = Buffer("a.b", (n,), float32)
    a4 = Buffer("a_b", (n,), float32)
    out = Compute("blockIdx", (n,), lambda __syncthreads: a1[__syncthreads] + a2[__syncthreads] * 2.0
                  + a3[__syncthreads] - a4[__syncthreads])
    nest = LoopNest([out])
    o, i = nest.split_with_mask(nest.get_loops_for(out)[0], 32)
    nest.set_gpu_block_index(o, 0)
    nest.set_gpu_thread_index(i, 0)
    k = build(nest, [a1, a2, a3, a4, out], target="cuda")
    sig = k.source[k.source.index("k0_blockIdx("):].split(")")[0]
    assert "b_int" in sig and "b_global__" in sig and "b_a_b" in sig and "b_a_b_1" in sig
    assert "int v_threadIdx" in sig and "b_blockIdx" in sig
    assert "v___syncthreads" not in k.source and "v_syncthreads" in k.source
    # in the kernels, every identifier is a C/CUDA word, a helper (tc_) or a prefixed user name
    kernels = k.source[k.source.index("// k0"):]
    idents = set(re.findall(r"\b[A-Za-z_]\w*\b", kernels.replace("// k0_blockIdx: grid (?, 1, 1), block", "")))
    allowed = {"extern", "C", "__global__", "void", "__launch_bounds__", "const", "float", "int", "unsigned",
               "long", "__restrict__", "blockIdx", "threadIdx", "x", "if"}
    assert {i for i in idents if not re.match(r"(b|v|k\d+)_|tc_", i)} <= allowed
    if HAVE_NVCC:
        k.compile("sm_90")
    if HAVE_EMU:
        rng = np.random.default_rng(0)
        xs = [rng.standard_normal(50).astype(np.float32) for _ in range(4)]
        y = np.zeros(50, np.float32)
        run_on_host(k, *xs, y)
        np.testing.assert_allclose(y, xs[0] + xs[1] * 2 + xs[2] - xs[3], rtol=1e-6)


# ------------------------------------------------------------------------------------
# compiling, reports and arguments
# ------------------------------------------------------------------------------------
def test_parse_ptxas_log():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k0_C' for 'sm_80'
ptxas info    : Function properties for k0_C
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 3072 bytes smem, 372 bytes cmem[0]
ptxas info    : Compiling entry function 'k0_C' for 'sm_90'
ptxas info    : Function properties for k0_C
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 3072 bytes smem"""
    rep = cuda_compile.parse_ptxas_log(log)
    assert rep["sm_80"]["kernels"]["k0_C"] == {"registers": 40, "shared_bytes": 3072, "stack_bytes": 8,
                                               "spill_stores": 4, "spill_loads": 4, "cmem_bytes": 372,
                                               "barriers": 1}
    assert rep["sm_90"]["registers"] == 32 and rep["sm_80"]["spill_stores"] == 4


@requires_nvcc
def test_compile_results_are_cached_by_source_and_arch(monkeypatch):
    k = _kernel("elementwise")
    k.compile("sm_90")
    calls = []
    real = cuda_compile._run_nvcc
    monkeypatch.setattr(cuda_compile, "_run_nvcc", lambda *a: calls.append(a) or real(*a))
    rep = k.compile("sm_90")
    assert calls == [] and rep["arch"] == "sm_90" and "k0_Y" in rep["kernels"]


@requires_nvcc
def test_nvcc_errors_surface_as_build_errors():
    with pytest.raises(cuda_compile.CompileError, match="nvcc failed"):
        cuda_compile.ptxas_report('extern "C" __global__ void k() { undeclared_thing(); }', "sm_90")


class _FakeDeviceArray:
    def __init__(self, shape, typestr="<f4", strides=None):
        self.__cuda_array_interface__ = {"data": (0xDEAD0000, False), "shape": shape, "typestr": typestr,
                                         "strides": strides, "version": 3}


def test_device_arrays_are_bound_without_copies():
    ex = examples.elementwise()
    k = _kernel("elementwise")
    arrays, sizes = k.bind((_FakeDeviceArray((37,)), _FakeDeviceArray((37,))), {})
    assert all(isinstance(a, DeviceArray) and a.ptr == 0xDEAD0000 for a in arrays)
    assert list(sizes.values()) == [37]
    assert ex.nest is not None
    with pytest.raises(TypeError, match="dtype float64, expected float32"):
        k.bind((_FakeDeviceArray((37,), "<f8"), _FakeDeviceArray((37,))), {})
    with pytest.raises(ValueError, match="C-contiguous"):
        k2 = _kernel("elementwise_2d")
        k2.bind((_FakeDeviceArray((4, 6), strides=(4, 16)), _FakeDeviceArray((6,)), _FakeDeviceArray((4, 6))), {})
    with pytest.raises(ValueError, match="N = 37 from another argument"):
        k.bind((_FakeDeviceArray((37,)), _FakeDeviceArray((38,))), {})
    with pytest.raises(TypeError, match="must be a numpy array or a device array"):
        k.bind(([1.0], np.zeros(1, np.float32)), {})


@requires_emu
def test_emulation_reports_out_of_bounds_and_deadlocks_instead_of_hanging():
    A = Buffer("A", (4,), float32)
    B = Compute("B", (4,), lambda i: A[i])
    nest = LoopNest([B]).prepare_for_codegen()
    i = Var("i")
    nest.root = Block((For(i, 0, 4, Block([Store(B, (i * 100000000,), A[i])]), ForKind.GPU_THREAD, 0),))
    k = build(nest, [A, B], target="cuda", bounds_check=False)
    with pytest.raises(EmulationError, match="crashed"):
        run_on_host(k, np.zeros(4, np.float32), np.zeros(4, np.float32), timeout=30)


# ------------------------------------------------------------------------------------
# the PyCUDA launcher, driven by a fake driver whose kernels run in the host emulation
# ------------------------------------------------------------------------------------
class _FakeAlloc:
    def __init__(self, nbytes):
        self.buf = np.zeros(nbytes, np.uint8)
        self.freed = False

    def __int__(self):
        return self.buf.ctypes.data

    def free(self):
        self.freed = True


class _FakeDriver:
    """Just enough of ``pycuda.driver`` for ``codegen.cuda.launch``: device memory is host
    memory and a launch calls the emulated kernel in-process."""

    class Error(Exception):
        pass

    class function_attribute:
        MAX_THREADS_PER_BLOCK = "MAX_THREADS_PER_BLOCK"
        MAX_DYNAMIC_SHARED_SIZE_BYTES = "MAX_DYNAMIC_SHARED_SIZE_BYTES"

    class Context:
        @staticmethod
        def synchronize():
            pass

    def __init__(self, kernel, fail=None, free_bytes=1 << 34):
        import ctypes
        from codegen.cuda import emulate
        self.lib = ctypes.CDLL(emulate._build(kernel))
        self.allocs, self.launches, self.copies, self.shared, self.attributes = [], [], [], [], []
        self.fail = fail
        self.free_bytes = free_bytes

    def mem_get_info(self):
        return self.free_bytes, 1 << 34

    def mem_alloc(self, n):
        a = _FakeAlloc(n)
        self.allocs.append(a)
        return a

    def memcpy_htod(self, dev, host):
        self.copies.append("htod")
        dev.buf[:host.nbytes] = host

    def memcpy_dtoh(self, host, dev):
        self.copies.append("dtoh")
        host[...] = dev.buf[:host.nbytes]

    def module_from_buffer(self, cubin):
        drv = self

        class Module:
            def get_function(self, name):
                return _FakeFunction(drv, name)
        return Module()


class _FakeFunction:
    def __init__(self, drv, name):
        self.drv, self.name = drv, name

    def get_attribute(self, attr):
        return 1024

    def set_attribute(self, attr, value):
        self.drv.attributes.append((self.name, attr, value))

    def __call__(self, *args, grid, block, shared=0):
        import ctypes
        if self.drv.fail == self.name:
            raise _FakeDriver.Error("an illegal memory access was encountered")
        self.drv.launches.append((self.name, grid, block, [type(a).__name__ for a in args]))
        self.drv.shared.append(shared)
        vals = (ctypes.c_longlong * len(args))(*[int(a) for a in args])
        getattr(self.drv.lib, f"tc_launch_{self.name}")(vals, (ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block))


_FAKE_INFO = {"arch": "sm_90", "name": "fake", "bus_id": "fake", "max_threads_per_block": 1024,
              "max_shared_bytes": 48 * 1024, "max_shared_bytes_optin": 227 * 1024, "max_block_dims": (1024, 1024, 64),
              "max_grid_dims": (2 ** 31 - 1, 65535, 65535)}


@pytest.fixture
def fake_gpu(monkeypatch):
    """Install a fake driver for one kernel: ``fake_gpu(kernel) -> driver``."""
    from codegen.cuda import launch

    def install(kernel, fail=None, free_bytes=1 << 34, **info):
        drv = _FakeDriver(kernel, fail, free_bytes)
        monkeypatch.setattr(launch, "_STATE", {"drv": drv, "info": {**_FAKE_INFO, **info}})
        monkeypatch.setattr(launch, "compile_cubin", lambda *a, **k: b"cubin")
        monkeypatch.setattr(launch, "_MODULES", {})
        kernel._launcher._functions.clear()
        return drv
    return install


@requires_emu
def test_launcher_refuses_intermediates_larger_than_the_free_device_memory(fake_gpu):
    """softmax_rows keeps three row intermediates in global memory: with less free device
    memory than they need, the call raises LaunchLimitError before allocating or copying
    anything, and Y is left as it was."""
    ex = examples.softmax_rows(rows=37, cols=20)
    k = build(ex.nest, ex.args, target="cuda")
    drv = fake_gpu(k, free_bytes=3 * 37 * 4 - 1)
    arrays, _ = ex.make(np.random.default_rng(0))
    arrays["Y"][:] = -1.0
    with pytest.raises(LaunchLimitError, match="global scratch memory"):
        k(**arrays)
    assert drv.allocs == [] and drv.copies == [] and drv.launches == [] and (arrays["Y"] == -1.0).all()


@requires_emu
def test_launcher_copies_numpy_arrays_and_allocates_intermediates(fake_gpu):
    ex = examples.softmax_rows(rows=37, cols=20)
    k = build(ex.nest, ex.args, target="cuda")
    drv = fake_gpu(k)
    arrays, expected = ex.make(np.random.default_rng(0))
    k(**arrays)
    np.testing.assert_allclose(arrays["Y"], expected["Y"], rtol=1e-5, atol=1e-7)
    assert [l[0] for l in drv.launches] == ["k0_Y", "k1_Y", "k2_Y", "k3_Y"]
    assert drv.launches[0][1:3] == ((2, 1, 1), (32, 1, 1))
    assert drv.launches[0][3] == [np.uintp.__name__, np.uintp.__name__, "int32"]   # X, mx (scratch), R
    # X and Y copied in, only Y (written) copied back; 2 arrays + 3 intermediates, all freed
    assert drv.copies == ["htod", "htod", "dtoh"]
    assert len(drv.allocs) == 5 and all(a.freed for a in drv.allocs)
    assert sorted(a.buf.nbytes for a in drv.allocs[2:]) == [37 * 4, 37 * 4, 37 * 20 * 4]


@requires_emu
def test_launcher_passes_device_arrays_without_copies_and_skips_empty_launches(fake_gpu):
    ex = examples.elementwise_tail()
    k = build(ex.nest, ex.args, target="cuda")
    drv = fake_gpu(k)
    x = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    y = np.zeros(256, np.float32)

    class Dev:  # a device array whose memory the fake device can reach
        def __init__(self, a):
            self.a = a
            self.__cuda_array_interface__ = {"data": (a.ctypes.data, False), "shape": a.shape,
                                             "typestr": a.dtype.str, "strides": None, "version": 3}
    k(Dev(x), Dev(y))
    np.testing.assert_allclose(y, x.astype(np.float64) * 3 - 1, rtol=1e-6, atol=1e-6)
    assert drv.copies == [] and drv.allocs == []
    assert [l[0] for l in drv.launches] == ["k0_Y"]                  # N % 128 == 0: no tail launch


@requires_emu
def test_launcher_checks_device_limits_and_names_failing_kernels(fake_gpu):
    from codegen.cuda.launch import CudaLaunchError
    ex = examples.matmul_tiled(32, 32, 32, 16)
    k = build(ex.nest, ex.args, target="cuda")
    arrays, expected = ex.make(np.random.default_rng(0))
    drv = fake_gpu(k, max_threads_per_block=128)
    with pytest.raises(ValueError, match=r"kernel k0_C of C: block \(16, 16, 1\) has 256 threads, more than the "
                                         "128 this kernel can run per block"):
        k(**arrays)
    assert drv.launches == [] and drv.allocs == []
    fake_gpu(k, max_shared_bytes=1024)
    with pytest.raises(ValueError, match="2048 bytes of shared memory, more than the device's 1024"):
        k(**arrays)
    drv = fake_gpu(k, fail="k0_C")
    with pytest.raises(CudaLaunchError, match=r"CUDA kernel k0_C of C \(grid \(2, 2, 1\), block \(16, 16, 1\)\) "
                                              "failed: an illegal memory access"):
        k(**arrays)
    assert all(a.freed for a in drv.allocs)
    fake_gpu(k)
    k(**arrays)
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-4, atol=1e-4)


@requires_emu
def test_launcher_asks_for_dynamic_shared_memory_within_the_devices_opt_in_limit(fake_gpu):
    nest, A, Y = _big_shared_nest()
    k = build(nest, [A, Y], target="cuda", max_shared_bytes=100 * 1024)
    a = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    y = np.zeros_like(a)
    drv = fake_gpu(k)
    k(a, y)
    np.testing.assert_array_equal(y, a[:, ::-1] * 2)
    assert drv.shared == [52000] and drv.attributes == [("k0_Y", "MAX_DYNAMIC_SHARED_SIZE_BYTES", 52000)]
    fake_gpu(k, max_shared_bytes_optin=48 * 1024)
    with pytest.raises(ValueError, match="52000 bytes of shared memory, more than the device's 49152"):
        k(a, y)
    ex = examples.matmul_tiled(32, 32, 32, 16)
    static = build(ex.nest, ex.args, target="cuda")
    drv = fake_gpu(static)
    static(**ex.make(np.random.default_rng(0))[0])
    assert drv.shared == [0] and drv.attributes == []


def test_arrays_are_passed_in_memory_order_for_layout_buffers(fake_gpu):
    """A column-major (Fortran-ordered) argument reaches the kernel as its memory, not in
    logical order: through the launcher and through the emulation."""
    from te.layout import column_major
    from codegen.cuda.launch import memory_bytes
    A = Buffer("A", (6, 4), float32, layout=column_major(6, 4))
    B = Compute("B", (6, 4), lambda i, j: A[i, j] * 3.0 + 1.0)
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    nest.set_gpu_thread_index(i, 1)
    nest.set_gpu_thread_index(j, 0)
    data = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    assert memory_bytes(np.asfortranarray(data)).view(np.float32).tolist() == data.T.reshape(-1).tolist()
    k = build(nest, [A, B], target="cuda")
    if not HAVE_EMU:
        pytest.skip("g++ or the CUDA headers not found")
    b = np.zeros((6, 4), np.float32)
    run_on_host(k, np.asfortranarray(data), b)
    np.testing.assert_allclose(b, data * 3 + 1, rtol=1e-6)
    fake_gpu(k)
    b[:] = 0
    k(np.asfortranarray(data), b)
    np.testing.assert_allclose(b, data * 3 + 1, rtol=1e-6)


@requires_emu
def test_the_emulation_precompiles_the_prelude_once_per_set_of_includes():
    """Parsing the CUDA headers is most of a kernel's g++ time: kernels with the same includes
    share one precompiled header, and each still runs right."""
    from codegen.cuda import emulate
    outs = []
    for threads in (64, 32):        # two kernels, one set of includes
        ex = examples.lowp_elementwise(threads=threads)
        k = build(ex.nest, ex.args, target="cuda")
        arrays, expected = ex.make(np.random.default_rng(0))
        run_on_host(k, **arrays)
        outs.append(all(np.allclose(arrays[name], want, rtol=1e-2, atol=1e-2) for name, want in expected.items()))
    assert outs == [True, True]
    heads = [path for text, path in emulate._HEADERS.items() if "cuda_fp16.h" in text]
    assert heads and all(os.path.exists(path + ".gch") for path in heads)


def test_an_rfactor_buffer_too_large_for_shared_memory_builds_in_global_memory():
    """Seed 106, case 110: the whole rfactor buffer C_rf (32 x 64 x 16 floats) sits inside the
    thread-bound copy loop's kernel; it was accepted by the schedule and refused at build."""
    B = Buffer("B", (16, 64), float32)
    C = Reduce("C", (32, 64), Sum(), lambda i0, i1, r0: B[r0, i1], (16,))
    nest = LoopNest([C])
    nest.cache_accesses(nest.buffer("B"), "cache1", nest.loop("i1"))
    nest.rfactor(nest.buffer("C"), nest.loop("r0"))
    nest.set_gpu_thread_index(nest.loop("cache1_i0"), 2)
    k = build(nest, [B, C], target="cuda")
    assert "C_rf: one slice of 32768 x float32 per block" in k.module.plan.describe_memory()
    b = np.random.default_rng(3).integers(-3, 4, (16, 64)).astype(np.float32)
    if HAVE_EMU:
        c = np.full((32, 64), np.nan, np.float32)
        run_on_host(k, b, c)
        np.testing.assert_array_equal(c, np.broadcast_to(b.sum(0), (32, 64)))
    if HAVE_NVCC:
        assert k.compile("sm_80")


def test_aligning_a_shared_buffer_places_it_at_the_alignment_or_refuses_what_no_longer_fits():
    from codegen.cuda.memory import align_shared, assign_memory_scopes
    from codegen.cuda.passes import plan_cuda
    from codegen.kernel import make_params
    ex = examples.matmul_tiled()
    nest = ex.nest.copy().prepare_for_codegen()
    plan = plan_cuda(nest, make_params(nest, ex.args), "mm", upto="cuda_outline_kernels")
    assign_memory_scopes(plan)
    (k,) = plan.kernels
    first, second = sorted((p for p in plan.placements.values() if p.scope == "shared"), key=lambda p: p.offset)
    assert (first.offset, second.offset, k.shared_bytes) == (0, 1024, 2048)
    align_shared(plan, k, [first.buffer], 4096)          # the first stays at 0: nothing moves
    assert (second.offset, k.shared_bytes) == (1024, 2048)
    align_shared(plan, k, [second.buffer], 4096)
    assert (second.offset, k.shared_bytes) == (4096, 5120)
    plan.max_shared = 8192
    with pytest.raises(BuildError, match=rf"need 9216 bytes with {second.buffer.name} aligned to 8192 bytes, over "
                                         r"the limit of 8192; use smaller tiles, or a larger max_shared_bytes"):
        align_shared(plan, k, [second.buffer], 8192)
