"""Worked examples for te.layout.

Sections:
* ``cute-layout.txt`` (shared/seeds): IntTuples, vectors, matrices, constructions, print2D /
  print1D, coordinate spaces.
* ``hidet-type-system.txt`` (shared/seeds): row_major / column_major / strided_layout and the
  ``*`` product.
* CuTe's layout-algebra page (02_layout_algebra.md, upstream of the seed document): coalesce,
  composition, complement, logical_divide, logical_product examples.
* API behaviour: errors, offset_expr, numpy_strides, is_row_major / is_column_major.
"""
import doctest
import importlib.util
import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

try:
    import te.layout as layout_mod
except Exception:  # te/__init__.py is developed concurrently; te/layout.py is standalone
    layout_mod = sys.modules.get("te_layout_standalone")
    if layout_mod is None:
        _spec = importlib.util.spec_from_file_location(
            "te_layout_standalone", Path(__file__).resolve().parents[2] / "te" / "layout.py")
        layout_mod = importlib.util.module_from_spec(_spec)
        sys.modules[_spec.name] = layout_mod
        _spec.loader.exec_module(layout_mod)

Layout = layout_mod.Layout
coalesce, column_major = layout_mod.coalesce, layout_mod.column_major
complement, composition = layout_mod.complement, layout_mod.composition
cosize, depth = layout_mod.cosize, layout_mod.depth
flatten, logical_divide = layout_mod.flatten, layout_mod.logical_divide
logical_product, make_layout = layout_mod.logical_product, layout_mod.make_layout
rank, row_major, size = layout_mod.rank, layout_mod.row_major, layout_mod.size
strided_layout = layout_mod.strided_layout


def table(L):
    """print2D from the CuTe document, as a list of rows."""
    return [[L(m, n) for n in range(size(L, 1))] for m in range(size(L, 0))]


def print1d(L):
    return [L(i) for i in range(size(L))]


# =========================================================================================
# cute-layout.txt
# =========================================================================================

class TestCuteIntTuple:
    def test_examples_from_document(self):
        # "6, (2), (4,3), (3,(6,2),8) are all IntTuples"
        assert rank(6) == 1 and depth(6) == 0 and size(6) == 6
        assert rank((2,)) == 1 and depth((2,)) == 1 and size((2,)) == 2
        assert rank((4, 3)) == 2 and depth((4, 3)) == 1 and size((4, 3)) == 12
        assert rank((3, (6, 2), 8)) == 3 and depth((3, (6, 2), 8)) == 2
        assert size((3, (6, 2), 8)) == 288

    def test_hierarchical_access(self):
        # rank<I...>(x) := rank(get<I...>(x)), likewise depth and size
        t = (3, (6, 2), 8)
        assert rank(t, 1) == 2 and depth(t, 1) == 1 and size(t, 1) == 12
        assert size(t, 1, 0) == 6 and rank(t, 1, 0) == 1 and depth(t, 1, 0) == 0
        # get<0> of a single integer is that integer
        assert size(6, 0) == 6
        L = Layout((3, (6, 2), 8))
        assert L[1, 0] == Layout(6, 3)
        assert size(L, 1) == 12 and rank(L, 1) == 2 and depth(L, 1) == 1

    def test_layout_operations_analogous_to_inttuple(self):
        L = Layout((4, (2, 3)), (1, (4, 8)))
        assert L.shape == (4, (2, 3)) and L.stride == (1, (4, 8))
        assert rank(L) == L.rank == 2
        assert depth(L) == L.depth == 2
        assert size(L) == L.size == 24 == size(L.shape)
        assert L[0] == Layout(4, 1) and L[1] == Layout((2, 3), (4, 8))


