"""auto_space(..., "cuda"): GPU templates for element-wise tensors, reductions and matmuls (tensor
cores for float16/bfloat16), each seed and random point a nest that builds for CUDA and computes,
on IREval, what numpy does; contractions without a template are a named SpaceError."""
from __future__ import annotations

import random

import numpy as np
import pytest

from codegen import build
from te import Buffer, Compute, Reduce, Sum, cast, exp, float32
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


def test_a_contraction_without_a_template_is_a_named_space_error():
    X = Buffer("X", (1, 4, 10, 10), "float32")
    W = Buffer("W", (8, 4, 3, 3), "float32")
    Y = Reduce("Y", (1, 8, 8, 8), Sum(), lambda n, k, y, x, c, r, s: X[n, c, y + r, x + s] * W[k, c, r, s],
               (4, 3, 3))
    with pytest.raises(SpaceError, match="not a lone matmul"):
        auto_space([Y], "cuda")


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
