"""te.functor: the one dispatch mechanism of visitors, mutators, analyses and printers."""
from __future__ import annotations

import doctest

import pytest

import te.functor
from te import Var
from te.expr import Add, ExprMutator, ExprVisitor, IfThenElse, IntImm, Mul, Select
from te.functor import Functor


class Names(Functor):
    def visit_Var(self, e, depth):
        return [(e.name, depth)]

    def generic(self, e, depth):
        return [x for c in e.children() for x in self.visit(c, depth + 1)]


def test_dispatch_is_by_exact_class_with_extra_arguments():
    i, j = Var("i"), Var("j")
    assert Names().visit(i * 2 + j, 0) == [("i", 2), ("j", 1)]


def test_the_table_is_filled_once_per_node_class_and_kept_per_functor_class():
    class Other(Functor):
        def generic(self, e):
            return "other"

    Names().visit(Var("i") + 1, 0)
    assert Names._table[Var] is Names.visit_Var and Names._table[Add] is Names.generic
    assert Add not in Other._table
    assert Other().visit(Var("i") + 1) == "other" and Other._table[Add] is Other.generic


def test_sibling_node_classes_do_not_share_handlers():
    class Kind(Functor):
        def visit_Select(self, e):
            return "select"

        def generic(self, e):
            return type(e).__name__

    i = Var("i")
    assert Kind().visit(Select(i < 2, i, 0)) == "select"
    assert Kind().visit(IfThenElse(i < 2, i, 0)) == "IfThenElse"
    assert Kind().visit((i < 2) | (i > 5)) == "Or"


def test_memoize_visits_a_shared_subexpression_once():
    calls = []

    class Rename(ExprMutator):
        memoize = True

        def visit_Mul(self, e):
            calls.append(e)
            return self.generic(e)

        def visit_Var(self, e):
            return Var(e.name + "2")

    i = Var("i")
    shared = i * 3
    out = Rename().visit(shared + shared)
    assert len(calls) == 1
    assert out.a is out.b and isinstance(out.a, Mul) and out.a.a.name == "i2"


def test_a_functor_without_generic_names_the_missing_method():
    with pytest.raises(NotImplementedError, match="visit_IntImm"):
        Functor().visit(IntImm(1))


def test_expression_and_statement_visitors_are_functors():
    from loopnest.stmt import StmtMutator, StmtVisitor
    assert all(issubclass(c, Functor) for c in (ExprVisitor, ExprMutator, StmtVisitor, StmtMutator))


def test_doctests():
    assert doctest.testmod(te.functor).failed == 0
