"""The random tester (package ``fuzz``) in CI: a fixed seed and a fixed count of schedules
(so the draws are the same on every machine), on IREval, LLVM and CUDA emission; every
failure it finds fails the test.

A long run is ``python -m fuzz --seconds 600 --seed 1 --out DIR`` (see the README).
"""
from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest

from fuzz.campaign import run_campaign
from fuzz.check import Case, Failure, check_program, check_schedule
from fuzz.minimize import reproducer_source
from fuzz.programs import Program, TensorSpec
from fuzz.schedules import OPS
from loopnest.nest import LoopNest

SEED = 1
COUNT = 100     # the first 100 schedules of seed 1 (the same on every machine); long campaigns run outside CI


def _ops(found) -> list:
    return [s["op"] for s in found.steps]


@pytest.mark.filterwarnings("ignore:the prefetch of")    # random schedules replace loops after a prefetch
def test_fixed_seed_campaign_finds_no_failure():
    summary = run_campaign(seed=SEED, count=COUNT, targets=("ireval", "llvm", "cuda"), quiet=True)
    assert summary.schedules == COUNT
    found = [f"case {f.case}: {f.failure} after {_ops(f)}" for f in summary.found]
    assert not found, (f"{len(found)} failures (rerun one with python -m fuzz --seed {SEED} --case K "
                       "--out DIR for a reproducer):\n" + "\n".join(found[:20]))


def test_draws_every_transform():
    """Every transform method of LoopNest is drawn (so a new transform gets fuzzed)."""
    transforms = {n for n, f in inspect.getmembers(LoopNest) if getattr(f, "is_transform", False)}
    assert transforms <= set(OPS), f"the fuzzer does not draw {sorted(transforms - set(OPS))}"


def test_campaign_is_deterministic_for_a_seed():
    a = run_campaign(seed=7, count=3, targets=("ireval",), quiet=True)
    b = run_campaign(seed=7, count=3, targets=("ireval",), quiet=True)
    assert [(f.case, f.steps) for f in a.found] == [(f.case, f.steps) for f in b.found]
    assert (a.programs, a.steps, a.refused) == (b.programs, b.steps, b.refused)


def test_reproducer_script_runs_standalone(tmp_path):
    """A reproducer rebuilds the program, applies the steps and checks them by itself: for a
    schedule without a defect it prints PASS."""
    program = Program({"N": 5}, [
        TensorSpec("A", "float32", [["N", 1]]),
        TensorSpec("T1", "float32", [["N", 0]], ["add", ["ld", "A", [["add", ["i", 0], ["c", 1, "int32"]]]],
                                                    ["c", 2.0, "float32"]]),
        TensorSpec("T2", "int32", [["N", 0]], ["sel", ["cmp", "lt", "op", ["i", 0], ["c", 2, "int32"]],
                                                 ["cast", "int32", ["ld", "T1", [["i", 0]]]], ["c", 7, "int32"]]),
    ], ["T2"], 3)
    case = Case(program)
    steps = [{"op": "split_with_mask", "args": [{"loop": "i0_1"}, 2], "kwargs": {}},
             {"op": "compute_inline", "args": [{"buffer": "T2"}], "kwargs": {}}]
    assert check_schedule(case, steps, ("ireval", "llvm")).refused == 1
    path = tmp_path / "repro.py"
    path.write_text(reproducer_source(case, steps, Failure("wrong", "llvm", "", "example"), ("ireval", "llvm"),
                                      "example"))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert p.stdout.strip().endswith("PASS"), p.stdout + p.stderr


