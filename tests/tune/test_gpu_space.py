"""auto_space(..., "cuda"): GPU templates for element-wise tensors, reductions, matmuls (tensor
cores for float16/bfloat16) and direct convolutions, each seed and random point a nest that builds
for CUDA and computes, on IREval (and the host emulation), what numpy does; contractions without a
template are a named SpaceError."""
from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from codegen import build
from te import Buffer, Compute, Reduce, Sum, cast, exp, float32, if_then_else
from tune import auto_space
from tune.errors import SpaceError
from loopnest.transforms.gpu_matmul import matmul_operands
from tune.gpu_space import MMA_TILES


def _points(space, n=3, seed=0):
    rnd = random.Random(seed)
    yield from space.seeds
    for _ in range(n):
        yield [rnd.randrange(len(k.options)) for k in space.knobs]


def _check_points(outputs, args, inputs, want, **tol):
    space = auto_space(outputs, "cuda")
    points = dict.fromkeys(tuple(p) for p in _points(space))     # each distinct point once (small spaces repeat)
    nests = [space.apply(list(p)) for p in points]
    assert nests
    for nest in nests:
        k = build(nest, args, target="cuda")
        assert all(d[2] != (1, 1, 1) for d in k.launch_dims())        # every kernel has threads
        arrays = {b.name: inputs[b.name].copy() if b.name in inputs else np.zeros(want[b.name].shape, np.float32)
                  for b in args}
        build(nest, args, target="ireval")(**arrays)
        for name, ref in want.items():
            np.testing.assert_allclose(arrays[name], ref, **tol)
    return space


def test_elementwise_pipelines_inline_their_intermediates_and_take_threads():
    A = Buffer("A", (1000,), "float32")
    T = Compute("T", (1000,), lambda i: A[i] * 2.0)
    B = Compute("B", (1000,), lambda i: exp(T[i]) + 1.0)
    a = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    space = _check_points([B], [A, B], {"A": a}, {"B": np.exp(a * 2.0) + 1.0}, rtol=1e-5)
    assert [k.name for k in space.knobs] == ["B.threads", "B.per"]
    assert list(space.seeds) == [space.point({"B.threads": 256, "B.per": 4})]


def test_row_reductions_are_block_trees():
    A = Buffer("A", (6, 300), "float32")
    S = Reduce("S", (6,), Sum(), lambda i, k: A[i, k], (300,))
    a = np.random.default_rng(1).standard_normal((6, 300)).astype(np.float32)
    _check_points([S], [A, S], {"A": a}, {"S": a.astype(np.float64).sum(1)}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_matmuls_take_the_hand_trees_tensor_cores_for_half_precision(dtype):
    A, B = Buffer("A", (64, 64), dtype), Buffer("B", (64, 64), dtype)
    C = Reduce("C", (64, 64), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (64,))
    assert [x if isinstance(x, str) else x.name for x in matmul_operands(C)] == ["A", "B", "kn"]
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((64, 64)).astype(A.dtype.numpy) for _ in range(2))
    space = _check_points([C], [A, B, C], {"A": a, "B": b}, {"C": a.astype(np.float64) @ b}, rtol=1e-4, atol=1e-3)
    nest = space.apply([0] * len(space.knobs))
    if dtype == "float16":
        assert nest.tensorized == {"kk": "mma_m16n8k16"}
        assert space.knob("C.tile").options == (0,)      # only the 64 x 64 tile divides 64
        assert MMA_TILES[0]["BM"] == 128
    else:
        assert nest.tensorized == {}


def _conv_ref(x, w):
    """The valid convolution of ``x`` (n, c, h, w) with ``w`` (k, c, 3, 3), in float64."""
    n, _, h, wd = x.shape
    out = np.zeros((n, w.shape[0], h - 2, wd - 2))
    for r in range(3):
        for s in range(3):
            out += np.einsum("nchw,kc->nkhw", x[:, :, r:r + h - 2, s:s + wd - 2].astype(np.float64), w[:, :, r, s])
    return out


def test_a_direct_convolution_of_an_input_takes_the_shared_window_template():
    X = Buffer("X", (1, 4, 10, 10), "float32")
    W = Buffer("W", (8, 4, 3, 3), "float32")
    Y = Reduce("Y", (1, 8, 8, 8), Sum(), lambda n, k, y, x, c, r, s: X[n, c, y + r, x + s] * W[k, c, r, s],
               (4, 3, 3))
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((1, 4, 10, 10)).astype(np.float32), rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    space = _check_points([Y], [X, W, Y], {"X": x, "W": w}, {"Y": _conv_ref(x, w)}, rtol=1e-4, atol=1e-4)
    assert [k.name for k in space.knobs] == ["Y.channels", "Y.pixels", "Y.threads"]
    assert list(space.seeds) == [space.point({"Y.channels": 2, "Y.pixels": 1, "Y.threads": 128})]
    assert "X_sh" in space.apply(space.seeds[0]).buffers


