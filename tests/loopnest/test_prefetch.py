"""LoopNest.prefetch and the pass insert_prefetches: where the prefetches go, that values never
change on any backend, the refusals, and the LLVM instructions."""
import warnings

import numpy as np
import pytest

from codegen import build
from codegen.llvm.cache_key import stmt_key
from loopnest import LoopNest, ScheduleError
from loopnest.auto.templates import vectorize_split
from loopnest.stmt import Block, Prefetch, iter_stmts
from loopnest.verify import VerifyError, verify
from te import Buffer, Compute, Reduce, Sum, Var, rsqrt


def _layernorm(m, n):
    X = Buffer("X", (m, n), "float32")
    mean = Reduce("mean", (m,), Sum(), lambda i, k: X[i, k] * (1.0 / 64), (n,))
    var = Reduce("var", (m,), Sum(), lambda i, k: (X[i, k] - mean[i]) * (X[i, k] - mean[i]), (n,))
    Y = Compute("Y", (m, n), lambda i, j: (X[i, j] - mean[i]) * rsqrt(var[i] + 1.0))
    return X, Y


def _rows_scheduled(m=12, n=64, lanes=16):
    X, Y = _layernorm(m, n)
    nest = LoopNest([Y])
    row = nest.get_loops_for(Y)[0]
    for t in ("var", "mean"):
        nest.compute_at(t, row)
    vectorize_split(nest, nest.get_loops_for(Y)[-1], lanes)
    return nest, X, Y, row


def _reference(x):
    v = x.astype(np.float64)
    mu = (v / 64).sum(axis=1, keepdims=True)
    va = ((v - mu) ** 2).sum(axis=1, keepdims=True)
    return (v - mu) / np.sqrt(va + 1.0)


def _prefetches(nest):
    return [s for s in iter_stmts(nest.copy().prepare_for_codegen().root) if isinstance(s, Prefetch)]


