"""End-to-end kernels on IREval, compared with numpy (float64 references, or exact
float32 references that follow the serial order of the loops)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import te
from codegen import build
from loopnest import LoopNest
from te import (Buffer, Compute, Max, Min, Prod, Reduce, Reducer, Sum, Var, cast, exp, float32, int8, int32,
                maximum, minimum, select, tanh)


@pytest.fixture(params=[True, False], ids=["batched", "serial"])
def batch(request) -> bool:
    return request.param


RNG = np.random.default_rng(1234)


def rand(shape, dtype=np.float32, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape).astype(dtype)


# ------------------------------------------------------------------------------------
# elementwise and broadcasting
# ------------------------------------------------------------------------------------
def test_elementwise(batch):
    A = Buffer("A", (37, 11), float32)
    B = Buffer("B", (37, 11), float32)
    C = Compute("C", (37, 11), lambda i, j: A[i, j] * B[i, j] + maximum(A[i, j], 0.5) - 1.0)
    k = build(LoopNest([C]), [A, B, C], target="ireval", batch=batch)
    a, b = rand((37, 11)), rand((37, 11))
    c = np.empty((37, 11), np.float32)
    k(a, b, c)
    want = (a * b + np.maximum(a, np.float32(0.5))) - np.float32(1)      # same float32 ops, same order
    np.testing.assert_array_equal(c, want)


def test_broadcasting_row_and_column(batch):
    A = Buffer("A", (9, 13), float32)
    row = Buffer("row", (13,), float32)
    col = Buffer("col", (9,), float32)
    C = Compute("C", (9, 13), lambda i, j: (A[i, j] - row[j]) * col[i])
    k = build(LoopNest([C]), [A, row, col, C], batch=batch)
    a, r, c0 = rand((9, 13)), rand(13), rand(9)
    c = np.empty((9, 13), np.float32)
    k(A=a, row=r, col=c0, C=c)
    np.testing.assert_array_equal(c, (a - r[None, :]) * c0[:, None])


def test_integer_kernel_with_wraparound_and_division(batch):
    A = Buffer("A", (50,), int8)
    B = Compute("B", (50,), lambda i: (A[i] * 3 + 7) / 4 - A[i] % 5)
    k = build(LoopNest([B]), [A, B], batch=batch)
    a = np.arange(-25, 25, dtype=np.int8) * 5
    b = np.empty(50, np.int8)
    k(a, b)

    def ref(v):
        t = ((v * 3 + 7 + 128) % 256) - 128            # int8 wrap
        q = abs(t) // 4 * (1 if t >= 0 else -1)           # C division
        r = abs(v) % 5 * (1 if v >= 0 else -1)            # C modulo
        return ((q - r + 128) % 256) - 128
    assert b.tolist() == [ref(int(v)) for v in a]


# ------------------------------------------------------------------------------------
# reductions
# ------------------------------------------------------------------------------------
def sequential_sum(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """float32 sum in the serial loop order (left to right)."""
    x = np.moveaxis(x, axis, -1)
    acc = np.zeros(x.shape[:-1], x.dtype)
    for k in range(x.shape[-1]):
        acc = acc + x[..., k]
    return acc


def test_sum_is_bit_exact_in_loop_order(batch):
    A = Buffer("A", (7, 301), float32)
    C = Reduce("C", (7,), Sum(), lambda i, k: A[i, k] * 1.5, (301,))
    k = build(LoopNest([C]), [A, C], batch=batch)
    a = rand((7, 301), lo=-1e4, hi=1e4)
    c = np.empty(7, np.float32)
    k(a, c)
    np.testing.assert_array_equal(c, sequential_sum(a * np.float32(1.5)))
    np.testing.assert_allclose(c, (a.astype(np.float64) * 1.5).sum(1), rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("reducer,ref", [(Max(), np.max), (Min(), np.min), (Prod(), np.prod)])
@pytest.mark.parametrize("dtype", [float32, int32])
def test_max_min_prod(reducer, ref, dtype, batch):
    A = Buffer("A", (5, 6), dtype)
    C = Reduce("C", (5,), reducer, lambda i, k: A[i, k], (6,))
    k = build(LoopNest([C]), [A, C], batch=batch)
    a = (rand((5, 6), lo=0.5, hi=1.5) if dtype is float32 else RNG.integers(-9, 9, (5, 6))).astype(dtype.numpy)
    c = np.empty(5, dtype.numpy)
    k(a, c)
    if reducer.name == "prod" and dtype is float32:
        acc = np.ones(5, np.float32)
        for j in range(6):
            acc = acc * a[:, j]
        np.testing.assert_array_equal(c, acc)
    else:
        np.testing.assert_array_equal(c, ref(a, axis=1))


def test_custom_reducers(batch):
    A = Buffer("A", (4, 10), float32)
    absmax = Reducer(lambda acc, x: maximum(acc, te.abs(x)), 0.0, "absmax")
    ema = Reducer(lambda acc, x: acc * 0.5 + x, 0.0, "ema")       # order sensitive: not commutative
    C = Reduce("C", (4,), absmax, lambda i, k: A[i, k], (10,))
    D = Reduce("D", (4,), ema, lambda i, k: A[i, k], (10,))
    k = build(LoopNest([C, D]), [A, C, D], batch=batch)
    a = rand((4, 10))
    c, d = np.empty(4, np.float32), np.empty(4, np.float32)
    k(a, c, d)
    np.testing.assert_array_equal(c, np.abs(a).max(1))
    want = np.zeros(4, np.float32)
    for j in range(10):
        want = want * np.float32(0.5) + a[:, j]
    np.testing.assert_array_equal(d, want)


def test_two_dimensional_reduction_in_lexicographic_order(batch):
    A = Buffer("A", (3, 17, 19), float32)
    C = Reduce("C", (3,), Sum(), lambda i, p, q: A[i, p, q], (17, 19))
    k = build(LoopNest([C]), [A, C], batch=batch, chunk=50)
    a = rand((3, 17, 19), lo=-1e3, hi=1e3)
    c = np.empty(3, np.float32)
    k(a, c)
    np.testing.assert_array_equal(c, sequential_sum(a.reshape(3, -1)))


def test_integer_sum_wraps(batch):
    A = Buffer("A", (40,), int8)
    C = Reduce("C", (1,), Sum(), lambda i, k: A[k], (40,))
    k = build(LoopNest([C]), [A, C], batch=batch)
    c = np.empty(1, np.int8)
    k(np.full(40, 100, np.int8), c)
    assert int(c[0]) == ((4000 + 128) % 256) - 128


# ------------------------------------------------------------------------------------
# matmul, softmax, intermediates, symbolic sizes
# ------------------------------------------------------------------------------------
def matmul_nest(n, m, p, dtype):
    A = Buffer("A", (n, p), dtype)
    B = Buffer("B", (p, m), dtype)
    C = Reduce("C", (n, m), Sum(), lambda i, j, k: A[i, k] * B[k, j], (p,))
    return A, B, C


def test_matmul_float32(batch):
    A, B, C = matmul_nest(13, 7, 29, float32)
    k = build(LoopNest([C]), [A, B, C], batch=batch)
    a, b = rand((13, 29)), rand((29, 7))
    c = np.empty((13, 7), np.float32)
    k(a, b, c)
    acc = np.zeros((13, 7), np.float32)
    for kk in range(29):
        acc = acc + a[:, kk:kk + 1] * b[kk:kk + 1, :]
    np.testing.assert_array_equal(c, acc)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_matmul_int32_exact(batch):
    A, B, C = matmul_nest(6, 5, 8, int32)
    k = build(LoopNest([C]), [A, B, C], batch=batch)
    a = RNG.integers(-1000, 1000, (6, 8)).astype(np.int32)
    b = RNG.integers(-1000, 1000, (8, 5)).astype(np.int32)
    c = np.empty((6, 5), np.int32)
    k(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


def test_softmax_chain(batch):
    N = Var("N", int32)
    X = Buffer("X", (N, 16), float32)
    M = Reduce("M", (N,), Max(), lambda i, k: X[i, k], (16,))
    E = Compute("E", (N, 16), lambda i, k: exp(X[i, k] - M[i]))
    S = Reduce("S", (N,), Sum(), lambda i, k: E[i, k], (16,))
    Y = Compute("Y", (N, 16), lambda i, k: E[i, k] / S[i])
    nest = LoopNest([Y])
    assert {b.name for b in nest.intermediates} == {"M", "E", "S"}
    k = build(nest, [X, Y], batch=batch)
    for n in (1, 5, 8):
        x = rand((n, 16), lo=-5, hi=5)
        y = np.empty((n, 16), np.float32)
        k(x, y)
        x64 = x.astype(np.float64)
        want = np.exp(x64 - x64.max(1, keepdims=True))
        want /= want.sum(1, keepdims=True)
        np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-7)


def test_intermediate_tensors(batch):
    A = Buffer("A", (6, 4), float32)
    T1 = Compute("T1", (6, 4), lambda i, j: A[i, j] + 1.0)
    T2 = Compute("T2", (4, 6), lambda j, i: T1[i, j] * 2.0)
    Out = Compute("Out", (6,), lambda i: T2[0, i] - T2[3, i])
    k = build(LoopNest([Out]), [A, Out], batch=batch, poison=True)
    a = rand((6, 4))
    out = np.empty(6, np.float32)
    k(a, out)
    t2 = ((a + np.float32(1)) * np.float32(2)).T
    np.testing.assert_array_equal(out, t2[0] - t2[3])


def test_symbolic_sizes_bound_from_shapes(batch):
    N, M = Var("N", int32), Var("M", int32)
    A = Buffer("A", (N, M), float32)
    B = Compute("B", (N, M), lambda i, j: A[i, j] * cast(i * M + j, float32))
    k = build(LoopNest([B]), [A, B, N, M], batch=batch)
    for n, m in [(3, 4), (1, 1), (7, 2), (0, 5)]:
        a = rand((n, m))
        b = np.full((n, m), 99.0, np.float32)
        k(a, b)
        np.testing.assert_array_equal(b, a * np.arange(n * m, dtype=np.float32).reshape(n, m))
        b2 = np.empty((n, m), np.float32)
        k(a, b2, n, m)
        np.testing.assert_array_equal(b2, b)


def test_small_chunks_agree_with_serial():
    A = Buffer("A", (23, 31), float32)
    B = Compute("B", (23, 31), lambda i, j: select(A[i, j] > 0.0, tanh(A[i, j]), A[i, j] * A[i, j]))
    C = Reduce("C", (23,), Sum(), lambda i, k: B[i, k], (31,))
    a = rand((23, 31))
    outs = []
    for opts in ({"batch": False}, {"chunk": 7}, {"chunk": 1}, {}):
        c = np.empty(23, np.float32)
        build(LoopNest([C]), [A, C], **opts)(a, c)
        outs.append(c)
    for c in outs[1:]:
        np.testing.assert_array_equal(c, outs[0])


def test_aliasing_arguments_follow_the_serial_order():
    """B[i] = A[i-1] + 1 computed in place (A and B the same array) is a prefix scan serially."""
    n = 12
    A = Buffer("A", (n,), float32)
    B = Compute("B", (n,), lambda i: select(i > 0, A[te.maximum(i - 1, 0)] + 1.0, A[i]))
    k = build(LoopNest([B]), [A, B])
    a = np.zeros(n, np.float32)
    k(a, a)
    assert a.tolist() == [float(v) for v in range(n)]


# ------------------------------------------------------------------------------------
# property tests: random elementwise expression trees
# ------------------------------------------------------------------------------------
SIZES = st.sampled_from([1, 2, 3, 5, 7, 13])


@st.composite
def trees(draw, n_inputs: int, depth: int = 4):
    """A random float expression tree as nested tuples (interpreted twice below)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            return ("in", draw(st.integers(0, n_inputs - 1)))
        return ("const", draw(st.sampled_from([-1.5, -0.25, 0.0, 0.5, 1.0, 2.0])))
    kind = draw(st.sampled_from(["add", "sub", "mul", "min", "max", "select", "exp", "tanh", "castint"]))
    if kind in ("add", "sub", "mul", "min", "max"):
        return (kind, draw(trees(n_inputs, depth - 1)), draw(trees(n_inputs, depth - 1)))
    if kind == "select":
        return (kind, draw(st.integers(0, n_inputs - 1)), draw(st.sampled_from([-0.5, 0.0, 0.75])),
                draw(trees(n_inputs, depth - 1)), draw(trees(n_inputs, depth - 1)))
    if kind == "castint":
        return (kind, draw(st.integers(0, n_inputs - 1)))
    return (kind, draw(trees(n_inputs, depth - 1)))