def test_the_source_of_a_program_builds_the_same_program():
    """A reproducer's program is ``to_source``'s text: it must build what ``to_te`` builds
    (seed 185, case 51: ``select(c, 1, 1)`` of two bfloat16 constants, written as Python ints,
    gave an int32 select, and the reproducer raised TypeError before reaching the defect)."""
    import functools
    import operator
    import random
    import re
    import ml_dtypes  # noqa: F401 -- bfloat16 constants
    import te
    from fuzz.programs import random_program, to_source, to_te
    rnd = random.Random(7)
    constant = 0
    for _ in range(300):
        program = random_program(rnd)
        constant += program.constant_sizes          # sizes written as constants, not Vars
        outputs, _, _ = to_te(program)
        scope = {name: getattr(te, name) for name in te.__all__}
        scope.update(functools=functools, operator=operator)        # as a reproducer imports them
        exec(to_source(program), scope)            # noqa: S102 -- the tester's own text
        rebuilt = [scope[name] for name in program.outputs]
        assert [str(t.dtype) for t in rebuilt] == [str(t.dtype) for t in outputs], to_source(program)
        # a constant written as a Python int in an index is an int32: the same element
        same = lambda nest: re.sub(r"int64\((-?\d+)\)", r"\1", str(nest))  # noqa: E731
        assert same(LoopNest(rebuilt)) == same(LoopNest(outputs)), to_source(program)
    assert constant > 20, constant


def test_a_block_loop_without_threads_in_its_own_nest_is_left_to_later_binding():
    """Seed 29, case 57: a block-bound loop under a serial loop in a nest with no thread loop
    (another nest has one) is accepted by the schedule API, which checks the grid once that
    nest binds threads; only CUDA refuses it at build time, which the tester skips."""
    summary = run_campaign(seed=29, cases=[57], targets=("ireval", "cuda"), quiet=True)
    assert summary.schedules >= 1 and not summary.found, [f.failure for f in summary.found]


def test_a_block_loop_without_threads_inside_it_is_left_to_later_binding():
    """Seed 118, case 38: as above, where the same nest binds a thread loop, but not inside
    the block loop (a tail's compute beside it): binding that thread checked the grids around
    the thread loop only, so the CUDA refusal of the block loop is skipped too."""
    summary = run_campaign(seed=118, cases=[38], targets=("ireval", "cuda"), quiet=True)
    assert summary.schedules >= 1 and not summary.found, [f.failure for f in summary.found]


def test_auto_schedule_is_drawn_as_a_first_step_for_a_random_cpu():
    import random

    from fuzz.schedules import DrawState, apply_step, draw_step, step_source
    from te import Buffer, Compute
    A = Buffer("A", (8, 8), "float32")
    B = Compute("B", (8, 8), lambda i, j: A[i, j] * 2.0)
    steps = [draw_step(LoopNest([B]), random.Random(k), False, DrawState()) for k in range(60)]
    autos = [s for s in steps if s["op"] == "auto_schedule"]
    assert autos, "auto_schedule is never drawn first"
    nest = LoopNest([B])
    apply_step(nest, autos[0])
    assert nest.history and "Target(vector_bits=" in step_source(autos[0])


def test_an_inline_that_would_create_a_huge_expression_is_not_drawn():
    """Seed 48, case 96: a 40-node stage inlined into the 260 terms of a deep sum took LLVM's
    optimiser minutes; the tester draws no inline beyond ``INLINE_MAX_NODES``."""
    import functools
    import operator
    import random

    from fuzz.schedules import INLINE_MAX_NODES, DrawState, _inlined_nodes, draw_step
    from te import Buffer, Compute
    A = Buffer("A", (8,), "float32")
    small = Compute("small", (8,), lambda i: A[i] + 1.0)
    big = Compute("big", (8,), lambda i: (A[i] * 2.0 + A[7 - i]) * (A[i] - 3.0))
    deep = Compute("deep", (8,), lambda i: functools.reduce(operator.add, [big[(i + k) % 8] + small[i]
                                                                           for k in range(400)]))
    nest = LoopNest([deep])
    assert _inlined_nodes(nest, "big") > INLINE_MAX_NODES >= _inlined_nodes(nest, "small")
    inlined = {s["args"][0]["buffer"] for s in (draw_step(nest, random.Random(k), False, DrawState())
                                                for k in range(300)) if s["op"] == "compute_inline"}
    assert inlined == {"small"}


