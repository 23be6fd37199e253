"""Tutorial 5: let the autotuner find a fast schedule for a matmul.

    python tutorials/05_autotune_matmul.py

The story: we write C = A @ B as a reduction, ask ``tune.autotune`` to search the
automatic schedule space (a register-blocked template: register tile sizes, reduction
slices, tile loop order, a packed operand, parallel tiles; a few seed points first) for a
few dozen trials, and get back the fastest kernel it measured, checked
against numpy. Every candidate is stored in a SQLite database: running the script again
re-measures nothing, and ``apply_best`` replays the winner onto a fresh loop nest. Then a
hand-written search space shows the knob API (``cfg.split`` / ``cfg.choice`` / ``cfg.flag``).
"""
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Reduce, Sum, float32
from loopnest import LoopNest
from codegen import build
from tune import apply_best, autotune
from tune.plot import plot_tuning_curve

TARGET = "llvm" if importlib.util.find_spec("codegen.llvm") else "ireval"
M = N = K = 64 if TARGET == "llvm" else 16
TRIALS = 16 if TARGET == "llvm" else 6
if os.environ.get("TUTORIAL_SMALL"):    # the test runner: half the trials, the same steps
    TRIALS //= 2

# 1. The computation: C[i, j] = sum_k A[i, k] * B[k, j].
A = Buffer("A", (M, K), float32)
B = Buffer("B", (K, N), float32)
C = Reduce("C", (M, N), Sum(), lambda i, j, k: A[i, k] * B[k, j], (K,))

# (Candidates are measured in worker processes; they do not re-run this script, so no
# `if __name__ == "__main__":` guard is needed.)
workdir = tempfile.mkdtemp(prefix="tune-tutorial-")
db = os.path.join(workdir, "matmul.db")

# 2. Tune: the automatic space, the model-guided strategy, every candidate checked against
#    numpy once (a wrong or crashing candidate is recorded as such and never chosen).
def reference(inputs):
    return inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)

t0 = time.time()
kernel, record, result = autotune([C], [A, B, C], target=TARGET, trials=TRIALS, db=db, strategy="model",
                                  reference=reference, repeats=3, return_result=True)
flops = 2 * M * N * K
baseline = result.records[0]          # the unscheduled nest is always measured first
print(f"\ntuned {TRIALS} candidates in {time.time() - t0:.1f} s on {TARGET}")
print(f"unscheduled: {baseline.median * 1e6:9.1f} us  ({flops / baseline.median / 1e9:6.2f} GFLOP/s)")
print(f"best:        {record.median * 1e6:9.1f} us  ({flops / record.median / 1e9:6.2f} GFLOP/s)")
print("best knobs:", record.point)
if result.errors():
    print("failed candidates:", result.errors())

# 3. The kernel is built with the best schedule: check it.
rng = np.random.default_rng(0)
a = rng.standard_normal((M, K)).astype(np.float32)
b = rng.standard_normal((K, N)).astype(np.float32)
c = np.zeros((M, N), np.float32)
kernel(a, b, c)
assert np.allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)

# 4. The schedule is data: replay the best one onto a fresh nest and print it.
nest = apply_best(LoopNest([C]), db, target=TARGET)
print("\n== the best schedule ==")
print(nest)
c2 = np.zeros_like(c)
build(nest, [A, B, C], target=TARGET)(a, b, c2)
assert np.allclose(c2, c, rtol=1e-5, atol=1e-5)

# 5. Running again resumes from the database: nothing is measured twice.
_, again, result2 = autotune([C], [A, B, C], target=TARGET, trials=TRIALS, db=db, strategy="model",
                             reference=reference, progress=False, return_result=True)
print(f"\nsecond run: {result2.measured} measured, {result2.reused} from the database")
assert result2.measured == 0
# (the few fastest candidates are timed again in alternating rounds before one is returned:
#  on a busy machine the second run may keep another of them; the database keeps what the
#  search measured, which is what apply_best replays)

# 6. The automatic space, looked at: its knobs and the seed points measured first.
from tune import auto_space
space = auto_space([C])
print("\n== the automatic space ==")
print(space.describe())
print("first seed:", space.values(space.seeds[0]))

# 7. A hand-written space: a template with knobs, searched exhaustively.
def schedule(cfg, nest):
    i, j, k = nest.get_loops_for(C)
    tj = cfg.split("tile_j", j, [4, 8, 16])
    vec = cfg.flag("vectorize")
    _, ji, _ = nest.split_with_tail(j, tj)
    if vec:
        nest.vectorize(ji)          # a schedule that raises ScheduleError is recorded, never measured

# A point you already believe in can go first: seeds are measured before the search.
from tune.space import ScheduleSpace
my_space = ScheduleSpace(schedule, [C])
my_space.set_seeds([{"tile_j": 16, "vectorize": True}])

# (autotune returns the database's best for this computation, whichever space found it;
#  the TuneResult tells what this run found)
_, _, res3 = autotune([C], [A, B, C], target=TARGET, trials=4, db=db, space=my_space, strategy="grid",
                      reference=reference, progress=False, return_result=True)
assert res3.records[1].point == {"tile_j": 16, "vectorize": True}      # after the unscheduled baseline
print(f"template space: best {res3.best.median * 1e6:.1f} us with {res3.best.point}; "
      f"{res3.invalid} illegal schedules skipped")

# 8. The tuning curve (needs matplotlib; skipped with a message otherwise).
plot_tuning_curve(result.costs, os.path.join(workdir, "curve.png"), flops=flops, title="matmul")
print("OK")
