"""Memory safety that does not depend on the backend: argument regions checked when a kernel
is built and called (``build(..., bounds_check=True)``, the default), and intermediate
allocation sizes checked on every call.

IREval is the oracle: with ``bounds_check=False`` it still checks every access as it runs,
so a region the checks refuse must make it raise ``IndexError``, and a region they accept
must not.
"""
from __future__ import annotations

import doctest
import importlib
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codegen import BuildError, build
from codegen.kernel import Param, allocation_limit, bounds_checks, compile_int_expr, size_order
from loopnest import LoopNest
from loopnest.analysis.regions import argument_regions
from te import Buffer, Compute, Reduce, Sum, Var, float32, floordiv, if_then_else, int32, select
from te.view import TensorView

ROOT = Path(__file__).resolve().parents[2]
REPROS = ROOT.parent / "shared" / "repros"


def _zeros(*shape):
    return np.zeros(shape, np.float32)


# ------------------------------------------------------------------------------------
# the two reproducers
# ------------------------------------------------------------------------------------
def test_shifted_read_over_a_symbolic_buffer_is_refused_at_build(backend):
    N = Var("N", int32)
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i + 1])
    with pytest.raises(BuildError, match=r"argument A \(shape \(N,\)\) is accessed at indices \[1, N\] of "
                                         r"dimension 0, outside its valid indices \[0, N - 1\] for every size "
                                         r"that runs the kernel: A\[i \+ 1\]"):
        build(LoopNest([B]), [A, B], target=backend)


def test_an_access_reached_only_at_sizes_where_it_is_out_of_range_is_checked_at_call(backend):
    """Seed 142, case 487: T1 inlined into T2 reads A[i, i] under ``i >= 4`` (A has one
    column), so every size that reaches the read is out of range, but sizes below 5 run the
    kernel without it: the build succeeds and a call with such a size runs."""
    M = Var("M", int32)
    A = Buffer("A", (M, 1), int32)
    T1 = Compute("T1", (M + 1, 1), lambda i, j: if_then_else(i >= 4, A[i, i], 1))
    T2 = Reduce("T2", (M,), Sum(), lambda i, r: T1[r, 0] + T1[i, 0], (M + 1,))
    nest = LoopNest([T2])
    nest.compute_inline(nest.buffer("T1"))
    kernel = build(nest, [A, T2, M], target=backend)
    out = np.zeros(2, np.int32)
    kernel(np.ones((2, 1), np.int32), out, 2)
    assert out.tolist() == [6, 6]
    with pytest.raises(ValueError, match=r"argument A is accessed at indices \[4, "):
        kernel(np.ones((5, 1), np.int32), np.zeros(5, np.int32), 5)


def test_constant_index_far_past_the_end_is_refused_at_build(backend):
    A = Buffer("A", (8,), float32)
    C = Compute("C", (8,), lambda i: A[i + 100000000])
    with pytest.raises(BuildError, match=r"argument A \(shape \(8,\)\) is accessed at indices "
                                         r"\[100000000, 100000007\] of dimension 0, outside its valid indices "
                                         r"\[0, 7\] whatever the sizes: A\[i \+ 100000000\]"):
        build(LoopNest([C]), [A, C], target=backend)


@pytest.mark.parametrize("script", ["oob_access_checked.py", "alloc_size_overflow.py"])
def test_reproducer_passes(script):
    path = REPROS / script
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0 and p.stdout.strip().endswith("PASS"), p.stdout + p.stderr


# ------------------------------------------------------------------------------------
# symbolic sizes: refused only for the sizes that leave the buffer
# ------------------------------------------------------------------------------------
def _gather_kernel(backend, **opts):
    N, M = Var("N", int32), Var("M", int32)
    A = Buffer("A", (M,), float32)
    B = Compute("B", (N,), lambda i: A[i] * 2.0)
    return build(LoopNest([B]), [A, B], target=backend, **opts)


def test_symbolic_region_checked_only_for_bad_sizes(backend):
    k = _gather_kernel(backend)
    for n, m in [(4, 8), (8, 8), (0, 3), (0, 0)]:
        b = _zeros(n)
        k(np.arange(m, dtype=np.float32), b)
        assert b.tolist() == [2.0 * x for x in range(n)]
    b = np.full(9, -1.0, np.float32)
    with pytest.raises(ValueError) as info:
        k(np.arange(8, dtype=np.float32), b)
    msg = str(info.value)
    for part in ["argument A", "indices [0, 8] of dimension 0", "region [0, N - 1] for N = 9, M = 8",
                 "its shape is (8,)", "valid indices are [0, 7]", "A[i]", "bounds_check=False"]:
        assert part in msg, (part, msg)
    assert (b == -1.0).all()          # refused before anything ran
    with pytest.raises(ValueError, match="indices \\[0, 8\\] of dimension 0"):
        k(A=np.arange(8, dtype=np.float32), B=b)     # by name: the general binding path


