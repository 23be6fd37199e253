"""Tutorial 16: a fast schedule without writing one: ``nest.auto_schedule()``.

    python tutorials/16_auto_schedule.py

The story: we define a matmul followed by a row softmax, ask the nest to schedule itself
for this CPU (its vector width, vector registers and cores are read from the host into a
``loopnest.Target``), print what it chose for each tensor and why, build it, check it
against numpy, and time it against the unscheduled nest. Then the same computation for
another CPU (an AVX2 target: 8 float lanes instead of 16), and ``build(...,
schedule="auto")``, which does all of it in one call. No search is involved: the schedule is
a deterministic function of the computation and the target, chosen in a fraction of a second.
Last, other shapes: a linear layer, column and whole-array sums, and a convolution whose
register tile runs along its output channels or its columns depending on the vector width.
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Compute, Max, Reduce, Sum, exp, float32
from loopnest import LoopNest, Target, host_target
from codegen import build

M = N = K = 128

# 1. The computation: scores = A @ B, then a softmax of each row of the scores.
A = Buffer("A", (M, K), float32)
B = Buffer("B", (K, N), float32)
S = Reduce("S", (M, N), Sum(), lambda i, j, k: A[i, k] * B[k, j], (K,))
mx = Reduce("mx", (M,), Max(), lambda i, k: S[i, k], (N,))
e = Compute("e", (M, N), lambda i, j: exp(S[i, j] - mx[i]))
total = Reduce("total", (M,), Sum(), lambda i, k: e[i, k], (N,))
P = Compute("P", (M, N), lambda i, j: e[i, j] / total[i])

# 2. The target: what the scheduler knows about this machine (every field can be overridden).
cpu = host_target()
print("target:", cpu)

# 3. Schedule: one line per tensor, the choice and its reason; every step is in the history.
nest = LoopNest([P])
t0 = time.perf_counter()
report = nest.auto_schedule(cpu)
print(f"\nauto_schedule took {1e3 * (time.perf_counter() - t0):.0f} ms, {len(nest.history)} transforms:")
print(report)
assert len(str(report).splitlines()) == len(nest.tensors)
assert str(LoopNest([P]).replay(nest.history_json())) == str(nest)   # the history replays

# 4. Build both, compare with numpy (float64), time them.
rng = np.random.default_rng(0)
a = rng.standard_normal((M, K)).astype(np.float32) * 0.1
b = rng.standard_normal((K, N)).astype(np.float32)
s = a.astype(np.float64) @ b
want = np.exp(s - s.max(axis=1, keepdims=True))
want /= want.sum(axis=1, keepdims=True)

fast = build(nest, [A, B, P], target="llvm")
slow = build(LoopNest([P]), [A, B, P], target="llvm")
for name, kernel in (("auto", fast), ("unscheduled", slow)):
    out = np.zeros((M, N), np.float32)
    kernel(a, b, out)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-6)


def best_of(kernel, n=5):
    out = np.zeros((M, N), np.float32)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        kernel(a, b, out)
        times.append(time.perf_counter() - t0)
    return min(times)


t_fast, t_slow = best_of(fast), best_of(slow)
print(f"\nauto: {1e3 * t_fast:.3f} ms, unscheduled: {1e3 * t_slow:.3f} ms ({t_slow / t_fast:.1f}x)")

# 5. Another CPU: an AVX2 target vectorizes 8 float32 lanes and uses 6 x 2 register tiles.
avx2 = Target(cpu="haswell", vector_bits=256, vector_registers=16, cores=cpu.cores)
other = LoopNest([P])
print("\nfor", avx2.cpu + ":")
print(other.auto_schedule(avx2))
assert "8 lanes" in str(other.auto_schedule_report["S"])

# 6. All of it in one call: build(..., schedule="auto") schedules a copy of the nest.
kernel = build(LoopNest([P]), [A, B, P], target="llvm", schedule="auto")
out = np.zeros((M, N), np.float32)
kernel(a, b, out)
np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-6)

# 7. Other shapes of the same operations: a linear layer (x @ W.T: W is packed transposed,
#    so the tile still reads it in vectors) and a column sum (its rows streamed into sums
#    that stay in L1, or tiles of sums held in registers), and the sum of the whole matrix
#    (one output: the reduction itself is split into a part per core, added at the end).
W = Buffer("W", (N, K), float32)
Lin = Reduce("Lin", (M, N), Sum(), lambda i, j, k: A[i, k] * W[j, k], (K,))
Col = Reduce("Col", (K,), Sum(), lambda k, i: A[i, k], (M,))
Big = Buffer("Big", (512, 512), float32)
Tot = Reduce("Tot", (1,), Sum(), lambda z, i, k: Big[i, k], (512, 512))
w = rng.standard_normal((N, K)).astype(np.float32)
big = rng.standard_normal((512, 512)).astype(np.float32)
for out_t, args, want_t in ((Lin, [A, W, Lin], a.astype(np.float64) @ w.T), (Col, [A, Col], a.sum(axis=0)),
                            (Tot, [Big, Tot], big.astype(np.float64).sum(keepdims=True).reshape(1))):
    nest = LoopNest([out_t])
    print("\n" + str(nest.auto_schedule(cpu)))
    got = np.zeros(want_t.shape, np.float32)
    build(nest, args, target="llvm")(*[{"A": a, "W": w, "Big": big}[b.name] for b in args[:-1]], got)
    np.testing.assert_allclose(got, want_t, rtol=1e-4, atol=1e-4)

# 8. A 3x3 convolution, 32 output channels of 24 columns. With 16 lanes (AVX-512) the columns
#    would leave a partial vector (16 + 8), the channels none: the tile runs along the output
#    channels, two vectors of them x 8 columns, the filter packed with its channels last.
#    With 8 lanes (AVX2), 24 columns are 3 full vectors: the tile runs along the columns.
#    Either schedule builds for this host (LLVM splits or joins the vectors).
X = Buffer("X", (1, 16, 16, 26), float32)
F = Buffer("F", (32, 16, 3, 3), float32)
Conv = Reduce("Conv", (1, 32, 14, 24), Sum(),
              lambda n, co, y, x, ci, ry, rx: X[n, ci, y + ry, x + rx] * F[co, ci, ry, rx], (16, 3, 3))
x_in = rng.standard_normal((1, 16, 16, 26)).astype(np.float32)
f_in = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
want_c = sum(np.einsum("nchw,kc->nkhw", x_in[:, :, ry:ry + 14, rx:rx + 24].astype(np.float64), f_in[:, :, ry, rx])
             for ry in range(3) for rx in range(3))
avx512 = Target(cpu="skylake-avx512", vector_bits=512, vector_registers=32, cores=cpu.cores)
for target in (avx512, avx2):
    nest = LoopNest([Conv])
    choice = nest.auto_schedule(target)["Conv"]
    print(f"\nconvolution for {target.cpu}:", choice)
    assert ("channels" in choice.choice) == (target is avx512)
    got = np.zeros((1, 32, 14, 24), np.float32)
    build(nest, [X, F, Conv], target="llvm")(x_in, f_in, got)
    np.testing.assert_allclose(got, want_c, rtol=1e-4, atol=1e-3)
print("\nOK")
