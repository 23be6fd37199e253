"""Tutorial 18: software prefetch for kernels that pass over a row several times.

    python tutorials/18_prefetch.py

The story: a layer normalization reads each row of X three times (its mean, its variance,
then the normalized row). The first pass waits for the row to come from memory (or a far
cache); the two others run from L1 while the memory system sits idle. ``nest.prefetch(X,
row)`` asks for the next row while this one is worked on: beside the last access of X in
the row loop, a prefetch of the element the next iteration of ``row`` will read, one per
vector, so the next row's cache lines arrive spread over this row's work. For the output,
``nest.prefetch(Y, row)`` takes the next row's lines for writing before the stores need
them. A prefetch is a hint: the values are the same with or without it, on every backend
(IREval checks that each prefetch stays inside its buffer; the CUDA backend drops them).

We schedule the kernel by hand, look at where the prefetches went, check the values against
numpy, time the kernel with and without them, and see ``auto_schedule`` make the same choice.
"""
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Compute, Reduce, Sum, float32, rsqrt
from loopnest import LoopNest, host_target
from loopnest.auto.templates import vector_reduction, vectorize_split
from codegen import build

M, N = (256, 1024) if os.environ.get("TUTORIAL_SMALL") else (4096, 1024)
lanes = host_target().lanes("float32")

# 1. The computation: each row of X normalized to mean 0 and variance 1.
X = Buffer("X", (M, N), float32)
mean = Reduce("mean", (M,), Sum(), lambda i, k: X[i, k] * (1.0 / N), (N,))
var = Reduce("var", (M,), Sum(), lambda i, k: (X[i, k] - mean[i]) * (X[i, k] - mean[i]) * (1.0 / N), (N,))
Y = Compute("Y", (M, N), lambda i, j: (X[i, j] - mean[i]) * rsqrt(var[i] + 1e-5))


# 2. A schedule: mean and variance computed inside the row loop, each summing 4 vectors of
#    partial sums (folded into one vector at the end of the row), the normalized row in
#    native vectors, the rows in parallel; with or without the prefetches.
def schedule(prefetch: bool) -> LoopNest:
    nest = LoopNest([Y])
    row = nest.get_loops_for(Y)[0]
    for t in (var, mean):
        nest.compute_at(t, row)
    for t in (mean, var):
        vector_reduction(nest, t, row, 4 * lanes, fold=lanes)
    vectorize_split(nest, nest.get_loops_for(Y)[-1], lanes)
    nest.parallelize(row)
    if prefetch:
        nest.prefetch(X, row)       # the next row of X: read
        nest.prefetch(Y, row)       # the next row of Y: to be written
    return nest


nest = schedule(prefetch=True)
prepared = str(nest.copy().prepare_for_codegen())
print("where the prefetches went (the normalized row's vector loop):")
print("\n".join(line for line in prepared.splitlines() if "prefetch" in line))

# 3. The values: the same as numpy's, with the prefetches on LLVM and on IREval.
rng = np.random.default_rng(0)
x = rng.standard_normal((M, N)).astype(np.float32)
v = x.astype(np.float64)
want = (v - v.mean(axis=1, keepdims=True)) / np.sqrt(v.var(axis=1, keepdims=True) + 1e-5)
fast, plain = build(nest, [X, Y], target="llvm"), build(schedule(prefetch=False), [X, Y], target="llvm")
for kernel in (fast, plain, build(nest, [X, Y], target="ireval")):
    y = np.full((M, N), np.nan, np.float32)
    kernel(x, y)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


# 4. The time, both kernels in this process (the gain depends on where X lives: a row from
#    memory or L3 gains, a problem that fits in L2 does not).
def best_of(kernel, repeats=30):
    y = np.empty((M, N), np.float32)
    kernel(x, y)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        kernel(x, y)
        times.append(time.perf_counter() - t0)
    return min(times)


with_pf, without = best_of(fast), best_of(plain)
gbs = 2 * M * N * 4 / 1e9
print(f"\n{M} x {N}: with prefetch {with_pf * 1e3:.3f} ms ({gbs / with_pf:.1f} GB/s), "
      f"without {without * 1e3:.3f} ms ({gbs / without:.1f} GB/s)")

# 5. auto_schedule prefetches the next row where a row loop passes over an input several
#    times and the data does not fit in L2.
report = LoopNest([Y]).auto_schedule()
print("\nauto_schedule:")
print(report)
print("OK")
