"""Tests for te.queries: free variables, literal and folded integer constants, loads and
structural keys, with the distinctions each caller relies on (syntactic vs folded constants,
Let-bound variables, order of first appearance)."""
from __future__ import annotations

import doctest

import pytest
from hypothesis import given
from hypothesis import strategies as st

import te.queries as Q
from te import (Broadcast, Buffer, Cast, FloatImm, IntImm, Let, Ramp, Var, floordiv, floormod, int8, int32,
                int64, select, truncdiv, truncmod, uint8)
from te import expr as E
from te.queries import (fold_int, free_vars, has_load, int_value, loaded_buffers, loads, structural_equal,
                        structural_key, uses_var)
from te.simplify import simplify

i, j, n, t = Var("i"), Var("j"), Var("n"), Var("t")
A = Buffer("A", (16,), "float32")
B = Buffer("B", (16,), "int32")


def names(vs):
    return [v.name for v in vs]


def test_doctests():
    failures, attempted = doctest.testmod(Q)
    assert failures == 0 and attempted > 20


def test_every_public_function_has_an_example():
    for name in Q.__all__:
        if name in ("structural_key", "structural_equal"):
            continue  # re-exported from te.expr (documented and doctested there)
        assert ">>>" in (getattr(Q, name).__doc__ or ""), name


# ------------------------------------------------------------------------------------
# free_vars / uses_var
# ------------------------------------------------------------------------------------
def _walk_vars(exprs):
    """The reference the old helpers used: every Var node, first-appearance order."""
    out = {}
    for e in exprs:
        E.walk(e, lambda x: out.setdefault(id(x), x) if isinstance(x, Var) else None)
    return list(out.values())


def test_free_vars_order_and_dedup():
    e = (j * n + i) * (i + j)
    assert names(free_vars(e)) == ["j", "n", "i"]
    assert names(free_vars([i + 1, n * j, i])) == ["i", "n", "j"]
    assert free_vars(IntImm(3)) == [] and free_vars([]) == []


def test_free_vars_accepts_one_expr_or_iterable():
    assert names(free_vars(i + n)) == names(free_vars([i + n])) == names(free_vars(x for x in [i + n]))


def test_free_vars_bound_is_by_identity():
    other_i = Var("i")
    assert names(free_vars(i + other_i, bound=[i])) == ["i"]
    assert free_vars(i + other_i, bound={i})[0] is other_i
    assert free_vars(i + j, bound={i, j}) == []


def test_free_vars_let_bound_variables_are_not_free():
    e = Let(t, i * 2, t + n)
    assert names(free_vars(e)) == ["i", "n"]
    # the Let counts everywhere in the expressions (as the statement-level queries do)
    assert names(free_vars([t + 1, e])) == ["i", "n"]


def test_free_vars_inside_loads_and_vectors():
    e = A[B[i] + j] + select(n > 0, 1.0, 2.0)
    assert names(free_vars(e)) == ["i", "j", "n"]
    assert names(free_vars(A[Ramp(i * 4, 1, 4)] + Broadcast(FloatImm(1.0, "float32"), 4))) == ["i"]


def test_free_vars_matches_walk_without_lets():
    exprs = [A[B[i * n + j]] * 2.0, floordiv(i, 4) + floormod(j, n), Cast(int64, n) * 3]
    assert free_vars(exprs) == _walk_vars(exprs)


def test_uses_var():
    assert uses_var(i * 2, i) and not uses_var(i * 2, j)
    assert uses_var([j, A[i]], i)
    assert uses_var(Let(t, 1, i), t)     # occurrence of the Let's own variable counts
    assert not uses_var(IntImm(1), i)


# ------------------------------------------------------------------------------------
# constants
# ------------------------------------------------------------------------------------
def test_int_value_is_syntactic():
    assert int_value(IntImm(7)) == 7 and int_value(IntImm(-3, int8)) == -3
    assert int_value(IntImm(1, "bool")) == 1
    assert int_value(Broadcast(IntImm(3), 4)) == 3
    assert int_value(5) == 5 and int_value(__import__("numpy").int64(6)) == 6
    for e in (IntImm(3) + 1, Cast(int64, IntImm(3)), Var("i"), FloatImm(1.0, "float32"), True, 2.0, None,
              Broadcast(Var("x"), 4), Ramp(IntImm(0), 1, 4)):
        assert int_value(e) is None, e


def test_fold_int_folds_what_int_value_does_not():
    e = IntImm(3) * 4 - 2
    assert int_value(e) is None and fold_int(e) == 10


def test_fold_int_operators():
    c = IntImm
    assert fold_int(E.Min(c(8), c(5))) == 5 and fold_int(E.Max(c(8), c(5))) == 8
    assert fold_int(floordiv(c(-7), c(2))) == -4 and fold_int(floormod(c(-7), c(2))) == 1
    assert fold_int(truncdiv(c(-7), c(2))) == -3 and fold_int(truncmod(c(-7), c(2))) == -1
    assert fold_int(truncdiv(c(7), c(-2))) == -3 and fold_int(truncmod(c(7), c(-2))) == 1
    assert fold_int(Cast(int64, c(9))) == 9 and fold_int(Cast(int32, c(1, "bool"))) == 1


