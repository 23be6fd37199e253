"""Reductions that reorder, and the smaller schedule items of issue 13.

* ``reorder`` / ``reorder_axis`` / ``tile`` of a reduction's loops distribute the init store
  (and other statements in the way) into loops of their own when that is legal, and refuse
  with the dependence named otherwise, leaving the nest unchanged.
* ``reorder_axis(a, a)`` is a no-op (NNC's ``reorderAxis``).
* After a full ``unroll``, handles to the unrolled loop raise naming ``unroll``, handles to
  the other loops keep naming the same loops, and ``get_loops_for``'s list does not shift.
* ``composition`` gives CuTe's results on the worked examples of CuTe's layout-algebra page.
"""
from __future__ import annotations

import numpy as np
import pytest

from loopnest import LoopNest, ScheduleError
from loopnest.stmt import Block, For, Store
from nests import roundtrip, run, unchanged
from te import Buffer, Compute, Reduce, Sum, float32
from te.layout import Layout, composition, make_layout


def matmul(m=5, n=7, depth=6):
    A = Buffer("A", (m, depth), float32)
    B = Buffer("B", (depth, n), float32)
    C = Reduce("C", (m, n), Sum(), lambda i, j, k: A[i, k] * B[k, j], (depth,))
    return A, B, C


def check_matmul(nest, A, B, C, backend):
    rng = np.random.default_rng(13)
    a = rng.uniform(-2, 2, A.shape).astype(np.float32)
    b = rng.uniform(-2, 2, B.shape).astype(np.float32)
    c = np.full(C.shape, np.nan, np.float32)
    run(nest, [A, B, C], [a, b, c], backend)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------
# reductions that reorder
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["ireval", "llvm"])
def test_ikj_matmul_reorders_without_a_manual_distribute(backend):
    A, B, C = matmul()
    nest = LoopNest([C])
    i, j, k = nest.get_loops_for(C)
    assert nest.reorder([i, j, k], [0, 2, 1]) == [i, k, j]
    # only the init in the way of the loops that move (j, k) gets a loop of its own
    assert str(nest) == (
        "for (int i = 0; i < 5; i++) {\n"
        "  for (int j_1 = 0; j_1 < 7; j_1++) {\n"
        "    C[i, j_1] = 0.0f;\n"
        "  }\n"
        "  for (int k = 0; k < 6; k++) {\n"
        "    for (int j = 0; j < 7; j++) {\n"
        "      C[i, j] = C[i, j] + A[i, k] * B[k, j];\n"
        "    }\n"
        "  }\n"
        "}")
    assert [l.name for l in nest.get_loops_for(C)] == ["i", "k", "j"]
    roundtrip(nest, [C])
    check_matmul(nest, A, B, C, backend)


@pytest.mark.parametrize("backend", ["ireval", "llvm"])
def test_reorder_axis_and_tile_of_a_reduction(backend):
    A, B, C = matmul()
    nest = LoopNest([C])
    i, j, k = nest.get_loops_for(C)
    assert nest.reorder_axis(k, j) == [k, j]
    assert [l.name for l in nest.get_loops_for(C)] == ["i", "k", "j"]
    check_matmul(nest, A, B, C, backend)
    nest = LoopNest([C])
    i, j, k = nest.get_loops_for(C)
    jo, ko, ji, ki = nest.tile(j, k, 4, 4)
    assert [l.name for l in nest.get_loops_for(C)] == ["i", "j_outer", "k_outer", "j_inner", "k_inner"]
    check_matmul(nest, A, B, C, backend)


@pytest.mark.parametrize("backend", ["ireval", "llvm"])
def test_kij_matmul_distributes_the_init_out_of_both_loops(backend):
    A, B, C = matmul()
    nest = LoopNest([C])
    i, j, k = nest.get_loops_for(C)
    assert nest.reorder([i, j, k], [2, 0, 1]) == [k, i, j]
    assert [l.name for l in nest.get_all_loops()] == ["i_1", "j_1", "k", "i", "j"]
    roundtrip(nest, [C])
    check_matmul(nest, A, B, C, backend)


