"""Dependence analysis (loopnest.analysis): domains, dependences, legality checks.

The analysis is checked against brute force: for random small affine programs the
dependences carried by each loop must be exactly those found by running the program's
accesses in order.
"""
from __future__ import annotations

import itertools

import islpy as isl
import pytest
from hypothesis import example, given, settings, strategies as st

from te import Buffer, Compute, IntImm, Reduce, Sum, Var, float32, floordiv, floormod, int32, select
from loopnest import LoopNest, ScheduleError
from loopnest.analysis.dependences import (buffers_carried_by, carried_by, compute_dependences,
                                           dependences_in, lex_negative_after, reorder_violations,
                                           value_flow)
from loopnest.analysis.domains import analyze, const_int, provably_equal
from loopnest.analysis.legality import (check_distribute, check_fuse, check_parallelize,
                                        check_reorder, check_vectorize, legal_parallel_loops, way_to_loop,
                                        accesses_only)
from loopnest.stmt import Block, Cond, For, Let, Store
from nests import stencil_nest


def _reduction():
    A = Buffer("A", (4, 8), float32)
    C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (8,))
    nest = LoopNest([C])
    return nest, C


def _prefix_sum(n=None):
    """B[i] = B[i - 1] + A[i] for i in [1, N): not expressible as a Compute, built by hand."""
    N = Var("N") if n is None else n
    A = Buffer("A", (N,), float32)
    B = Compute("B", (N,), lambda i: A[i])
    nest = LoopNest([B])
    i = nest.get_loops_for(B)[0].var
    nest.root = Block([For(i, IntImm(1), N if isinstance(N, Var) else IntImm(N),
                           Block([Store(B, (i,), B[i - 1] + A[i])]))])
    return nest, A, B


# ------------------------------------------------------------------------------------
# domains and accesses
# ------------------------------------------------------------------------------------
def test_domains_and_access_relations():
    N = Var("N")
    A = Buffer("A", (N, 64), float32)
    B = Compute("B", (N, 63), lambda i, j: A[i, j + 1] * 2.0)
    an = analyze(LoopNest([B]).root)
    assert [str(a) for a in an.accesses] == ["B[i, j] (write)", "A[i, j + 1] (read)"]
    inst = an.instances[0]
    assert [f.var.name for f in inst.loops] == ["i", "j"]
    assert str(inst.domain) == "[p0] -> { S0[i0, i1] : 0 <= i0 < p0 and 0 <= i1 <= 62 }"
    assert str(an.accesses[1].relation) == "[p0] -> { S0[i0, i1] -> M1[i0, 1 + i1] : 0 <= i0 < p0 and 0 <= i1 <= 62 }"
    assert an.params == {"p0": N}
    assert all(a.exact for a in an.accesses) and inst.domain_exact


def test_quasi_affine_and_non_affine_accesses():
    A = Buffer("A", (40,), float32)
    idx = Buffer("idx", (8,), int32)
    B = Compute("B", (8,), lambda i: A[floordiv(i, 2) + floormod(i, 3)] + A[i / 2] + A[idx[i]])
    an = analyze(LoopNest([B]).root)
    reads = {a.text(): a for a in an.accesses if not a.is_write}
    assert reads["A[floordiv(i, 2) + floormod(i, 3)]"].exact
    assert reads["A[i / 2]"].exact                       # C division is quasi-affine too
    assert not reads["A[idx[i]]"].exact                  # data dependent: any element
    assert str(reads["A[idx[i]]"].relation) == "{ S0[i0] -> M1[o0] : 0 <= i0 <= 7 }"
    assert reads["idx[i]"].exact