class TestCuteVectorsAndMatrices:
    def test_contiguous_vector(self):
        v = Layout((8,), (1,))
        assert repr(v) == "(8):(1)"
        assert rank(v) == 1
        assert print1d(v) == list(range(8))

    def test_strided_vector(self):
        # "the eight elements are stored at positions 0, 2, 4, ..."
        v = Layout((8,), (2,))
        assert print1d(v) == [0, 2, 4, 6, 8, 10, 12, 14]

    def test_nested_vector(self):
        # Shape ((4,2)) Stride ((1,4)): rank 1, a 4x2 column-major inner layout, contiguous
        v = Layout(((4, 2),), ((1, 4),))
        assert repr(v) == "((4,2)):((1,4))"
        assert rank(v) == 1 and depth(v) == 2 and size(v) == 8
        assert print1d(v) == list(range(8))
        assert v(((3, 1),)) == 7

    def test_column_major_matrix(self):
        L = Layout((4, 2), (1, 4))
        assert repr(L) == "(4,2):(1,4)"
        assert table(L) == [[0, 4], [1, 5], [2, 6], [3, 7]]

    def test_row_major_matrix(self):
        L = Layout((4, 2), (2, 1))
        assert repr(L) == "(4,2):(2,1)"
        assert table(L) == [[0, 1], [2, 3], [4, 5], [6, 7]]

    def test_multi_stride_matrix(self):
        L = Layout(((2, 2), 2), ((4, 1), 2))
        assert repr(L) == "((2,2),2):((4,1),2)"
        assert rank(L) == 2 and size(L, 0) == 4 and size(L, 1) == 2
        assert table(L) == [[0, 2], [4, 6], [1, 3], [5, 7]]


@pytest.fixture
def doc_layouts():
    return {
        "layout_8s": Layout(8),                       # make_layout(Int<8>{})
        "layout_8d": Layout(8),                       # make_layout(8)
        "layout_2sx4s": Layout((2, 4)),               # make_layout(make_shape(_2, _4))
        "layout_2sx4d": Layout((2, 4)),               # make_layout(make_shape(_2, 4))
        "layout_2x4": Layout((2, (2, 2)), (4, (2, 1))),
    }


class TestCuteConstructionAndPrinting:
    def test_default_stride_is_layout_left(self, doc_layouts):
        assert repr(doc_layouts["layout_8s"]) == "8:1"
        assert repr(doc_layouts["layout_2sx4s"]) == "(2,4):(1,2)"
        assert repr(doc_layouts["layout_2x4"]) == "(2,(2,2)):(4,(2,1))"
        assert Layout((4, (2, 3))) == Layout((4, (2, 3)), (1, (4, 8)))

    def test_print2d(self, doc_layouts):
        assert table(doc_layouts["layout_2sx4s"]) == [[0, 2, 4, 6], [1, 3, 5, 7]]
        assert table(doc_layouts["layout_2sx4d"]) == [[0, 2, 4, 6], [1, 3, 5, 7]]
        assert table(doc_layouts["layout_2x4"]) == [[0, 2, 1, 3], [4, 6, 5, 7]]

    def test_print1d(self, doc_layouts):
        assert print1d(doc_layouts["layout_8s"]) == [0, 1, 2, 3, 4, 5, 6, 7]
        assert print1d(doc_layouts["layout_8d"]) == [0, 1, 2, 3, 4, 5, 6, 7]
        assert print1d(doc_layouts["layout_2sx4s"]) == [0, 1, 2, 3, 4, 5, 6, 7]
        assert print1d(doc_layouts["layout_2sx4d"]) == [0, 1, 2, 3, 4, 5, 6, 7]
        assert print1d(doc_layouts["layout_2x4"]) == [0, 4, 2, 6, 1, 5, 3, 7]

    def test_repr_format(self):
        assert repr(Layout((4, (2, 3)), (1, (4, 8)))) == "(4,(2,3)):(1,(4,8))"
        assert str(Layout((3, (6, 2), 8))) == "(3,(6,2),8):(1,(3,18),36)"
        assert repr(Layout((), ())) == "():()"


class TestCuteCoordinateSpaces:
    L = Layout((2, (2, 2)), (4, (2, 1)))

    def test_1d_rd_hd_enumerations_agree(self):
        # R-D coordinates (colexicographic) and h-D coordinates enumerate in 1-D order
        rd = [(m, n) for n in range(4) for m in range(2)]
        hd = [(m, (a, b)) for b in range(2) for a in range(2) for m in range(2)]
        for i in range(8):
            assert self.L(i) == self.L(*rd[i]) == self.L(rd[i]) == self.L(hd[i])
            assert self.L.get_hier_coord(i) == hd[i]

    def test_1d_coordinate_in_hierarchical_mode(self):
        # "we're using a 1-D coordinate for a 2-D multi-index in the second mode"
        assert self.L(1, 3) == self.L((1, (1, 1))) == 7
        assert self.L(0, 1) == self.L((0, (1, 0))) == 2

    def test_stride_is_inner_product(self):
        L = Layout((3, (6, 2), 8), (5, (7, 100), 1000))
        for c in [(0, (0, 0), 0), (2, (5, 1), 7), (1, (3, 0), 4)]:
            expect = c[0] * 5 + c[1][0] * 7 + c[1][1] * 100 + c[2] * 1000
            assert L(c) == expect


