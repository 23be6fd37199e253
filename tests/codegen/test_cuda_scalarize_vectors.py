"""scalarize_vectors (TARGET_PASSES["cuda"]): the value of every vector store and vector let
statement becomes a make_vector of scalar lanes before the CUDA printer, which then prints each
node whole (no lane argument). Golden prints of the pass, and the generated CUDA C run through
the host emulation (codegen.cuda.emulate) against IREval on the per-lane cases: guarded
lanes, vector lets outside and inside the per-lane code, vector elements, stores lane by lane."""
from __future__ import annotations

import io

import numpy as np
import pytest

from codegen import build
from codegen.cuda import emit_cuda, nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from codegen.kernel import BuildError, make_params
from loopnest.legalize_vectors import scalarize_vectors
from loopnest.passes import TARGET_PASSES, legalize_for_target, run_passes
from loopnest.stmt import Block, For, LetStmt, Store
from te import Broadcast, Buffer, FloatImm, IfThenElse, IntImm, Let, Load, MakeVector, Ramp, Var, float32, int32
from tests.loopnest.nests import PreparedNest as _Nest

requires_emu = pytest.mark.skipif(not (nvcc_available() and host_compiler() is not None),
                                  reason="g++ or the CUDA headers not found")


def _cuda_and_ireval(nest, args, inputs, out_shape, dtype):
    """Outputs of the CUDA C (host emulation) and of IREval, and the CUDA source."""
    k = build(nest, args, target="cuda")
    outs = []
    for run in (lambda *a: run_on_host(k, *a), build(nest, args, target="ireval")):
        out = np.zeros(out_shape, dtype)
        run(*[np.copy(x) for x in inputs], out)
        outs.append(out.ravel().tolist())
    return outs[0], outs[1], k.source


def test_vector_store_value_becomes_lanes_with_ramp_loads_kept_whole():
    A, B = Buffer("A", (8,), float32), Buffer("B", (8,), float32)
    idx = Ramp(Var("i") * 2, 1, 2)
    s = scalarize_vectors(None, Store(B, [idx], A[idx] * Broadcast(FloatImm(2.0, float32), 2)))
    assert str(s) == ("B[ramp(i * 2, 1, 2)] = make_vector(extract_lane(A[ramp(i * 2, 1, 2)], 0) * 2.0f, "
                      "extract_lane(A[ramp(i * 2, 1, 2)], 1) * 2.0f);")
    lanes = s.value.values
    assert lanes[0].a.value is lanes[1].a.value          # one load node: the target may read it whole
    scalar = Store(B, [IntImm(0, int32)], A[IntImm(1, int32)])
    assert scalarize_vectors(None, scalar) is scalar


def test_the_pass_runs_for_cuda_after_legalize_vectors_and_shows_in_the_dumps():
    names = [n for n, *_ in TARGET_PASSES["cuda"]]
    assert names[-5:] == ["legalize_vectors", "scalarize_vectors", "short_circuit", "expand_float_min_max", "verify"]
    A, B = Buffer("A", (8,), float32), Buffer("B", (8,), float32)
    idx = Ramp(Var("i") * 2, 1, 2)
    root = For(Var("i"), 0, 4, Block([Store(B, [idx], A[idx])]))
    out = io.StringIO()
    run_passes(_Nest(root, [A], [B]), dump=True, out=out, passes=[("scalarize_vectors", scalarize_vectors)])
    assert "// ---- after scalarize_vectors ----" in out.getvalue() and "make_vector(extract_lane(" in out.getvalue()


def test_cuda_printer_refuses_an_unscalarized_vector_store():
    A, B = Buffer("A", (8,), float32), Buffer("B", (8,), float32)
    i = Var("i")
    idx = Ramp(i * 2, 1, 2)
    nest = _Nest(For(i, 0, 4, Block([Store(B, [idx], A[idx])])), [A], [B])
    with pytest.raises(BuildError, match="unscalarized"):
        emit_cuda(nest, make_params(nest, [A, B]), "copy")
    src = emit_cuda(legalize_for_target(nest, "cuda"), make_params(nest, [A, B]), "copy").source
    # scalarized, the store is a copy of whole float2s
    assert "*reinterpret_cast<float2*>(&b_B[(v_i * 2)]) = *reinterpret_cast<const float2*>(&b_A[(v_i * 2)]);" in src


