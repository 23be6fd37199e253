"""What the compile-time work keeps or skips gives the answers computed from scratch:
the simplifier's fixed points, the per-statement free variables, the one-walk search for the
loop around every access of a buffer (``shrink_storage``), the dependences of chosen pairs
(``distribute``'s legality) and the kinds of the loops a reorder moves."""
import pytest

from bench.kernels import WORKLOADS
from codegen import build
from loopnest import LoopNest, ScheduleError
from loopnest.analysis.dependences import dependences_in
from loopnest.analysis.domains import analyze
from loopnest.queries import stmt_free_vars
from loopnest.stmt import Block, For, Let, Store, iter_stmts
from loopnest.transforms.store_at import _accesses_outside, _around_every_access
from te import Buffer, Compute, Var, floordiv, floormod
from te import expr as E
from te.queries import free_vars
from te.simplify import _FIXED, clear_fixed_points, simplify


def _exprs():
    i, j, n = Var("i"), Var("j"), Var("n")
    A = Buffer("A", (64,), "float32")
    return [(i * 8 + j) * 64 + 3 - j * 64, floordiv(i * 8 + 4, 8) + floormod(i * 8 + 4, 8),
            E.Min(i + 1, i + 2) * n, A[i * 2 + 1] * 2.0 + A[i * 2 + 1] * 0.0, E.Select(i < i + 1, j, n)]


def test_simplify_gives_the_same_with_and_without_known_fixed_points():
    for e in _exprs():
        clear_fixed_points()
        fresh = simplify(e)
        assert _FIXED.get(id(fresh)) is fresh          # the result is known to simplify to itself
        assert simplify(fresh) is fresh
        again = simplify(e)
        assert str(again) == str(fresh)
        # a new expression around the simplified one: the same as from scratch
        outer = fresh + 0 if fresh.dtype.is_integer else fresh * 1.0
        kept = simplify(outer)
        clear_fixed_points()
        assert str(simplify(outer)) == str(kept)


def test_simplify_with_ranges_does_not_use_the_fixed_points():
    i = Var("i")
    e = E.Min(i, 16)
    clear_fixed_points()
    assert simplify(e) is not None and str(simplify(e)) == "min(i, 16)"
    assert str(simplify(e, {i: (0, 8)})) == "i"     # known as a fixed point without ranges only


def _old_stmt_free_vars(root, extra=(), exclude=(), allocations=True):
    from loopnest.stmt import Allocate, ExternCall, stmt_exprs
    exprs, bound = [], set(exclude)
    for s in iter_stmts(root):
        t = type(s)
        if t is For or t is Let:
            bound.add(s.var)
        elif t is Allocate:
            if allocations:
                exprs.extend(s.buffer.dims)
            continue
        elif t is ExternCall:
            for b in s.buffers:
                exprs.extend(b.dims)
        exprs.extend(stmt_exprs(s))
    exprs.extend(extra)
    return free_vars(exprs, bound)


def test_stmt_free_vars_of_shared_statements_and_lets():
    i, n, m, t, k = Var("i"), Var("n"), Var("m"), Var("t"), Var("k")
    A = Buffer("A", (n,), "int32")
    shared = Store(A, (i,), E.Let(t, i * m, t + k))
    uses_t = Store(A, (0,), t + n)           # t is bound by a Let expression elsewhere in the tree
    for root in (Block([For(i, 0, n, Block([shared]))]),
                 Block([For(i, 0, m, Block([shared, uses_t]))]),
                 Block([For(i, 0, n, Block([uses_t]))])):
        for extra in ((), (E.Let(k, n, k + i),)):
            got = stmt_free_vars(root, extra)
            assert got == _old_stmt_free_vars(root, extra), [v.name for v in got]


