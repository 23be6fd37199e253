"""Tutorial 14: Halide's separable blur, scheduled Halide's way.

    python tutorials/14_halide_blur.py

The story: the 3x3 box blur of Halide's first example (``apps/blur``), written as three
stages -- the input scaled to floats, a horizontal blur ``blur_x`` and a vertical blur
``blur_y`` -- and scheduled in Halide's order: inline the cheap stage, split the output
into strips of rows, compute ``blur_x`` per strip (``compute_at``) in storage that holds
one strip (``store_at``), run the strips in parallel and vectorize the rows. The
unscheduled pipeline and the schedule are timed (LLVM) and checked against numpy.

Halide's schedule::

    blur_y.split(y, yo, yi, 8).parallel(yo).vectorize(x, 8);
    blur_x.store_at(blur_y, yo).compute_at(blur_y, yi).vectorize(x, 8);

Halide slides ``blur_x``'s window down the strip (sliding window and storage folding):
each row of ``blur_x`` is computed once, into a circular buffer of three rows. Storage
hoisted out of the compute loop does the same here (``prepare_for_codegen``'s pass
``shrink_storage``, ``loopnest.transforms.fold_storage``), so Halide's schedule carries
over as written. Computing ``blur_x`` at ``yo`` instead (ten rows for eight) is the
schedule without a sliding window, timed too.
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from te import Buffer, Compute, float32
from loopnest import LoopNest
from codegen import build

H, W = 768, 1280       # the output; the input has a one-pixel border
A = Buffer("A", (H + 2, W + 2), float32)
inp = Compute("inp", (H + 2, W + 2), lambda y, x: A[y, x] * (1.0 / 255))
blur_x = Compute("blur_x", (H + 2, W), lambda y, x: (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) * (1.0 / 3))
blur_y = Compute("blur_y", (H, W), lambda y, x: (blur_x[y, x] + blur_x[y + 1, x] + blur_x[y + 2, x]) * (1.0 / 3))

rng = np.random.default_rng(0)
a = rng.uniform(0, 255, (H + 2, W + 2)).astype(np.float32)
f = a / np.float32(255)
bx = (f[:, :-2] + f[:, 1:-1] + f[:, 2:]) / np.float32(3)
want = (bx[:-2] + bx[1:-1] + bx[2:]) / np.float32(3)


def compile_and_time(nest, rounds=5):
    kernel = build(nest, [A, blur_y], target="llvm")
    out = np.empty((H, W), np.float32)
    kernel(a, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        kernel(a, out)
        best = min(best, time.perf_counter() - t0)
    return best


# 1. No schedule: every stage over the whole image, each in a full-size buffer.
plain = LoopNest([blur_y])
t_plain = compile_and_time(plain)

# 2. Halide's order: inline the input stage, then place blur_x per row of blur_y, stored
# per strip: the window slides down the strip, one new row of blur_x per row of blur_y.
def halide_schedule():
    nest = LoopNest([blur_y])
    nest.compute_inline(inp)
    y, x = nest.get_loops_for(blur_y)
    yo, yi = nest.split_with_mask(y, 8)
    nest.compute_at(blur_x, yi)          # Halide's compute_at(blur_y, yi)
    nest.store_at(blur_x, yo)            # Halide's store_at(blur_y, yo)
    nest.parallelize(yo)
    _, xv, _ = nest.split_with_tail(x, 8)
    nest.vectorize(xv)
    _, bxv, _ = nest.split_with_tail(nest.get_loops_for(blur_x)[-1], 8)
    nest.vectorize(bxv)
    return nest


nest = halide_schedule()
print("== Halide's schedule ==")
print(nest)
prepared = str(nest.copy().prepare_for_codegen()).splitlines()
print("\n== prepared: a folded three-row blur_x per thread, one new row per row ==")
print("\n".join(prepared))
assert prepared[1] == f"  float32 blur_x[3, {W}]; // alloc"
assert prepared[3].strip().startswith("for (int y_3 = select(y_2_inner > 0, ")     # the new row only
t_sched = compile_and_time(nest)

# 3. Without the sliding window: blur_x per strip (ten rows for eight), stored at yo too.
nest = LoopNest([blur_y])
nest.compute_inline(inp)
y, x = nest.get_loops_for(blur_y)
yo, yi = nest.split_with_mask(y, 8)
nest.compute_at(blur_x, yo)
nest.parallelize(yo)
_, xv, _ = nest.split_with_tail(x, 8)
nest.vectorize(xv)
_, bxv, _ = nest.split_with_tail(nest.get_loops_for(blur_x)[-1], 8)
nest.vectorize(bxv)
prepared = str(nest.copy().prepare_for_codegen()).splitlines()
print("\n== the strip schedule: one strip of blur_x per thread ==")
print("\n".join(prepared[:2]))
assert prepared[1] == f"  float32 blur_x[10, {W}]; // alloc"    # not the whole image per strip
t_strip = compile_and_time(nest)

t0 = time.perf_counter()
for _ in range(5):
    g = a / np.float32(255)
    h = (g[:, :-2] + g[:, 1:-1] + g[:, 2:]) / np.float32(3)
    (h[:-2] + h[1:-1] + h[2:]) / np.float32(3)
t_numpy = (time.perf_counter() - t0) / 5

print(f"\nunscheduled {t_plain * 1e3:.2f} ms, Halide's schedule {t_sched * 1e3:.2f} ms, "
      f"per strip {t_strip * 1e3:.2f} ms, numpy {t_numpy * 1e3:.2f} ms")
print("OK")