# =========================================================================================
# hidet-type-system.txt
# =========================================================================================

class TestHidetConstructors:
    def test_row_major_formula(self):
        shape = (3, 4, 5)
        L = row_major(*shape)
        assert L == Layout((3, 4, 5), (20, 5, 1))
        for c in itertools.product(*map(range, shape)):
            s0, s1, s2 = shape
            assert L(*c) == c[0] * s1 * s2 + c[1] * s2 + c[2]

    def test_column_major_formula(self):
        shape = (3, 4, 5)
        L = column_major(*shape)
        assert L == Layout((3, 4, 5), (1, 3, 12))
        for c in itertools.product(*map(range, shape)):
            s0, s1, s2 = shape
            assert L(*c) == c[2] * s1 * s0 + c[1] * s0 + c[0]

    def test_default_tensor_layout_1024(self):
        a = row_major(1024, 1024)
        assert a(0, 0) == 0 and a.index_of((3, 7)) == 3 * 1024 + 7
        b = column_major(1024, 1024)
        assert b.index_of((3, 7)) == 7 * 1024 + 3
        assert a == Layout((1024, 1024), (1024, 1))

    def test_strided_layout_equivalences(self):
        assert strided_layout(shape=[1024, 1024], ranks=[0, 1]) == row_major(1024, 1024)
        assert strided_layout(shape=[1024, 1024], ranks=[1, 0]) == column_major(1024, 1024)
        assert strided_layout([2, 3, 4]) == row_major(2, 3, 4)

    def test_strided_layout_example_c(self):
        c = strided_layout(shape=[2, 2, 2], ranks=[0, 2, 1])
        expected = {
            (0, 0, 0): 0, (0, 1, 0): 1, (0, 0, 1): 2, (0, 1, 1): 3,
            (1, 0, 0): 4, (1, 1, 0): 5, (1, 0, 1): 6, (1, 1, 1): 7,
        }
        for coord, idx in expected.items():
            assert c.index_of(coord) == idx
            assert c(*coord) == idx

    def test_constructor_argument_forms(self):
        assert row_major((2, 3)) == row_major(2, 3) == row_major([2, 3])
        assert column_major((2, 3)) == column_major(2, 3)