def test_checks_read_the_sizes_in_the_fast_path_order(backend):
    # three sizes bound from three arrays, first appearing in an order that differs from the
    # order of the variables' creation: the LLVM fast path passes its size slots as they are
    K, M, N = Var("K", int32), Var("M", int32), Var("N", int32)
    A = Buffer("A", (N, M), float32)
    W = Buffer("W", (K,), float32)
    C = Reduce("C", (N,), Sum(), lambda i, j: A[i, j] * W[j], (M,))
    k = build(LoopNest([C]), [A, W, C], target=backend)
    a = np.ones((3, 5), np.float32)
    c = _zeros(3)
    k(a, np.ones(5, np.float32), c)
    assert c.tolist() == [5.0] * 3
    k(a, np.ones(7, np.float32), c)
    for call in (lambda: k(a, np.ones(4, np.float32), c), lambda: k(A=a, W=np.ones(4, np.float32), C=c)):
        with pytest.raises(ValueError, match=r"argument W is accessed at indices \[0, 4\] of dimension 0 "
                                             r"\(region \[0, M - 1\] for M = 5, K = 4\)"):
            call()


def test_size_order_is_the_order_of_first_appearance_in_buffer_shapes():
    K, M, N = Var("K"), Var("M"), Var("N")
    params = [Param("A", buffer=Buffer("A", (N, M))), Param("W", buffer=Buffer("W", (K,))), Param("s", var=Var("s"))]
    assert [v.name for v in size_order(params)] == ["N", "M", "K", "s"]


def test_bounds_check_false_skips_the_check():
    k = _gather_kernel("ireval", bounds_check=False)
    assert k._bounds_checks == []
    with pytest.raises(IndexError, match="out-of-bounds load from A"):   # IREval's own check
        k(np.arange(8, dtype=np.float32), _zeros(9))
    A = Buffer("A", (8,), float32)
    C = Compute("C", (8,), lambda i: A[i + 1])
    build(LoopNest([C]), [A, C], bounds_check=False)     # no BuildError either


def test_scalar_offset_parameter_is_checked_at_call(backend):
    off = Var("off", int32)
    A = Buffer("A", (16,), float32)
    B = Compute("B", (8,), lambda i: A[i + off])
    k = build(LoopNest([B]), [A, B, off], target=backend)
    a = np.arange(16, dtype=np.float32)
    b = _zeros(8)
    k(a, b, 8)
    assert b.tolist() == list(range(8, 16))
    for bad in (9, -1):
        with pytest.raises(ValueError, match=f"off = {bad}"):
            k(a, b, bad)


# ------------------------------------------------------------------------------------
# schedules that stay in bounds must never be refused
# ------------------------------------------------------------------------------------
def _stencil(n):
    A = Buffer("A", (n, 10), float32)
    B = Compute("B", (n, 10), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (n, 8), lambda i, j: B[i, j] + B[i, j + 2])
    return A, B, C


def _sched_tail(nest, C, B):
    nest.split_with_tail(nest.get_loops_for(C)[1], 3)


def _sched_mask(nest, C, B):
    nest.split_with_mask(nest.get_loops_for(C)[1], 3)


def _sched_compute_at_split(nest, C, B):
    i, j = nest.get_loops_for(C)
    jo, ji = nest.split_with_mask(j, 3)
    nest.compute_at(B, jo)


def _sched_compute_at_inner(nest, C, B):
    nest.compute_at(B, nest.get_loops_for(C)[1])


def _sched_cache(nest, C, B):
    i, j = nest.get_loops_for(C)
    jo, ji = nest.split_with_mask(j, 3)
    nest.cache_accesses(B, "B_local", jo)


def _sched_vectorize_tail(nest, C, B):
    i, j = nest.get_loops_for(C)
    jo, ji, tail = nest.split_with_tail(j, 4)
    nest.vectorize(ji)


def _sched_inline_parallel(nest, C, B):
    nest.compute_inline(B)
    nest.parallelize(nest.get_loops_for(C)[0])