@requires_emu
def test_guarded_lanes_load_only_when_taken_like_ireval():
    n, w = 10, 4
    A, B = Buffer("A", (n,), float32), Buffer("B", (12,), float32)
    io_ = Var("io")
    idx = Ramp(io_ * w, 1, w)
    val = IfThenElse(idx < Broadcast(IntImm(n, int32), w), Load(A, (idx,)), Broadcast(FloatImm(-1.0, float32), w))
    nest = _Nest(For(io_, 0, 3, Block([Store(B, (idx,), val)])), [A], [B])
    got, want, src = _cuda_and_ireval(nest, [A, B], [np.arange(n, dtype=np.float32)], 12, np.float32)
    assert got == want == list(range(10)) + [-1.0, -1.0]
    assert "? b_A[" in src                                   # each lane loads under its own condition


@requires_emu
@pytest.mark.parametrize("where", ["statement", "outside", "inside"])
def test_vector_lets_like_ireval(where):
    """A vector let statement is an array read lane by lane; a vector let expression outside
    the per-lane code too; one inside gets a scalar variable per lane."""
    n, w = 8, 4
    A, B = Buffer("A", (n,), int32), Buffer("B", (n,), int32)
    io_, v = Var("io"), Var("v", int32.with_lanes(w))
    idx = Ramp(io_ * w, 1, w)
    two = idx * Broadcast(IntImm(2, int32), w)
    minus1 = Broadcast(IntImm(-1, int32), w)
    bound = Broadcast(IntImm(n, int32), w)
    if where == "inside":
        body = Store(B, (idx,), IfThenElse(two < bound, Let(v, two, Load(A, (v,))), minus1))
    elif where == "outside":
        body = Store(B, (idx,), Let(v, two, IfThenElse(v < bound, Load(A, (v,)), minus1)))
    else:
        body = LetStmt(v, two, Store(B, (idx,), IfThenElse(v < bound, Load(A, (v,)), minus1)))
    nest = _Nest(For(io_, 0, 2, Block([body])), [A], [B])
    got, want, src = _cuda_and_ireval(nest, [A, B], [np.arange(n, dtype=np.int32) * 10], n, np.int32)
    assert got == want == [0, 20, 40, 60, -1, -1, -1, -1]
    if where == "statement":
        assert "int v_v[4] = {" in src and "v_v[3]" in src


@requires_emu
def test_vector_element_lanes_and_a_store_lane_by_lane_like_ireval():
    """Lanes 4..7 of the second iteration fall in element 3, outside ``A``: only element 2 is
    read. ``C`` is stored with stride 2 (no whole-vector store): one store per lane."""
    A, B = Buffer("A", (3,), "float32x4"), Buffer("B", (4,), "float32x4")
    C = Buffer("C", (16,), float32)
    io_ = Var("io")
    elems = Ramp(io_ * 2, 1, 2)
    inside = Ramp(io_ * 8, 1, 8) < Broadcast(IntImm(12, int32), 8)
    val = IfThenElse(inside, Load(A, (elems,)), Broadcast(FloatImm(-1.0, float32), 8))
    strided = Ramp(io_ * 8, 2, 4)
    cval = MakeVector([FloatImm(float(k), float32) for k in range(4)]) + Broadcast(FloatImm(0.5, float32), 4)
    nest = _Nest(For(io_, 0, 2, Block([Store(B, (elems,), val), Store(C, (strided,), cval)])), [A], [B, C])
    k = build(nest, [A, B, C], target="cuda")
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    outs = {}
    for name, run in (("cuda", lambda *a: run_on_host(k, *a)), ("ireval", build(nest, [A, B, C], target="ireval"))):
        b, c = np.zeros((4, 4), np.float32), np.zeros(16, np.float32)
        run(np.copy(data), b, c)
        outs[name] = (b.ravel().tolist(), c.tolist())
    assert outs["cuda"] == outs["ireval"]
    assert outs["cuda"][0] == list(range(12)) + [-1.0] * 4
    assert outs["cuda"][1][::2] == [0.5, 1.5, 2.5, 3.5] * 2
    assert "b_C[((v_io * 8) + (int)(3) * 2)] = tc_v" in k.source