def hidet_product_reference(f, g, c):
    """h(c) = f(c / s_g) * n_g + g(c mod s_g), element-wise, straight from the document."""
    sg = g.extents
    outer = tuple(ci // si for ci, si in zip(c, sg))
    inner = tuple(ci % si for ci, si in zip(c, sg))
    return f(outer) * size(g) + g(inner)


class TestHidetProduct:
    def test_example_c(self):
        c = row_major(2, 1) * row_major(2, 2)
        assert c.extents == (4, 2)
        expected = {(0, 0): 0, (0, 1): 1, (1, 0): 2, (1, 1): 3,
                    (2, 0): 4, (2, 1): 5, (3, 0): 6, (3, 1): 7}
        for coord, idx in expected.items():
            assert c.index_of(coord) == idx
        # by-mode coalescing makes it structurally a plain row-major 4x2 layout
        assert c == row_major(4, 2)
        assert repr(c) == "(4,2):(2,1)"

    def test_example_d(self):
        d = row_major(2, 1) * column_major(2, 2)
        assert d.extents == (4, 2)
        expected = {(0, 0): 0, (1, 0): 1, (0, 1): 2, (1, 1): 3,
                    (2, 0): 4, (3, 0): 5, (2, 1): 6, (3, 1): 7}
        for coord, idx in expected.items():
            assert d.index_of(coord) == idx
        assert repr(d) == "((2,2),2):((1,4),2)"

    def test_example_e_shape(self):
        e = row_major(2, 1) * row_major(2, 2) * column_major(2, 2)
        assert e.extents == (8, 4)
        assert size(e) == 32
        assert sorted(e(m, n) for m in range(8) for n in range(4)) == list(range(32))

    def test_definition_formula(self):
        pairs = [
            (row_major(2, 1), row_major(2, 2)),
            (row_major(2, 1), column_major(2, 2)),
            (column_major(3, 2), row_major(2, 4)),
            (strided_layout([2, 3, 2], [2, 0, 1]), row_major(3, 1, 2)),
            (row_major(4, 3), column_major(2, 5)),
        ]
        for f, g in pairs:
            h = f * g
            assert h.extents == tuple(a * b for a, b in zip(f.extents, g.extents))
            for c in itertools.product(*map(range, h.extents)):
                assert h(c) == hidet_product_reference(f, g, c), (f, g, c)

    def test_associative(self):
        f, g, h = row_major(2, 1), row_major(2, 2), column_major(2, 2)
        left, right = (f * g) * h, f * (g * h)
        assert left.extents == right.extents == (8, 4)
        for c in itertools.product(range(8), range(4)):
            assert left(c) == right(c)
        assert left == right  # by-mode coalescing even makes them structurally equal

    def test_not_commutative(self):
        f, g = row_major(2, 1), row_major(2, 2)
        fg, gf = f * g, g * f
        assert fg.extents == gf.extents == (4, 2)
        assert any(fg(c) != gf(c) for c in itertools.product(range(4), range(2)))

    def test_rank_mismatch(self):
        with pytest.raises(ValueError, match="same rank"):
            row_major(2, 2) * row_major(2, 2, 2)

    def test_one_dimensional(self):
        h = Layout(4) * Layout(3)
        assert h == Layout(12, 1)
        assert row_major(4) * row_major(3) == Layout((12,), (1,))


# =========================================================================================
# CuTe layout algebra (02_layout_algebra.md)
# =========================================================================================

class TestCoalesce:
    def test_example(self):
        L = Layout((2, (1, 6)), (1, (6, 2)))
        r = coalesce(L)
        assert r == Layout(12, 1) and repr(r) == "12:1"

    def test_by_mode(self):
        a = Layout((2, (1, 6)), (1, (6, 2)))
        r = coalesce(a, (1, 1))
        assert repr(r) == "(2,6):(1,2)"
        assert r == make_layout(coalesce(a[0]), coalesce(a[1]))

    def test_four_cases(self):
        assert coalesce(Layout((3, 1), (2, 7))) == Layout(3, 2)      # s0:d0 ++ 1:d1
        assert coalesce(Layout((1, 3), (7, 2))) == Layout(3, 2)      # 1:d0 ++ s1:d1
        assert coalesce(Layout((3, 4), (2, 6))) == Layout(12, 2)     # s1 stride == s0*d0
        assert coalesce(Layout((3, 4), (2, 5))) == Layout((3, 4), (2, 5))

    def test_column_major_acts_like_vector(self):
        assert coalesce(Layout((2, 4), (1, 2))) == Layout(8, 1)

    def test_all_size_one(self):
        assert coalesce(Layout((1, (1, 1)), (3, (4, 5)))) == Layout(1, 0)


class TestComposition:
    A = Layout((6, 2), (8, 2))
    B = Layout((4, 3), (3, 1))

    def test_worked_example_values(self):
        R = composition(self.A, self.B)
        assert [R(i) for i in range(12)] == [0, 24, 2, 26, 8, 32, 10, 34, 16, 40, 18, 42]
        for i in range(12):
            assert R(i) == self.A(self.B(i))

    def test_worked_example_layout(self):
        R = composition(self.A, self.B)
        assert repr(R) == "((2,2),3):((24,2),8)"
        assert self.A.compose(self.B) == R
        # the two steps of Example 1
        assert composition(self.A, Layout(4, 3)) == Layout((2, 2), (24, 2))
        assert composition(self.A, Layout(3, 1)) == Layout(3, 8)

    def test_stride_division_examples(self):
        # (3,6,2,8):(w,x,y,z) / 72 => (1,1,1,4):(72w,24x,4y,2z): compose with 4:72
        w, x, y, z = 1, 100, 1000, 10000
        A = Layout((3, 6, 2, 8), (w, x, y, z))
        assert composition(A, Layout(4, 72)) == Layout(4, 2 * z)
        # (6,2) / 3 => (2,2) and (6,2) % 4 => (2,2): Example 1 above
        # (3,6,2,8):(w,x,y,z) o 16:9 = (1,2,2,4):(9w,3x,y,z), coalesced drops the 1
        assert composition(A, Layout(16, 9)) == Layout((2, 2, 4), (3 * x, y, z))

    def test_shape_mod_examples(self):
        A = Layout((6, 2), (1, 7))  # strides chosen so that coalesce keeps both modes
        assert composition(A, Layout(2, 1)) == Layout(2, 1)            # (6,2) % 2  => (2,1)
        assert composition(A, Layout(3, 1)) == Layout(3, 1)            # (6,2) % 3  => (3,1)
        assert composition(A, Layout(6, 1)) == Layout(6, 1)            # (6,2) % 6  => (6,1)
        assert composition(A, Layout(12, 1)) == Layout((6, 2), (1, 7))  # (6,2) % 12 => (6,2)
        A4 = Layout((3, 6, 2, 8), (1, 100, 1000, 10000))
        assert composition(A4, Layout(6, 1)) == Layout((3, 2), (1, 100))   # => (3,2,1,1)
        assert composition(A4, Layout(9, 1)) == Layout((3, 3), (1, 100))   # => (3,3,1,1)

    def test_example_2_reshape(self):
        assert composition(Layout(20, 2), Layout((5, 4), (4, 1))) == Layout((5, 4), (8, 2))
        assert composition(Layout(20, 2), Layout(5, 4)) == Layout(5, 8)
        assert composition(Layout(20, 2), Layout(4, 1)) == Layout(4, 2)

    def test_example_3_reshape(self):
        a = Layout((10, 2), (16, 4))
        b = Layout((5, 4), (1, 5))
        c = composition(a, b)
        assert repr(c) == "(5,(2,2)):(16,(80,4))"
        assert composition(a, Layout(5, 1)) == Layout(5, 16)
        assert composition(a, Layout(4, 5)) == Layout((2, 2), (80, 4))
        for i in range(20):
            assert c(i) == a(b(i))

    def test_by_mode_tiler(self):
        a = Layout((12, (4, 8)), (59, (13, 1)))
        r = composition(a, (Layout(3, 4), Layout(8, 2)))
        assert repr(r) == "(3,(2,4)):(236,(26,1))"
        assert r == make_layout(composition(a[0], Layout(3, 4)), composition(a[1], Layout(8, 2)))

    def test_shape_as_tiler(self):
        a = Layout((12, (4, 8)), (59, (13, 1)))
        r = composition(a, (3, 8))
        assert repr(r) == "(3,(4,2)):(59,(13,1))"
        assert r == composition(a, (Layout(3, 1), Layout(8, 1)))

    def test_none_and_partial_tiler(self):
        a = Layout((12, (4, 8)), (59, (13, 1)))
        assert composition(a, None) == a
        assert composition(a, (None, 8)) == Layout((12, (4, 2)), (59, (13, 1)))
        assert composition(a, (3,)) == Layout((3, (4, 8)), (59, (13, 1)))

    def test_stride_zero(self):
        assert composition(Layout((4, 3), (1, 7)), Layout(5, 0)) == Layout(5, 0)

    def test_stride_divisibility_violation(self):
        with pytest.raises(ValueError, match="stride divisibility"):
            composition(Layout((6, 2), (8, 2)), Layout(3, 4))

    def test_shape_divisibility_violation(self):
        with pytest.raises(ValueError, match="shape divisibility.*4 to divide 6 or 6 to divide 4"):
            composition(Layout((6, 2), (1, 7)), Layout(4, 1))

    def test_tiler_too_long(self):
        with pytest.raises(ValueError, match="at most 2"):
            composition(Layout((4, 4)), (2, 2, 2))


class TestComplement:
    @pytest.mark.parametrize("layout, target, expected", [
        (Layout(4, 1), 24, "6:4"),
        (Layout(6, 4), 24, "4:1"),
        (Layout((4, 6), (1, 4)), 24, "1:0"),
        (Layout(4, 2), 24, "(2,3):(1,8)"),
        (Layout((2, 4), (1, 6)), 24, "3:2"),
        (Layout((2, 2), (1, 6)), 24, "(3,2):(2,12)"),
    ])
    def test_examples(self, layout, target, expected):
        r = complement(layout, target)
        assert repr(r) == expected
        full = make_layout(layout, r)
        values = [full(i) for i in range(size(full))]
        assert len(set(values)) == len(values)       # unique indices
        assert cosize(full) >= target

    def test_doc_cosize_notes(self):
        assert cosize(Layout((4, 6), (1, 4))) == 24
        assert cosize(Layout((6, 4), (4, 1))) == 24
        assert cosize(Layout((4, (2, 3)), (2, (1, 8)))) == 24
        assert cosize(Layout(((2, 4), 3), ((1, 6), 2))) == 24
        assert cosize(Layout(((2, 2), (3, 2)), ((1, 6), (2, 12)))) == 24

    def test_cotarget_shape_and_default(self):
        assert complement(Layout(4, 1), (4, 6)) == Layout(6, 4)
        assert complement(Layout(4, 2)) == Layout(2, 1)  # cotarget defaults to cosize = 7

    def test_stride_zero_ignored(self):
        assert complement(Layout((4, 3), (1, 0)), 8) == Layout(2, 4)
        assert complement(Layout(3, 0), 5) == Layout(5, 1)

    def test_not_admissible(self):
        with pytest.raises(ValueError, match="not admissible"):
            complement(Layout((2, 2), (1, 3)), 12)
        with pytest.raises(ValueError, match="not admissible"):
            complement(Layout((4, 2), (1, 2)), 16)  # overlapping


class TestDivide:
    def test_1d_example(self):
        A = Layout((4, 2, 3), (2, 1, 8))
        B = Layout(4, 2)
        assert complement(B, size(A)) == Layout((2, 3), (1, 8))
        assert make_layout(B, complement(B, size(A))) == Layout((4, (2, 3)), (2, (1, 8)))
        r = logical_divide(A, B)
        assert repr(r) == "((2,2),(2,3)):((4,1),(2,8))"

    def test_2d_example(self):
        A = Layout((9, (4, 8)), (59, (13, 1)))
        tiler = (Layout(3, 3), Layout((2, 4), (1, 8)))
        r = logical_divide(A, tiler)
        # ((TileM,RestM), (TileN,RestN)) with shape ((3,3), (8,4))
        assert tuple(size(m) for m in r[0]) == (3, 3)
        assert tuple(size(m) for m in r[1]) == (8, 4)
        # first mode of each mode is (3,(2,4)):(177,(13,2)), the composition with the tiler
        tile = make_layout(r[0][0], r[1][0])
        assert repr(tile) == "(3,(2,4)):(177,(13,2))"
        assert tile == composition(A, tiler)
        assert repr(r) == "((3,3),((2,4),(2,2))):((177,59),((13,2),(26,1)))"

    def test_int_tiler(self):
        assert logical_divide(Layout(24), 4) == Layout((4, 6), (1, 4))
        assert logical_divide(Layout((8, 6)), (2, 3)) == Layout(((2, 4), (3, 2)), ((1, 2), (8, 24)))


class TestProduct:
    def test_1d_example(self):
        A = Layout((2, 2), (4, 1))
        B = Layout(6, 1)
        A_star = complement(A, 6 * 4)
        assert A_star == Layout((2, 3), (2, 8))
        assert composition(A_star, B) == Layout((2, 3), (2, 8))
        r = logical_product(A, B)
        assert repr(r) == "((2,2),(2,3)):((4,1),(2,8))"
        # "the result is identical to the result of the 1-D Logical Divide example"
        assert r == logical_divide(Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2))

    def test_1d_example_other_order(self):
        # B = (4,2):(2,1): 8 repeated tiles in a different order
        A = Layout((2, 2), (4, 1))
        r = logical_product(A, Layout((4, 2), (2, 1)))
        assert r == Layout(((2, 2), (4, 2)), ((4, 1), (8, 2)))
        values = [r(i) for i in range(size(r))]
        assert sorted(values) == list(range(32))
        assert r[0] == A

    def test_by_mode(self):
        # by-mode products treat each mode on its own (hence "not the recommended approach")
        a = Layout((2, 5), (5, 1))
        r = logical_product(a, (Layout(3), Layout(4)))
        assert r == make_layout(logical_product(a[0], Layout(3)), logical_product(a[1], Layout(4)))
        assert r == Layout(((2, 3), (5, 4)), ((5, 1), (1, 5)))


