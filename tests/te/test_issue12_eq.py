"""`==` and `!=` on expressions build comparisons (`select(c == 0, a, b)` compares `c` with
0), while hashing and the truth value of `==` stay identity, so expressions keep keying
dictionaries; a Python bool where a condition is expected is refused, naming `.eq()`."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from codegen import build
from loopnest import LoopNest
from loopnest.stmt import Block, Cond
from te import (EQ, NE, Buffer, Compute, Var, float32, if_then_else, int32, int64, logical_and,
                logical_not, select)
from te.expr import Incomparable
from te.simplify import prove


def _run(target, tensors, args, out_shape):
    out = np.full(out_shape, np.nan, np.float32)
    build(LoopNest([tensors[-1]]), tensors, target=target)(*args, out)
    return out


def test_select_eq_condition_against_numpy(backend):
    A = Buffer("A", (3, 4), float32)
    B = Compute("B", (3, 4), lambda c, x: select(c == 0, A[c, x] * 10.0, A[c, x]))
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    want = np.where(np.arange(3)[:, None] == 0, a * 10, a)
    np.testing.assert_array_equal(_run(backend, [A, B], [a], (3, 4)), want)


def test_ne_and_reflected_eq_against_numpy(backend):
    A = Buffer("A", (3, 4), float32)
    B = Compute("B", (3, 4), lambda c, x: if_then_else((c != 1) & (2 == x), A[c, x] + 100.0, A[c, x]))
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    c, x = np.arange(3)[:, None], np.arange(4)[None, :]
    want = np.where((c != 1) & (x == 2), a + 100, a)
    np.testing.assert_array_equal(_run(backend, [A, B], [a], (3, 4)), want)


def test_eq_between_loads_against_numpy(backend):
    A = Buffer("A", (6,), int32)
    Bf = Buffer("Bf", (6,), int32)
    C = Compute("C", (6,), lambda i: select(A[i] == Bf[i], 1.0, 0.0))
    a = np.array([1, 2, 3, 4, 5, 6], np.int32)
    b = np.array([1, 0, 3, 0, 5, 0], np.int32)
    np.testing.assert_array_equal(_run(backend, [A, Bf, C], [a, b], (6,)), (a == b).astype(np.float32))


def test_operators_build_the_same_nodes_as_eq_and_ne():
    i, j = Var("i"), Var("j")
    assert isinstance(i == 0, EQ) and isinstance(0 == i, EQ) and isinstance(i == j, EQ)
    assert isinstance(i != 0, NE) and isinstance(i != j, NE)
    assert str(i == 0) == str(i.eq(0)) == "i == 0"
    assert str(i != j) == str(i.ne(j)) == "i != j"
    assert (i == np.int64(3)).b.value == 3


def test_truth_value_is_identity():
    i, j = Var("i"), Var("i")
    assert bool(i == i) and not bool(i == j) and not bool(i == 0)
    assert not bool(i != i) and bool(i != j) and bool(i != 0)
    assert (i == "i") is False and (i != None) is True  # noqa: E711
    with pytest.raises(TypeError, match="truth value"):
        bool(i.eq(0))                           # a symbolic comparison has no truth value
    assert bool(copy.copy(i == 0)) is False


def test_dicts_sets_and_lists_keep_identity_semantics():
    i, j, n = Var("i"), Var("i"), Var("n", int64)
    e1, e2 = i + 1, i + 1
    d = {i: "i", j: "j", e1: "e1", e2: "e2", n: "n", 0: "zero"}
    assert [d[k] for k in (i, j, e1, e2, n, 0)] == ["i", "j", "e1", "e2", "n", "zero"]
    assert len({i, j, i, e1, e2, e1}) == 4
    assert e2 in [e1, n, e2] and [e1, n, e2].index(e2) == 2 and [i, n, i].count(i) == 2
    assert Var("i") not in [i, j, n] and Var("i") not in {i, j}
    xs = [i, j, e1]
    xs.remove(j)
    assert xs[0] is i and xs[1] is e1
    assert (i, e1) == (i, e1) and (i, e1) != (j, e1)
    x = Var("x", float32)
    assert x not in [i, n, e1] and not bool(x == i) and bool(x != n)
    p = pickle.loads(pickle.dumps([i, i == i]))
    assert bool(p[1]) and p[1].a is p[0]


def test_python_bool_condition_names_eq():
    i = Var("i")
    n = 0                                        # a Python int: n == 0 is Python's True
    for make in (lambda: select(n == 0, i, 1), lambda: if_then_else(i is None, i, 1),
                 lambda: logical_and(i < 2, True), lambda: (i < 2) | False, lambda: logical_not(False),
                 lambda: Cond(np.bool_(True), Block([])), lambda: prove(n == 0)):
        with pytest.raises(TypeError, match=r"Python bool .*\.eq\(b\)"):
            make()
    with pytest.raises(TypeError, match="select's condition is the Python bool True"):
        select(n == 0, i, 1)


def test_comparison_that_cannot_be_built_raises_when_used():
    i, n, x = Var("i"), Var("n", int64), Var("x", float32)
    for c in (i == n, i != n, x == i, i == 2 ** 40, i == 1.5, (i < 2) == 1):
        assert isinstance(c, Incomparable)
        with pytest.raises(TypeError):
            select(c, 1, 0)
        with pytest.raises(TypeError):
            c & (i < 3)
        with pytest.raises(TypeError):
            (i < 3) | c
    with pytest.raises(TypeError, match="different dtypes"):
        select(i == n, 1, 0)
