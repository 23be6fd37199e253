"""Global-to-shared copies issued as ``cp.async`` (``codegen.cuda.async_copy``) and the
tensor-core matmul tree that prefetches its tiles straight into shared memory
(``mma_matmul(..., prefetch="shared")``): which copies qualify, what is printed, and the
values on IREval and the host emulation (which defers each copy until a wait completes it).
The waits themselves: ``tests/codegen/test_cuda_async_waits.py``."""
from __future__ import annotations

import re

import numpy as np
import pytest

from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from codegen.cuda.mma_matmul import mma_matmul_example
from loopnest import LoopNest, ScheduleError
from loopnest.stmt import Block, For, Store
from te import Buffer, Reduce, Sum, Var, cast, float32

HAVE_EMU = host_compiler() is not None and nvcc_available()
TILES = dict(BM=64, BN=64, BK=32, WM=32, WN=32)


# each element type and each stage count once (the pipeline does not depend on the type; a
# lane-by-lane IREval run of the tree takes seconds)
@pytest.mark.parametrize("dtype,stages", [("float16", 3), ("bfloat16", 2)])
def test_shared_prefetch_matmul_values_on_ireval(stages, dtype):
    ex = mma_matmul_example(64, 64, 128, dtype=dtype, stages=stages, prefetch="shared", **TILES)
    arrays, expected = ex.make(np.random.default_rng(stages))
    build(ex.nest, ex.args, target="ireval")(**arrays)
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("stages", [2, 3])
def test_shared_prefetch_copies_are_cp_async_waited_for_before_every_barrier(stages):
    ex = mma_matmul_example(64, 64, 128, stages=stages, prefetch="shared", **TILES)
    kernel = build(ex.nest, ex.args, target="cuda")
    plan = kernel.module.plan
    # the prologue's copies of stages 0 .. stages-2 and the K loop's copies of the next tile
    assert len(plan.async_copies) == 2 * stages
    assert "issued as cp.async" in plan.describe_async_copies()
    src = kernel.source
    assert src.count("tc_cp_async16(&") == 2 * stages
    waits = [m.start() for m in re.finditer(r"tc_cp_async_wait_(all|group<\d+>)\(\);", src)]
    barriers = [m.start() for m in re.finditer(r"__syncthreads\(\);", src)]
    assert len(waits) == len(barriers) > 0
    for w, b in zip(waits, barriers):     # each wait right before its barrier (only #endif between)
        assert src[w:b].count("\n") == 2 and "#endif" in src[w:b]
    if nvcc_available():
        for arch in ("sm_80", "sm_90"):
            report = kernel.compile(arch)["kernels"]["k0_C"]
            assert report["spill_stores"] == 0


@pytest.mark.skipif(not HAVE_EMU, reason="g++ or the CUDA headers not found")
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_shared_prefetch_matmul_values_on_the_host_emulation(stages):
    ex = mma_matmul_example(64, 64, 128, stages=stages, prefetch="shared", **TILES)
    arrays, expected = ex.make(np.random.default_rng(stages))
    run_on_host(build(ex.nest, ex.args, target="cuda"), **arrays)
    np.testing.assert_allclose(arrays["C"], expected["C"], rtol=1e-5, atol=1e-4)


def test_gpu_matmul_takes_the_prefetch_option_and_refuses_bad_stages():
    A, B = Buffer("A", (64, 128), "float16"), Buffer("B", (128, 64), "float16")
    C = Reduce("C", (64, 64), Sum(), lambda i, j, k: cast(A[i, k], float32) * cast(B[k, j], float32), (128,))
    nest = LoopNest([C])
    nest.gpu_matmul(stages=2, prefetch="shared", **TILES)
    assert nest.history[-1]["kwargs"]["prefetch"] == "shared"
    assert str(LoopNest([C]).replay(nest.history_json())) == str(nest)
    for bad in (dict(stages=5, prefetch="shared"), dict(stages=3), dict(prefetch="global")):
        fresh = LoopNest([C])
        with pytest.raises(ScheduleError, match="stages|prefetch"):
            fresh.gpu_matmul(**bad, **TILES)
        assert fresh.history == []


def _copy_then_read(read_in_same_thread_loop: bool):
    """One block: a 16-byte-per-thread copy of A into a shared tile S, then B = S * 2, read
    back by each thread in the copy's own thread loop, or reversed in a sibling one (after a
    barrier)."""
    A = Buffer("A", (64,), "float32")
    Bo = Buffer("B", (64,), "float32")
    S = Buffer("S", (64,), "float32")
    t, e, t2, e2 = Var("t"), Var("e"), Var("t2"), Var("e2")
    copy = For(e, 0, 4, Block([Store(S, (t * 4 + e,), A[t * 4 + e])]))
    use = lambda tv, ev, at: For(ev, 0, 4, Block([Store(Bo, (tv * 4 + ev,), S[at] * 2.0)]))  # noqa: E731
    if read_in_same_thread_loop:    # each thread reads back what it copied (no barrier, none needed)
        body = [For(t, 0, 16, Block([copy, use(t, e2, t * 4 + e2)]))]
    else:
        body = [For(t, 0, 16, Block([copy])), For(t2, 0, 16, Block([use(t2, e2, 63 - (t2 * 4 + e2))]))]
    blk = Var("blk")
    nest = LoopNest(Block((For(blk, 0, 1, Block(tuple(body))),)), outputs=[Bo])
    nest.set_gpu_block_index(nest.loop("blk"), 0)
    for name in ("e", "e2"):
        nest.vectorize(nest.loop(name))
    for name in ("t",) if read_in_same_thread_loop else ("t", "t2"):
        nest.set_gpu_thread_index(nest.loop(name), 0)
    return nest, [A, Bo]


@pytest.mark.parametrize("same_loop", [False, True])
def test_a_copy_read_back_in_its_own_thread_loop_stays_plain(same_loop):
    nest, args = _copy_then_read(same_loop)
    kernel = build(nest, args, target="cuda")
    assert bool(kernel.module.plan.async_copies) is (not same_loop)
    assert ("tc_cp_async16(&" in kernel.source) is (not same_loop)
    if HAVE_EMU:
        a, b = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
        run_on_host(kernel, a, b)
        np.testing.assert_array_equal(b, (a if same_loop else a[::-1]) * 2)