def test_fold_int_refuses_what_is_not_a_scalar_integer_constant():
    c = IntImm
    for e in (n + 1, A[i] > 0.0, c(1) < c(2), floordiv(c(1), c(0)), truncmod(c(1), c(0)),
              Broadcast(c(3), 4), Broadcast(c(3), 4) + Broadcast(c(1), 4), Cast("float32", c(3)),
              Cast(int32, FloatImm(3.0, "float32")), Cast("bool", c(3)), select(c(1) < c(2), c(1), c(2))):
        assert fold_int(e) is None, e


def test_fold_int_never_reports_a_wrapped_value():
    assert fold_int(IntImm(2 ** 30) * 4) is None                  # int32 overflow
    assert fold_int(IntImm(2 ** 30, int64) * 4) == 2 ** 32          # fits int64
    assert fold_int(Cast(int8, IntImm(300))) is None
    assert fold_int(Cast(uint8, IntImm(-1))) is None
    assert fold_int(IntImm(-2 ** 31) / -1) is None                  # INT_MIN / -1
    assert fold_int(IntImm(2 ** 31 - 1) + 1 - 1) is None            # an intermediate overflows


_OPS = [E.Add, E.Sub, E.Mul, E.Min, E.Max, E.FloorDiv, E.FloorMod, E.Div, E.Mod]


@st.composite
def const_exprs(draw, depth=3):
    if depth == 0 or draw(st.booleans()):
        return IntImm(draw(st.integers(-40, 40)), int32)
    op = draw(st.sampled_from(_OPS))
    return op(draw(const_exprs(depth - 1)), draw(const_exprs(depth - 1)))


@given(const_exprs())
def test_fold_int_agrees_with_the_simplifier(e):
    # small operands cannot overflow int32, so the wrapping simplifier and fold_int agree,
    # except that fold_int refuses divisions by zero (the simplifier never folds them)
    v = fold_int(e)
    s = simplify(e)
    if v is None:
        assert not isinstance(s, IntImm) or _has_zero_division(e)
    else:
        assert isinstance(s, IntImm) and s.value == v


def _has_zero_division(e) -> bool:
    found = []
    E.walk(e, lambda x: found.append(1) if type(x) in (E.FloorDiv, E.FloorMod, E.Div, E.Mod)
           and fold_int(x.b) == 0 else None)
    return bool(found)


# ------------------------------------------------------------------------------------
# loads
# ------------------------------------------------------------------------------------
def test_loads_preorder_with_repeats():
    e = A[B[i]] + A[i] + A[i]
    assert [str(x) for x in loads(e)] == ["A[B[i]]", "B[i]", "A[i]", "A[i]"]
    assert [str(x) for x in loads(e, B)] == ["B[i]"]
    assert loads(i + 1) == []


def test_loads_by_identity_not_name():
    A2 = Buffer("A", (16,), "float32")
    assert loads(A[i] + A2[i], A2)[0].buffer is A2 and len(loads(A[i] + A2[i], A2)) == 1


def test_has_load():
    assert has_load(A[i] * 2.0) and has_load([i, A[i]], A) and not has_load(A[i], B)
    assert has_load(A[B[i]], B)          # nested in an index
    assert not has_load([]) and not has_load(Let(t, i, t + 1))
    assert has_load(Let(t, B[i], t + 1), B)


def test_loaded_buffers_first_load_order():
    assert [b.name for b in loaded_buffers([B[i] + 1, A[B[j]] * A[i]])] == ["B", "A"]
    assert loaded_buffers(i + 1) == []


# ------------------------------------------------------------------------------------
# structural keys
# ------------------------------------------------------------------------------------
def test_structural_key_one_definition():
    assert Q.structural_key is E.structural_key and Q.structural_equal is E.structural_equal


def test_structural_key_by_name_and_by_identity():
    i2 = Var("i")
    assert structural_equal(i * 2 + 1, i2 * 2 + 1)
    assert structural_key(i * 2, vars_by_identity=True) != structural_key(i2 * 2, vars_by_identity=True)
    assert structural_key(i * 2, vars_by_identity=True) == structural_key(i * 2, vars_by_identity=True)
    assert structural_key(A[i]) == structural_key(A[i2])
    assert not structural_equal(i + 1, i + 2) and not structural_equal(i, Var("i", int64))


# ------------------------------------------------------------------------------------
# the names kept for importers
# ------------------------------------------------------------------------------------
def test_compatibility_names():
    from te.simplify import const_int as simplify_const_int, is_const_int
    from loopnest.analysis.domains import const_int as domains_const_int
    assert simplify_const_int is int_value and domains_const_int is fold_int
    assert is_const_int(IntImm(3), 3) and not is_const_int(IntImm(3) + 1)


@pytest.mark.parametrize("mod", ["te.expr", "te.simplify", "te.tensor"])
def test_users_import_cleanly(mod):
    import importlib
    assert importlib.import_module(mod)
