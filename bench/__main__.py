"""Run the benchmark suite: ``python -m bench [--full] [--only NAME ...] [--target llvm]``.

For each kernel and size: our default schedule, the automatic schedule (`nest.auto_schedule()`)
and a hand schedule are built (compile time
recorded), checked against numpy float64, and timed against numpy and PyTorch (when
installed, on the same number of threads as our kernels) in the same run. Every candidate
of one kernel is timed round-robin (``harness.time_interleaved``, every other round in the
opposite order), so load from other processes hits them alike and no candidate always runs
right after the same one; times are the best sample of the rounds (medians are in the
JSON). The report gives ratios (peer time / our time: above 1 means we are faster), the
machine ceilings measured in this run (copy bandwidth, BLAS GFLOP/s), the speed-up of the
hand schedule on all threads over one thread, compile time, the resident memory kept per
1,000 distinct builds (``bench_memory``: 100 builds scaled, 1,000 with ``--full``), and the
issue's aims with whether each is met. Results go to ``bench/results/``: ``results.json``,
``results.txt`` and ``speedups.png``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from codegen import build
from loopnest import LoopNest

from .ceilings import blas_gflops, copy_bandwidth_gbs, machine_info
from .harness import time_call, time_interleaved
from .kernels import WORKLOADS, Spec, _torch

RESULTS = Path(__file__).resolve().parent / "results"

#: the issue's aims (measured in this run, as ratios against peers timed with them)
AIM_COPY_FRACTION = 0.80        # fused elementwise chain vs the measured copy bandwidth
AIM_VS_TORCH = 1.0              # softmax, layernorm vs PyTorch eager on the same threads
AIM_AUTO_VS_HAND = 0.90         # the automatic schedule vs the hand schedule, every kernel
AIM_BLAS_FRACTION = 0.50        # matmul 1024 hand schedule vs numpy BLAS GFLOP/s
AIM_PARALLEL_SPEEDUP = 1.7      # compute-bound kernel on 2 cores vs 1
AIM_COMPILE_S = 0.050           # elementwise LoopNest -> callable, median
AIM_CALL_OVERHEAD_S = 10e-6     # a tiny kernel's per-call time
AIM_STRIDED_VS_COPY = 0.95      # strided input vs ascontiguousarray + run (1.0 within 5% timing noise)

#: a candidate whose first call takes longer (seconds) is timed on its own: interleaved, it
#: would use up the budget of every round, leaving the others one sample each (matmul 1024: the
#: unscheduled kernel's 7 s a call left PyTorch one sample, 15 ms against 6.7 ms over 24)
SLOW_ALONE_S = 0.5


def _num_threads(target: str) -> int:
    if target == "llvm":
        from codegen.llvm import get_num_threads
        return get_num_threads()
    return 1


def _set_threads(target: str, n: int | None) -> None:
    if target == "llvm":
        from codegen.llvm import set_num_threads
        set_num_threads(n)


def _has_parallel_loop(nest: LoopNest) -> bool:
    return any(l.kind == "parallel" for l in nest.get_all_loops())


def _auto_schedule(nest: LoopNest, spec: Spec) -> None:
    """The ``auto`` column: the automatic scheduler for the host, no search."""
    nest.auto_schedule()


def _build(spec: Spec, schedule, target: str):
    t0 = time.perf_counter()
    nest = LoopNest(spec.outputs)
    if schedule is not None:
        schedule(nest, spec)
    kernel = build(nest, spec.args, target=target)
    return kernel, time.perf_counter() - t0, nest


def _run_ours(kernel, spec: Spec):
    """Run once (the correctness run); return (outputs, call, seconds of that run)."""
    t0 = time.perf_counter()
    outs, call = spec.run(kernel)
    return outs, call, time.perf_counter() - t0


def bench_one(workload, size, target: str, rounds: int, budget: float) -> dict:
    spec = workload.make(size)
    row = {"kernel": workload.name, "size": spec.label, "flops": spec.flops, "bytes": spec.bytes}
    fns = {"numpy": lambda: spec.numpy_fn(spec.inputs)}
    torch = _torch()
    if torch is not None and spec.torch_fn is not None:
        fns["torch"] = spec.torch_fn(torch, spec.inputs)
    if workload.name == "elementwise":
        # the copy ceiling timed with the kernels: copies moving as many bytes (read + write),
        # numpy's (one thread) and PyTorch's (parallel): the faster one is the ceiling
        src = np.ones(int(spec.bytes) // 2, np.uint8)
        dst = np.empty_like(src)
        fns["copy"] = lambda: np.copyto(dst, src)
        if torch is not None:
            tsrc, tdst = torch.from_numpy(src), torch.from_numpy(np.empty_like(src))
            fns["copy_torch"] = lambda: tdst.copy_(tsrc)
    built, slow = {}, {}
    for label, sched in (("default", workload.default_schedule), ("auto", _auto_schedule),
                         ("hand", workload.hand_schedule)):
        if label == "default" and workload.skip_default(size):
            row[label] = {"skipped": "the unscheduled kernel takes minutes a call at this size"}
            continue
        try:
            kernel, compile_s, nest = _build(spec, sched, target)
            outs, call, first_s = _run_ours(kernel, spec)
            err = spec.error(outs)
            built[label] = {"compile_s": compile_s, "max_rel_err": err, "correct": err <= spec.tol}
            timed_with = slow if first_s > SLOW_ALONE_S else fns
            timed_with[label] = call
            if label == "hand" and _has_parallel_loop(nest) and _num_threads(target) > 1:
                def one_thread(call=call):
                    _set_threads(target, 1)
                    try:
                        call()
                    finally:
                        _set_threads(target, None)
                timed_with["hand_1thread"] = one_thread      # timed as the hand schedule is: interleaved or alone
        except Exception as exc:  # a failing schedule is reported, the suite goes on
            row[label] = {"error": f"{type(exc).__name__}: {exc}"}
            if "--debug" in sys.argv:
                traceback.print_exc()
    times = time_interleaved(fns, rounds=rounds, budget=budget, min_time=budget / 8)
    for label, call in slow.items():
        times[label] = time_interleaved({label: call}, rounds=rounds, budget=budget)[label]
    row["numpy_s"] = times["numpy"].best
    row["numpy_median_s"] = times["numpy"].median
    if "torch" in times:
        row["torch_s"] = times["torch"].best
        row["torch_median_s"] = times["torch"].median
    if "copy" in times:
        row["copy_numpy_gbs"] = spec.bytes / times["copy"].best / 1e9
        row["copy_gbs"] = row["copy_numpy_gbs"]
        if "copy_torch" in times:
            row["copy_torch_gbs"] = spec.bytes / times["copy_torch"].best / 1e9
            row["copy_gbs"] = max(row["copy_gbs"], row["copy_torch_gbs"])
    for label, info in built.items():
        t = times[label]
        d = dict(info, time_s=t.best, median_s=t.median, spread_s=t.spread, samples=t.repeats,
                 vs_numpy=row["numpy_s"] / t.best,
                 vs_torch=(row["torch_s"] / t.best) if "torch_s" in row else None,
                 gflops=spec.flops / t.best / 1e9 if spec.flops else None,
                 gbs=spec.bytes / t.best / 1e9)
        if label == "hand" and "hand_1thread" in times:
            d["one_thread_s"] = times["hand_1thread"].best
            d["parallel_speedup"] = times["hand_1thread"].best / t.best
        row[label] = d
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
        build(LoopNest([B]), [A, B], target=target)
        times.append(time.perf_counter() - t0)
    A = Buffer("A", (4,), float32)
    B = Compute("B", (4,), lambda i: A[i] + 1.0)
    kern = build(LoopNest([B]), [A, B], target=target)
    a, b = np.ones(4, np.float32), np.empty(4, np.float32)
    t = time_call(lambda: kern(a, b), repeats=50)
    return {"compile_median_s": statistics.median(times), "call_overhead_s": t.median}


def parallel_speedup(target: str, n: int, rounds: int) -> dict:
    """The hand-scheduled (parallel) matmul at ``n`` on every thread vs on one thread, timed
    round-robin: the speed-up of a compute-bound kernel from its parallel loop."""
    from .kernels import WORKLOADS as W
    spec = W["matmul"].make(n)
    kernel, _, _ = _build(spec, W["matmul"].hand_schedule, target)
    outs, call, _ = _run_ours(kernel, spec)
    threads = _num_threads(target)

    def serial():
        _set_threads(target, 1)
        try:
            call()
        finally:
            _set_threads(target, None)
    fns = {"all": call, "one": serial}
    torch = _torch()
    if torch is not None:
        # the same measurement for PyTorch's matmul, timed with ours: what the machine allowed
        tmm = spec.torch_fn(torch, spec.inputs)

        def torch_serial():
            torch.set_num_threads(1)
            try:
                tmm()
            finally:
                torch.set_num_threads(threads)
        fns.update(torch_all=tmm, torch_one=torch_serial)
    t = time_interleaved(fns, rounds=rounds, min_time=2.0)
    out = {"kernel": f"matmul n={n} hand schedule", "threads": threads, "one_thread_s": t["one"].best,
           "all_threads_s": t["all"].best, "speedup": t["one"].best / t["all"].best,
           "gflops_one": spec.flops / t["one"].best / 1e9, "gflops_all": spec.flops / t["all"].best / 1e9}
    if "torch_all" in t:
        out["torch_speedup"] = t["torch_one"].best / t["torch_all"].best
    return out


def aims(rows: list[dict], extras: dict, ceilings: dict) -> list[dict]:
    """The issue's aims, each with the measured value, the target and whether it is met."""
    out = []

    def add(name, value, target, met, note=""):
        out.append({"aim": name, "value": value, "target": target, "met": bool(met), "note": note})

    def largest(kernel):
        rs = [r for r in rows if r["kernel"] == kernel and "time_s" in r.get("hand", {})]
        return max(rs, key=lambda r: r["flops"] or r["bytes"]) if rs else None

    r = largest("elementwise")
    if r:
        copy = r.get("copy_gbs") or ceilings["copy_gbs"]
        frac = r["hand"]["gbs"] / copy
        add("elementwise chain / copy bandwidth", frac, AIM_COPY_FRACTION, frac >= AIM_COPY_FRACTION,
            f"{r['size']}: {r['hand']['gbs']:.1f} GB/s vs copy {copy:.1f} GB/s")
    for kernel in ("softmax", "layernorm"):
        r = largest(kernel)
        if r and r["hand"].get("vs_torch"):
            v = r["hand"]["vs_torch"]
            add(f"{kernel} speed / PyTorch eager", v, AIM_VS_TORCH, v >= AIM_VS_TORCH,
                f"{r['size']}: {r['hand']['time_s'] * 1e3:.2f} ms vs torch {r['torch_s'] * 1e3:.2f} ms")
    mm = [r for r in rows if r["kernel"] == "matmul" and "time_s" in r.get("hand", {})]
    r = next((x for x in mm if x["size"] == "n=1024"), mm[-1] if mm else None)
    if r:
        np_gflops = r["flops"] / r["numpy_s"] / 1e9
        frac = r["hand"]["gflops"] / np_gflops
        add(f"matmul {r['size']} hand / numpy BLAS GFLOP/s", frac, AIM_BLAS_FRACTION, frac >= AIM_BLAS_FRACTION,
            f"{r['hand']['gflops']:.1f} vs {np_gflops:.1f} GFLOP/s"
            + ("" if r["size"] == "n=1024" else " (n=1024 runs with --full)"))
    for r in rows:
        a, h = r.get("auto", {}), r.get("hand", {})
        if "time_s" in a and "time_s" in h:
            v = h["time_s"] / a["time_s"]
            add(f"{r['kernel']} {r['size']}: auto / hand speed", v, AIM_AUTO_VS_HAND, v >= AIM_AUTO_VS_HAND,
                f"{a['time_s'] * 1e3:.3f} ms vs {h['time_s'] * 1e3:.3f} ms")
    ps = extras.get("parallel_speedup", {})
    if "speedup" in ps:
        add(f"parallel speed-up ({ps['kernel']}, {ps['threads']} threads vs 1)", ps["speedup"],
            AIM_PARALLEL_SPEEDUP, ps["speedup"] >= AIM_PARALLEL_SPEEDUP,
            f"{ps['gflops_all']:.1f} vs {ps['gflops_one']:.1f} GFLOP/s"
            + (f"; PyTorch x{ps['torch_speedup']:.2f} in the same run" if "torch_speedup" in ps else "")
            + ("" if ps["threads"] >= 2 else " (one core only: not measurable)"))
    cc = extras.get("compile_and_call", {})
    if "compile_median_s" in cc:
        add("compile time, elementwise (median, s)", cc["compile_median_s"], AIM_COMPILE_S,
            cc["compile_median_s"] <= AIM_COMPILE_S)
        add("per-call overhead, tiny kernel (s)", cc["call_overhead_s"], AIM_CALL_OVERHEAD_S,
            cc["call_overhead_s"] <= AIM_CALL_OVERHEAD_S)
    imp = extras.get("import", {})
    if "import_s" in imp:
        add("import time of te, loopnest, codegen (s, fresh interpreter)", imp["import_s"], imp["aim_s"],
            imp["import_s"] <= imp["aim_s"], f"numpy and ml_dtypes alone {imp['third_party_s']:.3f} s")
    st = extras.get("strided", {})
    if "worst_ratio" in st:
        add(f"strided input / ascontiguousarray + run ({st['n']}x{st['n']}, worst view)", st["worst_ratio"],
            AIM_STRIDED_VS_COPY, st["worst_ratio"] >= AIM_STRIDED_VS_COPY and st["correct"])
    mem = extras.get("memory", {})
    if "growth_per_1000_mb" in mem:
        add("resident memory growth per 1,000 distinct builds (MB)", mem["growth_per_1000_mb"], mem["aim_mb"],
            mem["growth_per_1000_mb"] < mem["aim_mb"], f"from {mem['builds']} builds")
    return out