def test_condition_restricts_the_domain_and_nonaffine_conditions_are_dropped():
    A = Buffer("A", (8,), float32)
    B = Compute("B", (8,), lambda i: A[i])
    nest = LoopNest([B])
    i = nest.get_loops_for(B)[0].var
    nest.root = Block([For(i, 0, 8, Block([
        Cond(i < 3, Block([Store(B, (i,), A[i])]), Block([Store(B, (i,), A[i] * 2.0)])),
        Cond(A[i] > 0.0, Block([Store(B, (i,), 1.0)])),
    ]))])
    an = analyze(nest)
    doms = [str(s.domain) for s in an.instances if isinstance(s.stmt, Store)]
    assert doms == ["{ S0[i0] : 0 <= i0 <= 2 }", "{ S1[i0] : 3 <= i0 <= 7 }", "{ S3[i0] : 0 <= i0 <= 7 }"]
    exact = [s.domain_exact for s in an.instances if isinstance(s.stmt, Store)]
    assert exact == [True, True, False]


def test_a_load_under_if_then_else_is_read_only_where_its_side_is_taken():
    """``if_then_else`` evaluates only the side taken: its loads are read only there (an
    affine condition restricts their relation; one that is not affine leaves it whole);
    ``select`` evaluates both sides."""
    from te import if_then_else
    A = Buffer("A", (8,), float32)
    I = Buffer("I", (8,), int32)
    B = Compute("B", (8,), lambda i: A[i])
    nest = LoopNest([B])
    i = nest.get_loops_for(B)[0].var
    nest.root = Block([For(i, 0, 8, Block([
        Store(B, (i,), if_then_else(i >= 2, A[i - 2], A[i + 5] + if_then_else(I[i] > 0, A[0], 1.0))),
        Store(B, (i,), select(i >= 2, A[i - 1], 0.0)),
    ]))])
    rels = [str(a.relation) for a in analyze(nest).accesses if a.buffer is A]
    assert rels == ["{ S0[i0] -> M1[-2 + i0] : 2 <= i0 <= 7 }", "{ S0[i0] -> M1[5 + i0] : 0 <= i0 <= 1 }",
                    "{ S0[i0] -> M1[0] : 0 <= i0 <= 1 }", "{ S1[i0] -> M1[-1 + i0] : 0 <= i0 <= 7 }"]


def test_let_bound_indices_are_substituted():
    A = Buffer("A", (16,), float32)
    B = Compute("B", (8,), lambda i: A[i])
    nest = LoopNest([B])
    i = nest.get_loops_for(B)[0].var
    t = Var("t")
    nest.root = Block([For(i, 0, 8, Block([Let(t, i * 2 + 1, Block([Store(B, (i,), A[t])]))]))])
    an = analyze(nest)
    rel = [a for a in an.accesses if a.buffer is A][0].relation
    assert str(rel) == "{ S0[i0] -> M1[1 + 2i0] : 0 <= i0 <= 7 }"


def test_analysis_is_cached_per_root():
    nest, _ = _reduction()
    assert analyze(nest) is analyze(nest.root)
    assert compute_dependences(nest) is compute_dependences(nest.root)
    before = analyze(nest)
    nest.parallelize(nest.get_loops_for(nest.outputs[0])[0])
    assert analyze(nest) is not before and analyze(nest).root is nest.root


def test_helpers():
    n = Var("n")
    assert const_int(IntImm(8) - IntImm(3) * 2) == 2
    assert const_int(n + 1) is None
    assert provably_equal(n + n, n * 2)
    assert provably_equal(floordiv(n, 4) * 4 + floormod(n, 4), n)
    assert not provably_equal(n / 4 * 4, n)


# ------------------------------------------------------------------------------------
# dependences
# ------------------------------------------------------------------------------------
def test_reduction_dependences():
    nest, C = _reduction()
    i, k = nest.get_loops_for(C)
    assert carried_by(nest, i) == []
    deps = carried_by(nest, k)
    assert [d.kind for d in deps] == ["flow", "anti", "output"]
    assert all(d.buffer is C for d in deps)
    flow = deps[0]
    assert flow.min_distance(k) == 1 and flow.distance(k) is None   # memory based: 1..7
    assert flow.directions() == ("=", "<")
    assert flow.describe() == ("`C[i] = C[i] + A[i, k]` reads C[i], written by the same statement "
                               "in the previous iteration of loop k")
    init = [d for d in compute_dependences(nest) if d.src.instance.stmt is not d.dst.instance.stmt]
    assert {d.kind for d in init} == {"flow", "output"}
    assert all(d.carried_level() is None for d in init)   # init then update, same iteration of i
    assert init[0].describe().endswith("written by `C[i] = 0.0f` earlier in the same iteration")