def test_a_low_precision_sum_of_fractions_that_could_round_is_not_drawn():
    """A float16 sum of halves is exact only below 2 ** 10, not the integers' 2 ** 11 (seed 40,
    case 448: the partial sums 1058.5 and 1250.5 rounded)."""
    from fuzz.reference import Inexact, evaluate
    import numpy as np
    p = Program({}, [TensorSpec("A", "int32", [[3, 0]]),
                     TensorSpec("S", "float16", [[1, 0]],
                                ["add", ["mul", ["cast", "float16", ["ld", "A", [["i", 1]]]], ["c", 400.0, "float16"]],
                                 ["c", 0.5, "float16"]], reducer="Sum", rdims=[[3, 0]])], ["S"], 0)
    data = {"A": np.array([1, 1, 1], np.int32)}
    assert evaluate(p, data, strict=False)["S"].tolist() == [1201.5]
    with pytest.raises(Inexact, match="partial sum"):
        evaluate(p, data, strict=True)


def test_a_size_of_zero_is_not_drawn_where_an_index_without_data_leaves_its_input():
    """Seed 152, case 110: with N bound to 0, T1 read A[clamp(I[i]), i + 1] from an A of N
    columns. The reference took the read for a data-dependent one (its first index loads I)
    and expected IndexError or values; the compiler, rightly, refused the call (ValueError:
    A's column i + 1 is outside its shape at N = 0, whatever the data). A size of 0 is now
    drawn only where every index that reads no data stays in range."""
    import random
    from fuzz.programs import _zero_size
    from fuzz.reference import evaluate, input_data
    read = ["ld", "A", [["ld", "I", [["i", 0]]], ["add", ["i", 0], ["c", 1, "int32"]]]]
    p = Program({"N": 6}, [TensorSpec("A", "float32", [[2, 0], ["N", 0]]), TensorSpec("I", "int32", [[5, 0]], values=[0, 1]),
                           TensorSpec("T1", "float32", [[5, 0]], read),
                           TensorSpec("T2", "float32", [["N", 0]], ["ld", "T1", [["c", 0, "int32"]]])], ["T2"], 0)
    at_zero = Program({"N": 0}, p.tensors, p.outputs, 0)
    with pytest.raises(AssertionError, match="reads A out of range in dimension 1, whose index reads no data"):
        evaluate(at_zero, input_data(at_zero), strict=False)
    assert all(_zero_size(p, random.Random(seed)) is p for seed in range(5))


def test_the_reference_wraps_integer_arithmetic_as_the_language_does():
    """Seed 69, case 153: int32 ``65024 * 65024`` wraps to -66846720 (docs/semantics.md), as
    IREval computed; the reference kept the float64 product, so ``minimum(1, ...)`` gave 1."""
    from fuzz.reference import evaluate
    import numpy as np
    p = Program({}, [TensorSpec("A", "int32", [[3, 0]]),
                     TensorSpec("P", "int32", [[3, 0]], ["mul", ["ld", "A", [["i", 0]]], ["ld", "A", [["i", 0]]]]),
                     TensorSpec("S", "int32", [[1, 0]], ["ld", "A", [["i", 1]]], reducer="Sum", rdims=[[3, 0]])],
                ["P", "S"], 0)
    a = np.array([65024, -3, 2 ** 31 - 1], np.int32)
    out = evaluate(p, {"A": a})
    assert out["P"].tolist() == (a.astype(np.int64) ** 2).astype(np.int32).tolist() == [-66846720, 9, 1]
    assert out["S"].tolist() == [float(np.int64(a.astype(np.int64).sum()).astype(np.int32))]


def test_the_case_time_limit_counts_cpu_time_and_catches_a_hang_by_wall_time():
    import time
    from fuzz.campaign import TimeLimit, time_limit
    with pytest.raises(TimeLimit, match="of CPU time"):
        with time_limit(0.05):
            while True:
                sum(range(1000))
    with pytest.raises(TimeLimit, match="of wall time"):
        with time_limit(0.05):
            time.sleep(5)


