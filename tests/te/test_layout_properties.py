"""Hypothesis properties of the CuTe layout algebra in te.layout.

Generators:
* ``any_layouts``: arbitrary shapes/strides, randomly nested (for coalesce).
* ``pow2_layouts``: power-of-two shapes with arbitrary strides -- always admissible as the
  left operand of a composition whose right operand has power-of-two strides.
* ``injective_layouts``: a random sub-layout (subset of modes, optionally reordered and
  scaled) of a permuted compact layout.  These are injective, complement-admissible, and
  their modes occupy disjoint "digit ranges", so composition distributes over them.
"""
import importlib.util
import itertools
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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

Layout, coalesce, complement = layout_mod.Layout, layout_mod.coalesce, layout_mod.complement
composition, cosize, flatten = layout_mod.composition, layout_mod.cosize, layout_mod.flatten
logical_divide, logical_product = layout_mod.logical_divide, layout_mod.logical_product
make_layout, size = layout_mod.make_layout, layout_mod.size

# Keep the whole file well under 10 s: ~100 examples per property.
SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
FEW = settings(SETTINGS, max_examples=40)


class _Leaf:
    __slots__ = ("s", "d")

    def __init__(self, s, d):
        self.s, self.d = s, d


@st.composite
def _tree(draw, items, level=0):
    """Randomly group a flat list of leaves into a nested tuple (depth <= 3)."""
    n = len(items)
    if level > 0 and n == 1:
        return items[0]
    if level >= 2 or n == 1:
        return tuple(items)
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=n - 1))) if n > 1 else []
    bounds = [0] + cuts + [n]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        out.append(draw(_tree(items[a:b], level + 1)))
    return tuple(out)


@st.composite
def _nest(draw, shapes, strides):
    leaves = [_Leaf(s, d) for s, d in zip(shapes, strides)]
    if len(leaves) == 1 and draw(st.booleans()):
        return Layout(shapes[0], strides[0])
    tree = draw(_tree(leaves))

    def part(t, attr):
        if isinstance(t, tuple):
            return tuple(part(e, attr) for e in t)
        return getattr(t, attr)

    return Layout(part(tree, "s"), part(tree, "d"))


@st.composite
def any_layouts(draw):
    n = draw(st.integers(1, 4))
    shapes = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    strides = draw(st.lists(st.integers(0, 30), min_size=n, max_size=n))
    return draw(_nest(shapes, strides))


@st.composite
def _pow2_shapes(draw, max_log):
    exps = []
    budget = max_log
    for _ in range(draw(st.integers(1, 4))):
        e = draw(st.integers(0, min(3, budget)))
        exps.append(e)
        budget -= e
    return [2 ** e for e in exps]


@st.composite
def pow2_layouts(draw, max_log=7):
    shapes = draw(_pow2_shapes(max_log))
    strides = draw(st.lists(st.integers(0, 40), min_size=len(shapes), max_size=len(shapes)))
    return draw(_nest(shapes, strides))


@st.composite
def injective_layouts(draw, max_log=7, pow2=True, max_cosize=None):
    """Sub-layout of a permuted compact layout; cosize <= 2**max_log (pow2) or max_cosize."""
    if pow2:
        shapes = draw(_pow2_shapes(max_log))
    else:
        n = draw(st.integers(1, 4))
        shapes = draw(st.lists(st.integers(1, 5), min_size=n, max_size=n))
    order = draw(st.permutations(range(len(shapes))))
    strides = [0] * len(shapes)
    acc = 1
    for j in order:
        strides[j] = acc
        acc *= shapes[j]
    total = acc
    keep = draw(st.lists(st.booleans(), min_size=len(shapes), max_size=len(shapes)))
    idx = [k for k in range(len(shapes)) if keep[k]] or [0]
    idx = draw(st.permutations(idx))
    if pow2:
        limit = 2 ** max_log if max_cosize is None else max_cosize
        scale = 1
        while total * scale * 2 <= limit and draw(st.booleans()):
            scale *= 2
    else:
        scale = draw(st.integers(1, 3))
    layout = draw(_nest([shapes[k] for k in idx], [strides[k] * scale for k in idx]))
    return layout, total * scale


def values(L):
    return [L(i) for i in range(size(L))]


def compatible(b_shape, r_shape):
    """CuTe ``compatible(B, R)``: every coordinate of B is a coordinate of R."""
    if isinstance(b_shape, tuple):
        return (isinstance(r_shape, tuple) and len(r_shape) == len(b_shape)
                and all(compatible(b, r) for b, r in zip(b_shape, r_shape)))
    return b_shape == size(r_shape)


def _log2(n):
    return n.bit_length() - 1


# -----------------------------------------------------------------------------------------
# coalesce
# -----------------------------------------------------------------------------------------

@SETTINGS
@given(any_layouts())
def test_coalesce_preserves_function(L):
    c = coalesce(L)
    assert size(c) == size(L)
    assert c.depth <= 1
    assert values(c) == values(L)
    assert coalesce(c) == c  # idempotent
    assert values(flatten(L)) == values(L)


