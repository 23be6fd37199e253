"""Tutorial 11: bit operations, bitcast and the math intrinsics.

    python tutorials/12_bit_operations.py

The story: integer kernels that need bits -- packing four uint8 channels into one uint32,
Halide's divide-by-3 as a multiply and a shift, reading a float's exponent through its bits
-- written with ``& | ^ ~ << >>`` and ``te.bitcast``, run on IREval and LLVM with the same
results as numpy. A shift by the width or more is defined (the amount is taken modulo the
width, docs/semantics.md), and the lowering pass ``mask_shift_amounts`` shows how the compiled
targets get that rule. Last, the math intrinsics, ``clamp`` and ``lerp``.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

import te
from te import Buffer, Compute, float32, int32, uint8, uint32
from loopnest import LoopNest
from loopnest.passes import legalize_for_target
from codegen import build

TARGETS = ("ireval", "llvm")
N = 64
rng = np.random.default_rng(0)

# -- 1. pack four uint8 channels into a uint32, and unpack them ------------------------
RGBA = Buffer("RGBA", (N, 4), uint8)
Packed = Compute("Packed", (N,), lambda i: te.cast(RGBA[i, 0], uint32)
                 | (te.cast(RGBA[i, 1], uint32) << 8)
                 | (te.cast(RGBA[i, 2], uint32) << 16)
                 | (te.cast(RGBA[i, 3], uint32) << 24))
P = Buffer("P", (N,), uint32)
Unpacked = Compute("Unpacked", (N, 4), lambda i, c: te.cast((P[i] >> (te.cast(c, uint32) * 8)) & 0xFF, uint8))
print(LoopNest([Packed]))
rgba = rng.integers(0, 256, (N, 4), dtype=np.uint8)
for target in TARGETS:
    packed = np.zeros(N, np.uint32)
    build(LoopNest([Packed]), [RGBA, Packed], target=target)(rgba, packed)
    assert (packed == rgba.view(np.uint32).ravel()).all()          # little-endian layout
    back = np.zeros((N, 4), np.uint8)
    build(LoopNest([Unpacked]), [P, Unpacked], target=target)(packed, back)
    assert (back == rgba).all()
    print(f"{target:6} pack / unpack of {N} RGBA pixels: exact")

# -- 2. Halide's blur divides by 3 with a multiply and a shift -------------------------
Row = Buffer("Row", (N + 2,), uint32)
Blur = Compute("Blur", (N,), lambda i: ((Row[i] + Row[i + 1] + Row[i + 2]) * 21845) >> 16)
row = rng.integers(0, 256, N + 2, dtype=np.uint32)
want = ((row[:-2] + row[1:-1] + row[2:]) * np.uint32(21845)) >> np.uint32(16)
for target in TARGETS:
    blur = np.zeros(N, np.uint32)
    build(LoopNest([Blur]), [Row, Blur], target=target)(row, blur)
    assert (blur == want).all()
    assert (np.abs(blur.astype(np.int64) - (row[:-2] + row[1:-1] + row[2:]) // 3) <= 1).all()
print("blur by multiply-and-shift matches numpy on", ", ".join(TARGETS))

# -- 3. a float's exponent through its bits --------------------------------------------
X = Buffer("X", (N,), float32)
Exponent = Compute("Exponent", (N,), lambda i: ((te.bitcast(X[i], int32) >> 23) & 0xFF) - 127)
x = rng.uniform(-1000, 1000, N).astype(np.float32)
for target in TARGETS:
    e = np.zeros(N, np.int32)
    build(LoopNest([Exponent]), [X, Exponent], target=target)(x, e)
    assert (e == np.frexp(x)[1] - 1).all()
print("exponent of", x[:3], "=", e[:3])

# -- 4. shifts by the width or more are defined -----------------------------------------
A = Buffer("A", (4,), int32)
S = Buffer("S", (4,), int32)
Shl = Compute("Shl", (4,), lambda i: A[i] << S[i])
a = np.array([1, 1, -8, 3], np.int32)
s = np.array([31, 32, 33, -1], np.int32)
for target in TARGETS:
    out = np.zeros(4, np.int32)
    build(LoopNest([Shl]), [A, S, Shl], target=target)(a, s, out)
    assert out.tolist() == [-2**31, 1, -16, -2**31], out
    print(f"{target:6} A << S = {out.tolist()} (the amount modulo 32)")
print("== what the LLVM backend is given ==")
print(legalize_for_target(LoopNest([Shl]).prepare_for_codegen(), "llvm"))

# -- 5. math intrinsics, clamp, lerp -----------------------------------------------------
Y = Compute("Y", (N,), lambda i: te.lerp(te.atan2(X[i], 100.0), te.log1p(abs(X[i])), 0.25)
            + te.clamp(round(X[i] / 100.0), -3.0, 3.0) + te.fmod(X[i], 7.0))
ref = None
for target in TARGETS:
    y = np.zeros(N, np.float32)
    build(LoopNest([Y]), [X, Y], target=target)(x, y)
    x64 = x.astype(np.float64)
    at = np.arctan2(x64, 100.0)
    want = at + (np.log1p(np.abs(x64)) - at) * 0.25 + np.clip(np.round(x64 / 100.0), -3, 3) + np.fmod(x64, 7.0)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)
print("atan2, log1p, lerp, round, clamp, fmod agree with numpy on", ", ".join(TARGETS))
print("OK")
