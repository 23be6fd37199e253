"""``iterations_independent`` and ``same_value_of``: the legality checks' shortcut for loops
whose every written element is touched at one iteration. Where they make a claim, the
dependence analysis, wherever it is exact, agrees: checked on the random tester's programs
under random schedules, and against brute-force enumeration over index forms. And the
shortcut changes no answer the checks give (a loop that carries a dependence is refused as
before)."""
from __future__ import annotations

import random
import warnings

import islpy as isl
import pytest
from hypothesis import given, settings, strategies as st

from fuzz.programs import random_program, to_te
from fuzz.schedules import DrawState, apply_step, draw_step
from loopnest import LoopNest, ScheduleError
from loopnest.analysis.dependences import buffers_carried_by
from loopnest.analysis.domains import analyze
from loopnest.analysis.independent import iterations_independent, privately_computed, same_value_of
from loopnest.analysis.legality import way_to_loop
from loopnest.loop import LoopIndex
from loopnest.queries import stmt_reads, stmt_writes
from loopnest.stmt import Block, For, Store
from te import Buffer, Compute, Var
from te.expr import IntImm, substitute
from te.queries import fold_int
from te.simplify import simplify


def _random_schedule(rnd: random.Random, steps: int, constant_sizes: bool = False):
    """A random program (with its sizes constants, ``constant_sizes``) under up to ``steps``
    random schedule steps: yields its nest before them and after each (the same nest,
    changed in place; a refused step leaves it as it was)."""
    outputs, _, _ = to_te(random_program(rnd), constant_sizes)
    nest, state = LoopNest(outputs), DrawState()
    yield nest
    for _ in range(rnd.randint(0, steps)):
        step = draw_step(nest, rnd, False, state)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                apply_step(nest, step)
        except ScheduleError:
            pass
        state.update(nest, step["op"])
        yield nest


def _first_loops(loops) -> list:
    """The first For (pre-order) of each loop variable among ``loops``: the loop the checks ask about."""
    return list({id(f.var): f for f in reversed(loops)}.values())


def _exact_inside(root, f) -> bool:
    """Whether the analysis of ``root`` models every access inside loop ``f`` exactly."""
    an = analyze(root)
    info = an.loop_info(f.var)
    return all(a.exact and a.instance.domain_exact for a in an.accesses if info.contains(a.instance))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the random programs' reference values
@pytest.mark.parametrize("seed", range(4))
def test_independent_loops_carry_no_dependence_the_analysis_finds(seed):
    rnd = random.Random(seed)
    shown = checked = 0
    for _ in range(25):
        for nest in _random_schedule(rnd, 6):
            for f in _first_loops(nest.loop_index().loops):
                if not iterations_independent(f):
                    continue
                shown += 1
                root = way_to_loop(nest, f.var)
                try:
                    if not _exact_inside(root, f):
                        continue
                    carried = buffers_carried_by(root, f.var)
                except RecursionError:          # a deep inlined expression: the nest's checks run it on a deep thread
                    continue
                checked += 1
                assert carried == [], (f.var.name, [b.name for b in carried], str(root))
    # the analysis is exact inside 45% to 85% of these loops, by seed (gathers and masks are not)
    assert checked >= shown // 3 and checked > 50, (checked, shown)


