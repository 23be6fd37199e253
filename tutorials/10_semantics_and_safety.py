"""Tutorial 10: one meaning on every backend, and kernels that refuse bad calls.

    python tutorials/10_semantics_and_safety.py

The story: the language's edge cases (integer division by zero, INT_MIN / -1, signed zeros
in maximum) give the same values on IREval and LLVM, because a lowering pass spells them out
before any printer sees the IR (docs/semantics.md has the rules); the pass dumps show it.
Then the safety net: a kernel whose reads leave its input for some sizes is checked when it
is called, before anything runs; one that leaves it for every size is refused at build; an
intermediate too large to allocate is a MemoryError, not a crash.
"""
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Compute, Var, float32, int32, maximum
from loopnest import LoopNest
from loopnest.passes import legalize_for_target
from codegen import BuildError, build

# -- 1. edge cases: the same values everywhere -------------------------------------------
A = Buffer("A", (4,), int32)
B = Buffer("B", (4,), int32)
Q = Compute("Q", (4,), lambda i: A[i] / B[i])
a = np.array([7, -7, np.iinfo(np.int32).min, 9], np.int32)
b = np.array([0, 2, -1, 3], np.int32)
results = {}
for target in ("ireval", "llvm"):
    q = np.zeros(4, np.int32)
    build(LoopNest([Q]), [A, B, Q], target=target)(a, b, q)
    results[target] = q.tolist()
    print(f"{target:6} A / B = {q.tolist()}")
assert results["ireval"] == results["llvm"] == [0, -3, np.iinfo(np.int32).min, 3]

# What the LLVM backend is given: the guard is in the IR, not in the printer.
prepared = LoopNest([Q]).prepare_for_codegen()
print("== after guard_int_division ==")
print(legalize_for_target(prepared, "llvm"))

X = Buffer("X", (2,), float32)
M = Compute("M", (2,), lambda i: maximum(X[i], 0.0))
for target in ("ireval", "llvm"):
    m = np.zeros(2, np.float32)
    build(LoopNest([M]), [X, M], target=target)(np.array([-0.0, np.nan], np.float32), m)
    print(f"{target:6} maximum([-0.0, nan], 0.0) = {[repr(float(v)) for v in m]}")
    assert repr(float(m[0])) == "0.0" and np.isnan(m[1])      # IEEE 754-2019: -0.0 < +0.0

# -- 2. bounds checks -----------------------------------------------------------------
N = Var("N", int32)
W = Buffer("W", (8,), float32)
Y = Compute("Y", (N,), lambda i: W[i] * 2.0)                 # reads W[0 .. N-1]
k = build(LoopNest([Y]), [W, Y], target="llvm")
y = np.zeros(8, np.float32)
k(np.ones(8, np.float32), y)                                 # N = 8: fine
try:
    k(np.ones(8, np.float32), np.zeros(9, np.float32))       # N = 9 would read W[8]
    raise AssertionError("the out-of-range call was not refused")
except ValueError as e:
    print("refused at the call:", str(e).split(";")[0])

S = Compute("S", (8,), lambda i: W[i + 1])                   # W[8] for every size
try:
    build(LoopNest([S]), [W, S], target="llvm")
    raise AssertionError("the out-of-range kernel was built")
except BuildError as e:
    print("refused at build:", str(e).split(":")[1].strip()[:70], "...")

# -- 3. allocations that cannot be made -------------------------------------------------
T = Compute("T", (N, N, N), lambda i, j, l: W[0] + 1.0)      # an intermediate of N^3 floats
R = Compute("R", (N,), lambda i: T[i, 0, 0] * 2.0)
k = build(LoopNest([R]), [W, R, N], target="llvm", bounds_check=False)
try:
    k(np.ones(8, np.float32), np.zeros(2**21, np.float32), 2**21)
    raise AssertionError("the allocation was not refused")
except MemoryError as e:
    print("refused before running:", str(e)[:90], "...")

# -- 4. every lowering step can be dumped ----------------------------------------------
out = io.StringIO()
from loopnest.passes import run_passes
run_passes(LoopNest([Q]), dump=True, out=out)
steps = [line for line in out.getvalue().splitlines() if line.startswith("// ---- after")]
print("lowering steps:", [s.split()[3] for s in steps])
print("OK")
