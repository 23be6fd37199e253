"""Regression tests of defects the random tester (``python -m fuzz``) found in the CUDA backend
(launch dimensions, where buffers live), in ``auto_schedule`` and in the tester itself: each
is the minimised program and schedule of one finding, checked as the tester checks it
(IREval and the CUDA host emulation give the unscheduled program's values)."""
from __future__ import annotations

import islpy as isl
import ml_dtypes
import numpy as np
import pytest

from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from loopnest import LoopNest, ScheduleError, Target
from te import (Buffer, Compute, Max, Min, Reduce, Sum, Var, cast, floordiv, if_then_else, int32, maximum, minimum,
                select)

HAVE_EMU = host_compiler() is not None and nvcc_available()


def _shifted(N):
    T3 = Compute("T3", (N,), lambda i: 1)
    T4 = Compute("T4", (N,), lambda i: if_then_else(i >= 1, cast(T3[i - 1], "float32"), 0.0))
    return T3, T4


def _cuda_values(nest, T4, n, sizes=()):
    kernel = build(nest, [T4, *sizes], target="cuda")
    out = np.zeros(n, np.float32)
    run_on_host(kernel, out, *[n for _ in sizes])
    return out, kernel


# ---------------------------------------------------------------------------------------
# a thread loop with no iterations beside other work of its kernel: the launch had an empty
# block and was skipped, so the tail after the thread loop never ran (seed 41, case 254)
# ---------------------------------------------------------------------------------------
@pytest.mark.skipif(not HAVE_EMU, reason="g++ or the CUDA headers not found")
def test_an_empty_thread_loop_beside_other_work_keeps_one_thread():
    N = Var("N", int32)
    _, T4 = _shifted(N)
    nest = LoopNest([T4])
    nest.split_with_mask(nest.loop("i_1"), 1)
    nest.split_with_tail(nest.loop("i_1_inner"), 2)        # inner_outer has extent 0, the tail 1
    nest.set_gpu_thread_index(nest.loop("i_1_inner_outer"), 0)
    got, kernel = _cuda_values(nest, T4, 7, [N])
    np.testing.assert_array_equal(got, [0, 1, 1, 1, 1, 1, 1])
    assert "if (threadIdx.x < 0)" in kernel.source or "threadIdx.x < 0" in kernel.source
    assert [dims[2] for dims in kernel.launch_dims(N=7)][-1] == (1, 1, 1)


