"""The Kernel calling contract (codegen/kernel.py), exercised through IREval kernels.

Every refused call raises TypeError/ValueError naming the argument, and writes nothing.
"""
from __future__ import annotations

import numpy as np
import pytest

from codegen import build
from codegen.kernel import KernelArgumentError
from loopnest import LoopNest
from te import Buffer, Compute, Var, float32, float64, int32
from te.layout import column_major

SENTINEL = -7.0


@pytest.fixture
def kern():
    """B[i, j] = A[i, j] + bias[j] over a symbolic N x 4 shape; params (A, bias, B, N)."""
    N = Var("N", int32)
    A = Buffer("A", (N, 4), float32)
    bias = Buffer("bias", (4,), float32)
    B = Compute("B", (N, 4), lambda i, j: A[i, j] + bias[j])
    return build(LoopNest([B]), [A, bias, B, N], target="ireval")


def arrays(n=3):
    a = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    bias = np.array([1, 2, 3, 4], np.float32)
    return a, bias, np.full((n, 4), SENTINEL, np.float32)


def expected(a, bias):
    return a + bias[None, :]


def test_positional_call_with_sizes_omitted(kern):
    a, bias, b = arrays()
    kern(a, bias, b)
    np.testing.assert_array_equal(b, expected(a, bias))


def test_positional_call_with_sizes_given(kern):
    a, bias, b = arrays(5)
    kern(a, bias, b, 5)
    np.testing.assert_array_equal(b, expected(a, bias))


def test_call_by_name_in_any_order(kern):
    a, bias, b = arrays(2)
    kern(B=b, bias=bias, A=a)
    np.testing.assert_array_equal(b, expected(a, bias))
    b2 = np.full_like(b, SENTINEL)
    kern(a, bias, B=b2, N=2)
    np.testing.assert_array_equal(b2, b)


def test_size_is_inferred_from_each_call(kern):
    for n in (1, 7, 0):
        a, bias, b = arrays(n)
        kern(a, bias, b)
        np.testing.assert_array_equal(b, expected(a, bias))


def test_kernel_metadata(kern):
    assert kern.target == "ireval"
    assert kern.arg_names == ["A", "bias", "B", "N"]
    assert "B[" in kern.source and "for (" in kern.source


def refused(kern, exc, match, *args, **kwargs):
    """Call, expect ``exc`` matching ``match``, and check no array given was written."""
    arrs = [x for x in list(args) + list(kwargs.values()) if isinstance(x, np.ndarray)]
    before = [x.copy() for x in arrs]
    with pytest.raises(exc, match=match):
        kern(*args, **kwargs)
    for x, y in zip(arrs, before):
        np.testing.assert_array_equal(x, y)


def test_wrong_rank(kern):
    a, bias, b = arrays()
    refused(kern, ValueError, r"argument A .*rank 3", a[None], bias, b)
    refused(kern, ValueError, r"argument B .*rank 1", a, bias, b.reshape(-1))


def test_wrong_static_shape(kern):
    a, bias, b = arrays()
    refused(kern, ValueError, r"argument bias .*shape \(5,\)", a, np.zeros(5, np.float32), b)


def test_wrong_dtype(kern):
    a, bias, b = arrays()
    refused(kern, TypeError, r"argument A .*dtype float64", a.astype(np.float64), bias, b)
    refused(kern, TypeError, r"argument B .*dtype int32", a, bias, np.zeros((3, 4), np.int32))


def test_non_contiguous_arrays_are_bound_through_their_strides(kern):
    a, bias, b = arrays()
    wide = np.full((3, 8), SENTINEL, np.float32)
    kern(a, bias, wide[:, ::2])                          # a strided output is written through its strides
    np.testing.assert_array_equal(wide[:, ::2], expected(a, bias))
    np.testing.assert_array_equal(wide[:, 1::2], SENTINEL)
    kern(np.asfortranarray(a), bias, b)
    np.testing.assert_array_equal(b, expected(a, bias))