# =========================================================================================
# API behaviour
# =========================================================================================

class TestErrors:
    def test_bad_shapes(self):
        with pytest.raises(ValueError, match="positive"):
            Layout((4, 0))
        with pytest.raises(TypeError, match="int or a"):
            Layout((4, 2.0))
        with pytest.raises(TypeError):
            Layout(True)
        with pytest.raises(ValueError, match="not congruent"):
            Layout((4, (2, 3)), (1, 4))

    def test_bad_coordinates(self):
        L = Layout((4, (2, 3)))
        with pytest.raises(IndexError, match="0 <= index < 24"):
            L(24)
        with pytest.raises(IndexError, match="out of range"):
            L(4, 0)
        with pytest.raises(IndexError):
            L(-1)
        with pytest.raises(ValueError, match="rank 2"):
            L(1, 2, 3)
        with pytest.raises(TypeError, match="offset_expr"):
            L("i", 0)
        with pytest.raises(IndexError):
            L[2]

    def test_index_of_requires_full_coordinate(self):
        with pytest.raises(TypeError, match="2 entries"):
            row_major(2, 3).index_of(4)
        with pytest.raises(ValueError, match="2 entries"):
            row_major(2, 3).index_of((1, 1, 1))

    def test_make_layout_type(self):
        with pytest.raises(TypeError, match="Layout"):
            make_layout((4, 2), (1, 4))

    def test_strided_layout_ranks(self):
        with pytest.raises(ValueError, match="permutation"):
            strided_layout([2, 2], [0, 0])
        with pytest.raises(ValueError, match="permutation"):
            strided_layout([2, 2], [0, 1, 2])

    def test_numpy_strides_depth(self):
        with pytest.raises(ValueError, match="depth <= 1"):
            Layout((2, (2, 2))).numpy_strides(4)


