"""The autotuning benchmark (bench/tune_bench.py) at its small size with a few trials: the
JSON and the plot are written, the numbers in the report agree with each other, and the
best schedule it reports computes the right values; the time budget of ``autotune``."""
import json
import math
import time
from types import SimpleNamespace

import numpy as np
import pytest

from tune.api import CONFIRM_MARGIN

pytest.importorskip("codegen.llvm")

from bench import tune_bench  # noqa: E402
from bench.kernels import make_conv2d, make_matmul  # noqa: E402
from codegen import build  # noqa: E402
from loopnest import LoopNest  # noqa: E402

FAST = ["--size", "small", "--trials", "6", "--minutes", "2", "--repeats", "2", "--rounds", "1", "--quiet"]


def _run(tmp_path, kernel: str) -> dict:
    assert tune_bench.main(["--kernel", kernel, "--out", str(tmp_path)] + FAST) == 0
    js, png = tmp_path / f"tune_{kernel}_small.json", tmp_path / f"tune_{kernel}_small.png"
    assert js.exists()
    report = json.loads(js.read_text())
    pytest.importorskip("matplotlib")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert report["plot"] == png.name
    return report


def _check_report(report: dict, flops: float, tol: float) -> None:
    # seed points that give the same schedule are measured once and counted as reused
    assert report["trials"] == 6 and report["stopped_by"] == "trials"
    assert report["measured"] + report["reused"] == 6 and report["measured"] >= 4
    assert report["budget"] == {"trials": 6, "minutes": 2.0, "search_s": 105.0}
    assert report["flops"] == flops
    curve = report["curve"]
    assert [r["trial"] for r in curve] == list(range(1, 7))
    walls = [r["wall_s"] for r in curve]
    assert walls == sorted(walls) and 0 < walls[-1] <= report["elapsed_s"]
    # best so far is the running minimum of the successful trials
    running = math.inf
    for r in curve:
        if r["cost_s"] is not None:
            running = min(running, r["cost_s"])
        assert r["best_s"] == (running if math.isfinite(running) else None)
    best = report["best"]
    # the kept candidate: the fastest recorded one, or one within CONFIRM_MARGIN of it that
    # was faster when the finalists were timed again (tune.api.confirm_best)
    assert running <= best["tuner_median_s"] <= running * CONFIRM_MARGIN
    assert best["tuner_gflops"] == pytest.approx(flops / best["tuner_median_s"] / 1e9)
    assert curve[best["found_at_trial"] - 1]["cost_s"] == best["tuner_median_s"]
    assert best["correct"] and best["max_rel_err"] <= tol
    assert best["gflops"] == pytest.approx(flops / best["retimed_s"] / 1e9)
    assert best["retimed_s"] == min(best["retimed_by_config_s"].values())
    peer = report["peer"]
    assert peer["gflops"] == pytest.approx(flops / peer["retimed_s"] / 1e9)
    assert peer["retimed_s"] == min(peer["retimed_by_config_s"].values()) > 0
    assert report["ratio"] == pytest.approx(best["gflops"] / peer["gflops"])
    assert report["meets_goal"] == (report["ratio"] >= report["goal_ratio"])
    assert len(report["loadavg_start"]) == 3 and len(report["loadavg_end"]) == 3
    assert report["command"].startswith("python -m bench.tune_bench --kernel")


def _replay(spec_fn, shape, trace):
    """Build the reported best schedule on a fresh nest of the benchmark's kernel."""
    spec = spec_fn(shape)
    nest = LoopNest(spec.outputs).replay(json.dumps(trace))
    return spec, build(nest, spec.args, target="llvm")


