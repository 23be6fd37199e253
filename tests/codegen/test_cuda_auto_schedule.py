"""build(..., target="cuda", schedule="auto"): the GPU templates' default choices
(loopnest.auto.gpu.auto_schedule_gpu), the same schedule the CUDA tuning space seeds with; the
values checked on IREval and the host emulation, the report one line per tensor, computations
without a template a ScheduleError that leaves the nest as it was."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen import build
from loopnest import LoopNest, ScheduleError
from loopnest.auto.gpu import auto_schedule_gpu
from te import Buffer, Compute, Max, Min, Reduce, Sum, cast, exp, float32
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


def test_a_float32_product_with_b_transposed_takes_the_reduction_template():
    # the float32 register-tiled tree reads B as K x N: it refused x @ W.T, and auto_schedule raised
    A, B = Buffer("A", (64, 128), "float32"), Buffer("B", (64, 128), "float32")
    C = Reduce("C", (64, 64), Sum(), lambda i, j, k: A[i, k] * B[j, k], (128,))
    nest = LoopNest([C])
    assert str(auto_schedule_gpu(nest)).startswith("C: a block per output, a tree of")
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((64, 128)).astype(np.float32) for _ in range(2))
    c = np.zeros((64, 64), np.float32)
    build(nest, [A, B, C], target="ireval")(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.T.astype(np.float64), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n, taps", [(1000, 31), (300, 64), (5, 3)])
def test_a_reduction_of_few_terms_takes_one_output_per_thread(n, taps):
    # a block of 256 threads per output of a 1-D convolution left most of them idle
    S, w = Buffer("S", (n + taps - 1,), "float32"), Buffer("w", (taps,), "float32")
    C = Reduce("C", (n,), Sum(), lambda i, k: S[i + k] * w[k], (taps,))
    nest = LoopNest([C])
    report = str(auto_schedule_gpu(nest))
    assert report == (f"C: blocks of 256 threads, 4 elements each (reduction of {taps} terms: too few for a tree "
                      "of threads, one output per thread)"), report
    rng = np.random.default_rng(n)
    s, ww = rng.standard_normal(n + taps - 1).astype(np.float32), rng.standard_normal(taps).astype(np.float32)
    want = np.correlate(s.astype(np.float64), ww.astype(np.float64), "valid")
    got = np.zeros(n, np.float32)
    build(nest, [S, w, C], target="ireval")(s, ww, got)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    from codegen.cuda.emulate import host_compiler, run_on_host
    if host_compiler() is not None:
        got = np.zeros(n, np.float32)
        run_on_host(build(nest, [S, w, C], target="cuda"), s, ww, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    longer = Reduce("D", (n,), Sum(), lambda i, k: S[i % 3 + k] * w[k % taps], (65,))
    assert "a tree of" in str(auto_schedule_gpu(LoopNest([longer])))


@pytest.mark.parametrize("outputs, dims, reducer", [(1, (60, 70), Sum), (3, (40, 50), Sum), (1, (4100,), Max),
                                                    (2, (7, 9, 33), Sum)])
def test_a_reduction_of_few_outputs_splits_its_terms_over_two_kernels(monkeypatch, outputs, dims, reducer):
    """The sum of a whole array took one thread (the block tree's fuse was refused for two
    reduction loops; one output made one block at best); it now takes partials over many
    blocks, then a block per output adding them (loopnest.auto.gpu.grid_reduce). Thresholds
    lowered so that IREval runs it in a moment; values on IREval and the host emulation."""
    import loopnest.auto.gpu as gpu
    monkeypatch.setattr(gpu, "GRID_MIN_TERMS", 1000)
    monkeypatch.setattr(gpu, "GRID_TERMS_PER_THREAD", 4)
    A = Buffer("A", (outputs, *dims), "float32")
    S = Reduce("S", (outputs,), reducer(), lambda o, *r: A[(o, *r)], dims)
    nest = LoopNest([S])
    report = str(auto_schedule_gpu(nest))
    assert "partials per output in blocks of 256 threads, then a block per output" in report, report
    kernel = build(nest, [A, S], target="cuda")
    assert len(kernel.launch_dims()) == 2
    a = np.random.default_rng(outputs).standard_normal((outputs, *dims)).astype(np.float32)
    axes = tuple(range(1, a.ndim))
    want = a.astype(np.float64).sum(axes) if reducer is Sum else a.max(axes)
    got = np.zeros(outputs, np.float32)
    build(nest, [A, S], target="ireval")(a, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    from codegen.cuda.emulate import host_compiler, run_on_host
    if host_compiler() is not None:
        got = np.zeros(outputs, np.float32)
        run_on_host(kernel, a, got)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    B = Buffer("B", (6000,), "float32")
    many = Reduce("M", (200,), Sum(), lambda i, k: B[k] * 1.0, (6000,))        # enough outputs for a block each
    assert "a block per output, a tree of 256 threads" in str(auto_schedule_gpu(LoopNest([many])))


@settings(max_examples=12, deadline=None)
@given(outputs=st.integers(1, 4), dims=st.lists(st.integers(1, 40), min_size=1, max_size=3),
       reducer=st.sampled_from([Sum, Max, Min]), threads=st.sampled_from([32, 64]))
def test_split_reductions_of_any_shape_equal_numpy_on_ireval(outputs, dims, reducer, threads):
    """grid_reduce over random reduction shapes (tails where the partials do not divide the
    terms, one to three reduction loops), the thresholds lowered so that every shape takes it."""
    import loopnest.auto.gpu as gpu
    A = Buffer("A", (outputs, *dims), "float32")
    S = Reduce("S", (outputs,), reducer(), lambda o, *r: A[(o, *r)], tuple(dims))
    nest = LoopNest([S])
    partials = gpu.pow2_at_most(max(1, int(np.prod(dims)) // 3), 64)
    if partials < threads:
        partials = threads
    gpu.grid_reduce(nest, nest.buffer("S"), threads, partials)
    a = np.random.default_rng(int(np.prod(dims))).standard_normal((outputs, *dims)).astype(np.float32)
    axes = tuple(range(1, a.ndim))
    want = {Sum: a.astype(np.float64).sum, Max: a.max, Min: a.min}[reducer](axes)
    got = np.zeros(outputs, np.float32)
    build(nest, [A, S], target="ireval")(a, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_grid_reduce_refuses_a_reduction_to_a_scalar_and_leaves_the_nest():
    """The second kernel of grid_reduce binds the output loop to its blocks: a reduction with
    no output dimension is refused, the nest unchanged (it raised IndexError halfway: the
    random tester, seed 213). The automatic GPU schedule takes a block for it instead."""
    import loopnest.auto.gpu as gpu
    A = Buffer("A", (1000,), "float32")
    S = Reduce("S", (), Sum(), lambda k: A[k], (1000,))
    nest = LoopNest([S])
    before = str(nest)
    with pytest.raises(ScheduleError, match="no output dimension"):
        gpu.grid_reduce(nest, nest.buffer("S"), 64, 256)
    assert str(nest) == before and nest.history == []
    a = np.random.default_rng(6).standard_normal(1000).astype(np.float32)
    s = np.zeros((), np.float32)
    gpu_nest = LoopNest([S])
    assert "a block per output" in str(gpu_nest.auto_schedule(target="cuda"))
    build(gpu_nest, [A, S], target="ireval")(a, s)
    np.testing.assert_allclose(s, a.astype(np.float64).sum(), rtol=1e-5)


def test_a_convolution_takes_the_direct_template():
    X = Buffer("X", (1, 4, 10, 10), "float32")
    W = Buffer("W", (8, 4, 3, 3), "float32")
    Y = Reduce("Y", (1, 8, 8, 8), Sum(), lambda n, k, y, x, c, r, s: X[n, c, y + r, x + s] * W[k, c, r, s],
               (4, 3, 3))
    kernel = build(LoopNest([Y]), [X, W, Y], target="cuda", schedule="auto")
    assert str(kernel.auto_schedule_report) == ("Y: 2 output channels x 1 pixels per thread, at most 128 threads per "
                                                "block, input windows in shared memory (direct convolution)")
    assert "__shared__" in kernel.source


@pytest.mark.parametrize("k, h, w", [(1, 1, 6), (1, 6, 1), (1, 1, 1), (3, 1, 6), (3, 4, 1), (1, 4, 6)])
def test_a_convolution_whose_input_window_is_one_row_or_column_gets_the_direct_template(k, h, w):
    # the copy of a window one row tall (or one column wide) has one loop, not two: the
    # template tiled the input-channel loop with it and auto_schedule refused (random tester,
    # seed 183, case 100: a 1 x 1 filter over one output row)
    from codegen.cuda.emulate import host_compiler, run_on_host
    X = Buffer("X", (1, 2, h + k - 1, w + k - 1), "float32")
    W = Buffer("W", (16, 2, k, k), "float32")
    Y = Reduce("Y", (1, 16, h, w), Sum(), lambda n, c, y, x, ci, r, s: X[n, ci, y + r, x + s] * W[c, ci, r, s],
               (2, k, k))
    nest = LoopNest([Y])
    assert "direct convolution" in str(nest.auto_schedule("cuda"))
    rng = np.random.default_rng(1)
    x, wt = rng.standard_normal(X.shape).astype(np.float32), rng.standard_normal(W.shape).astype(np.float32)
    want = sum(np.einsum("nchw,kc->nkhw", x[:, :, r:r + h, s:s + w].astype(np.float64), wt[:, :, r, s])
               for r in range(k) for s in range(k))
    got = np.zeros(Y.shape, np.float32)
    build(nest, [X, W, Y], target="ireval")(x, wt, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if host_compiler() is not None:
        got[:] = 0
        run_on_host(build(nest, [X, W, Y], target="cuda"), x, wt, got)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_an_external_call_is_refused_and_the_nest_is_unchanged():
    from te import Extern
    A = Buffer("A", (4, 4), "float32")
    T = Extern("T", (4, 4), [A], lambda a, t: None, func_name="copy")
    B = Compute("B", (4, 4), lambda i, j: T[i, j] + 1.0)
    nest = LoopNest([B])
    before = str(nest)
    with pytest.raises(ScheduleError, match="external call"):
        nest.auto_schedule("cuda")
    assert str(nest) == before and nest.history == []


def test_a_cpu_target_description_is_not_a_gpu_schedule():
    from loopnest import Target
    X, Y = _softmax()
    with pytest.raises(ValueError, match="for target 'cuda', schedule must be None or 'auto'"):
        build(LoopNest([Y]), [X, Y], target="cuda", schedule=Target(vector_bits=256))


def test_a_refused_template_step_falls_back_to_a_thread_per_output():
    """A symbolic 2-D element-wise tensor (the flattened domain's iterations cannot be told
    apart) gets the fallback, its first output loop over blocks of threads, and the report
    says why; the reduction over two loops beside it takes the tree (its reduction loops
    flattened into one); values on IREval."""
    from te import Var
    N = Var("N", "int32")
    A = Buffer("A", (N, 12, 10), "float32")      # 120 terms: more than a thread per output takes
    S = Reduce("S", (N,), Sum(), lambda i, r, q: A[i, r, q], (12, 10))
    E = Compute("E", (N, N + 1), lambda i, j: S[i] * 2.0 + cast(j, "float32"))
    nest = LoopNest([E, S])
    report = str(nest.auto_schedule("cuda"))
    assert "S: a block per output, a tree of 256 threads (reduction)" in report, report
    assert "E: its first output loop over blocks of 128 threads, one output each (elementwise; the template was " \
           "refused: cannot bind" in report, report
    a = np.random.default_rng(2).standard_normal((5, 12, 10)).astype(np.float32)
    e, s = np.zeros((5, 6), np.float32), np.zeros(5, np.float32)
    build(nest, [A, E, S, N], target="ireval")(a, e, s, 5)
    np.testing.assert_allclose(s, a.astype(np.float64).sum((1, 2)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(e, s[:, None] * 2.0 + np.arange(6), rtol=1e-5, atol=1e-5)


def test_the_nest_method_takes_cuda_and_keeps_the_report():
    X, Y = _softmax()
    nest = LoopNest([Y])
    report = nest.auto_schedule("cuda")
    assert nest.auto_schedule_report is report and "Y: blocks of 256 threads" in str(report)
    replayed = LoopNest([Y]).replay(nest.history_json())
    assert str(replayed) == str(nest)
    with pytest.raises(ScheduleError, match="needs an unscheduled nest"):
        nest.auto_schedule("cuda")


def test_a_nest_written_as_statements_is_refused():
    from loopnest.stmt import For, Store
    from te import Var
    A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    i = Var("i")
    nest = LoopNest(For(i, 0, 8, Store(B, (i,), A[i] + 1.0)), outputs=[B])
    with pytest.raises(ScheduleError, match="written as statements"):
        nest.auto_schedule("cuda")
    assert nest.history == []


def test_an_intermediate_read_many_times_gets_a_kernel_of_its_own():
    """Inlining multiplies a producer's body by its reads: within INLINE_BUDGET it is inlined, past
    it computed by a kernel of its own (seed 140, case 232: chains of tensors read 15 times each
    grew exponentially when inlined, and ran past the tester's time limit)."""
    from loopnest.auto.gpu import INLINE_BUDGET
    A = Buffer("A", (64,), "float32")
    T1 = Compute("T1", (64,), lambda i: A[i] * 2.0)                          # small: inlined
    T2 = Compute("T2", (64,), lambda i: exp(T1[i]) * T1[63 - i] + T1[i] * 3.0 - 1.0)
    T3 = Compute("T3", (64,), lambda i: sum(T2[(i + d) % 64] for d in range(12)))
    nest = LoopNest([T3])
    report = nest.auto_schedule("cuda")
    assert str(report).splitlines()[:2] == ["T1: inlined (element-wise intermediate)",
                                            "T2: blocks of 256 threads, 4 elements each (element-wise)"]
    assert INLINE_BUDGET < 12 * 10
    a = np.random.default_rng(3).standard_normal(64).astype(np.float32)
    t3 = np.zeros(64, np.float32)
    build(nest, [A, T3], target="ireval")(a, t3)
    t1 = a.astype(np.float64) * 2
    t2 = np.exp(t1) * t1[::-1] + t1 * 3 - 1
    np.testing.assert_allclose(t3, sum(np.roll(t2, -d) for d in range(12)), rtol=1e-4, atol=1e-4)