class TestMisc:
    def test_equality_and_hash(self):
        a = Layout((4, (2, 3)), (1, (4, 8)))
        b = Layout([4, [2, 3]], [1, [4, 8]])
        assert a == b and hash(a) == hash(b)
        assert len({a, b, Layout((4, 6))}) == 2
        assert Layout(8) != Layout((8,))
        assert Layout(8) != "8:1"

    def test_numpy_ints_accepted(self):
        L = Layout((np.int64(4), np.int32(2)))
        assert L == Layout((4, 2)) and L(np.int64(5)) == 5

    def test_slicing_and_iter(self):
        L = Layout((4, (2, 3), 5))
        assert L[1:] == Layout(((2, 3), 5), ((4, 8), 24))
        assert list(L) == [L[0], L[1], L[2]]
        assert list(Layout(8)) == [Layout(8)]

    def test_flatten(self):
        assert flatten((3, (6, 2), 8)) == (3, 6, 2, 8)
        assert flatten(6) == 6
        L = Layout((2, (2, 2)), (4, (2, 1)))
        assert all(L(i) == flatten(L)(i) for i in range(8))

    def test_rank0(self):
        L = Layout((), ())
        assert size(L) == 1 and rank(L) == 0 and cosize(L) == 1
        assert L() == 0 and L(0) == 0

    def test_index_of_matches_call(self):
        d = row_major(2, 1) * column_major(2, 2)
        for c in itertools.product(range(4), range(2)):
            assert d.index_of(c) == d(*c) == d(c)