@pytest.mark.skipif(not HAVE_EMU, reason="g++ or the CUDA headers not found")
@pytest.mark.parametrize("n", [3, 9])
def test_a_symbolic_thread_extent_that_is_zero_keeps_the_tail(n):
    N = Var("N", int32)
    T = Compute("T", (2, N), lambda i, j: cast(i * 10 + j, "float32"))
    nest = LoopNest([T])
    nest.split_with_tail(nest.loop("j"), 4)          # j_outer: N / 4 threads (0 for N = 3), the tail beside it
    nest.set_gpu_thread_index(nest.loop("j_outer"), 0)
    kernel = build(nest, [T, N], target="cuda")
    out = np.zeros((2, n), np.float32)
    run_on_host(kernel, out, n)
    np.testing.assert_array_equal(out, np.arange(2)[:, None] * 10 + np.arange(n)[None, :])
    assert kernel.launch_dims(N=n)[0][2] == (max(n // 4, 1), 1, 1)


def test_a_kernel_all_inside_its_thread_loop_keeps_the_exact_block():
    """No guard and no extra thread where the thread loop holds all the kernel's work."""
    N = Var("N", int32)
    T3 = Compute("T3", (N,), lambda i: i * 2)
    nest = LoopNest([T3])
    nest.set_gpu_thread_index(nest.loop("i"), 0)
    kernel = build(nest, [T3, N], target="cuda")
    assert kernel.launch_dims(N=5)[0][2] == (5, 1, 1)
    assert "threadIdx.x <" not in kernel.source


# ---------------------------------------------------------------------------------------
# auto_schedule of a tensor whose rows are empty divided by the row width (seed 8, case 45)
# ---------------------------------------------------------------------------------------
def test_auto_schedule_of_empty_rows():
    T4 = Compute("T4", (1, 0), lambda i0, i1: 1)
    nest = LoopNest([T4])
    nest.auto_schedule(Target(vector_bits=512, cores=1))
    out = np.zeros((1, 0), np.int32)
    build(nest, [T4], target="llvm")(out)
    assert str(LoopNest([T4]).replay(nest.history_json())) == str(nest)


# ---------------------------------------------------------------------------------------
# auto_schedule of a stage of 600 terms ran out of recursion in its cost model and left the
# nest half scheduled (seed 10, case 82 of the tester drawing auto_schedule first)
# ---------------------------------------------------------------------------------------
def test_auto_schedule_of_a_deep_expression_runs_on_a_deep_thread():
    import functools
    import operator
    T1 = Compute("T1", (8,), lambda i: cast(i, "float32"))
    T2 = Compute("T2", (8,), lambda i: functools.reduce(operator.add, [T1[(i + k) % 8] for k in range(600)]))
    T3 = Compute("T3", (8,), lambda i: T2[i] * 2.0)
    nest = LoopNest([T3])
    nest.auto_schedule(Target(vector_bits=256, cores=2))
    out = np.zeros(8, np.float32)
    build(nest, [T3], target="llvm")(out)
    np.testing.assert_array_equal(out, np.full(8, 2 * 75 * 28, np.float32))
    assert str(LoopNest([T3]).replay(nest.history_json())) == str(nest)


def test_a_failed_auto_schedule_leaves_the_nest_unscheduled(monkeypatch):
    from loopnest.auto import schedule as auto
    T1 = Compute("T1", (8,), lambda i: cast(i, "float32") + 1.0)
    T2 = Compute("T2", (8,), lambda i: T1[i] * 2.0)
    nest = LoopNest([T2])
    before = str(nest)
    original = auto._Planner.run

    def run_then_fail(self):
        original(self)
        raise MemoryError("out of memory")
    monkeypatch.setattr(auto._Planner, "run", run_then_fail)
    with pytest.raises(MemoryError):
        nest.auto_schedule(Target(vector_bits=256, cores=2))
    assert str(nest) == before and nest.history == []


# ---------------------------------------------------------------------------------------
# the barrier pass divided by the first dimension of an empty buffer while looking for the
# stage of an access (seed 44, case 366; seed 45, case 238)
# ---------------------------------------------------------------------------------------
def test_a_kernel_storing_to_an_empty_two_dimensional_buffer_builds_for_cuda():
    T = Compute("T", (0, 6), lambda i, j: cast(i + j, "float32"))
    nest = LoopNest([T])
    nest.set_gpu_thread_index(nest.loop("i"), 0)
    kernel = build(nest, [T], target="cuda")
    assert "k0_T" in kernel.source
    if HAVE_EMU:
        out = np.zeros((0, 6), np.float32)
        run_on_host(kernel, out)


# ---------------------------------------------------------------------------------------
# compute_inline of a tensor over int64 dimensions read at a Python int index (T[0, j]): the
# int32 constant replaced the tensor's int64 variable inside int64 arithmetic and the
# rebuilt expression raised TypeError (the reproducer of seed 44, case 293)
# ---------------------------------------------------------------------------------------
def test_inline_of_an_int64_tensor_read_at_an_int32_index():
    from te import const
    n = const(6, "int64")
    T1 = Compute("T1", (n, n), lambda i, j: cast(i * 10 + j + 1, "float32"))
    T2 = Compute("T2", (n, n), lambda i, j: T1[0, j] + T1[i, (n - 1) - j])
    nest = LoopNest([T2])
    nest.compute_inline(nest.buffer("T1"))
    out = np.zeros((6, 6), np.float32)
    for target in ("ireval", "llvm"):
        build(nest, [T2], target=target)(out)
        i, j = np.indices((6, 6))
        np.testing.assert_array_equal(out, (j + 1) + (i * 10 + 5 - j + 1), err_msg=target)


# ---------------------------------------------------------------------------------------
# auto_schedule register-blocked a "contraction" whose body is a sum of hundreds of gathers:
# 110,000 LLVM instructions and a minute of LLVM (seed 45, case 393)
# ---------------------------------------------------------------------------------------
def test_auto_schedule_does_not_unroll_a_register_tile_of_an_expensive_body():
    import functools
    import operator
    from te import Buffer, Reduce, Sum
    from loopnest.auto.schedule import CONTRACTION_MAX_COST
    A = Buffer("A", (16, 16), "float32")
    B = Buffer("B", (16, 16), "float32")
    cheap = Reduce("C", (16, 16), Sum(), lambda i, j, k: A[i, k] * B[k, j], (16,))
    costly = Reduce("D", (16, 16), Sum(), lambda i, j, k: functools.reduce(
        operator.add, [A[i, k] * B[(k + d) % 16, j] for d in range(CONTRACTION_MAX_COST)]), (16,))
    target = Target(vector_bits=256, vector_registers=16, cores=1)
    report_cheap = str(LoopNest([cheap]).auto_schedule(target))
    nest = LoopNest([costly])
    report = str(nest.auto_schedule(target))
    assert "register-blocked" in report_cheap
    assert "register-blocked" not in report.split(";")[0] and "not register-blocked" in report
    a = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32)
    out = np.zeros((16, 16), np.float32)
    build(nest, [A, B, costly], target="llvm")(a, b, out)
    want = sum(a.astype(np.float64) @ np.roll(b, -d, axis=0).astype(np.float64) for d in range(CONTRACTION_MAX_COST))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------------------------------
# seed 50, case 227: a cache_accesses copy inside a parallel (or GPU thread) loop, whose
# region depends on the loop variable and has a size known only at launch. The dependence
# analysis could not show the copy private to the loop, so it was allocated once outside:
# the concurrent iterations shared it (wrong values on CUDA; a race on the CPU too).
# ---------------------------------------------------------------------------------------
def _case_227():
    """The program of seed 50, case 227, T1 inlined: (M, A, T2, the nest)."""
    from te import Buffer, const, floordiv, minimum, select
    M = Var("M", int32)
    A = Buffer("A", (M + 1, M + 1), "float32")
    T1 = Compute("T1", (M + 1, M + 1), lambda i0, i1: minimum(
        cast(A[i0, i0], "int32"), if_then_else(i0 >= 1, cast(A[i0 - 1, i0], "int32"), 0)))
    T2 = Compute("T2", (M + 1, M + 1), lambda i0, i1: T1[i1, i1] * select(
        cast(T1[i0, i1 % 3], "float32").eq(A[i0 % 3, floordiv(i1, 2)]), T1[M - i1, minimum(i1, M)],
        const(3, "int32") / 3))
    nest = LoopNest([T2])
    nest.compute_inline(nest.buffer("T1"))
    return M, A, T2, nest


def test_a_cache_copy_inside_a_parallel_loop_is_allocated_per_iteration():
    from loopnest.stmt import Allocate, For, ForKind, iter_stmts
    M, A, T2, nest = _case_227()
    nest.parallelize(nest.loop("i1_1"))
    nest.cache_accesses(nest.buffer("A"), "cache1", nest.loop("i1_1"))
    prepared = nest.copy().prepare_for_codegen()
    par = next(s for s in iter_stmts(prepared.root) if isinstance(s, For) and s.kind == ForKind.PARALLEL)
    assert any(isinstance(s, Allocate) and s.buffer.name == "cache1" for s in iter_stmts(par.body))
    a = np.random.default_rng(0).integers(-3, 4, (65, 65)).astype(np.float32)
    want = np.zeros((65, 65), np.int32)
    build(LoopNest([T2]), [A, T2, M], target="ireval")(a, want, 64)
    for _ in range(3):
        got = np.zeros_like(want)
        build(nest, [A, T2, M], target="llvm")(a, got, 64)
        np.testing.assert_array_equal(got, want)


def test_ireval_check_races_shows_a_cache_copy_shared_by_parallel_iterations(monkeypatch):
    """Before the fix, case 227's copy was allocated once outside the parallel loop: serial
    runs (IREval, and LLVM at the tester's sizes) were right, the parallel iterations shared
    it. IREval with ``check_races=True`` records which iterations touch each element and
    names the race."""
    from codegen.ireval import DataRaceError
    from loopnest.transforms import privacy
    M, A, T2, nest = _case_227()
    nest.parallelize(nest.loop("i1_1"))
    nest.cache_accesses(nest.buffer("A"), "cache1", nest.loop("i1_1"))
    a = np.random.default_rng(0).integers(-3, 4, (9, 9)).astype(np.float32)
    want = np.zeros((9, 9), np.int32)
    build(LoopNest([T2]), [A, T2, M], target="ireval")(a, want, 8)
    got = np.zeros_like(want)
    build(nest, [A, T2, M], target="ireval", check_races=True)(a, got, 8)
    np.testing.assert_array_equal(got, want)
    shared = nest.copy()
    # the allocation pass as it was: one copy outside the loop
    monkeypatch.setattr(privacy, "private_to", lambda nest, buf, f: False)
    build(shared, [A, T2, M], target="ireval")(a, got, 8)          # a serial run hides it
    np.testing.assert_array_equal(got, want)
    with pytest.raises(DataRaceError, match=r"data race on cache1 .* iteration 1 of the parallel/GPU loop i1_1 "
                                            r"and .* in iteration 0 of the same run"):
        build(shared, [A, T2, M], target="ireval", check_races=True)(a, got, 8)


def test_check_races_passes_the_gpu_schedules_and_shared_reads():
    """The benchmark's GPU schedules share no element between concurrent iterations (thread
    loops included: threads exchange data only across separate thread loops, barriers
    between); iterations reading one copy, filled before their loop runs, is no race."""
    from bench.gpu_schedules import GPU_SCHEDULES, TEST_SIZES, gpu_nest
    from bench.kernels import WORKLOADS
    # the matmul at 32 (the same shared tiles, barriers and register tiles as at its test size
    # of 64, one eighth of the race-checked work)
    sizes = dict(TEST_SIZES, matmul=32)
    for name in GPU_SCHEDULES:
        spec = WORKLOADS[name].make(sizes[name])
        outs = {n: np.zeros(s, np.float32) for n, s in spec.out_shapes.items()}
        args = [spec.inputs[b.name].copy() if b.name in spec.inputs else outs[b.name] for b in spec.args]
        build(gpu_nest(name, spec), spec.args, target="ireval", check_races=True)(*args)
        assert spec.error(outs) <= spec.tol, name
    from te import Buffer
    A = Buffer("A", (3, 4), "float32")
    B = Compute("B", (3, 4), lambda i, j: A[i, j] * 2.0)
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    nest.cache_accesses(nest.buffer("A"), "row", i)      # one row copy, refilled in each i
    nest.parallelize(nest.get_loops_for(B)[-1])          # the j loop: runs once per i
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.zeros_like(a)
    build(nest, [A, B], target="ireval", check_races=True)(a, b)
    np.testing.assert_array_equal(b, a * 2)


def test_the_tester_reports_a_race_that_a_serial_run_hides(monkeypatch):
    from fuzz.check import Case, check_program, check_schedule
    from fuzz.programs import Program, TensorSpec
    from loopnest.transforms import privacy
    p = Program({}, [TensorSpec("A", "int32", [[6, 0], [5, 0]]),
                     TensorSpec("B", "int32", [[6, 0], [5, 0]],
                                ["add", ["ld", "A", [["i", 0], ["sub", ["c", 4, "int32"], ["i", 1]]]],
                                 ["c", 1, "int32"]])], ["B"], 0)
    case = Case(p)
    assert check_program(case) == []
    steps = [{"op": "parallelize", "args": [{"loop": "i0"}], "kwargs": {}},
             {"op": "cache_accesses", "args": [{"buffer": "A"}, "cache1", {"loop": "i0"}], "kwargs": {}}]
    assert check_schedule(case, steps, ("ireval",)).failures == []
    monkeypatch.setattr(privacy, "private_to", lambda nest, buf, f: False)   # every allocation outside
    monkeypatch.setattr(privacy, "refuse_lost_privacy", lambda nest, old_root, op: None)   # and no check of it
    failures = check_schedule(case, steps, ("ireval",)).failures
    assert [f.signature for f in failures] == ["run:ireval-races:DataRaceError"]
    # its reproducer runs IREval with check_races too (here, where the race is still patched in)
    from fuzz.minimize import reproducer_source
    source = reproducer_source(case, steps, failures[0], ("ireval",), "race")
    assert "TARGETS = ['ireval-races']" in source
    with pytest.raises(SystemExit) as stop:
        exec(compile(source, "reproducer", "exec"), {"__name__": "__main__"})
    assert stop.value.code == 1


def test_a_race_check_past_the_time_limit_is_cut_short_not_reported(monkeypatch):
    """Seed 176, case 119: a stage recomputed in each of 768 GPU threads; IREval's plain run
    took 2 s, its race check (every iteration interpreted on its own) 100 s, past the 60 s
    limit of a case. The values were checked by the plain run: the race check is counted as
    cut short, not reported as a crash."""
    from fuzz.check import Case, Result, _races
    from fuzz.limits import TimeLimit
    from fuzz.programs import Program, TensorSpec
    p = Program({}, [TensorSpec("A", "int32", [[6, 0]]),
                     TensorSpec("B", "int32", [[6, 0]], ["add", ["ld", "A", [["i", 0]]], ["c", 1, "int32"]])], ["B"], 0)
    case = Case(p)
    nest = LoopNest(case.outputs)
    real = case.run

    def slow(nest, target, **options):
        if options.get("check_races"):
            raise TimeLimit("ran past the per-case time limit of 60 s of CPU time")
        return real(nest, target, **options)
    monkeypatch.setattr(case, "run", slow)
    result = Result([])
    assert _races(case, nest, case.baseline, result) == [] and result.skipped == ["ireval-races"]
    from fuzz.campaign import Summary
    summary = Summary(seed=176, races_cut=1)
    assert "race checks cut short by the time limit 1" in summary.report()
    assert "race checks" not in Summary(seed=176).report()


def test_an_unrolled_parallel_loop_and_its_tail_each_allocate_their_scratch():
    """Seed 63, case 350: unroll by 3 of a parallel loop whose iterations use rfactor's lane
    buffers gave the loop a parallel tail; the buffers, used in both loops, were allocated
    once around them, shared by the concurrent iterations (found by check_races). Each
    concurrent loop among the users now gets its own allocation inside."""
    from loopnest.stmt import Allocate, For, ForKind, iter_stmts
    from te import Min, Reduce
    N = Var("N", int32)
    T1 = Compute("T1", (N,), lambda i0: 1.0)
    T2 = Reduce("T2", (N,), Min(), lambda i0, r0, r1: if_then_else(r1 >= 2, T1[r1 - 2], 0.0), (N, N + 1))
    T3 = Compute("T3", (N,), lambda i0: T2[i0])
    T4 = Compute("T4", (N,), lambda i0: T3[i0 // 2])
    nest = LoopNest([T4])
    nest.auto_schedule(Target(vector_bits=256, vector_registers=16, cores=2, l1_bytes=512, l2_bytes=256))
    nest.unroll(nest.loop("i0_1"), 3)
    prepared = nest.copy().prepare_for_codegen()
    parallel = [s for s in iter_stmts(prepared.root) if isinstance(s, For) and s.kind == ForKind.PARALLEL
                and any(isinstance(x, For) and x.var.name.startswith("r0") for x in iter_stmts(s))]
    assert len(parallel) == 2            # the unrolled loop and its tail
    for f in parallel:
        assert {x.buffer.name for x in iter_stmts(f.body) if isinstance(x, Allocate)} >= {"T2_rf_lanes"}
    for n in (2, 7):
        want, got = np.zeros(n, np.float32), np.zeros(n, np.float32)
        build(LoopNest([T4]), [T4, N], target="ireval")(want, n)
        build(nest, [T4, N], target="ireval", check_races=True)(got, n)
        np.testing.assert_array_equal(got, want)
        build(nest, [T4, N], target="llvm")(got, n)
        np.testing.assert_array_equal(got, want)


def test_the_two_parts_of_a_split_around_a_parallel_loop_each_allocate_its_cache():
    """Seed 76, case 36: ``split_with_tail`` of the serial loop around the automatic matmul's
    parallel row-block loop copied the loop, its ``C_local`` tile and all, into both parts;
    the tile, used in both, was allocated once around them and shared by the concurrent
    iterations (found by check_races). Loops holding concurrent loops that each fill the
    buffer before reading it now get an allocation each, as concurrent loops do. (32 columns,
    one register tile wide: the serial column loop around the row blocks of the seed's
    program, which had 64 columns when its A did not yet narrow the tile.)"""
    from loopnest.stmt import Allocate, For, ForKind, iter_stmts
    nest = _matmul_nest(16, 32, 64, "float16")
    nest.auto_schedule(Target(vector_bits=512, vector_registers=32, cores=3, l1_bytes=32768, l2_bytes=1048576))
    nest.split_with_tail(nest.loop("j_outer"), 3)
    prepared = nest.copy().prepare_for_codegen()
    parallel = [s for s in iter_stmts(prepared.root) if isinstance(s, For) and s.kind == ForKind.PARALLEL]
    assert len(parallel) == 2            # one in each part of the split
    for f in parallel:
        assert "C_local" in {x.buffer.name for x in iter_stmts(f.body) if isinstance(x, Allocate)}
    rng = np.random.default_rng(76)
    a = rng.integers(-3, 4, (16, 64)).astype(np.float16)
    b = rng.integers(-3, 4, (64, 32)).astype(np.float16)
    want = a.astype(np.float64) @ b.astype(np.float64)
    A, B, C = (nest.buffer(n) for n in "ABC")
    for target, options in (("ireval", {"check_races": True}), ("llvm", {})):
        got = np.zeros((16, 32), np.float32)
        build(nest, [A, B, C], target=target, **options)(a, b, got)
        np.testing.assert_array_equal(got, want)


def test_an_unrolled_parallel_loop_and_its_tail_each_allocate_a_cache_copy_read_under_a_guard():
    """Seed 77, case 237: a one-element cache copy of the index data I, made at a parallel
    loop then unrolled by 2 (a parallel loop and its parallel tail), is read only under
    ``if_then_else(i >= 2, ...)``. The flow analysis counted that read in every iteration,
    out of the copy at i = 0, so it could not show that each iteration reads only what it
    copied: the copy was allocated once around both loops, shared by their concurrent
    iterations. Loads under ``if_then_else`` now count only where their side is taken."""
    from te import const, maximum, minimum
    I = Buffer("I", (7,), "int32")
    T1 = Compute("T1", (7,), lambda i0: 1.0)
    T2 = Compute("T2", (7,), lambda i0: if_then_else(i0 >= 2, T1[minimum(maximum(I[i0 - 2], 0), const(7, "int32") - 1)],
                                                     0.0))
    nest = LoopNest([T2])
    nest.cache_accesses(nest.buffer("I"), "cache1", nest.loop("i0_1"))
    nest.parallelize(nest.loop("i0_1"))
    nest.unroll(nest.loop("i0_1"), 2)
    idx = np.array([3, -4, 9, 0, 6, 2, 1], np.int32)
    want = np.array([0, 0, 1, 1, 1, 1, 1], np.float32)
    for target, options in (("ireval", {"check_races": True}), ("llvm", {})):
        got = np.zeros(7, np.float32)
        build(nest, [I, T2], target=target, **options)(idx, got)
        np.testing.assert_array_equal(got, want)


def test_a_compute_at_copy_gathered_in_a_parallel_loop_and_its_tail_is_private_to_each():
    """Seed 80, case 434 (reduced): T1 computed at a parallel loop that also gathers from it
    (``T1[I[i] mod (N + 1)]``), then ``slice_tail``: a parallel loop and its parallel tail,
    each computing all of its copy before the gather. The flow check counted the gather as
    reading anywhere, outside the copy too, and the whole-nest test wants all uses in one
    loop: the copy was allocated once around both loops and shared by their concurrent
    iterations. A read takes elements of its buffer (elsewhere it raises), and users that
    each read only what they wrote get an allocation each."""
    from loopnest.stmt import Allocate, For, ForKind, iter_stmts
    from te import floormod
    N = Var("N", int32)
    A = Buffer("A", (N + 1,), "float32")
    Ix = Buffer("I", (N,), "int32")
    T1 = Compute("T1", (N + 1,), lambda i: A[i] * 2.0)
    T2 = Compute("T2", (N + 1,), lambda i: T1[i] + 1.0)
    T3 = Compute("T3", (N,), lambda i: T2[i] + T1[floormod(Ix[i], N + 1)])
    nest = LoopNest([T3])
    nest.parallelize(nest.get_loops_for(T3)[0])
    nest.compute_at(T1, nest.get_loops_for(T3)[0])
    nest.slice_tail(nest.get_loops_for(T3)[0], 1)
    prepared = nest.copy().prepare_for_codegen()
    parallel = [s for s in iter_stmts(prepared.root) if isinstance(s, For) and s.kind == ForKind.PARALLEL]
    assert len(parallel) == 2
    for f in parallel:
        assert "T1_local" in {x.buffer.name for x in iter_stmts(f.body) if isinstance(x, Allocate)}
    a = np.arange(8, dtype=np.float32)
    idx = np.array([3, 6, 0, 2, 5, 1, 4], np.int32)
    want = (2 * a[:7] + 1) + 2 * a[idx]
    for target, options in (("ireval", {"check_races": True}), ("llvm", {})):
        got = np.zeros(7, np.float32)
        build(nest, [A, Ix, T3, N], target=target, **options)(a, idx, got, 7)
        np.testing.assert_array_equal(got, want)


def test_slice_tail_of_a_parallel_loop_is_refused_where_its_pieces_would_share_a_computed_at_tensor():
    """Seed 128, case 72: T1 computed at a parallel loop (each iteration writes
    ``T1[0 .. i / 2]``, then reads ``T1[i / 2]`` and ``T1[0]``) had its own T1 per
    iteration; ``slice_tail`` of that loop left the analysis unable to show the tail's
    iterations private, so T1 was allocated once around the loop and its tail, which both
    wrote ``T1[0]`` from concurrent iterations: a race, on IREval's race check. The slices
    are refused now (``refuse_lost_privacy`` runs after them), the nest unchanged."""
    from te import floordiv, minimum
    N = Var("N", int32)
    T1 = Compute("T1", (N + 1,), lambda i0: 1)
    T2 = Compute("T2", (N + 1,), lambda i0: minimum(cast(T1[floordiv(i0, 2)], "int64"), cast(T1[0], "int64")))
    nest = LoopNest([T2])
    nest.parallelize(nest.loop("i0_1"))
    nest.compute_at(nest.buffer("T1"), nest.loop("i0_1"))
    before, history = str(nest), list(nest.history)
    with pytest.raises(ScheduleError, match=r"slice_tail: the iterations of the parallel loop i0_1_tail would "
                                            r"share one T1"):
        nest.slice_tail(nest.loop("i0_1"), 2)
    assert str(nest) == before and nest.history == history
    out = np.zeros(3, np.int64)
    build(nest, [T2, N], target="ireval", check_races=True)(out, 2)     # one T1 per iteration
    np.testing.assert_array_equal(out, [1, 1, 1])


def _thread_binding_refused(nest, loop: str, dim: int, match: str, args: list, n: int, shape: tuple) -> None:
    """Binding ``loop`` to thread axis ``dim`` is refused with ``match``, the nest unchanged,
    and the nest as it is builds for CUDA and gives zeros (the host emulation, size ``n``)."""
    before, history = str(nest), list(nest.history)
    with pytest.raises(ScheduleError, match=match):
        nest.set_gpu_thread_index(nest.loop(loop), dim)
    assert str(nest) == before and nest.history == history
    if HAVE_EMU:
        out = np.full(shape, np.nan, np.float32)
        run_on_host(build(nest, args, target="cuda"), out, n)
        np.testing.assert_array_equal(out, np.zeros(shape, np.float32))


def test_a_thread_binding_that_would_make_a_sibling_thread_loop_run_redundantly_is_refused():
    """Seed 130, case 293: ``slice_head`` of T2's column loop, the head bound to threadIdx.x
    and the rest to threadIdx.z: the threads on z ran the x loop's body redundantly (and
    those on x the z loop's), each body initialising a row of T2 and then accumulating into
    it, which needs a barrier only some threads would reach. Every binding was accepted and
    the CUDA build refused the kernel; the second binding is refused now, naming the loop
    and the buffer, the nest unchanged, and the nest with one binding builds."""
    from te import floordiv
    N = Var("N", int32)
    T1 = Compute("T1", (N + 1, N + 1), lambda i0, i1: 0)
    T2 = Reduce("T2", (N + 1, N + 1), Sum(), lambda i0, i1, r0: cast(T1[r0, floordiv(i1, 2)], "float32"), (N,))
    nest = LoopNest([T2])
    nest.slice_head(nest.loop("i1_1"), 2)
    nest.set_gpu_thread_index(nest.loop("i1_1_head"), 0)
    _thread_binding_refused(nest, "i1_1", 2, r"cannot bind loop i1_1 to gpu_thread.z: threads on z would run the "
                            r"body of the gpu_thread loop i1_1_head redundantly, .* through T2", [T2, N], 7, (8, 8))


def test_a_thread_binding_inside_the_guard_of_a_thread_loop_that_exchanges_data_is_refused():
    """Seed 190, case 169: after ``auto_schedule('cuda')`` the column loop of T4 sat inside
    the guard of a threadIdx.x loop (``if (i < N)``); binding a piece of its reduction loop to
    threadIdx.y made the threads on y run the rest of that guarded body redundantly, and its
    statements accumulate into T4, which needs a barrier inside the guard. The binding was
    accepted and the CUDA build refused the kernel: the check did not look inside the guard."""
    N = Var("N", int32)
    T1 = Reduce("T1", (N + 1,), Sum(), lambda i0, r0: 1, (N,))
    T2 = Compute("T2", (N + 1,), lambda i0: if_then_else(i0 >= 2, T1[i0 - 2], 0))
    T3 = Compute("T3", (N, N + 1), lambda i0, i1: cast(T2[i1], "float32"))
    T4 = Reduce("T4", (N, N + 1), Max(), lambda i0, i1, r0: if_then_else(r0 >= 2, T3[r0 - 2, i1 / 2], 0.0), (N + 1,))
    nest = LoopNest([T4])
    nest.auto_schedule("cuda")
    nest.slice_head(nest.loop("r0_1"), 1)
    nest.split_with_tail(nest.loop("r0_1_head"), 2)
    _thread_binding_refused(nest, "r0_1_head_tail", 1, r"cannot bind loop r0_1_head_tail to gpu_thread.y: threads "
                            r"on y would run the body of the gpu_thread loop i0_3_inner redundantly, .* through T4, .*; bind a "
                            r"loop of i0_3_inner that holds both statements to that axis instead",
                            [T4, N], 2, (2, 3))
    nest.set_gpu_thread_index(nest.loop("i1_1"), 1)         # what the message advises: accepted, and it builds
    if HAVE_EMU:
        out = np.full((2, 3), np.nan, np.float32)
        run_on_host(build(nest, [T4, N], target="cuda"), out, 2)
        np.testing.assert_array_equal(out, np.zeros((2, 3), np.float32))


def test_sibling_thread_loops_on_two_axes_without_an_exchange_are_accepted_and_build():
    """The check above refuses only an exchange: sibling thread loops on x and z whose
    bodies each store once (threads of the other axis repeat the store, guarded) bind and
    give the right values."""
    A = Buffer("A", (4, 8), "float32")
    T = Compute("T", (4, 8), lambda i, j: A[i, j] * 2.0)
    nest = LoopNest([T])
    i, j = nest.get_loops_for(T)
    head, _ = nest.slice_head(j, 2)
    nest.set_gpu_thread_index(head, 0)
    nest.set_gpu_thread_index(j, 2)
    assert [f.kind for f in (nest.loop(head).stmt, nest.loop(j).stmt)] == ["gpu_thread", "gpu_thread"]
    if HAVE_EMU:
        a = np.arange(32, dtype=np.float32).reshape(4, 8)
        out = np.full((4, 8), np.nan, np.float32)
        run_on_host(build(nest, [A, T], target="cuda"), a, out)
        np.testing.assert_array_equal(out, 2 * a)


def test_cache_accesses_refuses_a_local_buffer_shared_by_a_parallel_loop_inside():
    """Seed 87, case 259: ``cache1`` (a cache of T1 that each parallel iteration kept to
    itself) cached again at the serial loop around the parallel one gave one local element
    ``cache4[0]`` that every parallel iteration wrote and read, and that the copy back read
    after the loop: a race. Refused, the nest unchanged; the same cache of a buffer whose
    parallel iterations write elements of their own is accepted."""
    from te import floordiv
    T1 = Compute("T1", (6,), lambda i0: 1.0)
    T2 = Compute("T2", (6,), lambda i0: cast(T1[floordiv(i0, 2)], "int32"))
    nest = LoopNest([T2])
    nest.cache_accesses(nest.buffer("T1"), "cache1", nest.loop("i0"))
    nest.split_with_mask(nest.loop("i0"), 3)
    nest.parallelize(nest.loop("i0_inner"))
    before, history = str(nest), list(nest.history)
    with pytest.raises(ScheduleError, match="local buffer cache4 would make the iterations of the parallel loop"):
        nest.cache_accesses(nest.buffer("cache1"), "cache4", nest.loop("i0_outer"))
    assert str(nest) == before and nest.history == history
    got = np.zeros(6, np.int32)
    build(nest, [T2], target="ireval", check_races=True)(got)
    np.testing.assert_array_equal(got, np.ones(6, np.int32))
    # parallel iterations writing elements of their own: the local buffer stays legal
    B = Compute("B", (8,), lambda i: cast(i, "float32") * 2.0)
    nest = LoopNest([B])
    io, ii, _ = nest.split_with_tail(nest.get_loops_for(B)[0], 4)
    nest.parallelize(ii)
    nest.cache_accesses(B, "B_local", io)
    got = np.zeros(8, np.float32)
    build(nest, [B], target="ireval", check_races=True)(got)
    np.testing.assert_array_equal(got, np.arange(8, dtype=np.float32) * 2)


def test_cuda_builds_a_cache_copy_sized_at_launch_inside_thread_loops():
    """Once refused by the CUDA build; now a global buffer with one slice per thread
    (tests/codegen/test_cuda_global_slices.py runs it on the host emulation)."""
    M, A, T2, nest = _case_227()
    nest.set_gpu_thread_index(nest.loop("i1_1"), 1)
    nest.cache_accesses(nest.buffer("A"), "cache1", nest.loop("i1_1"))
    k = build(nest, [A, T2, M], target="cuda")
    assert "cache1: one slice of" in k.module.plan.describe_memory()


def _matmul_nest(m: int, n: int, k: int, dtype: str) -> LoopNest:
    """The random tester's lone matmul program: C (m x n, float32) = A (m x k) @ B (k x n) of ``dtype``."""
    A, B = Buffer("A", (m, k), dtype), Buffer("B", (k, n), dtype)
    C = Reduce("C", (m, n), Sum(), lambda i, j, r: cast(A[i, r], "float32") * cast(B[r, j], "float32"), (k,))
    return LoopNest([C])


def test_a_cache_of_a_staged_tile_inside_gpu_blocks_is_refused_when_blocks_would_share_it():
    """Seed 68, case 363: cache_accesses of the shared B tile at the K loop of a gpu_matmul
    tree copied in both stages, one of them not yet written by this block: each block then
    read what the previous block had copied back, so the tile could no longer be private to
    a block, and the blocks raced on it (IREval's race check named it; CUDA refused the
    build). The copy is refused now, the nest unchanged."""
    nest = _matmul_nest(32, 64, 32, "bfloat16")
    nest.gpu_matmul(tensor_cores=True, BM=32, BN=32, WM=32, WN=16, BK=32, prefetch="registers", stages=2)
    before = str(nest)
    with pytest.raises(ScheduleError, match="(would make the iterations of the gpu_block loop bx share elements of Bs"
                                            "|loop kk was declared a warp MMA by tensorize and reads or writes Bs)"):
        nest.cache_accesses(nest.buffer("Bs"), "cache1", nest.loop("ko"))
    assert str(nest) == before
    # the copy of a read-only input at the same loop is fine: the blocks only read it
    nest.cache_accesses(nest.buffer("B"), "B_copy", nest.loop("ko"))


def test_a_cache_of_a_warp_mma_accumulator_is_refused():
    """Seed 73, case 777: cache_accesses of a tensor-core tree's accumulators at a warp loop
    took them out of registers, and the CUDA build then refused the MMA. A buffer that a
    declared warp MMA reads or writes is not cached now, the nest unchanged."""
    nest = _matmul_nest(32, 64, 32, "bfloat16")
    nest.gpu_matmul(tensor_cores=True, BM=16, BN=16, WM=16, WN=8, BK=32, prefetch="registers", stages=1)
    before = str(nest)
    with pytest.raises(ScheduleError, match="loop kk was declared a warp MMA by tensorize and reads or writes acc"):
        nest.cache_accesses(nest.buffer("acc"), "cache1", nest.loop("wy0"))
    assert str(nest) == before


def test_compute_at_a_parallel_loop_is_refused_when_the_iterations_would_share_the_tensor(monkeypatch):
    """Seed 72, case 848: T1 computed at a parallel loop over its whole extent; its reads under
    ``if_then_else`` go below 0 where the guard is false, so the analysis, which counted them
    there, could not show each iteration's reads covered by its own writes: the iterations
    shared one T1, a race that IREval's race check named. compute_at then refused it; loads
    under ``if_then_else`` now count only where their side is taken, so T1 is private to each
    iteration and the schedule is accepted. Where the analysis cannot show it (forced here),
    compute_at still refuses, leaving the nest as it was."""
    from loopnest.analysis import legality
    from te import floordiv, floormod, minimum
    T1 = Compute("T1", (8,), lambda i: 1.0)
    T2 = Compute("T2", (7, 10), lambda i, j: (
        T1[j % 3] + T1[floordiv(j, 2)] + if_then_else(j >= 2, T1[j - 2], 0.0) + T1[7 - i]
        + if_then_else(i >= 2, T1[i - 2], 0.0) + T1[floormod(i, 8)] + if_then_else(i >= 1, T1[i - 1], 0.0)
        + T1[minimum(j, 7)] + T1[i % 3] + T1[floormod(j, 8)]))
    want = np.zeros((7, 10), np.float32)
    build(LoopNest([T2]), [T2], target="ireval")(want)

    def parallel_rows():
        nest = LoopNest([T2])
        i = nest.get_loops_for(T2)[0]
        nest.parallelize(i)
        return nest, i

    nest, i = parallel_rows()
    nest.compute_at(T1, i)
    for target, options in (("ireval", {"check_races": True}), ("llvm", {})):
        got = np.zeros((7, 10), np.float32)
        build(nest, [T2], target=target, **options)(got)
        np.testing.assert_array_equal(got, want)
    nest, i = parallel_rows()
    before = str(nest)
    monkeypatch.setattr(legality, "privatizable", lambda *args: False)
    with pytest.raises(ScheduleError, match="computing T1 at loop i_1 would make the iterations of the parallel loop "
                                            "i_1 share elements of T1"):
        nest.compute_at(T1, i)
    assert str(nest) == before


def test_distribute_of_a_block_loop_inside_a_block_loop_is_refused():
    """Seed 74, case 1059: distribute(bx) of a tensor-core tree left the block loop by holding
    several block loops, which the CUDA build refused (a kernel's grid is its outermost loops)."""
    nest = _matmul_nest(16, 64, 64, "bfloat16")
    nest.gpu_matmul(tensor_cores=True, BM=16, BN=64, WM=16, WN=32, BK=32, prefetch="shared", stages=2)
    before = str(nest)
    with pytest.raises(ScheduleError, match="it is a gpu_block loop inside the gpu_block loop by"):
        nest.distribute(nest.loop("bx"))
    assert str(nest) == before


def test_tensorize_of_a_loop_inside_a_declared_mma_is_refused():
    """Seed 74, case 1072: tensorize of a loop inside the tree's declared MMA nest was
    accepted, and the CUDA build, which prints the outer one, refused the inner one."""
    nest = _matmul_nest(16, 32, 64, "float16")
    nest.gpu_matmul(tensor_cores=True, BM=16, BN=16, WM=16, WN=16, BK=16, prefetch="registers", stages=1)
    before = str(nest)
    with pytest.raises(ScheduleError, match="loop kk around it is already declared a warp MMA"):
        nest.tensorize(nest.loop("tj21"))
    assert str(nest) == before


# ---------------------------------------------------------------------------------------
# the initialising loops of a tensor-core accumulator tiled with a mask (seed 91, case 50):
# the accumulator's per-thread range was taken from the loops' box, 6 elements where the
# mask lets 4 through, so it stayed in shared memory and the MMA refused it at build time
# ---------------------------------------------------------------------------------------
def test_a_masked_tile_of_the_accumulator_init_keeps_it_in_registers():
    A, B = Buffer("A", (16, 16), "bfloat16"), Buffer("B", (16, 64), "bfloat16")
    C = Reduce("C", (16, 64), Sum(), lambda i, j, r: cast(A[i, r], "float32") * cast(B[r, j], "float32"), (16,))
    nest = LoopNest([C])
    nest.gpu_matmul(tensor_cores=True, BM=16, BN=32, WM=16, WN=32, BK=16, prefetch="shared", stages=3)
    nest.tile(nest.loop("tj4"), nest.loop("v5"), 4, 3)          # v5: 4 accumulators, by 3 with a mask
    kernel = build(nest, [A, B, C], target="cuda")
    assert "mma.sync" in kernel.source
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (16, 16)).astype("float32")
    b = rng.integers(-3, 4, (16, 64)).astype("float32")
    a16, b16 = a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
    c = np.zeros((16, 64), np.float32)
    build(nest, [A, B, C], target="ireval")(a16, b16, c)
    np.testing.assert_array_equal(c, a @ b)
    if HAVE_EMU:
        c = np.zeros((16, 64), np.float32)
        run_on_host(kernel, a16, b16, c)
        np.testing.assert_array_equal(c, a @ b)


# ---------------------------------------------------------------------------------------
# a tile loop of a declared MMA reordered around it (seed 91, case 376): the CUDA backend
# matched the larger nest from the tile loop, a warp MMA too, and then refused the declared
# loop kk as not reached by the warp, at build time
# ---------------------------------------------------------------------------------------
def test_a_declared_mma_inside_a_larger_mma_nest_builds_with_tensor_cores():
    A, B = Buffer("A", (16, 64), "float16"), Buffer("B", (64, 16), "float16")
    C = Reduce("C", (16, 16), Sum(), lambda i, j, r: cast(A[i, r], "float32") * cast(B[r, j], "float32"), (64,))
    nest = LoopNest([C])
    nest.gpu_matmul(tensor_cores=True, BM=16, BN=16, WM=16, WN=8, BK=32, prefetch="shared", stages=4)
    nest.reorder([nest.loop("kk"), nest.loop("ti50"), nest.loop("tj51")], [1, 0, 2])
    kernel = build(nest, [A, B, C], target="cuda")
    assert "mma.sync" in kernel.source
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (16, 64)).astype("float32")
    b = rng.integers(-3, 4, (64, 16)).astype("float32")
    c = np.zeros((16, 16), np.float32)
    build(nest, [A, B, C], target="ireval")(a.astype(np.float16), b.astype(np.float16), c)
    np.testing.assert_array_equal(c, a @ b)
    if HAVE_EMU:
        c = np.zeros((16, 16), np.float32)
        run_on_host(kernel, a.astype(np.float16), b.astype(np.float16), c)
        np.testing.assert_array_equal(c, a @ b)


def test_a_thread_binding_counts_the_threads_of_sibling_thread_loops():
    """Seed 140, case 201: after auto_schedule("cuda") a reduction's block tree has a thread
    loop of 256 on x and, beside it, the second level's loop of 32; binding that one to z made
    a block of 256 x 32 = 8192 threads (the sibling's x counts: the kernel's threads are one
    block), which the CUDA build refused. Refused when bound now, the nest unchanged; as
    auto_schedule left it, it builds and gives the right values."""
    N = Var("N", int32)
    T5 = Reduce("T5", (N + 1,), Sum(), lambda i0, r0: 1, (N,))
    nest = LoopNest([T5])
    nest.auto_schedule("cuda")
    before, history = str(nest), list(nest.history)
    with pytest.raises(ScheduleError, match=r"256 \(x\) x 32 \(z\) = 8192 threads, more than the 1024"):
        nest.set_gpu_thread_index(nest.loop("r0_inner_1_inner_rf"), 2)
    assert str(nest) == before and nest.history == history
    assert "__global__" in build(nest, [T5, N], target="cuda").source
    out = np.zeros(9, np.int32)
    build(nest, [T5, N], target="ireval")(out, 8)
    assert out.tolist() == [8] * 9


def _seed_143_case_395():
    """The program and schedule of seed 143, case 395: (nest, build arguments, index data)."""
    N = Var("N", int32)
    I = Buffer("I", (N + 3,), "int32")
    T2 = Compute("T2", (7,), lambda i: 2.0)
    T3 = Reduce("T3", (N + 1,), Sum(), lambda i, r: T2[I[r]] + T2[r / 2], (8,))
    T4 = Reduce("T4", (N + 1,), Sum(), lambda i, r: T3[I[r] % (N + 1)] - T3[r] * 3.0, (8,))
    nest = LoopNest([T4])
    i = nest.get_loops_for(T4)[0]
    nest.compute_at(nest.buffer("T3"), i)
    nest.set_gpu_thread_index(i, 2)
    return nest, [I, T4, N], np.array([3, 4, 4, 5, 2, 5, 6, 0, 5, 3, 4], np.int32)


def test_a_reduction_computed_in_every_thread_gets_a_buffer_per_thread():
    """Seed 143, case 395: T3, a reduction of a size known at launch, computed at a loop bound
    to threads (every thread computes all of it), was one global buffer for all threads: a
    thread's ``T3[k] = 0`` could clear another's partial sum (wrong values on the host
    emulation, in some runs). A tensor that a store adds to gets a slice per thread now."""
    nest, args, idx = _seed_143_case_395()
    kernel = build(nest, args, target="cuda")
    placement = next(p for p in kernel.module.plan.placements.values() if p.buffer.name == "T3")
    assert placement.scope == "global" and placement.slice_axes == (2,)
    want = np.zeros(9, np.float32)
    build(LoopNest([args[1]]), args, target="ireval")(idx, want, 8)
    if HAVE_EMU:
        got = np.zeros(9, np.float32)
        run_on_host(kernel, idx, got, 8)
        np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(not HAVE_EMU, reason="g++ or the CUDA headers not found")
def test_the_emulation_names_the_race_of_seed_143_on_every_run(monkeypatch):
    """The same defect, put back (the placement's test for accumulation taken away): T3 is one
    buffer for every thread again, and the emulation's race check names it on every run (the
    emulation's OS threads showed it in some runs only)."""
    from codegen.cuda import memory
    from codegen.cuda.emulate import EmulationError
    monkeypatch.setattr(memory, "_accumulates", lambda stmts, b: False)
    nest, args, idx = _seed_143_case_395()
    kernel = build(nest, args, target="cuda")
    with pytest.raises(EmulationError, match=r"data race on T3\[0\] \(in memory order\): thread \(0, 0, 0\) of block "
                                             r"\(0, 0, 0\) wrote it, then thread \(0, 0, 1\) of block \(0, 0, 0\) "
                                             r"wrote it, changing it"):
        run_on_host(kernel, idx, np.zeros(9, np.float32), 8)


def _seed_154_case_392():
    N = Var("N", int32)
    A = Buffer("A", (N + 2,), "float32")
    T1 = Compute("T1", (N + 2,), lambda i0: cast(A[0], "int32") * cast(A[floordiv(i0, 2)], "int32"))
    T2 = Compute("T2", (7, 9), lambda i0, i1: T1[i1 / 2] * (maximum(T1[minimum(i0, N + 2 - 1)],
                                                                    cast(A[i0 / 2], "int32")) / 2))
    T3 = Compute("T3", (7, 9), lambda i0, i1: maximum(T2[i0, floordiv(i0, 2)],
                                                      cast(select(i0 < 1, 1.0, A[floordiv(i1, 2)]), "int32")))
    T4 = Reduce("T4", (N,), Max(), lambda i0, r0, r1: T3[i0 / 2, floordiv(r0, 2)]
                + if_then_else(i0 >= 1, if_then_else(r1 >= 1, T3[r1 - 1, i0 - 1], 0), 0)
                + if_then_else(r1 >= 1, T3[r0 * 2, r1 - 1], 0), (N, 7))
    nest = LoopNest([T4])
    nest.unroll(nest.loop("i1_1"), None)
    nest.normalize(nest.loop("i0"))
    nest.cache_accesses(nest.buffer("T3"), "cache1", nest.loop("r0"))
    nest.split_with_mask(nest.loop("r1"), 4)
    return nest


def test_a_dependence_analysis_that_isl_cannot_finish_is_bounded_and_assumes_the_worst():
    """Seed 154, case 392: the bounds of a cache copy (minima of a dozen floor divisions) made
    the composition of its access relations run for minutes, while vectorize looked for loops
    to suggest instead. Now the conflicting pairs of a buffer take a bounded number of isl
    operations, and where isl gives up every distance counts: the refusal is still the right
    one (the loop carries the reduction)."""
    nest = _seed_154_case_392()
    before = str(nest)
    with pytest.raises(ScheduleError, match="flow dependence on T4 carried by loop r1_inner"):
        nest.vectorize(nest.loop("r1_inner"))
    assert str(nest) == before
    # the cache's conflicts are the ones isl gives up on: every distance counts for them
    from loopnest.analysis import dependences
    carried = dependences.conflict_distances(nest.root, nest.loop("r0"))
    cache1 = nest.buffer("cache1")
    assert id(cache1) in dependences.undecided(nest.root)
    distances = next(d for b, d in carried if b is cache1)
    assert distances.is_equal(isl.Set.universe(distances.get_space()))


def test_conflicts_isl_gives_up_on_count_as_every_distance_and_the_refusal_says_so(monkeypatch):
    from loopnest.analysis import dependences, legality
    monkeypatch.setattr(dependences, "CONFLICT_OPERATIONS", 1)
    # the loops' iterations are independent by their statements' shape, which the checks
    # see without isl (``iterations_independent``, ``unshown_buffers``): turned off here, isl is asked
    monkeypatch.setattr(legality, "iterations_independent", lambda f: False)
    monkeypatch.setattr(legality, "same_value_of", lambda f, var: False)
    monkeypatch.setattr(legality, "unshown_buffers", lambda f, var: None)
    A = Buffer("A", (16, 16), "float32")
    B = Compute("B", (16, 16), lambda i, j: A[i, j] * 2.0)     # B[i, j] written once: no dependence
    nest = LoopNest([B])
    i, j = nest.get_loops_for(B)
    assert [b.name for b in dependences.buffers_carried_by(nest.root, i)] == ["B"]
    before = str(nest)
    for transform in (lambda: nest.parallelize(i), lambda: nest.vectorize(j), lambda: nest.reorder([i, j], [1, 0])):
        with pytest.raises(ScheduleError, match=r"isl could not analyse the accesses of B within its operation "
                                                r"budget \(simpler indices and loop bounds let it\), so any two of them "
                                                r"may touch one element"):
            transform()
        assert str(nest) == before


def test_a_tf32_matmul_of_b_transposed_keeps_its_shared_tiles_small():
    """Seed 155, case 467 (found once matmul programs read B as N x K): the tf32 tensor-core
    tree gave B's shared tile, N x K, rows of BN + 8 elements instead of BK + 4 (3 stages of
    64 x 72 floats: over the 48 KB of static shared memory, so the build moved it to global
    memory and refused the MMA)."""
    from loopnest.transforms.gpu_matmul import mma_shared_bytes
    A, B = Buffer("A", (32, 64), "float32"), Buffer("B", (64, 64), "float32")
    C = Reduce("C", (32, 64), Sum(), lambda i, j, k: A[i, k] * B[j, k], (64,))
    nest = LoopNest([C])
    nest.gpu_matmul(tensor_cores=True, BM=16, BN=64, WM=16, WN=32, BK=16, prefetch="shared", stages=3)
    assert nest.buffer("Bs").shape == (3, 64, 20)
    assert mma_shared_bytes(16, 64, 16, 3, 4, "nk") == 3 * (16 * 20 + 64 * 20) * 4
    kernel = build(nest, [A, B, C], target="cuda")
    a = np.random.default_rng(0).integers(-3, 4, (32, 64)).astype(np.float32)
    b = np.random.default_rng(1).integers(-3, 4, (64, 64)).astype(np.float32)
    want = a @ b.T
    got = np.zeros((32, 64), np.float32)
    build(nest, [A, B, C], target="ireval")(a, b, got)
    np.testing.assert_array_equal(got, want)
    if HAVE_EMU:
        got = np.zeros((32, 64), np.float32)
        run_on_host(kernel, a, b, got)
        np.testing.assert_array_equal(got, want)


def test_a_column_reduction_with_an_intermediate_computed_in_its_rows_falls_back():
    """Found by scanning random programs with auto_schedule: a reduction along its columns (T4
    reads B[r, j]) narrower than a vector, with an intermediate (T3, which gathers) computed at
    each of its rows, raised a KeyError: the column template reordered loops that T3's loop
    beside them kept from being one chain. The reorder is now a refusal, and the planner takes
    the next template."""
    A, B = Buffer("A", (8, 9), "float32"), Buffer("B", (7, 9), "float32")
    T3 = Compute("T3", (7, 9), lambda i, j: A[i, 8 - j] * A[i + 1, j // 2] + A[i, j // 2] * A[i + 1, 8 - j]
                 - A[i, j] * 3.0)

    def body(i, j, r):
        e = minimum(T3[i, r], B[r, j])
        for c in range(1, 8):
            e = minimum(e, T3[i, r] * float(c) + B[r, j])
        return e
    T4 = Reduce("T4", (7, 9), Min(), body, (7,))
    nest = LoopNest([T4])
    report = str(nest.auto_schedule(Target(vector_bits=512, vector_registers=32, cores=4)))
    assert "T3: computed at each row of T4" in report, report
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 9)).astype(np.float32), rng.standard_normal((7, 9)).astype(np.float32)
    want, got = np.zeros((7, 9), np.float32), np.zeros((7, 9), np.float32)
    build(LoopNest([T4]), [A, B, T4], target="ireval")(a, b, want)
    build(nest, [A, B, T4], target="llvm")(a, b, got)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_fuse_that_would_put_two_kernels_thread_loops_in_one_block_is_refused():
    """Found by the random tester (seed 1, case 23): ``auto_schedule("cuda")`` gave each of two
    tensors a kernel of 256 threads, one along x and (after a rebinding) one along y; ``fuse``
    of their block loops made one kernel whose block is 256 x 256, which the build then
    refused. A transform whose result binds more threads per block than CUDA allows is now
    refused, and the nest is left as it was."""
    T1 = Reduce("T1", (3, 1), Max(), lambda i0, i1, r0: 1, (1,))
    T2 = Compute("T2", (3, 1), lambda i0, i1: cast(T1[2 - i0, i1], "float32"))
    nest = LoopNest([T2])
    nest.auto_schedule("cuda")
    nest.set_gpu_thread_index(nest.loop("i0_i1_flat_inner_inner"), 1)
    before, history = str(nest), list(nest.history)
    with pytest.raises(ScheduleError, match="256 \\(x\\) x 256 \\(y\\) = 65536 threads per block"):
        nest.fuse([nest.loop("i0_i1_flat_outer"), nest.loop("i0_1_i1_1_flat_outer")])
    assert str(nest) == before and nest.history == history
    build(nest, [T2], target="cuda")


