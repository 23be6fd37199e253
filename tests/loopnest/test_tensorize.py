"""nest.tensorize: a warp MMA written lane by lane is checked against the mma.m16n8k16 fragment
layouts; a mismatch is a ScheduleError naming it (the nest unchanged), a declared nest the CUDA
backend cannot print with tensor cores is a BuildError, and IREval runs the nest as written."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from codegen.kernel import BuildError
from loopnest import LoopNest, ScheduleError
from loopnest.stmt import Block, For, Store
from loopnest.transforms.tensorize import fragment_col, fragment_row
from te import Buffer, Var, cast, float32


def warp_tile(dtype="float16", k_extent=16, lda=16, b_nk=False, row=fragment_row, col=fragment_col, acc_k=False,
              ldb=None):
    """One warp's 16 x 8 tile of acc += A (16 x 16) * B (16 x 8), lane by lane."""
    As = Buffer("As", (16, lda), dtype)
    Bs = Buffer("Bs", (8, ldb or k_extent) if b_nk else (k_extent, ldb or 8), dtype)
    acc = Buffer("acc", (32, 4 if not acc_k else 64), "float32")
    lane, v, k = Var("lane"), Var("v"), Var("k")
    a = As[row(lane, v), k]
    b = Bs[col(lane, v), k] if b_nk else Bs[k, col(lane, v)]
    at = (lane, v * 16 + k) if acc_k else (lane, v)
    body = Store(acc, at, acc[at] + cast(a, float32) * cast(b, float32))
    nest = LoopNest(For(lane, 0, 32, Block([For(v, 0, 4, Block([For(k, 0, k_extent, Block([body]))]))])),
                    outputs=[acc])
    nest.set_gpu_thread_index(lane, 0)
    return nest, (As, Bs, acc), v


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("b_nk", [False, True])
def test_a_lane_by_lane_tile_is_accepted_recorded_and_runs_as_a_matmul(dtype, b_nk):
    nest, (As, Bs, acc), v = warp_tile(dtype, b_nk=b_nk)
    nest.tensorize(v)
    assert nest.tensorized == {"v": "mma_m16n8k16"} and nest.history[-1]["op"] == "tensorize"
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype(As.dtype.numpy)
    b = rng.standard_normal(tuple(int(d) for d in Bs.shape)).astype(Bs.dtype.numpy)
    out = np.zeros((32, 4), np.float32)
    build(nest, [As, Bs, acc], target="ireval")(As=a, Bs=b, acc=out)
    want = a.astype(np.float64) @ (b.T if b_nk else b).astype(np.float64)
    lanes = np.arange(32)
    for vv in range(4):
        np.testing.assert_allclose(out[:, vv], want[fragment_row(lanes, vv), fragment_col(lanes, vv)], rtol=1e-5,
                                   atol=1e-5)


@pytest.mark.parametrize("kwargs,message", [
    (dict(dtype="float32"), "must both be float16 or both bfloat16"),
    (dict(k_extent=8), "must be the 4 accumulators of a lane and k = 16"),
    (dict(lda=20), "multiples of 8 elements"),
    (dict(col=lambda lane, v: fragment_row(lane, v) % 8), "fragment layout"),
    (dict(row=lambda lane, v: fragment_col(lane, v) * 2), "fragment layout"),
    (dict(acc_k=True), "changes with k"),
])
def test_a_mismatch_is_named_and_the_nest_is_unchanged(kwargs, message):
    nest, _, v = warp_tile(**kwargs)
    before, history = str(nest), list(nest.history)
    with pytest.raises(ScheduleError, match=message):
        nest.tensorize(v)
    assert str(nest) == before and nest.history == history and nest.tensorized == {}


def test_the_tile_must_sit_in_the_lanes_of_a_warp():
    As, Bs = Buffer("As", (16, 16), "float16"), Buffer("Bs", (16, 8), "float16")
    acc = Buffer("acc", (32, 4), "float32")
    lane, v, k = Var("lane"), Var("v"), Var("k")
    body = Store(acc, (lane, v), acc[lane, v] + cast(As[fragment_row(lane, v), k], float32)
                 * cast(Bs[k, fragment_col(lane, v)], float32))
    nest = LoopNest(For(lane, 0, 32, Block([For(v, 0, 4, Block([For(k, 0, 16, Block([body]))]))])), outputs=[acc])
    with pytest.raises(ScheduleError, match="threadIdx.x with 32 iterations"):
        nest.tensorize(v)
    with pytest.raises(ScheduleError, match="unknown intrinsic"):
        nest.tensorize(v, "wgmma")


def test_cuda_refuses_a_declared_tile_whose_operands_are_not_in_shared_memory():
    nest, (As, Bs, acc), v = warp_tile()
    nest.tensorize(v)
    with pytest.raises(BuildError, match="loop v was tensorized as mma_m16n8k16.*As is in global memory"):
        build(nest, [As, Bs, acc], target="cuda")


def test_float32_operands_need_the_tf32_intrinsic():
    nest, _, v = warp_tile("float32", k_extent=8)
    with pytest.raises(ScheduleError, match="must both be float16 or both bfloat16 for mma_m16n8k16"):
        nest.tensorize(v)
    nest.tensorize(v, "mma_m16n8k8_tf32")
    assert nest.tensorized == {"v": "mma_m16n8k8_tf32"}


def test_float8_takes_b_stored_n_by_k_only():
    nest, _, v = warp_tile("float8_e4m3", k_extent=32, lda=32)     # B is 32 x 8: rows of 8 bytes
    with pytest.raises(ScheduleError, match="multiples of 16 elements"):
        nest.tensorize(v, "mma_m16n8k32_f8")
    nest, _, v = warp_tile("float8_e4m3", k_extent=32, lda=32, ldb=16)
    with pytest.raises(ScheduleError, match="8-bit B tiles must be stored N x K"):
        nest.tensorize(v, "mma_m16n8k32_f8")
    nest, _, v = warp_tile("float8_e4m3", k_extent=32, lda=32, b_nk=True)
    nest.tensorize(v, "mma_m16n8k32_f8")
    assert nest.tensorized == {"v": "mma_m16n8k32_f8"}


def test_transforms_that_would_break_a_declared_mma_nest_are_refused():
    """A nest declared by tensorize (here by gpu_matmul) must stay a warp MMA: a transform of
    its loops that breaks it is refused, the nest unchanged, rather than accepted and then
    refused by the CUDA build (the random tester's matmul programs: split_with_mask of the
    accumulator loop). Loops outside it transform as usual."""
    from codegen.cuda.mma_matmul import mma_matmul_example
    ex = mma_matmul_example(32, 32, 32, BM=16, BN=16, BK=32, WM=16, WN=16, stages=2)
    nest = ex.nest
    assert nest.tensorized == {"kk": "mma_m16n8k16"}
    v = next(lp for lp in nest.get_inner_loops(nest.loop("kk")) if lp.extent == 4)
    for step, why in ((lambda: nest.split_with_mask(v, 1), "must be the 4 accumulators of a lane"),
                      (lambda: nest.unroll(nest.loop("kk")), "the loop is gone")):
        before, history = str(nest), list(nest.history)
        with pytest.raises(ScheduleError, match=f"loop kk was declared a warp MMA by tensorize.*{why}"):
            step()
        assert str(nest) == before and nest.history == history
    copy_loop = next(lp for lp in nest.get_all_loops() if lp.name.startswith("e"))     # a tile copy
    nest.split_with_mask(copy_loop, 2)
    assert "mma.sync" in build(nest, ex.args, target="cuda").source