def test_prefix_sum_dependence():
    nest, A, B = _prefix_sum()
    i = nest.get_all_loops()[0]
    (d,) = compute_dependences(nest)
    assert d.kind == "flow" and d.buffer is B
    assert d.distance(i) == 1 and d.is_carried_by(i)
    assert d.describe() == ("`B[i] = B[i - 1] + A[i]` reads B[i - 1], written by the same statement "
                            "(as B[i]) in the previous iteration of loop i")


def test_stencil_distances():
    nest, C = stencil_nest()
    i, j = nest.get_all_loops()
    deps = compute_dependences(nest)
    assert sorted(d.directions() for d in deps) == [("<", ">"), ("=", "<")]
    by_dir = {d.directions(): d for d in deps}
    assert by_dir[("<", ">")].distance(i) == 1
    assert by_dir[("=", "<")].distance(j) == 1
    assert [d.directions() for d in carried_by(nest, j)] == [("=", "<")]
    assert len(carried_by(nest, i)) == 1


def test_exact_quasi_affine_dependences():
    """C[i / 2, min(j, 3)] = C[i, j] + 1: the analysis sees there is no flow dependence."""
    M = Buffer("M", (16, 16), float32)
    C = Compute("C", (16, 16), lambda i, j: M[i, j])
    nest = LoopNest([C])
    a, b = (l.var for l in nest.get_loops_for(C))
    nest.root = Block([For(a, 0, 16, Block([For(b, 0, 16, Block([Cond(a / 2 < 5, Block([
        Store(C, (a / 2, select(b < 3, b, 3)), C[a, b] + 1.0)]))]))]))])
    kinds = sorted(d.kind for d in compute_dependences(nest))
    assert kinds == ["anti", "output"]


def test_non_affine_index_is_conservative():
    A = Buffer("A", (8,), float32)
    idx = Buffer("idx", (8,), int32)
    B = Compute("B", (8,), lambda i: A[i])
    nest = LoopNest([B])
    i = nest.get_loops_for(B)[0]
    nest.root = Block([For(i.var, 0, 8, Block([Store(B, (idx[i.var],), A[i.var])]))])
    deps = carried_by(nest, i)
    assert [d.kind for d in deps] == ["output"]
    with pytest.raises(ScheduleError, match="may write B\\[idx\\[i\\]\\], also written by the same statement in an earlier iteration"):
        check_parallelize(nest, i)


def _brute_carried(extents, stmts):
    """{(kind, src stmt, dst stmt, carrying depth or None)} by running the accesses in order.

    ``stmts``: list of (write (buf, coeffs), [reads]) with coeffs (a_i, a_j, c) of a 1-D index.
    """
    trace = []  # (iteration, stmt index, is_write, buf, element)
    for it in itertools.product(*(range(e) for e in extents)):
        for s, (w, reads) in enumerate(stmts):
            for buf, (ci, cj, c) in reads:
                trace.append((it, s, False, buf, ci * it[0] + cj * it[1] + c))
            buf, (ci, cj, c) = w
            trace.append((it, s, True, buf, ci * it[0] + cj * it[1] + c))
    out = set()
    kinds = {(True, False): "flow", (False, True): "anti", (True, True): "output"}
    for x in range(len(trace)):
        for y in range(x + 1, len(trace)):
            a, b = trace[x], trace[y]
            if a[3] != b[3] or a[4] != b[4] or not (a[2] or b[2]):
                continue
            level = next((d for d in range(2) if a[0][d] != b[0][d]), None)
            out.add((kinds[(a[2], b[2])], a[1], b[1], level))
    return out


