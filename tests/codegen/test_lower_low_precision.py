"""lower_low_precision: float16 / bfloat16 / float8 arithmetic computed in float32 between casts,
once for the compiled targets, and the printers only print it.

Golden prints of the pass, and IREval (which implements the rounding itself, on the unlowered
nodes), LLVM and the CUDA host emulation bit for bit on every arithmetic operation, overflow
to infinity (saturation for float8) and rounding ties included (NaN results: bit for bit on
LLVM; on CUDA, whose conversions give the canonical NaN, NaN for NaN)."""
from __future__ import annotations

import numpy as np
import pytest

import te
from codegen import build
from codegen.cuda import nvcc_available
from codegen.cuda.emulate import host_compiler, run_on_host
from codegen.kernel import BuildError, make_params
from loopnest import LoopNest
from loopnest.legalize import lower_low_precision
from loopnest.passes import TARGET_PASSES, legalize_for_target
from te import Buffer, Compute, cast, float32, floordiv, floormod
from te.lowprec import FLOAT_FORMATS, convert, numpy_dtype

HAVE_EMU = host_compiler() is not None and nvcc_available()   # the emulation needs the CUDA headers
TARGETS = ["llvm"] + (["cuda"] if HAVE_EMU else [])
FORMATS = ["float16", "bfloat16", "float8_e4m3", "float8_e5m2"]


def _lowered(fn, dtype: str) -> str:
    A, B = Buffer("A", (4,), dtype), Buffer("B", (4,), dtype)
    nest = LoopNest([Compute("C", (4,), lambda i: fn(A[i], B[i]))]).prepare_for_codegen()
    return str(lower_low_precision(nest, nest.root))


# ------------------------------------------------------------------------------------
# golden prints
# ------------------------------------------------------------------------------------
def test_float16_arithmetic_is_float32_between_casts():
    assert _lowered(lambda a, b: a * b + 1.5, "float16") == """\
for (int i = 0; i < 4; i++) {
  C[i] = float16(float32(float16(float32(A[i]) * float32(B[i]))) + 1.5f);
}"""


def test_bfloat16_floormod_and_intrinsics_round_every_step():
    assert _lowered(lambda a, b: floormod(a, b), "bfloat16") == """\
for (int i = 0; i < 4; i++) {
  C[i] = bfloat16(float32(A[i]) - float32(bfloat16(float32(bfloat16(floor(float32(bfloat16(float32(A[i]) / \
float32(B[i])))))) * float32(B[i]))));
}"""
    assert _lowered(lambda a, b: te.sqrt(a) - te.maximum(a, b), "bfloat16") == """\
for (int i = 0; i < 4; i++) {
  C[i] = bfloat16(float32(bfloat16(sqrt(float32(A[i])))) - float32(max(A[i], B[i])));
}"""


def test_exact_operations_and_other_dtypes_are_left_alone():
    A = Buffer("A", (4,), "float16")
    X = Buffer("X", (4,), "float32")
    nest = LoopNest([Compute("C", (4,), lambda i: cast(te.maximum(A[i], A[3 - i]) < A[i], "float16")),
                     Compute("D", (4,), lambda i: X[i] * X[i] + 1.0)]).prepare_for_codegen()
    assert lower_low_precision(nest, nest.root) is nest.root


def test_the_pass_runs_for_the_compiled_targets_and_shows_in_the_dumps(monkeypatch, capsys):
    for target in ("llvm", "cuda"):
        names = [n for n, *_ in TARGET_PASSES[target]]
        assert "lower_low_precision" in names and names[-1] == "verify"
    assert TARGET_PASSES["ireval"] == []      # IREval rounds itself: it is what the pass is checked against
    monkeypatch.setenv("LOOPNEST_DUMP_PASSES", "1")
    A = Buffer("A", (4,), "float16")
    nest = LoopNest([Compute("C", (4,), lambda i: A[i] + A[i])]).prepare_for_codegen()
    legalize_for_target(nest, "llvm")
    err = capsys.readouterr().err
    assert "// ---- after lower_low_precision ----\nfor (int i = 0; i < 4; i++) {\n" \
           "  C[i] = float16(float32(A[i]) + float32(A[i]));" in err