def test_the_benchmark_convolution_is_seeded_with_its_hand_schedule():
    """The padded convolution of bench.kernels: the padding is computed into the shared window,
    and the first seed is exactly the benchmark's GPU schedule (the same CUDA source)."""
    from bench.gpu_schedules import TEST_SIZES, gpu_nest
    from bench.kernels import WORKLOADS
    spec = WORKLOADS["conv2d"].make(TEST_SIZES["conv2d"])
    want = spec.reference(spec.inputs)
    space = _check_points(spec.outputs, spec.args, spec.inputs, want, rtol=1e-4, atol=1e-4)
    seed = space.apply(space.seeds[0])
    assert "P_sh" in seed.buffers
    assert build(seed, spec.args, target="cuda").source == build(gpu_nest("conv2d", spec), spec.args,
                                                                 target="cuda").source


def test_a_convolution_runs_on_the_cuda_host_emulation():
    from codegen.cuda.emulate import host_compiler, run_on_host
    if host_compiler() is None:
        pytest.skip("no host C++ compiler for the CUDA emulation")
    X = Buffer("X", (2, 3, 7, 9), "float32")
    W = Buffer("W", (6, 3, 3, 3), "float32")
    Y = Reduce("Y", (2, 6, 5, 7), Sum(), lambda n, k, y, x, c, r, s: W[k, c, r, s] * X[n, c, y + r, x + s],
               (3, 3, 3))
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 3, 7, 9)).astype(np.float32), rng.standard_normal((6, 3, 3, 3)).astype(np.float32)
    space = auto_space([Y], "cuda")
    for point in _points(space, n=2, seed=1):
        kernel = build(space.apply(list(point)), [X, W, Y], target="cuda")
        y = np.zeros((2, 6, 5, 7), np.float32)
        run_on_host(kernel, x, w, y)
        np.testing.assert_allclose(y, _conv_ref(x, w), rtol=1e-4, atol=1e-4)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(3, 9), st.integers(3, 12), st.integers(1, 5),
       st.sampled_from([0, 1]), st.data())
def test_every_convolution_and_knob_value_computes_the_convolution(n, c, h, w, k, padded, data):
    """Any shape (odd channel counts and widths included) and any point of the space: the nest
    computes on IREval what numpy does, with or without a zero-padding tensor for the window."""
    X = Buffer("X", (n, c, h, w), "float32")
    W = Buffer("W", (k, c, 3, 3), "float32")
    if padded:
        P = Compute("P", (n, c, h + 2, w + 2), lambda b, ci, y, x: if_then_else(
            (y >= 1) & (y <= h) & (x >= 1) & (x <= w), X[b, ci, y - 1, x - 1], 0.0))
        Y = Reduce("Y", (n, k, h, w), Sum(), lambda b, co, y, x, ci, r, s: P[b, ci, y + r, x + s] * W[co, ci, r, s],
                   (c, 3, 3))
    else:
        Y = Reduce("Y", (n, k, h - 2, w - 2), Sum(),
                   lambda b, co, y, x, ci, r, s: X[b, ci, y + r, x + s] * W[co, ci, r, s], (c, 3, 3))
    space = auto_space([Y], "cuda")
    point = [data.draw(st.integers(0, len(kn.options) - 1), label=kn.name) for kn in space.knobs]
    rng = np.random.default_rng(5)
    x, wt = rng.standard_normal((n, c, h, w)).astype(np.float32), rng.standard_normal((k, c, 3, 3)).astype(np.float32)
    want = _conv_ref(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))) if padded else x, wt)
    y = np.zeros(want.shape, np.float32)
    nest = space.apply(point)
    build(nest, [X, W, Y], target="ireval")(x, wt, y)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    assert build(nest, [X, W, Y], target="cuda").launch_dims()