def format_table(rows: list[dict], ceilings: dict, extras: dict, aim_rows: list[dict]) -> str:
    m = ceilings["machine"]
    lines = [f"machine: {m}",
             f"load average: {ceilings.get('loadavg_start')} at start, {ceilings.get('loadavg_end')} at end",
             f"ceilings: copy bandwidth {ceilings['copy_gbs']:.1f} GB/s, numpy BLAS {ceilings['blas_gflops']:.1f} "
             f"GFLOP/s; our kernels and torch on {ceilings['threads']} threads",
             "times: best of the interleaved rounds; x numpy / x torch = peer time / our time (>1: we are faster);"
             " par x = hand schedule on all threads vs one", ""]
    hdr = f"{'kernel':<12} {'size':<20} {'numpy ms':>9} {'torch ms':>9} | {'sched':<7} {'ours ms':>9} " \
          f"{'x numpy':>8} {'x torch':>8} {'GFLOP/s':>8} {'GB/s':>7} {'par x':>6} {'compile s':>9} ok"
    lines += [hdr, "-" * len(hdr)]
    nan = float("nan")
    for r in rows:
        for label in ("default", "auto", "hand"):
            d = r.get(label, {})
            base = f"{r['kernel']:<12} {r['size']:<20} {r['numpy_s'] * 1e3:>9.3f} " \
                   f"{(r['torch_s'] * 1e3 if r.get('torch_s') else nan):>9.3f} | {label:<7} "
            if "error" in d:
                lines.append(base + f"ERROR {d['error'][:70]}")
                continue
            if "skipped" in d:
                lines.append(base + f"skipped: {d['skipped']}")
                continue
            if "time_s" not in d:
                continue
            lines.append(base + f"{d['time_s'] * 1e3:>9.3f} {d['vs_numpy']:>8.2f} "
                         f"{(d['vs_torch'] if d['vs_torch'] else nan):>8.2f} "
                         f"{(d['gflops'] or 0):>8.2f} {d['gbs']:>7.2f} {d.get('parallel_speedup', nan):>6.2f} "
                         f"{d['compile_s']:>9.3f} {'yes' if d['correct'] else 'NO'}")
        if "copy_gbs" in r:
            lines.append(f"{'':<12} {'':<20} copies of the same bytes, timed with it: numpy {r['copy_numpy_gbs']:.1f} "
                         f"GB/s" + (f", torch {r['copy_torch_gbs']:.1f} GB/s" if "copy_torch_gbs" in r else ""))
    cc = extras.get("compile_and_call", {})
    if "compile_median_s" in cc:
        lines.append(f"\ncompile time (elementwise, LoopNest -> callable): median "
                     f"{cc['compile_median_s'] * 1e3:.1f} ms; per-call overhead of a tiny kernel: "
                     f"{cc['call_overhead_s'] * 1e6:.1f} us")
    imp = extras.get("import", {})
    if "import_s" in imp:
        lines.append(f"import te, loopnest, codegen in a fresh interpreter: {imp['import_s'] * 1e3:.0f} ms "
                     f"(the interpreter alone {imp['interpreter_s'] * 1e3:.0f} ms, with numpy and ml_dtypes "
                     f"{imp['third_party_s'] * 1e3:.0f} ms)")
    ps = extras.get("parallel_speedup", {})
    if "speedup" in ps:
        lines.append(f"parallel speed-up: {ps['kernel']}: {ps['one_thread_s'] * 1e3:.2f} ms on 1 thread, "
                     f"{ps['all_threads_s'] * 1e3:.2f} ms on {ps['threads']}: x{ps['speedup']:.2f}"
                     + (f" (PyTorch's matmul, timed with it: x{ps['torch_speedup']:.2f})" if "torch_speedup" in ps
                        else ""))
    bc = extras.get("bounds_check", {})
    if "checks_s" in bc:
        lines.append(f"call-time checks (4-argument kernel, {bc['checks']} checks): {bc['checked_s'] * 1e6:.2f} us "
                     f"per call with bounds_check, {bc['unchecked_s'] * 1e6:.2f} us without; the checks alone "
                     f"{bc['guard_s'] * 1e6:.2f} us")
    st = extras.get("strided", {})
    if "kinds" in st:
        lines.append(f"strided inputs ({st['n']}x{st['n']} float32; contiguous {st['contiguous_s'] * 1e3:.3f} ms): "
                     + ", ".join(f"{name} {k['strided_s'] * 1e3:.3f} ms vs ascontiguousarray + run "
                                 f"{k['copy_then_run_s'] * 1e3:.3f} ms" for name, k in st["kinds"].items()))
    mem = extras.get("memory", {})
    if "growth_per_1000_mb" in mem:
        lines.append(f"resident memory: {mem['builds']} distinct builds (in-memory cache on) grew it by "
                     f"{mem['growth_mb']:.1f} MB: {mem['growth_per_1000_mb']:.1f} MB per 1,000 builds")
    ir = extras.get("ireval", {})
    if "error" not in ir and "elements_per_s" in ir:
        lines.append(f"IREval throughput (512x512 elementwise): {ir['elements_per_s'] / 1e6:.2f} M stored elements/s")
    if aim_rows:
        lines += ["", "aims (issue 4), measured in this run:"]
        for a in aim_rows:
            lines.append(f"  [{'met' if a['met'] else 'NOT met'}] {a['aim']}: {a['value']:.4g} "
                         f"(target {'<=' if any(w in a['aim'] for w in ('time', 'overhead', 'memory')) else '>='} "
                         f"{a['target']:g})"
                         + (f"  {a['note']}" if a["note"] else ""))
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return False
    labels, default, auto, hand, torch = [], [], [], [], []
    for r in rows:
        labels.append(f"{r['kernel']}\n{r['size']}")
        default.append(r.get("default", {}).get("vs_numpy", 0) or 0)
        auto.append(r.get("auto", {}).get("vs_numpy", 0) or 0)
        hand.append(r.get("hand", {}).get("vs_numpy", 0) or 0)
        torch.append(r["numpy_s"] / r["torch_s"] if r.get("torch_s") else 0)
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(labels)), 4))
    w = 0.2
    ax.bar(x - 1.5 * w, default, w, label="ours, default schedule")
    ax.bar(x - 0.5 * w, auto, w, label="ours, auto_schedule")
    ax.bar(x + 0.5 * w, hand, w, label="ours, hand schedule")
    ax.bar(x + 1.5 * w, torch, w, label="PyTorch eager")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("speed-up over numpy (log scale)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true", help="full sizes (slow) instead of the small defaults")
    p.add_argument("--only", nargs="*", help="kernel names to run", choices=sorted(WORKLOADS))
    p.add_argument("--target", default="llvm", help="codegen target (default llvm)")
    p.add_argument("--rounds", "--repeats", type=int, default=None, dest="rounds",
                   help="timing rounds per kernel (default 7, 5 with --full)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds of timing per kernel and size before rounds are cut (default 4, 30 with --full)")
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--debug", action="store_true", help="print tracebacks of failing schedules")
    args = p.parse_args(argv)
    rounds = args.rounds or (5 if args.full else 7)
    budget = args.budget or (30.0 if args.full else 4.0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    threads = _num_threads(args.target)
    torch = _torch()
    if torch is not None:
        torch.set_num_threads(threads)     # the peer runs on as many threads as our kernels

    print("measuring machine ceilings ...", flush=True)
    ceilings = {"machine": machine_info(), "loadavg_start": _loadavg(), "threads": threads,
                "copy_gbs": copy_bandwidth_gbs(256 << 20 if args.full else 64 << 20),
                "blas_gflops": blas_gflops(1024 if args.full else 512)}
    rows = []
    for name in args.only or list(WORKLOADS):
        w = WORKLOADS[name]
        for size in (w.full if args.full else w.small):
            print(f"  {name} {size} ...", flush=True)
            rows.append(bench_one(w, size, args.target, rounds, budget))
    extras = {}
    try:
        extras["compile_and_call"] = compile_and_call_overhead(args.target)
    except Exception as exc:
        extras["compile_and_call"] = {"error": str(exc)}
    from .bench_import import run as import_run
    extras["import"] = import_run(runs=rounds)
    if args.target == "llvm" and (not args.only or "matmul" in args.only):
        try:
            extras["parallel_speedup"] = parallel_speedup(args.target, 1024, max(rounds, 10))
        except Exception as exc:
            extras["parallel_speedup"] = {"error": f"{type(exc).__name__}: {exc}"}
    if args.target == "llvm":
        from .bench_memory import run as memory_run
        extras["memory"] = memory_run(builds=1000 if args.full else 100, warmup=20)
    if args.target in ("llvm", "ireval"):
        from .bench_checks import run as checks_run
        extras["bounds_check"] = checks_run(args.target)
        from .bench_strided import run as strided_run
        extras["strided"] = strided_run(args.target, n=1024 if args.full else 256, rounds=max(rounds, 3))
    try:
        from .bench_ireval import run as ireval_run
        extras["ireval"] = ireval_run(small=not args.full)
    except Exception as exc:
        extras["ireval"] = {"error": str(exc)}
    ceilings["loadavg_end"] = _loadavg()
    aim_rows = aims(rows, extras, ceilings)
    table = format_table(rows, ceilings, extras, aim_rows)
    print()
    print(table)
    (out / "results.txt").write_text(table + "\n")
    (out / "results.json").write_text(json.dumps({"ceilings": ceilings, "rows": rows, "extras": extras,
                                                  "aims": aim_rows, "target": args.target, "full": args.full},
                                                 indent=1, default=str))
    if plot(rows, out / "speedups.png"):
        print(f"\nplot: {out / 'speedups.png'}")
    print(f"results: {out / 'results.json'}  ({time.perf_counter() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