def _touch_one_element_at_two_values(root, f, v) -> bool | None:
    """Whether the analysis of ``root`` finds two instances inside loop ``f``, in one iteration
    of the loops around ``f``, that touch one element, one of them writing it, at different
    values of ``v``; None where it models an access inside ``f`` inexactly."""
    an = analyze(root)
    outer, info = an.loop_info(f.var), an.loop_info(v)
    accs = [a for a in an.accesses if outer.contains(a.instance)]
    if not all(a.exact and a.instance.domain_exact for a in accs):
        return None
    written = {id(a.buffer) for a in accs if a.is_write}
    d = info.depth
    for a in accs:
        for b in accs:
            if a.buffer is not b.buffer or id(a.buffer) not in written or not (a.is_write or b.is_write):
                continue
            same = a.relation.apply_range(b.relation.reverse())      # instances of a -> of b, one element
            for outside in range(outer.depth):
                same = same.equate(isl.dim_type.in_, outside, isl.dim_type.out, outside)
            differ = same.order_gt(isl.dim_type.in_, d, isl.dim_type.out, d).union(
                same.order_lt(isl.dim_type.in_, d, isl.dim_type.out, d))
            if not differ.is_empty():
                return True
    return False


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the random programs' reference values
@pytest.mark.parametrize("seed", range(4))
def test_same_value_of_a_loop_means_distance_zero_for_the_analysis(seed):
    rnd = random.Random(100 + seed)
    checked = 0
    for _ in range(20):
        for nest in _random_schedule(rnd, 6):       # the nest its whole schedule leaves
            pass
        for f in _first_loops(nest.loop_index().loops):
            root = way_to_loop(nest, f.var)
            for g in _first_loops(LoopIndex(f).loops):
                if not same_value_of(f, g.var):
                    continue
                try:
                    found = _touch_one_element_at_two_values(root, f, g.var)
                except RecursionError:
                    continue
                if found is not None:
                    checked += 1
                    assert not found, (f.var.name, g.var.name, str(root))
    assert checked > 30, checked


def test_a_loop_that_reads_what_it_writes_is_still_refused():
    A = Buffer("A", (16,), "float32")
    B = Compute("B", (16,), lambda i: A[i] + 1.0)
    C = Compute("C", (16,), lambda i: B[i] + B[15 - i])
    nest = LoopNest([C])
    nest.compute_at(nest.buffer("B"), nest.get_loops_for(C)[0])
    with pytest.raises(ScheduleError, match="cannot vectorize"):
        nest.vectorize(nest.get_loops_for(C)[0])


