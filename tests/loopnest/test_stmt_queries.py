"""Tests for loopnest.queries: free variables, loads, stores and buffers of statement trees,
with the options the callers rely on (allocation dimensions, extra expressions, excluded
variables) and the names kept for importers."""
from __future__ import annotations

import doctest

from te import Buffer, Compute, Let as LetExpr, Reduce, Sum, Var, float32, int32
from te import expr as E

import loopnest.queries as Q
from loopnest import LoopNest
from loopnest.queries import (external_buffers, stmt_free_vars, stmt_loaded_buffers, stmt_loads, stmt_reads,
                              stmt_stored_buffers, stmt_touches, stmt_writes, stores_to)
from loopnest.stmt import Allocate, Block, Cond, For, Free, Let, Store, iter_stmts, stmt_exprs

n, m, i, j, t = Var("n"), Var("m"), Var("i"), Var("j"), Var("t")
A = Buffer("A", (n,), float32)
B = Buffer("B", (n,), float32)
T = Buffer("T", (m,), float32)


def names(xs):
    return [x.name for x in xs]


def test_doctests():
    failures, attempted = doctest.testmod(Q)
    assert failures == 0 and attempted > 20


def test_every_public_function_has_an_example():
    for name in Q.__all__:
        assert ">>>" in (getattr(Q, name).__doc__ or ""), name


def _tree():
    """alloc T[m]; for i < n: let t = i * 2 { T[i] = A[t]; if (i < m) B[i] = T[i] + A[j] }; free T"""
    body = Let(t, i * 2, Block([Store(T, (i,), A[t]),
                                Cond(i < m, Block([Store(B, (i,), T[i] + A[j])]))]))
    return Block([Allocate(T), For(i, 0, n, Block([body])), Free(T)])


# ------------------------------------------------------------------------------------
# stmt_free_vars
# ------------------------------------------------------------------------------------
def _old_verify_free_vars(root):
    """loopnest.verify.free_vars as it was: binders first, Allocate dims count."""
    bound = set()
    for s in iter_stmts(root):
        if isinstance(s, (For, Let)):
            bound.add(id(s.var))
        for e in stmt_exprs(s):
            E.walk(e, lambda x: bound.add(id(x.var)) if isinstance(x, LetExpr) else None)
    seen = {}
    for s in iter_stmts(root):
        exprs = list(s.buffer.dims) if isinstance(s, Allocate) else stmt_exprs(s)
        for e in exprs:
            E.walk(e, lambda x: seen.setdefault(id(x), x) if isinstance(x, Var) and id(x) not in bound else None)
    return list(seen.values())


def test_stmt_free_vars_order_and_binders():
    root = _tree()
    assert names(stmt_free_vars(root)) == ["m", "n", "j"]
    assert stmt_free_vars(root) == _old_verify_free_vars(root)


def test_stmt_free_vars_allocations_flag():
    assert names(stmt_free_vars(_tree(), allocations=False)) == ["n", "m", "j"]
    only_alloc = Block([Allocate(T), Free(T)])
    assert names(stmt_free_vars(only_alloc)) == ["m"] and stmt_free_vars(only_alloc, allocations=False) == []


def test_stmt_free_vars_extra_and_exclude():
    root = _tree()
    k = Var("k")
    # extra comes after the tree; a variable the tree binds stays bound in extra
    assert names(stmt_free_vars(root, [k + i, n], allocations=False)) == ["n", "m", "j", "k"]
    assert names(stmt_free_vars(root, exclude=[j, m])) == ["n"]
    loop = root.stmts[1]
    assert names(stmt_free_vars(loop.body, exclude=(loop.var,))) == ["m", "j"]


def test_stmt_free_vars_let_expressions_bind():
    uf = Var("uf", float32)
    s = Store(B, (i,), LetExpr(uf, A[i], uf * 2.0))
    assert names(stmt_free_vars(For(i, 0, n, Block([s])))) == ["n"]


def test_stmt_free_vars_of_a_nest_are_its_scalar_parameters():
    alpha = Var("alpha", float32)
    N = Var("N", int32)
    X = Buffer("X", (N, 8), float32)
    Y = Compute("Y", (N, 8), lambda a, b: X[a, b] * alpha)
    S = Reduce("S", (N,), Sum(), lambda a, k: Y[a, k], (8,))
    nest = LoopNest([S])
    assert names(stmt_free_vars(nest.root)) == ["N", "alpha"]
    nest.prepare_for_codegen()
    assert set(names(stmt_free_vars(nest.root))) == {"N", "alpha"}


def test_verify_free_vars_is_the_same_function():
    from loopnest.verify import free_vars
    assert free_vars is stmt_free_vars


# ------------------------------------------------------------------------------------
# loads, stores and buffers
# ------------------------------------------------------------------------------------
def test_stmt_loads_includes_bounds_and_conditions():
    C = Buffer("C", (4,), int32)
    root = For(i, 0, C[0], Block([Cond(C[1] > 0, Block([Store(B, (i,), A[i])]))]))
    assert [str(x) for x in stmt_loads(root)] == ["C[0]", "C[1]", "A[i]"]
    assert [str(x) for x in stmt_loads(root, A)] == ["A[i]"]


def test_reads_writes_touches():
    root = _tree()
    assert stmt_reads(root, A) and stmt_reads(root, T) and not stmt_reads(root, B)
    assert stmt_writes(root, B) and stmt_writes(root, T) and not stmt_writes(root, A)
    C = Buffer("C", (4,), float32)
    assert stmt_touches(root, A) and stmt_touches(root, B) and not stmt_touches(root, C)
    # allocating a buffer is not touching it
    assert not stmt_touches(Block([Allocate(C), Free(C)]), C)


def test_stores_to():
    root = _tree()
    assert [str(s.value) for s in stores_to(root, T)] == ["A[t]"]
    assert stores_to(root, A) == []


def test_loaded_and_stored_buffers():
    root = _tree()
    assert names(stmt_loaded_buffers(root)) == ["A", "T"]
    assert names(stmt_stored_buffers(root)) == ["T", "B"]


def test_external_buffers():
    root = _tree()
    assert names(external_buffers(root)) == ["A", "B"]
    loop_body = root.stmts[1].body       # T is allocated outside: the body must receive it
    assert names(external_buffers(loop_body)) == ["T", "A", "B"]
    # a Store's buffer comes before the loads of its value
    assert names(external_buffers(Store(B, (0,), A[0]))) == ["B", "A"]


def test_llvm_captures_use_these_queries():
    from codegen.llvm.outline import captures
    root = _tree()
    loop = root.stmts[1]
    vs, bs = captures(loop)
    assert names(vs) == ["m", "j"] and names(bs) == ["T", "A", "B"]