def to_te(t, leaf):
    k = t[0]
    if k == "in":
        return leaf(t[1])
    if k == "const":
        return te.FloatImm(t[1], float32)
    if k in ("add", "sub", "mul"):
        a, b = to_te(t[1], leaf), to_te(t[2], leaf)
        return a + b if k == "add" else a - b if k == "sub" else a * b
    if k in ("min", "max"):
        return (minimum if k == "min" else maximum)(to_te(t[1], leaf), to_te(t[2], leaf))
    if k == "select":
        return select(leaf(t[1]) < t[2], to_te(t[3], leaf), to_te(t[4], leaf))
    if k == "exp":
        return exp(tanh(to_te(t[1], leaf)))
    if k == "tanh":
        return tanh(to_te(t[1], leaf))
    return cast(cast(leaf(t[1]) * 4.0, int32), float32)


def to_np(t, leaf):
    """(value, magnitude bound) in float64; the bound scales the float32 error tolerance."""
    k = t[0]
    if k == "in":
        v = leaf(t[1])
        return v, np.abs(v)
    if k == "const":
        return np.float64(t[1]), abs(t[1])
    if k in ("add", "sub", "mul", "min", "max"):
        (a, ma), (b, mb) = to_np(t[1], leaf), to_np(t[2], leaf)
        if k == "add":
            return a + b, ma + mb
        if k == "sub":
            return a - b, ma + mb
        if k == "mul":
            return a * b, ma * mb + ma + mb
        return (np.minimum(a, b) if k == "min" else np.maximum(a, b)), np.maximum(ma, mb)
    if k == "select":
        (a, ma), (b, mb) = to_np(t[3], leaf), to_np(t[4], leaf)
        return np.where(leaf(t[1]) < t[2], a, b), np.maximum(ma, mb)
    if k in ("exp", "tanh"):
        a, ma = to_np(t[1], leaf)
        return (np.exp(np.tanh(a)), math.e * (ma + 1)) if k == "exp" else (np.tanh(a), ma + 1)
    v = np.trunc(leaf(t[1]) * 4)
    return v, np.abs(v)


