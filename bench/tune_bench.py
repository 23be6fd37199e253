"""Autotuning benchmark: tune matmul and conv2d with the automatic space and compare with
the peer library measured in the same run.

    python -m bench.tune_bench [--kernel matmul|conv2d|all] [--trials N] [--minutes M]
                               [--size small|full] [--db PATH] [--out DIR]

For each kernel (the definitions of ``bench/kernels.py``: ``make_matmul``, ``make_conv2d``):

1. the peer is timed: numpy's BLAS (``a @ b``) for matmul; PyTorch's CPU
   ``torch.nn.functional.conv2d`` for conv2d (numpy's im2col einsum, flagged in the report,
   when torch is not installed);
2. ``tune.autotune`` searches the automatic space on ``target="llvm"`` with the
   model-guided strategy until ``--trials`` trials are done or the time is up: no candidate
   starts later than ``--minutes`` less (run timeout + 5 s) after the call, so the last
   candidate and the final build normally end within ``--minutes`` (``elapsed_s`` and
   ``within_budget`` in the report say whether they did);
3. the best kernel is checked against numpy float64 and re-timed in alternating rounds with
   the peer, so both see the same machine load, each side keeping its best round; each side is timed with its runtime's
   default thread count and with one thread and keeps the faster (on a shared 2-core
   machine a multithreaded BLAS can be 30x slower than on one thread; comparing with that
   would flatter us). The tuner's own measurement of the best is reported too;
4. ``tune_<kernel>.json`` (``tune_<kernel>_small.json`` for ``--size small``) and a plot of
   the tuning curve (best GFLOP/s so far against the trial number and the wall time, the
   peer as a horizontal line) are written to ``--out`` (``bench/results`` by default).

The issue's goals, checked in the report: matmul 1024^3 float32 at 80% or more of numpy's
BLAS GFLOP/s within 300 trials and 15 minutes; conv2d (1, 64, 56, 56) -> 64, 3x3, at least
as fast as PyTorch. ``--size small`` (matmul 256, conv2d (1, 16, 28, 28) -> 16) is for
quick checks.

>>> SIZES["matmul"]["full"], GOALS["matmul"]
(1024, 0.8)
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .ceilings import blas_gflops, machine_info
from .harness import time_call
from .kernels import Spec, _torch, make_conv2d, make_matmul

__all__ = ["SIZES", "GOALS", "Contender", "make_peer", "make_ours", "retime", "tune_kernel", "curve_of", "plot_curve",
           "main"]

RESULTS = Path(__file__).resolve().parent / "results"
MAKERS: dict[str, Callable[[Any], Spec]] = {"matmul": make_matmul, "conv2d": make_conv2d}
SIZES: dict[str, dict[str, Any]] = {
    "matmul": {"small": 256, "full": 1024},
    "conv2d": {"small": (1, 16, 28, 28, 16), "full": (1, 64, 56, 56, 64)},
}
# fraction of the peer's GFLOP/s the issue asks for
GOALS = {"matmul": 0.8, "conv2d": 1.0}


def _openblas_threads() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """(get, set) of the thread count of the OpenBLAS that numpy loaded, or None if not found.

    threadpoolctl does the same; it is not a dependency, so the two entry points are
    looked up directly in the loaded library."""
    import ctypes
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({ln.split()[-1] for ln in f if "openblas" in ln.lower() and ln.split()[-1].startswith("/")})
    except OSError:
        return None
    for path in libs:
        lib = ctypes.CDLL(path)
        for prefix, suffix in (("scipy_openblas", "64_"), ("openblas", "64_"), ("openblas", "")):
            get = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
            set_ = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
            if get is not None and set_ is not None:
                set_.argtypes = [ctypes.c_int]
                return (lambda: int(get())), (lambda n: set_(int(n)))
    return None


@dataclass
class Contender:
    """A timed kernel (the tuned one, or the library peer): a zero-argument callable, its
    name, and (where its runtime allows it) how to read and set its thread count."""

    name: str
    fn: Callable[[], Any]
    note: str = ""
    get_threads: Callable[[], int] | None = None
    set_threads: Callable[[int], None] | None = None

    @contextlib.contextmanager
    def threads(self, n: int | None):
        """Run with ``n`` threads inside the block (None: the runtime's default)."""
        if n is None or self.set_threads is None:
            yield
            return
        old = self.get_threads()
        self.set_threads(n)
        try:
            yield
        finally:
            self.set_threads(old)

    def thread_configs(self) -> list[int | None]:
        """The runtime's default, and one thread where that differs: on a shared, loaded
        machine a multithreaded BLAS (or any parallel kernel) can run many times slower than
        on one thread, so each side is timed both ways and keeps its best."""
        if self.get_threads is None or self.get_threads() <= 1:
            return [None]
        return [None, 1]


def make_peer(kernel: str, spec: Spec) -> Contender:
    """numpy BLAS for matmul; PyTorch CPU conv2d (numpy when torch is missing) for conv2d."""
    if kernel == "matmul":
        a, b = spec.inputs["A"], spec.inputs["B"]
        gs = _openblas_threads()
        return Contender(f"numpy {np.__version__} BLAS (a @ b)", lambda: a @ b, "",
                    *(gs or (None, None)))
    if kernel == "conv2d":
        torch = _torch()
        if torch is not None:
            return Contender(f"PyTorch {torch.__version__} CPU conv2d", spec.torch_fn(torch, spec.inputs), "",
                        torch.get_num_threads, torch.set_num_threads)
        return Contender("numpy im2col einsum", lambda: spec.numpy_fn(spec.inputs),
                    note="PyTorch is not installed: compared with numpy instead, which is NOT the issue's peer")
    raise ValueError(f"kernel must be one of {sorted(MAKERS)}, got {kernel!r}")


def make_ours(kernel: Callable[..., Any], arrays: dict) -> Contender:
    """The tuned kernel called on ``arrays``, with the LLVM runtime's thread count."""
    from codegen.llvm import get_num_threads, set_num_threads
    return Contender("tuned kernel (llvm)", lambda: kernel(**arrays), "", get_num_threads, set_num_threads)


def _label(n: int | None, c: Contender) -> str:
    if n is None:
        return f"default ({c.get_threads()} threads)" if c.get_threads else "default"
    return f"{n} thread" + ("s" if n != 1 else "")


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def curve_of(records: Sequence[Any], wall_s: Sequence[float], flops: float) -> list[dict]:
    """One row per trial: its time (None when it failed), the best so far, and when it was known."""
    rows, best = [], math.inf
    for k, (rec, w) in enumerate(zip(records, wall_s)):
        best = min(best, rec.cost)
        rows.append({"trial": k + 1, "wall_s": round(w, 3), "cost_s": _finite(rec.cost),
                     "error_kind": rec.error_kind, "best_s": _finite(best),
                     "best_gflops": flops / best / 1e9 if math.isfinite(best) else None})
    return rows


def _wall_times(records: Sequence[Any], started: float) -> list[float]:
    """Seconds from ``started`` at which each trial's result was known (records reused from an
    earlier run count from the start; the curve never goes back in time)."""
    out, last = [], 0.0
    for rec in records:
        last = max(last, rec.created - started)
        out.append(last)
    return out


def _max_rel_err(outs: dict, spec: Spec) -> float:
    err = 0.0
    for name, want in spec.reference(spec.inputs).items():
        scale = max(1.0, float(np.max(np.abs(want))))
        err = max(err, float(np.max(np.abs(outs[name].astype(np.float64) - want))) / scale)
    return err


def time_configs(c: Contender, repeats: int = 10, min_time: float = 0.3) -> dict[str, float]:
    """Median seconds (``bench.harness.time_call``) of ``c`` under each thread configuration."""
    out = {}
    for n in c.thread_configs():
        with c.threads(n):
            out[_label(n, c)] = time_call(c.fn, repeats=repeats, warmup=1, min_time=min_time).median
    return out


def retime(ours: Contender, peer: Contender, rounds: int = 3, repeats: int = 10,
           min_time: float = 0.3) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per-round median seconds of ``ours`` and ``peer`` by thread configuration, timed in
    alternating rounds so both see the same machine load."""
    a: dict[str, list[float]] = {}
    b: dict[str, list[float]] = {}
    for _ in range(rounds):
        for side, c in ((a, ours), (b, peer)):
            for label, t in time_configs(c, repeats, min_time).items():
                side.setdefault(label, []).append(t)
    return a, b


def _fastest(rounds: dict[str, list[float]]) -> tuple[str, float, dict[str, float]]:
    """(fastest configuration, its best round, the best round of every configuration).

    Each round is a median already; the best round is the one least disturbed by other
    processes (on a shared machine a round can be 1.5x slower for either side), as in the
    ``python -m bench`` table."""
    med = {label: min(ts) for label, ts in rounds.items()}
    best = min(med, key=med.get)
    return best, med[best], med


def tune_kernel(kernel: str, size: str = "full", trials: int = 300, minutes: float = 15.0, db: str | None = None,
                seed: int = 0, repeats: int = 5, build_timeout: float = 60.0, run_timeout: float = 10.0,
                rounds: int = 5, progress: bool = True) -> dict:
    """Tune one kernel against its peer and return the report (the JSON's content)."""
    from tune import autotune
    shape = SIZES[kernel][size]
    spec = MAKERS[kernel](shape)
    peer = make_peer(kernel, spec)
    load_start = os.getloadavg()
    t_kernel = time.perf_counter()
    peer_start = {}
    if kernel == "matmul":     # the machine ceiling, as bench/ceilings.py measures it
        peer_start["ceilings.blas_gflops"] = spec.flops / blas_gflops(shape) / 1e9
    peer_start.update(time_configs(peer))
    peer_start_s = min(peer_start.values())

    # no candidate starts after the search budget; the reserve leaves room for the last one
    # (typically a second or two, at most the run time limit) and the final build
    search_budget_s = max(0.5 * minutes * 60.0, minutes * 60.0 - (run_timeout + 5.0))
    started_wall = time.time()
    t0 = time.perf_counter()
    built, best, result = autotune(
        spec.outputs, spec.args, target="llvm", trials=trials, db=db, space=None, strategy="model",
        inputs=spec.inputs, reference=spec.reference, seed=seed, build_timeout=build_timeout,
        run_timeout=run_timeout, repeats=repeats, progress=progress, return_result=True,
        time_budget_s=search_budget_s)
    tuning_s = time.perf_counter() - t0

    outs = {name: np.full(shape_, np.nan, np.float32) for name, shape_ in spec.out_shapes.items()}
    arrays = dict(spec.inputs, **outs)
    built(**arrays)
    err = _max_rel_err(outs, spec)
    ours_rounds, peer_rounds = retime(make_ours(built, arrays), peer, rounds=rounds)
    ours_config, ours_s, ours_by_config = _fastest(ours_rounds)
    peer_config, peer_s, peer_by_config = _fastest(peer_rounds)
    load_end = os.getloadavg()

    wall = _wall_times(result.records, started_wall)
    curve = curve_of(result.records, wall, spec.flops)
    found = next((row for row in curve if row["cost_s"] is not None and row["cost_s"] == best.median), None)
    n = len(result.records)
    stopped_by = "time" if result.out_of_time else ("trials" if n >= trials else "space exhausted")
    ours_gflops, peer_gflops = spec.flops / ours_s / 1e9, spec.flops / peer_s / 1e9
    ratio = ours_gflops / peer_gflops
    return {
        "kernel": kernel, "size": size, "shape": spec.label, "flops": spec.flops, "target": "llvm",
        "space": "auto", "strategy": "model", "seed": seed,
        "budget": {"trials": trials, "minutes": minutes, "search_s": search_budget_s},
        "trials": n, "measured": result.measured, "reused": result.reused,
        "invalid_schedules": result.invalid, "errors": result.errors(), "stopped_by": stopped_by,
        "elapsed_s": round(tuning_s, 2), "total_s": round(time.perf_counter() - t_kernel, 2),
        "within_budget": n <= trials and tuning_s <= minutes * 60.0,
        "best": {
            "tuner_median_s": best.median, "tuner_gflops": spec.flops / best.median / 1e9,
            "retimed_s": ours_s, "config": ours_config, "retimed_by_config_s": ours_by_config,
            "retimed_rounds_s": ours_rounds, "gflops": ours_gflops,
            "found_at_trial": found["trial"] if found else None, "found_at_s": found["wall_s"] if found else None,
            "point": best.point, "trace": json.loads(best.trace), "max_rel_err": err, "correct": err <= spec.tol,
        },
        "peer": {"name": peer.name, "note": peer.note, "config": peer_config,
                 "start_s": peer_start_s, "start_gflops": spec.flops / peer_start_s / 1e9,
                 "start_by_config_s": peer_start, "retimed_s": peer_s, "retimed_by_config_s": peer_by_config,
                 "retimed_rounds_s": peer_rounds, "gflops": peer_gflops},
        "ratio": ratio, "goal_ratio": GOALS[kernel], "meets_goal": ratio >= GOALS[kernel] and err <= spec.tol,
        "curve": curve,
        "loadavg_start": list(load_start), "loadavg_end": list(load_end),
        "machine": machine_info(), "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


def plot_curve(report: dict, path: str | os.PathLike) -> str | None:
    """Best GFLOP/s so far against the trial number and against wall time, the peer as a
    horizontal line (and the goal, when below the peer). None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("tune_bench: matplotlib is not installed; no plot (pip install matplotlib)", file=sys.stderr)
        return None
    from tune.plot import best_so_far
    rows = report["curve"]
    flops = report["flops"]
    costs = [r["cost_s"] if r["cost_s"] is not None else math.inf for r in rows]
    best = best_so_far(costs)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, key, label in ((axes[0], "trial", "trial"), (axes[1], "wall_s", "wall time (s)")):
        xs = [r[key] for r in rows]
        pts = [(x, flops / c / 1e9) for x, c in zip(xs, costs) if math.isfinite(c)]
        if pts:
            ax.scatter(*zip(*pts), s=8, color="tab:blue", alpha=0.3, label="each candidate")
        steps = [(x, flops / b / 1e9) for x, b in zip(xs, best) if math.isfinite(b)]
        if steps:
            ax.step(*zip(*steps), where="post", color="tab:blue", label="best so far (tuner)")
        peer = report["peer"]["gflops"]
        ax.axhline(peer, color="tab:red", linestyle="--",
                   label=f"{report['peer']['name']}, {report['peer']['config']} (re-timed)")
        if report["goal_ratio"] < 1.0:
            ax.axhline(report["goal_ratio"] * peer, color="tab:red", linestyle=":",
                       label=f"goal: {report['goal_ratio']:.0%} of the peer")
        ax.axhline(report["best"]["gflops"], color="tab:green", linestyle="-.", linewidth=0.8,
                   label=f"best, re-timed with the peer, {report['best']['config']}")
        ax.set_xlabel(label)
        ax.set_xlim(left=0)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("GFLOP/s (higher is better)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.suptitle(f"{report['kernel']} {report['shape']} on {report['machine'].get('cpu', '?')} "
                 f"({report['machine'].get('cores', '?')} cores): {report['trials']} trials, "
                 f"{report['elapsed_s']:.0f} s, {report['ratio']:.2f}x the peer", fontsize=9)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)


def summary(report: dict) -> str:
    b, p = report["best"], report["peer"]
    lines = [
        f"{report['kernel']} {report['shape']}: {report['trials']} trials ({report['measured']} measured, "
        f"{report['reused']} from the database, {report['invalid_schedules']} illegal schedules) in "
        f"{report['elapsed_s']:.1f} s, stopped by {report['stopped_by']}",
        f"  best  {b['retimed_s'] * 1e3:9.3f} ms  {b['gflops']:8.2f} GFLOP/s  {b['config']} (fastest of: "
        + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in b["retimed_by_config_s"].items())
        + f"); in the tuner {b['tuner_gflops']:.2f} GFLOP/s, found at trial {b['found_at_trial']}, "
        f"{b['found_at_s']} s; max rel err {b['max_rel_err']:.1e}",
        f"  peer  {p['retimed_s'] * 1e3:9.3f} ms  {p['gflops']:8.2f} GFLOP/s  {p['name']}, {p['config']} "
        f"(fastest of: " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in p["retimed_by_config_s"].items()) + ")",
        f"  ratio {report['ratio']:.3f} (goal {report['goal_ratio']:.2f}): "
        f"{'MET' if report['meets_goal'] else 'NOT MET'}; load average {report['loadavg_start'][0]:.2f} -> "
        f"{report['loadavg_end'][0]:.2f}",
    ]
    if p["note"]:
        lines.append("  note: " + p["note"])
    cores = report["machine"].get("cores") or 1
    if max(report["loadavg_start"][0], report["loadavg_end"][0]) > 0.5 * cores:
        lines.append(f"  warning: the machine was busy (load average above {0.5 * cores:g} on {cores} cores): "
                     "other processes shared the cores, so these timings understate both sides")
    if report["errors"]:
        lines.append("  failed candidates: " + ", ".join(f"{k} {v}" for k, v in sorted(report["errors"].items())))
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.tune_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--kernel", default="all", choices=["matmul", "conv2d", "all"])
    p.add_argument("--trials", type=int, default=300, help="trial budget (default 300)")
    p.add_argument("--minutes", type=float, default=15.0, help="wall-clock budget of each tuning run (default 15)")
    p.add_argument("--size", default="full", choices=["small", "full"],
                   help="full: the issue's sizes; small: matmul 256, conv2d (1, 16, 28, 28) -> 16")
    p.add_argument("--db", default=None,
                   help="records database; omit for a fresh in-memory one (a file resumes: its records count as "
                        "trials without being re-measured). With --kernel all, {kernel} in the path is replaced")
    p.add_argument("--out", default=str(RESULTS), help="directory for tune_<kernel>.json / .png")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per candidate")
    p.add_argument("--run-timeout", type=float, default=10.0, help="seconds a candidate may run (default 10)")
    p.add_argument("--build-timeout", type=float, default=60.0, help="seconds a candidate may build (default 60)")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds of the final re-timing (default 5)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.trials < 1 or args.minutes <= 0 or args.rounds < 1:
        raise SystemExit(f"--trials and --rounds must be at least 1 and --minutes above 0; got {args.trials}, "
                         f"{args.rounds} and {args.minutes}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kernels = ["matmul", "conv2d"] if args.kernel == "all" else [args.kernel]
    command = "python -m bench.tune_bench " + " ".join(shlex.quote(a) for a in (argv if argv is not None
                                                                                else sys.argv[1:]))
    for k in kernels:
        db = args.db.replace("{kernel}", k) if args.db else None
        report = tune_kernel(k, size=args.size, trials=args.trials, minutes=args.minutes, db=db, seed=args.seed,
                             repeats=args.repeats, build_timeout=args.build_timeout, run_timeout=args.run_timeout,
                             rounds=args.rounds, progress=not args.quiet)
        report["command"] = command
        report["db"] = db
        stem = f"tune_{k}" + ("_small" if args.size == "small" else "")
        json_path, png_path = out / f"{stem}.json", out / f"{stem}.png"
        report["plot"] = png_path.name if plot_curve(report, png_path) else None
        with open(json_path, "w") as f:
            json.dump(report, f, indent=1, allow_nan=False)
        print(summary(report))
        print(f"  wrote {json_path}" + (f" and {png_path}" if report["plot"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