def test_a_minimising_trial_that_runs_past_the_case_limit_does_not_reproduce(monkeypatch):
    """Trials run under the per-case time limit: a trial that hangs (some step combination
    the original schedule never reached) counts as not reproducing instead of stalling the
    campaign."""
    import time
    from fuzz import minimize as M
    from fuzz.check import Case, Failure
    from fuzz.programs import Program, TensorSpec
    p = Program({}, [TensorSpec("A", "int32", [[4, 0]]),
                     TensorSpec("B", "int32", [[4, 0]], ["add", ["ld", "A", [["i", 0]]], ["c", 1, "int32"]])],
                ["B"], 0)
    monkeypatch.setattr(M, "check_schedule", lambda *a, **k: time.sleep(30))
    start = time.monotonic()
    failure = Failure("wrong", "llvm", "", "example")
    assert not M.reproduces(Case(p), [], failure, ("llvm",), seconds=0.05)
    assert M.minimize(Case(p), [{"op": "x"}], failure, ("llvm",), seconds=0.05) == [{"op": "x"}]
    assert time.monotonic() - start < 5


def test_matmul_programs_get_gpu_matmul_trees_with_random_tiles():
    """One program in about sixteen is a lone matmul whose GPU schedules mostly start with
    ``gpu_matmul`` and random tiles (tensor cores with 1 to 4 register or shared stages, or
    the SIMT tree): what exercises the cp.async waits and the register tiles."""
    import random
    from fuzz.check import Case, check_program, check_schedule
    from fuzz.programs import matmul_program
    applied = 0
    for seed in range(8):      # seeds 5 and 7: a tree applied in full
        rnd = random.Random(seed)
        case = Case(matmul_program(rnd))
        assert check_program(case) == []
        result = check_schedule(case, None, ("ireval", "cuda"), rnd, 2)
        assert result.failures == [], [str(f) for f in result.failures]
        applied += bool(result.steps) and result.steps[0]["op"] == "gpu_matmul" and result.refused == 0
    assert applied >= 1


def test_convolution_programs_reach_the_channel_tiles_of_the_automatic_schedule(monkeypatch):
    """One program in about thirty is a lone direct convolution: with output channels a
    multiple of the lanes and widths that are not, ``auto_schedule`` for the AVX2-like CPU of
    ``AUTO_TARGETS`` runs its tile along the output channels, and the tester builds and
    checks it like any other schedule."""
    import random
    import loopnest.auto.schedule as auto
    from fuzz.check import Case, check_auto_schedules, check_program, check_schedule
    from fuzz.programs import conv_program
    tiles = []
    real = auto.channel_contraction
    monkeypatch.setattr(auto, "channel_contraction", lambda nest, t, k: tiles.append(k) or real(nest, t, k))
    for seed in (3, 7):
        rnd = random.Random(seed)
        case = Case(conv_program(rnd))
        assert check_program(case) == [] and check_auto_schedules(case) == []
        result = check_schedule(case, None, ("ireval", "llvm"), rnd, 3)
        assert result.failures == [], [str(f) for f in result.failures]
    assert [k["lanes"] for k in tiles] == [8, 8]


def test_a_campaign_names_the_case_it_runs_for_a_crash_to_leave_behind(tmp_path, monkeypatch):
    """Kernels run in the tester's process: a crash in generated code ends the campaign
    before any reproducer. ``IN_PROGRESS`` in ``--out`` holds the command that reruns the
    case running; a campaign that ends removes it."""
    import fuzz.campaign as campaign

    class Crash(BaseException):
        pass

    def crash(*args, **kwargs):
        raise Crash
    run_campaign(seed=3, count=1, targets=("ireval",), out=tmp_path, quiet=True)
    assert not (tmp_path / campaign.IN_PROGRESS).exists()
    monkeypatch.setattr(campaign, "check_schedule", crash)
    with pytest.raises(Crash):
        run_campaign(seed=3, cases=[7], targets=("ireval", "llvm"), out=tmp_path, quiet=True)
    assert (tmp_path / campaign.IN_PROGRESS).read_text() == "python -m fuzz --seed 3 --case 7 --targets ireval,llvm\n"