def test_other_contractions_take_the_reduction_template():
    """A batched matmul and a strided convolution (no template of their own) and a matmul no tile
    divides are reductions: a block per output and a thread tree, or the fallback where a step of
    that is refused; every point computes what numpy does."""
    rng = np.random.default_rng(6)
    # (more than SHORT_REDUCTION terms: fewer take one output per thread, as element-wise tensors)
    A, B = Buffer("A", (2, 8, 72), "float32"), Buffer("B", (2, 72, 8), "float32")
    C = Reduce("C", (2, 8, 8), Sum(), lambda b, i, j, k: A[b, i, k] * B[b, k, j], (72,))
    a, b = rng.standard_normal((2, 8, 72)).astype(np.float32), rng.standard_normal((2, 72, 8)).astype(np.float32)
    space = _check_points([C], [A, B, C], {"A": a, "B": b}, {"C": a.astype(np.float64) @ b}, rtol=1e-4, atol=1e-4)
    assert [k.name for k in space.knobs] == ["C.threads"]
    X = Buffer("X", (1, 8, 10, 10), "float32")
    W = Buffer("W", (8, 8, 3, 3), "float32")
    Y = Reduce("Y", (1, 8, 4, 4), Sum(), lambda n, k, y, x, c, r, s: X[n, c, 2 * y + r, 2 * x + s] * W[k, c, r, s],
               (8, 3, 3))       # strided
    x, w = rng.standard_normal((1, 8, 10, 10)).astype(np.float32), rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    want = _conv_ref(x, w)[:, :, ::2, ::2][:, :, :4, :4]
    _check_points([Y], [X, W, Y], {"X": x, "W": w}, {"Y": want}, rtol=1e-4, atol=1e-4)
    M, N = Buffer("M", (24, 80), "float32"), Buffer("N", (80, 24), "float32")
    P = Reduce("P", (24, 24), Sum(), lambda i, j, k: M[i, k] * N[k, j], (80,))
    m, n = rng.standard_normal((24, 80)).astype(np.float32), rng.standard_normal((80, 24)).astype(np.float32)
    space = _check_points([P], [M, N, P], {"M": m, "N": n}, {"P": m.astype(np.float64) @ n}, rtol=1e-4, atol=1e-4)
    assert [k.name for k in space.knobs] == ["P.threads"]      # no tile divides 24: not the matmul tree


def test_an_external_call_is_a_named_space_error():
    from te import Extern
    A = Buffer("A", (4, 4), "float32")
    T = Extern("T", (4, 4), [A], lambda a, t: None, func_name="copy")
    with pytest.raises(SpaceError, match="external call, which the CUDA backend does not run"):
        auto_space([Compute("B", (4, 4), lambda i, j: T[i, j] + 1.0)], "cuda")


def test_a_tuned_matmul_schedule_replays_from_its_history():
    """autotune rebuilds the best kernel by replaying the record's trace: the tree must be a
    recorded transform (nest.gpu_matmul), not a root set by hand."""
    from loopnest import LoopNest
    A, B = Buffer("A", (64, 64), "bfloat16"), Buffer("B", (64, 64), "bfloat16")
    C = Reduce("C", (64, 64), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (64,))
    space = auto_space([C], "cuda")
    nest = space.apply(space.seeds[0])
    replayed = LoopNest([C]).replay(nest.history)
    assert str(replayed) == str(nest) and replayed.tensorized == {"kk": "mma_m16n8k16"}
    assert "tc_mma_bf16(" in build(replayed, [A, B, C], target="cuda").source


def test_on_sm90_half_precision_matmuls_seed_with_the_warpgroup_tree_where_the_shared_memory_allows():
    from loopnest import LoopNest
    from loopnest.auto.gpu import WGMMA_TILES
    A, B = Buffer("A", (256, 128), "float16"), Buffer("B", (128, 256), "float16")
    C = Reduce("C", (256, 256), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (128,))
    space = auto_space([C], "cuda", arch="sm_90", max_shared_bytes=227 * 1024)
    kind, tiles = space.fn.plan.matmul_tiles()
    assert tiles[:len(WGMMA_TILES)] == WGMMA_TILES and tiles[len(WGMMA_TILES):] == [
        t for t in MMA_TILES if 256 % t["BM"] == 0 and 256 % t["BN"] == 0 and 128 % t["BK"] == 0]
    nest = space.apply(space.seeds[0])
    assert nest.tensorized == {"kk": "wgmma_m64nNk16"}
    replayed = LoopNest([C]).replay(nest.history)
    assert str(replayed) == str(nest)
    source = build(replayed, [A, B, C], target="cuda", max_shared_bytes=227 * 1024).source
    assert "tc_wgmma_m64n256k16_f16_tn(" in source
    # without the opt-in shared memory, or on another device, the mma.sync tiles only
    for kw in (dict(arch="sm_90"), dict(arch="sm_80", max_shared_bytes=163 * 1024), {}):
        other = auto_space([C], "cuda", **kw)
        assert all("wgmma" not in t for t in other.fn.plan.matmul_tiles()[1]), kw
