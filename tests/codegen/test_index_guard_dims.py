"""Data-dependent indices are checked per dimension, by a lowering pass the dumps show.

``guard_data_dependent_indices`` (``loopnest.index_checks``) runs before ``flatten_indices``:
a 2-D histogram ``H[r, A[i]]`` whose bin is past its own dimension but whose flat offset
``r * K + A[i]`` stays inside ``H`` must raise ``IndexError`` (it used to write another row).
The printers only print the ``IndexCheck`` nodes; ``bounds_check=False`` removes them.
"""
from __future__ import annotations

import io

import numpy as np
import pytest

from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from codegen.ireval import build_ireval
from codegen.kernel import make_params
from codegen.llvm import build_llvm
from loopnest import LoopNest
from loopnest.errors import VerifyError
from loopnest.index_checks import guard_data_dependent_indices
from loopnest.passes import PASSES, run_passes
from loopnest.stmt import Block, For, Let, Store
from loopnest.verify import verify
from te import Buffer, Var, int32
from te.expr import Broadcast, IfThenElse, IndexCheck, IntImm, Load, Ramp
from te.lanes import lane_of

R, K, N = 3, 4, 8
HAVE_EMU = host_compiler() is not None and nvcc_available()


def hist2d():
    """H[r, A[i]] += 1 for every row r: the column is data dependent, the row is not."""
    A, H = Buffer("A", (N,), int32), Buffer("H", (R, K), int32)
    r, i = Var("r"), Var("i")
    root = For(r, 0, R, Block([For(i, 0, N, Block([Store(H, (r, A[i]), H[r, A[i]] + 1)]))]))
    return A, H, LoopNest(root, outputs=[H])


def data(bad: int | None = None):
    a = np.array([0, 1, 2, 3, 3, 2, 1, 0], np.int32)
    if bad is not None:
        a[3] = bad
    return a


def test_the_pass_runs_before_flattening_and_checks_only_the_data_dependent_dimension():
    names = [n for n, *_ in PASSES]
    assert names.index("guard_data_dependent_indices") < names.index("flatten_indices")
    A, H, nest = hist2d()
    out = io.StringIO()
    run_passes(nest, dump=True, out=out)
    dump = out.getvalue()
    assert "// ---- after guard_data_dependent_indices ----" in dump
    after = dump.split("// ---- after guard_data_dependent_indices ----")[1].split("// ----")[0]
    assert "H[r, check_index(A[i], 4, H, 1)] = H[r, check_index(A[i], 4, H, 1)] + 1;" in after
    prepared = nest.copy().prepare_for_codegen()
    assert "H[r * 4 + check_index(A[i], 4, H, 1)]" in str(prepared)


def test_prepare_for_codegen_dump_shows_the_pass(capsys):
    A, H, nest = hist2d()
    nest.prepare_for_codegen(dump=True)
    assert "// ---- after guard_data_dependent_indices ----" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [K, K + 1, -1])
def test_column_past_its_dimension_raises(backend, bad):
    """Row 0 with column K + 1 is flat offset 5, inside H: still an IndexError."""
    A, H, nest = hist2d()
    k = build(nest, [A, H], target=backend)
    h = np.zeros((R, K), np.int32)
    k(data(), h)
    np.testing.assert_array_equal(h, np.full((R, K), 2))
    with pytest.raises(IndexError, match="H .*dimension 1|dimension 1 of H"):
        k(data(bad), np.zeros((R, K), np.int32))


def test_in_range_bins_through_a_let_and_a_guard(backend):
    """A variable bound to a load is data dependent; an if_then_else that guards the load
    keeps the check on the taken side only (out-of-range bins are skipped, not errors)."""
    A, H = Buffer("A", (N,), int32), Buffer("H", (R, K), int32)
    r, i, b = Var("r"), Var("i"), Var("b", int32)
    inside = (A[i] >= 0) & (A[i] < K)
    body = Let(b, A[i], Store(H, (r, IfThenElse(inside, A[i], IntImm(0))),
                              H[r, IfThenElse(inside, A[i], IntImm(0))] + IfThenElse(inside, 1, 0)))
    nest = LoopNest(For(r, 0, R, Block([For(i, 0, N, Block([body]))])), outputs=[H])
    assert "check_index" in str(nest.copy().prepare_for_codegen())
    k = build(nest, [A, H], target=backend)
    h = np.zeros((R, K), np.int32)
    k(data(K + 1), h)
    expected = np.zeros((R, K), np.int32)
    for v in data(K + 1):
        if 0 <= v < K:
            expected[:, v] += 1
    np.testing.assert_array_equal(h, expected)


