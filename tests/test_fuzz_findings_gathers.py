"""The random tester's gathers (loads through an index input, with out-of-range data now and
then), sizes of 0, and the defects and slow paths it found with them: each finding is a
regression test, checked as the tester checks it."""
from __future__ import annotations

import functools
import operator
import os
import random
import subprocess
import sys
import time

import numpy as np
import pytest

from codegen import build
from fuzz.check import Case, Failure, check_program, check_schedule
from fuzz.minimize import reproducer_source
from fuzz.programs import Program, TensorSpec, random_program
from loopnest import LoopNest, ScheduleError
from loopnest.analysis import dependences
from loopnest.transforms import compute_at as compute_at_module
from loopnest.transforms.compute_at import compute_at_candidates
from te import Buffer, Compute, Reduce, Sum, Var, cast, const, floordiv, floormod, if_then_else, minimum


def _values(nest, args, data, shapes, sizes, target):
    outs = [np.zeros(shape, dtype) for shape, dtype in shapes]
    build(nest, args, target=target)(*data, *outs, *sizes)
    return outs


def _same_as_unscheduled(schedule, outputs, args, data, shapes, sizes=()):
    """``schedule`` applied to a fresh nest gives the unscheduled values on IREval and LLVM."""
    want = _values(LoopNest(outputs), args, data, shapes, sizes, "ireval")
    nest = LoopNest(outputs)
    schedule(nest)
    for target in ("ireval", "llvm"):
        for g, w in zip(_values(nest, args, data, shapes, sizes, target), want):
            np.testing.assert_array_equal(g, w, err_msg=target)
    return nest


# ---------------------------------------------------------------------------------------
# cache_accesses in int64 programs: a cache buffer's constant shape is int32, so a cache of
# the cache looped an int64 variable up to an int32 extent (TypeError, seed 11, case 289),
# and a buffer of int32 shape read in int64 loops got int32 bounds subtracted from int64
# indices (TypeError)
# ---------------------------------------------------------------------------------------
def test_cache_of_a_cache_in_an_int64_program_over_an_empty_split_loop():
    T2 = Compute("T2", (const(2, "int64"),), lambda i0: 0.0)
    T3 = Reduce("T3", (const(2, "int64"),), Sum(),
                lambda i0, r0, r1: if_then_else(r0 >= 1, cast(T2[r0 - 1], "int32"), 0),
                (const(3, "int64"), const(4, "int64")))
    T4 = Compute("T4", (const(2, "int64"),), lambda i0: T3[i0])

    def schedule(nest):
        nest.cache_accesses(nest.buffer("T2"), "cache1", nest.loop("i0_1"))
        nest.split_with_tail(nest.loop("i0_1"), 4)      # i0_1_outer runs 0 times
        nest.cache_accesses(nest.buffer("cache1"), "cache2", nest.loop("i0_1_inner"))

    _same_as_unscheduled(schedule, [T4], [T4], [], [((2,), np.int32)])


def test_cache_of_an_int32_shaped_buffer_in_int64_loops():
    N = Var("N", "int64")
    A = Buffer("A", (6, 3), "float32")
    T = Compute("T", (N, const(3, "int64")), lambda i, j: A[i, j] * 2.0)
    a = np.arange(18, dtype=np.float32).reshape(6, 3)

    def schedule(nest):
        nest.split_with_tail(nest.loop("i"), 2)
        nest.cache_accesses(nest.buffer("A"), "cache1", nest.loop("i_outer"))

    _same_as_unscheduled(schedule, [T], [A, T, N], [a], [((5, 3), np.float32)], [5])


# ---------------------------------------------------------------------------------------
# slow paths: a refused compute_at planned the transform at every loop reading the tensor
# to suggest the legal ones (seconds each where a deep sum reads it: 24 s for 7 loops), and
# bounds inference gave isl each of the sum's thousands of identical accesses
# ---------------------------------------------------------------------------------------
def _deep_pipeline(terms: int):
    N = Var("N")
    A = Buffer("A", (N + 4,), "float32")
    T1 = Compute("T1", (N + 4,), lambda i: A[i] * 2.0)
    T2 = Compute("T2", (N,), lambda i: functools.reduce(operator.add, [T1[i + (k % 3)] for k in range(terms)]))
    T3 = Compute("T3", (N,), lambda i: T2[i] + T2[N - 1 - i] + T2[floordiv(i, 2)])
    nest = LoopNest([T3])
    nest.compute_inline(nest.buffer("T2"))
    for name in ("i_2", "i_2_outer", "i_2_inner"):
        nest.split_with_tail(nest.loop(name), 2)
    return nest, T1


