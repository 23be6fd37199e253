"""Bounds inference (loopnest.analysis.bounds): exact regions for affine accesses, safe
whole-dimension over-approximation otherwise, checked against brute-force enumeration."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from loopnest.analysis.bounds import access_bounds, access_region
from loopnest.stmt import Block, Cond, For, Let, Store
from te import Buffer, Var, floordiv, float32, int32, simplify, substitute
from te.expr import IntImm


def text(region):
    return [(str(m), str(e)) for m, e in region]


def value(e, env):
    v = simplify(substitute(e, {k: IntImm(x, k.dtype) for k, x in env.items()}))
    assert isinstance(v, IntImm), f"{e} did not fold to a constant: {v}"
    return v.value


A = Buffer("A", (64,), float32)
B = Buffer("B", (64,), float32)


def test_stencil_window_of_one_iteration():
    N = Var("N", int32)
    An = Buffer("A", (N,), float32)
    Bn = Buffer("B", (N,), float32)
    i, k = Var("i"), Var("k")
    loop = For(k, 0, 3, Block([Store(Bn, (i,), An[i + k - 1])]))
    assert text(access_region(loop, An, [i], outer_ranges={i: (1, N - 1)})) == [("i - 1", "3")]


def test_load_on_the_side_not_taken_is_no_access():
    """A load under ``if_then_else`` is evaluated only where its side is taken (as every
    backend and the dependence analysis have it): the region leaves out the rest."""
    from te import if_then_else
    i = Var("i")
    loop = For(i, 0, 8, Block([Store(B, (i,), if_then_else(i < 4, A[i + 2], 0.0))]))
    assert text(access_region(loop, A)) == [("2", "4")]
    dim, = access_bounds(loop, A)
    assert dim.exact


def test_split_tile_region_is_constant():
    io, ii = Var("io"), Var("ii")
    body = For(ii, 0, 8, Block([Store(B, (io * 8 + ii,), A[io * 8 + ii])]))
    assert text(access_region(body, A, [io], outer_ranges={io: (0, 8)})) == [("io * 8", "8")]
    b, = access_bounds(body, A, [io], outer_ranges={io: (0, 8)})
    assert b.exact and b.extent_bound == 8 and str(b.stop) == "io * 8 + 8"


def test_symbolic_size_gives_min_and_constant_bound():
    N = Var("N", int32)
    An = Buffer("A", (N,), float32)
    io, ii = Var("io"), Var("ii")
    body = For(ii, 0, 8, Block([Store(B, (ii,), An[io * 8 + ii])]))
    b, = access_bounds(body, An, [io], outer_ranges={io: (0, floordiv(N + 7, 8))})
    assert str(b.min) == "io * 8"
    assert str(b.stop) == "min(io * 8 + 8, N)"
    assert b.extent_bound == 8


def test_two_dimensional_region_of_a_matmul_tile():
    M = Buffer("M", (16, 32), float32)
    C = Buffer("C", (16, 16), float32)
    io, ii, r = Var("io"), Var("ii"), Var("r")
    body = For(ii, 0, 4, Block([For(r, 0, 32, Block([Store(C, (io * 4 + ii, 0), M[io * 4 + ii, r])]))]))
    assert text(access_region(body, M, [io], outer_ranges={io: (0, 4)})) == [("io * 4", "4"), ("0", "32")]


def test_union_of_accesses_is_its_bounding_box():
    i = Var("i")
    s = Block([Store(B, (i,), A[i] + A[i + 5])])
    assert text(access_region(s, A, [i], outer_ranges={i: (0, 50)})) == [("i", "6")]


def test_floordiv_indices_are_exact():
    k = Var("k")
    loop = For(k, 0, 8, Block([Store(B, (k,), A[floordiv(k, 2) + 3])]))
    assert text(access_region(loop, A)) == [("3", "4")]


def test_conditions_restrict_the_region():
    k = Var("k")
    loop = For(k, 0, 10, Block([Cond(k < 3, Block([Store(B, (k,), A[k])]))]))
    assert text(access_region(loop, A)) == [("0", "3")]
    # the else branch gets the negated condition
    loop = For(k, 0, 10, Block([Cond(k < 3, Block([Store(B, (k,), 0.0)]), Block([Store(B, (k,), A[k])]))]))
    assert text(access_region(loop, A)) == [("3", "7")]


def test_let_bound_values_are_substituted():
    i, t = Var("i"), Var("t")
    s = Let(t, i * 2 + 1, Block([Store(B, (i,), A[t])]))
    assert text(access_region(s, A, [i], outer_ranges={i: (0, 8)})) == [("i * 2 + 1", "1")]


def test_reads_and_writes_are_selected():
    k = Var("k")
    loop = For(k, 0, 4, Block([Store(A, (k + 10,), A[k])]))
    assert text(access_region(loop, A, writes=False)) == [("0", "4")]
    assert text(access_region(loop, A, reads=False)) == [("10", "4")]
    assert text(access_region(loop, A)) == [("0", "14")]


def test_no_access_gives_an_empty_region():
    k = Var("k")
    loop = For(k, 0, 4, Block([Store(B, (k,), 1.0)]))
    assert access_bounds(loop, A) is None
    assert text(access_region(loop, A)) == [("0", "0")]


def test_non_affine_indices_take_the_whole_dimension():
    k = Var("k")
    I = Buffer("I", (8,), int32)
    for idx in (k * k, A.dims[0] * 0 + I[k], k / 3):  # quadratic, indirect, C division of unknown sign
        loop = For(k, 0, 8, Block([Store(B, (k,), A[idx])]))
        b, = access_bounds(loop, A)
        if str(idx) == "k / 3":  # the dependence converter models C division exactly
            assert (str(b.min), str(b.extent)) == ("0", "3")
            continue
        assert (str(b.min), str(b.extent), b.exact) == ("0", "64", False)


def test_non_affine_loop_bound_is_dropped_and_clamped():
    k, i = Var("k"), Var("i")
    loop = For(k, 0, i * i, Block([Store(B, (k,), A[k + 2])]))
    b, = access_bounds(loop, A, [i], outer_ranges={i: (0, 4)})
    assert (str(b.min), str(b.max)) == ("2", "63") and not b.exact


@settings(max_examples=60, deadline=None)
@given(a=st.integers(-3, 3), b=st.integers(-3, 3), c=st.integers(-10, 20), size=st.integers(1, 24),
       outer=st.integers(1, 6), inner=st.integers(1, 6), guard=st.one_of(st.none(), st.integers(0, 12)))
def test_region_matches_brute_force(a, b, c, size, outer, inner, guard):
    """For an access X[a*o + b*l + c] with l in [0, inner) (optionally under ``if (l + o <
    guard)``) and o in [0, outer): for every o the region contains every in-bounds element
    accessed, is exactly their bounding box when the access is contiguous (|b| <= 1; a
    strided access may get the bounds of its convex hull), and always lies inside X, even
    where nothing is accessed."""
    X = Buffer("X", (size,), float32)
    Y = Buffer("Y", (1,), float32)
    o, l = Var("o"), Var("l")
    st_ = Store(Y, (0,), X[o * a + l * b + c])
    body = Block([Cond(l + o < guard, Block([st_]))]) if guard is not None else Block([st_])
    loop = For(l, 0, inner, body)
    d, = access_bounds(loop, X, [o], outer_ranges={o: (0, outer)})
    for ov in range(outer):
        seen = [a * ov + b * lv + c for lv in range(inner) if guard is None or lv + ov < guard]
        seen = [x for x in seen if 0 <= x < size]
        lo, hi = value(d.min, {o: ov}), value(d.max, {o: ov})
        assert value(d.stop, {o: ov}) == hi + 1
        if seen:
            assert lo <= min(seen) and max(seen) <= hi
            if abs(b) <= 1:
                assert (lo, hi) == (min(seen), max(seen)), (ov, seen)
            assert value(d.extent, {o: ov}) == hi - lo + 1
            assert d.extent_bound >= hi - lo + 1
        if lo <= hi:
            assert 0 <= lo and hi < size


def test_or_condition_is_not_read_as_and():
    """``if (i < 2 || i >= 6) B[i] = A[i]`` over i in [0, 8) reads A[0..1] and A[6..7]: the
    region is their bounding box [0, 8), not the empty set that ``i < 2 && i >= 6`` gives
    (``Or`` used to be a subclass of ``And``)."""
    A8, B8 = Buffer("A", (8,), float32), Buffer("B", (8,), float32)
    i = Var("i")
    reads = Block([Store(B8, (i,), A8[i])])
    loop = For(i, 0, 8, Block([Cond((i < 2) | (i >= 6), reads)]))
    assert text(access_region(loop, A8, [])) == [("0", "8")]
    d, = access_bounds(loop, A8, [])
    assert [str(x) for x in (d.min, d.max, d.extent)] == ["0", "7", "8"]
    # the else branch runs under !(i < 2 || i >= 6), i.e. 2 <= i < 6
    other = For(i, 0, 8, Block([Cond((i < 2) | (i >= 6), Block([Store(B8, (i,), 0.0)]), reads)]))
    assert text(access_region(other, A8, [])) == [("2", "4")]
    # an And condition is still exact
    both = For(i, 0, 8, Block([Cond((i >= 2) & (i < 6), reads)]))
    assert text(access_region(both, A8, [])) == [("2", "4")]
    assert access_bounds(both, A8, [])[0].exact


#: a region of seed 118, case 281 (``compute_at`` at a sliced tail of a tiled loop): the
#: existentially quantified tile coordinates carry coefficients near 10 ** 6
_SLICED_TILE_REGION = (
    "[p0, p1] -> { [x0] : x0 >= 0 and ((p0 >= 2048 and -2047 + p0 <= 1024p1 <= p0 and x0 < p0) or (p0 >= "
    "2048 and -2047 + p0 <= 1024p1 <= -65 + p0 and 0 < x0 <= -2 + p0) or (p0 >= 2048 and -2047 + p0 <= "
    "1024p1 <= p0 and 0 < x0 < p0) or (p0 >= 2048 and -2047 + p0 <= 1024p1 <= p0 and x0 < p0) or (p0 <= "
    "2047 and p1 >= 0 and 1024p1 <= -65 + p0 and 0 < x0 <= -2 + p0) or (p0 <= 2047 and p1 >= 0 and 1024p1 "
    "<= p0 and 0 < x0 < p0) or (p0 <= 2047 and p1 >= 0 and 1024p1 <= p0 and x0 < p0) or (p0 <= 2047 and "
    "-2 + 1024p1 <= x0 <= 1021 + 1024p1 and x0 <= -2 + p0) or (p0 >= 2048 and 1024p1 >= -2047 + p0 and -2 "
    "+ 1024p1 <= x0 <= 1021 + 1024p1 and x0 <= -2 + p0) or (2 <= p0 <= 2047 and p1 >= 0 and 1024p1 <= p0 "
    "and x0 < p0) or (exists (e0, e1: p0 >= 2048 and 1024p1 >= -2047 + p0 and e0 >= 0 and 0 <= e1 <= 1023 "
    "and 958e1 >= -64449 - 1047552p1 + 1023x0 - 65472e0 and 959*floor((-65e1)/1023) <= -62271 + 958p0 - "
    "980992p1 - 61312e0 - 959e1)) or (exists (e0, e1: p0 <= 2047 and p1 >= 0 and e0 >= 0 and 0 <= e1 <= "
    "1023 and 958e1 >= -64449 - 1047552p1 + 1023x0 - 65472e0 and 959*floor((-65e1)/1023) <= -62271 + "
    "958p0 - 980992p1 - 61312e0 - 959e1)) or (exists (e0, e1: p0 >= 2048 and 1024p1 >= -2047 + p0 and e0 "
    ">= 0 and 895 - 958p0 - 1024p1 + 959x0 <= 64e0 <= -65 + p0 - 1024p1 and e1 <= 1023 and e1 <= 1 + p0 - "
    "1024p1 - 64e0 and 959*floor((-65e1)/1023) >= -62270 + 958p0 - 980992p1 - 61312e0 - 959e1)) or "
    "(exists (e0, e1: p0 <= 2047 and p1 >= 0 and e0 >= 0 and 895 - 958p0 - 1024p1 + 959x0 <= 64e0 <= -65 "
    "+ p0 - 1024p1 and e1 <= 1023 and e1 <= 1 + p0 - 1024p1 - 64e0 and 959*floor((-65e1)/1023) >= -62270 "
    "+ 958p0 - 980992p1 - 61312e0 - 959e1))) }")


def test_the_hull_of_a_region_with_large_quantified_coefficients_stays_within_its_budget():
    """The simple hull of this union (16 pieces, 3 quantified variables in four of them)
    took isl 16 s and then ran past ``BOUNDS_OPERATIONS``, twice per dimension, so one
    ``compute_at`` took 50 s; dropping the quantified constraints first gives, within the
    budget, a hull that still holds the region (bounds that are safe, if looser)."""
    import islpy as isl
    from loopnest.analysis.bounds import BOUNDS_OPERATIONS, _hull
    from loopnest.analysis.budget import isl_budget
    region = isl.Set(_SLICED_TILE_REGION)
    box = isl.Set("[p0, p1] -> { [x] : 0 <= x <= p0 }")
    with isl_budget(BOUNDS_OPERATIONS) as within:
        hull = _hull(region, box)
    assert within()
    assert region.is_subset(hull)
