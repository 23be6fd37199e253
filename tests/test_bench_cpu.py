"""The CPU benchmark suite (``python -m bench``): every hand schedule is legal and computes
the right values at awkward small sizes (tails everywhere), and a short run of the suite
writes its table, JSON and plot with the aims evaluated."""
import json

import pytest

pytest.importorskip("codegen.llvm")

from bench import __main__ as bench_main  # noqa: E402
from bench.harness import time_interleaved  # noqa: E402
from bench.kernels import WORKLOADS  # noqa: E402
from codegen import build  # noqa: E402
from loopnest import LoopNest  # noqa: E402

SMALL = {
    "elementwise": [1000, 4096 * 2 + 17],
    "gelu": [1000, 4096 + 5],
    "softmax": [(5, 96), (3, 100)],
    "layernorm": [(6, 64), (2, 72)],
    "row_sum": [(3, 128), (4, 40)],
    "transpose": [(64, 96), (40, 72)],
    "matmul": [16, 40, 64, 96],
    "linear": [16, 40, 72],
    "linear_batch": [(1, 64), (5, 32), (13, 48)],        # the hand version, then the general schedule
    "sum": [(3, 100), (40, 64), (1, 7)],
    "column_sum": [(5, 40), (9, 100), (3, 7), (6, 64)],      # 64: rows streamed, a chunk a core (else tiles)
    "conv1d": [(1000, 31), (77, 5), (40, 3)],
    "conv2d": [(1, 8, 12, 12, 8), (1, 3, 10, 9, 5)],
    "blur": [(16, 40), (13, 21), (3, 5)],
    "stencil": [(16, 40), (13, 21)],
    "pyramid": [(32, 96), (64, 32)],
}


def test_every_workload_has_small_sizes_here():
    assert set(SMALL) == set(WORKLOADS)


@pytest.mark.parametrize("name,size", [(n, s) for n, sizes in SMALL.items() for s in sizes])
def test_hand_schedule_is_correct(name, size):
    w = WORKLOADS[name]
    spec = w.make(size)
    nest = LoopNest(spec.outputs)
    w.hand_schedule(nest, spec)
    outs, _ = spec.run(build(nest, spec.args, target="llvm"))
    assert spec.error(outs) <= spec.tol, (name, size)


def test_interleaved_timing_counts_every_round():
    calls = {"a": 0, "b": 0}

    def a():
        calls["a"] += 1

    def b():
        calls["b"] += 1
    t = time_interleaved({"a": a, "b": b}, rounds=4)
    assert t["a"].repeats == t["b"].repeats == 4 and calls["a"] > 4 and calls["b"] > 4
    assert 0 < t["a"].best <= t["a"].median


def test_short_suite_run_writes_results(tmp_path, monkeypatch):
    from bench import bench_memory
    memory_run = bench_memory.run           # 100 builds: a few seconds; the memory test is in test_issue12_llvm
    monkeypatch.setattr(bench_memory, "run", lambda builds, warmup, **kw: memory_run(10, warmup=2, **kw))
    assert bench_main.main(["--only", "layernorm", "row_sum", "--rounds", "1", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "results.json").read_text())
    rows = {r["kernel"]: r for r in report["rows"]}
    assert set(rows) == {"layernorm", "row_sum"}
    for r in rows.values():
        assert r["hand"]["correct"] and r["default"]["correct"] and r["hand"]["time_s"] > 0
    text = (tmp_path / "results.txt").read_text()
    assert "aims (issue 4)" in text and "layernorm" in text
    aims = {a["aim"]: a for a in report["aims"]}
    assert any(k.startswith("layernorm speed") for k in aims) or report["rows"][0].get("torch_s") is None
    assert "compile time, elementwise (median, s)" in aims
    cc = report["extras"]["compile_and_call"]
    assert aims["compile time, elementwise (median, s)"]["value"] == cc["compile_median_s"]
    imp = report["extras"]["import"]
    assert aims["import time of te, loopnest, codegen (s, fresh interpreter)"]["value"] == imp["import_s"]
    assert "import te, loopnest, codegen in a fresh interpreter" in text
    assert report["extras"]["memory"]["builds"] == 10 and "resident memory: 10 distinct builds" in text


