"""Tutorial 8: vector types, layouts and views -- how data sits in memory.

    python tutorials/08_types_and_views.py

The story: an RGBA image arrives as float32 pixels. We
1. treat each pixel as one ``float32x4`` vector element, brighten it and pack it to ``uint8x4``
   and ``float16x4`` (vector types: the lanes are the array's last axis);
2. read a matrix stored column-major (Fortran order) without copying it;
3. read a matrix stored in blocks through a composed hidet layout;
4. cut a matrix into 4 x 4 tiles with a partition view whose edge tiles are padded.
Every step runs on the reference interpreter and on LLVM and checks numpy.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from codegen import build  # noqa: E402
from loopnest import LoopNest  # noqa: E402
from te import Buffer, Compute, Max, Reduce, Sum, cast, float32, maximum, minimum  # noqa: E402
from te.layout import column_major, row_major  # noqa: E402
from te.view import PartitionView  # noqa: E402

TARGETS = ["ireval", "llvm"]
rng = np.random.default_rng(8)

print("== 1. Vector types: one float32x4 per pixel ==")
n = 6                                            # pixels
P = Buffer("P", (n,), "float32x4")               # P[i] is a whole RGBA pixel
bright = Compute("bright", (n,), lambda i: minimum(P[i] * 1.5 + 0.05, 1.0))
as_u8 = Compute("as_u8", (n,), lambda i: cast(maximum(bright[i], 0.0) * 255.0, "uint8x4"))
as_f16 = Compute("as_f16", (n,), lambda i: cast(bright[i], "float16x4"))
print(f"bright is {bright.dtype}, as_u8 is {as_u8.dtype}, as_f16 is {as_f16.dtype}")
nest = LoopNest([as_u8, as_f16])                 # bright becomes an intermediate
print(nest)
pixels = rng.uniform(0, 0.8, (n, 4)).astype(np.float32)   # numpy: shape (n, 4), the lanes last
want_bright = np.minimum(pixels * np.float32(1.5) + np.float32(0.05), np.float32(1))
for target in TARGETS:
    # fp_contract=False: round after the multiply as numpy does (an FMA may change the last bit)
    k = build(nest, [P, as_u8, as_f16], target=target, **({"fp_contract": False} if target == "llvm" else {}))
    u8, f16 = np.zeros((n, 4), np.uint8), np.zeros((n, 4), np.float16)
    k(pixels, u8, f16)
    assert np.array_equal(u8, (want_bright * np.float32(255)).astype(np.uint8)), target
    assert np.array_equal(f16, want_bright.astype(np.float16)), target
print("pixel 0:", pixels[0].round(3), "->", u8[0], "/", f16[0])
try:
    k(pixels.reshape(-1), u8, f16)               # a flat array has no lanes axis: refused
except ValueError as exc:
    print("refused:", str(exc).split(":")[0])

print("\n== 2. A column-major buffer ==")
M = rng.standard_normal((5, 3)).astype(np.float32)
sums = {}
for name, layout, arr in [("row-major", None, np.ascontiguousarray(M)),
                          ("column-major", column_major(5, 3), np.asfortranarray(M))]:
    A = Buffer("A", (5, 3), float32, layout=layout)
    S = Reduce("S", (5,), Sum(), lambda i, j: A[i, j] * A[i, j], (3,))
    for target in TARGETS:
        s = np.zeros(5, np.float32)
        build(LoopNest([S]), [A, S], target=target, **({"fp_contract": False} if target == "llvm" else {}))(arr, s)
        sums[name, target] = s
    print(f"{name:<13} strides {arr.strides}: row sums of squares {sums[name, 'ireval'].round(3)}")
assert all(np.array_equal(v, sums["row-major", "ireval"]) for v in sums.values())
assert np.allclose(sums["row-major", "ireval"], (M.astype(np.float64) ** 2).sum(axis=1), rtol=1e-5)

print("\n== 3. A composed layout: 2 x 2 blocks of 3 x 4 row-major tiles ==")
blocked = row_major(2, 2) * row_major(3, 4)      # hidet: outer * inner, a 6 x 8 matrix
print("layout", blocked, "extents", blocked.extents, "; element (4, 5) is stored at", blocked(4, 5))
storage = np.arange(48, dtype=np.float32)        # the blocked storage, in memory order
logical = np.array([[storage[blocked(i, j)] for j in range(8)] for i in range(6)], np.float32)
B = Buffer("B", (6, 8), float32, layout=blocked)
T = Compute("T", (8, 6), lambda j, i: B[i, j] + 0.5)   # transpose it into a plain row-major tensor
for target in TARGETS:
    t = np.zeros((8, 6), np.float32)
    build(LoopNest([T]), [B, T], target=target)(storage.reshape(6, 8), t)
    assert np.array_equal(t, logical.T + np.float32(0.5)), target
print("logical row 4:", logical[4].astype(int))
assert blocked(4, 5) == 41 and logical[4, 5] == 41

print("\n== 4. A partition view: 4 x 4 tiles, the edges padded with -inf ==")
X = Buffer("X", (5, 6), float32)
tiles = PartitionView(X, (4, 4), padding=float("-inf"))
gi, gj = tiles.grid_shape                        # ceildiv(5, 4) x ceildiv(6, 4) = 2 x 2
TileMax = Reduce("TileMax", (gi, gj), Max(), lambda I, J, i, j: tiles[I, J, i, j], (4, 4))
x = rng.standard_normal((5, 6)).astype(np.float32)
padded = np.full((8, 8), -np.inf, np.float32)
padded[:5, :6] = x
want = padded.reshape(2, 4, 2, 4).max(axis=(1, 3))
for target in TARGETS:
    m = np.zeros((gi, gj), np.float32)
    build(LoopNest([TileMax]), [X, TileMax], target=target)(x, m)
    assert np.array_equal(m, want), target
print("grid", (gi, gj), "tile maxima:\n", m.round(3))

print("\nOK")