def test_an_llvm_diagnostic_during_a_build_is_a_failure(monkeypatch):
    """LLVM prints its diagnostics on file descriptor 2 ("warning: <unknown>:0:0: loop not
    vectorized"), where a build that asked it to vectorize a loop of several blocks left
    them (a loop vectorized with an if_then_else whose condition reads data). The tester
    captures them: with the request made again for every vectorized loop, it reports one."""
    from llvmlite import ir

    from codegen.llvm import emit, jit
    from codegen.llvm.decls import loop_md
    from codegen.llvm.types import I1
    program = Program({"N": 300}, [
        TensorSpec("A", "float32", [["N", 0]]),
        TensorSpec("B", "float32", [["N", 0]],
                   ["ite", ["cmp", "gt", "op", ["ld", "A", [["i", 0]]], ["c", 0.0, "float32"]],
                    ["ld", "A", [["fmod", ["mul", ["i", 0], ["c", 7, "int32"]], ["n", "N"]]]], ["c", 0.0, "float32"]])],
        ["B"], 0)
    case = Case(program)
    steps = [{"op": "split_with_tail", "args": [{"loop": "i0"}, 64]},
             {"op": "vectorize", "args": [{"loop": "i0_inner"}]}]
    assert not check_schedule(case, steps, targets=("llvm",)).failures

    def always_asks(self, st, s, md):
        if s.kind == "vectorized":
            md = loop_md(self.module, ("llvm.loop.vectorize.enable", ir.Constant(I1, 1)))
        return original(self, st, s, md)
    original = emit._Emitter.serial_loop
    monkeypatch.setattr(emit._Emitter, "serial_loop", always_asks)
    jit.clear_cache()       # the kernel built above is remembered by its nest, not by its IR
    failures = check_schedule(Case(program), steps, targets=("llvm",)).failures
    assert [f.signature for f in failures] == ["build:llvm:LLVMDiagnostic"], failures
    assert "loop not vectorized" in failures[0].message


def test_conditions_whose_sides_wrap_are_drawn_and_a_versioning_that_ignores_wrapping_is_caught(monkeypatch):
    """Conditions compare an index scaled by a large int32 constant (``i * 2**28`` wraps at
    i = 8), as ``select`` and as ``if_then_else``; a vectorized loop versioned on such a
    guard must not take the fast path because the guard holds at the first and last lane.
    With the no-wrap tests of the versioning removed (its defect before they existed), the
    tester reports wrong values."""
    import random

    from codegen.llvm import jit
    from fuzz.programs import WRAPPING_MULTIPLIERS, random_program
    from loopnest import vectorize_lowering
    drawn = [random_program(random.Random(seed)).to_json() for seed in range(300)]
    wrapping = [t for t in drawn if any(f"[\"c\", {m}, \"int32\"]" in t for m in WRAPPING_MULTIPLIERS)]
    assert len(wrapping) > 10 and any('"ite"' in t for t in wrapping)

    program = Program({}, [
        TensorSpec("A", "float32", [[64, 0]]),
        TensorSpec("B", "float32", [[64, 0]],
                   ["ite", ["cmp", "ge", "op", ["mul", ["i", 0], ["c", 1 << 28, "int32"]], ["c", -(1 << 30), "int32"]],
                    ["ld", "A", [["i", 0]]], ["c", 2.0, "float32"]])],
        ["B"], 0)
    steps = [{"op": "split_with_tail", "args": [{"loop": "i0"}, 16]},
             {"op": "vectorize", "args": [{"loop": "i0_inner"}]}]
    case = Case(program)
    assert not check_program(case)      # the unscheduled run on IREval: the values to match
    assert not check_schedule(case, steps, targets=("ireval", "llvm")).failures
    monkeypatch.setattr(vectorize_lowering, "_no_wrap_tests", lambda *args: [])
    jit.clear_cache()       # the kernel built above is remembered by its nest, not by its IR
    failures = check_schedule(case, steps, targets=("ireval", "llvm")).failures
    assert [(f.kind, f.where) for f in failures] == [("wrong", "llvm")], failures


