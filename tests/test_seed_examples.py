"""The worked examples of the reference documents and the DESIGN contract, end to end on
every CPU backend."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from te import (Buffer, Compute, Reduce, Sum, Var, as_dtype, float32, floordiv, floormod, int32, truncdiv,
                truncmod)
from loopnest import LoopNest, ScheduleError
from codegen import build


def test_tir_dtype_notation():
    assert str(as_dtype("float16x4")) == "float16x4" and as_dtype("float16x4").lanes == 4
    assert str(as_dtype("int8x8")) == "int8x8"


def test_tir_buffer_indexing_example(backend):
    # "if the shape is (2, 2, 3) ... index (0, 1, 1) would give us element 5 and index (1, 0, 2) element 9"
    B = Buffer("B", (2, 2, 3), int32)
    out = Compute("out", (2,), lambda i: B[i, 1 - i, 1 + i])
    b = np.arange(1, 13, dtype=np.int32).reshape(2, 2, 3)
    o = np.empty(2, np.int32)
    build(LoopNest([out]), [B, out], target=backend)(b, o)
    assert o.tolist() == [5, 9]


def test_tir_div_mod_table(backend):
    # "5/2 evaluates to 2 and -5/2 to -2 ... -5 % 2 evaluates to -1"; floor versions -3 and 1
    X = Buffer("X", (2,), int32)
    ops = [lambda a: truncdiv(a, 2), lambda a: truncmod(a, 2), lambda a: floordiv(a, 2), lambda a: floormod(a, 2)]
    outs = [Compute(f"O{k}", (2,), lambda i, f=f: f(X[i])) for k, f in enumerate(ops)]
    arrays = [np.empty(2, np.int32) for _ in outs]
    build(LoopNest(outs), [X] + outs, target=backend)(np.array([5, -5], np.int32), *arrays)
    assert [a.tolist() for a in arrays] == [[2, -2], [1, -1], [2, -3], [1, 1]]


@given(x=st.lists(st.integers(-10**6, 10**6), min_size=1, max_size=16), n=st.integers(1, 1000))
def test_tir_floor_properties(x, n):
    # 0 <= FloorMod(x, N) < N;  FloorDiv(x + N, N) = FloorDiv(x, N) + 1;  FloorMod(x + N, N) = FloorMod(x, N)
    for backend in _backends():
        X = Buffer("X", (len(x),), int32)
        N = Var("N", int32)
        m = Compute("m", (len(x),), lambda i: floormod(X[i], N))
        d1 = Compute("d1", (len(x),), lambda i: floordiv(X[i] + N, N) - floordiv(X[i], N))
        m1 = Compute("m1", (len(x),), lambda i: floormod(X[i] + N, N) - floormod(X[i], N))
        k = _kernel((m, d1, m1), backend, X, N)
        outs = [np.empty(len(x), np.int32) for _ in range(3)]
        k(np.array(x, np.int32), *outs, N=n)
        assert all(0 <= v < n for v in outs[0]) and set(outs[1]) == {1} and set(outs[2]) == {0}


def _kernel(outs, backend, X, N):
    return build(LoopNest(list(outs)), [X, *outs, N], target=backend)


def _backends():
    import importlib.util
    return ["ireval"] + (["llvm"] if importlib.util.find_spec("codegen.llvm") else [])


def test_nnc_example_a_equals_b_plus_7(backend):
    # "A[i,j] = B[i,j] + 7 where both A and B are 100x100 tensors"
    B = Buffer("B", (100, 100), int32)
    A = Compute("A", (100, 100), lambda i, j: B[i, j] + 7)
    nest = LoopNest([A])
    assert str(nest) == "for (int i = 0; i < 100; i++) {\n  for (int j = 0; j < 100; j++) {\n" \
                        "    A[i, j] = B[i, j] + 7;\n  }\n}"
    b = np.arange(10000, dtype=np.int32).reshape(100, 100)
    a = np.empty_like(b)
    build(nest, [B, A], target=backend)(b, a)
    np.testing.assert_array_equal(a, b + 7)


def test_nnc_workflow_example(backend):
    # x = a(m, n) * b(n, k) over (M, N, K); z reads x; y is computed because x is an output
    M, N, K = 4, 5, 6
    a_buf = Buffer("a", (M, N), float32)
    b_buf = Buffer("b", (N, K), float32)
    x = Compute("x", (M, N, K), lambda m, n, k: a_buf[m, n] * b_buf[n, k])
    z = Reduce("z", (M, K), Sum(), lambda m, k, n: x[m, n, k], (N,))
    nest = LoopNest([x, z])
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, N)).astype(np.float32)
    b = rng.standard_normal((N, K)).astype(np.float32)
    xo, zo = np.empty((M, N, K), np.float32), np.empty((M, K), np.float32)
    build(nest, [a_buf, b_buf, x, z], target=backend)(a, b, xo, zo)
    np.testing.assert_allclose(xo, a[:, :, None] * b[None, :, :], rtol=1e-6)
    np.testing.assert_allclose(zo, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-6)


def test_design_contract_example(backend):
    N = Var("N", int32)
    A = Buffer("A", (N, 64), float32)
    B = Compute("B", (N, 64), lambda i, j: A[i, j] * 2.0 + 1.0)
    C = Reduce("C", (N,), Sum(), lambda i, k: B[i, k], (64,))

    nest = LoopNest([C])
    i, = nest.get_loops_for(C)[:1]
    outer, inner, tail = nest.split_with_tail(i, 8)
    assert tail is not None                      # N is symbolic: a tail loop always exists
    masked = LoopNest([C])
    mo, mi = masked.split_with_mask(masked.get_loops_for(C)[0], 8)
    bi, bj = nest.get_loops_for(B)
    nest.reorder([bi, bj], [1, 0])
    assert [l.name for l in nest.get_loops_for(B)] == ["j", "i"]
    with pytest.raises(ScheduleError):
        nest.parallelize(nest.get_loops_for(C)[-1])   # the reduction loop k
    nest.parallelize(outer)
    nest.simplify()
    text = str(nest)
    assert "parallel for" in text
    replayed = LoopNest([C]).replay(nest.history)
    assert str(replayed.simplify()) == text
    nest.prepare_for_codegen()

    a = np.random.default_rng(1).standard_normal((21, 64)).astype(np.float32)
    want = (a.astype(np.float64) * 2 + 1).sum(axis=1)
    for n in (nest, masked):
        k = build(n, [A, C, N], target=backend)
        c = np.empty(21, np.float32)
        k(a, c)
        np.testing.assert_allclose(c, want, rtol=1e-5)
        c2 = np.empty(21, np.float32)
        k(A=a, C=c2)
        np.testing.assert_array_equal(c, c2)
        assert isinstance(k.source, str) and k.source