@pytest.mark.skipif(not HAVE_EMU, reason="needs nvcc and a host C++ compiler")
def test_a_nest_left_with_nothing_to_run_runs_in_the_host_emulation():
    """Found by the random tester (seed 180, case 27): an output of no elements, its loop
    unrolled away and the producer's stores eliminated, leaves a nest with no statement; the
    CUDA module has no kernel, and the host emulation failed to load the library it built
    from it. With nothing to launch it now runs nothing, as the GPU launcher does."""
    N = Var("N", int32)
    T1 = Compute("T1", (N, 0), lambda i0, i1: 1.0)
    T2 = Compute("T2", (0,), lambda i0: T1[i0 + 2, i0])
    nest = LoopNest([T2])
    nest.unroll(nest.get_loops_for(T2)[0])
    nest.eliminate_dead_stores()
    assert str(nest).strip() == ""
    out = np.zeros(0, np.float32)
    run_on_host(build(nest, [T2, N], target="cuda"), out, 3)
    assert out.shape == (0,)


def test_a_split_main_loop_of_no_iterations_over_thread_registers_builds_for_cuda():
    """Found by the random tester (seed 200, case 212): after ``auto_schedule('cuda')`` of a
    convolution with one output row, splitting that row loop by 2 leaves a main loop of no
    iterations (its tail does the row) that indexes the per-thread accumulator. The accumulator
    is held in registers; the printer asked for the register of an index that is no constant
    there (KeyError). A serial loop with no iteration now prints nothing, as the memory analysis
    already skipped it."""
    X = Buffer("X", (1, 3, 3, 14), "float32")
    W = Buffer("W", (16, 3, 3, 3), "float32")
    Y = Reduce("Y", (1, 16, 1, 12), Sum(), lambda i0, i1, i2, i3, r0, r1, r2:
               X[i0, r0, i2 + r1, i3 + r2] * W[i1, r0, r1, r2], (3, 3, 3))
    nest = LoopNest([Y])
    nest.auto_schedule("cuda")
    nest.split_with_tail(nest.loop("i2_inner"), 2)
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, (1, 3, 3, 14)).astype(np.float32)
    w = rng.integers(-3, 4, (16, 3, 3, 3)).astype(np.float32)
    windows = np.stack([x[0, :, :, j:j + 3] for j in range(12)])          # (column, c, r, k)
    want = np.einsum("jcrk,ocrk->oj", windows, w).reshape(1, 16, 1, 12)
    kernel = build(nest, [X, W, Y], target="cuda")
    assert "i2_inner_outer" not in kernel.source
    got = np.zeros((1, 16, 1, 12), np.float32)
    build(nest, [X, W, Y], target="ireval")(x, w, got)
    np.testing.assert_array_equal(got, want)
    if HAVE_EMU:
        emulated = np.zeros((1, 16, 1, 12), np.float32)
        run_on_host(kernel, x, w, emulated)
        np.testing.assert_array_equal(emulated, got)