SCHEDULES = [_sched_tail, _sched_mask, _sched_compute_at_split, _sched_compute_at_inner, _sched_cache,
             _sched_vectorize_tail, _sched_inline_parallel]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda f: f.__name__[7:])
@pytest.mark.parametrize("symbolic", [False, True], ids=["const", "symbolic"])
def test_in_bounds_schedules_are_accepted_and_correct(schedule, symbolic, backend):
    N = Var("N", int32)
    A, B, C = _stencil(N if symbolic else 5)
    nest = LoopNest([C])
    schedule(nest, C, B)
    k = build(nest, [A, C], target=backend)
    if not symbolic:
        assert k._bounds_checks == []    # provably in bounds: nothing left to check per call
    for n in ([5] if not symbolic else [0, 1, 2, 5]):
        a = np.random.default_rng(n).standard_normal((n, 10)).astype(np.float32)
        c = np.full((n, 8), np.nan, np.float32)
        k(a, c)
        np.testing.assert_allclose(c, a[:, :8] * 2 + a[:, 2:] * 2, rtol=1e-6)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda f: f.__name__[7:])
def test_scheduled_regions_agree_with_ireval(schedule):
    # A's row length W is its own size: rows shorter than 10 are read past their end, which
    # IREval (unchecked) sees at the last row as a flat index past the array
    N, W = Var("N", int32), Var("W", int32)
    A = Buffer("A", (N, W), float32)
    B = Compute("B", (N, 10), lambda i, j: A[i, j] * 2.0)
    C = Compute("C", (N, 8), lambda i, j: B[i, j] + B[i, j + 2])
    nest = LoopNest([C])
    schedule(nest, C, B)
    checked, plain = build(nest, [A, C]), build(nest, [A, C], bounds_check=False)
    for n, w in [(3, 10), (3, 9), (2, 12), (1, 4), (0, 3)]:
        arrays = (np.ones((n, w), np.float32), _zeros(n, 8))
        try:
            plain(*arrays)
            real = False
        except IndexError:
            real = True
        try:
            checked(*arrays)
            refused = False
        except ValueError as e:
            refused = True
            assert f"region [0, 9] for W = {w}" in str(e) and f"its shape is ({n}, {w})" in str(e)
        assert refused == real == (n > 0 and w < 10), (n, w)


def test_rfactor_and_reduction_tails_are_accepted(backend):
    N = Var("N", int32)
    A = Buffer("A", (N, 37), float32)
    R = Reduce("R", (N,), Sum(), lambda i, k: A[i, k], (37,))
    nest = LoopNest([R])
    i, kk = nest.get_loops_for(R)
    ko, ki = nest.split_with_mask(kk, 8)
    nest.rfactor(R, ki)
    k = build(nest, [A, R], target=backend)
    a = np.ones((3, 37), np.float32)
    r = _zeros(3)
    k(a, r)
    assert r.tolist() == [37.0] * 3


def test_guarded_and_padded_reads_are_accepted(backend):
    N = Var("N", int32)
    A = Buffer("A", (N,), float32)
    P = Compute("P", (N,), lambda i: if_then_else((i >= 1) & (i < N - 1), A[i - 1] + A[i + 1], 0.0))
    k = build(LoopNest([P]), [A, P], target=backend)
    a = np.arange(6, dtype=np.float32)
    p = _zeros(6)
    k(a, p)
    assert p.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 0.0]


def test_select_reads_both_sides_and_is_refused():
    A = Buffer("A", (8,), int32)
    C = Compute("C", (8,), lambda i: select(i < 7, A[i + 1], -1))
    with pytest.raises(BuildError, match=r"indices \[1, 8\]"):
        build(LoopNest([C]), [A, C])


def test_data_dependent_index_is_not_checked_but_ireval_still_is():
    A = Buffer("A", (8,), float32)
    idx = Buffer("I", (4,), int32)
    G = Compute("G", (4,), lambda i: A[idx[i]])
    regions = argument_regions(LoopNest([G]).root, [A, idx, G])
    assert [(b.name, axis) for b, axis in regions.unchecked] == [("A", 0)]
    k = build(LoopNest([G]), [A, idx, G])
    g = _zeros(4)
    k(np.arange(8, dtype=np.float32), np.array([7, 0, 3, 1], np.int32), g)
    assert g.tolist() == [7.0, 0.0, 3.0, 1.0]
    with pytest.raises(IndexError):
        k(np.arange(8, dtype=np.float32), np.array([8, 0, 0, 0], np.int32), g)


