"""Expression nodes are immutable, and no concrete node class derives from another one
(``Or`` is not an ``And``, ``IfThenElse`` is not a ``Select``)."""
from __future__ import annotations

import copy
import doctest
import importlib
import inspect
import pickle

import pytest

import te
from te import Buffer, Var, bool_, float32, int32, simplify
from te import expr as E

i, j = Var("i"), Var("j")
A = Buffer("A", (16,), float32)

# one node of every concrete class
SAMPLES = [
    i, E.IntImm(3, int32), E.FloatImm(0.5, float32), E.Cast(float32, i),
    E.Add(i, j), E.Sub(i, j), E.Mul(i, j), E.Div(i, j), E.Mod(i, j), E.FloorDiv(i, j), E.FloorMod(i, j),
    E.Min(i, j), E.Max(i, j), E.EQ(i, j), E.NE(i, j), E.LT(i, j), E.LE(i, j), E.GT(i, j), E.GE(i, j),
    E.And(i < 2, j < 3), E.Or(i < 2, j < 3), E.Not(i < 2),
    E.Select(i < 2, i, j), E.IfThenElse(i < 2, A[i], 0.0),
    A[i], E.Let(Var("t"), i + 1, j), E.Call("exp", [A[i]], float32),
    E.Ramp(i, 1, 4), E.Broadcast(i, 4), E.MakeVector([i, j]), E.ExtractLane(E.Ramp(i, 1, 4), 2),
    E.IndexCheck(i + 1, 16, "A", 0),
]


def _concrete_classes():
    return {type(e) for e in SAMPLES}


def test_samples_cover_every_concrete_node_class():
    public = {getattr(E, n) for n in E.__all__}
    nodes = {c for c in public if inspect.isclass(c) and issubclass(c, E.Expr)}
    abstract = {E.Expr, E.BinaryOp, E.CmpOp}
    assert nodes - abstract == _concrete_classes()


def test_no_concrete_node_class_derives_from_another():
    classes = _concrete_classes()
    for c in classes:
        for other in classes - {c}:
            assert not issubclass(c, other), f"{c.__name__} derives from {other.__name__}"


def test_or_is_not_an_and_and_if_then_else_is_not_a_select():
    o = E.Or(i < 2, i >= 6)
    assert not isinstance(o, E.And) and isinstance(o, E.BinaryOp)
    assert not isinstance(E.And(i < 2, i >= 6), E.Or)
    ite = E.IfThenElse(i < 2, i, j)
    assert not isinstance(ite, E.Select)
    assert not isinstance(E.Select(i < 2, i, j), E.IfThenElse)
    with pytest.raises(TypeError, match="Or needs bool operands"):
        E.Or(i, j)
    with pytest.raises(TypeError, match="And needs bool operands"):
        E.And(i, j)
    with pytest.raises(TypeError, match="IfThenElse condition"):
        E.IfThenElse(i, i, j)


def test_simplifier_treats_or_as_or():
    r = {i: (0, 8)}
    assert str(simplify((i < 2) | (i >= 6), r)) == "i < 2 || i >= 6"
    assert str(simplify((i < 2) | (i >= 0), r)) == "true"
    assert str(simplify((i < 8) | (j < 4), r)) == "true"
    assert str(simplify((i < 8) & (j < 4), r)) == "j < 4"
    assert str(simplify(E.Or(E.IntImm(0, bool_), j < 4))) == "j < 4"
    assert str(simplify(E.And(E.IntImm(0, bool_), j < 4))) == "false"
    assert type(simplify(E.IfThenElse(j < 4, i, j))) is E.IfThenElse


def test_bounds_treat_or_as_or():
    from loopnest.analysis.bounds import access_region
    from loopnest.stmt import Block, Cond, For, Store
    A8, B8 = Buffer("A", (8,), float32), Buffer("B", (8,), float32)
    k = Var("k")
    loop = For(k, 0, 8, Block([Cond((k < 2) | (k >= 6), Block([Store(B8, (k,), A8[k])]))]))
    assert [(str(m), str(e)) for m, e in access_region(loop, A8, [])] == [("0", "8")]


def test_visitors_and_mutators_keep_or_and_if_then_else():
    class OnlyAnd(E.ExprVisitor):
        def __init__(self):
            self.seen = []

        def visit_And(self, e):
            self.seen.append(e)
            self.generic(e)

    v = OnlyAnd()
    v.visit(E.Or(E.And(i < 1, j < 1), j < 2))
    assert len(v.seen) == 1 and type(v.seen[0]) is E.And
    k = Var("k")
    out = E.substitute(E.IfThenElse((i < 2) | (i >= 6), A[i], 0.0), {i: k})
    assert type(out) is E.IfThenElse and type(out.cond) is E.Or
    assert str(out) == "if_then_else(k < 2 || k >= 6, A[k], 0.0f)"


@pytest.mark.parametrize("e", SAMPLES, ids=lambda e: type(e).__name__)
def test_nodes_are_immutable(e):
    for name in ("dtype",) + tuple(type(e)._fields) + ("not_a_field",):
        before = getattr(e, name, None)
        with pytest.raises(AttributeError, match="immutable"):
            setattr(e, name, j)
        with pytest.raises(AttributeError, match="immutable"):
            delattr(e, name)
        assert getattr(e, name, None) is before
    with pytest.raises(AttributeError, match="immutable"):
        e.__setstate__((None, {"dtype": int32}))


def test_assignment_errors_name_the_node_and_suggest_replace():
    e = i + 1
    with pytest.raises(AttributeError, match=r"Add expressions are immutable: cannot set 'b'.*replace\(b="):
        e.b = i
    with pytest.raises(AttributeError, match="Var expressions are immutable: cannot set 'name'"):
        i.name = "x"
    assert str(e.replace(b=j)) == "i + j" and str(e) == "i + 1"


@pytest.mark.parametrize("e", SAMPLES, ids=lambda e: type(e).__name__)
def test_pickle_and_copy_round_trip(e):
    for other in (pickle.loads(pickle.dumps(e, protocol=pickle.HIGHEST_PROTOCOL)), copy.copy(e), copy.deepcopy(e)):
        assert type(other) is type(e)
        if not isinstance(e, E.Load):    # a pickled Load holds a copy of its buffer
            assert E.structural_equal(other, e)
        assert str(other) == str(e) and other.dtype == e.dtype
        with pytest.raises(AttributeError, match="immutable"):
            other.dtype = int32


def test_pickle_keeps_shared_subexpressions():
    s = i + j
    e = E.Select(s < 3, s, s * 2)
    back = pickle.loads(pickle.dumps(e, protocol=pickle.HIGHEST_PROTOCOL))
    assert back.t is back.cond.a is back.f.a
    assert back.t.a is not i  # variables are identities: unpickling makes new ones


def test_expr_doctests():
    res = doctest.testmod(importlib.import_module("te.expr"))
    assert res.failed == 0 and res.attempted > 0


def test_operators_still_build_the_same_nodes():
    assert type((i < 2) | (j < 3)) is E.Or and type((i < 2) & (j < 3)) is E.And
    assert type(te.if_then_else(i < 2, i, j)) is E.IfThenElse and type(te.select(i < 2, i, j)) is E.Select
    assert (i < j).dtype == bool_ and (E.Ramp(i, 1, 4) < E.Broadcast(j, 4)).dtype == bool_.with_lanes(4)
