"""Tutorial 3: where values are computed and stored: compute_inline, compute_at,
cache_accesses and rfactor.

    python tutorials/03_compute_at_cache_rfactor.py

The story: a blur followed by a row sum. We inline a cheap producer, compute an expensive
one next to its consumer (also when another consumer reads it, and in the tail of a split),
give a loop a local copy of what it reads (also transposed), and split a long
reduction into partial sums that can run in parallel. Every step is checked against the
unscheduled result.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Compute, Reduce, Sum, exp, float32
from loopnest import LoopNest, ScheduleError
from codegen import build

H, W = 12, 40
A = Buffer("A", (H, W + 2), float32)
E = Compute("E", (H, W + 2), lambda i, j: exp(A[i, j] * 0.1))            # expensive producer
Blur = Compute("Blur", (H, W), lambda i, j: (E[i, j] + E[i, j + 1] + E[i, j + 2]) * (1.0 / 3))
S = Reduce("S", (H,), Sum(), lambda i, k: Blur[i, k], (W,))

rng = np.random.default_rng(0)
a = rng.standard_normal((H, W + 2)).astype(np.float32)


def run(nest):
    s = np.empty(H, np.float32)
    build(nest, [A, S], target="ireval")(a, s)
    return s


reference = run(LoopNest([S]))
e = np.exp(a.astype(np.float64) * 0.1)
assert np.allclose(reference, ((e[:, :-2] + e[:, 1:-1] + e[:, 2:]) / 3).sum(axis=1), rtol=1e-5)

# 1. Inline the blur into the sum: no Blur buffer any more.
nest = LoopNest([S])
nest.compute_inline(Blur)
print("== Blur inlined ==")
print(nest)
assert np.allclose(run(nest), reference, rtol=1e-6)

# 2. Compute E per row, inside the sum's row loop: only the row that is needed.
i, k = nest.get_loops_for(S)
nest.compute_at(E, i)
print("\n== E computed at S's row loop ==")
print(nest)
assert np.allclose(run(nest), reference, rtol=1e-6)

# compute_at refuses a site that does not consume the tensor, and says where it is legal:
# without the inlining, S's loop k reads Blur, not E.
other = LoopNest([S])
try:
    other.compute_at(E, other.get_loops_for(S)[1])
    raise AssertionError("compute_at should have been refused")
except ScheduleError as err:
    print("\nrefused:", err)

# 2b. E read by another consumer too (a second output, the first column of each row of E):
# as PyTorch NNC does, E stays computed whole for that reader, and S's row loop computes the
# row it needs into a buffer of its own, E_local (one row, once prepared for codegen).
First = Compute("First", (H,), lambda i: E[i, 0])
nest = LoopNest([S, First])
nest.compute_inline(Blur)
nest.compute_at(E, nest.get_loops_for(S)[0])
print("\n== E also read by First: S's row loop computes a local copy ==")
print(nest)
assert "float32 E_local[1, 42]; // alloc" in str(nest.copy().prepare_for_codegen())
s, first = np.empty(H, np.float32), np.empty(H, np.float32)
build(nest, [A, S, First], target="ireval")(a, s, first)
assert np.allclose(s, reference, rtol=1e-6) and np.allclose(first, e[:, 0], rtol=1e-6)

# 2c. Rows split with a tail: the tail loop is a partial strip, and E is computed there too
# (into a buffer of its own), as Halide computes a producer in every strip.
nest = LoopNest([S])
nest.compute_inline(Blur)
io, ii, it = nest.split_with_tail(nest.get_loops_for(S)[0], 5)
nest.compute_at(E, ii)
print("\n== E computed at the row loop of the 5-row strips and of the 2-row tail ==")
print(nest)
assert np.allclose(run(nest), reference, rtol=1e-6)

# 3. rfactor: split the reduction over k into 4 partial sums, then parallelize them.
nest = LoopNest([S])
nest.compute_inline(Blur)
i, k = nest.get_loops_for(S)
ko, ki, _ = nest.split_with_tail(k, 10)
partial = nest.rfactor(S, ko)
print("\n== rfactor over k_outer: partial sums in", partial.name, "==")
print(nest)
assert np.allclose(run(nest), reference, rtol=1e-5)

# 4. cache_accesses: a local copy of the rows of A that one iteration of i reads.
nest = LoopNest([S])
nest.compute_inline(Blur)
nest.compute_inline(E)
i, k = nest.get_loops_for(S)
local = nest.cache_accesses(A, "A_local", i)
print("\n== A cached per row in", local.name, local.shape, "==")
print(nest)
assert np.allclose(run(nest), reference, rtol=1e-6)

# 5. A transposed copy: order=(1, 0) lays the local copy out with A's dimensions swapped.
#    In a column sum, each iteration of k reads a column of A; its copy is a row, which the
#    loop over i reads contiguously (the automatic scheduler packs B of A @ B.T this way).
C = Reduce("C", (W + 2,), Sum(), lambda k, i: A[i, k], (H,))
nest = LoopNest([C])
k, i = nest.get_loops_for(C)
local = nest.cache_accesses(A, "A_t", k, order=(1, 0))
print("\n== A cached transposed in", local.name, local.shape, "==")
print(nest)
got = np.empty(W + 2, np.float32)
build(nest, [A, C], target="llvm")(a, got)
assert np.allclose(got, a.astype(np.float64).sum(axis=0), rtol=1e-5)
print("OK")