def test_refused_compute_at_over_a_deep_sum_is_quick_and_names_what_it_did_not_try():
    nest, T1 = _deep_pipeline(1000)
    before = str(nest)
    start = time.monotonic()
    with pytest.raises(ScheduleError) as e:
        nest.compute_at(nest.buffer("T1"), nest.loop("i"))
    elapsed = time.monotonic() - start
    assert str(nest) == before
    assert "nothing inside loop i reads T1; compute_at(T1, ...) would be legal at loop" in str(e.value)
    assert "not tried; compute_at_candidates lists them all" in str(e.value)
    assert elapsed < 12.0, f"a refused compute_at took {elapsed:.1f} s (24 s before the suggestions were bounded)"


def test_refused_compute_at_tries_at_most_suggested_loops(monkeypatch):
    nest, T1 = _deep_pipeline(3)
    assert len(compute_at_candidates(nest, T1)) == 7
    monkeypatch.setattr(compute_at_module, "SUGGESTED_LOOPS", 2)
    with pytest.raises(ScheduleError, match=r"would be legal at loops i_2_outer_outer, i_2_outer_inner among the "
                                            r"loops tried \(5 more loops that read T1 not tried"):
        nest.compute_at(nest.buffer("T1"), nest.loop("i"))


# ---------------------------------------------------------------------------------------
# fuse's dependence check coalesced every dependence relation of masked, split and cached
# loops, seconds each (seed 11, case 479: 7.5 s for one fuse); coalescing is now bounded
# ---------------------------------------------------------------------------------------
def _masked_cached_reductions():
    A = Buffer("A", (11,), "float32")
    B = Buffer("B", (10,), "int32")
    T1 = Reduce("T1", (7,), Sum(), lambda i0, r0, r1: cast(B[r1 + 2], "float32") - minimum(
        A[r1 + 2], A[floormod(r0, 11)] - A[r1 + 1]), (7, 7))
    T2 = Reduce("T2", (7,), Sum(), lambda i0, r0: cast(T1[floordiv(r0, 2)], "int32") * B[floordiv(r0, 2)], (8,))
    a = np.arange(11, dtype=np.float32) - 5
    b = np.arange(10, dtype=np.int32) % 4 - 1
    return [T2], [A, B, T2], [a, b], [((7,), np.int32)]


def _fuse_schedule(nest):
    nest.split_with_mask(nest.loop("r1"), 3)
    nest.cache_accesses(nest.buffer("A"), "cache1", nest.loop("r1_inner"))
    before = str(nest)
    try:    # refused: T2's reduction reads T1 rows that later iterations of T1's loop write
        nest.fuse([nest.loop("i0_1"), nest.loop("i0")])
    except ScheduleError:
        assert str(nest) == before


def test_fuse_of_masked_cached_reductions():
    outputs, args, data, shapes = _masked_cached_reductions()
    start = time.monotonic()
    _same_as_unscheduled(_fuse_schedule, outputs, args, data, shapes)
    assert time.monotonic() - start < 30.0


def test_uncoalesced_dependences_decide_the_same(monkeypatch):
    """Past the coalescing budget a dependence keeps its relation as computed: the same set,
    so fuse decides the same and the values are the same."""
    outputs, args, data, shapes = _masked_cached_reductions()
    monkeypatch.setattr(dependences, "COALESCE_OPERATIONS", 1)
    nest = _same_as_unscheduled(_fuse_schedule, outputs, args, data, shapes)
    monkeypatch.undo()
    again = LoopNest(outputs)
    _fuse_schedule(again)
    assert str(again) == str(nest)


# ---------------------------------------------------------------------------------------
# the tester's gathers: out-of-range index data must raise IndexError on every backend
# ---------------------------------------------------------------------------------------
def _gather_program(bad_index=None) -> Program:
    """B[i] = A[I[i]] + 1 through an index input I of 4 elements in [0, 5], C reads B."""
    return Program({"N": 4}, [
        TensorSpec("A", "float32", [[6, 0]]),
        TensorSpec("I", "int32", [["N", 0]], values=[0, 5]),
        TensorSpec("T1", "float32", [["N", 0]], ["add", ["ld", "A", [["ld", "I", [["i", 0]]]]], ["c", 1.0, "float32"]]),
        TensorSpec("T2", "float32", [["N", 0]], ["mul", ["ld", "T1", [["i", 0]]], ["c", 2.0, "float32"]]),
    ], ["T2"], 5, bad_index=bad_index)


STEPS = [{"op": "split_with_tail", "args": [{"loop": "i0_1"}, 3], "kwargs": {}},
         {"op": "compute_at", "args": [{"buffer": "T1"}, {"loop": "i0_1_outer"}], "kwargs": {}},
         {"op": "compute_inline", "args": [{"buffer": "T1"}], "kwargs": {}}]


