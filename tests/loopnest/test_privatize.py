"""``nest.privatize(buffer, loop, parts)``: a scatter that updates ``buffer`` with one
associative and commutative operator runs in chunks, each into its own copy of the buffer,
combined after the loop, so the chunk loop is legal to parallelize (issue 13, item 5: a
histogram's scatter made parallel by privatising it).

* Values equal the serial nest exactly for integers (a histogram of symbolic size with bins
  from the data, min / max / bitwise scatters) and within rounding for a float sum, on
  IREval and LLVM, with the chunk loop parallel; on CUDA (host emulation) with the chunks on
  GPU blocks. A bin outside the histogram still stops the kernel.
* Refusals (an update that is not ``buf = buf op x``, ``buf`` read elsewhere in the loop, a
  load and a store at different indices, two operators, a bad ``parts``) name what was found
  and leave the nest unchanged.
* The history records the number of copies (``parts=None`` resolved to the cores) and replays.
"""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest, ScheduleError
from loopnest.stmt import Block, Cond, For, ForKind, Let, Store
from loopnest.target import host_target
from nests import unchanged
from te import Buffer, Compute, Reduce, Sum, Var, cast, float32, int32, int64, maximum, minimum
from te.expr import Max, Min

NB = 16


def hist_stmt(n, nb=NB):
    """H[b] = 0 for every bin, then H[int(V[i] * nb)] += 1 with a Let for the bin."""
    V, H = Buffer("V", (n,), float32), Buffer("H", (nb,), int32)
    i, b, k = Var("i"), Var("b"), Var("k", int32)
    stmt = Block([For(b, 0, nb, Store(H, (b,), 0)),
                  For(i, 0, n, Let(k, cast(V[i] * float(nb), int32), Store(H, (k,), H[k] + 1)))])
    return V, H, i, stmt


def scatter_stmt(n, update, dtype=float32, nb=NB):
    """for i: S[P[i]] = update(S[P[i]], W[i]) (S is read on entry: an in-place scatter)."""
    P, W, S = Buffer("P", (n,), int32), Buffer("W", (n,), dtype), Buffer("S", (nb,), dtype)
    i = Var("i")
    return P, W, S, i, For(i, 0, n, Store(S, (P[i],), update(S[P[i]], W[i])))


def loops(nest):
    return {l.name: l.stmt for l in nest.get_all_loops()}


# ------------------------------------------------------------------------------------
# values
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("parts", [1, 3, None])
def test_histogram_of_symbolic_size_is_exact(backend, parts):
    N = Var("N")
    V, H, i, stmt = hist_stmt(N)
    nest = LoopNest(stmt, outputs=[H])
    assert "dependence on H" in unchanged(nest, lambda: nest.parallelize(i))
    chunk = nest.privatize(H, i, parts=parts, parallel=True)
    assert chunk.stmt.kind == ForKind.PARALLEL
    copies = parts if parts is not None else host_target().cores
    assert nest.buffer("H_part").shape[0] == copies
    kernel = build(nest, [V, H], target=backend)
    for n in (0, 1, 2, 7, 500):
        v = np.random.default_rng(n).uniform(0, 1, n).astype(np.float32)
        h = np.full(NB, -5, np.int32)
        kernel(v, h)
        np.testing.assert_array_equal(h, np.bincount((v * NB).astype(np.int32), minlength=NB))


def test_float_sum_scatter_within_rounding(backend):
    n = 1000
    P, W, S, i, stmt = scatter_stmt(n, lambda acc, w: acc + w)
    serial = LoopNest(stmt, outputs=[S])
    nest = LoopNest(stmt, outputs=[S])
    nest.privatize(S, i, parts=4, parallel=True)
    rng = np.random.default_rng(1)
    p = rng.integers(0, NB, n).astype(np.int32)
    w = rng.uniform(-1, 1, n).astype(np.float32)
    s0 = rng.uniform(-1, 1, NB).astype(np.float32)
    want, got = s0.copy(), s0.copy()
    build(serial, [P, W, S], target=backend)(p, w, want)
    build(nest, [P, W, S], target=backend)(p, w, got)
    ref = s0.astype(np.float64)
    np.add.at(ref, p, w.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4)


