"""The semantic decisions of the backends made by shared lowering passes (``loopnest.legalize``),
never by a printer: golden before/after prints of each pass, its place in the target's pass
list and in the dumps, the printer only reading what the pass wrote, and the compiled code
agreeing with IREval.

* ``unsigned_division``: which signed divisions LLVM does unsigned;
* ``short_circuit``: which scalar ``&&`` / ``||`` evaluate their right side lazily (LLVM, CUDA);
* ``expand_float_min_max``: the NaN and signed-zero rule of float maximum / minimum (CUDA).
"""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from codegen.kernel import BuildError, make_params
from codegen.llvm.emit import EmitOptions, emit_module
from loopnest import LoopNest
from loopnest.legalize import expand_float_min_max, short_circuit, unsigned_division
from loopnest.passes import TARGET_PASSES, legalize_for_target, run_passes
from loopnest.stmt import Block, For, Store
from te import (Buffer, Compute, IntImm, Load, Var, cast, floordiv, floormod, if_then_else, int32, logical_and,
                logical_or, maximum, minimum, select, uint32)
from tests.loopnest.nests import PreparedNest as _Nest


def _names(target):
    return [name for name, *_ in TARGET_PASSES[target]]


HAVE_EMU = host_compiler() is not None and nvcc_available()   # the emulation needs the CUDA headers
TARGETS = ["llvm"] + (["cuda"] if HAVE_EMU else [])


def _llvm_source(nest, args, drop=()):
    """The unoptimised LLVM IR of the prepared ``nest`` after the LLVM passes except ``drop``."""
    passes = [p for p in TARGET_PASSES["llvm"] if p[0] not in drop]
    lowered = nest.copy()
    lowered.root = run_passes(nest, passes=passes)
    return str(emit_module("k", lowered.root, make_params(lowered, args), [], EmitOptions()))


# ------------------------------------------------------------------------------------
# unsigned_division
# ------------------------------------------------------------------------------------
def test_unsigned_division_golden():
    A = Buffer("A", (64,), int32)
    n = Var("n")
    B = Compute("B", (8, 8), lambda i, j: A[floordiv(i * 8 + j, 3)] + A[i / 2] + floormod(j, 4) + j % 3
                + floordiv(floordiv(i, 2), 2) + (j - 1) / 2 + floordiv(i, n) + i / (-2) + A[j] / 4)
    nest = LoopNest([B]).prepare_for_codegen()
    assert str(nest.root) == """\
for (int i = 0; i < 8; i++) {
  for (int j = 0; j < 8; j++) {
    B[i * 8 + j] = A[floordiv(i * 8 + j, 3)] + A[i / 2] + floormod(j, 4) + j % 3 + floordiv(i, 4) + (j - 1) / 2 + \
floordiv(i, n) + i / (-2) + A[j] / 4;
  }
}"""
    # i * 8 + j may wrap below zero, j - 1 is negative, n and -2 are not positive constants,
    # and A[j] has any sign: those stay signed
    assert str(unsigned_division(nest, nest.root)) == """\
for (int i = 0; i < 8; i++) {
  for (int j = 0; j < 8; j++) {
    B[i * 8 + j] = A[floordiv(i * 8 + j, 3)] + A[int32(uint32(i) / uint32(2))] + int32(uint32(j) % uint32(4)) + \
int32(uint32(j) % uint32(3)) + int32(uint32(i) / uint32(4)) + (j - 1) / 2 + floordiv(i, n) + i / (-2) + A[j] / 4;
  }
}"""


def test_unsigned_division_knows_only_loops_counting_up_from_a_nonnegative_start():
    A, B = Buffer("A", (16,), int32), Buffer("B", (16,), int32)
    i, j, k = Var("i"), Var("j"), Var("k")
    inner = For(j, i - 4, i, Block([Store(B, (i,), floordiv(j, 2) + Load(A, (i,)))]))
    third = For(k, floordiv(i, 2), i, Block([Store(B, (k,), k % 4)]))
    root = For(i, 4, 16, Block([inner, third]))
    assert str(unsigned_division(None, root)) == """\
for (int i = 4; i < 16; i++) {
  for (int j = i - 4; j < i; j++) {
    B[i] = floordiv(j, 2) + A[i];
  }
  for (int k = int32(uint32(i) / uint32(2)); k < i; k++) {
    B[k] = int32(uint32(k) % uint32(4));
  }
}"""


