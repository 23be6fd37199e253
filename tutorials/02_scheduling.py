"""Tutorial 2: scheduling transforms, legality checks and replayable histories.

    python tutorials/02_scheduling.py

The story: a matrix multiply, reshaped step by step. Each transform prints the nest; an
illegal one is refused with a reason and leaves the nest as it was; the history replays
on a fresh nest to the identical result.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Reduce, Sum, float32
from loopnest import LoopNest, ScheduleError
from codegen import build

M = N = K = 24
A = Buffer("A", (M, K), float32)
B = Buffer("B", (K, N), float32)
C = Reduce("C", (M, N), Sum(), lambda i, j, k: A[i, k] * B[k, j], (K,))

nest = LoopNest([C])
i, j, k = nest.get_loops_for(C)
print("== lowered ==")
print(nest)

# An illegal transform: the reduction loop k carries a dependence on C[i, j].
before = str(nest)
try:
    nest.parallelize(k)
except ScheduleError as err:
    print("\nrefused:", err)
assert str(nest) == before and nest.history == []

# Legal ones: split j into vectors of 8 lanes, run rows in parallel.
j_outer, j_inner, j_tail = nest.split_with_tail(j, 8)
assert j_tail is None                      # 8 divides 24
nest.parallelize(i)
nest.vectorize(j_inner)
print("\n== scheduled ==")
print(nest)

# The handles of untouched loops stay valid: i and k are still here.
assert i.exists() and k.exists() and not j.exists()

# Run on the reference interpreter and compare with numpy.
rng = np.random.default_rng(0)
a = rng.standard_normal((M, K)).astype(np.float32)
b = rng.standard_normal((K, N)).astype(np.float32)
c = np.empty((M, N), np.float32)
build(nest, [A, B, C], target="ireval")(a, b, c)
assert np.allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)

# Unrolling late: j_outer stays a loop, marked `unrolled`, and code generation copies its
# body once per iteration (the lowering passes before it see one body: faster compiles than
# nest.unroll(j_outer), which copies it now; the same code).
nest.unroll(j_outer, late=True)
print("\n== j_outer unrolled late ==")
print(nest)
c = np.empty((M, N), np.float32)
build(nest, [A, B, C], target="llvm")(a, b, c)
assert np.allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)

# The schedule is data: JSON that replays on a fresh nest of the same tensors.
trace = nest.history_json()
print("\nhistory:", trace)
replayed = LoopNest([C]).replay(trace)
assert str(replayed) == str(nest)
print("replayed nest is identical")

# Rows that a tile does not divide: 24 rows in tiles of 5. split_with_tail would copy the
# body for the 4 rows left over; split_with_overlap shifts the last tile back (rows 19 to
# 23) so every tile is a full one and the body exists once. Legal here: the rows are
# independent, and each row's C is zeroed before it accumulates, so running rows 19 and 20
# a second time gives the same values.
nest = LoopNest([C])
i, j, k = nest.get_loops_for(C)
i_outer, i_inner = nest.split_with_overlap(i, 5)
print("\n== rows in overlapping tiles of 5 ==")
print(nest)
c = np.empty((M, N), np.float32)
build(nest, [A, B, C], target="llvm")(a, b, c)
assert np.allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)

# Running an iteration twice must change nothing: k accumulates into C, so its iterations
# may not overlap.
try:
    nest.split_with_overlap(nest.get_loops_for(C)[-1], 5)
except ScheduleError as err:
    print("\nrefused:", err)
print("OK")
