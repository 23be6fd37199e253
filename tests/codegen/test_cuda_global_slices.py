"""Buffers allocated inside GPU-bound loops whose size is known only at launch (a
``cache_accesses`` copy of a region sized by ``N``, say) live in a global buffer with one
slice per block and per thread of the axes bound around them (``codegen.cuda.memory``):
the CUDA backend builds every such schedule that IREval runs. Checked on IREval and the
host emulation (the CUDA C itself), without a GPU."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from loopnest import LoopNest
from te import Buffer, Compute, Var, float32, int32

HAVE_EMU = host_compiler() is not None and nvcc_available()
requires_emu = pytest.mark.skipif(not HAVE_EMU, reason="g++ or the CUDA headers not found")


def _agree(nest, args, a, n, want):
    """``nest`` at size ``n`` gives ``want`` on IREval and, where it can be emulated, on CUDA."""
    k = build(nest, args, target="cuda")
    runs = [("IREval", build(nest, args, target="ireval"))]
    if HAVE_EMU:
        runs.append(("host emulation", lambda *xs: run_on_host(k, *xs)))
    for what, run in runs:
        out = np.zeros_like(want)
        run(a, out, n)
        np.testing.assert_allclose(out, want, rtol=1e-6, err_msg=what)
    return k


def test_a_copy_per_block_sized_at_launch():
    """Each block copies its row of A (N elements) once; its threads read it reversed."""
    N = Var("N", int32)
    A = Buffer("A", (N, N), float32)
    B = Compute("B", (N, N), lambda i, j: A[i, N - 1 - j] * 2.0)
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    jo, ji = nest.split_with_mask(j, 32)
    nest.set_gpu_block_index(i, 0)
    nest.cache_accesses(A, "Ac", i)
    nest.set_gpu_thread_index(ji, 0)
    for n in (1, 40):
        a = np.random.default_rng(n).standard_normal((n, n)).astype(np.float32)
        k = _agree(nest, [A, B, N], a, n, a[:, ::-1] * 2)
    memory = k.module.plan.describe_memory()
    assert "Ac: one slice of floordiv(int64(N) + int64(3), int64(4)) * int64(4) x float32 per block of" in memory
    assert "gridDim.x" in k.source and "__shared__" not in k.source


def test_a_copy_per_thread_sized_at_launch():
    """Each thread copies a column of A (N elements) and reads it twice."""
    N = Var("N", int32)
    A = Buffer("A", (N, N), float32)
    B = Compute("B", (N, N), lambda i, j: A[j, i] + A[N - 1 - j, i])
    nest = LoopNest([B])
    io, ii = nest.split_with_mask(nest.get_loops_for(B)[0], 8)
    nest.set_gpu_block_index(io, 0)
    nest.set_gpu_thread_index(ii, 0)
    nest.cache_accesses(A, "Ac", ii)
    for n in (1, 13, 40):
        a = np.random.default_rng(n).standard_normal((n, n)).astype(np.float32)
        k = _agree(nest, [A, B, N], a, n, a.T + a[::-1].T)
    assert "per block and per thread of threadIdx.x" in k.module.plan.describe_memory()
    # the launcher allocates a slice per block and thread: ceil(N / 8) blocks of 8 threads,
    # N floats each, padded to 4
    assert k.module.scratch_nbytes({id(N): 13}) == [2 * 8 * 16 * 4]


@requires_emu
def test_case_227_on_gpu_threads_gives_ireval_values():
    """Seed 50, case 227 (tests/test_fuzz_findings_more.py) with the loop bound to GPU threads:
    the cache copy, sized by M and private to each thread, was refused by the CUDA build."""
    from test_fuzz_findings_more import _case_227
    M, A, T2, nest = _case_227()
    io, ii = nest.split_with_mask(nest.loop("i1_1"), 4)
    nest.set_gpu_block_index(io, 0)
    nest.set_gpu_thread_index(ii, 0)
    nest.cache_accesses(nest.buffer("A"), "cache1", ii)
    a = np.random.default_rng(0).integers(-3, 4, (10, 10)).astype(np.float32)
    want = np.zeros((10, 10), np.int32)
    build(LoopNest([T2]), [A, T2, M], target="ireval")(a, want, 9)
    got = np.zeros_like(want)
    run_on_host(build(nest, [A, T2, M], target="cuda"), a, got, 9)
    np.testing.assert_array_equal(got, want)


def test_scratch_larger_than_the_device_is_refused_before_anything_is_allocated():
    """A copy of A (N floats) per thread of M threads: at N = M = 200,000 the launcher would
    need 160 GB of slices; it raises LaunchLimitError (tests/gpu runs the launch itself)."""
    from codegen.cuda.examples import copy_per_thread
    from codegen.cuda.launch import LaunchLimitError, check_scratch
    nest, args = copy_per_thread()
    N, M = args[2:]
    k = build(nest, args, target="cuda")
    scratch = k.module.scratch_nbytes({id(N): 200_000, id(M): 200_000})
    assert scratch == [200_000 * 200_000 * 4]
    with pytest.raises(LaunchLimitError, match="160000000000 bytes of global scratch memory"):
        check_scratch(k.name, scratch, 80 << 30)
    check_scratch(k.name, k.module.scratch_nbytes({id(N): 100, id(M): 100}), 80 << 30)
    a = np.arange(5, dtype=np.float32)
    for run in [build(nest, args, target="ireval")] + ([lambda *xs: run_on_host(k, *xs)] if HAVE_EMU else []):
        s = np.zeros(11, np.float32)
        run(a, s, 5, 11)
        np.testing.assert_array_equal(s, 10.0 * np.arange(1, 12))
