"""Tutorial 15: loop nests written by hand -- a scan, an in-place update, a histogram.

    python tutorials/15_statement_nests.py

The story: some kernels are not one expression per output element. A prefix sum reads the
element it wrote one iteration earlier, an in-place update reads what it overwrites, and a
histogram adds into a bin that the data chooses. They are written as statements -- ``For``,
``Store``, ``Block``, ``Cond``, ``Let`` -- and given to ``LoopNest(stmt, outputs=[...])``
(NNC's ``LoopNest(stmt, output_buffers)``). The nest is scheduled with the same transforms
and the same dependence analysis as a nest of tensors: a transform that would change the
result is refused, naming the dependence. The history replays on a nest built from the same
statement. The histogram's scatter then runs in parallel once ``privatize`` gives each chunk
of its loop its own copy of the bins (OpenMP's reduction clause); IREval's ``check_races``
shows that its chunks share nothing, and names the race of a loop parallelized without the
check. Last, a histogram bin outside its buffer: IREval and LLVM stop with IndexError.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Var, cast, float32, int32
from loopnest import LoopNest, ScheduleError
from loopnest.stmt import Block, Cond, For, Let, Store
from codegen import build

TARGETS = ("ireval", "llvm")
N, NB = 1000, 16
rng = np.random.default_rng(0)

# -- 1. a prefix sum: B[0] = A[0]; B[i + 1] = B[i] + A[i + 1] ------------------------------
A = Buffer("A", (N,), float32)
B = Buffer("B", (N,), float32)
i = Var("i")
scan = Block([Store(B, (0,), A[0]),
              For(i, 0, N - 1, Store(B, (i + 1,), B[i] + A[i + 1]))])
nest = LoopNest(scan, outputs=[B])
print(nest)
print("inputs:", [b.name for b in nest.inputs], "outputs:", [b.name for b in nest.outputs])
try:
    nest.parallelize(i)
except ScheduleError as e:              # each iteration reads what the previous one wrote
    print("refused:", e)
outer, inner, tail = nest.split_with_tail(i, 8)   # legal: the iterations keep their order
nest.unroll(inner)
a = rng.uniform(-1, 1, N).astype(np.float32)
for target in TARGETS:
    b = build(nest, [A, B], target=target)(a)     # B is written before it is read: allocated
    assert np.allclose(b, np.cumsum(a, dtype=np.float64), atol=1e-3)
    print(f"{target:6} prefix sum of {N} floats matches numpy")
same = LoopNest(scan, outputs=[B]).replay(nest.history_json())
assert str(same) == str(nest)
print("history:", nest.history_json())

# -- 2. an in-place update with Let and Cond: every iteration is independent ------------
X = Buffer("X", (N,), float32)
t = Var("t", float32)
update = For(i, 0, N, Let(t, X[i] * 2.0, Cond(t > 1.0, Store(X, (i,), t - 1.0), Store(X, (i,), t))))
nest = LoopNest(update, outputs=[X])
outer, inner, _ = nest.split_with_tail(i, 8)
nest.parallelize(outer)
nest.vectorize(inner)
print(nest)
x0 = rng.uniform(-1, 1, N).astype(np.float32)
want = np.where(x0 * 2 > 1, x0 * 2 - 1, x0 * 2)
for target in TARGETS:
    x = x0.copy()
    build(nest, [X], target=target)(x)      # X is read on entry: the caller passes it
    assert np.array_equal(x, want)
    print(f"{target:6} in-place update: exact")

# -- 3. a histogram: the bin comes from the data ---------------------------------------
V = Buffer("V", (N,), float32)
H = Buffer("H", (NB,), int32)
bin_, k = Var("bin"), Var("k", int32)
hist = Block([For(bin_, 0, NB, Store(H, (bin_,), 0)),
              For(i, 0, N, Let(k, cast(V[i] * float(NB), int32), Store(H, (k,), H[k] + 1)))])
nest = LoopNest(hist, outputs=[H])
for op in (nest.parallelize, nest.vectorize):
    try:
        op(i)      # two iterations may add into one bin: a write with an unknown index may touch any
    except ScheduleError as e:
        print("refused:", e)
nest.vectorize(bin_)                    # the zeroing loop carries nothing
outer, inner, _ = nest.split_with_tail(i, 4)
nest.unroll(inner)
print(nest)
v = rng.uniform(0, 1, N).astype(np.float32)
for target in TARGETS:
    h = np.zeros(NB, np.int32)
    build(nest, [V, H], target=target)(v, h)
    assert (h == np.bincount((v * NB).astype(np.int32), minlength=NB)).all()
    print(f"{target:6} histogram of {N} values in {NB} bins matches numpy")

# -- 4. a parallel histogram: a private copy of the bins per chunk ------------------------
# Every update of H in loop i is H[k] = H[k] + 1 (one associative and commutative operator,
# at one index, H read nowhere else), so privatize splits i into chunks, each adding into
# its own copy of H (set to 0 first), and adds the copies into H after the loop. The chunks
# share nothing: the chunk loop is parallel. Integer counts are exact in any order.
par = LoopNest(hist, outputs=[H])
chunks = par.privatize(H, i, parts=4, parallel=True)     # parts=None: this machine's cores
print(par)
for target in TARGETS:
    h = np.zeros(NB, np.int32)
    build(par, [V, H], target=target)(v, h)
    assert (h == np.bincount((v * NB).astype(np.int32), minlength=NB)).all()
    print(f"{target:6} parallel histogram ({chunks.name}: 4 chunks) matches numpy")
try:
    par.privatize(H, bin_)              # the zeroing loop stores, it does not accumulate
except ScheduleError as e:
    print("refused:", e)
assert str(LoopNest(hist, outputs=[H]).replay(par.history_json())) == str(par)
# IREval's check_races records which iterations of a parallel loop touch each element: the
# chunks share nothing. The escape hatch parallelize(..., check=False) skips the dependence
# check; there the race a serial run hides is named.
from codegen.ireval import DataRaceError
build(par, [V, H], target="ireval", check_races=True)(v, np.zeros(NB, np.int32))
unchecked = LoopNest(hist, outputs=[H])
unchecked.parallelize(unchecked.loop("i"), check=False)
try:
    build(unchecked, [V, H], target="ireval", check_races=True)(v, np.zeros(NB, np.int32))
    raise AssertionError("the race on H was not caught")
except DataRaceError as e:
    print("race:", str(e).split(";")[0])

# -- 5. a bin outside the histogram -----------------------------------------------------
# Bounds inference cannot bound H[k] (k is loaded data), so the call-time bounds checks leave
# it out; the lowering pass guard_data_dependent_indices wraps each data-dependent index in a
# check of its dimension (check_index in the pass dumps), which IREval and the LLVM kernel run
# as they go (build(..., bounds_check=False) removes those checks).
v[10] = 1.5
for target in TARGETS:
    try:
        build(nest, [V, H], target=target)(v, np.zeros(NB, np.int32))
        raise AssertionError("an out-of-range bin was not caught")
    except IndexError as e:
        print(f"{target:6} {e}")
print("OK")
