"""The host emulation runs a block's threads as fibers in a fixed order (once in order and
once in reverse, compared) and checks every access of global and shared memory for races:
a race, a barrier some threads skip, or an oversized block shows on every run, not only when
the operating system happens to interleave threads badly. (The seed-143 race, put back, is
in ``tests/test_fuzz_findings_more.py``.)"""
from __future__ import annotations

import functools
import operator

import numpy as np
import pytest

from codegen import build
from codegen.cuda import examples, nvcc_available
from codegen.cuda.emulate import EmulationError, emulation_source, host_compiler, run_on_host
from loopnest import LoopNest
from loopnest.transforms.loop_kinds import MAX_BLOCK_THREADS
from te import Buffer, Compute, Var, float32, int32

pytestmark = pytest.mark.skipif(host_compiler() is None or not nvcc_available(),
                                reason="g++ or the CUDA headers not found")


def _tampered(ex, old: str, new: str):
    """``ex``'s CUDA kernel with ``old`` replaced by ``new`` in the source the emulation
    compiles (a kernel the code generator would not emit)."""
    kernel = build(ex.nest, ex.args, target="cuda")
    source = emulation_source(kernel)
    assert old in source
    kernel._emulation_source = source.replace(old, new, 1)
    return kernel


def test_both_orders_give_the_values_of_a_correct_kernel():
    ex = examples.softmax_block()
    kernel = build(ex.nest, ex.args, target="cuda")
    arrays, expected = ex.make(np.random.default_rng(0))
    run_on_host(kernel, **arrays)
    np.testing.assert_allclose(arrays["Y"], expected["Y"], rtol=1e-5, atol=1e-6)


def test_threads_writing_one_element_are_a_race():
    ex = examples.elementwise(300)
    store = "tc_wrg(b_Y[((((long long)(v_i_outer)) * 128LL) + ((long long)(v_i_inner)))]) ="
    kernel = _tampered(ex, store, "tc_wrg(b_Y[0]) =")
    arrays, _ = ex.make(np.random.default_rng(0))
    before = {name: a.copy() for name, a in arrays.items()}
    with pytest.raises(EmulationError, match=r"data race on Y\[0\] \(in memory order\): thread \(0, 0, 0\) of "
                                             r"block \(0, 0, 0\) wrote it, then thread \(1, 0, 0\) of block "
                                             r"\(0, 0, 0\) wrote it, changing it, with no barrier between"):
        run_on_host(kernel, **arrays)
    for name, a in arrays.items():      # nothing written back
        np.testing.assert_array_equal(a, before[name])


def test_a_barrier_taken_away_is_a_race():
    ex = examples.softmax_block()
    kernel = _tampered(ex, "__syncthreads();", ";")       # the first barrier after a shared store
    arrays, _ = ex.make(np.random.default_rng(1))
    with pytest.raises(EmulationError, match=r"data race on an element of shared memory: thread \(0, 0, 0\) of "
                                             r"block \(0, 0, 0\) read it, then thread \(1, 0, 0\) of block "
                                             r"\(0, 0, 0\) wrote it, changing it"):
        run_on_host(kernel, **arrays)


def test_threads_leaving_while_others_wait_at_a_barrier_are_reported():
    ex = examples.softmax_block()
    kernel = _tampered(ex, "  __syncthreads();", "  if (threadIdx.x == 1) return;\n  __syncthreads();")
    arrays, _ = ex.make(np.random.default_rng(2))
    with pytest.raises(EmulationError, match=r"returned while others wait at __syncthreads\(\)"):
        run_on_host(kernel, **arrays)


def test_a_block_larger_than_cuda_allows_is_refused():
    N = Var("N", int32)
    X = Buffer("X", (N,), float32)
    Y = Compute("Y", (N,), lambda i: X[i] * 2.0)
    nest = LoopNest([Y])
    nest.set_gpu_thread_index(nest.get_loops_for(Y)[0], 0)      # as many threads as elements
    kernel = build(nest, [X, Y], target="cuda")
    x, y = np.ones(2000, np.float32), np.zeros(2000, np.float32)
    with pytest.raises(EmulationError, match=f"a block of 2000 threads .* at most {MAX_BLOCK_THREADS}"):
        run_on_host(kernel, x, y)
    np.testing.assert_array_equal(y, 0.0)
    run_on_host(kernel, x[:1000], y[:1000])
    np.testing.assert_array_equal(y, np.r_[np.full(1000, 2.0), np.zeros(1000)])


