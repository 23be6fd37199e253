"""Run the benchmark suite: ``python -m bench [--full] [--only NAME ...] [--target llvm]``.

For each kernel and size: our default schedule and a hand schedule are built (compile time
recorded), checked against numpy float64, and timed against numpy and PyTorch (when
installed) in the same run. The report gives ratios (peer time / our time: above 1 means we
are faster) and the machine ceilings measured in this run (copy bandwidth, BLAS GFLOP/s).
Results go to ``bench/results/``: ``results.json``, ``results.txt`` and ``speedups.png``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from codegen import build
from loopnest import LoopNest

from .ceilings import blas_gflops, copy_bandwidth_gbs, machine_info
from .harness import time_call
from .kernels import WORKLOADS, Spec, _torch

RESULTS = Path(__file__).resolve().parent / "results"


def _build(spec: Spec, schedule, target: str):
    t0 = time.perf_counter()
    nest = LoopNest(spec.outputs)
    if schedule is not None:
        schedule(nest, spec)
    kernel = build(nest, spec.args, target=target)
    return kernel, time.perf_counter() - t0, nest


def _run_ours(kernel, spec: Spec):
    outs = {name: np.empty(shape, np.float32) for name, shape in spec.out_shapes.items()}
    arrays = dict(spec.inputs, **outs)
    call = lambda: kernel(**arrays)  # noqa: E731
    call()
    return outs, call


def _check(outs: dict, spec: Spec) -> float:
    ref = spec.reference(spec.inputs)
    err = 0.0
    for name, want in ref.items():
        got = outs[name].astype(np.float64)
        scale = max(1.0, float(np.max(np.abs(want))))
        err = max(err, float(np.max(np.abs(got - want))) / scale)
    return err


def bench_one(workload, size, target: str, repeats: int) -> dict:
    spec = workload.make(size)
    row = {"kernel": workload.name, "size": spec.label, "flops": spec.flops, "bytes": spec.bytes}
    np_t = time_call(lambda: spec.numpy_fn(spec.inputs), repeats=repeats)
    row["numpy_s"] = np_t.median
    torch = _torch()
    if torch is not None and spec.torch_fn is not None:
        fn = spec.torch_fn(torch, spec.inputs)
        row["torch_s"] = time_call(fn, repeats=repeats).median
    for label, sched in (("default", workload.default_schedule), ("hand", workload.hand_schedule)):
        try:
            kernel, compile_s, _ = _build(spec, sched, target)
            outs, call = _run_ours(kernel, spec)
            err = _check(outs, spec)
            ok = err <= spec.tol
            t = time_call(call, repeats=repeats)
            row[label] = {"time_s": t.median, "spread_s": t.spread, "compile_s": compile_s, "max_rel_err": err,
                          "correct": ok, "vs_numpy": row["numpy_s"] / t.median,
                          "vs_torch": (row["torch_s"] / t.median) if "torch_s" in row else None,
                          "gflops": spec.flops / t.median / 1e9 if spec.flops else None,
                          "gbs": spec.bytes / t.median / 1e9}
        except Exception as exc:  # a failing schedule is reported, the suite goes on
            row[label] = {"error": f"{type(exc).__name__}: {exc}"}
            if "--debug" in sys.argv:
                traceback.print_exc()
    return row


def compile_and_call_overhead(target: str) -> dict:
    """Median compile time (LoopNest -> callable) of a 3-op elementwise kernel, and the
    per-call overhead of a tiny kernel."""
    from te import Buffer, Compute, float32
    times = []
    for k in range(7):
        A = Buffer("A", (1024,), float32)
        B = Compute("B", (1024,), lambda i: A[i] * 2.0 + float(k) - A[i] * A[i])
        t0 = time.perf_counter()
        kern = build(LoopNest([B]), [A, B], target=target)
        times.append(time.perf_counter() - t0)
    A = Buffer("A", (4,), float32)
    B = Compute("B", (4,), lambda i: A[i] + 1.0)
    kern = build(LoopNest([B]), [A, B], target=target)
    a, b = np.ones(4, np.float32), np.empty(4, np.float32)
    t = time_call(lambda: kern(a, b), repeats=50)
    return {"compile_median_s": statistics.median(times), "call_overhead_s": t.median}


def format_table(rows: list[dict], ceilings: dict) -> str:
    lines = [f"machine: {ceilings['machine']}",
             f"ceilings: copy bandwidth {ceilings['copy_gbs']:.1f} GB/s, numpy BLAS {ceilings['blas_gflops']:.1f} GFLOP/s",
             ""]
    hdr = f"{'kernel':<12} {'size':<20} {'numpy ms':>9} {'torch ms':>9} | {'sched':<7} {'ours ms':>9} " \
          f"{'x numpy':>8} {'x torch':>8} {'GFLOP/s':>8} {'GB/s':>7} {'compile s':>9} ok"
    lines += [hdr, "-" * len(hdr)]
    for r in rows:
        for label in ("default", "hand"):
            d = r.get(label, {})
            base = f"{r['kernel']:<12} {r['size']:<20} {r['numpy_s'] * 1e3:>9.3f} " \
                   f"{(r['torch_s'] * 1e3 if r.get('torch_s') else float('nan')):>9.3f} | {label:<7} "
            if "error" in d:
                lines.append(base + f"ERROR {d['error'][:70]}")
                continue
            lines.append(base + f"{d['time_s'] * 1e3:>9.3f} {d['vs_numpy']:>8.2f} "
                         f"{(d['vs_torch'] if d['vs_torch'] else float('nan')):>8.2f} "
                         f"{(d['gflops'] or 0):>8.2f} {d['gbs']:>7.2f} {d['compile_s']:>9.3f} "
                         f"{'yes' if d['correct'] else 'NO'}")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return False
    labels, default, hand = [], [], []
    for r in rows:
        labels.append(f"{r['kernel']}\n{r['size']}")
        default.append(r.get("default", {}).get("vs_numpy", 0) or 0)
        hand.append(r.get("hand", {}).get("vs_numpy", 0) or 0)
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(labels)), 4))
    ax.bar(x - 0.2, default, 0.4, label="default schedule")
    ax.bar(x + 0.2, hand, 0.4, label="hand schedule")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("speed-up over numpy (higher is better)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true", help="full sizes (slow) instead of the small defaults")
    p.add_argument("--only", nargs="*", help="kernel names to run", choices=sorted(WORKLOADS))
    p.add_argument("--target", default="llvm", help="codegen target (default llvm)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--debug", action="store_true", help="print tracebacks of failing schedules")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()

    print("measuring machine ceilings ...", flush=True)
    ceilings = {"machine": machine_info(), "copy_gbs": copy_bandwidth_gbs(256 << 20 if args.full else 64 << 20),
                "blas_gflops": blas_gflops(1024 if args.full else 512)}
    rows = []
    for name in args.only or list(WORKLOADS):
        w = WORKLOADS[name]
        for size in (w.full if args.full else w.small):
            print(f"  {name} {size} ...", flush=True)
            rows.append(bench_one(w, size, args.target, args.repeats))
    extras = {}
    try:
        extras["compile_and_call"] = compile_and_call_overhead(args.target)
    except Exception as exc:
        extras["compile_and_call"] = {"error": str(exc)}
    try:
        from .bench_ireval import run as ireval_run
        extras["ireval"] = ireval_run(small=not args.full)
    except Exception as exc:
        extras["ireval"] = {"error": str(exc)}
    table = format_table(rows, ceilings)
    cc = extras["compile_and_call"]
    if "error" not in cc:
        table += (f"\n\ncompile time (elementwise, LoopNest -> callable): median {cc['compile_median_s'] * 1e3:.1f} ms;"
                  f" per-call overhead of a tiny kernel: {cc['call_overhead_s'] * 1e6:.1f} us")
    ir = extras["ireval"]
    if "error" not in ir and "elements_per_s" in ir:
        table += f"\nIREval throughput (512x512 elementwise): {ir['elements_per_s'] / 1e6:.2f} M stored elements/s"
    print()
    print(table)
    (out / "results.txt").write_text(table + "\n")
    (out / "results.json").write_text(json.dumps({"ceilings": ceilings, "rows": rows, "extras": extras,
                                                  "target": args.target, "full": args.full}, indent=1, default=str))
    if plot(rows, out / "speedups.png"):
        print(f"\nplot: {out / 'speedups.png'}")
    print(f"results: {out / 'results.json'}  ({time.perf_counter() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