def test_a_vector_wider_than_a_register_of_lanes_not_a_power_of_two_is_a_failure(monkeypatch):
    """LLVM takes a <48 x float> apart element by element (30 times slower); the vectorize
    lowering computes 48 lanes as 32 + 16. With that lowering made to keep them whole, the
    tester reports the wide vector."""
    from codegen.llvm import jit
    from loopnest import vectorize_lowering
    from loopnest.target import host_target
    lanes = 3 * host_target().lanes("float32")           # three registers: 48 floats on AVX-512
    program = Program({}, [TensorSpec("A", "float32", [[2 * lanes, 0]]),
                           TensorSpec("B", "float32", [[2 * lanes, 0]], ["add", ["ld", "A", [["i", 0]]],
                                                                   ["c", 1.0, "float32"]])], ["B"], 0)
    steps = [{"op": "split_with_tail", "args": [{"loop": "i0"}, lanes]},
             {"op": "vectorize", "args": [{"loop": "i0_inner"}]}]
    case = Case(program)
    assert not check_program(case)
    assert not check_schedule(case, steps, targets=("ireval", "llvm")).failures
    monkeypatch.setattr(vectorize_lowering, "lane_pieces", lambda n, register_lanes=16: [(0, n)])
    jit.clear_cache()
    failures = check_schedule(case, steps, targets=("ireval", "llvm")).failures
    assert [f.signature for f in failures] == ["build:llvm:WideVector"], failures
    assert f"<{lanes} x float>" in failures[0].message


def test_the_tester_reports_auto_schedule_refusing_an_unscheduled_nest(monkeypatch):
    """The automatic schedules take every unscheduled nest of tensors: a refusal is a failure
    (``auto_schedule("cuda")`` refused a float32 ``A @ B.T``: the SIMT matmul tree reads B as
    K x N). Matmul programs draw B as N x K in one draw of three."""
    import random

    from fuzz.programs import matmul_program
    from loopnest import ScheduleError

    def refuse(self, target=None):
        raise ScheduleError("no schedule")
    monkeypatch.setattr(LoopNest, "auto_schedule", refuse)
    case = Case(matmul_program(random.Random(0)))
    result = check_schedule(case, [{"op": "auto_schedule", "args": ["cuda"], "kwargs": {}}], targets=("ireval",))
    assert [(f.kind, f.where) for f in result.failures] == [("refusal", "auto_schedule")]
    assert "auto_schedule refused an unscheduled nest: no schedule" in result.failures[0].message
    bodies = [str(matmul_program(random.Random(s)).tensor("C").body) for s in range(12)]
    assert any("['ld', 'B', [['i', 1], ['i', 2]]]" in b for b in bodies)          # B read as B[j, k]
    assert any("['ld', 'B', [['i', 2], ['i', 1]]]" in b for b in bodies)          # and as B[k, j]


def test_every_program_is_auto_scheduled_for_three_cpus_and_a_crash_is_reported(monkeypatch, tmp_path):
    """``check_auto_schedules`` runs ``auto_schedule`` on the unscheduled nest for each CPU of
    ``AUTO_TARGETS`` (a KeyError in the column template escaped the schedules that draw
    auto_schedule once in six): an exception there is a crash, a refusal a failure too, each
    with the one step, so that the campaign writes a reproducer that applies it."""
    import loopnest.auto.schedule as auto
    from fuzz.check import AUTO_TARGETS, check_auto_schedules
    from fuzz.programs import Program, TensorSpec
    p = Program({}, [TensorSpec("A", "float32", [[40, 0]]),
                     TensorSpec("B", "float32", [[40, 0]], ["add", ["ld", "A", [["i", 0]]], ["c", 1.0, "float32"]])],
                ["B"], 0)
    assert check_auto_schedules(Case(p)) == []
    calls = []

    def broken(self):
        calls.append(self.target.cores)
        raise KeyError("planner")
    monkeypatch.setattr(auto._Planner, "run", broken)
    found = check_auto_schedules(Case(p))
    assert calls == [t["cores"] for t in AUTO_TARGETS]
    assert [(f.kind, f.where, f.error) for _, f in found] == [("crash", "auto_schedule", "KeyError")] * 3
    assert [steps for steps, _ in found] == [[{"op": "auto_schedule", "args": [{"target": t}], "kwargs": {}}]
                                             for t in AUTO_TARGETS]
    assert check_program(Case(p)) == []     # the unscheduled program itself is fine

    def refuses(self):
        raise auto.ScheduleError("no template")
    monkeypatch.setattr(auto._Planner, "run", refuses)
    assert [(f.kind, f.where) for _, f in check_auto_schedules(Case(p))] == [("refusal", "auto_schedule")] * 3
    monkeypatch.setattr(auto._Planner, "run", broken)
    summary = run_campaign(seed=3, count=1, targets=("ireval",), quiet=True, out=tmp_path)
    assert summary.by_kind["crash"] >= 3
    scripts = list(tmp_path.glob("*.py"))
    assert scripts and all("auto_schedule" in f.read_text() for f in scripts)