@st.composite
def elementwise_cases(draw):
    n_inputs = draw(st.integers(1, 3))
    shapes = [draw(st.sampled_from(["full", "row", "col"])) for _ in range(n_inputs)]
    return n_inputs, shapes, draw(SIZES), draw(SIZES), draw(trees(n_inputs)), draw(st.integers(0, 2**31))


@settings(max_examples=40, deadline=None)
@given(elementwise_cases())
def test_random_elementwise_trees_match_numpy_float64(case):
    n_inputs, shapes, n, m, tree, seed = case
    dims = {"full": (n, m), "row": (m,), "col": (n,)}
    bufs = [Buffer(f"In{k}", dims[s], float32) for k, s in enumerate(shapes)]

    def te_leaf(idx):
        def leaf(k):
            i, j = idx
            return {"full": lambda: bufs[k][i, j], "row": lambda: bufs[k][j], "col": lambda: bufs[k][i]}[shapes[k]]()
        return leaf
    out = Compute("Out", (n, m), lambda i, j: to_te(tree, te_leaf((i, j))) + 0.0)
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-2, 2, dims[s]).astype(np.float32) for s in shapes]
    results = []
    for opts in ({}, {"batch": False}):
        res = np.empty((n, m), np.float32)
        build(LoopNest([out]), bufs + [out], **opts)(*arrays, res)
        results.append(res)
    np.testing.assert_array_equal(results[0], results[1])       # batched == serial, bit for bit

    def np_leaf(k):
        a = arrays[k].astype(np.float64)
        view = {"full": a, "row": a[None, :], "col": a[:, None]}[shapes[k]]
        return np.broadcast_to(view, (n, m))
    want, mag = to_np(tree, np_leaf)
    want = np.broadcast_to(want, (n, m))
    tol = 1e-5 * np.broadcast_to(mag, (n, m)) + 1e-6
    assert (np.abs(results[0] - want) <= tol).all(), (tree, results[0], want)