def test_reorder_distributes_sibling_statements():
    X = Buffer("X", (4, 6), float32)
    D = Compute("D", (4,), lambda i: X[i, 0] * 2.0)
    E = Compute("E", (4, 6), lambda i, j: X[i, j] + 1.0)
    nest = LoopNest([D, E])
    i = nest.fuse([nest.get_loops_for(D)[0], nest.get_loops_for(E)[0]])
    j = nest.get_loops_for(E)[1]
    nest.reorder([i, j], [1, 0])
    assert str(nest) == (
        "for (int i_2 = 0; i_2 < 4; i_2++) {\n"
        "  D[i_2] = X[i_2, 0] * 2.0f;\n"
        "}\n"
        "for (int j = 0; j < 6; j++) {\n"
        "  for (int i = 0; i < 4; i++) {\n"
        "    E[i, j] = X[i, j] + 1.0f;\n"
        "  }\n"
        "}")


def scan_nest():
    """for i in [1, 8): C[i] = C[i - 1]; for k: C[i] += A[i, k] -- the statement before k
    reads what the accumulation of the previous i wrote, so it cannot get a loop of its own."""
    A = Buffer("A", (8, 16), float32)
    C = Reduce("C", (8,), Sum(), lambda i, k: A[i, k], (16,))
    nest = LoopNest([C])
    i, k = nest.get_loops_for(C)
    nest.root = Block([For(i.var, 1, 8, Block([Store(C, (i.var,), C[i.var - 1]), For(k.var, 0, 16, Block([
        Store(C, (i.var,), C[i.var] + A[i.var, k.var])]))]))])
    return nest, i, k


def test_reorder_refused_when_the_statement_in_the_way_cannot_be_distributed():
    nest, i, k = scan_nest()
    msg = unchanged(nest, lambda: nest.reorder([i, k], [1, 0]))
    assert msg.startswith("reorder: the body of loop i holds `C[i] = C[i - 1];` besides loop k, and it cannot be "
                          "moved into a loop of its own: cannot distribute loop i: `C[i] = C[i - 1]` reads C[i - 1], "
                          "written by `C[i] = C[i] + A[i, k]` in the previous iteration of loop i (flow dependence "
                          "on C carried by loop i)")
    assert "tile(i, k): the body of loop i holds" in unchanged(nest, lambda: nest.tile(i, k, 2, 4))
    assert "reorder: the body of loop i holds" in unchanged(nest, lambda: nest.reorder_axis(k, i))


def test_refused_reorder_after_a_distribution_leaves_the_nest_unchanged():
    """The init store can be distributed out, but the reorder itself is illegal (each
    accumulation into C[i] reads C[i - 1] as the previous i left it): the refusal leaves no
    distributed loop behind."""
    A = Buffer("A", (6, 6), float32)
    C = Reduce("C", (6,), Sum(), lambda i, k: A[i, k], (6,))
    nest = LoopNest([C])
    i, k = nest.get_loops_for(C)
    iv, kv = i.var, k.var
    nest.root = Block([For(iv, 1, 6, Block([Store(C, (iv,), 0.0), For(kv, 0, 6, Block([
        Store(C, (iv,), C[iv] + C[iv - 1] * A[iv, kv])]))]))])
    msg = unchanged(nest, lambda: nest.reorder([i, k], [1, 0]))
    assert msg.startswith("cannot reorder loops (i, k) to (k, i)")
    assert [l.name for l in nest.get_all_loops()] == ["i", "k"]


def test_distribute_keep_chooses_the_loop_that_keeps_the_handle():
    A, B, C = matmul()
    nest = LoopNest([C])
    i, j, k = nest.get_loops_for(C)
    assert nest.distribute(j, keep=1) == [nest.loop("j_1"), j]
    assert [l.name for l in nest.get_loops_for(C)] == ["i", "j", "k"]
    roundtrip(nest, [C])
    assert "keep must index a statement" in unchanged(nest, lambda: nest.distribute(i, keep=3))