@pytest.mark.parametrize("target", ["llvm", "ireval"])
@pytest.mark.parametrize("distance", [1, 3, 20])
def test_prefetched_rows_give_the_same_values(target, distance):
    nest, X, Y, row = _rows_scheduled()
    nest.parallelize(row)
    nest.prefetch(X, row, distance)
    nest.prefetch(Y, row, distance)
    x = np.random.default_rng(0).standard_normal((12, 64)).astype(np.float32)
    y = np.full((12, 64), np.nan, np.float32)
    build(nest, [X, Y], target=target)(x, y)
    np.testing.assert_allclose(y, _reference(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["llvm", "ireval"])
def test_a_symbolic_row_count_clamps_the_prefetch_to_the_last_row(target):
    M = Var("M")
    X = Buffer("X", (M, 32), "float32")
    Y = Compute("Y", (M, 32), lambda i, j: X[i, j] * 2.0 + 1.0)
    nest = LoopNest([Y])
    i, j = nest.get_loops_for(Y)
    vectorize_split(nest, j, 8)
    nest.prefetch(X, i, 2)
    nest.prefetch(Y, i)
    text = str(nest.copy().prepare_for_codegen())
    assert "min(int64(i) + int64(2), int64(M) - int64(1))" in text and "prefetch for write Y" in text
    for m in (1, 2, 5):
        x = np.arange(m * 32, dtype=np.float32).reshape(m, 32)
        y = np.full((m, 32), np.nan, np.float32)
        build(nest, [X, Y], target=target)(x, y)
        np.testing.assert_array_equal(y, x * 2 + 1)


def test_one_prefetch_per_buffer_beside_the_last_access():
    nest, X, Y, row = _rows_scheduled()
    nest.prefetch(X, row)
    nest.prefetch(Y, row)
    found = _prefetches(nest)
    assert [(p.buffer.name, p.write) for p in found] == [("X", False), ("Y", True)]
    assert all(p.indices[0].dtype.lanes == 16 for p in found)     # inside the vectorized loop
    nest.prefetch(X, row, 4)          # a second call replaces the distance
    assert len(nest._prefetches) == 2 and (X, row.var, 4) in nest._prefetches
    assert str(nest).splitlines()[-2:] == [f"// prefetch Y at loop {row.name}, 1 iteration ahead",
                                           f"// prefetch X at loop {row.name}, 4 iterations ahead"]


def test_the_llvm_code_prefetches_each_cache_line_and_writes_for_the_output():
    X = Buffer("X", (8, 256), "float32")
    Y = Compute("Y", (8, 256), lambda i, j: X[i, j] + 1.0)
    nest = LoopNest([Y])
    i, j = nest.get_loops_for(Y)
    vectorize_split(nest, j, 64)        # 256 bytes a vector: four lines of 64 bytes
    nest.prefetch(X, i)
    nest.prefetch(Y, i)
    src = build(nest, [X, Y], target="llvm").source
    calls = [line for line in src.splitlines() if "call void @\"llvm.prefetch.p0\"" in line]
    assert len(calls) == 8
    assert sum(", i32 1, i32 3, i32 1)" in c for c in calls) == 4      # the writes
    assert "llvm.prefetch" not in build(LoopNest([Y]), [X, Y], target="llvm").source


def test_the_cuda_code_has_no_prefetch():
    X = Buffer("X", (8, 32), "float32")
    Y = Compute("Y", (8, 32), lambda i, j: X[i, j] + 1.0)
    nest = LoopNest([Y])
    i, j = nest.get_loops_for(Y)
    nest.prefetch(X, i)
    nest.set_gpu_thread_index(j, 0)
    assert "prefetch X" in str(nest.copy().prepare_for_codegen())
    kernel = build(nest, [X, Y], target="cuda")
    assert "prefetch" not in kernel.source
    from codegen.cuda import nvcc_available
    from codegen.cuda.emulate import host_compiler, run_on_host
    if host_compiler() is not None and nvcc_available():
        x = np.arange(256, dtype=np.float32).reshape(8, 32)
        y = np.full((8, 32), np.nan, np.float32)
        run_on_host(kernel, x, y)
        np.testing.assert_array_equal(y, x + 1)


def test_the_cache_key_tells_a_prefetched_kernel_apart():
    nest, X, Y, row = _rows_scheduled()
    plain = nest.copy()
    nest.prefetch(X, row)
    a = stmt_key(plain.copy().prepare_for_codegen().root, [X, Y], [])
    b = stmt_key(nest.copy().prepare_for_codegen().root, [X, Y], [])
    assert a != b


@pytest.mark.parametrize("case, message", [
    ("intermediate", "intermediate of the nest"),
    ("distance0", "an int of at least 1"),
    ("distance_bool", "an int of at least 1"),
    ("distance_float", "an int of at least 1"),
    ("vectorized", "is vectorized"),
    ("not_accessed", "does not access"),
    ("unknown", "is not a buffer of this nest"),
])
def test_refusals_leave_the_nest_as_it_was(case, message):
    nest, X, Y, row = _rows_scheduled()
    vec = nest.get_loops_for(Y)[-1]
    G = Buffer("G", (64,), "float32")
    Z = Compute("Z", (12, 64), lambda i, j: X[i, j] * G[j])
    if case == "not_accessed":
        nest = LoopNest([Y, Z])
        row = nest.get_loops_for(Y)[0]
    before, history, recorded = str(nest), list(nest.history), list(nest._prefetches)
    args = {"intermediate": ("mean", row), "distance0": (X, row, 0), "distance_bool": (X, row, True),
            "distance_float": (X, row, 1.5), "vectorized": (X, vec), "not_accessed": (G, row),
            "unknown": ("W", row)}[case]
    with pytest.raises(ScheduleError, match=message):
        nest.prefetch(*args)
    assert str(nest) == before and nest.history == history and nest._prefetches == recorded


def test_data_dependent_and_guarded_accesses_are_not_followed():
    idx = Buffer("idx", (16,), "int32")
    X = Buffer("X", (64,), "float32")
    G = Compute("G", (16,), lambda i: X[idx[i]])
    nest = LoopNest([G])
    with pytest.raises(ScheduleError, match="does not access"):
        nest.prefetch(X, nest.get_loops_for(G)[0])
    nest.prefetch(idx, nest.get_loops_for(G)[0])       # the index itself is followed
    assert [p.buffer.name for p in _prefetches(nest)] == ["idx"]
    Y = Compute("Y", (10,), lambda i: X[i] * 2.0)
    nest = LoopNest([Y])
    (i,) = nest.get_loops_for(Y)
    nest.split_with_mask(i, 4)      # X[i_outer * 4 + i_inner] under `if (i_outer * 4 + i_inner < 10)`
    outer = nest.get_loops_for(Y)[0]
    with pytest.raises(ScheduleError, match="does not access"):
        nest.prefetch(X, outer)


@pytest.mark.parametrize("target", ["llvm", "ireval"])
def test_a_read_on_a_side_of_an_if_then_else_is_not_followed(target):
    # T2[i] = if_then_else(i >= 2, if_then_else(i >= 4, A[i - 4], 0), 0) (T1 inlined): the
    # guards keep A[i - 4] from running at i < 4, and a prefetch beside the store would not
    # have been guarded (IREval: an out-of-range prefetch of A; random tester, seed 183, case 205)
    from te import if_then_else
    A = Buffer("A", (8,), "float32")
    T1 = Compute("T1", (6,), lambda i: if_then_else(i >= 2, A[i - 2], 0.0))
    T2 = Compute("T2", (6,), lambda i: if_then_else(i >= 2, T1[i - 2], 0.0) + A[i + 2] * 0.0)
    nest = LoopNest([T2])
    nest.compute_inline(T1)
    (i,) = nest.get_loops_for(T2)
    nest.prefetch(A, i)             # A[i + 2] runs in every iteration: it is followed
    assert [str(p) for p in _prefetches(nest)] == [f"prefetch A[min({i.name} + 1, 5) + 2];"]
    a = np.arange(8, dtype=np.float32)
    t2 = np.full(6, np.nan, np.float32)
    build(nest, [A, T2], target=target)(a, t2)
    np.testing.assert_array_equal(t2, [0, 0, 0, 0, 0, 1])
    only_guarded = LoopNest([Compute("T3", (6,), lambda i: if_then_else(i >= 4, A[i - 4], 0.0))])
    with pytest.raises(ScheduleError, match="if_then_else"):
        only_guarded.prefetch(A, only_guarded.get_loops_for("T3")[0])


def test_a_prefetch_whose_loop_a_later_transform_replaced_is_dropped_with_a_warning():
    nest, X, Y, row = _rows_scheduled()
    nest.prefetch(X, row)
    nest.split_with_tail(row, 4)
    with pytest.warns(UserWarning, match="prefetch of X at loop .* is dropped"):
        nest.copy().prepare_for_codegen()


def test_replaying_the_history_prefetches_again():
    nest, X, Y, row = _rows_scheduled()
    nest.prefetch(X, row, 2)
    again = LoopNest(nest.outputs)
    again.replay(nest.history_json())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert str(again.prepare_for_codegen()) == str(nest.prepare_for_codegen())


def test_a_statement_nest_written_with_a_prefetch_is_refused():
    """Hand-written prefetches would skip the guarantee that a prefetch stays in its buffer
    (IREval would raise where LLVM prefetches quietly): LoopNest.prefetch places them."""
    from loopnest.stmt import For, Store
    from loopnest.errors import StatementError
    A, B, i = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32"), Var("i")
    with pytest.raises(StatementError, match="prefetches are placed by prepare_for_codegen"):
        LoopNest(For(i, 0, 8, Block([Prefetch(A, (i + 100,)), Store(B, (i,), A[i])])), outputs=[B])


def test_ireval_refuses_a_prefetch_outside_its_buffer_and_the_verifier_its_index_count():
    X = Buffer("X", (4, 8), "float32")
    Y = Compute("Y", (4, 8), lambda i, j: X[i, j] + 1.0)
    nest = LoopNest([Y]).prepare_for_codegen()
    nest.root = Block((Prefetch(X, (32,)),) + nest.root.stmts)
    with pytest.raises(IndexError, match="out-of-bounds prefetch of X"):
        build(nest, [X, Y], target="ireval")(np.zeros((4, 8), np.float32), np.zeros((4, 8), np.float32))
    with pytest.raises(VerifyError, match="prefetch of X has 1 index"):
        verify(Block((Prefetch(X, (3,)),)))


def test_auto_schedule_prefetches_rows_read_in_several_passes_beyond_l2():
    from loopnest import Target
    t = Target(vector_bits=512, vector_registers=32, l2_bytes=64 * 1024, cores=2)
    X, Y = _layernorm(256, 64)
    nest = LoopNest([Y])
    report = nest.auto_schedule(t)
    assert "next row prefetched: X, Y" in report["Y"].choice and "3 passes over a row" in report["Y"].reason
    assert [p.buffer.name for p in _prefetches(nest)] == ["X", "Y"]
    x = np.random.default_rng(1).standard_normal((256, 64)).astype(np.float32)
    y = np.full((256, 64), np.nan, np.float32)
    build(nest, [X, Y], target="llvm")(x, y)
    np.testing.assert_allclose(y, _reference(x), rtol=1e-4, atol=1e-4)
    small = LoopNest([_layernorm(8, 64)[1]])        # everything in L2: no prefetch
    assert "prefetched" not in str(small.auto_schedule(t))


def test_loops_whose_bounds_read_memory_are_not_followed():
    from loopnest.stmt import For, Store
    X, Y, n = Buffer("X", (8, 16), "float32"), Buffer("Y", (8, 16), "float32"), Buffer("n", (2,), "int32")
    v, j = Var("v"), Var("j")
    inner = For(v, 0, 8, Block([For(j, 0, n[0], Block([Store(Y, (v, j), X[v, j] + 1.0)]))]))
    nest = LoopNest(inner, outputs=[Y])
    with pytest.raises(ScheduleError, match="does not access X"):
        nest.prefetch(X, nest.loop("v"))
    outer = For(v, 0, n[1], Block([For(j, 0, 16, Block([Store(Y, (v, j), X[v, j] + 1.0)]))]))
    nest = LoopNest(outer, outputs=[Y])
    with pytest.raises(ScheduleError, match="bounds of loop v read memory"):
        nest.prefetch(X, nest.loop("v"))