@pytest.mark.parametrize("bad", [6, -1, 2 ** 31 - 1])
def test_out_of_range_gather_raises_index_error_on_every_target(bad):
    case = Case(_gather_program(["I", 2, bad]))
    assert case.expected == "error"
    assert check_program(case) == []
    result = check_schedule(case, STEPS, ("ireval", "llvm"))
    assert result.failures == [] and result.applied >= 2
    for target in ("ireval", "llvm"):
        with pytest.raises(IndexError, match="A"):
            case.run(LoopNest(case.outputs), target)


def test_in_range_gather_gives_the_reference_values():
    case = Case(_gather_program())
    assert case.expected == "values"
    assert check_program(case) == []
    assert check_schedule(case, STEPS, ("ireval", "llvm")).failures == []


def test_the_oracle_reports_a_target_that_does_not_raise(monkeypatch):
    """LLVM built without its index checks reads past A where IREval raises: the targets
    disagree on one nest, a ``noerror`` failure of the target that ran."""
    case = Case(_gather_program(["I", 2, 6]))
    run = Case.run
    monkeypatch.setattr(Case, "run", lambda self, nest, target, **o: run(
        self, nest, target, **({"bounds_check": False} if target == "llvm" else {}), **o))
    assert "noerror:unscheduled" in [f.signature for f in check_program(case)]
    assert "noerror:llvm" in [f.signature for f in check_schedule(case, STEPS, ("ireval", "llvm")).failures]


def test_a_read_whose_value_does_not_matter_may_be_dropped():
    """``max(2, x % 2)`` is 2 whatever ``x`` loads (seed 23, case 205), and inlining a tensor
    that does not depend on its index drops the read at that index (seed 23, case 422): no
    IndexError, and the reference values (found as missing IndexErrors before the oracle
    compared targets with each other)."""
    p = Program({"N": 4}, [
        TensorSpec("A", "float32", [["N", 0]]),
        TensorSpec("I", "int32", [["N", 1]], values=[0, 3]),
        TensorSpec("T1", "int32", [["N", 0]], ["max", ["c", 2, "int32"], ["mod", ["cast", "int32", ["ld", "A", [
            ["ld", "I", [["i", 0]]]]]], ["c", 2, "int32"]]]),
        TensorSpec("T2", "float32", [["N", 0]], ["cast", "float32", ["ld", "T1", [["i", 0]]]]),
    ], ["T2"], 1, bad_index=["I", 0, 4])
    case = Case(p)
    assert case.expected == "error"
    assert check_program(case) == []
    assert check_schedule(case, STEPS[1:], ("ireval", "llvm")).failures == []

    p = Program({"M": 6}, [
        TensorSpec("I", "int32", [[7, 0]], values=[0, 5]),
        TensorSpec("T1", "int32", [["M", 0], ["M", 1]], ["c", 0, "int32"]),
        TensorSpec("T2", "float32", [[6, 0]], ["cast", "float32", ["ld", "T1", [["ld", "I", [["fdiv", ["i", 2], [
            "c", 2, "int32"]]]], ["i", 2]]]], "Min", [[7, 0], [7, 0]]),
    ], ["T2"], 1, bad_index=["I", 3, 6])
    case = Case(p)
    assert case.expected == "error"
    assert check_program(case) == []
    inline = [{"op": "compute_inline", "args": [{"buffer": "T1"}], "kwargs": {}}]
    assert check_schedule(case, inline, ("ireval", "llvm")).failures == []


def test_out_of_range_data_that_no_output_needs_may_raise():
    """Only T1[3] reads out of range and T2 reads T1[0..2]: a schedule that inlines T1 never
    reads it, the unscheduled program does; both are right."""
    p = _gather_program(["I", 3, 9])
    p.tensors[3] = TensorSpec("T2", "float32", [[3, 0]], ["mul", ["ld", "T1", [["i", 0]]], ["c", 2.0, "float32"]])
    case = Case(p)
    assert case.expected == "any"
    assert check_program(case) == []
    inline = [{"op": "compute_inline", "args": [{"buffer": "T1"}], "kwargs": {}}]
    assert check_schedule(case, inline, ("ireval", "llvm")).failures == []
    np.testing.assert_array_equal(case.run(_inlined(case), "llvm")[0], case.reference[0])


def _inlined(case):
    nest = LoopNest(case.outputs)
    nest.compute_inline(nest.buffer("T1"))
    return nest


def _drawn(predicate, limit=400):
    for k in range(limit):
        program = random_program(random.Random(f"gathers/{k}"))
        if predicate(program):
            return program
    raise AssertionError(f"no program of {limit} drawn satisfies the predicate")


def test_drawn_gather_program_with_out_of_range_data_expects_index_error():
    program = _drawn(lambda p: p.bad_index is not None and Case(p).expected == "error")
    case = Case(program)
    assert check_program(case) == []
    with pytest.raises(IndexError):
        case.run(LoopNest(case.outputs), "llvm")
    result = check_schedule(case, None, ("ireval", "llvm"), random.Random(1), 6)
    assert result.failures == [], [str(f) for f in result.failures]


