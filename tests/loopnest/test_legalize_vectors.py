"""legalize_vectors: the lane-by-lane decisions of vector code made once in the IR (golden
prints), the MakeVector / ExtractLane nodes it introduces, and the LLVM printer emitting every
node whole (no per-lane re-visit), checked against IREval."""
from __future__ import annotations

import io

import numpy as np
import pytest

from codegen import build
from codegen.kernel import BuildError, make_params
from codegen.llvm.emit import EmitOptions, emit_module
from loopnest.legalize_vectors import legalize_vectors
from loopnest.passes import TARGET_PASSES, run_passes
from loopnest.stmt import Allocate, Block, Cond, For, ForKind, Free, Store
from te import (Broadcast, Buffer, Cast, ExtractLane, FloatImm, IfThenElse, IntImm, Let, Load, MakeVector, Ramp, Var,
                float32, int32, structural_key)
from te.lanes import lane_of
from te.simplify import simplify
from nests import PreparedNest as _Nest


def _guarded_root(w: int = 4, n: int = 10):
    """``B[ramp] = if_then_else(ramp < n, A[ramp], -1)``: the lanes past ``n`` must not load."""
    A, B = Buffer("A", (n,), float32), Buffer("B", (12,), float32)
    io = Var("io")
    idx = Ramp(io * w, 1, w)
    val = IfThenElse(idx < Broadcast(IntImm(n, int32), w), Load(A, (idx,)), Broadcast(FloatImm(-1.0, float32), w))
    return For(io, 0, 3, Block([Store(B, (idx,), val)])), A, B


def test_vector_condition_with_loads_becomes_per_lane_if_then_else():
    root, _, _ = _guarded_root(w=2)
    assert str(legalize_vectors(None, root)) == """\
for (int io = 0; io < 3; io++) {
  B[ramp(io * 2, 1, 2)] = make_vector(if_then_else(io * 2 < 10, A[io * 2], -1.0f), \
if_then_else(io * 2 + 1 * 1 < 10, A[io * 2 + 1 * 1], -1.0f));
}"""


def test_if_then_else_without_loads_becomes_select_and_scalar_guard_stays():
    A = Buffer("A", (8,), float32)
    i = Var("i")
    pure = IfThenElse(i < 4, FloatImm(1.0, float32), FloatImm(2.0, float32))
    guard = IfThenElse(i < 4, Load(A, (i + 4,)), FloatImm(0.0, float32))
    root = For(i, 0, 8, Block([Store(A, (i,), pure + guard)]))
    assert str(legalize_vectors(None, root)) == """\
for (int i = 0; i < 8; i++) {
  A[i] = select(i < 4, 1.0f, 2.0f) + if_then_else(i < 4, A[i + 4], 0.0f);
}"""


def test_pass_is_in_the_llvm_pipeline_and_dumped():
    names = [n for n, *_ in TARGET_PASSES["llvm"]]
    # after every pass that builds if_then_else nodes it must legalise (short_circuit only builds
    # scalar ones that load, which it keeps), before verify
    assert names.index("legalize_vectors") > max(names.index(n) for n in ("guard_int_division", "lower_low_precision"))
    assert names.index("legalize_vectors") < names.index("short_circuit") < names.index("verify")
    root, A, B = _guarded_root()
    out = io.StringIO()
    run_passes(_Nest(root, [A], [B]), dump=True, out=out, passes=[("legalize_vectors", legalize_vectors)])
    assert "// ---- after legalize_vectors ----" in out.getvalue() and "make_vector(" in out.getvalue()


def test_llvm_loads_only_the_taken_lanes_like_ireval():
    root, A, B = _guarded_root()
    nest = _Nest(root, [A], [B])
    data = np.arange(10, dtype=np.float32)
    outs = {}
    for target in ("ireval", "llvm"):
        out = np.zeros(12, np.float32)
        build(nest, [A, B], target=target)(data, out)
        outs[target] = out
    assert outs["llvm"].tolist() == outs["ireval"].tolist() == list(range(10)) + [-1.0, -1.0]


@pytest.mark.parametrize("let_inside", [False, True])
def test_vector_lets_outside_and_inside_the_per_lane_code(let_inside):
    """A vector let bound outside is read whole and its lanes extracted; one inside gets a
    scalar variable per lane."""
    n, w = 8, 4
    A, B = Buffer("A", (n,), int32), Buffer("B", (n,), int32)
    io, v = Var("io"), Var("v", int32.with_lanes(w))
    idx = Ramp(io * w, 1, w)
    two = idx * Broadcast(IntImm(2, int32), w)
    minus1 = Broadcast(IntImm(-1, int32), w)
    if let_inside:
        val = IfThenElse(two < Broadcast(IntImm(n, int32), w), Let(v, two, Load(A, (v,))), minus1)
    else:
        val = Let(v, two, IfThenElse(v < Broadcast(IntImm(n, int32), w), Load(A, (v,)), minus1))
    root = For(io, 0, 2, Block([Store(B, (idx,), val)]))
    low = str(legalize_vectors(None, root))
    assert ("if_then_else(io * 4 * 2 < 8, let v = io * 4 * 2 in A[v], -1)" in low) if let_inside else \
        ("in make_vector(if_then_else(extract_lane(v, 0) < 8, A[extract_lane(v, 0)], -1)" in low)
    nest = _Nest(root, [A], [B])
    data = np.arange(n, dtype=np.int32) * 10
    outs = {}
    for target in ("ireval", "llvm"):
        out = np.zeros(n, np.int32)
        build(nest, [A, B], target=target)(data, out)
        outs[target] = out.tolist()
    assert outs["llvm"] == outs["ireval"] == [0, 20, 40, 60, -1, -1, -1, -1]