_coef = st.tuples(st.integers(-2, 2), st.integers(-2, 2), st.integers(-3, 3))


@settings(max_examples=25)
@given(ei=st.integers(1, 4), ej=st.integers(1, 4),
       stmts=st.lists(st.tuples(st.tuples(st.sampled_from("XY"), _coef),
                                st.lists(st.tuples(st.sampled_from("XY"), _coef), max_size=2)),
                      min_size=1, max_size=2))
def test_dependences_match_brute_force(ei, ej, stmts):
    bufs = {n: Buffer(n, (64,), float32) for n in "XY"}
    Z = Compute("Z", (ei, ej), lambda i, j: i + j)
    nest = LoopNest([Z])
    vi, vj = (l.var for l in nest.get_loops_for(Z))
    body = []
    for (wb, (ci, cj, c)), reads in stmts:
        val = 1.0
        for rb, (ri, rj, rc) in reads:
            val = val + bufs[rb][vi * ri + vj * rj + rc + 16]
        body.append(Store(bufs[wb], (vi * ci + vj * cj + c + 16,), val))
    nest.root = Block([For(vi, 0, ei, Block([For(vj, 0, ej, Block(body))]))])
    want = _brute_carried((ei, ej), [((wb, (ci, cj, c)), reads) for (wb, (ci, cj, c)), reads in stmts])
    an = analyze(nest)
    got = set()
    for d in compute_dependences(nest):
        s = an.instances.index(d.src.instance)
        t = an.instances.index(d.dst.instance)
        for lv in range(2):
            if d.carried_at(lv):
                got.add((d.kind, s, t, lv))
        ds = d.distance_set(2)
        zero = isl.Val.zero(ds.get_ctx())
        if not ds.fix_val(isl.dim_type.set, 0, zero).fix_val(isl.dim_type.set, 1, zero).is_empty():
            got.add((d.kind, s, t, None))   # loop independent: same iteration, textual order
    # the fast per-buffer queries agree with the pairwise dependences
    li, lj = nest.get_all_loops()
    for loop in (li, lj):
        assert {b.name for b in buffers_carried_by(nest, loop)} == {d.buffer.name for d in carried_by(nest, loop)}
    slow = any(not lex_negative_after(d, 0, [0, 1], [1, 0]).is_empty() for d in compute_dependences(nest))
    assert bool(reorder_violations(nest, li, [0, 1], [1, 0])) == slow
    assert got == want


def _siblings_branch_and_let(ei, ej, cut, stmts):
    """A nest of random affine stores to X and Y: a loop k, then a loop i holding some of
    them and, under a branch and a let, a loop j holding the others."""
    bufs = {n: Buffer(n, (64,), float32) for n in "XY"}
    Z = Compute("Z", (ei, ej), lambda i, j: i + j)
    nest = LoopNest([Z])
    vi, vj = (l.var for l in nest.get_loops_for(Z))
    vk, off = Var("k"), Var("off")

    def store(spec, i, j):
        (wb, (ci, cj, c)), reads = spec
        val = 1.0
        for rb, (ri, rj, rc) in reads:
            val = val + bufs[rb][i * ri + j * rj + rc + 16]
        return Store(bufs[wb], (i * ci + j * cj + c + 16,), val)
    half = len(stmts) // 2
    inner = For(vj, 0, ej, Block([store(x, vi, vj + off) for x in stmts[half:]]))
    outer = For(vi, 0, ei, Block([store(x, vi, 0) for x in stmts[:half]]
                                 + [Cond(vi < cut, Block([Let(off, vi % 2, Block([inner]))]))]))
    before = For(vk, 0, 3, Block([store(x, vk, 1) for x in stmts]))
    nest.root = Block([before, outer])
    return nest, bufs, (vk, vi, vj), outer


_random_stores = dict(ei=st.integers(1, 4), ej=st.integers(1, 4), cut=st.integers(-1, 4),
                      stmts=st.lists(st.tuples(st.tuples(st.sampled_from("XY"), _coef),
                                               st.lists(st.tuples(st.sampled_from("XY"), _coef), max_size=2)),
                                     min_size=2, max_size=4))