def test_view_reads_are_checked_against_the_storage(backend):
    N, M = Var("N", int32), Var("M", int32)
    A = Buffer("A", (N,), float32)
    V = TensorView(A, (M,), (2,), name="V")     # every other element of A
    B = Compute("B", (M,), lambda i: V[i] + 1.0)
    k = build(LoopNest([B]), [A, B], target=backend)
    b = _zeros(4)
    k(np.arange(7, dtype=np.float32), b)
    assert b.tolist() == [1.0, 3.0, 5.0, 7.0]
    with pytest.raises(ValueError, match=r"element offsets \[0, 6\] into its storage.*holds 6 elements"):
        k(np.arange(6, dtype=np.float32), b)


def test_prepared_nest_gets_storage_wide_checks(backend):
    A = Buffer("A", (4, 8), float32)
    ok = Compute("B", (4, 8), lambda i, j: A[i, j] + 1.0)
    build(LoopNest([ok]).prepare_for_codegen(), [A, ok], target=backend)
    bad = Compute("C", (4, 7), lambda i, j: A[i, j + 2])   # past the end of the last row
    nest = LoopNest([bad]).prepare_for_codegen()
    with pytest.raises(BuildError, match=r"element offsets \[2, 32\]"):
        build(nest, [A, bad], target=backend)


# ------------------------------------------------------------------------------------
# the oracle: random affine reads, checked against IREval's own access checks
# ------------------------------------------------------------------------------------
def test_random_affine_regions_agree_with_ireval():
    rnd = random.Random(7)
    N, M = Var("N", int32), Var("M", int32)
    for trial in range(30):
        a, c, d = rnd.choice([1, 2, 3]), rnd.randint(-3, 3), rnd.choice([1, 2])
        A = Buffer("A", (M,), float32)
        B = Compute("B", (N,), lambda i: A[floordiv(i * a, d) + c])
        nest = LoopNest([B])
        if rnd.random() < 0.5:
            nest.split_with_tail(nest.get_loops_for(B)[0], rnd.choice([2, 3]))
        try:
            checked = build(nest, [A, B])
        except BuildError:
            checked = None
        plain = build(nest, [A, B], bounds_check=False)
        for n, m in [(0, 0), (1, 1), (3, 4), (5, 3), (4, 12), (6, 6)]:
            arrays = (np.arange(m, dtype=np.float32), _zeros(n))
            try:
                plain(*arrays)
                real = False
            except IndexError:
                real = True
            if checked is None:
                assert real or n == 0, (trial, a, c, d, n, m)
                continue
            try:
                checked(*arrays)
                refused = False
            except ValueError:
                refused = True
            assert refused == real, (trial, a, c, d, n, m)


def test_compiled_size_expressions_use_python_ints():
    N, M = Var("N", int32), Var("M", int32)
    pos = {id(N): 0, id(M): 1}
    assert compile_int_expr(N * M * 4, pos)([2**21, 2**30]) == 2**53
    assert compile_int_expr(floordiv(N - 7, 2) + (N % 3), pos)([4, 0]) == -2 + 1
    assert compile_int_expr((N > M) | (N < 0), pos)([3, 2]) is True
    with pytest.raises(ValueError, match="cannot compile"):
        compile_int_expr(Buffer("A", (4,), int32)[N], pos)


def test_bounds_checks_refuse_an_always_violated_region_with_the_access():
    A = Buffer("A", (8,), float32)
    C = Compute("C", (8,), lambda i: A[7 - i] + A[i - 1])
    params = [Param("A", buffer=A), Param("C", buffer=C)]
    with pytest.raises(BuildError, match=r"indices \[-1, 7\].*: A\[i - 1\]\. Fix"):
        bounds_checks(argument_regions(LoopNest([C]).root, [A, C]), params, "C")


# ------------------------------------------------------------------------------------
# allocation sizes
# ------------------------------------------------------------------------------------
def _huge_intermediate():
    N = Var("N", int32)
    A = Buffer("A", (N,), float32)
    T = Compute("T", (N, N, N), lambda i, j, k: A[i] + A[j] + A[k])
    B = Reduce("B", (4,), Sum(), lambda i, j: T[j, i, i], (N,))
    return A, B


def test_allocation_size_overflow_raises_memory_error(backend):
    A, B = _huge_intermediate()
    k = build(LoopNest([B]), [A, B], target=backend)
    b = _zeros(4)
    with pytest.raises(MemoryError) as info:
        k(np.ones(1 << 21, np.float32), b)
    msg = str(info.value)
    assert "intermediate buffer T of shape (2097152, 2097152, 2097152)" in msg and str(4 * 2**63) in msg
    k(np.ones(4, np.float32), b)     # small sizes still run (T[j, i, i] needs N >= 4)
    assert b.tolist() == [12.0] * 4