def test_llvm_printer_refuses_an_unlegalized_vector_if_then_else():
    """A vector ``if_then_else`` that loads reaches the LLVM printer only as a masked load
    (consecutive elements, a constant elsewhere); a gather under a vector condition is
    refused there: ``legalize_vectors`` computes it lane by lane."""
    A, B = Buffer("A", (30,), float32), Buffer("B", (12,), float32)
    io = Var("io")
    idx = Ramp(io * 4, 1, 4)
    gather = IfThenElse(idx < Broadcast(IntImm(10, int32), 4), Load(A, (Ramp(io * 8, 2, 4),)),
                        Broadcast(FloatImm(-1.0, float32), 4))
    root = For(io, 0, 3, Block([Store(B, (idx,), gather)]))
    nest = _Nest(root, [A], [B])
    with pytest.raises(BuildError, match="legalize_for_target"):
        emit_module("te_B", root, make_params(nest, [A, B]), [], EmitOptions())


def test_a_masked_load_stays_whole_for_llvm():
    """``legalize_vectors(..., masked_loads=True)`` (the LLVM pipeline) keeps
    ``if_then_else(mask, A[ramp], c)``: one ``llvm.masked.load``, reading the mask's lanes."""
    root, A, B = _guarded_root()
    assert str(legalize_vectors(None, root, masked_loads=True)) == str(root)
    nest = _Nest(root, [A], [B])
    assert "llvm.masked.load.v4f32" in str(emit_module("te_B", root, make_params(nest, [A, B]), [], EmitOptions()))


def test_masked_lanes_of_a_private_buffer_keep_their_values():
    """A guarded vector loop storing to a buffer the kernel allocates runs its partial vector as
    masked vector code (``masked_lanes``): the lanes outside the guard keep what the buffer
    held (``select``), which the full read of the buffer after it sees. n = 0..8 over 8 lanes."""
    n = Var("n")
    L, B = Buffer("L", (8,), float32), Buffer("B", (8,), float32)
    i, j, k = Var("i"), Var("j"), Var("k")
    root = Block([
        Allocate(L),
        For(i, 0, 8, Block([Store(L, (i,), Cast(float32, i) + 1.0)]), kind=ForKind.VECTORIZED),
        For(j, 0, 8, Block([Cond(j < n, Block([Store(L, (j,), Load(L, (j,)) * 10.0)]))]), kind=ForKind.VECTORIZED),
        For(k, 0, 8, Block([Store(B, (k,), Load(L, (k,)))])),
        Free(L)])
    nest = _Nest(root, [], [B], [L])
    kernel = build(nest, [B, n], target="llvm")
    for size in range(9):
        b = np.full(8, np.nan, np.float32)
        kernel(b, size)
        want = np.arange(1, 9, dtype=np.float32)
        want[:size] *= 10
        np.testing.assert_array_equal(b, want)
    text = str(run_passes(nest, passes=TARGET_PASSES["llvm"]))
    assert "L[ramp(0, 1, 8)] = select(ramp(0, 1, 8) < broadcast(n, 8), L[ramp(0, 1, 8)] * broadcast(10.0f, 8), " \
        "L[ramp(0, 1, 8)]);" in text, text


def test_make_vector_and_extract_lane_nodes():
    i = Var("i")
    r = Ramp(i, 3, 4)
    assert str(ExtractLane(r, 2)) == "extract_lane(ramp(i, 3, 4), 2)"
    assert structural_key(ExtractLane(r, 1)) != structural_key(ExtractLane(r, 2))
    mv = MakeVector([lane_of(r, k) for k in range(4)])
    assert mv.dtype == int32.with_lanes(4) and str(lane_of(mv, 3)) == "i + 3 * 3"
    assert str(simplify(lane_of(r, 3))) == str(simplify(ExtractLane(r, 3))) == "i + 9"
    assert str(simplify(ExtractLane(mv, 1))) == "i + 3"
    with pytest.raises(TypeError, match="MakeVector needs"):
        MakeVector([i])
    with pytest.raises(TypeError, match="ExtractLane needs"):
        ExtractLane(r, 4)
    with pytest.raises(AttributeError, match="immutable"):
        mv.values = ()


def test_lane_of_a_vector_element_buffer_reads_only_that_lanes_element():
    """``A`` holds 3 float32x4 elements; the second iteration's lanes 4..7 (element 3) are
    outside it and their guard is false, so only element 2 may be read."""
    A, B = Buffer("A", (3,), "float32x4"), Buffer("B", (4,), "float32x4")
    io = Var("io")
    elems = Ramp(io * 2, 1, 2)
    inside = Ramp(io * 8, 1, 8) < Broadcast(IntImm(12, int32), 8)
    val = IfThenElse(inside, Load(A, (elems,)), Broadcast(FloatImm(-1.0, float32), 8))
    root = For(io, 0, 2, Block([Store(B, (elems,), val)]))
    assert "extract_lane(A[io * 2 + 1 * 1], 3)" in str(legalize_vectors(None, root))
    nest = _Nest(root, [A], [B])
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    outs = {}
    for target in ("ireval", "llvm"):
        out = np.zeros((4, 4), np.float32)
        build(nest, [A, B], target=target)(data, out)
        outs[target] = out.ravel().tolist()
    assert outs["llvm"] == outs["ireval"] == list(range(12)) + [-1.0] * 4