@pytest.mark.parametrize("target", ["llvm", "cuda"])
def test_printers_refuse_unlowered_low_precision_arithmetic(target):
    A = Buffer("A", (4,), "bfloat16")
    C = Compute("C", (4,), lambda i: A[i] * A[i])
    nest = LoopNest([C]).prepare_for_codegen()
    params = make_params(nest, [A, C])
    with pytest.raises(BuildError, match="lower_low_precision"):
        if target == "llvm":       # the printer itself: build_llvm legalizes a prepared nest first
            from codegen.llvm.emit import EmitOptions, emit_module
            emit_module("te_C", nest.root, [p for p in params if p.is_buffer], [], EmitOptions())
        else:
            from codegen.cuda.emit import emit_cuda
            emit_cuda(nest, params, "k")


# ------------------------------------------------------------------------------------
# every backend rounds as IREval does
# ------------------------------------------------------------------------------------
def _edge_inputs(fmt: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Operands (float32 values of ``fmt``): ties of + (to even, both ways), overflow, zeros of
    both signs, division by zero, NaN, subnormals, then random values."""
    f = FLOAT_FORMATS[fmt]
    ulp = 2.0 ** -f.mantissa_bits
    big, tiny = f.max_normal, 2.0 ** (1 - (2 ** (f.exponent_bits - 1) - 1) - f.mantissa_bits)
    a = [1.0, 1.0 + ulp, big, big, -big, 0.0, -0.0, 1.0, np.nan, tiny, 3.0, -3.0, 7.0, 0.0, 1.0, -1.0]
    b = [ulp / 2, ulp / 2, big, 1.0, -big, -0.0, 0.0, 0.0, 1.0, tiny, 2.0, 2.0, -2.0, 0.0, -0.0, 3.0]
    rng = np.random.default_rng(11)
    r = rng.standard_normal((3, 240)) * np.array([[4.0], [2.0], [8.0]])
    cols = [np.concatenate([np.array(x), y]) for x, y in zip((a, b, a[::-1]), r)]
    return tuple(convert(convert(c.astype(np.float32), "float32", fmt), fmt, "float32") for c in cols)


OPS = {
    "add": lambda a, b, c: a + b, "sub": lambda a, b, c: a - b, "mul": lambda a, b, c: a * b,
    "div": lambda a, b, c: a / b, "floordiv": lambda a, b, c: floordiv(a, b),
    "floormod": lambda a, b, c: floormod(a, b), "mul_add": lambda a, b, c: a * b + c,
    "chain": lambda a, b, c: (a - c) * (b + 0.5) / (c + 4.0),
    "sqrt_abs": lambda a, b, c: te.sqrt(te.abs(a)), "floor": lambda a, b, c: te.floor(a * 0.5),
    "round": lambda a, b, c: te.round(a * 0.5), "max": lambda a, b, c: te.maximum(a, b) + c,
    "to_f32": lambda a, b, c: cast(cast(a, float32) * cast(b, float32), a.dtype),
}


def _run_all(target: str, fmt: str, inputs, lanes: int = 0) -> dict[str, np.ndarray]:
    """Every OPS output of the inputs, compiled for ``target``; ``lanes``: vectorized by that many."""
    n = len(inputs[0])
    bufs = [Buffer(name, (n,), fmt) for name in "ABC"]
    outs = [Compute(f"O_{name}", (n,), (lambda f: lambda i: f(*[x[i] for x in bufs]))(fn))
            for name, fn in OPS.items()]
    nest = LoopNest(outs)
    for o in outs if lanes else ():
        _, inner, _ = nest.split_with_tail(nest.get_loops_for(o)[0], lanes)
        nest.vectorize(inner)
    k = build(nest, bufs + outs, target=target)
    nd = numpy_dtype(fmt)
    args = [convert(x, "float32", fmt).astype(nd) for x in inputs]
    res = [np.zeros(n, nd) for _ in outs]
    with np.errstate(all="ignore"):
        if target == "cuda":
            run_on_host(k, *args, *res)
        else:
            k(*args, *res)
    return {name: r for name, r in zip(OPS, res)}


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16 if x.dtype.itemsize == 2 else np.uint8)


@pytest.mark.parametrize("target", TARGETS + ["llvm_vectorized"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_low_precision_arithmetic_is_bit_identical_to_ireval(target, fmt):
    inputs = _edge_inputs(fmt)
    want = _run_all("ireval", fmt, inputs)
    got = _run_all(target.split("_")[0], fmt, inputs, lanes=8 if target.endswith("vectorized") else 0)
    for name in OPS:
        w, g = _bits(want[name]), _bits(got[name])
        differ = w != g
        if target == "cuda":    # CUDA's conversions give the canonical NaN: only NaN-ness is compared
            differ &= ~(np.isnan(want[name].astype(np.float32)) & np.isnan(got[name].astype(np.float32)))
        bad = np.flatnonzero(differ)
        assert not bad.size, (f"{name} on {fmt}: ireval {want[name][bad[:4]]} {target} {got[name][bad[:4]]} "
                              f"for A={inputs[0][bad[:4]]} B={inputs[1][bad[:4]]} C={inputs[2][bad[:4]]}")


@pytest.mark.parametrize("fmt", FORMATS)
def test_ties_round_to_even_and_overflow_saturates_or_goes_to_infinity(fmt):
    inputs = _edge_inputs(fmt)
    got = _run_all("llvm", fmt, inputs)["add"][:5].astype(np.float64)
    ulp = 2.0 ** -FLOAT_FORMATS[fmt].mantissa_bits
    big = FLOAT_FORMATS[fmt].max_normal
    over = big if fmt.startswith("float8") else np.inf
    assert got.tolist() == [1.0, 1.0 + 2 * ulp, over, big, -over]


def test_lowered_nest_means_what_ireval_computes_on_the_unlowered_one():
    """IREval on the lowered nest (the pass's meaning, as the IR defines it) equals IREval on the
    original nodes: the pass and the interpreter's own rounding agree."""
    for fmt in FORMATS:
        inputs = _edge_inputs(fmt)
        n = len(inputs[0])
        bufs = [Buffer(name, (n,), fmt) for name in "ABC"]
        outs = [Compute(f"O_{name}", (n,), (lambda f: lambda i: f(*[x[i] for x in bufs]))(fn))
                for name, fn in OPS.items()]
        nest = LoopNest(outs).prepare_for_codegen()
        lowered = nest.copy()
        lowered.root = lower_low_precision(nest, nest.root)
        nd = numpy_dtype(fmt)
        args = [convert(x, "float32", fmt).astype(nd) for x in inputs]
        results = []
        for nst in (nest, lowered):
            res = [np.zeros(n, nd) for _ in outs]
            with np.errstate(all="ignore"):
                build(nst, bufs + outs, target="ireval")(*args, *res)
            results.append(res)
        for name, w, g in zip(OPS, *results):
            assert np.array_equal(_bits(w), _bits(g)), f"{name} on {fmt}"


def test_a_product_rounded_to_a_narrower_format_is_not_fused_into_the_add_using_it():
    """fp_contract fuses a float multiply into the add that uses it; a rounding in between (to
    float16, or float64 -> float32) is part of the meaning and stays (LLVM narrows such a
    multiply and would fuse it otherwise)."""
    n = 512
    rng = np.random.default_rng(5)
    a, b, c = (rng.standard_normal(n).astype(np.float32) * 10 for _ in range(3))
    A, B, C = (Buffer(name, (n,), "float32") for name in "ABC")
    f64 = Compute("F64", (n,), lambda i: cast(cast(A[i], "float64") * cast(B[i], "float64"), float32) + C[i])
    f16 = Compute("F16", (n,), lambda i: cast(cast(A[i], "float16") * cast(B[i], "float16"), float32) + C[i])
    outs = {}
    for target in ("ireval", "llvm"):
        res = [np.zeros(n, np.float32), np.zeros(n, np.float32)]
        build(LoopNest([f64, f16]), [A, B, C, f64, f16], target=target)(a, b, c, *res)
        outs[target] = res
    for want, got in zip(outs["ireval"], outs["llvm"]):
        assert np.array_equal(want.view(np.uint32), got.view(np.uint32))


@pytest.mark.parametrize("target", TARGETS)
def test_bitcast_to_and_from_float16_is_not_rounded_through_float32(target):
    A, H = Buffer("A", (4,), "int16"), Buffer("H", (4,), "float16")
    B = Compute("B", (4,), lambda i: te.bitcast(A[i], "float16") * H[i])
    C = Compute("C", (4,), lambda i: te.bitcast(H[i] * H[i], "int16"))
    a = np.array([0x3C00, 0x4000, 0xBC00, 0x7C00], np.uint16).view(np.int16)
    h = np.array([1.5, 2, 3, -1], np.float16)
    b, c = np.zeros(4, np.float16), np.zeros(4, np.int16)
    k = build(LoopNest([B, C]), [A, H, B, C], target=target)
    (run_on_host if target == "cuda" else lambda k, *xs: k(*xs))(k, a, h, b, c)
    assert np.array_equal(b, a.view(np.float16) * h) and np.array_equal(c, (h * h).view(np.int16))