class Sym:
    """A symbolic value that supports only ``+`` and ``*`` with ints / Syms (no reflected
    operators, no int(), no bool(), no ==), to prove offset_expr never needs them."""

    def __init__(self, text):
        self.text = text

    def __add__(self, other):
        if isinstance(other, Sym):
            return Sym(f"({self.text} + {other.text})")
        assert isinstance(other, int) and not isinstance(other, bool)
        return Sym(f"({self.text} + {other})")

    def __mul__(self, other):
        assert isinstance(other, int) and not isinstance(other, bool)
        return Sym(f"{self.text}*{other}")

    def _forbidden(self, *args):
        raise AssertionError("offset_expr must not convert or compare coordinates")

    __int__ = __index__ = __bool__ = __eq__ = __lt__ = __float__ = _forbidden
    __hash__ = object.__hash__

    def __repr__(self):
        return self.text


class TestOffsetExpr:
    def test_row_major_symbolic(self):
        e = row_major(3, 4, 5).offset_expr((Sym("i"), Sym("j"), Sym("k")))
        assert e.text == "((i*20 + j*5) + k)"

    def test_flat_coordinate_into_hierarchical_layout(self):
        L = Layout((4, (2, 3)), (1, (4, 8)))
        i, j, k = Sym("i"), Sym("j"), Sym("k")
        assert L.offset_expr((i, j, k)).text == "((i + j*4) + k*8)"
        assert L.offset_expr((i, (j, k))).text == "((i + j*4) + k*8)"
        assert L.offset_expr([i, [j, k]]).text == "((i + j*4) + k*8)"

    def test_mixed_ints_fold_into_constant(self):
        L = Layout((4, (2, 3)), (1, (4, 8)))
        assert L.offset_expr((Sym("i"), 1, 2)).text == "(i + 20)"
        assert L.offset_expr((2, Sym("j"), 0)).text == "(j*4 + 2)"
        assert L.offset_expr((Sym("i"), 5)).text == "(i + 20)"   # int 1-D index into a mode
        assert L.offset_expr((1, 5)) == L(1, 5) == 21

    def test_stride_zero_dropped(self):
        L = Layout((4, 8), (0, 1))
        assert L.offset_expr((Sym("b"), Sym("j"))).text == "j"
        assert L.offset_expr((Sym("b"), 0)) == 0

    def test_single_mode_accepts_scalar(self):
        assert Layout(8, 3).offset_expr(Sym("i")).text == "i*3"
        assert Layout(((8,),), ((2,),)).offset_expr(Sym("i")).text == "i*2"

    def test_size_one_submodes_ignored(self):
        L = Layout(((4, 1), (1, 6)), ((6, 99), (5, 1)))
        assert L.offset_expr((Sym("i"), Sym("j"))).text == "(i*6 + j)"
        d = row_major(2, 1) * row_major(1, 3)  # extent-1 dims from hidet products
        assert d.offset_expr((Sym("i"), Sym("j"))).text == "(i*3 + j)"
        assert Layout((1, 1), (7, 8)).offset_expr(Sym("i")) == 0

    def test_symbolic_1d_index_into_multimode_raises(self):
        with pytest.raises(TypeError, match="div/mod"):
            row_major(3, 4).offset_expr(Sym("i"))
        with pytest.raises(TypeError, match="div/mod"):
            Layout((4, (2, 3))).offset_expr((Sym("i"), Sym("j")))

    def test_wrong_length(self):
        with pytest.raises(ValueError, match="expected one of those counts"):
            Layout((4, (2, 3))).offset_expr((Sym("i"), Sym("j"), Sym("k"), Sym("l")))

    def test_matches_call_on_ints(self):
        L = Layout((3, (2, 4), 5), (7, (1, 60), 2))
        for i in range(size(L)):
            hc = L.get_hier_coord(i)
            assert L.offset_expr(hc) == L(i)
            assert L.offset_expr(flatten(hc)) == L(i)

    def test_with_project_expressions(self):
        expr = pytest.importorskip("te.expr")
        dtypes = pytest.importorskip("te.dtypes")
        try:
            i, j = expr.Var("i", dtypes.int32), expr.Var("j", dtypes.int32)
        except Exception as exc:  # the expression module is developed concurrently
            pytest.skip(f"te.expr.Var unavailable: {exc}")
        e = row_major(4, 6).offset_expr((i, j))
        assert isinstance(e, expr.Expr)
        assert "i" in str(e) and "j" in str(e) and "6" in str(e)