def test_a_slow_candidate_is_timed_on_its_own(monkeypatch):
    """A candidate whose first call exceeds ``SLOW_ALONE_S`` leaves the interleaved rounds:
    the others keep their rounds under a budget the slow one alone would use up."""
    w = WORKLOADS["row_sum"]
    monkeypatch.setattr(bench_main, "SLOW_ALONE_S", 0.0)      # every candidate counts as slow
    seen = []
    real = bench_main.time_interleaved

    def spy(fns, **kw):
        seen.append(sorted(fns))
        return real(fns, **kw)
    monkeypatch.setattr(bench_main, "time_interleaved", spy)
    row = bench_main.bench_one(w, w.small[0], "llvm", rounds=2, budget=1.0)
    assert ["default"] in seen and ["hand"] in seen and not any("hand" in s and len(s) > 1 for s in seen)
    assert all(row[label]["time_s"] > 0 and row[label]["samples"] >= 1 for label in ("default", "auto", "hand"))
    if "parallel_speedup" in row["hand"]:       # more than one thread: the one-thread run is timed alone too
        assert ["hand_1thread"] in seen and row["hand"]["one_thread_s"] > 0


def test_every_other_round_of_interleaved_timing_runs_in_the_opposite_order():
    """A candidate that disturbs the caches for longer than the warm-up (the unscheduled
    transpose) must not always precede the same one: odd rounds run in reverse."""
    calls = []

    def candidate(name):
        return lambda: calls.append(name)
    time_interleaved({n: candidate(n) for n in "abc"}, rounds=3)
    runs = [n for k, n in enumerate(calls) if k == 0 or calls[k - 1] != n]     # consecutive calls as one
    assert runs[-7:] == list("abc" "ba" "bc")     # a b c | c b a | a b c, repeats merged


@pytest.mark.parametrize("size", [40, 136])
def test_the_hand_linear_schedule_transposes_b_once(size):
    """x @ W.T: the rows the register tile leaves over read the column panel's transposed
    copy of B (read in place, all of B was transposed a second time); the copy reads B in
    runs of a vector's length (``vectorize_copy``)."""
    w = WORKLOADS["linear"]
    spec = w.make(size)
    nest = LoopNest(spec.outputs)
    w.hand_schedule(nest, spec)
    reads_of_b = [line.strip() for line in str(nest).splitlines() if "B[" in line]     # the copy and its tail
    assert reads_of_b and all(line.startswith("B_pack[") for line in reads_of_b), reads_of_b
    outs, _ = spec.run(build(nest, spec.args, target="llvm"))
    assert spec.error(outs) <= spec.tol


def test_a_transposed_pack_reads_its_source_in_runs_of_a_vector():
    """``vectorize_copy`` of a transposed copy: the copy's row loop is split by the lanes and
    that part moved innermost (contiguous loads, left scalar to LLVM), not a vector of
    gathers; a plain copy is still vectorized along its rows."""
    from loopnest.auto.templates import vectorize_copy
    from te import Buffer, Reduce, Sum
    A, W = Buffer("A", (8, 64), "float32"), Buffer("W", (32, 64), "float32")
    C = Reduce("C", (8, 32), Sum(), lambda i, j, k: A[i, k] * W[j, k], (64,))
    nest = LoopNest([C])
    nest.cache_accesses("W", "W_pack", nest.get_loops_for("C")[0], order=(1, 0))
    vectorize_copy(nest, "W_pack", 16)
    copy = nest.get_loops_for(nest.buffer("W_pack"))[1:]          # inside C's loop i
    assert [lp.name for lp in copy] == ["W_pack_i0_outer", "W_pack_i1", "W_pack_i0_inner"]
    assert [lp.kind for lp in copy] == ["serial"] * 3 and copy[-1].extent == 16
    import numpy as np
    a = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32)
    c = np.zeros((8, 32), np.float32)
    build(nest, [A, W, C], target="llvm")(a, w, c)
    np.testing.assert_allclose(c, a @ w.T, rtol=1e-4, atol=1e-4)