@pytest.mark.parametrize("dtype", [int32, float32])
@pytest.mark.parametrize("op", ["min", "max"])
def test_min_and_max_scatters_are_exact(backend, op, dtype):
    n = 300
    fn = minimum if op == "min" else maximum
    P, W, S, i, stmt = scatter_stmt(n, lambda acc, w: fn(acc, w), dtype)
    nest = LoopNest(stmt, outputs=[S])
    nest.privatize(S, i, parts=5, parallel=True)
    init = "2147483647" if (op, dtype) == ("min", int32) else "inff" if op == "min" else None
    if init is not None:
        assert f"S_part[i_part, S_part_i0] = {init};" in str(nest)
    rng = np.random.default_rng(2)
    p = rng.integers(0, NB, n).astype(np.int32)
    w = rng.integers(-1000, 1000, n).astype(dtype.numpy)
    s = np.full(NB, 7, dtype.numpy)
    want = s.copy()
    (np.minimum if op == "min" else np.maximum).at(want, p, w)
    build(nest, [P, W, S], target=backend)(p, w, s)
    np.testing.assert_array_equal(s, want)


@pytest.mark.parametrize("update", [lambda a, w: a ^ w, lambda a, w: w | a, lambda a, w: a & w,
                                    lambda a, w: a - w, lambda a, w: w * a],
                         ids=["xor", "or", "and", "minus", "times"])
def test_integer_scatters_equal_the_serial_nest(backend, update):
    n = 200
    P, W, S, i, stmt = scatter_stmt(n, update, int32)
    nest = LoopNest(stmt, outputs=[S])
    nest.privatize(S, i, parts=3, parallel=True)
    rng = np.random.default_rng(3)
    p = rng.integers(0, NB, n).astype(np.int32)
    w = rng.integers(-(1 << 30), 1 << 30, n).astype(np.int32)
    s0 = rng.integers(-(1 << 30), 1 << 30, NB).astype(np.int32)
    want, got = s0.copy(), s0.copy()
    build(LoopNest(stmt, outputs=[S]), [P, W, S], target="ireval")(p, w, want)
    build(nest, [P, W, S], target=backend)(p, w, got)
    np.testing.assert_array_equal(got, want)


def test_logical_or_scatter_of_bools(backend):
    n = 50
    P, W, S = Buffer("P", (n,), int32), Buffer("W", (n,), int32), Buffer("S", (NB,), "bool")
    i = Var("i")
    nest = LoopNest(For(i, 0, n, Store(S, (P[i],), S[P[i]] | (W[i] > 5))), outputs=[S])
    nest.privatize(S, i, parts=3, parallel=True)
    assert "S_part[i_part, S_part_i0] = false;" in str(nest)
    rng = np.random.default_rng(12)
    p, w = rng.integers(0, NB, n).astype(np.int32), rng.integers(0, 7, n).astype(np.int32)
    s = np.zeros(NB, bool)
    build(nest, [P, W, S], target=backend)(p, w, s)
    want = np.zeros(NB, bool)
    np.logical_or.at(want, p, w > 5)
    np.testing.assert_array_equal(s, want)


def test_constant_extent_chunks_without_guard_and_empty_copies_left_out():
    V, H, i, stmt = hist_stmt(12)
    nest = LoopNest(stmt, outputs=[H])
    nest.privatize(H, i, parts=4)
    assert "if (" not in str(nest) and loops(nest)["i_inner"].stop.value == 3
    nest = LoopNest(stmt, outputs=[H])
    nest.privatize(H, i, parts=5)             # chunks of 3: four copies suffice
    assert nest.buffer("H_part").shape == (4, NB) and "if (" not in str(nest)
    nest = LoopNest(stmt, outputs=[H])
    nest.privatize(H, i, parts=50)            # more parts than iterations: one copy each
    assert nest.buffer("H_part").shape == (12, NB)
    nest = LoopNest(stmt, outputs=[H])
    nest.privatize(H, i, parts=8)             # chunks of 2: six copies, no guard
    assert nest.buffer("H_part").shape == (6, NB)
    v = np.random.default_rng(5).uniform(0, 1, 12).astype(np.float32)
    h = np.zeros(NB, np.int32)
    build(nest, [V, H], target="llvm")(v, h)
    np.testing.assert_array_equal(h, np.bincount((v * NB).astype(np.int32), minlength=NB))