def test_only_global_and_shared_accesses_are_noted():
    ex = examples.softmax_block()
    kernel = build(ex.nest, ex.args, target="cuda")
    noted = emulation_source(kernel)
    assert "tc_rd" not in kernel.source and "tc_wr" not in kernel.source
    assert "tc_rdg(b_X[" in noted and "tc_wrg(b_Y[" in noted and "tc_wrs(" in noted and "tc_rds(" in noted
    plain = [ln for ln in noted.splitlines() if "tc_rd" not in ln and "tc_wr" not in ln]
    assert all(ln in kernel.source.splitlines() for ln in plain)


def test_a_deep_expression_prints_for_the_emulation():
    """Seed 150, case 69: the source the emulation compiles was printed outside ``build``'s
    recursion guard, so an expression too deep for the calling thread (the printer's
    recursion; here a chain of 1,500 additions) raised RecursionError there."""
    N = Var("N", int32)
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: functools.reduce(operator.add, [A[i] * float(k % 7) for k in range(1500)]))
    nest = LoopNest([B])
    outer, inner = nest.split_with_mask(nest.get_loops_for(B)[0], 32)
    nest.set_gpu_block_index(outer, 0)
    nest.set_gpu_thread_index(inner, 0)
    kernel = build(nest, [A, B, N], target="cuda")
    a, b = np.arange(40, dtype=np.float32), np.zeros(40, np.float32)
    run_on_host(kernel, a, b, 40)
    np.testing.assert_allclose(b, a * sum(k % 7 for k in range(1500)), rtol=1e-5)


def _block_recomputed_intermediate():
    """Seed 190, case 120: T3, computed at a block loop, is a full-size global buffer every
    block fills alike (thread 0, before a barrier) and its threads then read."""
    from loopnest.auto.gpu import grid_reduce
    from te import Reduce, Sum, minimum
    N = Var("N", int32)
    T1 = Compute("T1", (N + 2,), lambda i: 1)
    T2 = Compute("T2", (N,), lambda i: 1)
    T3 = Compute("T3", (N,), lambda i: T2[minimum(i, N - 1)])
    T4 = Reduce("T4", (N,), Sum(), lambda i, r: T1[r] + T3[minimum(r, N - 1)], (N + 1,))
    nest = LoopNest([T4])
    grid_reduce(nest, nest.buffer("T4"), 128, 512)
    nest.compute_at(nest.buffer("T3"), nest.loop("i_3_r_inner_rf_flat_outer"))
    return build(nest, [T4, N], target="cuda")


def test_threads_reading_what_their_block_wrote_before_a_barrier_share_it_with_other_blocks():
    """Other blocks store the same values into T3 at the same time: the read sees its block's
    write whichever lands last, so it is no race."""
    kernel = _block_recomputed_intermediate()
    t4 = np.zeros(6, np.int32)
    run_on_host(kernel, t4, 6)
    np.testing.assert_array_equal(t4, 14)


def test_blocks_storing_different_values_into_what_they_read_are_a_race():
    kernel = _block_recomputed_intermediate()
    source = emulation_source(kernel)
    store = "tc_wrg(b_T3[((long long)(v_i_4))]) = "
    assert store in source
    kernel._emulation_source = source.replace(store, store + "v_i_3_r_inner_rf_flat_outer + ", 1)
    with pytest.raises(EmulationError, match=r"data race on T3\[0\] \(in memory order\): thread \(0, 0, 0\) of "
                                             r"block \(0, 0, 0\) wrote it, then thread \(0, 0, 0\) of block "
                                             r"\(1, 0, 0\) wrote it, changing it"):
        run_on_host(kernel, np.zeros(6, np.int32), 6)
