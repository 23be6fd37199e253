"""Loop nests written by hand (issue 13, item 5): ``LoopNest(stmt, outputs=[...])``.

* Scans, in-place updates and histograms built from For / Store / Block / Cond / Let run on
  every CPU backend and agree with numpy.
* The legality analysis is the one of tensor nests: a scan refuses ``parallelize`` and
  ``vectorize`` (flow dependence carried by its loop); a histogram's scatter, whose index is
  data dependent, refuses both (a write with an unknown index may touch any element); the
  loops that carry nothing accept them; split / unroll / reorder work where legal.
* The statement is checked (``StatementError``), buffers get their roles (an output read on
  entry must be passed), the history replays on a nest built from the same statement.
"""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from codegen.kernel import BuildError, KernelArgumentError
from loopnest import LoopNest
from loopnest.analysis.dependences import carried_by, reads_initial_values
from loopnest.errors import StatementError
from loopnest.stmt import Allocate, Block, Cond, For, ForKind, Let, Store
from nests import unchanged
from te import Buffer, Compute, Var, cast, float32, int32
from te.expr import Load

N = 40
NB = 8


def scan_stmt(n=N):
    A, B = Buffer("A", (n,), float32), Buffer("B", (n,), float32)
    i = Var("i")
    return A, B, i, Block([Store(B, (0,), A[0]), For(i, 0, n - 1, Store(B, (i + 1,), B[i] + A[i + 1]))])


def hist_stmt(n=N, nb=NB):
    """H[b] = 0 for every bin, then H[A[i]] += 1: the scatter's index is data dependent."""
    A, H = Buffer("A", (n,), int32), Buffer("H", (nb,), int32)
    i, b = Var("i"), Var("b")
    return A, H, i, b, Block([For(b, 0, nb, Store(H, (b,), 0)), For(i, 0, n, Store(H, (A[i],), H[A[i]] + 1))])


def update_stmt(n=N):
    """A[i] = 2 A[i], minus 10 where that exceeds 10: Let and Cond, in place."""
    A = Buffer("A", (n,), float32)
    i, t = Var("i"), Var("t", float32)
    return A, i, For(i, 0, n, Let(t, A[i] * 2.0, Cond(t > 10.0, Store(A, (i,), t - 10.0), Store(A, (i,), t))))


def fresh(stmt, outputs, history):
    """A nest built from ``stmt`` again, with ``history`` replayed on it."""
    return LoopNest(stmt, outputs=outputs).replay(history)