def test_masked_last_chunk_and_a_nonzero_start(backend):
    """10 iterations starting at 3 in 4 chunks of 3: the last chunk is masked."""
    n = 13
    P, W, S = Buffer("P", (n,), int32), Buffer("W", (n,), int32), Buffer("S", (NB,), int32)
    i = Var("i")
    stmt = For(i, 3, n, Store(S, (P[i],), S[P[i]] + W[i]))
    nest = LoopNest(stmt, outputs=[S])
    nest.privatize(S, i, parts=4, parallel=True)
    assert "if (i_part * 3 + i_inner < 10)" in str(nest)
    rng = np.random.default_rng(6)
    p, w = rng.integers(0, NB, n).astype(np.int32), rng.integers(0, 100, n).astype(np.int32)
    s = np.zeros(NB, np.int32)
    build(nest, [P, W, S], target=backend)(p, w, s)
    want = np.zeros(NB, np.int32)
    np.add.at(want, p[3:], w[3:])
    np.testing.assert_array_equal(s, want)


def test_conditional_update_inside_an_inner_loop_of_an_outer_loop(backend):
    """for r: for i: for j: if (A[r, i, j] > 0) H[r, A[r, i, j] % 4] += 1; privatized at i."""
    R, I, J = 3, 10, 5
    A, H = Buffer("A", (R, I, J), int32), Buffer("H", (R, 4), int32)
    r, i, j = Var("r"), Var("i"), Var("j")
    x = A[r, i, j]
    stmt = For(r, 0, R, For(i, 0, I, For(j, 0, J, Cond(x > 0, Store(H, (r, x % 4), H[r, x % 4] + 1)))))
    nest = LoopNest(stmt, outputs=[H])
    nest.privatize(H, i, parts=3, parallel=True)
    assert nest.buffer("H_part").shape == (3, 1, 4)     # the row of H that one iteration of r updates
    a = np.random.default_rng(7).integers(-3, 9, (R, I, J)).astype(np.int32)
    h = np.ones((R, 4), np.int32)
    build(nest, [A, H], target=backend)(a, h)
    want = np.ones((R, 4), np.int32)
    for rr in range(R):
        np.add.at(want[rr], a[rr][a[rr] > 0] % 4, 1)
    np.testing.assert_array_equal(h, want)


def test_refused_inside_a_parallel_loop_where_the_iterations_would_share_the_copies():
    A, H = Buffer("A", (3, 10), int32), Buffer("H", (3, 4), int32)
    r, i = Var("r"), Var("i")
    stmt = For(r, 0, 3, For(i, 0, 10, Store(H, (r, A[r, i] % 4), H[r, A[r, i] % 4] + 1)))
    nest = LoopNest(stmt, outputs=[H])
    nest.parallelize(r)
    msg = unchanged(nest, lambda: nest.privatize(H, i, parts=2))
    assert msg.startswith("cannot privatize H at loop i: loop r around it is parallel, and its iterations would "
                          "share the copies (cannot parallelize loop r:")


@pytest.mark.parametrize("bad", [1.5, -0.5])
def test_a_bin_outside_the_histogram_still_raises(backend, bad):
    """The copies sit one after the other: a bin past the end of H would land in the next
    copy, so the rewritten index sends it past all of them and the kernel's check stops it."""
    V, H, i, stmt = hist_stmt(Var("N"))
    nest = LoopNest(stmt, outputs=[H])
    nest.privatize(H, i, parts=3, parallel=True)
    v = np.random.default_rng(11).uniform(0, 1, 50).astype(np.float32)
    v[0 if bad < 0 else 10] = bad
    with pytest.raises(IndexError, match="H_part"):
        build(nest, [V, H], target=backend)(v, np.zeros(NB, np.int32))


def test_reduction_tensor_privatized_at_its_reduction_loop(backend):
    A = Buffer("A", (4, 30), int32)
    C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (30,))
    nest = LoopNest([C])
    i, k = nest.get_loops_for(C)
    assert "dependence on C" in unchanged(nest, lambda: nest.parallelize(k))
    nest.privatize(C, k, parts=3, parallel=True)
    a = np.random.default_rng(8).integers(-100, 100, (4, 30)).astype(np.int32)
    c = build(nest, [A, C], target=backend)(a)
    np.testing.assert_array_equal(c, a.sum(axis=1))


