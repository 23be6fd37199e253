"""The CUDA step cuda_wgmma_overlap (codegen.cuda.wgmma_overlap): a warpgroup MMA nest leaves its
group running into the next iteration of its K loop (wgmma.wait_group 1, and 0 after the loop)
only where nothing the next iteration writes before its own MMAs is what the group reads; the
tree's ``ahead`` (how far the copies run ahead) decides it. IREval runs every ``ahead``."""
from __future__ import annotations

import re

import numpy as np
import pytest

from codegen import build
from codegen.cuda.compile import compile_ptx, nvcc_available
from codegen.cuda.mma_matmul import wgmma_matmul_example
from loopnest import LoopNest, ScheduleError

SHARED = 227 * 1024


def _kernel(**kw):
    ex = wgmma_matmul_example(**kw)
    return build(ex.nest, ex.args, target="cuda", max_shared_bytes=SHARED)


def _ko_loop(source: str) -> str:
    """The text of the K loop and what follows it up to the write-back."""
    start = source.index("for (int v_ko = ")
    return source[start:]


def test_copies_two_tiles_ahead_of_four_stages_leave_one_group_in_flight():
    k = _kernel(M=128, N=256, K=512, BM=128, BN=256, BK=64, stages=4)
    plan = k.module.plan
    assert plan.describe_wgmma_overlap() == "kernel k0_C: 1 warpgroup MMA nest(s) in flight across iterations of ko"
    text = _ko_loop(k.source)
    # in the loop: the copies go to stage (ko + 2) % 4 while the last MMAs read (ko - 1) % 4
    assert "(v_ko + 2) % 4" in text and text.count("tc_wgmma_wait<1>();") == 1
    # after the loop, every group is complete before the accumulators are stored
    after = text[text.index("tc_wgmma_wait<1>();") + 1:]
    drain = after.index("tc_wgmma_wait<0>();")
    assert drain < after.index("b_C[")
    assert "wgmma_overlap" in plan.done


@pytest.mark.parametrize("stages, ahead", [(4, 3), (3, 2), (2, 1), (1, 0)])
def test_copies_into_the_stage_the_last_mmas_read_wait_for_them(stages, ahead):
    # stage (ko + stages - 1) % stages is (ko - 1) % stages: the previous iteration's operands
    k = _kernel(M=128, N=128, K=512, BM=128, BN=128, BK=64, stages=stages, ahead=ahead)
    assert k.module.plan.describe_wgmma_overlap() == ""
    assert "tc_wgmma_wait<1>" not in k.source and k.source.count("tc_wgmma_wait<0>();") == 1
    assert not k.module.plan.wgmma_drains


@pytest.mark.parametrize("stages, ahead", [(4, 0), (4, 2), (4, 3), (3, 1)])
def test_every_ahead_computes_the_matmul_on_ireval(stages, ahead):
    ex = wgmma_matmul_example(64, 64, 96, BM=64, BN=64, BK=16, stages=stages, ahead=ahead)
    arrays, expected = ex.make(np.random.default_rng(stages * 10 + ahead))
    build(ex.nest, ex.args, target="ireval")(**arrays)
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("ahead", [-1, 4, 1.0])
def test_an_ahead_outside_the_stages_is_refused_and_the_nest_kept(ahead):
    ex = wgmma_matmul_example(128, 64, 256, BN=64, BK=32, stages=4)
    nest = LoopNest([ex.args[2]])
    before = str(nest.root)
    with pytest.raises(ScheduleError, match=r"ahead must be an int from 0 to stages - 1 \(3\), got"):
        nest.gpu_matmul(True, wgmma=True, BN=64, BK=32, stages=4, ahead=ahead)
    assert str(nest.root) == before and not nest.history


def test_the_default_of_four_stages_copies_two_tiles_ahead_and_overlaps():
    k = _kernel(M=128, N=256, K=512)
    assert re.search(r"\(v_ko \+ 2\) % 4", k.source) and "tc_wgmma_wait<1>();" in k.source


def test_three_stages_copy_one_tile_ahead_and_overlap():
    k = _kernel(M=128, N=256, K=512, stages=3)
    assert re.search(r"\(v_ko \+ 1\) % 3", k.source) and "tc_wgmma_wait<1>();" in k.source


@pytest.mark.skipif(not nvcc_available(), reason="nvcc not installed")
def test_the_overlapped_kernel_compiles_for_sm90a_with_both_waits():
    k = _kernel(M=256, N=512, K=512, BM=128, BN=256, BK=64, stages=4)
    rep = k.compile("sm_90")
    assert rep["arch"] == "sm_90a" and rep["spill_stores"] == 0, rep
    ptx = compile_ptx(k.source, "sm_90a")
    assert "wgmma.wait_group.sync.aligned 1;" in ptx and "wgmma.wait_group.sync.aligned 0;" in ptx


@pytest.mark.parametrize("K, stages", [(128, 3), (128, 4)])
def test_fewer_k_tiles_than_stages_still_overlap(K, stages):
    """With fewer k-tiles than stages the simplifier drops the stage's ``mod`` (``(ko + 1) % 3``
    is ``ko + 1`` for ko < 2): the stage analysis still tells the stages apart, and the host
    emulation (copies deferred to their waits) computes the product."""
    from codegen.cuda.emulate import host_compiler, run_on_host
    k = _kernel(M=64, N=64, K=K, BM=64, BN=64, BK=64, stages=stages)
    overlap = k.module.plan.describe_wgmma_overlap()
    assert overlap == "kernel k0_C: 1 warpgroup MMA nest(s) in flight across iterations of ko"
    assert not re.search(r"\(v_ko \+ \d\) % \d", _ko_loop(k.source))     # no stage wraps around
    if host_compiler() is not None:
        ex = wgmma_matmul_example(M=64, N=64, K=K, BM=64, BN=64, BK=64, stages=stages)
        arrays, expected = ex.make(np.random.default_rng(K))
        run_on_host(k, **arrays)
        np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-4, atol=1e-3)