def test_bounds_check_false_removes_the_checks(monkeypatch):
    A, H, nest = hist2d()
    monkeypatch.setenv("LOOPNEST_DUMP_PASSES", "1")
    k = build(nest, [A, H], target="llvm", bounds_check=False)
    assert "index_ok" not in k.source
    assert "check_index" not in str(k.stmt)
    backing = np.zeros(R * K + K, np.int32)   # the last row's bin 5 lands past H, in the backing
    k(data(K + 1), backing[:R * K].reshape(R, K))   # unchecked: flat offset r * 4 + 5, the next row
    assert backing.sum() == R * N and backing[1 * K + 1] == 3
    checked = build(nest, [A, H], target="llvm")
    assert "H_index_ok" in checked.source


def test_one_dimensional_histogram_is_one_unsigned_compare_per_access():
    A, H = Buffer("A", (N,), int32), Buffer("H", (K,), int32)
    i = Var("i")
    nest = LoopNest(For(i, 0, N, Store(H, (A[i],), H[A[i]] + 1)), outputs=[H])
    src = build(nest, [A, H], target="llvm").source
    checks = [line for line in src.splitlines() if "icmp ult i64" in line and line.endswith(f", {K}")]
    assert len(checks) == 2         # the load's index and the store's index, against the constant K


def test_verifier_refuses_a_check_of_another_dimension():
    A, H = Buffer("A", (N,), int32), Buffer("H", (R, K), int32)
    r, i = Var("r"), Var("i")
    wrong = For(r, 0, R, For(i, 0, N, Store(H, (r, IndexCheck(A[i], K, "H", 0)), 1)))
    with pytest.raises(VerifyError, match="must check the dimension it indexes"):
        verify(wrong)
    verify(guard_data_dependent_indices(None, wrong.replace(
        body=For(i, 0, N, Store(H, (r, A[i]), 1)))))


@pytest.mark.skipif(not HAVE_EMU, reason="g++ or the CUDA headers not found")
def test_cuda_host_emulation_traps_a_column_past_its_dimension():
    A, H, nest = hist2d()
    k = build(nest, [A, H], target="cuda")
    assert "tc_check_index(b_A[v_i], (long long)(4), 1u)" in k.source
    h = np.zeros((R, K), np.int32)
    run_on_host(k, data(), h)
    np.testing.assert_array_equal(h, np.full((R, K), 2))
    with pytest.raises(IndexError, match="IndexCheck failed"):
        run_on_host(k, data(K + 1), np.zeros((R, K), np.int32))



class _HandNest:
    """A prepared statement tree with its buffers (what build_ireval / build_llvm take)."""
    prepared = True

    def __init__(self, root, inputs, outputs):
        self.root, self.inputs, self.outputs, self.intermediates = root, inputs, outputs, []


def test_a_lane_of_a_vector_check_checks_that_lane_only():
    P = Buffer("P", (16,), int32)
    io = Var("io")
    vec = IndexCheck(Load(P, (Ramp(io * 4, 1, 4),)), N, "A", 0)
    assert str(lane_of(vec, 1)) == "check_index(P[io * 4 + 1 * 1], 8, A, 0)"


def test_vector_if_then_else_checks_the_indices_of_taken_lanes_only():
    """IREval and LLVM split an if_then_else with a vector condition into lanes: a lane whose
    guard is false holds an out-of-range index that must not be checked."""
    A, B, P = Buffer("A", (N,), int32), Buffer("B", (16,), int32), Buffer("P", (16,), int32)
    io = Var("io")
    lanes = Ramp(io * 4, 1, 4)
    p_vec = Load(P, (lanes,))
    ok = (p_vec >= Broadcast(IntImm(0), 4)) & (p_vec < Broadcast(IntImm(N), 4))
    value = IfThenElse(ok, Load(A, (IndexCheck(p_vec, N, "A", 0),)), Broadcast(IntImm(-1), 4))
    nest = _HandNest(Block((For(io, 0, 4, Block((Store(B, (lanes,), value),))),)), [A, P], [B])
    a = np.arange(N, dtype=np.int32) * 10
    p = np.array([0, 9, -3, 7] * 4, np.int32)
    want = np.where((p >= 0) & (p < N), a[np.clip(p, 0, N - 1)], -1)
    for kernel in (build_ireval(nest, make_params(nest, [A, P, B])),
                   build_llvm(nest, make_params(nest, [A, P, B]))):
        b = np.zeros(16, np.int32)
        kernel(a, p, b)
        np.testing.assert_array_equal(b, want)