def test_small_matmul(tmp_path):
    report = _run(tmp_path, "matmul")
    _check_report(report, 2 * 256 ** 3, 1e-3)
    assert report["kernel"] == "matmul" and report["shape"] == "n=256" and report["goal_ratio"] == 0.8
    assert report["peer"]["name"].startswith("numpy") and "ceilings.blas_gflops" in report["peer"]["start_by_config_s"]
    # the reported best schedule computes A @ B on inputs it was not tuned with
    _, kernel = _replay(make_matmul, 256, report["best"]["trace"])
    rng = np.random.default_rng(7)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 256)).astype(np.float32)
    c = np.full((256, 256), np.nan, np.float32)
    kernel(A=a, B=b, C=c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)


def test_small_conv2d(tmp_path):
    report = _run(tmp_path, "conv2d")
    n, c, h, w, k = 1, 16, 28, 28, 16
    _check_report(report, 2 * n * k * h * w * c * 9, 1e-3)
    assert report["shape"] == "1x16x28x28->16" and report["goal_ratio"] == 1.0
    torch = tune_bench._torch()
    assert report["peer"]["name"].startswith("PyTorch" if torch is not None else "numpy")
    assert bool(report["peer"]["note"]) == (torch is None)
    spec, kernel = _replay(make_conv2d, (n, c, h, w, k), report["best"]["trace"])
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((k, c, 3, 3)).astype(np.float32)
    y = np.full((n, k, h, w), np.nan, np.float32)
    kernel(X=x, W=wt, Y=y)
    want = spec.reference({"X": x, "W": wt})["Y"]
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-3 * np.abs(want).max())


def test_autotune_stops_at_its_time_budget():
    from tune import autotune
    from tune.workloads import elementwise, matmul
    wl = matmul(16, 16, 16)      # a space far larger than what one second can measure, on any machine
    t0 = time.perf_counter()
    _, record, result = autotune(wl.outputs, wl.args, target="llvm", trials=500, strategy="random",
                                 reference=wl.reference, repeats=1, min_repeat_s=0.0, progress=False,
                                 return_result=True, time_budget_s=1.0)
    elapsed = time.perf_counter() - t0
    assert result.out_of_time and 1 <= len(result.records) < 500 and record.ok
    # the first candidate always runs; after the deadline no new one starts
    assert elapsed < 1.0 + 60.0
    wl = elementwise(16, 16)
    _, _, full = autotune(wl.outputs, wl.args, target="llvm", trials=2, strategy="random", reference=wl.reference,
                          repeats=1, min_repeat_s=0.0, progress=False, return_result=True, time_budget_s=600.0)
    assert not full.out_of_time and len(full.records) == 2


def _rec(cost, created, error=None):
    ok = error is None
    return SimpleNamespace(cost=cost if ok else math.inf, created=created, error_kind=error)


def test_curve_and_wall_times():
    recs = [_rec(None, 90.0, "RunTimeout"), _rec(2.0, 101.0), _rec(3.0, 102.5), _rec(1.0, 100.0)]
    walls = tune_bench._wall_times(recs, 100.0)
    assert walls == [0.0, 1.0, 2.5, 2.5]    # never back in time; older records count from the start
    rows = tune_bench.curve_of(recs, walls, flops=4e9)
    assert [r["cost_s"] for r in rows] == [None, 2.0, 3.0, 1.0]
    assert [r["best_s"] for r in rows] == [None, 2.0, 2.0, 1.0]
    assert [r["best_gflops"] for r in rows] == [None, 2.0, 2.0, 4.0]
    assert rows[0]["error_kind"] == "RunTimeout"


def test_contender_threads_are_restored():
    state = {"n": 4}
    c = tune_bench.Contender("x", lambda: None, "", lambda: state["n"], lambda n: state.__setitem__("n", n))
    assert c.thread_configs() == [None, 1]
    with c.threads(1):
        assert state["n"] == 1
    assert state["n"] == 4
    with c.threads(None):
        assert state["n"] == 4
    assert tune_bench.Contender("y", lambda: None).thread_configs() == [None]
    timings = tune_bench.time_configs(c, repeats=2, min_time=0.0)
    assert set(timings) == {"default (4 threads)", "1 thread"} and all(t >= 0 for t in timings.values())