def test_a_whole_array_reduction_is_drawn_as_two_kernels_and_replays():
    """``grid_reduce`` (the two kernels ``auto_schedule("cuda")`` takes only from 2^20 terms)
    is drawn as a first GPU step on reductions of the random programs' sizes; the check runs
    it on IREval and the emulated CUDA C, replays its history, and a refused draw leaves the
    nest as it was."""
    from fuzz.programs import matmul_program
    from fuzz.schedules import step_source
    import random
    case = Case(matmul_program(random.Random(1)))
    step = {"op": "grid_reduce", "args": [{"buffer": "C"}, 32, 64], "kwargs": {}}
    result = check_schedule(case, [step], ("ireval", "cuda"))
    assert result.failures == [] and result.refused == 0, [str(f) for f in result.failures]
    assert step_source(step) == ("__import__('loopnest.auto.gpu', fromlist=['_']).grid_reduce(nest, "
                                 'nest.buffer("C"), 32, 64)')
    refused = check_schedule(case, [dict(step, args=[{"buffer": "C"}, 0, 64])], ("ireval",))
    assert refused.failures == [] and refused.refused == 1


def test_few_row_matmul_programs_reach_the_streamed_products_of_the_automatic_schedule(monkeypatch):
    """In one matmul program of four, A has a few rows (``FEW_ROWS_DRAWS``): ``auto_schedule``
    streams B for the ``x @ B`` ones (``stream_tile``) on the CPUs of ``AUTO_TARGETS``, and the
    tester builds and checks them like any other schedule."""
    import random
    import loopnest.auto.schedule as auto
    from fuzz.check import check_auto_schedules
    from fuzz.programs import FEW_ROWS_DRAWS, matmul_program
    tiles = []
    real = auto.stream_tile
    monkeypatch.setattr(auto, "stream_tile", lambda *a: tiles.append(real(*a)) or tiles[-1])
    few = 0
    for seed in range(40):
        program = matmul_program(random.Random(seed))
        if program.tensor("A").dims[0][0] not in FEW_ROWS_DRAWS:
            continue
        few += 1
        case = Case(program)
        assert check_program(case) == [] and check_auto_schedules(case) == []
    assert few >= 3 and any(t is not None for t in tiles), tiles


