"""Storage that follows compute_at (issue 13, item 2): a tensor computed at a loop gets a
buffer of the size of the region one iteration of the storage loop touches, its indices
rebased, allocated once outside that loop (per iteration of a parallel loop); store_at
hoists or sinks the storage."""
from __future__ import annotations

import numpy as np
import pytest

from loopnest import LoopNest
from nests import run, unchanged
from te import Buffer, Compute, Var, float32, int32

H, W = 32, 24


def blur(h=H, w=W):
    """Halide's separable blur without boundary handling: blur_x over rows, then blur_y."""
    A = Buffer("A", (h + 2, w + 2), float32)
    bx = Compute("blur_x", (h + 2, w), lambda y, x: (A[y, x] + A[y, x + 1] + A[y, x + 2]) / 3.0)
    by = Compute("blur_y", (h, w), lambda y, x: (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3.0)
    return A, bx, by


def blur_ref(a):
    bx = (a[:, :-2] + a[:, 1:-1] + a[:, 2:]) / np.float32(3.0)
    return (bx[:-2] + bx[1:-1] + bx[2:]) / np.float32(3.0)


def strips(h=H, w=W, factor=8):
    A, bx, by = blur(h, w)
    nest = LoopNest([by])
    y, x = nest.get_loops_for(by)
    yo, yi = nest.split_with_mask(y, factor)
    return nest, A, bx, by, yo, yi


def check_values(nest, A, by, backend, h=H, w=W, sizes=()):
    a = np.random.default_rng(h * 31 + w).standard_normal((h + 2, w + 2)).astype(np.float32)
    out = np.zeros((h, w), np.float32)
    run(nest, [A, by, *[s for s, _ in sizes]], [a, out], backend, sizes=[v for _, v in sizes])
    np.testing.assert_allclose(out, blur_ref(a), rtol=1e-5, atol=1e-6)


def prepared_lines(nest):
    return str(nest.copy().prepare_for_codegen()).splitlines()


def test_blur_strip_buffer_is_the_footprint_allocated_once(backend):
    nest, A, bx, by, yo, yi = strips()
    nest.compute_at(bx, yo)
    lines = prepared_lines(nest)
    # 8 rows of blur_y read 10 rows of blur_x; one buffer, before the strip loop
    assert lines[0] == "float32 blur_x[10, 24]; // alloc"
    assert lines[1].startswith("for (int y_1_outer = 0;")
    assert lines[-1] == "free(blur_x);"
    assert any("blur_x[y_1_inner * 24 + x_1 + 48]" in line for line in lines)   # rebased reads
    check_values(nest, A, by, backend)


def test_store_at_hoists_and_sinks_the_storage(backend):
    nest, A, bx, by, yo, yi = strips()
    nest.compute_at(bx, yi)                      # the default: one row of blur_y's footprint
    assert prepared_lines(nest)[0] == "float32 blur_x[3, 24]; // alloc"
    nest.store_at(bx, yo)                        # Halide's store_at: kept across the strip's rows,
    # each row computes only the blur_x row the previous one did not, into a circular buffer
    # of the 3-row window (storage folding, loopnest.transforms.fold_storage)
    assert prepared_lines(nest)[0] == "float32 blur_x[3, 24]; // alloc"
    assert "floormod(y_2, 3)" in "\n".join(prepared_lines(nest))
    check_values(nest, A, by, backend)
    nest.store_at(bx, yi)                        # sunk back
    assert prepared_lines(nest)[0] == "float32 blur_x[3, 24]; // alloc"
    check_values(nest, A, by, backend)
    nest.store_at(bx, None)                      # the whole buffer, as before compute_at
    assert any(line.strip() == "float32 blur_x[34, 24]; // alloc" for line in prepared_lines(nest))
    check_values(nest, A, by, backend)


def test_parallel_strip_loop_gets_a_buffer_per_thread(backend):
    nest, A, bx, by, yo, yi = strips()
    nest.compute_at(bx, yo)
    nest.parallelize(yo)
    lines = prepared_lines(nest)
    assert lines[0].startswith("parallel for (int y_1_outer = 0;")
    assert lines[1] == "  float32 blur_x[10, 24]; // alloc"
    assert lines[-2] == "  free(blur_x);"
    check_values(nest, A, by, backend)


def test_parallel_compute_loop_inside_the_storage_loop():
    """A loop made parallel after store_at, whose iterations need their own buffer, takes
    the storage; store_at outside such a loop is refused."""
    nest, A, bx, by, yo, yi = strips()
    nest.compute_at(bx, yi)
    nest.store_at(bx, yo)
    nest.parallelize(yi)
    lines = prepared_lines(nest)
    assert lines[0].startswith("for (int y_1_outer = 0;")
    assert lines[1].startswith("  parallel for (int y_1_inner = 0;")
    assert lines[2] == "    float32 blur_x[3, 24]; // alloc"
    check_values(nest, A, by, "ireval")
    msg = unchanged(nest, lambda: nest.store_at(bx, yo))
    assert "parallel loop y_1_inner" in msg and "store blur_x at loop y_1_inner" in msg


def test_ragged_strips_use_a_constant_bound():
    """With a tail strip the region's extent is symbolic; the buffer takes its constant bound."""
    nest, A, bx, by, yo, yi = strips(h=30)
    nest.compute_at(bx, yo)
    assert prepared_lines(nest)[0] == "float32 blur_x[10, 24]; // alloc"
    check_values(nest, A, by, "ireval", h=30)


def test_symbolic_width_keeps_the_size_expression(backend):
    Wv = Var("W", int32)
    A = Buffer("A", (H + 2, Wv + 2), float32)
    bx = Compute("blur_x", (H + 2, Wv), lambda y, x: (A[y, x] + A[y, x + 1] + A[y, x + 2]) / 3.0)
    by = Compute("blur_y", (H, Wv), lambda y, x: (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3.0)
    nest = LoopNest([by])
    y, x = nest.get_loops_for(by)
    yo, yi = nest.split_with_tail(y, 8)[:2]
    nest.compute_at(bx, yo)
    assert prepared_lines(nest)[0] == "float32 blur_x[10, W]; // alloc"
    check_values(nest, A, by, backend, w=13, sizes=[(Wv, 13)])


def test_region_that_cannot_be_bounded_keeps_the_full_buffer(backend):
    A = Buffer("A", (8,), float32)
    I = Buffer("I", (4,), int32)
    B = Compute("B", (8,), lambda i: A[i] * 2.0)
    C = Compute("C", (4,), lambda i: B[I[i]] + 1.0)
    nest = LoopNest([C])
    nest.compute_at(B, nest.get_loops_for(C)[0])
    lines = prepared_lines(nest)
    assert lines[1] == "  float32 B[8]; // alloc"        # as before: the whole B, private to i
    a = np.arange(8, dtype=np.float32)
    idx = np.array([7, 0, 3, 3], np.int32)
    c = np.zeros(4, np.float32)
    run(nest, [A, I, C], [a, idx, c], backend)
    np.testing.assert_array_equal(c, a[idx] * 2 + 1)


def test_store_at_refusals_leave_the_nest_unchanged():
    nest, A, bx, by, yo, yi = strips()
    nest.compute_at(bx, yo)
    msg = unchanged(nest, lambda: nest.store_at(bx, yi))
    assert "also accessed outside the loop" in msg and "blur_x[" in msg
    msg = unchanged(nest, lambda: nest.store_at(by, yo))
    assert "not an intermediate" in msg
    # fused producer and consumer where iteration i reads row i / 2: no per-iteration storage
    A2 = Buffer("A", (4, 8), float32)
    T1 = Compute("T1", (4, 8), lambda i, j: A2[i, j] + 1.0)
    T2 = Compute("T2", (4,), lambda i: T1[i / 2, 0] * 2.0)
    n2 = LoopNest([T2])
    f = n2.fuse([n2.get_loops_for("T1")[0], n2.get_loops_for("T2")[0]])
    msg = unchanged(n2, lambda: n2.store_at(T1, f))
    assert "reads values of T1 that another iteration" in msg
    assert n2._store_at == {}


def test_history_replays_store_at():
    nest, A, bx, by, yo, yi = strips()
    nest.compute_at(bx, yi)
    nest.store_at(bx, yo)
    assert nest.history[-1] == {"op": "store_at", "args": [{"buffer": "blur_x"}, {"loop": "y_1_outer"}],
                                "kwargs": {}}
    again = LoopNest([by]).replay(nest.history_json())
    assert prepared_lines(again) == prepared_lines(nest)
    assert prepared_lines(again)[0] == "float32 blur_x[3, 24]; // alloc"     # folded


def test_split_of_the_storage_loop_falls_back_to_the_loop_around_every_access():
    nest, A, bx, by, yo, yi = strips()
    nest.compute_at(bx, yo)
    nest.split_with_tail(nest.loop("y_1_outer"), 2)
    lines = prepared_lines(nest)
    assert lines[0].startswith("float32 blur_x[") and lines[0] != "float32 blur_x[34, 24]; // alloc"
    check_values(nest, A, by, "ireval")


def test_gpu_block_strip_gets_a_shared_footprint_buffer():
    """Stored at a block-bound loop, the strip's buffer is per block (``__shared__``) and
    footprint-sized; the emitted CUDA agrees with numpy under host emulation."""
    from codegen import build
    from codegen.cuda import nvcc_available
    from codegen.cuda.emulate import host_compiler, run_on_host
    nest, A, bx, by, yo, yi = strips()
    nest.compute_at(bx, yo)
    nest.set_gpu_block_index(yo, 0)
    nest.set_gpu_thread_index(nest.get_loops_for(by)[-1], 0)
    assert prepared_lines(nest)[1] == "  float32 blur_x[10, 24]; // alloc"
    check_values(nest, A, by, "ireval")
    kernel = build(nest, [A, by], target="cuda")
    assert "__shared__ __align__(16) float b_blur_x[240];" in kernel.source
    if host_compiler() is None or not nvcc_available():
        pytest.skip("g++ or the CUDA headers not found")
    a = np.random.default_rng(0).standard_normal((H + 2, W + 2)).astype(np.float32)
    out = np.zeros((H, W), np.float32)
    run_on_host(kernel, a, out)
    np.testing.assert_allclose(out, blur_ref(a), rtol=1e-5, atol=1e-6)