def test_a_loop_writing_one_element_twice_is_still_refused():
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (8,), "float32")
    i = Var("i")
    halves = For(i, 0, 16, Block((Store(B, (i // 2,), A[i]),)))     # B[i // 2]: read nowhere in the loop
    assert not iterations_independent(halves)
    nest = LoopNest(Block((halves,)), outputs=[B])
    with pytest.raises(ScheduleError, match="cannot vectorize"):
        nest.vectorize(nest.loop_index().loops[0].var)


_INDEX_FORMS = [lambda i, c, d: i * c + d, lambda i, c, d: d - i * c, lambda i, c, d: i // c + d,
                lambda i, c, d: i % c + d, lambda i, c, d: (i * c) // 2 + d, lambda i, c, d: i * i + d,
                lambda i, c, d: (i + d) * c - i * c, lambda i, c, d: i * c - (i // 2) * (2 * c) + d]


@given(form=st.sampled_from(range(len(_INDEX_FORMS))), c=st.integers(-3, 3), d=st.integers(0, 40),
       n=st.integers(1, 12))
@settings(max_examples=300, deadline=None)
def test_independent_means_every_iteration_writes_its_own_element(form, c, d, n):
    A, B = Buffer("A", (64,), "float32"), Buffer("B", (64,), "float32")
    i = Var("i")
    index = _INDEX_FORMS[form](i, c, d)
    loop = For(i, 0, n, Block((Store(B, (index,), A[i]),)))
    independent = iterations_independent(loop)
    if independent:
        values = [fold_int(simplify(substitute(index, {i: IntImm(k)}))) for k in range(n)]
        assert len(set(values)) == n, (str(index), values)
    if form in (0, 1) and c != 0:           # i * c + d, d - i * c: a step of c, shown
        assert independent, str(index)


def test_a_range_that_moves_with_another_loop_shows_nothing():
    # B[u + 4 w] with u in [-4 w, -4 w + 4): every w writes B[0..3]; the spans of u say
    # nothing where u's range moves with w
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (16,), "float32")
    w, u = Var("w"), Var("u")
    inner = For(u, w * -4, w * -4 + 4, Block((Store(B, (u + w * 4,), A[0]),)))
    outer = For(w, 0, 2, Block((inner,)))
    assert not same_value_of(outer, w) and not iterations_independent(outer)
    fixed = For(w, 0, 2, Block((For(u, 0, 4, Block((Store(B, (u + w * 4,), A[0]),))),)))
    assert same_value_of(fixed, w) and same_value_of(fixed, u)


@given(ci=st.integers(-5, 5), cj=st.integers(-5, 5), n=st.integers(1, 6), m=st.integers(1, 6),
       j0=st.integers(-2, 2))
@settings(max_examples=300, deadline=None)
def test_two_loops_share_an_index_only_where_it_is_a_mixed_radix_number(ci, cj, n, m, j0):
    # B[i * ci + j * cj], j in [j0, j0 + m): the claim for i must hold by enumeration, and it is
    # made where the steps nest (|ci| > |cj| * (m - 1); a term of step 0 shows nothing)
    A, B = Buffer("A", (64,), "float32"), Buffer("B", (64,), "float32")
    i, j = Var("i"), Var("j")
    index = i * ci + j * cj + 30
    loop = For(i, 0, n, Block((For(j, j0, j0 + m, Block((Store(B, (index,), A[0]),))),)))
    claim = same_value_of(loop, i)
    at = {}
    for a in range(n):
        for b in range(j0, j0 + m):
            at.setdefault(a * ci + b * cj, set()).add(a)
    if claim:
        assert all(len(values) == 1 for values in at.values()), (str(index), at)
    if ci != 0 and cj != 0 and abs(ci) > abs(cj) * (m - 1):
        assert claim, str(index)


@given(c=st.integers(-6, 6), a=st.integers(-3, 3), b=st.integers(-3, 3), n=st.integers(1, 5),
       m=st.integers(1, 5), d=st.integers(-3, 3))
@settings(max_examples=300, deadline=None)
def test_accesses_in_loops_of_their_own_share_a_window_only_where_it_is_narrower_than_the_step(c, a, b, n, m, d):
    # B[i * c + a * u] = 0 in one inner loop, B[i * c + b * w + d] read and written in another
    # (an init distributed beside its update): the claim for i must hold by enumeration, and it
    # is made where every u and w term lies in one window narrower than |c|
    A, B = Buffer("A", (64,), "float32"), Buffer("B", (64,), "float32")
    i, u, w = Var("i"), Var("u"), Var("w")
    init = For(u, 0, n, Block((Store(B, (i * c + u * a + 30,), A[0]),)))
    update = For(w, 0, m, Block((Store(B, (i * c + w * b + d + 30,), B[i * c + w * b + d + 30] + A[1]),)))
    loop = For(i, 0, 4, Block((init, update)))
    claim = same_value_of(loop, i)
    at = {}
    for x in range(4):
        for k in range(n):
            at.setdefault(x * c + k * a, set()).add(x)
        for k in range(m):
            at.setdefault(x * c + k * b + d, set()).add(x)
    if claim:
        assert all(len(values) == 1 for values in at.values()), at
    window = [k * a for k in range(n)] + [k * b + d for k in range(m)]
    if c != 0 and max(window) - min(window) < abs(c):
        assert claim


def test_a_distributed_init_shows_the_column_panels_independent():
    """The hand matmul's column panel loop: C's init sits in loops of its own beside the
    update, so no index is shared, but every access's column is ``j_outer * 64 + r`` with r in
    [0, 64): shown without the dependence analysis, and the analysis agrees."""
    from bench.kernels import make_matmul
    from loopnest.auto.templates import reorder_accumulation
    nest = LoopNest(make_matmul(128).outputs)
    i, j, k = nest.get_loops_for("C")
    io, ii, _ = nest.split_with_tail(i, 4)
    jo, ji, _ = nest.split_with_tail(j, 64)
    reorder_accumulation(nest, [io, ii, jo, ji, k], [jo, io, k, ii, ji], [k])     # as matmul_schedule does
    f = next(lp for lp in nest.loop_index().loops if lp.var.name == "j_outer")
    assert "i_inner_1" in str(nest)       # the init's own loops
    assert same_value_of(f, f.var)
    assert buffers_carried_by(way_to_loop(nest, f.var), f.var) == []


@pytest.mark.filterwarnings("ignore::RuntimeWarning")      # the random programs' reference values
@pytest.mark.parametrize("seed", range(4))
def test_privately_computed_means_privatizable_for_the_analysis(seed):
    """Where ``privately_computed`` says an intermediate is computed afresh in every iteration
    of a loop before it is read there, isl's value flow (``legality._privatizable``) agrees."""
    from loopnest.analysis.legality import _privatizable
    from te.recursion import run_deep
    rnd = random.Random(200 + seed)
    checked = 0
    for _ in range(60):
        for nest in _random_schedule(rnd, 4, constant_sizes=True):     # the nest its whole schedule leaves
            pass
        for b in list(nest.intermediates):          # and intermediates computed at loops that read them
            readers = [f for f in nest.loop_index().loops if stmt_reads(f.body, b) and not stmt_writes(f.body, b)]
            try:
                if readers:
                    nest.compute_at(b, nest.loop(readers[rnd.randrange(len(readers))].var))
            except ScheduleError:
                pass
        for f in _first_loops(nest.loop_index().loops):
            for b in nest.intermediates:
                if privately_computed(nest, b, f):
                    checked += 1
                    # on a deep thread, as the transforms run it: a long sum of unrolled terms
                    assert run_deep(_privatizable, (nest, b, nest.loop(f.var))), (b.name, f.var.name, str(nest))
    assert checked > 5, checked


def _computed_at():
    """``C[i] = B[2 i + 2] + B[2 i + 4]`` with ``B[j] = A[j] + 1`` computed at C's loop, and that loop."""
    A = Buffer("A", (16,), "float32")
    B = Compute("B", (16,), lambda j: A[j] + 1.0)
    nest = LoopNest([Compute("C", (6,), lambda i: B[i * 2 + 2] + B[i * 2 + 4])])
    nest.compute_at(nest.buffer("B"), nest.get_loops_for("C")[0])
    return nest, nest.loop_index().loops[0]


def _with_writer(nest, f, change):
    """``nest`` with the first statement of loop ``f``'s body (B's loop) changed by ``change``."""
    writer = f.body.stmts[0]
    new_f = f.replace(body=f.body.replace(stmts=(change(writer),) + f.body.stmts[1:]))
    nest.root = nest.root.replace(stmts=tuple(new_f if x is f else x for x in nest.root.stmts))
    return nest, new_f


def test_a_buffer_read_beyond_what_the_iteration_wrote_is_not_private():
    nest, f = _computed_at()
    B = nest.buffer("B")
    assert privately_computed(nest, B, f), str(nest)
    short = _with_writer(*_computed_at(), lambda w: w.replace(stop=w.stop - 1))
    assert not privately_computed(short[0], short[0].buffer("B"), short[1])    # one element short
    strided = _with_writer(*_computed_at(),
                           lambda w: w.replace(body=w.body.replace(stmts=(
                               w.body.stmts[0].replace(indices=(w.var * 2 - w.start - 1,)),))))
    assert "B[j_1 * 2 - (i * 2 + 2) - 1] =" in str(strided[0])
    assert not privately_computed(strided[0], strided[0].buffer("B"), strided[1])  # odd written, even read
    update = _with_writer(*_computed_at(),
                          lambda w: w.replace(body=w.body.replace(stmts=(
                              w.body.stmts[0].replace(value=w.body.stmts[0].buffer[w.var] + 1.0),))))
    assert not privately_computed(update[0], update[0].buffer("B"), update[1])   # reads what it writes
    outside = LoopNest([Compute("C", (7,), lambda i: nest.buffer("B")[i])])
    assert not privately_computed(outside, outside.buffer("B"), outside.loop_index().loops[-1])   # B before it