# ------------------------------------------------------------------------------------
# scan
# ------------------------------------------------------------------------------------
def test_scan_runs_and_refuses_parallel_loops(backend):
    A, B, i, stmt = scan_stmt()
    nest = LoopNest.from_stmt(stmt, outputs=[B])
    assert [b.name for b in nest.inputs] == ["A"] and [b.name for b in nest.outputs] == ["B"]
    msg = unchanged(nest, lambda: nest.parallelize(i))
    assert "flow dependence on B carried by loop i" in msg
    assert "flow dependence on B" in unchanged(nest, lambda: nest.vectorize(i))
    a = np.random.default_rng(0).uniform(-1, 1, N).astype(np.float32)
    b = build(nest, [A, B], target=backend)(a)          # B is written before it is read: may be left out
    np.testing.assert_allclose(b, np.cumsum(a, dtype=np.float64), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("how", ["tail", "mask"])
def test_scan_split_and_unroll_are_legal(backend, how):
    A, B, i, stmt = scan_stmt()
    nest = LoopNest(stmt, outputs=[B])
    if how == "tail":
        outer, inner, tail = nest.split_with_tail(i, 8)
        assert tail is not None
    else:
        outer, inner = nest.split_with_mask(i, 8)
    nest.unroll(inner)
    assert "flow dependence on B" in unchanged(nest, lambda: nest.parallelize(outer))
    again = fresh(stmt, [B], nest.history_json())
    assert str(again) == str(nest)
    a = np.random.default_rng(1).uniform(-1, 1, N).astype(np.float32)
    b = np.full(N, np.nan, np.float32)
    build(again, [A, B], target=backend)(a, b)
    np.testing.assert_allclose(b, np.cumsum(a, dtype=np.float64), rtol=1e-5, atol=1e-5)


def test_column_scan_parallel_across_columns_not_down_them(backend):
    """C[i, j] += C[i - 1, j]: loop i carries the dependence, loop j does not; reorder is legal."""
    C = Buffer("C", (6, 16), float32)
    i, j = Var("i"), Var("j")
    stmt = For(i, 1, 6, For(j, 0, 16, Store(C, (i, j), C[i, j] + C[i - 1, j])))
    nest = LoopNest(stmt, outputs=[C])
    assert [b.name for b in nest.inputs] == ["C"]      # read on entry: in place
    assert "flow dependence on C carried by loop i" in unchanged(nest, lambda: nest.parallelize(i))
    nest.reorder([i, j], [1, 0])
    nest.parallelize(j)
    assert "flow dependence on C" in unchanged(nest, lambda: nest.vectorize(i))
    c = np.random.default_rng(2).uniform(-1, 1, (6, 16)).astype(np.float32)
    want = np.cumsum(c.astype(np.float64), axis=0)
    build(fresh(stmt, [C], nest.history_json()), [C], target=backend)(c)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------
# in-place update
# ------------------------------------------------------------------------------------
def test_in_place_update_with_let_and_cond(backend):
    A, i, stmt = update_stmt()
    nest = LoopNest(stmt, outputs=[A])
    assert [b.name for b in nest.inputs] == ["A"]
    outer, inner, _ = nest.split_with_tail(i, 8)
    nest.parallelize(outer)
    nest.vectorize(inner)
    a = np.arange(N, dtype=np.float32) - 5
    want = np.where(a * 2 > 10, a * 2 - 10, a * 2)
    k = build(fresh(stmt, [A], nest.history_json()), [A], target=backend)
    k(a)
    np.testing.assert_array_equal(a, want)
    with pytest.raises(KernelArgumentError, match="missing argument A"):
        k()                                    # read on entry: it cannot be left out and allocated


# ------------------------------------------------------------------------------------
# histogram: a scatter with data-dependent (colliding) indices
# ------------------------------------------------------------------------------------
def test_histogram_refuses_parallel_scatter_but_not_the_init(backend):
    A, H, i, b, stmt = hist_stmt()
    nest = LoopNest(stmt, outputs=[H])
    assert sorted(x.name for x in nest.inputs) == ["A", "H"]     # H[A[i]] reads bins on entry
    for op in (nest.parallelize, nest.vectorize):
        msg = unchanged(nest, lambda: op(i))
        assert "dependence on H carried by loop i" in msg
    bo, bi, _ = nest.split_with_tail(b, 4)
    nest.parallelize(bo)
    nest.vectorize(bi)
    io, ii, _ = nest.split_with_tail(i, 8)
    nest.unroll(ii)
    assert "dependence on H" in unchanged(nest, lambda: nest.parallelize(io))
    a = np.random.default_rng(3).integers(0, NB, N).astype(np.int32)
    h = np.full(NB, -7, np.int32)
    build(fresh(stmt, [H], nest.history_json()), [A, H], target=backend)(a, h)
    np.testing.assert_array_equal(h, np.bincount(a, minlength=NB))


def test_histogram_of_computed_bins(backend):
    """The bin is an expression of a float input: H[int(A[i] * NB)] += 1, with a Let."""
    A, H = Buffer("A", (N,), float32), Buffer("H", (NB,), int32)
    i, k = Var("i"), Var("k", int32)
    b = Var("b")
    stmt = Block([For(b, 0, NB, Store(H, (b,), 0)),
                  For(i, 0, N, Let(k, cast(A[i] * float(NB), int32), Store(H, (k,), H[k] + 1)))])
    nest = LoopNest(stmt, outputs=[H])
    assert "dependence on H" in unchanged(nest, lambda: nest.parallelize(i))
    a = np.random.default_rng(4).uniform(0, 0.999, N).astype(np.float32)
    h = np.zeros(NB, np.int32)
    build(nest, [A, H], target=backend)(a, h)
    np.testing.assert_array_equal(h, np.bincount((a * NB).astype(np.int32), minlength=NB))


def test_data_dependent_writes_are_conservative_reads_are_not():
    """A scatter B[P[i]] = A[i] may collide (P is not known to be a permutation): refused.
    A gather B[i] = A[P[i]] writes each element once: parallel."""
    A, B, P = Buffer("A", (N,), float32), Buffer("B", (N,), float32), Buffer("P", (N,), int32)
    i = Var("i")
    scatter = LoopNest(For(i, 0, N, Store(B, (P[i],), A[i])), outputs=[B])
    assert "output dependence on B" in unchanged(scatter, lambda: scatter.parallelize(i))
    deps = carried_by(scatter, i)
    assert deps and not deps[0].src.exact
    gather = LoopNest(For(i, 0, N, Store(B, (i,), A[P[i]])), outputs=[B])
    gather.parallelize(i)
    assert gather.loop(i).stmt.kind == ForKind.PARALLEL


def test_out_of_range_bin_raises_on_ireval():
    A, H, i, b, stmt = hist_stmt()
    a = np.zeros(N, np.int32)
    a[5] = NB + 3
    with pytest.raises(IndexError, match="H"):
        build(LoopNest(stmt, outputs=[H]), [A, H], target="ireval")(a, np.zeros(NB, np.int32))


def test_reads_initial_values_decides_the_inputs():
    A, B, i, scan = scan_stmt()
    assert not reads_initial_values(scan, B)
    A2, H, *_, hist = hist_stmt()
    assert reads_initial_values(hist, H)        # H[A[i]] may read a bin the init did not write


# ------------------------------------------------------------------------------------
# intermediates, other transforms, CUDA
# ------------------------------------------------------------------------------------
def test_a_written_buffer_that_is_not_an_output_is_an_intermediate(backend):
    A, B, T = (Buffer(x, (N,), float32) for x in "ABT")
    i, j = Var("i"), Var("j")
    stmt = Block([For(i, 0, N, Store(T, (i,), A[i] * 3.0)), For(j, 0, N, Store(B, (j,), T[j] + 1.0))])
    nest = LoopNest(stmt, outputs=[B])
    assert [b.name for b in nest.intermediates] == ["T"]
    nest.fuse([i, j])
    with pytest.raises(BuildError, match="intermediate"):
        build(nest, [A, T, B], target=backend)
    a = np.arange(N, dtype=np.float32)
    b = build(nest, [A, B], target=backend)(a)
    np.testing.assert_array_equal(b, a * 3 + 1)


def test_tensor_only_transforms_refuse_with_the_reason():
    A, B, i, stmt = scan_stmt()
    nest = LoopNest(stmt, outputs=[B])
    assert "written as statements" in unchanged(nest, lambda: nest.compute_inline(B))
    assert "not a reduction" in unchanged(nest, lambda: nest.rfactor(B, i))


def test_cuda_source_of_a_gpu_bound_update():
    A, i, stmt = update_stmt(64)
    nest = LoopNest(stmt, outputs=[A])
    outer, inner, _ = nest.split_with_tail(i, 16)
    nest.set_gpu_block_index(outer, 0)
    nest.set_gpu_thread_index(inner, 0)
    src = build(nest, [A], target="cuda").source
    assert "blockIdx.x" in src and "threadIdx.x" in src and "v_t" in src


def test_gpu_binding_of_a_scan_is_refused():
    A, B, i, stmt = scan_stmt()
    nest = LoopNest(stmt, outputs=[B])
    assert "flow dependence on B" in unchanged(nest, lambda: nest.set_gpu_thread_index(i, 0))


# ------------------------------------------------------------------------------------
# construction and checks
# ------------------------------------------------------------------------------------
def test_tensor_constructor_unchanged():
    A = Buffer("A", (8,), float32)
    B = Compute("B", (8,), lambda i: A[i] + 1.0)
    assert str(LoopNest([B])) == str(LoopNest(B)) == str(LoopNest(outputs=[B]))
    with pytest.raises(TypeError, match="outputs"):
        LoopNest(For(Var("i"), 0, 8, Store(A, (0,), 1.0)))
    with pytest.raises(TypeError, match="statements"):
        LoopNest([A])


def test_history_replays_on_the_same_statement():
    A, B, i, stmt = scan_stmt()
    nest = LoopNest(stmt, outputs=[B])
    outer, inner, _ = nest.split_with_tail(i, 4)
    nest.unroll(inner, 2)
    assert nest.history[0]["args"][0] == {"loop": "i"}
    assert str(fresh(stmt, [B], nest.history)) == str(nest)


def _raises(match, stmt, outputs):
    with pytest.raises(StatementError, match=match):
        LoopNest(stmt, outputs=outputs)


def test_statement_checks():
    A = Buffer("A", (4, 4), float32)
    B = Buffer("B", (4,), float32)
    i, j = Var("i"), Var("j")
    ok = For(i, 0, 4, Store(B, (i,), 1.0))
    _raises("bound by loop i and again by loop i", [ok, ok], [B])
    _raises("both use the name 'i'", [ok, For(Var("i"), 0, 4, Store(B, (0,), 2.0))], [B])
    _raises("store to A has 1 index", For(i, 0, 4, Store(A, (i,), 1.0)), [A])
    _raises("load of A has 1 index", For(i, 0, 4, Store(B, (i,), Load(A, (i,)))), [B])
    _raises("used in .* outside the loop", Block([ok, Store(B, (i,), 0.0)]), [B])
    _raises("output A is not written", ok, [A])
    _raises("needs the output buffers", ok, [])
    _raises("Allocate", Block([Allocate(A), ok]), [B])
    _raises("parallel", For(i, 0, 4, Store(B, (i,), 1.0), kind=ForKind.PARALLEL), [B])
    _raises("two different buffers are named 'B'", [ok, For(j, 0, 4, Store(Buffer("B", (4,)), (j,), 1.0))], [B])
    _raises("outputs must be Buffers", ok, ["B"])
    _raises("list a buffer twice", ok, [B, B])
    _raises("free variable i has the name of loop i", For(i, 0, 4, Store(B, (i,), cast(Var("i"), float32))), [B])
    _raises("statement", 42, [B])


# ------------------------------------------------------------------------------------
# data-dependent indices on LLVM: checked as the kernel runs
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [NB, NB + 100, -1])
def test_out_of_range_bin_raises_on_llvm(bad):
    """Bounds inference cannot bound H[A[i]]; the LLVM kernel checks the index as it runs
    instead of writing outside H."""
    A, H, i, b, stmt = hist_stmt()
    k = build(LoopNest(stmt, outputs=[H]), [A, H], target="llvm")
    a = np.zeros(N, np.int32)
    a[7] = bad
    guard = np.zeros(NB + 8, np.int32)
    h = guard[:NB]                  # the elements after H must not change
    with pytest.raises(IndexError, match="data-dependent index .* of H is outside the buffer"):
        k(a, h)
    assert (guard[NB:] == 0).all()