INT_OPS = st.sampled_from(["add", "sub", "mul", "min", "max", "div", "mod", "floordiv", "floormod"])


@st.composite
def int_trees(draw, depth=3):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return ("in",) if draw(st.booleans()) else ("const", draw(st.integers(-300, 300)))
    op = draw(INT_OPS)
    if op in ("div", "mod", "floordiv", "floormod"):
        return (op, draw(int_trees(depth - 1)), draw(st.sampled_from([-7, -2, 3, 5, 1000])))
    return (op, draw(int_trees(depth - 1)), draw(int_trees(depth - 1)))


def int_te(t, x):
    if t[0] == "in":
        return x
    if t[0] == "const":
        return te.IntImm(t[1], int32)
    a = int_te(t[1], x)
    if t[0] in ("div", "mod", "floordiv", "floormod"):
        b = te.IntImm(t[2], int32)
        return {"div": te.truncdiv, "mod": te.truncmod, "floordiv": te.floordiv, "floormod": te.floormod}[t[0]](a, b)
    b = int_te(t[2], x)
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "min": lambda: minimum(a, b), "max": lambda: maximum(a, b)}[t[0]]()


def int_ref(t, x):
    """Python-int reference with int32 wrap-around after every operation."""
    def w(v):
        return ((v + 2**31) % 2**32) - 2**31
    if t[0] == "in":
        return x
    if t[0] == "const":
        return t[1]
    a = int_ref(t[1], x)
    if t[0] in ("div", "mod", "floordiv", "floormod"):
        b = t[2]
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        return w({"div": q, "mod": a - b * q, "floordiv": a // b, "floormod": a % b}[t[0]])
    b = int_ref(t[2], x)
    return w({"add": a + b, "sub": a - b, "mul": a * b, "min": min(a, b), "max": max(a, b)}[t[0]])


@settings(max_examples=30, deadline=None)
@given(int_trees(), SIZES, st.integers(0, 2**31))
def test_random_integer_trees_are_bit_exact(tree, n, seed):
    A = Buffer("A", (n,), int32)
    out = Compute("Out", (n,), lambda i: int_te(tree, A[i]) + 0)
    a = np.random.default_rng(seed).integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    for opts in ({}, {"batch": False}):
        res = np.empty(n, np.int32)
        build(LoopNest([out]), [A, out], **opts)(a, res)
        assert res.tolist() == [int_ref(tree, int(v)) for v in a]


# ------------------------------------------------------------------------------------
# scheduled forms (built by hand until the transforms land): batched == serial == numpy
# ------------------------------------------------------------------------------------
from codegen.ireval import build_ireval  # noqa: E402
from codegen.kernel import make_params  # noqa: E402
from loopnest.stmt import Block, Cond, For, Store  # noqa: E402
from te import Load, floormod  # noqa: E402


class HandNest:
    prepared = True

    def __init__(self, root, inputs, outputs):
        self.root = root if isinstance(root, Block) else Block((root,))
        self.inputs, self.outputs, self.intermediates = list(inputs), list(outputs), []


def run_hand(root, inputs, outputs, arrays, **opts):
    """Run a hand-built nest batched, serially and with tiny chunks; all must agree bitwise."""
    nest = HandNest(root, inputs, outputs)
    results = []
    for o in ({}, {"batch": False}, {"chunk": 3}):
        arrs = [a.copy() for a in arrays]
        build_ireval(nest, make_params(nest, list(inputs) + list(outputs)), **o, **opts)(*arrs)
        results.append(arrs)
    for other in results[1:]:
        for x, y in zip(results[0], other):
            np.testing.assert_array_equal(x, y)
    return results[0]


def test_reduction_with_the_reduction_loop_outside():
    """for k: for i: C[i] += A[i, k] -- the (k, i) batch is illegal, each i batch is legal."""
    n, p = 6, 9
    A, C = Buffer("A", (n, p), float32), Buffer("C", (n,), float32)
    i, k, i0 = Var("i"), Var("k"), Var("i0")
    root = Block([For(i0, 0, n, Block([Store(C, (i0,), 0.0)])),
                  For(k, 0, p, Block([For(i, 0, n, Block([
                      Store(C, (i,), Load(C, (i,)) + Load(A, (i * p + k,)))]))]))])
    a = rand((n, p))
    _, c = run_hand(root, [A], [C], [a, np.full(n, 5.0, np.float32)])
    np.testing.assert_array_equal(c, sequential_sum(a))


def test_split_reduction_with_tail_and_mask():
    n, p = 3, 10
    A, C, D = Buffer("A", (n, p), float32), Buffer("C", (n,), float32), Buffer("D", (n,), float32)
    i, ko, ki, kt, j, jo, ji = (Var(x) for x in ("i", "ko", "ki", "kt", "j", "jo", "ji"))
    with_tail = For(i, 0, n, Block([
        Store(C, (i,), 0.0),
        For(ko, 0, 3, Block([For(ki, 0, 3, Block([
            Store(C, (i,), Load(C, (i,)) + Load(A, (i * p + ko * 3 + ki,)))]))])),
        For(kt, 9, 10, Block([Store(C, (i,), Load(C, (i,)) + Load(A, (i * p + kt,)))]))]))
    masked = For(j, 0, n, Block([
        Store(D, (j,), 0.0),
        For(jo, 0, 3, Block([For(ji, 0, 4, Block([Cond(jo * 4 + ji < p, Block([
            Store(D, (j,), Load(D, (j,)) + Load(A, (j * p + jo * 4 + ji,)))]))]))]))]))
    a = rand((n, p), lo=-100, hi=100)
    _, c, d = run_hand(Block([with_tail, masked]), [A], [C, D],
                       [a, np.zeros(n, np.float32), np.zeros(n, np.float32)])
    np.testing.assert_array_equal(c, sequential_sum(a))
    np.testing.assert_array_equal(d, sequential_sum(a))


def test_loop_carried_dependence_runs_in_order():
    """A[i] = A[i - 1] + A[i]: a prefix sum, never batched."""
    n = 50
    A = Buffer("A", (n,), int32)
    i = Var("i")
    root = For(i, 1, n, Block([Store(A, (i,), Load(A, (i - 1,)) + Load(A, (i,)))]))
    (a,) = run_hand(root, [], [A], [np.arange(n, dtype=np.int32)])
    assert a.tolist() == np.cumsum(np.arange(n)).tolist()


def test_stencil_in_place_update_and_repeated_stores():
    n = 20
    A, B, C = Buffer("A", (n,), float32), Buffer("B", (n,), float32), Buffer("C", (n,), float32)
    i, j = Var("i"), Var("j")
    root = Block([
        For(i, 1, n - 1, Block([Store(B, (i,), (Load(A, (i - 1,)) + Load(A, (i + 1,))) * 0.5)])),
        For(j, 0, n, Block([Store(C, (j,), Load(A, (j,)) * 2.0), Store(C, (j,), Load(C, (j,)) + 1.0),
                            Store(A, (j,), Load(A, (j,)) - Load(C, (j,)))]))])
    a = rand(n)
    a2, b, c = run_hand(root, [], [A, B, C], [a, np.zeros(n, np.float32), np.zeros(n, np.float32)])
    np.testing.assert_array_equal(b[1:-1], (a[:-2] + a[2:]) * np.float32(0.5))
    np.testing.assert_array_equal(c, a * np.float32(2) + np.float32(1))
    np.testing.assert_array_equal(a2, a - c)


@st.composite
def random_nests(draw):
    """Two or three nested loops whose body updates buffers at (a*i + b*j + d) mod S."""
    size = draw(st.sampled_from([1, 4, 7, 12]))
    n1, n2 = draw(st.integers(1, 5)), draw(st.integers(1, 6))
    n3 = draw(st.sampled_from([0, 0, 2, 3]))

    def affine():
        return [draw(st.integers(-2, 3)) for _ in range(4)]
    stmts = [(draw(st.sampled_from(["X", "Y"])), affine(), draw(st.sampled_from(["X", "Y", "Z"])), affine(),
              draw(st.booleans())) for _ in range(draw(st.integers(1, 3)))]
    return size, n1, n2, n3, stmts


@settings(max_examples=60, deadline=None)
@given(random_nests(), st.integers(0, 2**31))
def test_random_loop_nests_batched_equal_serial(case, seed):
    size, n1, n2, n3, stmts = case
    bufs = {name: Buffer(name, (size,), int32) for name in "XYZ"}
    i, j, k = Var("i"), Var("j"), Var("k")

    def index(c):
        e = i * c[0] + j * c[1] + c[3]
        if n3:
            e = e + k * c[2]
        return floormod(e, size)
    body = []
    for dst, cd, src, cs, guarded in stmts:
        s = Store(bufs[dst], (index(cd),), Load(bufs[src], (index(cs),)) * 3 + Load(bufs[dst], (index(cd),)) + j)
        body.append(Cond(floormod(i + j, 2).eq(0), Block([s])) if guarded else s)
    inner = Block(body) if not n3 else Block([For(k, 0, n3, Block(body))])
    root = For(i, 0, n1, Block([For(j, 0, n2, inner)]))
    rng = np.random.default_rng(seed)
    arrays = [rng.integers(-50, 50, size).astype(np.int32) for _ in "XYZ"]
    run_hand(root, [bufs["Z"]], [bufs["X"], bufs["Y"]], [arrays[2], arrays[0], arrays[1]])


# ------------------------------------------------------------------------------------
# real schedules: every transform's output runs the same batched, serially and poisoned
# ------------------------------------------------------------------------------------
def _sched_split_mask(n, B, C):
    n.split_with_mask(n.get_loops_for(C)[1], 8)


def _sched_vectorize(n, B, C):
    _, ji, _ = n.split_with_tail(n.get_loops_for(B)[1], 4)
    n.vectorize(ji)


def _sched_inline(n, B, C):
    n.compute_inline(B)


def _sched_compute_at(n, B, C):
    n.compute_at(B, n.get_loops_for(C)[0])


def _sched_rfactor(n, B, C):
    _, ki, _ = n.split_with_tail(n.get_loops_for(C)[1], 4)
    n.rfactor(C, ki)


def _sched_cache(n, B, C):
    n.cache_accesses(n.inputs[0], "A_local", n.get_loops_for(C)[0])


def _sched_parallel_unroll(n, B, C):
    i, j = n.get_loops_for(B)
    n.parallelize(i)
    n.unroll(j)


def _sched_gpu(n, B, C):
    i, j = n.get_loops_for(B)
    n.set_gpu_block_index(i, 0)
    n.set_gpu_thread_index(j, 0)


@pytest.mark.parametrize("schedule", [_sched_split_mask, _sched_vectorize, _sched_inline, _sched_compute_at,
                                      _sched_rfactor, _sched_cache, _sched_parallel_unroll, _sched_gpu],
                         ids=lambda f: f.__name__[7:])
def test_scheduled_nests(schedule):
    A = Buffer("A", (12, 20), float32)
    B = Compute("B", (12, 20), lambda i, j: tanh(A[i, j]) * 2.0)
    C = Reduce("C", (12,), Sum(), lambda i, k: B[i, k] * A[i, k], (20,))
    nest = LoopNest([C])
    schedule(nest, B, C)
    a = rand((12, 20))
    outs = []
    for opts in ({}, {"batch": False}, {"chunk": 3, "poison": True}):
        c = np.empty(12, np.float32)
        build(nest, [A, C], **opts)(a, c)
        outs.append(c)
    for c in outs[1:]:
        np.testing.assert_array_equal(c, outs[0])
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(outs[0], (np.tanh(a64) * 2 * a64).sum(1), rtol=1e-5, atol=1e-5)