@SETTINGS
@given(any_layouts())
def test_by_mode_coalesce_preserves_rank_and_rd_function(L):
    c = coalesce(L, (1,) * L.rank)
    assert c.rank == L.rank
    assert c.extents == L.extents
    for coord in itertools.product(*map(range, L.extents)):
        assert c(coord) == L(coord)


# -----------------------------------------------------------------------------------------
# composition
# -----------------------------------------------------------------------------------------

@st.composite
def composition_triples(draw):
    A = draw(pow2_layouts(max_log=6))
    B, _ = draw(injective_layouts(max_log=_log2(size(A))))
    C, _ = draw(injective_layouts(max_log=_log2(size(B))))
    return A, B, C


@SETTINGS
@given(composition_triples())
def test_composition_definition(abc):
    A, B, _ = abc
    assert cosize(B) <= size(A)
    R = composition(A, B)
    assert size(R) == size(B)
    assert compatible(B.shape, R.shape)
    for i in range(size(B)):
        assert R(i) == A(B(i))


@SETTINGS
@given(composition_triples())
def test_composition_associative(abc):
    A, B, C = abc
    left = composition(composition(A, B), C)
    right = composition(A, composition(B, C))
    assert size(left) == size(right) == size(C)
    for i in range(size(C)):
        assert left(i) == right(i) == A(B(C(i)))


# -----------------------------------------------------------------------------------------
# complement
# -----------------------------------------------------------------------------------------

@SETTINGS
@given(injective_layouts(pow2=False), st.integers(1, 3))
def test_complement_tiles_codomain(layout_bound, k):
    A, bound = layout_bound
    M = bound * k
    R = complement(A, M)
    image_a = set(values(A))
    image_r = values(R)
    # ordered: positive, increasing strides (on the non-trivial modes)
    strides = [d for s, d in zip(flatten(R.shape) if isinstance(R.shape, tuple) else (R.shape,),
                                 flatten(R.stride) if isinstance(R.stride, tuple)
                                 else (R.stride,)) if s != 1]
    assert all(d > 0 for d in strides) and strides == sorted(strides)
    # disjoint codomains (R(0) == A(0) == 0 is the shared origin)
    assert not image_a & set(image_r[1:])
    # (A, R) is injective and, as A is a piece of a compact layout, covers [0, M) exactly
    full = make_layout(A, R)
    vals = values(full)
    assert len(set(vals)) == len(vals)
    assert sorted(vals) == list(range(M))
    assert cosize(full) == M


@SETTINGS
@given(injective_layouts(pow2=False), st.integers(1, 200))
def test_complement_any_cotarget(layout_bound, M):
    A, _ = layout_bound
    R = complement(A, M)
    full = make_layout(A, R)
    vals = values(full)
    assert len(set(vals)) == len(vals)
    assert cosize(full) >= M


# -----------------------------------------------------------------------------------------
# logical_divide / logical_product
# -----------------------------------------------------------------------------------------

@st.composite
def divide_pairs(draw):
    A = draw(pow2_layouts(max_log=6))
    B, _ = draw(injective_layouts(max_log=_log2(size(A))))
    return A, B


@SETTINGS
@given(divide_pairs())
def test_logical_divide_definition(ab):
    A, B = ab
    D = logical_divide(A, B)
    Bstar = complement(B, size(A))
    BB = make_layout(B, Bstar)
    assert D == composition(A, BB)
    assert size(D) == size(A)  # B* completes B up to size(A) exactly (powers of two)
    for i in range(size(D)):
        assert D(i) == A(BB(i))
    # mode 0 is the tile: composition(A, B)
    tile = composition(A, B)
    assert [D[0](i) for i in range(size(B))] == values(tile)
    # mode 1 iterates over the tiles: tile t starts at A(B*(t))
    for t in range(size(Bstar)):
        assert D(0, t) == A(Bstar(t))
    # the divide is a permutation of A's elements
    assert sorted(values(D)) == sorted(values(A))


@st.composite
def product_pairs(draw):
    A, _ = draw(injective_layouts(max_log=4))
    B, _ = draw(injective_layouts(max_log=4))
    return A, B


@SETTINGS
@given(product_pairs())
def test_logical_product_definition(ab):
    A, B = ab
    P = logical_product(A, B)
    Astar = complement(A, size(A) * cosize(B))
    assert P == make_layout(A, composition(Astar, B))
    assert P[0] == A
    assert size(P) == size(A) * size(B)
    for j in range(size(B)):
        assert P[1](j) == Astar(B(j))
        for i in range(size(A)):
            assert P(i, j) == A(i) + Astar(B(j))
    vals = values(P)
    assert len(set(vals)) == len(vals)  # unique replicas of A


@FEW
@given(pow2_layouts(max_log=6), st.integers(0, 3))
def test_divide_by_int_tiler_matches_layout_tiler(A, e):
    n = 2 ** e
    if n > size(A):
        n = 1
    assert logical_divide(A, n) == logical_divide(A, Layout(n, 1))