@pytest.mark.parametrize("runtime", ["pool", "threads", "serial"])
def test_out_of_range_index_in_a_parallel_loop_and_through_a_let(runtime):
    A, B, P = Buffer("A", (N,), float32), Buffer("B", (N,), float32), Buffer("P", (N,), int32)
    i, j = Var("i"), Var("j", int32)
    nest = LoopNest(For(i, 0, N, Let(j, P[i] * 2, Store(B, (i,), A[j]))), outputs=[B])
    outer, inner, _ = nest.split_with_tail(i, 8)
    nest.parallelize(outer)
    k = build(nest, [A, P, B], target="llvm", parallel_runtime=runtime)
    a = np.arange(N, dtype=np.float32)
    p = np.arange(N, dtype=np.int32) // 2
    b = np.zeros(N, np.float32)
    k(a, p, b)
    np.testing.assert_array_equal(b, a[p * 2])
    p[N - 3] = N
    with pytest.raises(IndexError, match="of A is outside"):
        k(a, p, b)


def test_vectorized_gather_is_checked_lane_by_lane():
    A, B, P = Buffer("A", (N,), float32), Buffer("B", (N,), float32), Buffer("P", (N,), int32)
    i = Var("i")
    nest = LoopNest(For(i, 0, N, Store(B, (i,), A[P[i]])), outputs=[B])
    outer, inner, _ = nest.split_with_tail(i, 8)
    nest.vectorize(inner)
    k = build(nest, [A, P, B], target="llvm")
    a = np.arange(N, dtype=np.float32)
    p = np.arange(N, dtype=np.int32)[::-1].copy()
    b = np.zeros(N, np.float32)
    k(a, p, b)
    np.testing.assert_array_equal(b, a[p])
    p[13] = -5
    with pytest.raises(IndexError, match="of A is outside"):
        k(a, p, b)


