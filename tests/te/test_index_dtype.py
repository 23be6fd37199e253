"""Index variables take the width of the dimension they run over."""
import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest
from te import Buffer, Compute, Reduce, Sum, Var, cast, int32, int64


def test_int32_dimensions_keep_int32_indices():
    C = Compute("C", (Var("N", int32), 4), lambda i, j: i + j)
    assert [a.dtype for a in C.args] == [int32, int32]


def test_int64_and_wide_constant_dimensions_get_int64_indices():
    C = Compute("C", (Var("N", int64), 2**33), lambda i, j: i + j)
    assert [a.dtype for a in C.args] == [int64, int64]
    R = Reduce("R", (4,), Sum(), lambda i, k: cast(k, "float32"), (Var("M", int64),))
    assert R.args[0].dtype == int32 and R.reduce_args[0].dtype == int64


@pytest.mark.parametrize("target", ["ireval", "llvm"])
def test_int64_size_var_builds_and_runs(target):
    N = Var("N", int64)
    A = Buffer("A", (N,), "float32")
    C = Compute("C", (N,), lambda i: A[i] * 2.0 + cast(i * 2, "float32"))
    R = Reduce("R", (N,), Sum(), lambda i, k: A[k], (N,))
    nest = LoopNest([C, R])
    nest.prepare_for_codegen()
    a = np.arange(5, dtype=np.float32)
    c, r = np.zeros(5, np.float32), np.zeros(5, np.float32)
    build(nest, [A, C, R, N], target=target)(a, c, r, 5)
    np.testing.assert_array_equal(c, a * 2 + np.arange(5) * 2)
    np.testing.assert_array_equal(r, np.full(5, a.sum(), np.float32))
