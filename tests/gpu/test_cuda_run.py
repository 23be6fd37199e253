"""The CUDA target on a GPU: the example schedules agree with IREval and numpy, device
arrays (CuPy, PyCUDA GPUArray) are used without copies, and launches are checked against
the device's limits. Skipped without PyCUDA or a CUDA device."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pycuda.driver")

from codegen import build  # noqa: E402
from codegen.cuda import examples, launch  # noqa: E402
from te import Buffer, Compute, Var, float32, int32  # noqa: E402
from loopnest import LoopNest  # noqa: E402

EXAMPLES = {ex.name: ex for ex in examples.ALL_EXAMPLES()}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_on_gpu_agrees_with_ireval_and_numpy(cuda_device, name):
    ex = EXAMPLES[name]
    arrays, expected = ex.make(np.random.default_rng(0))
    ref_arrays = {k: v.copy() for k, v in arrays.items()}
    build(ex.nest, ex.args, target="cuda")(**arrays)
    build(ex.nest, ex.args, target="ireval")(**ref_arrays)
    for out, ref in expected.items():
        ex.check(out, arrays[out], ref)
        if arrays[out].dtype.kind in "iu":  # integers: bit for bit with the reference interpreter
            np.testing.assert_array_equal(arrays[out], ref_arrays[out])


def test_larger_sizes_and_repeated_calls_reuse_the_module(cuda_device):
    ex = examples.matmul_tiled(256, 192, 320)
    k = build(ex.nest, ex.args, target="cuda")
    arrays, expected = ex.make(np.random.default_rng(1))
    k(**arrays)
    n_modules = len(launch._MODULES)
    arrays["C"][:] = 0
    k(**arrays)
    assert len(launch._MODULES) == n_modules
    ex.check("C", arrays["C"], expected["C"])
    ex = examples.elementwise(1_000_003)
    arrays, expected = ex.make(np.random.default_rng(2))
    build(ex.nest, ex.args, target="cuda", sync=False)(**arrays)
    ex.check("Y", arrays["Y"], expected["Y"])


def test_fast_math_is_close(cuda_device):
    ex = examples.elementwise(4096)
    arrays, expected = ex.make(np.random.default_rng(3))
    build(ex.nest, ex.args, target="cuda", fast_math=True)(**arrays)
    np.testing.assert_allclose(arrays["Y"], expected["Y"], rtol=1e-4)


def test_cupy_arrays_are_used_without_copies(cuda_device):
    cp = pytest.importorskip("cupy")
    ex = examples.softmax_block(rows=33, cols=128, threads=32)
    k = build(ex.nest, ex.args, target="cuda")
    arrays, expected = ex.make(np.random.default_rng(4))
    x, y = cp.asarray(arrays["X"]), cp.zeros_like(cp.asarray(arrays["Y"]))
    ptr = y.data.ptr
    k(x, y)
    assert y.data.ptr == ptr
    np.testing.assert_allclose(cp.asnumpy(y), expected["Y"], rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="C-contiguous"):
        k(cp.asfortranarray(x), y)


def test_pycuda_gpuarrays_are_used_without_copies(cuda_device):
    gpuarray = pytest.importorskip("pycuda.gpuarray")
    ex = examples.integer_ops(300)
    k = build(ex.nest, ex.args, target="cuda")
    arrays, expected = ex.make(np.random.default_rng(5))
    dev = {n: gpuarray.to_gpu(a) for n, a in arrays.items()}
    k(**dev)
    for out, ref in expected.items():
        np.testing.assert_array_equal(dev[out].get().astype(np.int64), ref.astype(np.int64))


def test_block_size_over_the_device_limit_is_refused_before_launch(cuda_device):
    N = Var("N", int32)
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i] + 1.0)
    nest = LoopNest([B])
    nest.set_gpu_thread_index(nest.get_loops_for(B)[0], 0)   # N threads in one block
    k = build(nest, [A, B], target="cuda")
    b = np.zeros(64, np.float32)
    k(np.ones(64, np.float32), b)
    assert (b == 2).all()
    big = cuda_device["max_threads_per_block"] * 2
    with pytest.raises(ValueError, match="threads"):
        k(np.ones(big, np.float32), np.zeros(big, np.float32))


def test_scratch_larger_than_the_device_is_refused_before_launch(cuda_device):
    """A copy of A per thread (a global slice per thread, sized by N): at N = M = 200,000 the
    slices need 160 GB; the launch raises LaunchLimitError, S is left as it was, and a call
    at small sizes runs."""
    nest, args = examples.copy_per_thread()
    k = build(nest, args, target="cuda")
    s = np.full(200_000, -1.0, np.float32)
    with pytest.raises(launch.LaunchLimitError, match="global scratch memory"):
        k(np.ones(200_000, np.float32), s, 200_000, 200_000)
    assert (s == -1.0).all()
    a, s = np.arange(5, dtype=np.float32), np.zeros(11, np.float32)
    k(a, s, 5, 11)
    np.testing.assert_array_equal(s, 10.0 * np.arange(1, 12))


def test_a_failed_index_check_raises_index_error_and_the_context_stays_usable(cuda_device):
    """A gather through out-of-range data raises IndexError, leaves the output array as it
    was, and the next call (in range) runs: the check sets a flag, it does not trap."""
    N = Var("N", int32)
    A = Buffer("A", (N,), float32)
    I = Buffer("I", (N,), int32)
    B = Compute("B", (N,), lambda i: A[I[i]] * 2.0)
    k = build(LoopNest([B]), [A, I, B], target="cuda")
    a = np.arange(8, dtype=np.float32)
    b = np.full(8, -1.0, np.float32)
    with pytest.raises(IndexError, match="data-dependent index"):
        k(A=a, I=np.array([0, 1, 2, 3, 4, 5, 6, 99], np.int32), B=b)
    assert (b == -1.0).all()
    k(A=a, I=np.arange(8, dtype=np.int32)[::-1].copy(), B=b)
    np.testing.assert_array_equal(b, a[::-1] * 2.0)


def test_a_host_loop_launches_its_kernel_once_per_row(cuda_device):
    """A running sum down the rows (``examples.running_sum_rows``): the serial row loop runs
    on the host (one launch per row), each launch reading the row the previous one wrote."""
    ex = examples.running_sum_rows(rows=9, cols=300, threads=128)
    arrays, expected = ex.make(np.random.default_rng(3))
    build(ex.nest, ex.args, target="cuda")(**arrays)
    np.testing.assert_allclose(arrays["S"], expected["S"], rtol=1e-5, atol=1e-5)