def test_unsigned_division_leaves_unsigned_and_vector_divisions_alone():
    A = Buffer("A", (8,), uint32)
    B = Compute("B", (8,), lambda i: A[i] / 4 + cast(i, uint32) % 3)
    nest = LoopNest([B]).prepare_for_codegen()
    assert unsigned_division(nest, nest.root) is nest.root
    V = Compute("V", (16,), lambda i: floordiv(i, 2) + cast(A[i % 8], int32))
    vn = LoopNest([V])
    _, inner, _ = vn.split_with_tail(vn.get_loops_for(V)[0], 4)
    vn.vectorize(inner)
    vn = vn.prepare_for_codegen()
    lowered = str(unsigned_division(vn, vn.root))
    assert "ramp(" in lowered and "uint32(ramp" not in lowered


def test_unsigned_division_runs_for_llvm_and_shows_in_the_dumps(capsys):
    assert _names("llvm")[-2:] == ["unsigned_division", "verify"]
    assert "unsigned_division" not in _names("cuda") and not TARGET_PASSES["ireval"]
    A = Buffer("A", (8,), "float32")
    nest = LoopNest([Compute("B", (16,), lambda i: A[floordiv(i, 2)])]).prepare_for_codegen()
    legalize_for_target(nest, "llvm", dump=True)
    err = capsys.readouterr().err
    after = err.split("// ---- after unsigned_division ----")[1]
    assert "A[floordiv(i, 2)]" in err.split("// ---- after unsigned_division ----")[0]
    assert "B[i] = A[int32(uint32(i) / uint32(2))];" in after


def test_the_llvm_printer_only_reads_the_mark():
    """Without the pass the printer divides signed (it proves nothing itself); with it, unsigned."""
    A = Buffer("A", (8,), "float32")
    B = Compute("B", (16,), lambda i: A[floordiv(i, 2)] + A[i % 8])
    nest = LoopNest([B]).prepare_for_codegen()
    with_pass = _llvm_source(nest, [A, B])
    without = _llvm_source(nest, [A, B], drop=("unsigned_division",))
    assert "udiv i32" in with_pass and "urem i32" in with_pass
    assert "ashr" not in with_pass and "srem" not in with_pass
    assert "ashr i32" in without and "srem i32" in without and "urem" not in without


def _random_int32(rng, n):
    return rng.integers(-2 ** 31, 2 ** 31, size=n, dtype=np.int64).astype(np.int32)


@pytest.mark.parametrize("parallel", [False, True])
def test_divisions_agree_with_ireval(parallel):
    n = 64
    A = Buffer("A", (n,), int32)
    B = Compute("B", (n,), lambda i: A[floordiv(i, 2)] / 3 + floormod(A[i], 7) + floordiv(i, 3) * 5 + i % 6
                + floordiv(i - 40, 4) + (i - 40) % 8 + floordiv(A[i % 8], 4) + A[floordiv(i, 4)] % 5)
    nest = LoopNest([B])
    if parallel:
        outer, _, _ = nest.split_with_tail(nest.get_loops_for(B)[0], 8)
        nest.parallelize(outer)
    data = _random_int32(np.random.default_rng(0), n)
    data[:4] = [-2 ** 31, -1, 0, 2 ** 31 - 1]
    outs = {}
    for target in ("ireval", "llvm"):
        out = np.zeros(n, np.int32)
        build(nest, [A, B], target=target)(data, out)
        outs[target] = out
    np.testing.assert_array_equal(outs["llvm"], outs["ireval"])


