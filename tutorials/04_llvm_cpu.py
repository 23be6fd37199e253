"""Tutorial 4: compile for the CPU with LLVM, check against the interpreter, and time it.

    python tutorials/04_llvm_cpu.py

The story: a fused elementwise chain ``y = max(a * 2 + b, 0) * c - 1``, first unscheduled,
then vectorized and parallelized; both compiled through LLVM, checked against IREval and
numpy, and timed against numpy.
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Compute, Var, float32, int32, maximum
from loopnest import LoopNest
from codegen import build

N = Var("N", int32)
A, B, C = (Buffer(name, (N,), float32) for name in "ABC")
Y = Compute("Y", (N,), lambda i: maximum(A[i] * 2.0 + B[i], 0.0) * C[i] - 1.0)

n = 1 << 20
rng = np.random.default_rng(0)
a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))

# The reference: IREval on the unscheduled nest.
y_ref = np.empty(n, np.float32)
build(LoopNest([Y]), [A, B, C, Y], target="ireval")(a, b, c, y_ref)

# A schedule: chunks of 4096 in parallel, 8-lane vectors inside.
nest = LoopNest([Y])
(i,) = nest.get_loops_for(Y)
outer, inner, tail = nest.split_with_tail(i, 4096)
nest.parallelize(outer)
_, lanes, _ = nest.split_with_tail(inner, 8)
nest.vectorize(lanes)
print(nest)

t0 = time.perf_counter()
kernel = build(nest, [A, B, C, Y], target="llvm")
print(f"\ncompiled in {(time.perf_counter() - t0) * 1e3:.1f} ms")
print("LLVM IR (first lines):")
print("\n".join(kernel.source.splitlines()[:12]))

y = np.empty(n, np.float32)
kernel(a, b, c, y)
# LLVM fuses a multiply and the add using it into one FMA (one rounding instead of two), so
# the last bits may differ from IREval; build(..., fp_contract=False) rounds every operation.
# Here (m = max(a * 2 + b, 0); a * 2 is exact) only the rounding of m * c before "- 1" is
# skipped: an error of at most 2**-24 * |m * c| <= 6e-8 * (|y| + 1), inside the tolerance.
assert np.allclose(y, y_ref, rtol=1e-6, atol=1e-6), "LLVM and IREval disagree"
exact = np.empty(n, np.float32)
build(nest, [A, B, C, Y], target="llvm", fp_contract=False)(a, b, c, exact)
assert np.array_equal(exact, y_ref), "LLVM without contraction rounds as IREval does"
want = np.maximum(a.astype(np.float64) * 2 + b, 0) * c - 1
assert np.allclose(y, want, rtol=1e-6, atol=1e-6)


def best_of(fn, repeats=20):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


ours = best_of(lambda: kernel(a, b, c, y))
theirs = best_of(lambda: np.maximum(a * 2 + b, 0) * c - 1)
print(f"\nours {ours * 1e3:.3f} ms, numpy {theirs * 1e3:.3f} ms: {theirs / ours:.1f}x numpy's speed")
print("OK")