def test_compute_at_is_drawn_at_a_consumer_loop_and_a_region_past_a_mask_taken_as_full_is_caught(monkeypatch):
    """``compute_at`` is drawn mostly at a loop around a consumer of the tensor (a random loop
    rarely is one: 38 of 450 schedules applied one), often at a loop the last step made; so
    the masked split's inner loop comes up, where a producer's region is empty past the mask.
    With the bounds taking a constant extent also for a region that can be empty (the first
    form of that change, which the tests caught and the tester did not), the tester reports
    the reads past the input."""
    import random

    from fuzz.schedules import DrawState, _consumer_loops, apply_step, draw_step
    from loopnest.analysis import bounds
    program = Program({"N": 6}, [
        TensorSpec("A", "float32", [["N", 0], [3, 0]]),
        TensorSpec("T1", "float32", [["N", 0], [3, 0]],
                   ["mul", ["ld", "A", [["i", 0], ["i", 1]]], ["c", 2.0, "float32"]]),
        TensorSpec("T2", "float32", [["N", 0], [3, 0]],
                   ["add", ["ld", "T1", [["i", 0], ["i", 1]]], ["ld", "A", [["i", 0], ["i", 1]]]])],
        ["T2"], 0)
    case = Case(program)
    split = {"op": "split_with_mask", "args": [{"loop": "i0_1"}, 4], "kwargs": {}}
    nest = LoopNest(case.outputs)
    apply_step(nest, split)
    state = DrawState()
    state.update(nest, "split_with_mask")
    rnd = random.Random(0)
    drawn = [s["args"][1]["loop"] for s in (draw_step(nest, rnd, False, state) for _ in range(400))
             if s["op"] == "compute_at"]
    consumer = _consumer_loops(nest, "T1")
    assert consumer == ["i0_1_outer", "i0_1_inner", "i1_1"]
    assert len(drawn) > 20 and sum(d in consumer for d in drawn) >= 0.7 * len(drawn)
    assert drawn.count("i0_1_inner") >= 0.15 * len(drawn)

    steps = [split, {"op": "compute_at", "args": [{"buffer": "T1"}, {"loop": "i0_1_inner"}], "kwargs": {}}]
    assert check_program(case) == []
    assert check_schedule(case, steps, targets=("ireval", "llvm")).failures == []
    monkeypatch.setattr(bounds, "_never_empty", lambda r, proj: True)
    failures = check_schedule(case, steps, targets=("ireval", "llvm")).failures
    assert {f.where for f in failures} == {"ireval", "llvm"}, [str(f) for f in failures]


def test_math_functions_are_drawn_compared_within_a_few_units_and_an_inaccurate_one_is_caught(monkeypatch):
    """The last stage of some programs is a math function of its (exact) value, compared
    within ``FUNCTION_ULPS`` units in the last place; LLVM's tanh made 1 + 2**-20 too large
    (8 units) is reported, one unit too large is not."""
    import random

    from codegen.llvm import jit, mathfns
    from codegen.llvm.types import splat_const
    from fuzz.programs import FUNCTION_ULPS, FUNCTIONS, SECOND_ARGUMENTS, random_program, to_source
    drawn = [random_program(random.Random(seed)) for seed in range(300)]
    functions = [p for p in drawn if p.tensors[-1].body[0] == "fn"]
    assert len(functions) >= 10 and all(p.ulps == FUNCTION_ULPS for p in functions)
    assert all(p.ulps == 0 for p in drawn if p not in functions)
    assert {p.tensors[-1].body[1] for p in functions} <= set(FUNCTIONS)
    assert all(len(p.tensors[-1].body) == 3 + (p.tensors[-1].body[1] in SECOND_ARGUMENTS) for p in functions)

    program = Program({"N": 40}, [
        TensorSpec("A", "float32", [["N", 0]]),
        TensorSpec("B", "float32", [["N", 0]],
                   ["fn", "tanh", ["mul", ["ld", "A", [["i", 0]]], ["c", 0.5, "float32"]]])], ["B"], 0)
    assert "lambda i0: tanh((A[i0] * 0.5))" in to_source(program)
    case = Case(program)
    steps = [{"op": "split_with_tail", "args": [{"loop": "i0"}, 8]},
             {"op": "vectorize", "args": [{"loop": "i0_inner"}]}]
    assert check_program(case) == []
    assert check_schedule(case, steps, targets=("ireval", "llvm")).failures == []
    real = mathfns.tanh_f32
    for scale, caught in ((1 + 2.0 ** -23, False), (1 + 2.0 ** -20, True)):
        monkeypatch.setattr(mathfns, "tanh_f32", lambda b, x, call, s=scale, **kw: b.fmul(
            real(b, x, call, **kw), splat_const(x.type, s)))
        jit.clear_cache()
        failures = check_schedule(case, steps, targets=("llvm",)).failures
        assert [(f.kind, f.where) for f in failures] == ([("wrong", "llvm")] if caught else []), failures