def test_division_in_a_loop_with_a_negative_start_agrees_with_ireval():
    """``j`` runs over negative values: its division and remainder must stay signed."""
    B = Buffer("B", (16,), int32)
    j = Var("j")
    root = For(j, IntImm(-8, int32), IntImm(8, int32),
               Block([Store(B, (j + 8,), floordiv(j, IntImm(4, int32)) * 100 + j % IntImm(3, int32)
                            + j / IntImm(2, int32) * 10)]))
    assert str(unsigned_division(None, root)) == str(root)
    nest = _Nest(root, [], [B])
    outs = {}
    for target in ("ireval", "llvm"):
        out = np.zeros(16, np.int32)
        build(nest, [B], target=target)(out)
        outs[target] = out.tolist()
    js = np.arange(-8, 8)
    expected = (js // 4) * 100 + np.fmod(js, 3) + np.trunc(js / 2).astype(int) * 10
    assert outs["llvm"] == outs["ireval"] == expected.tolist()


# ------------------------------------------------------------------------------------
# short_circuit
# ------------------------------------------------------------------------------------
def test_short_circuit_golden():
    A = Buffer("A", (8,), int32)
    B = Compute("B", (8,), lambda i: select(logical_and(i < 6, A[i] > 0), 1, 0)
                + select(logical_or(i >= 6, A[i] > 1), 2, 0)
                + select(logical_and(A[i] > 2, i < 5), 4, 0))
    nest = LoopNest([B]).prepare_for_codegen()
    # a right side that loads nothing is computed whole (the same value, no branch)
    assert str(short_circuit(nest, nest.root)) == """\
for (int i = 0; i < 8; i++) {
  B[i] = select(if_then_else(i < 6, A[i] > 0, false), 1, 0) + select(if_then_else(i >= 6, true, A[i] > 1), 2, 0) \
+ select(A[i] > 2 && i < 5, 4, 0);
}"""
    assert _names("llvm").index("legalize_vectors") < _names("llvm").index("short_circuit")
    # CUDA: after scalarize_vectors, whose lanes may hold scalar && / ||
    assert _names("cuda").index("scalarize_vectors") < _names("cuda").index("short_circuit")


def test_short_circuit_keeps_a_right_side_that_reads_only_what_the_left_side_read():
    """The divisor test of ``guard_int_division`` reads the divisor on both sides: nothing to
    guard, so no branch."""
    A = Buffer("A", (4,), int32)
    nest = LoopNest([Compute("B", (4,), lambda i: A[i] / A[3 - i])]).prepare_for_codegen()
    lowered = legalize_for_target(nest, "llvm", dump=False)
    assert str(lowered.root) == """\
for (int i = 0; i < 4; i++) {
  B[i] = select(A[3 - i] == 0, 0, select(A[3 - i] == (-1), 0 - A[i], \
A[i] / select(A[3 - i] == 0 || A[3 - i] == (-1), 1, A[3 - i])));
}"""
    i = Var("i")
    # the left side reads A[i] only in one branch of its if_then_else: the right side is guarded
    lazy_left = logical_or(if_then_else(i < 2, Load(A, (i,)) > 0, i > 5), Load(A, (i,)) > 1)
    assert str(short_circuit(None, For(i, 0, 4, Block([Store(A, (i,), select(lazy_left, 1, 0))])))) == """\
for (int i = 0; i < 4; i++) {
  A[i] = select(if_then_else(if_then_else(i < 2, A[i] > 0, i > 5), true, A[i] > 1), 1, 0);
}"""


def test_short_circuit_guards_an_out_of_bounds_load_like_ireval():
    """``i < 4 && A[i] > 0`` over ``i`` in [0, 8) with a 4-element A: the right side is read
    only for i < 4 (a plain ``and`` would read past A's end)."""
    A, B = Buffer("A", (4,), int32), Buffer("B", (8,), int32)
    i = Var("i")
    guard = logical_and(i < 4, Load(A, (i,)) > 0)
    other = logical_or(i >= 4, Load(A, (i,)) > 5)
    root = For(i, 0, 8, Block([Store(B, (i,), select(guard, IntImm(1, int32), IntImm(0, int32))
                                     + select(other, IntImm(2, int32), IntImm(0, int32)))]))
    nest = _Nest(root, [A], [B])
    data = np.array([3, -1, 7, 0], np.int32)
    outs = {}
    for target in ("ireval", "llvm"):
        out = np.zeros(8, np.int32)
        build(nest, [A, B], target=target, bounds_check=False)(data, out)
        outs[target] = out.tolist()
    assert outs["llvm"] == outs["ireval"] == [1, 0, 3, 0, 2, 2, 2, 2]


@pytest.mark.skipif(not HAVE_EMU, reason="host emulation needs g++ and the CUDA headers")
def test_cuda_short_circuit_guards_an_out_of_bounds_load_like_ireval():
    A, B = Buffer("A", (4,), int32), Buffer("B", (8,), int32)
    i = Var("i")
    guard = logical_and(i < 4, Load(A, (i,)) > 0)
    root = For(i, 0, 8, Block([Store(B, (i,), select(guard, IntImm(1, int32), IntImm(0, int32)))]))
    nest = _Nest(root, [A], [B])
    k = build(nest, [A, B], target="cuda", bounds_check=False)
    assert "? (b_A[" in k.source and "&&" not in k.source.split("extern")[-1]
    data = np.array([3, -1, 7, 0], np.int32)
    out, ref = np.zeros(8, np.int32), np.zeros(8, np.int32)
    run_on_host(k, data, out)
    build(nest, [A, B], target="ireval", bounds_check=False)(data, ref)
    assert out.tolist() == ref.tolist() == [1, 0, 1, 0, 0, 0, 0, 0]


def test_llvm_printer_refuses_a_scalar_and_that_loads_without_the_pass():
    A, B = Buffer("A", (4,), int32), Buffer("B", (4,), int32)
    i = Var("i")
    root = For(i, 0, 4, Block([Store(B, (i,), select(logical_and(i < 2, Load(A, (i,)) > 0),
                                                     IntImm(1, int32), IntImm(0, int32)))]))
    nest = _Nest(root, [A], [B])
    with pytest.raises(BuildError, match="short_circuit"):
        emit_module("k", root, make_params(nest, [A, B]), [], EmitOptions())


# ------------------------------------------------------------------------------------
# expand_float_min_max
# ------------------------------------------------------------------------------------


def test_expand_float_min_max_golden():
    A, B = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    C = Compute("C", (4,), lambda i: maximum(A[i], B[i] * 2.0) + minimum(A[i], 1.5) + maximum(A[i], 0.0))
    nest = LoopNest([C]).prepare_for_codegen()
    assert str(nest.root) == """\
for (int i = 0; i < 4; i++) {
  C[i] = max(A[i], B[i] * 2.0f) + min(A[i], 1.5f) + max(A[i], 0.0f);
}"""
    assert str(expand_float_min_max(nest, nest.root)) == """\
for (int i = 0; i < 4; i++) {
  C[i] = (let mx1 = A[i] in let mx2 = B[i] * 2.0f in select(mx1 != mx1 || mx2 != mx2, mx1 + mx2, \
select(mx1 == mx2, select(mx1 == 0.0f, mx1 + mx2, mx1), select(mx1 > mx2, mx1, mx2)))) + \
(let mn3 = A[i] in select(mn3 != mn3, mn3 + 1.5f, select(mn3 < 1.5f, mn3, 1.5f))) + \
(let mx4 = A[i] in select(mx4 != mx4, mx4 + 0.0f, select(mx4 == 0.0f, select(mx4 == 0.0f, mx4 + 0.0f, mx4), \
select(mx4 > 0.0f, mx4, 0.0f))));
}"""


def test_expand_float_min_max_low_precision_picks_operands_without_arithmetic():
    H = Buffer("H", (4,), "float16")
    C = Compute("C", (4,), lambda i: minimum(H[i], H[3 - i]))
    nest = LoopNest([C]).prepare_for_codegen()
    assert str(expand_float_min_max(nest, nest.root)) == """\
for (int i = 0; i < 4; i++) {
  C[i] = let mn1 = H[i] in let mn2 = H[3 - i] in \
select(mn1 < mn2 || mn1 != mn1 || mn1 == mn2 && copysign(1.0f, float32(mn1)) < 0.0f, mn1, mn2);
}"""


def test_expand_float_min_max_leaves_integer_and_bool_min_max():
    A = Buffer("A", (4,), int32)
    nest = LoopNest([Compute("C", (4,), lambda i: maximum(A[i], 3) + minimum(A[i], A[3 - i]))]).prepare_for_codegen()
    assert expand_float_min_max(nest, nest.root) is nest.root


def test_expand_float_min_max_runs_for_cuda_only_and_shows_in_the_dumps(capsys):
    assert "expand_float_min_max" in _names("cuda") and "expand_float_min_max" not in _names("llvm")
    assert _names("cuda").index("scalarize_vectors") < _names("cuda").index("expand_float_min_max")
    A = Buffer("A", (8,), "float32")
    nest = LoopNest([Compute("B", (8,), lambda i: maximum(A[i], A[7 - i]))]).prepare_for_codegen()
    legalize_for_target(nest, "cuda", dump=True)
    after = capsys.readouterr().err.split("// ---- after expand_float_min_max ----")[1]
    assert "let mx1 = A[i] in let mx2 = A[7 - i] in select(mx1 != mx1 || mx2 != mx2" in after


def test_cuda_source_has_no_min_max_helper():
    A = Buffer("A", (8,), "float32")
    B = Compute("B", (8,), lambda i: maximum(A[i], A[7 - i]) + minimum(A[i], 0.5))
    src = build(LoopNest([B]), [A, B], target="cuda").source
    assert "tc_fmax" not in src and "tc_fmin" not in src and "tc_minmax" not in src
    # both lets in one lambda: nested lambdas, one per let, make nvcc branch where it selects
    assert src.count("[&]()") == 2 and "]; const float v_mx2 = b_A[" in src


def test_llvm_keeps_the_maximum_intrinsic_and_vectorises_it():
    """LLVM's ``llvm.maximum`` is the IR's rule exactly: no expansion, and a vectorised loop
    of maxima is vector ``llvm.maximum`` calls."""
    A, B = Buffer("A", (64,), "float32"), Buffer("B", (64,), "float32")
    C = Compute("C", (64,), lambda i: maximum(A[i], B[i]) + minimum(A[i], 0.5))
    nest = LoopNest([C])
    _, inner, _ = nest.split_with_tail(nest.get_loops_for(C)[0], 8)
    nest.vectorize(inner)
    k = build(nest, [A, B, C], target="llvm")
    assert "@llvm.maximum.v8f32" in k.optimized_source and "@llvm.minimum.v8f32" in k.optimized_source


def _ieee(is_max, a, b):
    if np.isnan(a) or np.isnan(b):
        return np.nan
    if a == b:
        neg_a = np.copysign(1.0, a) < 0
        return (b if neg_a else a) if is_max else (a if neg_a else b)
    return max(a, b) if is_max else min(a, b)


def _run(target, fn, inputs, out_dtype):
    n = len(inputs[0][1])
    bufs = [Buffer(f"X{k}", (n,), dt) for k, (dt, _) in enumerate(inputs)]
    out = Compute("Out", (n,), lambda i: fn(*[b[i] for b in bufs]), dtype=out_dtype)
    kernel = build(LoopNest([out]), bufs + [out], target=target)
    res = np.zeros(n, out.dtype.numpy)
    arrays = [a for _, a in inputs]
    if target == "cuda":
        run_on_host(kernel, *arrays, res)
    else:
        kernel(*arrays, res)
    return res


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_min_max_signed_zeros_and_nan_agree_with_ireval(target, dtype):
    from te.dtypes import as_dtype
    npdt = as_dtype(dtype).numpy
    x = np.array([0.0, -0.0, 1.0, np.nan, np.nan, 2.0, -1.0, -0.0, 0.0, 3.0, -5.0], np.float32).astype(npdt)
    y = np.array([-0.0, 0.0, np.nan, 1.0, np.nan, 2.0, -2.0, -0.0, 0.0, -0.0, 7.0], np.float32).astype(npdt)
    for is_max in (True, False):
        f = maximum if is_max else minimum
        # a nested call and a computed operand take the let path
        fn = lambda a, b: f(f(a, b), f(b, a) * 1.0)      # noqa: E731
        got = _run(target, fn, [(dtype, x), (dtype, y)], dtype)
        ref = _run("ireval", fn, [(dtype, x), (dtype, y)], dtype)
        want = [_ieee(is_max, float(a), float(b)) for a, b in zip(x.astype(np.float64), y.astype(np.float64))]
        as_text = lambda vs: [repr(float(v)) for v in vs]      # noqa: E731
        assert as_text(got) == as_text(ref) == as_text(want), (dtype, f.__name__)
