"""auto_schedule on reductions of few terms that read along their last output index (a 1-D
convolution ``C[i] = sum_k S[i + k] * w[k]``, a 3 x 3 box sum): vectorized across their outputs,
tiles of output vectors in registers with the terms added inside (``column_reduction``), rather
than through vector lanes of their few terms; constant and symbolic sizes; each output adds its
terms in the unscheduled program's order (the same bits), on LLVM and IREval."""
import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest, Target
from loopnest.auto.schedule import SHORT_REDUCTION, short_window
from te import Buffer, Reduce, Sum, Var

AVX512 = Target(cpu="avx512", vector_bits=512, vector_registers=32, cores=2)
AVX2 = Target(cpu="avx2", vector_bits=256, vector_registers=16, cores=2)
OUTPUTS = "vectorized across its outputs rather than its few terms"


def _conv1d(n, taps):
    S, w = Buffer("S", (n + taps - 1,), "float32"), Buffer("w", (taps,), "float32")
    return S, w, Reduce("C", (n,), Sum(), lambda i, k: S[i + k] * w[k], (taps,))


def _run(nest, args, inputs, shape, target):
    out = np.zeros(shape, np.float32)
    build(nest, args, target=target)(*inputs, out)
    return out


@pytest.mark.parametrize("n, taps", [(1000, 3), (4096, 31), (100, 64), (37, 5), (5000, 1)])
@pytest.mark.parametrize("cpu", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_a_1d_convolution_is_vectorized_across_its_outputs_with_the_same_bits(n, taps, cpu):
    S, w, C = _conv1d(n, taps)
    rng = np.random.default_rng(n + taps)
    s = (rng.standard_normal(n + taps - 1) * 1e3).astype(np.float32)
    ww = rng.standard_normal(taps).astype(np.float32)
    nest = LoopNest([C])
    report = str(nest.auto_schedule(cpu))
    if taps > 1:
        assert OUTPUTS in report and f"a reduction of {taps} terms" in report, report
    plain = _run(LoopNest([C]), [S, w, C], [s, ww], (n,), "ireval")
    for target in ("llvm", "ireval"):
        got = _run(nest, [S, w, C], [s, ww], (n,), target)
        np.testing.assert_allclose(got, np.correlate(s.astype(np.float64), ww.astype(np.float64), "valid"),
                                   rtol=1e-4, atol=1e-2)
        if target == "ireval":
            assert got.tobytes() == plain.tobytes()


def test_a_3x3_box_sum_is_vectorized_across_its_columns():
    H, W = 40, 70
    X = Buffer("X", (H + 2, W + 2), "float32")
    Y = Reduce("Y", (H, W), Sum(), lambda y, x, ry, rx: X[y + ry, x + rx], (3, 3))
    x = np.random.default_rng(3).standard_normal((H + 2, W + 2)).astype(np.float32)
    nest = LoopNest([Y])
    report = str(nest.auto_schedule(AVX512))
    assert "a reduction of 9 terms" in report, report
    want = sum(x[ry:ry + H, rx:rx + W].astype(np.float64) for ry in range(3) for rx in range(3))
    np.testing.assert_allclose(_run(nest, [X, Y], [x], (H, W), "llvm"), want, rtol=1e-4, atol=1e-4)


def test_a_symbolic_length_is_supported():
    N = Var("N")
    S, w = Buffer("S", (N + 6,), "float32"), Buffer("w", (7,), "float32")
    C = Reduce("C", (N,), Sum(), lambda i, k: S[i + k] * w[k], (7,))
    nest = LoopNest([C])
    assert OUTPUTS in str(nest.auto_schedule(AVX512))
    kernel = build(nest, [S, w, C, N], target="llvm")
    for n in (1, 15, 16, 100, 1001):
        s = np.random.default_rng(n).standard_normal(n + 6).astype(np.float32)
        ww = np.arange(7, dtype=np.float32)
        out = np.zeros(n, np.float32)
        kernel(s, ww, out, n)
        np.testing.assert_allclose(out, np.correlate(s, ww, "valid"), rtol=1e-4, atol=1e-4)


def test_long_or_row_wise_reductions_keep_their_vector_lanes():
    assert not short_window(_conv1d(1000, SHORT_REDUCTION + 1)[2])
    A = Buffer("A", (64, 32), "float32")
    assert not short_window(Reduce("R", (64,), Sum(), lambda i, k: A[i, k], (32,)))     # a row sum
    S, w, C = _conv1d(4096, SHORT_REDUCTION + 1)
    assert "partial results in vector lanes" in str(LoopNest([C]).auto_schedule(AVX512))