def test_bounds_check_false_leaves_the_index_checks_out():
    A, H, i, b, stmt = hist_stmt()
    checked = build(LoopNest(stmt, outputs=[H]), [A, H], target="llvm").source
    unchecked = build(LoopNest(stmt, outputs=[H]), [A, H], target="llvm", bounds_check=False).source
    assert "H_index_ok" in checked and "H_index_ok" not in unchecked
    X = Buffer("X", (8,), float32)
    C = Compute("C", (8,), lambda x: X[x] * 2.0)
    assert "_index_ok" not in build(LoopNest([C]), [X, C], target="llvm").source   # affine: no run-time check


def test_histogram_bins_cached_in_a_local_buffer(backend):
    """cache_accesses of H at the scatter loop: bounds inference cannot bound H[A[i]], so the
    cached region is all of H, which keeps the result."""
    A, H, i, b, stmt = hist_stmt()
    nest = LoopNest(stmt, outputs=[H])
    local = nest.cache_accesses(H, "Hl", i)
    assert local.shape == (NB,)
    a = np.random.default_rng(5).integers(0, NB, N).astype(np.int32)
    h = np.zeros(NB, np.int32)
    build(nest, [A, H], target=backend)(a, h)
    np.testing.assert_array_equal(h, np.bincount(a, minlength=NB))


def test_tile_of_a_2d_in_place_update(backend):
    C = Buffer("C", (8, 12), float32)
    x, y = Var("x"), Var("y")
    stmt = For(x, 0, 8, For(y, 0, 12, Store(C, (x, y), C[x, y] * 2.0 + 1.0)))
    nest = LoopNest(stmt, outputs=[C])
    xo, yo, xi, yi = nest.tile(x, y, 4, 4)
    nest.parallelize(xo)
    nest.vectorize(yi)
    c = np.random.default_rng(6).uniform(-1, 1, (8, 12)).astype(np.float32)
    want = c * 2 + 1
    build(fresh(stmt, [C], nest.history_json()), [C], target=backend)(c)
    np.testing.assert_allclose(c, want, rtol=1e-6)