def test_chunk_loop_is_legal_to_parallelize_afterwards_and_llvm_runs_it_in_parallel():
    N = Var("N")
    V, H, i, stmt = hist_stmt(N)
    nest = LoopNest(stmt, outputs=[H])
    chunk = nest.privatize(H, i, parts=4)
    assert chunk.name == "i_part" and chunk.stmt.kind == ForKind.SERIAL
    nest.parallelize(chunk)
    kernel = build(nest, [V, H], target="llvm")
    assert "parallel" in str(kernel.stmt)
    v = np.random.default_rng(9).uniform(0, 1, 100_000).astype(np.float32)
    h = np.zeros(NB, np.int32)
    kernel(v, h)
    np.testing.assert_array_equal(h, np.bincount((v * NB).astype(np.int32), minlength=NB))


def test_cuda_with_the_chunks_on_gpu_blocks_and_the_bins_combined_by_threads():
    n = 4096
    V, H, i, stmt = hist_stmt(n)
    nest = LoopNest(stmt, outputs=[H])
    chunk = nest.privatize(H, i, parts=32)
    nest.set_gpu_block_index(chunk, 0)
    nest.set_gpu_thread_index("H_i0", 0)
    kernel = build(nest, [V, H], target="cuda")
    assert "grid (32, 1, 1)" in kernel.source and "b_H_part[((v_i_part * 16) + " in kernel.source
    from codegen.cuda.emulate import host_compiler, run_on_host
    if host_compiler() is None:
        pytest.skip("no host C++ compiler to emulate the CUDA kernels")
    v = np.random.default_rng(13).uniform(0, 1, n).astype(np.float32)
    h = np.full(NB, 3, np.int32)
    run_on_host(kernel, v, h)
    np.testing.assert_array_equal(h, np.bincount((v * NB).astype(np.int32), minlength=NB))


# ------------------------------------------------------------------------------------
# refusals: the message names what was found, the nest is unchanged
# ------------------------------------------------------------------------------------
def refused(stmt, out, loop_name, buffer_name=None, **kw):
    nest = LoopNest(stmt, outputs=[out])
    return unchanged(nest, lambda: nest.privatize(buffer_name or out.name, loop_name, **kw))


def test_refuses_an_update_that_is_not_associative():
    _, _, S, _, stmt = scatter_stmt(8, lambda acc, w: acc * 2.0 + w)
    msg = refused(stmt, S, "i")
    assert msg.startswith("cannot privatize S at loop i: `S[P[i]] = S[P[i]] * 2.0f + W[i]` is not an update")
    _, _, S, _, stmt = scatter_stmt(8, lambda acc, w: w - acc)
    assert "`S[P[i]] = W[i] - S[P[i]]` is not an update" in refused(stmt, S, "i")
    _, _, S, _, stmt = scatter_stmt(8, lambda acc, w: w)
    assert "`S[P[i]] = W[i]` is not an update" in refused(stmt, S, "i")


def test_refuses_a_buffer_read_elsewhere_in_the_loop():
    V, H, _, _ = hist_stmt(8)
    B = Buffer("B", (8,), int32)
    i, k = Var("i"), Var("k", int32)
    stmt = For(i, 0, 8, Let(k, cast(V[i] * 4.0, int32), Block([Store(H, (k,), H[k] + 1), Store(B, (i,), H[k])])))
    msg = refused(stmt, H, "i")
    assert "H is also read by `B[i] = H[k]` inside the loop" in msg
    _, _, S, _, stmt = scatter_stmt(8, lambda acc, w: acc + acc)
    assert "reads S besides its accumulator" in refused(stmt, S, "i")
    P, W, S, i, _ = scatter_stmt(8, lambda acc, w: acc, int32)
    stmt = For(i, 0, 8, Store(S, (P[i],), S[W[i]] + S[P[i]]))      # the accumulator is on the right
    assert "`S[P[i]] = S[W[i]] + S[P[i]]` reads S besides its accumulator" in refused(stmt, S, "i")


def test_refuses_a_load_and_store_at_different_indices():
    P, W, S = Buffer("P", (8,), int32), Buffer("W", (8,), int32), Buffer("S", (NB,), int32)
    i = Var("i")
    stmt = For(i, 0, 8, Store(S, (P[i] + 1,), S[P[i]] + W[i]))
    msg = refused(stmt, S, "i")
    assert "`S[P[i] + 1] = S[P[i]] + W[i]` reads S at another index than it writes (`S[P[i]]`)" in msg


def test_refuses_two_operators_and_names_both():
    P, W, S = Buffer("P", (8,), int32), Buffer("W", (8,), int32), Buffer("S", (NB,), int32)
    i = Var("i")
    stmt = For(i, 0, 8, Block([Store(S, (P[i],), S[P[i]] + W[i]), Store(S, (W[i],), Max(S[W[i]], P[i]))]))
    msg = refused(stmt, S, "i")
    assert "combine with different operators: + (`S[P[i]] = S[P[i]] + W[i]`), max (`S[W[i]] = max(" in msg