@settings(max_examples=25)
@given(**_random_stores)
def test_a_loop_carries_the_same_dependences_with_only_the_way_to_it_kept(ei, ej, cut, stmts):
    """``way_to_loop`` drops the statements beside the path to a loop: the buffers that loop
    carries are those the whole nest gives, for loops after siblings, under a branch, inside
    a let."""
    nest, _, (vk, vi, vj), outer = _siblings_branch_and_let(ei, ej, cut, stmts)
    for loop in (vk, vi, vj):
        kept = way_to_loop(nest, loop)
        assert {b.name for b in buffers_carried_by(kept, loop)} == {b.name for b in buffers_carried_by(nest, loop)}
        assert {b.name for b in buffers_carried_by(kept, loop)} == {d.buffer.name for d in carried_by(nest, loop)}
    kept = way_to_loop(nest, vj)
    assert way_to_loop(nest, vi).stmts == (outer,) and way_to_loop(kept, vj) is kept   # pruned already: as is


@settings(max_examples=25)
@given(**_random_stores)
@example(ei=4, ej=2, cut=2, stmts=[(("X", (0, 0, 0)), [("X", (-1, 0, 0))]), (("X", (-1, -2, 0)), [])])  # isl gives up
def test_a_buffer_s_values_flow_as_in_the_whole_nest_with_only_its_accesses_kept(ei, ej, cut, stmts):
    """``accesses_only`` drops every statement that does not touch a buffer (``privatizable``
    analyses that tree): the buffer's value flow, from which write each read takes its value,
    is that of the whole nest, statement for statement. Where isl gives up on the whole
    nest's flow within its budget (None: callers assume the worst), there is nothing to
    compare; where it decides the whole nest's, it decides the smaller tree's too."""
    nest, bufs, _, _ = _siblings_branch_and_let(ei, ej, cut, stmts)
    whole = analyze(nest)
    for buf in bufs.values():
        kept = accesses_only(nest, buf)
        if kept is None:
            assert not any(a.buffer is buf for a in whole.accesses)
            continue
        if value_flow(nest, buf) is None:
            continue
        assert value_flow(kept, buf) is not None
        same = {inst.name: next(w.name for w in whole.instances if w.stmt is inst.stmt)
                for inst in analyze(kept).instances}
        maps = []
        value_flow(kept, buf).foreach_map(maps.append)
        renamed = value_flow(nest, buf).subtract(value_flow(nest, buf))     # empty, in the same space
        for m in maps:
            m = m.set_tuple_name(isl.dim_type.in_, same[m.get_tuple_name(isl.dim_type.in_)])
            renamed = renamed.union(isl.UnionMap.from_map(m.set_tuple_name(
                isl.dim_type.out, same[m.get_tuple_name(isl.dim_type.out)])))
        assert renamed.is_equal(value_flow(nest, buf))


def test_dependences_in_loop_and_value_flow():
    A = Buffer("A", (8,), float32)
    T = Buffer("T", (1,), float32)
    B = Compute("B", (8,), lambda i: A[i])
    nest = LoopNest([B])
    i = nest.get_loops_for(B)[0]
    nest.root = Block([For(i.var, 0, 8, Block([Store(T, (0,), A[i.var] * 2.0), Store(B, (i.var,), T[0] + 1.0)]))])
    assert {d.kind for d in dependences_in(nest, i)} == {"flow", "anti", "output"}
    flow = value_flow(nest, T)
    assert str(flow) == "{ S0[i0] -> S1[i0' = i0] : 0 <= i0 <= 7 }"   # each read sees its own iteration's write