def test_constant_allocation_past_the_limit_raises_on_every_call():
    A = Buffer("A", (4,), float32)
    n = 1 << 22
    T = Compute("T", (n, n), lambda i, j: A[0] * 2.0)
    B = Compute("B", (4,), lambda i: T[i, i] + A[i])
    k = build(LoopNest([B]), [A, B])
    assert n * n * 4 > allocation_limit()
    with pytest.raises(MemoryError, match=r"T of shape \(4194304, 4194304\) \(float32\) needs 70368744177664 bytes"):
        k(np.ones(4, np.float32), _zeros(4))


def test_allocation_checks_apply_without_bounds_checks():
    A, B = _huge_intermediate()
    k = build(LoopNest([B]), [A, B], bounds_check=False)
    with pytest.raises(MemoryError):
        k(np.ones(1 << 21, np.float32), _zeros(4))


def test_llvm_malloc_failure_is_a_memory_error_naming_the_buffer():
    pytest.importorskip("codegen.llvm")
    child = '''
import resource
import numpy as np
from te import *
from loopnest import LoopNest
from codegen import build
N = Var("N", int32)
A = Buffer("A", (N,), float32)
T = Compute("T", (N, N), lambda i, j: A[i] + A[j])
B = Reduce("B", (4,), Sum(), lambda i, j: T[j, i], (N,))
k = build(LoopNest([B]), [A, B], target="llvm")
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
try:
    k(np.ones(40000, np.float32), np.zeros(4, np.float32))   # 6.4 GB: under the limit, the allocation fails
    print("RAN")
except MemoryError as e:
    print("MEMORYERROR", e)
'''
    p = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300, cwd=ROOT)
    if allocation_limit() < 40000 * 40000 * 4:
        assert "MEMORYERROR" in p.stdout and "physical memory" in p.stdout, p.stdout + p.stderr
    else:
        assert p.returncode == 0, p.stderr
        assert "MEMORYERROR kernel B: the allocation of the intermediate buffer T returned NULL" in p.stdout, p.stdout


# ------------------------------------------------------------------------------------
# the CUDA host emulation binds through Kernel.bind, so the checks apply before it compiles
# ------------------------------------------------------------------------------------
def test_cuda_kernels_check_regions_before_running_on_the_host():
    from codegen.cuda.emulate import run_on_host
    N, M = Var("N", int32), Var("M", int32)
    A = Buffer("A", (M,), float32)
    B = Compute("B", (N,), lambda i: A[i] + 1.0)
    nest = LoopNest([B])
    io, ii = nest.split_with_mask(nest.get_loops_for(B)[0], 32)
    nest.set_gpu_block_index(io, 0)
    nest.set_gpu_thread_index(ii, 0)
    k = build(nest, [A, B], target="cuda")
    with pytest.raises(ValueError, match=r"argument A is accessed at indices \[0, 40\]"):
        run_on_host(k, np.ones(40, np.float32), _zeros(41))


# ------------------------------------------------------------------------------------
# docstring examples
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("module", ["loopnest.analysis.regions", "codegen.kernel", "codegen", "bench.bench_checks"])
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_a_condition_that_wraps_int32_gives_a_region_check_over_int64():
    """Seed 108, case 3: isl writes the wrap of ``i0 * 1073741823`` (int32) as a division by
    2**32, which the violation condition must compute in int64 (it raised TypeError)."""
    N, M = Var("N", int32), Var("M", int32)
    A = Buffer("A", (M + 2, N), float32)
    T1 = Compute("T1", (M, N), lambda i0, i1: if_then_else(i0 * 1073741823 + 7 != 536870912, A[i0, i0], 1.0))
    T2 = Compute("T2", (M + 1,), lambda i0: T1[i0 % 3, i0])
    nest = LoopNest([T2])
    nest.split_with_mask(nest.loop("i0"), 4)
    a = np.arange(6 * 7, dtype=np.float32).reshape(6, 7)
    want = np.zeros(5, np.float32)
    build(LoopNest([T2]), [A, T2, N, M], target="ireval")(a, want, 7, 4)
    for target in ("llvm", "ireval"):
        got = np.full(5, np.nan, np.float32)
        build(nest, [A, T2, N, M], target=target)(a, got, 7, 4)
        np.testing.assert_array_equal(got, want)