@pytest.mark.parametrize("name,size", [("stencil", (16, 40)), ("pyramid", (32, 64)), ("conv2d", (1, 8, 12, 12, 8))])
def test_stmt_free_vars_on_scheduled_benchmarks(name, size):
    w = WORKLOADS[name]
    spec = w.make(size)
    nest = LoopNest(spec.outputs)
    w.hand_schedule(nest, spec)
    for s in iter_stmts(nest.root):
        assert stmt_free_vars(s, allocations=False) == _old_stmt_free_vars(s, allocations=False)


@pytest.mark.parametrize("name,size", [("stencil", (16, 40)), ("pyramid", (32, 64))])
def test_loops_around_every_access_match_the_walk_per_loop(name, size):
    w = WORKLOADS[name]
    spec = w.make(size)
    nest = LoopNest(spec.outputs)
    w.hand_schedule(nest, spec)
    root = nest.root
    loops = [s for s in iter_stmts(root) if isinstance(s, For)]
    for buf in list(nest.intermediates) + list(spec.outputs):
        around = _around_every_access(root, buf)
        for f in loops:
            assert (around is None or id(f) in around) == (_accesses_outside(root, f, buf) is None)


def _backward_nest():
    S, T = Buffer("S", (8,), "float32"), Buffer("T", (8,), "float32")
    P = Compute("P", (8,), lambda i: S[i])
    nest = LoopNest([P])
    p = nest.get_loops_for(P)[0]
    W = Buffer("W", (8,), "float32")
    nest.root = Block([For(p.var, 1, 8, Block([Store(P, (p.var,), T[p.var - 1] + W[p.var]),
                                                Store(W, (p.var,), S[p.var]), Store(T, (p.var,), S[p.var])]))])
    return nest, p


def test_dependences_of_chosen_pairs_are_those_of_all_pairs_filtered():
    nest, loop = _backward_nest()
    every = dependences_in(nest, loop)
    info = analyze(nest).loop_info(loop)
    later = lambda x, y: info.child_of(x.instance) > info.child_of(y.instance)  # noqa: E731
    chosen = dependences_in(nest, loop, pairs=later)
    assert chosen and len(chosen) < len(every)
    assert [str(d) for d in chosen] == [str(d) for d in every if later(d.src, d.dst)]


def test_distribute_refusal_is_unchanged():
    nest, loop = _backward_nest()
    before = str(nest)
    with pytest.raises(ScheduleError, match=r"cannot distribute loop i: `P\[i\] = T\[i - 1\] \+ W\[i\]` reads "
                                            r"T\[i - 1\], written by `T\[i\] = S\[i\]` in the previous iteration"):
        nest.distribute(loop)
    assert str(nest) == before


def test_reorder_still_checks_a_moved_parallel_loop():
    A = Buffer("A", (8, 8), "float32")
    B = Compute("B", (8, 8), lambda i, j: A[i, j] + 1.0)
    C = Compute("C", (8, 8), lambda i, j: B[i, j] + B[(i + 1) % 8, j])
    nest = LoopNest([B, C])
    i, j = nest.get_loops_for(C)
    nest.parallelize(i)
    nest.reorder([i, j], [1, 0])             # no dependence inside C's nest: legal either way
    assert [lp.kind for lp in nest.get_loops_for(C)] == ["serial", "parallel"]


def test_benchmarks_build_the_same_ir_twice():
    # the tables kept between builds (fixed points, free variables, isl objects) change nothing
    for name, size in [("matmul", 64), ("stencil", (16, 40))]:
        w = WORKLOADS[name]
        spec = w.make(size)
        texts = []
        for _ in range(2):
            nest = LoopNest(spec.outputs)
            w.hand_schedule(nest, spec)
            texts.append(build(nest, spec.args, target="llvm", cache=False).source)
        clear_fixed_points()
        nest = LoopNest(spec.outputs)
        w.hand_schedule(nest, spec)
        texts.append(build(nest, spec.args, target="llvm", cache=False).source)
        assert texts[0] == texts[1] == texts[2]
