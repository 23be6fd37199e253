"""auto_schedule on reductions with fewer outputs than cores (a sum of a whole array): the
reduction is split into one part per core (``reduction_parts``: ``privatize`` of its partial
results over the outermost reduction loop), run in parallel and added after it; for constant
and symbolic sizes, float and integer reducers; the values equal numpy's on LLVM and IREval,
and the schedule replays."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codegen import build
from loopnest import LoopNest, Target
from te import Buffer, Max, Reduce, Sum, Var, cast

TWO = Target(cpu="avx512", vector_bits=512, vector_registers=32, cores=2)
FOUR = Target(cpu="avx2", vector_bits=256, vector_registers=16, cores=4)


def _total(rows, cols, dtype="float32", reducer=Sum, outputs=1):
    A = Buffer("A", (rows, cols), dtype)
    return A, Reduce("T", (outputs,), reducer(), lambda z, i, j: A[i, j] + cast(z, dtype), (rows, cols))


def _parallel_loops(nest) -> list:
    return [lp.name for lp in nest.get_all_loops() if lp.kind == "parallel"]


def _run(nest, args, inputs, shape, dtype, target, sizes=()):
    out = np.zeros(shape, dtype)
    build(nest, args, target=target)(*inputs, out, *sizes)
    return out


@pytest.mark.parametrize("rows, cols", [(300, 200), (2, 20000), (1, 40000), (37, 1001)])
@pytest.mark.parametrize("cpu", [TWO, FOUR], ids=["2 cores", "4 cores"])
def test_a_whole_array_sum_runs_in_one_part_per_core_and_equals_numpy(rows, cols, cpu):
    A, T = _total(rows, cols)
    a = np.random.default_rng(rows).standard_normal((rows, cols)).astype(np.float32)
    nest = LoopNest([T])
    report = str(nest.auto_schedule(cpu))
    assert f"the reduction split into {cpu.cores} parts run in parallel" in report, report
    assert "1 output(s) for" in report and _parallel_loops(nest)
    want = a.astype(np.float64).sum(keepdims=True).reshape(1)
    for target in ("llvm", "ireval"):
        np.testing.assert_allclose(_run(nest, [A, T], [a], (1,), np.float32, target), want, rtol=1e-4)
    replay = LoopNest([T])
    replay.replay(nest.history)
    assert str(replay.root) == str(nest.root)


def test_an_integer_max_of_two_outputs_is_split_too_and_exact():
    A, T = _total(64, 1000, "int32", Max, outputs=3)
    a = np.random.default_rng(3).integers(-10**6, 10**6, (64, 1000)).astype(np.int32)
    nest = LoopNest([T])
    report = str(nest.auto_schedule(FOUR))
    assert "split into 4 parts" in report, report
    want = a.max() + np.arange(3, dtype=np.int32)
    for target in ("llvm", "ireval"):
        np.testing.assert_array_equal(_run(nest, [A, T], [a], (3,), np.int32, target), want)


def test_enough_outputs_keep_the_outer_loop_parallel():
    A, T = _total(64, 1000, outputs=8)
    nest = LoopNest([T])
    report = str(nest.auto_schedule(FOUR))
    assert "outer loop parallel" in report and "parts" not in report, report


def test_one_core_or_little_work_leaves_the_reduction_serial():
    A, T = _total(300, 200)
    nest = LoopNest([T])
    report = str(nest.auto_schedule(Target(cpu="avx512", vector_bits=512, vector_registers=32, cores=1)))
    assert "parts" not in report and not _parallel_loops(nest), report
    A, T = _total(8, 8)
    nest = LoopNest([T])
    assert "parts" not in str(nest.auto_schedule(TWO))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.integers(1, 9), cols=st.integers(1, 300))
def test_symbolic_sizes_are_split_for_every_size(rows, cols):
    N, M = Var("N"), Var("M")
    A = Buffer("A", (N, M), "float32")
    T = Reduce("T", (1,), Sum(), lambda z, i, j: A[i, j], (N, M))
    nest = LoopNest([T])
    report = str(nest.auto_schedule(FOUR))
    assert "split into 4 parts" in report, report
    a = np.random.default_rng(rows * cols).standard_normal((rows, cols)).astype(np.float32)
    want = a.astype(np.float64).sum(keepdims=True).reshape(1)
    np.testing.assert_allclose(_run(nest, [A, T], [a], (1,), np.float32, "llvm"), want,
                               rtol=1e-4, atol=1e-5)
