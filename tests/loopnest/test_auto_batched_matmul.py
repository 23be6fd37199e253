"""auto_schedule on a batched matmul: the matmul's register tile with the batch loop
outside (not a convolution's tile of the third-last dimension, whose operand vectors a
batched matmul does not share), equal to numpy on LLVM and IREval, symbolic batch too."""
import re

import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest, Target
from loopnest.auto.schedule import _batched
from te import Buffer, Reduce, Sum, Var

AVX512 = Target(vector_bits=512, vector_registers=32, cores=2)


def _bmm(batch, n=20, k=9, m=40):
    A = Buffer("A", (batch, n, k), "float32")
    B = Buffer("B", (batch, k, m), "float32")
    return A, B, Reduce("C", (batch, n, m), Sum(), lambda b, i, j, r: A[b, i, r] * B[b, r, j], (k,))


@pytest.mark.parametrize("target", ["llvm", "ireval"])
def test_a_batched_matmul_gets_the_matmul_tile_and_equals_numpy(target):
    A, B, C = _bmm(4)
    nest = LoopNest([C])
    report = str(nest.auto_schedule(AVX512))
    # the matmul's "R rows x V vectors", not a convolution's "O x R rows x 1 vector"
    assert re.match(r"C: register-blocked \d+ rows x \d+ vectors? of \d+ lanes", report), report
    a = np.random.default_rng(0).standard_normal((4, 20, 9)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((4, 9, 40)).astype(np.float32)
    c = np.full((4, 20, 40), np.nan, np.float32)
    build(nest, [A, B, C], target=target)(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_a_symbolic_batch():
    N = Var("N")
    A, B, C = _bmm(N)
    nest = LoopNest([C])
    nest.auto_schedule(AVX512)
    kernel = build(nest, [A, B, C, N], target="llvm")
    for batch in (1, 3):
        a = np.random.default_rng(batch).standard_normal((batch, 20, 9)).astype(np.float32)
        b = np.random.default_rng(batch + 5).standard_normal((batch, 9, 40)).astype(np.float32)
        c = np.full((batch, 20, 40), np.nan, np.float32)
        kernel(a, b, c, batch)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_a_convolution_is_not_a_batched_matmul():
    P = Buffer("P", (8, 10, 10), "float32")
    W = Buffer("W", (16, 8, 3, 3), "float32")
    Y = Reduce("Y", (16, 8, 8), Sum(), lambda co, y, x, ci, ry, rx: P[ci, y + ry, x + rx] * W[co, ci, ry, rx],
               (8, 3, 3))
    assert not _batched(Y)
    assert _batched(_bmm(2)[2])


@pytest.mark.parametrize("m, packed", [(32, False), (64, True), (40, True)])
def test_rows_one_tile_wide_are_not_packed(m, packed):
    # 2 vectors of 16 lanes: rows of 32 columns are already the packed panel's layout
    A, B, C = _bmm(8, n=16, k=24, m=m)
    nest = LoopNest([C])
    report = str(nest.auto_schedule(AVX512))
    assert ("B packed" in report) == packed, report
    rng = np.random.default_rng(m)
    a = rng.standard_normal((8, 16, 24)).astype(np.float32)
    b = rng.standard_normal((8, 24, m)).astype(np.float32)
    c = np.zeros((8, 16, m), np.float32)
    build(nest, [A, B, C], target="llvm")(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
