"""What a strided input costs: a kernel called with non-contiguous views (a step slice, a
transpose, negative strides) against the caller copying them with ``np.ascontiguousarray``
and calling with the copies, and against a contiguous input, timed round-robin in one run.

    python -m bench.bench_strided

The kernel is ``C[i, j] = A[i, j] * 2 + B[i, j]`` on ``n x n`` float32 (B contiguous).
A strided input is bound through one contiguous copy per call (``codegen.kernel.Kernel``),
so the aim is ``ratio >= 1`` within the timing noise: the strided call is as fast as the
caller's copy-then-run (``ratio`` is copy-then-run time / strided time, per kind of view).

>>> r = run(target="ireval", n=8, rounds=1)
>>> sorted(r["kinds"]), r["correct"]
(['negative', 'step', 'transpose'], True)
"""
from __future__ import annotations

import sys

import numpy as np

from codegen import build
from loopnest import LoopNest
from te import Buffer, Compute, Var, float32, int32

from .harness import time_interleaved


def _kernel(target: str):
    N, M = Var("N", int32), Var("M", int32)
    A, B = Buffer("A", (N, M), float32), Buffer("B", (N, M), float32)
    C = Compute("C", (N, M), lambda i, j: A[i, j] * 2.0 + B[i, j])
    return build(LoopNest([C]), [A, B, C], target=target)


def _views(n: int) -> dict:
    base = np.random.default_rng(0).standard_normal((2 * n, 2 * n)).astype(np.float32)
    return {"step": base[::2, ::2], "transpose": base[:n, :n].T, "negative": base[::-2, ::-2]}


def run(target: str = "llvm", n: int = 1024, rounds: int = 7) -> dict:
    """Per-call seconds (best of ``rounds`` round-robin samples) of each kind of strided
    input, of copy-then-run, and of a contiguous input."""
    k = _kernel(target)
    b = np.ones((n, n), np.float32)
    c = np.empty((n, n), np.float32)
    views = _views(n)
    contiguous = np.ascontiguousarray(views["step"])
    t = time_interleaved({"contiguous": lambda: k(contiguous, b, c)}, rounds=rounds)
    for name, v in views.items():
        # one pair per group: each of the two runs right after the other, so neither finds the
        # view's memory in cache more often than the other
        t.update(time_interleaved({f"{name}_strided": lambda v=v: k(v, b, c),
                                   f"{name}_copy_then_run": lambda v=v: k(np.ascontiguousarray(v), b, c)},
                                  rounds=rounds))
    correct = True
    for v in views.values():
        k(v, b, c)
        correct &= bool(np.allclose(c, v * 2 + b, rtol=1e-6))
    kinds = {name: {"strided_s": t[f"{name}_strided"].best, "copy_then_run_s": t[f"{name}_copy_then_run"].best,
                    "ratio": t[f"{name}_copy_then_run"].best / t[f"{name}_strided"].best} for name in views}
    return {"target": target, "n": n, "contiguous_s": t["contiguous"].best, "kinds": kinds, "correct": correct,
            "worst_ratio": min(r["ratio"] for r in kinds.values())}


def main() -> int:
    r = run()
    print(f"{r['target']}, {r['n']}x{r['n']} float32: contiguous input {r['contiguous_s'] * 1e3:.3f} ms per call")
    for name, k in r["kinds"].items():
        print(f"  {name:<10} strided {k['strided_s'] * 1e3:.3f} ms, ascontiguousarray + run "
              f"{k['copy_then_run_s'] * 1e3:.3f} ms: x{k['ratio']:.2f}")
    print("correct" if r["correct"] else "WRONG RESULTS")
    return 0 if r["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