def test_not_an_array(kern):
    a, bias, b = arrays()
    refused(kern, TypeError, r"argument A .*numpy array or an array with __dlpack__.*got list", a.tolist(), bias, b)


def test_missing_argument(kern):
    a, bias, b = arrays()
    refused(kern, TypeError, r"missing argument A", bias=bias, B=b)
    refused(kern, TypeError, r"missing argument bias", A=a, B=b)


def test_unknown_keyword(kern):
    a, bias, b = arrays()
    refused(kern, TypeError, r"no argument named 'C'", a, bias, b, C=b)


def test_argument_given_twice_and_too_many(kern):
    a, bias, b = arrays()
    refused(kern, TypeError, r"argument A .*given twice", a, bias, b, A=a)
    refused(kern, TypeError, r"at most 4 arguments", a, bias, b, 3, 4)


def test_inconsistent_symbolic_sizes(kern):
    a, bias, _ = arrays(3)
    b = np.full((4, 4), SENTINEL, np.float32)
    refused(kern, ValueError, r"argument B .*dimension 0 \(N\) is 4 but N = 3", a, bias, b)
    a3, bias, b3 = arrays(3)
    refused(kern, ValueError, r"argument A .*N\) is 3 but N = 5", a3, bias, b3, 5)


def test_size_must_be_an_int(kern):
    a, bias, b = arrays()
    refused(kern, TypeError, r"argument N .*must be an int, got float", a, bias, b, 3.0)
    refused(kern, TypeError, r"argument N .*must be an int, got bool", a, bias, b, N=True)


def test_errors_are_kernel_argument_errors(kern):
    a, bias, b = arrays()
    with pytest.raises(KernelArgumentError):
        kern(bias=bias, B=b)


def test_read_only_output_is_refused(kern):
    a, bias, b = arrays()
    b.flags.writeable = False
    refused(kern, ValueError, r"argument B .*read-only", a, bias, b)
    a.flags.writeable = False          # read-only inputs are fine
    b2 = np.zeros((3, 4), np.float32)
    kern(a, bias, b2)
    np.testing.assert_array_equal(b2, expected(a, bias))


def test_derived_dimension_is_checked():
    N = Var("N", int32)
    A = Buffer("A", (N * 2,), float64)
    B = Compute("B", (N,), lambda i: A[i * 2] + A[i * 2 + 1])
    k = build(LoopNest([B]), [A, B, N])
    a = np.arange(6, dtype=np.float64)
    b = np.full(3, SENTINEL)
    k(a, b)
    assert b.tolist() == [1.0, 5.0, 9.0]
    b4 = np.full(4, SENTINEL)
    refused(k, ValueError, r"argument A .*dimension 0 is 6, expected N \* 2 = 8", a, b4)


def test_size_only_argument_must_be_given():
    N = Var("N", int32)
    B = Compute("B", (8,), lambda i: i * N)
    nest = LoopNest([B])
    # used as is: loopnest.verify does not (yet) accept size variables that are no buffer's dimension
    nest._prepared = True
    k = build(nest, [B, N])
    b = np.full(8, -1, np.int32)
    refused(k, TypeError, r"missing argument N", b)
    k(b, 3)
    assert b.tolist() == [3 * v for v in range(8)]
    refused(k, ValueError, r"N = 4294967296 does not fit", b, 2**32)


def test_layout_needs_matching_strides():
    A = Buffer("A", (3, 4), float32, layout=column_major(3, 4))
    B = Compute("B", (3, 4), lambda i, j: A[i, j] * 10.0)
    k = build(LoopNest([B]), [A, B])
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.full((3, 4), SENTINEL, np.float32)
    refused(k, ValueError, r"argument A .*strides", a, b)
    k(np.asfortranarray(a), b)
    np.testing.assert_array_equal(b, a * 10)