def test_refuses_a_loop_that_does_not_update_the_buffer_a_parallel_loop_and_bad_parts():
    V, H, i, stmt = hist_stmt(8)
    assert "parts must be >= 1" in refused(stmt, H, "i", parts=0)
    assert "parts must be an int" in refused(stmt, H, "i", parts=2.5)
    assert "parts must be an int" in refused(stmt, H, "i", parts=True)
    assert "`H[b] = 0` is not an update" in refused(stmt, H, "b")      # the zeroing loop
    B, j = Buffer("B", (4,), int32), Var("j")
    two = Block([For(j, 0, 4, Store(B, (j,), 1)), stmt])
    assert refused(two, H, "j").endswith("loop j does not update H")
    nest = LoopNest(stmt, outputs=[H])
    nest.parallelize("b")
    assert "the loop is parallel" in unchanged(nest, lambda: nest.privatize(H, "b"))


def test_refuses_when_parallel_is_asked_and_another_buffer_carries_a_dependence():
    """The loop also runs a scan: privatizing H is legal, parallelizing the chunks is not."""
    n = 16
    P, B, H = Buffer("P", (n,), int32), Buffer("B", (n + 1,), int32), Buffer("H", (NB,), int32)
    i = Var("i")
    stmt = For(i, 0, n, Block([Store(H, (P[i],), H[P[i]] + 1), Store(B, (i + 1,), B[i] + P[i])]))
    nest = LoopNest(stmt, outputs=[H, B])
    assert "dependence on B" in unchanged(nest, lambda: nest.privatize(H, "i", parts=2, parallel=True))
    nest.privatize(H, "i", parts=2)
    p = np.random.default_rng(10).integers(0, NB, n).astype(np.int32)
    h, b = np.zeros(NB, np.int32), np.zeros(n + 1, np.int32)
    build(nest, [P, H, B], target="llvm")(p, h, b)
    np.testing.assert_array_equal(h, np.bincount(p, minlength=NB))
    np.testing.assert_array_equal(b[1:], np.cumsum(p))


# ------------------------------------------------------------------------------------
# history
# ------------------------------------------------------------------------------------
def test_history_records_the_copies_and_replays():
    N = Var("N")
    V, H, i, stmt = hist_stmt(N)
    nest = LoopNest(stmt, outputs=[H])
    chunk = nest.privatize(H, i)
    nest.parallelize(chunk)
    nest.vectorize(nest.split_with_tail("H_i0", 4)[1])
    cores = host_target().cores
    assert nest.history[0] == {"op": "privatize", "args": [{"buffer": "H"}, {"loop": "i"}],
                               "kwargs": {"parts": cores}}
    again = LoopNest(stmt, outputs=[H]).replay(nest.history_json())
    assert str(again) == str(nest)
    positional = LoopNest(stmt, outputs=[H])
    positional.privatize(H, i, 3, True)
    assert positional.history[0]["args"][2:] == [3, True]
    assert str(LoopNest(stmt, outputs=[H]).replay(positional.history)) == str(positional)


def test_a_guarded_index_of_int64_sizes_is_redirected_in_int64():
    """Seed 146, case 397: privatizing a reduction whose reads are data dependent (T3[I[i]])
    compared the int64 index with an int32 zero and raised TypeError; the guard is now built
    in the widest of the index's and the sizes' types."""
    N = Var("N", int64)
    I = Buffer("I", (N,), "int64")
    T2 = Compute("T2", (N + 1,), lambda i: 1.0)
    T3 = Reduce("T3", (N + 1,), Sum(), lambda i, r: cast(T2[r + 1], "int64"), (N,))
    T4 = Compute("T4", (N,), lambda i: cast(T3[I[i]], "float32"))
    nest = LoopNest([T4])
    nest.split_with_tail(nest.get_loops_for(T3)[0], 4)
    nest.privatize(nest.buffer("T3"), nest.loop("r_1"), 4, parallel=True)
    idx = np.array([0, 2, 4, 5, 1], np.int64)
    for backend in ("ireval", "llvm"):
        out = np.zeros(5, np.float32)
        build(nest, [I, T4, N], target=backend)(idx, out, 5)
        assert out.tolist() == [5.0] * 5, backend
