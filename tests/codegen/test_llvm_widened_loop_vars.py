"""A loop variable widened for an index (the flat offsets of buffers with symbolic sizes are
int64: ``A[int64(i) * int64(N) + int64(k)]``) is the loop's i64 induction variable itself in
the LLVM code, not its truncation extended again, which hid the induction variable from LLVM
(a sign extension in every iteration); the values are those of IREval and numpy."""
from __future__ import annotations

import re

import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest
from te import Buffer, Compute, Reduce, Sum, Var, cast


def _row_sums(dtype):
    N = Var("N", dtype)
    A = Buffer("A", (N, N), "float32")
    R = Reduce("R", (N,), Sum(), lambda i, k: A[i, k] * 2.0, (N,))
    return N, A, R


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_widened_loop_variables_index_with_the_induction_variable(dtype):
    N, A, R = _row_sums(dtype)
    nest = LoopNest([R])
    kernel = build(nest, [A, R, N], target="llvm", cache=False)
    if dtype != "int64":
        assert "int64(k)" in str(kernel.stmt)
    # the loop variables are not extended back from their truncations
    assert not re.search(r'[sz]ext i32 %"(i|k)\.i32"', kernel.source), kernel.source
    rng = np.random.default_rng(0)
    for n in (1, 5, 37):
        a = rng.standard_normal((n, n)).astype(np.float32)
        want = 2 * a.astype(np.float64).sum(1)
        for target in ("llvm", "ireval"):
            r = np.zeros(n, np.float32)
            (kernel if target == "llvm" else build(nest, [A, R, N], target="ireval"))(a, r, n)
            np.testing.assert_allclose(r, want, rtol=1e-4, atol=1e-4)


def test_a_widened_loop_variable_in_a_value_keeps_its_type():
    """Outside an index the cast is a value like any other: int64(i) * 2^31 does not wrap."""
    N = Var("N")
    B = Compute("B", (N,), lambda i: cast(cast(i, "int64") * 2147483648, "float64"))
    kernel = build(LoopNest([B]), [B, N], target="llvm", cache=False)
    b = np.zeros(4, np.float64)
    kernel(b, 4)
    np.testing.assert_array_equal(b, np.arange(4) * 2.0 ** 31)
