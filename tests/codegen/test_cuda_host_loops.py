"""Host loops: a serial loop at the top level with gpu_block loops inside runs on the host,
launching its kernels once per iteration (``codegen.cuda.outline``), as Halide does. Checked
on IREval and the host emulation (the CUDA C itself), without a GPU."""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from codegen.cuda import examples, nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from loopnest import LoopNest, ScheduleError
from te import Buffer, Compute, Var, cast, float32

HAVE_EMU = host_compiler() is not None and nvcc_available()
requires_emu = pytest.mark.skipif(not HAVE_EMU, reason="g++ or the CUDA headers not found")


def _block_inside_serial(rows=4, cols=64):
    A = Buffer("A", (rows, cols), float32)
    B = Compute("B", (rows, cols), lambda i, j: A[i, j] * 2.0 + cast(i, float32))
    nest = LoopNest([B])
    jo, ji = nest.split_with_mask(nest.get_loops_for(B)[1], 16)
    nest.set_gpu_block_index(jo, 0)          # jo sits inside the serial loop i
    nest.set_gpu_thread_index(ji, 0)
    return nest, A, B


def _run_both(nest, args, inputs, out_shape):
    """The output of ``nest`` on IREval and, where it can be emulated, of its CUDA C."""
    outs = []
    for target in ("ireval", "cuda"):
        if target == "cuda" and not HAVE_EMU:
            continue
        k = build(nest, args, target=target)
        out = np.zeros(out_shape, np.float32)
        (run_on_host if target == "cuda" else (lambda kk, *xs: kk(*xs)))(k, *inputs, out)
        outs.append(out)
    return outs


def test_a_block_loop_inside_a_serial_loop_builds_as_a_host_loop():
    nest, A, B = _block_inside_serial()
    k = build(nest, [A, B], target="cuda")
    plan = k.module.plan
    assert len(plan.kernels) == 1 and [h.var.name for h in plan.kernels[0].host_loops] == ["i"]
    assert "\n  launched once per iteration of host loop i from 0 to 4\n" in plan.describe_kernels()
    assert [d[1:] for d in k.launch_dims()] == [((4, 1, 1), (16, 1, 1))] * 4
    # the loop's value is a scalar argument of the kernel
    assert [a.kind for a in k.kernels[0].args] == ["param", "param", "size"]


@requires_emu
def test_host_loop_values_on_the_emulation_match_ireval_and_numpy():
    nest, A, B = _block_inside_serial()
    a = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    want = a * 2.0 + np.arange(4, dtype=np.float32)[:, None]
    for out in _run_both(nest, [A, B], [a], (4, 64)):
        np.testing.assert_allclose(out, want, rtol=1e-6)


@requires_emu
def test_a_recurrence_over_rows_runs_one_launch_per_row():
    """``S[i + 1, :] = S[i, :] + A[i + 1, :]`` (``examples.running_sum_rows``), the row loop
    serial on the host and the columns parallel on the GPU: each row's kernel reads what the
    previous row's kernel wrote."""
    ex = examples.running_sum_rows(rows=6, cols=40)
    assert len(build(ex.nest, ex.args, target="cuda").launch_dims()) == 1 + 5
    arrays, expected = ex.make(np.random.default_rng(1))
    for out in _run_both(ex.nest, ex.args, [arrays["A"]], (6, 40)):
        np.testing.assert_allclose(out, expected["S"], rtol=1e-5, atol=1e-6)


def test_the_repro_schedule_builds():
    """../shared/repros/cuda_block_not_outermost.py: accepted, and now built (a host loop)."""
    nest, A, B = _block_inside_serial()
    nest.prepare_for_codegen()
    build(nest, [A, B], target="cuda")


def test_a_parallel_loop_cannot_hold_block_loops():
    A = Buffer("A", (4, 64), float32)
    B = Compute("B", (4, 64), lambda i, j: A[i, j] * 2.0)
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    nest.parallelize(i)
    jo, ji = nest.split_with_mask(j, 16)
    nest.set_gpu_thread_index(ji, 0)
    before = str(nest)
    with pytest.raises(ScheduleError, match="parallel loop; only serial"):
        nest.set_gpu_block_index(jo, 0)
    assert str(nest) == before


def test_block_loops_below_a_serial_loop_below_a_block_loop_are_refused():
    A = Buffer("A", (4, 8, 64), float32)
    B = Compute("B", (4, 8, 64), lambda b, i, j: A[b, i, j] * 2.0)
    nest = LoopNest([B])
    b, i, j = nest.get_loops_for(B)
    nest.set_gpu_block_index(b, 1)
    jo, ji = nest.split_with_mask(j, 16)
    nest.set_gpu_thread_index(ji, 0)
    with pytest.raises(ScheduleError, match="not a gpu_block loop"):
        nest.set_gpu_block_index(jo, 0)


def test_host_loop_bounds_must_be_known_at_launch():
    N = Var("N")
    A = Buffer("A", (N, 64), float32)
    B = Compute("B", (N, 64), lambda i, j: A[i, j] + 1.0)
    nest = LoopNest([B])
    jo, ji = nest.split_with_mask(nest.get_loops_for(B)[1], 32)
    nest.set_gpu_block_index(jo, 0)
    nest.set_gpu_thread_index(ji, 0)
    k = build(nest, [A, B], target="cuda")
    assert len(k.launch_dims(N=3)) == 3 and k.launch_dims(N=0) == []
    if HAVE_EMU:
        a = np.arange(5 * 64, dtype=np.float32).reshape(5, 64)
        out = np.zeros_like(a)
        run_on_host(k, a, out)
        np.testing.assert_array_equal(out, a + 1.0)


def test_an_intermediate_computed_in_a_host_loop_is_allocated_once_for_the_call():
    """T computed at the host loop i: its storage shrinks to one row, allocated once by the
    launcher for the whole call (sized by the sizes, not by the host loop)."""
    A = Buffer("A", (4, 64), float32)
    T = Compute("T", (4, 64), lambda i, j: A[i, j] * 2.0)
    B = Compute("B", (4, 64), lambda i, j: T[i, j] + 1.0)
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    nest.compute_at(T, i)
    for t in (T, B):
        jo, ji = nest.split_with_mask(nest.get_loops_for(t)[-1], 16)
        nest.set_gpu_block_index(jo, 0)
        nest.set_gpu_thread_index(ji, 0)
    k = build(nest, [A, B], target="cuda")
    assert "global, allocated by the launcher: T[1, 64]" in k.module.plan.describe_memory()
    assert len(k.launch_dims()) == 2 * 4
    a = np.random.default_rng(2).standard_normal((4, 64)).astype(np.float32)
    for out in _run_both(nest, [A, B], [a], (4, 64)):
        np.testing.assert_allclose(out, a * 2.0 + 1.0, rtol=1e-6)
