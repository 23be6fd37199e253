"""build(..., target="cuda", schedule="auto"): the GPU templates' default choices
(loopnest.auto.gpu.auto_schedule_gpu), the same schedule the CUDA tuning space seeds with; the
values checked on IREval and the host emulation, the report one line per tensor, computations
without a template a ScheduleError that leaves the nest as it was."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest, ScheduleError
from loopnest.auto.gpu import auto_schedule_gpu
from te import Buffer, Compute, Max, Reduce, Sum, cast, exp, float32
from tune import auto_space


def _softmax(m=6, n=300):
    X = Buffer("X", (m, n), "float32")
    mx = Reduce("mx", (m,), Max(), lambda i, k: X[i, k], (n,))
    e = Compute("e", (m, n), lambda i, j: exp(X[i, j] - mx[i]))
    s = Reduce("s", (m,), Sum(), lambda i, k: e[i, k], (n,))
    Y = Compute("Y", (m, n), lambda i, j: e[i, j] / s[i])
    return X, Y


def test_a_softmax_gets_block_trees_and_threads_and_computes_it():
    X, Y = _softmax()
    kernel = build(LoopNest([Y]), [X, Y], target="cuda", schedule="auto")
    assert str(kernel.auto_schedule_report).splitlines() == [
        "e: inlined (element-wise intermediate)",
        "mx: a block per output, a tree of 256 threads (reduction)",
        "s: a block per output, a tree of 256 threads (reduction)",
        "Y: blocks of 256 threads, 4 elements each (element-wise)"]
    assert all(block != (1, 1, 1) for _, _, block in kernel.launch_dims())
    nest = LoopNest([Y])
    auto_schedule_gpu(nest)
    assert [op["op"] for op in kernel.schedule_history] == [op["op"] for op in nest.history]
    x = np.random.default_rng(0).standard_normal((6, 300)).astype(np.float32)
    y = np.zeros_like(x)
    build(nest, [X, Y], target="ireval")(x, y)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_the_schedule_is_the_cuda_spaces_seed():
    X, Y = _softmax()
    space = auto_space([Y], "cuda")
    seeded = space.apply(space.seeds[0])
    nest = LoopNest([Y])
    auto_schedule_gpu(nest)
    assert str(nest) == str(seeded)


def test_an_element_wise_chain_runs_on_the_host_emulation():
    from codegen.cuda.emulate import host_compiler, run_on_host
    if host_compiler() is None:
        pytest.skip("no host C++ compiler for the CUDA emulation")
    A = Buffer("A", (5000,), "float32")
    T = Compute("T", (5000,), lambda i: A[i] * 2.0)
    B = Compute("B", (5000,), lambda i: T[i] + 1.0)
    kernel = build(LoopNest([B]), [A, B], target="cuda", schedule="auto")
    a = np.arange(5000, dtype=np.float32)
    b = np.zeros_like(a)
    run_on_host(kernel, a, b)
    np.testing.assert_array_equal(b, a * 2 + 1)


def test_a_half_precision_matmul_takes_the_tensor_cores():
    A, B = Buffer("A", (64, 64), "float16"), Buffer("B", (64, 64), "float16")
    C = Reduce("C", (64, 64), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (64,))
    nest = LoopNest([C])
    report = auto_schedule_gpu(nest)
    assert nest.tensorized == {"kk": "mma_m16n8k16"}
    assert str(report).startswith("C: tensor-core matmul tree, tile {'BM': 64")
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((64, 64)).astype(np.float16) for _ in range(2))
    c = np.zeros((64, 64), np.float32)
    build(nest, [A, B, C], target="ireval")(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)


def test_a_convolution_takes_the_direct_template():
    X = Buffer("X", (1, 4, 10, 10), "float32")
    W = Buffer("W", (8, 4, 3, 3), "float32")
    Y = Reduce("Y", (1, 8, 8, 8), Sum(), lambda n, k, y, x, c, r, s: X[n, c, y + r, x + s] * W[k, c, r, s],
               (4, 3, 3))
    kernel = build(LoopNest([Y]), [X, W, Y], target="cuda", schedule="auto")
    assert str(kernel.auto_schedule_report) == ("Y: 2 output channels x 1 pixels per thread, at most 128 threads per "
                                                "block, input windows in shared memory (direct convolution)")
    assert "__shared__" in kernel.source


def test_a_computation_without_a_template_is_refused_and_the_nest_is_unchanged():
    A = Buffer("A", (2, 8, 8), "float32")
    B = Buffer("B", (2, 8, 8), "float32")
    C = Reduce("C", (2, 8, 8), Sum(), lambda b, i, j, k: A[b, i, k] * B[b, k, j], (8,))
    nest = LoopNest([C])
    before = str(nest)
    with pytest.raises(ScheduleError, match="neither a lone matmul .* schedule it by hand"):
        build(nest, [A, B, C], target="cuda", schedule="auto")
    assert str(nest) == before and nest.history == []


def test_a_cpu_target_description_is_not_a_gpu_schedule():
    from loopnest import Target
    X, Y = _softmax()
    with pytest.raises(ValueError, match="for target 'cuda', schedule must be None or 'auto'"):
        build(LoopNest([Y]), [X, Y], target="cuda", schedule=Target(vector_bits=256))


def test_a_refused_step_leaves_the_nest_as_it_was():
    """A matmul no tile divides: the plan is made, the tree refused, nothing kept."""
    A, B = Buffer("A", (24, 40), "float32"), Buffer("B", (40, 24), "float32")
    C = Reduce("C", (24, 24), Sum(), lambda i, j, k: A[i, k] * B[k, j], (40,))
    nest = LoopNest([C])
    before = str(nest)
    with pytest.raises(ScheduleError, match="no SIMT tile divides it"):
        auto_schedule_gpu(nest)
    assert str(nest) == before and nest.history == []