# ------------------------------------------------------------------------------------
# legality checks (the transforms' own tests cover applying them)
# ------------------------------------------------------------------------------------
def test_check_parallelize_and_where_it_is_legal():
    nest, C = _reduction()
    i, k = nest.get_loops_for(C)
    check_parallelize(nest, i)
    with pytest.raises(ScheduleError) as e:
        check_parallelize(nest, k)
    assert str(e.value) == ("cannot parallelize loop k: `C[i] = C[i] + A[i, k]` reads C[i], written by the "
                            "same statement in the previous iteration of loop k (flow dependence on C carried "
                            "by loop k); parallelize would be legal on loop i")
    assert [f.var.name for f in legal_parallel_loops(nest)] == ["i"]


def test_private_intermediate_does_not_block_parallelism():
    """T is rewritten and read within each iteration: private to it, so i may run in parallel,
    unless T is an output (visible after the loop) or a read sees another iteration's value."""
    A = Buffer("A", (8,), float32)
    T = Compute("T", (1,), lambda z: 0.0)
    B = Compute("B", (8,), lambda i: A[i] + T[0])
    nest = LoopNest([B])
    assert T in nest.intermediates
    i = nest.get_loops_for(B)[0]
    nest.root = Block([For(i.var, 0, 8, Block([Store(T, (0,), A[i.var] * 2.0), Store(B, (i.var,), T[0] + 1.0)]))])
    assert carried_by(nest, i)            # memory-based dependences on T exist
    check_parallelize(nest, i)            # ... but T is private to each iteration
    with pytest.raises(ScheduleError, match="cannot vectorize loop i: .* dependence on T"):
        check_vectorize(nest, i)          # vector lanes share T: refused
    # an output is visible after the loop: not private
    nest_out = LoopNest([B, T])
    nest_out.root = nest.root
    with pytest.raises(ScheduleError, match="dependence on T"):
        check_parallelize(nest_out, i)
    # reading the previous iteration's T: not privatizable
    nest.root = Block([For(i.var, 0, 8, Block([Store(B, (i.var,), T[0] + 1.0), Store(T, (0,), A[i.var] * 2.0)]))])
    with pytest.raises(ScheduleError, match="reads T\\[0\\], written by .* in the previous iteration of loop i"):
        check_parallelize(nest, i)


def test_check_reorder_and_legal_orders():
    nest, C = stencil_nest()
    i, j = nest.get_all_loops()
    with pytest.raises(ScheduleError) as e:
        check_reorder(nest, [i, j], [1, 0])
    assert "its distance (1, -1) over (i, j) would become (-1, 1) over (j, i)" in str(e.value)
    assert str(e.value).endswith("no other order of these loops is legal")
    check_reorder(nest, [i, j], [0, 1])


def test_check_fuse_and_distribute():
    A = Buffer("A", (9,), float32)
    B = Compute("B", (9,), lambda i: A[i] + 1.0)
    C = Compute("C", (8,), lambda i: B[i + 1] * 2.0)
    nest = LoopNest([B, C])
    (i,), (i1,) = nest.get_loops_for(B), nest.get_loops_for(C)
    with pytest.raises(ScheduleError, match="e.g. i_1 = 0 needs i = 1"):
        check_fuse(nest, [i, i1])
    D = Compute("D", (9,), lambda i: B[i] * 2.0)
    nest = LoopNest([B, D])
    check_fuse(nest, [nest.get_loops_for(B)[0], nest.get_loops_for(D)[0]])
    # distribute: a statement reading what a later statement wrote in an earlier iteration
    nest, A2, B2 = _prefix_sum(8)
    i = nest.get_all_loops()[0]
    T = Buffer("T", (8,), float32)
    nest.root = Block([For(i.var, 1, 8, Block([Store(B2, (i.var,), T[i.var - 1]), Store(T, (i.var,), A2[i.var])]))])
    with pytest.raises(ScheduleError, match="goes from statement 1 of the body back to statement 0"):
        check_distribute(nest, i)
    nest.root = Block([For(i.var, 1, 8, Block([Store(T, (i.var,), A2[i.var]), Store(B2, (i.var,), T[i.var - 1])]))])
    check_distribute(nest, i)