def test_vectorized_guarded_gather_checks_only_the_lanes_that_load(backend):
    """A guarded gather in a vectorized loop: the check runs only where the guard holds (the
    iterations whose guard is false hold out-of-range indices)."""
    A, B, P = Buffer("A", (N,), int32), Buffer("B", (16,), int32), Buffer("P", (16,), int32)
    i = Var("i")
    ok = (P[i] >= 0) & (P[i] < N)
    nest = LoopNest(For(i, 0, 16, Store(B, (i,), IfThenElse(ok, A[P[i]], IntImm(-1)))), outputs=[B])
    _, inner, _ = nest.split_with_tail(i, 4)
    nest.vectorize(inner)
    k = build(nest, [A, P, B], target=backend)
    a = np.arange(N, dtype=np.int32) * 10
    p = np.array([0, 9, -3, 7] * 4, np.int32)
    b = np.zeros(16, np.int32)
    k(a, p, b)
    np.testing.assert_array_equal(b, np.where((p >= 0) & (p < N), a[np.clip(p, 0, N - 1)], -1))


def test_llvm_names_the_check_that_failed_among_several():
    """Two gathers through two index buffers: the error names the buffer whose check failed."""
    from te import Compute
    from loopnest import LoopNest
    P, Q = Buffer("P", (4,), "float32"), Buffer("Q", (6,), "float32")
    I, J = Buffer("I", (5,), "int32"), Buffer("J", (5,), "int32")
    Y = Compute("Y", (5,), lambda i: P[I[i]] + Q[J[i]])
    k = build(LoopNest([Y]), [P, Q, I, J, Y], target="llvm")
    p, q, y = np.zeros(4, np.float32), np.zeros(6, np.float32), np.zeros(5, np.float32)
    ok = np.zeros(5, np.int32)
    with pytest.raises(IndexError, match="Q is outside the buffer in dimension 0"):
        k(P=p, Q=q, I=ok, J=np.array([0, 1, 2, 6, 0], np.int32), Y=y)
    with pytest.raises(IndexError, match="P is outside the buffer in dimension 0"):
        k(P=p, Q=q, I=np.array([0, 4, 0, 0, 0], np.int32), J=ok, Y=y)


def test_a_check_in_the_side_a_select_does_not_take_still_runs_on_cuda():
    """select evaluates both sides (docs/semantics.md): IREval and LLVM raise for A[I[3]] with
    I[3] = -1 although i = 2 takes the other side; CUDA evaluated only the taken side (seed 30,
    case 69 of the random tester). if_then_else still evaluates only its taken side."""
    from te import Compute, if_then_else, select
    from loopnest import LoopNest
    A, I = Buffer("A", (7,), "float32"), Buffer("I", (6,), "int32")
    a, i = np.arange(7, dtype=np.float32), np.array([3, 0, 3, -1, 0, 2], np.int32)
    T = Compute("T", (5,), lambda k: select(k >= 3, A[I[k + 1]], 1.0))
    for target in ("ireval", "llvm"):
        with pytest.raises(IndexError):
            build(LoopNest([T]), [A, I, T], target=target)(A=a, I=i, T=np.zeros(5, np.float32))
    k = build(LoopNest([T]), [A, I, T], target="cuda")
    assert "const float tc_t = " in k.source
    G = Compute("G", (5,), lambda k: if_then_else(k >= 3, A[I[k + 1]], 1.0))
    guarded = build(LoopNest([G]), [A, I, G], target="cuda")
    assert "const float tc_t = " not in guarded.source
    if HAVE_EMU:
        with pytest.raises(IndexError):
            run_on_host(k, a, i, np.zeros(5, np.float32))
        g = np.zeros(5, np.float32)
        run_on_host(guarded, a, i, g)
        np.testing.assert_array_equal(g, [1, 1, 1, a[0], a[2]])
