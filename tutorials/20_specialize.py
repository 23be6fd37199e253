"""Tutorial 20: one kernel, a schedule per range of sizes (`nest.specialize`).

    python tutorials/20_specialize.py

The story: a layer `Y = X @ B` whose batch M is only known when it runs: 1 row while a model
generates text, hundreds while it reads a prompt. The schedule that is fast for many rows
(B packed into panels, register tiles of 6 rows) reads B twice for a single row; the one that
is fast for a few rows (B streamed in slices of its rows) re-reads the outputs once per slice.
`auto_schedule` makes both (for a linear layer's `x @ W.T` too) and the kernel picks one when
it runs; `nest.specialize` does the same with schedules of your own.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from bench.harness import time_interleaved
from codegen import build
from loopnest import LoopNest, ScheduleError
from loopnest.history import decode_expr
from te import Buffer, Reduce, Sum, Var

K, N = 512, 512
M = Var("M")
X = Buffer("X", (M, K), "float32")
B = Buffer("B", (K, N), "float32")
Y = Reduce("Y", (M, N), Sum(), lambda i, j, k: X[i, k] * B[k, j], (K,))

# 1. The automatic schedule: two lines for Y, the general one and the one for few rows.
nest = LoopNest([Y])
report = nest.auto_schedule()
print("== auto_schedule ==")
print(report)


def conditions(n: LoopNest) -> list[str]:
    """The conditions of the nest's versions, in the order the kernel tests them."""
    return [str(decode_expr(rec["args"][0]["expr"], n.sizes())) for rec in n.history if rec["op"] == "specialize"]


print("versions for:", conditions(nest) or "none on this CPU (the columns do not cut into tiles per core)")

# A linear layer's x @ W.T (W read along the reduction) gets dot products in row tiles for few rows.
W = Buffer("W", (N, K), "float32")
linear = LoopNest([Reduce("L", (M, N), Sum(), lambda i, j, k: X[i, k] * W[j, k], (K,))])
print(linear.auto_schedule())
print("versions for:", conditions(linear))

# 2. One kernel; each call tests M and runs the schedule for it. Checked in float64.
kernel = build(nest, [X, B, Y, M], target="llvm")
rng = np.random.default_rng(0)
b = rng.standard_normal((K, N)).astype(np.float32)
for m in (1, 7, 24, 25, 100):
    x = rng.standard_normal((m, K)).astype(np.float32)
    y = np.empty((m, N), np.float32)
    kernel(x, b, y, m)
    err = float(np.max(np.abs(y - x.astype(np.float64) @ b)))
    print(f"M = {m:3d}: max |error| vs numpy float64 = {err:.1e}")
    assert err < 1e-3

# 3. Timed against numpy (and PyTorch when installed) in the same rounds.
try:
    import torch
except ImportError:
    torch = None
for m in (1, 4, 256):
    x = rng.standard_normal((m, K)).astype(np.float32)
    y = np.empty((m, N), np.float32)
    peers = {"ours": lambda: kernel(x, b, y, m), "numpy": lambda: np.matmul(x, b, out=y)}
    if torch is not None:
        tx, tb = torch.from_numpy(x), torch.from_numpy(b)
        peers["pytorch"] = lambda: torch.mm(tx, tb)
    t = time_interleaved(peers, rounds=3, min_time=0.05, budget=2)
    ratios = ", ".join(f"{name} / ours {t[name].best / t['ours'].best:.2f}" for name in peers if name != "ours")
    print(f"M = {m:3d}: ours {t['ours'].best * 1e6:7.1f} us ({ratios})")

# 4. By hand: a version is a LoopNest of the same tensors, scheduled on its own. Here the
#    rows of a single-row call run as one loop over the columns in vectors, the reduction
#    outside it; the general case is left to auto_schedule.
one_row = nest.unscheduled()
i, j, k = one_row.get_loops_for(Y)
one_row.reorder([j, k], [1, 0])
jo, ji, _ = one_row.split_with_tail(one_row.get_loops_for(Y)[-1], 16)
one_row.vectorize(ji)
hand = LoopNest([Y])
hand.specialize(M == 1, one_row)
hand.auto_schedule()
print("\n== the versions of the hand-specialized nest, in the order they are tested ==")
print(conditions(hand))
x = rng.standard_normal((1, K)).astype(np.float32)
y = np.empty((1, N), np.float32)
build(hand, [X, B, Y, M], target="llvm")(x, b, y, 1)
assert np.allclose(y, x.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)

# 5. The history replays both schedules; a condition must be about the nest's sizes.
again = LoopNest([Y]).replay(hand.history_json())
assert str(again) == str(hand)
try:
    LoopNest([Y]).specialize(Var("batch") <= 4, one_row)
except ScheduleError as e:
    print("\nrefused:", e)
print("OK")
