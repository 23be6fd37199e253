"""How fast is the reference interpreter? IREval against numpy on the same expressions.

    python bench/bench_ireval.py            # the full run
    python bench/bench_ireval.py --small    # a quick one

The headline kernel is ``B[i, j] = A[i, j] * 2 + 1`` on a 512 x 512 float32 array; the numpy
peer computes the same expression in the same process, and the ratio is IREval time over
numpy time (how many times slower the interpreter is). ``run()`` returns the numbers for a
benchmark driver.

>>> r = run(small=True)                       # doctest: +SKIP
>>> r["elementwise"]["elements_per_s"] > 1e6  # doctest: +SKIP
True
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from codegen import build  # noqa: E402
from loopnest import LoopNest  # noqa: E402
from te import Buffer, Compute, Reduce, Sum, float32  # noqa: E402


def _best_time(fn: Callable[[], None], repeats: int) -> float:
    """The best wall time of ``repeats`` calls (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_elementwise(n: int, m: int, repeats: int, batch: bool = True) -> dict:
    """``B = A * 2 + 1`` (float32): IREval vs numpy."""
    A = Buffer("A", (n, m), float32)
    B = Compute("B", (n, m), lambda i, j: A[i, j] * 2.0 + 1.0)
    k = build(LoopNest([B]), [A, B], target="ireval", batch=batch)
    a = np.random.default_rng(0).random((n, m), dtype=np.float32)
    b = np.empty_like(a)
    out = np.empty_like(a)
    two, one = np.float32(2), np.float32(1)

    def peer():
        np.multiply(a, two, out=out)
        np.add(out, one, out=out)
    t_ir = _best_time(lambda: k(a, b), repeats)
    t_np = _best_time(peer, repeats)
    if not np.array_equal(b, a * two + one):
        raise AssertionError("IREval computed a different result than numpy")
    return {"kernel": "B[i,j] = A[i,j]*2+1", "shape": [n, m], "batch": batch, "ireval_s": t_ir,
            "numpy_s": t_np, "elements_per_s": n * m / t_ir, "slowdown_vs_numpy": t_ir / t_np}


def bench_matmul(n: int, repeats: int) -> dict:
    """``C = A @ B`` (float32) through the interpreter's reduction path vs numpy's BLAS."""
    A = Buffer("A", (n, n), float32)
    Bm = Buffer("B", (n, n), float32)
    C = Reduce("C", (n, n), Sum(), lambda i, j, k: A[i, k] * Bm[k, j], (n,))
    k = build(LoopNest([C]), [A, Bm, C], target="ireval")
    rng = np.random.default_rng(1)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    t_ir = _best_time(lambda: k(a, b, c), repeats)
    t_np = _best_time(lambda: a @ b, repeats)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4)
    return {"kernel": "C = A @ B", "shape": [n, n, n], "ireval_s": t_ir, "numpy_s": t_np,
            "flops_per_s": 2 * n ** 3 / t_ir, "slowdown_vs_numpy": t_ir / t_np}


def run(small: bool = True) -> dict:
    """Run the benchmarks; ``small`` keeps it to a second or so.

    Returns ``{"elementwise": {...}, ...}`` with times in seconds, ``elements_per_s`` (stored
    elements per second) and ``slowdown_vs_numpy`` (IREval time / numpy time, same run).
    """
    res = {"elementwise": bench_elementwise(512, 512, repeats=3 if small else 10)}
    if not small:
        res["elementwise_serial"] = bench_elementwise(64, 64, repeats=2, batch=False)
        res["matmul"] = bench_matmul(64, repeats=2)
    return res


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    for name, r in run(small="--small" in argv).items():
        rate = (f"{r['elements_per_s'] / 1e6:8.2f} M stored elements/s" if "elements_per_s" in r
                else f"{r['flops_per_s'] / 1e6:8.2f} MFLOP/s")
        print(f"{name:20s} {r['kernel']:22s} {str(r['shape']):16s} IREval {r['ireval_s'] * 1e3:9.3f} ms  "
              f"numpy {r['numpy_s'] * 1e3:8.3f} ms  {rate}  ({r['slowdown_vs_numpy']:.1f}x numpy's time)")


if __name__ == "__main__":
    main()
