"""Compile time, from ``LoopNest`` to a callable: the issue's four aims.

    python -m bench.bench_compile [--repeats 5] [--only matmul ...] [--quick] [--profile NAME]

Each case builds its workload's tensors once, then times, per run, ``LoopNest(outputs)``, the
hand schedule, ``prepare_for_codegen`` and the LLVM build, with the in-memory compile cache
off (``cache=False``; the disk cache is off unless ``TE_LLVM_CACHE_DIR`` is set, and this
module clears it, as it clears ``LOOPNEST_VERIFY``: the verifier after every pass is for
the tests) and nothing kept from the analyses of earlier builds, and reports the
median wall time against the aim, and the median CPU time of the process (on a loaded
machine, waiting for a core adds to the wall time only). ``--quick`` builds small sizes
once (a smoke test: the aims are for the benchmark sizes). ``--profile NAME`` prints the
functions taking the most time in one build of case ``NAME`` (cProfile).

>>> rows = run(quick=True, only=["matmul"])
>>> rows[0]["case"], rows[0]["runs"], rows[0]["median_s"] > 0
('matmul', 1, True)
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass

from codegen import build
from loopnest import LoopNest
from loopnest.analysis.bounds import clear_parsed
from loopnest.analysis.domains import clear_memo
from te.simplify import clear_fixed_points

from .kernels import WORKLOADS

__all__ = ["CASES", "Case", "compile_once", "run", "main"]


@dataclass(frozen=True)
class Case:
    """A compile-time aim: the workload, its benchmark size, a small size (``--quick``) and
    the aim in seconds (median, ``LoopNest`` to callable)."""

    workload: str
    size: object
    quick_size: object
    aim_s: float


CASES: dict[str, Case] = {
    "matmul": Case("matmul", 1024, 64, 0.050),
    "conv2d": Case("conv2d", (1, 64, 56, 56, 64), (1, 8, 12, 12, 8), 0.150),
    "stencil": Case("stencil", (1536, 2560), (16, 40), 0.300),
    "pyramid": Case("pyramid", (1536, 2560), (32, 64), 1.0),
}


def compile_once(spec, schedule) -> tuple[float, float]:
    """(wall, CPU) seconds to build ``spec``'s outputs under ``schedule`` for LLVM, no compile cache and
    nothing kept from analyses or simplifications of earlier builds (``domains.clear_memo``,
    ``bounds.clear_parsed``, ``simplify.clear_fixed_points``): a new program's time.

    >>> w = WORKLOADS["blur"]
    >>> wall, cpu = compile_once(w.make((8, 16)), w.hand_schedule)
    >>> wall > 0 and cpu > 0
    True
    """
    clear_memo()
    clear_parsed()
    clear_fixed_points()
    t0, c0 = time.perf_counter(), time.process_time()
    nest = LoopNest(spec.outputs)
    schedule(nest, spec)
    build(nest, spec.args, target="llvm", cache=False)
    return time.perf_counter() - t0, time.process_time() - c0


def run(repeats: int = 5, quick: bool = False, only: list[str] | None = None) -> list[dict]:
    """Time every case (or those in ``only``): ``repeats`` builds each after one untimed
    warm-up (one build and no warm-up with ``quick``, at the small size). Returns a row per
    case: ``case``, ``size``, ``median_s``, ``best_s``, ``median_cpu_s``, ``runs``, ``aim_s``,
    ``met`` (the median wall time within the aim)."""
    rows = []
    for name in only or list(CASES):
        case = CASES[name]
        w = WORKLOADS[case.workload]
        spec = w.make(case.quick_size if quick else case.size)
        if not quick:
            compile_once(spec, w.hand_schedule)
        runs = [compile_once(spec, w.hand_schedule) for _ in range(1 if quick else repeats)]
        times = [wall for wall, _ in runs]
        med = statistics.median(times)
        rows.append({"case": name, "size": spec.label, "median_s": med, "best_s": min(times),
                     "median_cpu_s": statistics.median(cpu for _, cpu in runs), "runs": len(times),
                     "aim_s": case.aim_s, "met": med <= case.aim_s})
    return rows


def _profile(name: str, quick: bool, top: int = 40) -> None:
    import cProfile
    import pstats
    case = CASES[name]
    w = WORKLOADS[case.workload]
    spec = w.make(case.quick_size if quick else case.size)
    compile_once(spec, w.hand_schedule)
    clear_memo()
    clear_parsed()
    clear_fixed_points()
    prof = cProfile.Profile()
    prof.enable()
    compile_once(spec, w.hand_schedule)
    prof.disable()
    pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(top)
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bench_compile", description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="timed builds per case (median reported)")
    p.add_argument("--only", nargs="*", choices=sorted(CASES), help="cases to run")
    p.add_argument("--quick", action="store_true", help="small sizes, one build each (no aims)")
    p.add_argument("--profile", choices=sorted(CASES), help="print a cProfile of one build of this case")
    args = p.parse_args(argv)
    os.environ.pop("TE_LLVM_CACHE_DIR", None)
    os.environ.pop("LOOPNEST_VERIFY", None)
    if args.profile:
        _profile(args.profile, args.quick)
        return 0
    rows = run(args.repeats, args.quick, args.only)
    print(f"{'case':10} {'size':22} {'median ms':>10} {'best ms':>9} {'cpu ms':>8} {'aim ms':>8}  met")
    for r in rows:
        met = "-" if args.quick else ("yes" if r["met"] else "NO")
        print(f"{r['case']:10} {r['size']:22} {r['median_s'] * 1e3:10.1f} {r['best_s'] * 1e3:9.1f} "
              f"{r['median_cpu_s'] * 1e3:8.1f} {r['aim_s'] * 1e3:8.0f}  {met}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