class TestNumpyAndMajorness:
    def test_numpy_strides_match_numpy(self):
        for shape in [(2, 3), (4, 1, 5), (7,)]:
            for dt in (np.float32, np.float64, np.int8):
                a = np.zeros(shape, dtype=dt)
                assert row_major(*shape).numpy_strides(a.itemsize) == a.strides
                f = np.asfortranarray(a)
                assert column_major(*shape).numpy_strides(a.itemsize) == f.strides

    def test_as_strided_view(self):
        L = strided_layout([2, 3, 4], [1, 2, 0])
        buf = np.arange(size(L), dtype=np.int32)
        view = np.lib.stride_tricks.as_strided(buf, L.shape, L.numpy_strides(buf.itemsize))
        for c in itertools.product(*map(range, L.shape)):
            assert view[c] == buf[L(c)]

    def test_int_shape(self):
        assert Layout(8, 2).numpy_strides(8) == (16,)

    def test_is_row_major(self):
        assert row_major(3, 4).is_row_major() and not row_major(3, 4).is_column_major()
        assert column_major(3, 4).is_column_major() and not column_major(3, 4).is_row_major()
        assert (row_major(2, 1) * row_major(2, 2)).is_row_major()
        assert not (row_major(2, 1) * column_major(2, 2)).is_row_major()
        assert Layout(8).is_row_major() and Layout(8).is_column_major()
        # hierarchical but functionally row-major over extents (4, 3)
        assert Layout(((2, 2), 3), ((3, 6), 1)).is_row_major()
        # extent-1 modes: their stride is irrelevant
        assert Layout((3, 1, 4), (4, 99, 1)).is_row_major()
        assert not Layout((3, 4), (8, 2)).is_row_major()          # not compact


def test_docstring_examples():
    result = doctest.testmod(layout_mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 30
    assert result.failed == 0


def test_every_public_name_documented():
    for name in layout_mod.__all__:
        obj = getattr(layout_mod, name)
        if name in ("IntTuple", "Tiler"):
            continue
        assert obj.__doc__ and ">>>" in obj.__doc__, name
    for name, member in vars(Layout).items():
        if name.startswith("_") and name not in ("__call__", "__mul__", "__getitem__",
                                                  "__eq__", "__repr__", "__iter__"):
            continue
        doc = getattr(member, "__doc__", None) or getattr(getattr(member, "fget", None),
                                                          "__doc__", None)
        assert doc and ">>>" in doc, name
