"""Resident memory kept by distinct LLVM builds: what a tuning run, which builds thousands
of kernels and drops them, costs in memory.

    python -m bench.bench_memory [--builds 1000] [--no-cache]

Each build compiles a different elementwise kernel (a different constant, so every build is a
new entry of the in-memory compile cache, which keeps the object code of its last
``MEMORY_CACHE_SIZE`` entries) and drops it. The resident set size is read before and after
(after a few warm-up builds, which load LLVM's code generator and fill Python's caches), and
the growth scaled to 1,000 builds; the aim is under 20 MB.

>>> r = run(builds=5, warmup=1, cache=False)
>>> r["builds"], r["cache"], r["growth_per_1000_mb"] >= 0 or r["growth_per_1000_mb"] < 0
(5, False, True)
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time

from codegen import build
from loopnest import LoopNest
from te import Buffer, Compute, float32

AIM_MB_PER_1000 = 20.0


def rss_mb() -> float:
    """This process's resident set size in MB (``/proc/self/statm``; elsewhere the peak from
    ``getrusage``, an upper bound).

    >>> rss_mb() > 0
    True
    """
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def _build(k: int, cache: bool, target: str):
    A = Buffer("A", (256,), float32)
    B = Compute("B", (256,), lambda i: A[i] * (1.0 + k * 1e-6) + 1.0)
    return build(LoopNest([B]), [A, B], target=target, cache=cache)


def run(builds: int = 1000, cache: bool = True, warmup: int = 50, target: str = "llvm") -> dict:
    """Build ``builds`` distinct kernels (after ``warmup`` others) and report the growth of the
    resident set: ``growth_mb`` in all, ``growth_per_1000_mb`` scaled to 1,000 builds."""
    for k in range(warmup):
        _build(-1 - k, cache, target)
    gc.collect()
    start = rss_mb()
    t0 = time.perf_counter()
    for k in range(builds):
        _build(k, cache, target)
    seconds = time.perf_counter() - t0
    gc.collect()
    end = rss_mb()
    growth = end - start
    return {"target": target, "builds": builds, "cache": cache, "rss_start_mb": start, "rss_end_mb": end,
            "growth_mb": growth, "growth_per_1000_mb": growth * 1000 / builds,
            "kb_per_build": growth * 1024 / builds, "build_s": seconds / builds, "aim_mb": AIM_MB_PER_1000}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bench_memory", description=__doc__.splitlines()[0])
    p.add_argument("--builds", type=int, default=1000, help="distinct kernels to build (default 1000)")
    p.add_argument("--no-cache", action="store_true", help="build with cache=False (no in-memory compile cache)")
    p.add_argument("--target", default="llvm")
    args = p.parse_args(argv)
    r = run(args.builds, cache=not args.no_cache, target=args.target)
    met = "met" if r["growth_per_1000_mb"] < r["aim_mb"] else "NOT met"
    print(f"{r['target']}, cache={r['cache']}: {r['builds']} distinct builds grew the resident set from "
          f"{r['rss_start_mb']:.1f} MB to {r['rss_end_mb']:.1f} MB: {r['growth_per_1000_mb']:.1f} MB per 1,000 builds "
          f"({r['kb_per_build']:.1f} KB each; aim < {r['aim_mb']:g} MB: {met}); {r['build_s'] * 1e3:.1f} ms per build")
    return 0


if __name__ == "__main__":
    sys.exit(main())