def test_identity_reorder_of_an_imperfect_nest_changes_nothing():
    A, B, C = matmul()
    nest = LoopNest([C])
    i, j, k = nest.get_loops_for(C)
    before = str(nest)
    assert nest.reorder([k, i, j], [1, 2, 0]) == [i, j, k]
    assert str(nest) == before


# ------------------------------------------------------------------------------------
# reorder_axis(a, a)
# ------------------------------------------------------------------------------------
def test_reorder_axis_of_a_loop_with_itself_is_a_no_op():
    A, B, C = matmul()
    nest = LoopNest([C])
    i, j, k = nest.get_loops_for(C)
    before = str(nest)
    assert nest.reorder_axis(k, k) == [k, k]
    assert nest.reorder_axis("j", j) == [j, j]
    assert str(nest) == before
    roundtrip(nest, [C])


# ------------------------------------------------------------------------------------
# unroll: handles and lists stay on their loops
# ------------------------------------------------------------------------------------
def conv_like():
    """Y[o] = sum over (c, r, s) of X[o + r, c, s]: loops o, c, r, s."""
    X = Buffer("X", (10, 4, 3), float32)
    Y = Reduce("Y", (8,), Sum(), lambda o, c, r, s: X[o + r, c, s], (4, 3, 3))
    return X, Y


def test_unrolled_loop_handle_raises_naming_unroll():
    X, Y = conv_like()
    nest = LoopNest([Y])
    o, c, r, s = nest.get_loops_for(Y)
    nest.unroll(r)
    assert not r.exists()
    with pytest.raises(ScheduleError, match=r"loop r was removed by unroll\(r\)"):
        nest.unroll(r)
    with pytest.raises(ScheduleError, match=r"loop r was removed by unroll\(r\)"):
        r.extent
    assert (o.extent, c.extent, s.extent) == (8, 4, 3)       # the other handles name the same loops


@pytest.mark.parametrize("backend", ["ireval", "llvm"])
def test_list_read_again_after_unroll_does_not_shift(backend):
    """Unrolling loops[2] then loops[3] of lists read again unrolls r then s, never c (the
    case of a convolution whose wide reduction loop got unrolled instead)."""
    X, Y = conv_like()
    nest = LoopNest([Y])
    assert [l.name for l in nest.get_loops_for(Y)] == ["o", "c", "r", "s"]
    nest.unroll(nest.get_loops_for(Y)[2])
    loops = nest.get_loops_for(Y)
    assert [l.name for l in loops] == ["o", "c", "r", "s"]
    assert not loops[2].exists() and loops[3].exists() and loops[1].exists()
    with pytest.raises(ScheduleError, match="removed by unroll"):
        nest.unroll(loops[2])
    nest.unroll(nest.get_loops_for(Y)[3])
    assert [l.name for l in nest.get_loops_for(Y)] == ["o", "c", "r", "s"]
    assert [l.name for l in nest.get_all_loops()] == ["o", "c"]    # every copy of s was unrolled
    x = np.random.default_rng(1).uniform(-2, 2, X.shape).astype(np.float32)
    y = np.full(8, np.nan, np.float32)
    run(nest, [X, Y], [x, y], backend)
    ref = np.array([x[o:o + 3].astype(np.float64).sum() for o in range(8)])
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_unroll_of_a_loop_inside_an_unrolled_one_by_its_old_handle():
    X, Y = conv_like()
    nest = LoopNest([Y])
    o, c, r, s = nest.get_loops_for(Y)
    nest.unroll(s)
    nest.unroll(r)
    assert [l.name for l in nest.get_loops_for(Y)] == ["o", "c", "r", "s"]
    assert [l.name for l in nest.get_all_loops()] == ["o", "c"]
    with pytest.raises(ScheduleError, match=r"removed by unroll\(s\)"):
        nest.vectorize(s)