def test_generator_draws_gathers_bad_data_and_empty_extents():
    programs = [random_program(random.Random(f"draws/{k}")) for k in range(160)]
    gathers = [p for p in programs if any(t.name == "I" for t in p.tensors)]
    assert len(gathers) >= 15
    assert any('["ld", "I"' in str(t.body).replace("'", '"') for p in gathers for t in p.tensors if t.body)
    assert sum(p.bad_index is not None for p in programs) >= 3
    assert any(0 in [p.extent(d) for t in p.tensors for d in t.dims + t.rdims] for p in programs)
    assert any(t.rank == 0 and t.rdims for p in programs for t in p.tensors)     # reductions to a scalar


# ---------------------------------------------------------------------------------------
# sizes of 0: every backend runs the kernel as a no-op (a reduction over nothing gives its
# identity)
# ---------------------------------------------------------------------------------------
def test_zero_size_program_runs_as_a_no_op_on_every_target():
    p = Program({"N": 0}, [
        TensorSpec("A", "float32", [["N", 0], [3, 0]]),
        TensorSpec("T1", "float32", [["N", 0], [3, 0]], ["add", ["ld", "A", [["i", 0], ["i", 1]]], ["c", 1.0, "float32"]]),
        TensorSpec("T2", "float32", [[3, 0]], ["ld", "T1", [["i", 1], ["i", 0]]], "Sum", [["N", 0]]),
        TensorSpec("T3", "float32", [[3, 0]], ["ld", "T1", [["i", 1], ["i", 0]]], "Max", [["N", 0]]),
    ], ["T2", "T3"], 1)
    case = Case(p)
    assert check_program(case) == []
    assert case.baseline[0].tolist() == [0.0] * 3 and case.baseline[1].tolist() == [-np.inf] * 3
    steps = [{"op": "compute_at", "args": [{"buffer": "T1"}, {"loop": "i0_1"}], "kwargs": {}},
             {"op": "split_with_mask", "args": [{"loop": "r0"}, 2], "kwargs": {}}]
    assert check_schedule(case, steps, ("ireval", "llvm")).failures == []


def test_reproducer_of_an_index_error_program_checks_the_error(tmp_path):
    case = Case(_gather_program(["I", 0, 7]))
    path = tmp_path / "repro.py"
    path.write_text(reproducer_source(case, STEPS, Failure("noerror", "llvm", "", "example"), ("ireval", "llvm"),
                                      "example"))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert p.stdout.strip().endswith("PASS"), p.stdout + p.stderr
    assert "IndexError" in p.stdout


# ---------------------------------------------------------------------------------------
# compute_inline of a tensor read at a data-dependent index: T2[i] = T1[I[i]] with T1 over N
# elements and T1's body reading the larger A; inlined, the read of T1 past N became a read
# of A (checked against A's 8 elements only) and returned A[5] * 2, a value T1 never had
# ---------------------------------------------------------------------------------------
def _inline_gather():
    N = Var("N")
    A, I = Buffer("A", (8,), "float32"), Buffer("I", (N,), "int32")
    T1 = Compute("T1", (N,), lambda i: A[i] * 2.0)
    T2 = Compute("T2", (N,), lambda i: T1[I[i]] + 1.0)
    nest = LoopNest([T2])
    nest.compute_inline(nest.buffer("T1"))
    return nest, [A, I, T2, N]


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_inlined_tensor_read_past_its_extent_raises(target):
    nest, args = _inline_gather()
    assert "check_index(I[i_1], N, T1, 0)" in str(nest)
    kernel = build(nest, args, target=target)
    a = np.arange(8, dtype=np.float32)
    with pytest.raises(IndexError):
        kernel(a, np.array([5, 0, 1, 2], np.int32), np.zeros(4, np.float32), 4)
    out = np.zeros(4, np.float32)
    kernel(a, np.array([3, 0, 1, 2], np.int32), out, 4)
    assert out.tolist() == [7.0, 1.0, 3.0, 5.0]
    out = np.zeros(4, np.float32)
    build(nest, args, target=target, bounds_check=False)(a, np.array([3, 0, 1, 2], np.int32), out, 4)
    assert out.tolist() == [7.0, 1.0, 3.0, 5.0]


def test_inlined_tensor_read_keeps_the_check_of_the_buffer_it_reads():
    """T1's check is T1's extent; the read of A gets A's own check too (T1's loop, which the
    call-time bounds checks covered, is gone)."""
    from loopnest.index_checks import guard_data_dependent_indices
    nest, _ = _inline_gather()
    assert "A[check_index(check_index(I[i_1], N, T1, 0), 8, A, 0)]" in str(guard_data_dependent_indices(None, nest.root))
