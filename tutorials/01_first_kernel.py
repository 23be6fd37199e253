"""Tutorial 1: define a computation, lower it to a loop nest, print it, and run it.

    python tutorials/01_first_kernel.py

The story: a row-wise "scale, shift and sum" over an N x 64 matrix, with N symbolic.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Compute, Reduce, Sum, Var, float32, int32
from loopnest import LoopNest
from codegen import build

# 1. Define: a symbolic size, an input buffer, an intermediate and a reduction.
N = Var("N", int32)
A = Buffer("A", (N, 64), float32)
B = Compute("B", (N, 64), lambda i, j: A[i, j] * 2.0 + 1.0)
C = Reduce("C", (N,), Sum(), lambda i, k: B[i, k], (64,))

# 2. Lower: one loop nest per tensor, in dependency order.
nest = LoopNest([C])
print("== the loop nest ==")
print(nest)

# 3. Prepare for codegen: flat indices, B allocated inside the kernel.
nest.prepare_for_codegen()
print("\n== prepared for codegen ==")
print(nest)

# 4. Build with the reference interpreter and run on numpy arrays; N comes from A's shape.
kernel = build(nest, [A, C, N], target="ireval")
a = np.random.default_rng(0).standard_normal((10, 64)).astype(np.float32)
c = np.empty(10, np.float32)
kernel(a, c)

# 5. Compare with numpy in float64.
reference = (a.astype(np.float64) * 2 + 1).sum(axis=1)
print("\nC[:4] =", c[:4])
print("max |error| vs numpy float64:", float(np.max(np.abs(c - reference))))
assert np.allclose(c, reference, rtol=1e-5, atol=1e-4)
print("OK")
