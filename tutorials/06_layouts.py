"""Tutorial 06: layouts -- from row-major matrices to tiles.

A layout is a function from coordinates to offsets.  ``te.layout`` implements CuTe's
hierarchical layouts (shape:stride pairs of nested tuples) and hidet's layout constructors
on top of them.  This script tells a short story:

1. build a few layouts and print them the way CuTe does;
2. evaluate them with 1-D, 2-D and hierarchical coordinates;
3. glue hidet layouts together with ``*``;
4. compose layouts as functions, and tile a matrix with ``logical_divide``;
5. get a symbolic offset expression for the compiler.

Run from the repository root:  python tutorials/06_layouts.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from te.layout import (Layout, coalesce, column_major, complement, composition,  # noqa: E402
                       logical_divide, logical_product, row_major, size)


def show(name, layout):
    print(f"{name:<34} {layout!r:<32} size={size(layout)}")


def grid(layout):
    rows, cols = layout.extents
    for m in range(rows):
        print("   " + " ".join(f"{layout(m, n):3d}" for n in range(cols)))


print("== 1. Building layouts ==")
col = Layout((4, 2))                      # default stride: column-major (LayoutLeft)
row = Layout((4, 2), (2, 1))
mixed = Layout(((2, 2), 2), ((4, 1), 2))  # a 4x2 matrix whose rows are split in two
show("column-major 4x2", col)
show("row-major 4x2", row)
show("hierarchical 4x2", mixed)
grid(mixed)

print("\n== 2. Evaluating: three coordinate spaces, one order ==")
L = Layout((2, (2, 2)), (4, (2, 1)))
print("1-D      :", [L(i) for i in range(size(L))])
print("2-D (1,3):", L(1, 3), "   h-D (1,(1,1)):", L((1, (1, 1))))
assert [L(i) for i in range(8)] == [0, 4, 2, 6, 1, 5, 3, 7]
assert L(1, 3) == L((1, (1, 1))) == 7

print("\n== 3. hidet layouts are CuTe layouts ==")
show("row_major(2, 3)", row_major(2, 3))
show("column_major(2, 3)", column_major(2, 3))
d = row_major(2, 1) * column_major(2, 2)  # hidet product: outer * inner
show("row_major(2,1)*column_major(2,2)", d)
print("   extents", d.extents)
grid(d)
assert [d(m, 0) for m in range(4)] == [0, 1, 4, 5]

print("\n== 4. Algebra: coalesce, compose, complement, divide, product ==")
show("coalesce((2,(1,6)):(1,(6,2)))", coalesce(Layout((2, (1, 6)), (1, (6, 2)))))
A = Layout((6, 2), (8, 2))
B = Layout((4, 3), (3, 1))
R = composition(A, B)
show("A o B", R)
print("   R(i) == A(B(i)):", [R(i) for i in range(size(R))])
assert all(R(i) == A(B(i)) for i in range(size(B)))
assert repr(R) == "((2,2),3):((24,2),8)"

show("complement(4:2, 24)", complement(Layout(4, 2), 24))

# Tile a 8x6 row-major matrix into 2x3 tiles: mode i becomes (tile_i, rest_i).
M = row_major(8, 6)
tiled = logical_divide(M, (2, 3))
show("divide row_major(8,6) by (2,3)", tiled)
print("   tile (1,1) starts at offset", tiled((0, 1), (0, 1)), "= row 2, col 3 ->", M(2, 3))
assert tiled((0, 1), (0, 1)) == M(2, 3) == 15

show("product (2,2):(4,1) x 6:1", logical_product(Layout((2, 2), (4, 1)), Layout(6)))

print("\n== 5. Offsets for the compiler ==")


class Sym(str):
    """A toy symbolic value: supports + and * with ints, prints the expression."""

    def __add__(self, other):
        return Sym(f"{self} + {other}")

    def __mul__(self, k):
        return Sym(f"{self}*{k}")


expr = row_major(16, 32).offset_expr((Sym("i"), Sym("j")))
print("   row_major(16,32) at (i, j):", expr)
assert expr == "i*32 + j"
print("   numpy byte strides of row_major(16,32) float32:", row_major(16, 32).numpy_strides(4))
print("\nOK")
