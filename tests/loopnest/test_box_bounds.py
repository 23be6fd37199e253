"""``box_bounds``: the bounds of a buffer's accesses read off rectangular loops without isl.
Where it answers, its answer is the one isl gives, field by field (the same text, or where a
tile's start ``min(...)`` is a term, the same values at every point of the outer ranges; checked on every bounds
question the random tester's programs ask under random schedules), and the true minimum and
maximum of the indices (checked against enumeration); where the accesses are guarded, not
affine, sized by a variable or reach outside the buffer, it leaves the question to isl."""
from __future__ import annotations

import itertools
import random
import warnings

import pytest
from hypothesis import given, settings, strategies as st

import loopnest.analysis.bounds as bounds
from fuzz.programs import random_program, to_te
from fuzz.schedules import DrawState, apply_step, draw_step
from loopnest import LoopNest, ScheduleError
from loopnest.analysis.boxes import box_bounds
from loopnest.stmt import Block, Cond, For, Store
from te import Broadcast, Buffer, Ramp, Var, cast, select
from te.expr import substitute
from te.queries import fold_int
from te.simplify import simplify


def _fields(dims) -> list:
    return [(str(b.min), str(b.max), str(b.extent), b.exact, str(b.extent_bound), str(b.stop)) for b in dims]


def _same_values(fast, isl, ranges: dict) -> bool:
    """Whether the bounds ``fast`` and ``isl`` hold the same values at every point of the
    outer ranges (constant ``var -> (start, stop)``), exactness and extent bounds alike."""
    if [(b.exact, str(b.extent_bound)) for b in fast] != [(b.exact, str(b.extent_bound)) for b in isl]:
        return False
    axes = [(v, range(fold_int(simplify(lo)), fold_int(simplify(hi)))) for v, (lo, hi) in ranges.items()]
    for point in itertools.product(*(r for _, r in axes)):
        env = {v: x for (v, _), x in zip(axes, point)}
        for a, b in zip(fast, isl):
            for field in ("min", "max", "extent", "stop"):
                x, y = (fold_int(simplify(substitute(getattr(c, field), env))) for c in (a, b))
                if x is None or x != y:
                    return False
    return True


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the random programs' reference values
@pytest.mark.parametrize("seed", range(3))
def test_box_bounds_agree_with_isl_on_random_schedules(seed, monkeypatch):
    asked = []
    real = bounds.access_bounds

    def both(stmt, buffer, outer_vars=(), nest=None, **kw):
        ranges = dict(bounds._outer_ranges_from_nest(nest, outer_vars))
        ranges.update(kw.get("outer_ranges") or {})
        box = box_bounds(stmt, buffer, ranges, reads=kw.get("reads", True), writes=kw.get("writes", True))
        fast = real(stmt, buffer, outer_vars, nest, **kw)
        with monkeypatch.context() as m:
            m.setattr(bounds, "box_bounds", lambda *a, **k: None)
            isl = real(stmt, buffer, outer_vars, nest, **kw)
        if box is not None:
            asked.append(buffer.name)
            if _fields(fast) != _fields(isl):     # a min or max as a term: isl writes it otherwise
                assert _same_values(fast, isl, ranges), (buffer.name, str(stmt), _fields(fast), _fields(isl))
        return isl
    monkeypatch.setattr(bounds, "access_bounds", both)
    rnd = random.Random(seed)
    for _ in range(40):
        nest, state = LoopNest(to_te(random_program(rnd))[0]), DrawState()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(rnd.randint(0, 8)):
                step = draw_step(nest, rnd, False, state)
                try:
                    apply_step(nest, step)
                except ScheduleError:
                    pass
                state.update(nest, step["op"])
            nest.copy().prepare_for_codegen()
    assert asked          # the comparison ran


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(-2, 2), st.integers(1, 4)), min_size=1, max_size=2),
       st.integers(-3, 3), st.integers(0, 12), st.integers(0, 4), st.integers(1, 3),
       st.sampled_from([(1, 1), (4, 1), (3, -1), (2, 3)]))
def test_box_bounds_are_the_lowest_and_highest_index(loops, outer_coeff, const, outer_lo, outer_trips, vector):
    """``A[sum(c_u * u) + a * o + k]`` (or a ramp of ``lanes`` from there by ``stride``) with each
    ``u`` in ``[s_u * o + 1, s_u * o + 1 + trips)`` and ``o`` in a range: where box_bounds
    answers, its minimum and maximum at each ``o`` are those of enumeration; it declines
    exactly where an index leaves the buffer."""
    lanes, stride = vector
    o = Var("o")
    us = [Var(f"u{k}") for k in range(len(loops))]
    index = o * outer_coeff + const
    for u, (c, _, _) in zip(us, loops):
        index = index + u * c
    A = Buffer("A", (40,), "float32")
    body = Store(A, (index,), 1.0) if lanes == 1 else Store(A, (Ramp(index, stride, lanes),), Broadcast(1.0, lanes))
    for u, (_, s, trips) in reversed(list(zip(us, loops))):
        body = For(u, o * s + 1, o * s + 1 + trips, Block((body,)))
    got = box_bounds(body, A, {o: (outer_lo, outer_lo + outer_trips)})
    seen = {}
    for ov in range(outer_lo, outer_lo + outer_trips):
        values = [outer_coeff * ov + const + sum(c * (s * ov + 1 + t) for (c, s, _), t in zip(loops, ts))
                  + stride * lane for ts in itertools.product(*(range(trips) for _, _, trips in loops))
                  for lane in range(lanes)]
        seen[ov] = (min(values), max(values))
    inside = all(0 <= lo and hi < 40 for lo, hi in seen.values())
    assert (got is not None) == inside
    if got is not None:
        (b,) = got
        for ov, (lo, hi) in seen.items():
            at = {o: ov}
            assert fold_int(simplify(bounds.E.substitute(b.min, at))) == lo
            assert fold_int(simplify(bounds.E.substitute(b.max, at))) == hi
            assert fold_int(b.extent) == hi - lo + 1


def test_accesses_that_are_not_a_box_are_left_to_isl():
    i, n = Var("i"), Var("n")
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (16,), "float32")
    loop = lambda *body: For(i, 0, 8, Block(body))      # noqa: E731
    assert box_bounds(loop(Store(B, (i,), A[i])), A, {}) is not None
    assert box_bounds(loop(Cond(i < 4, Store(B, (i,), A[i]))), A, {}) is None             # guarded
    assert box_bounds(loop(Store(B, (i,), select(i < 4, A[i], 0.0))), A, {}) is None    # read on a condition
    assert box_bounds(loop(Store(B, (i,), A[i * i])), A, {}) is None                      # not affine
    assert box_bounds(loop(Store(B, (i,), A[i + 9])), A, {}) is None                      # leaves A
    assert box_bounds(loop(Store(B, (i,), A[i + n])), A, {n: (0, 4)}) is not None
    assert box_bounds(loop(Store(B, (i,), A[i + n])), A, {}) is None                      # n unbounded
    assert box_bounds(For(i, 0, n, Block((Store(B, (i,), A[i]),))), A, {}) is None        # trips unknown
    assert box_bounds(loop(Store(B, (i,), A[cast(B[i], "int32")])), A, {}) is None       # data-dependent
    assert box_bounds(loop(Store(B, (i,), 1.0)), A, {}) is None                           # no access
    write_only = box_bounds(loop(Store(A, (i,), A[i + 1])), A, {}, reads=False)
    assert [(str(b.min), str(b.max)) for b in write_only] == [("0", "7")]
