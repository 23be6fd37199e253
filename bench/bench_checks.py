"""What the call-time checks cost: the per-call time of a tiny 4-argument kernel built with
and without ``bounds_check``, timed round-robin in one run.

    python -m bench.bench_checks

The kernel ``C[i] = T[i] + B[i] * W[i // 2]`` with ``T[i] = A[i] * 2`` an intermediate has
three independent sizes (``A``, ``C``: N; ``B``: M; ``W``: K), so each call checks two
argument regions (``N <= M``, ``(N - 1) // 2 < K``) and one symbolic allocation size (T).
``run()`` returns the times for a benchmark driver; ``checks_s`` is the difference, and
``guard_s`` the checks alone (``Kernel.check_call``).

>>> r = run(target="ireval", rounds=1)
>>> r["checked_calls_raise"], r["checks"]
(True, 3)
"""
from __future__ import annotations

import sys

import numpy as np

from codegen import build
from loopnest import LoopNest
from te import Buffer, Compute, Var, float32, int32

from .harness import time_call, time_interleaved


def _kernel(bounds_check: bool, target: str):
    N, M, K = Var("N", int32), Var("M", int32), Var("K", int32)
    A, B, W = Buffer("A", (N,), float32), Buffer("B", (M,), float32), Buffer("W", (K,), float32)
    T = Compute("T", (N,), lambda i: A[i] * 2.0)
    C = Compute("C", (N,), lambda i: T[i] + B[i] * W[i // 2])
    return build(LoopNest([C]), [A, B, W, C], target=target, bounds_check=bounds_check)


def run(target: str = "llvm", n: int = 16, rounds: int = 7) -> dict:
    """Per-call seconds (best of ``rounds`` round-robin samples) with and without checks."""
    checked, unchecked = _kernel(True, target), _kernel(False, target)
    a, b, w, c = (np.ones(n, np.float32), np.ones(n, np.float32), np.ones(n // 2, np.float32),
                  np.empty(n, np.float32))
    t = time_interleaved({"checked": lambda: checked(a, b, w, c), "unchecked": lambda: unchecked(a, b, w, c)},
                         rounds=rounds)
    sizes = [n, n, n // 2]       # size_order: N (A), M (B), K (W)
    guard = time_call(lambda: checked.check_call(sizes), repeats=rounds)
    try:
        checked(a, b[:n - 1], w, c)             # M < N: refused before anything runs
        raised = False
    except ValueError:
        raised = True
    return {"target": target, "n": n, "checked_s": t["checked"].best, "unchecked_s": t["unchecked"].best,
            "checks_s": t["checked"].best - t["unchecked"].best, "guard_s": guard.best,
            "checks": len(checked._bounds_checks) + len(checked._alloc_checks), "checked_calls_raise": raised}


def main() -> int:
    r = run()
    print(f"{r['target']}: per call {r['checked_s'] * 1e6:.2f} us with bounds_check, {r['unchecked_s'] * 1e6:.2f} us "
          f"without ({r['checks_s'] * 1e6:+.2f} us); the {r['checks']} checks alone: {r['guard_s'] * 1e6:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