def test_unrolled_loop_handle_on_a_copy_of_the_nest():
    X, Y = conv_like()
    nest = LoopNest([Y])
    o, c, r, s = nest.get_loops_for(Y)
    nest.unroll(s)
    with pytest.raises(ScheduleError, match=r"loop s was removed by unroll\(s\)"):
        nest.copy().unroll(s)


def test_refused_unroll_records_nothing():
    X, Y = conv_like()
    nest = LoopNest([Y])
    o, c, r, s = nest.get_loops_for(Y)
    unchanged(nest, lambda: nest.unroll(o, 8))            # factor not below the extent
    assert o.exists() and [l.name for l in nest.get_loops_for(Y)] == ["o", "c", "r", "s"]


# ------------------------------------------------------------------------------------
# composition: CuTe's worked examples (02_layout_algebra.md, upstream of the seed)
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("a, b, expected", [
    # Example 1, and its two steps
    (Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1)), "((2,2),3):((24,2),8)"),
    (Layout((6, 2), (8, 2)), Layout(4, 3), "(2,2):(24,2)"),
    (Layout((6, 2), (8, 2)), Layout(3, 1), "3:8"),
    # the same A with a 4 x 2 B: by mode, the first mode stays (2,2), not 4
    (Layout((6, 2), (8, 2)), Layout((4, 2), (3, 1)), "((2,2),2):((24,2),8)"),
    # Example 2: 20:2 as a 5 x 4 row-major matrix
    (Layout(20, 2), Layout((5, 4), (4, 1)), "(5,4):(8,2)"),
    (Layout(20, 2), Layout(5, 4), "5:8"),
    (Layout(20, 2), Layout(4, 1), "4:2"),
    # Example 3: (10,2):(16,4) as a 5 x 4 column-major matrix (by-mode coalesced)
    (Layout((10, 2), (16, 4)), Layout((5, 4), (1, 5)), "(5,(2,2)):(16,(80,4))"),
    (Layout((10, 2), (16, 4)), Layout(5, 1), "5:16"),
    (Layout((10, 2), (16, 4)), Layout(4, 5), "(2,2):(80,4)"),
    # the README of the Julia port: 20:2 o (4,5):(1,4)
    (Layout(20, 2), Layout((4, 5), (1, 4)), "(4,5):(2,8)"),
    # by-mode composition with a tiler <3:4, 8:2>, and with a shape (3, 8)
    (Layout((12, (4, 8)), (59, (13, 1))), (Layout(3, 4), Layout(8, 2)), "(3,(2,4)):(236,(26,1))"),
    (Layout((12, (4, 8)), (59, (13, 1))), (3, 8), "(3,(4,2)):(59,(13,1))"),
])
def test_composition_worked_examples(a, b, expected):
    r = composition(a, b)
    assert repr(r) == expected
    if isinstance(b, Layout):
        assert all(r(c) == a(b(c)) for c in range(b.size))


def test_composition_by_mode_is_the_composition_of_each_mode():
    a = Layout((12, (4, 8)), (59, (13, 1)))
    tiler = (Layout(3, 4), Layout(8, 2))
    assert composition(a, tiler) == make_layout(composition(a[0], tiler[0]), composition(a[1], tiler[1]))


def test_composition_shape_and_stride_divisibility():
    # (3,6,2,8):(w,x,y,z) o 16:9 = (1,2,2,4):(9w,3x,y,z), the size-1 mode dropped
    w, x, y, z = 1, 100, 1000, 10000
    A = Layout((3, 6, 2, 8), (w, x, y, z))
    assert composition(A, Layout(16, 9)) == Layout((2, 2, 4), (3 * x, y, z))
    assert composition(A, Layout(4, 72)) == Layout(4, 2 * z)
