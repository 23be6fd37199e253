import numpy as np
import pytest

import te
from te import (Buffer, Var, bool_, cast, exp, float16, float32, float64, floordiv, floormod, if_then_else,
                int8, int32, int64, isnan, maximum, minimum, select, sqrt, truncdiv, truncmod)
from te.expr import (Add, Broadcast, Div, FloatImm, FloorDiv, IntImm, Mod, Ramp, structural_equal, substitute)


def test_operators_build_nodes_and_print():
    i, j = Var("i"), Var("j")
    e = (i + 1) * 2 - j % 3
    assert str(e) == "(i + 1) * 2 - j % 3"
    assert e.dtype == int32
    assert isinstance(i / 2, Div) and isinstance(i // 2, FloorDiv) and isinstance(i % 2, Mod)
    assert str(floordiv(i, 4)) == "floordiv(i, 4)"
    assert str(floormod(i, 4)) == "floormod(i, 4)"
    assert str(truncdiv(i, 4)) == "i / 4" and str(truncmod(i, 4)) == "i % 4"
    assert str((i < j) & (j >= 3)) == "i < j && j >= 3"
    assert str(i.eq(j) | i.ne(3)) == "i == j || i != 3"


def test_literals_take_the_other_operands_dtype():
    x = Var("x", float16)
    e = x * 2
    assert e.dtype == float16 and isinstance(e.b, FloatImm) and e.b.dtype == float16
    i = Var("i", int8)
    assert (i + 1).dtype == int8
    assert (3 - i).dtype == int8
    assert (Var("f", float32) + 2.0).dtype == float32


def test_float_literal_with_integer_expression_is_refused():
    with pytest.raises(TypeError, match="float literal 0.5 with int32 expression `i`"):
        Var("i") * 0.5
    # an integral float literal is fine
    assert (Var("i") * 2.0).dtype == int32


def test_mismatched_dtypes_name_both_operands():
    a, b = Var("a", float32), Var("b", float64)
    with pytest.raises(TypeError, match=r"`a` is float32, `b` is float64"):
        a + b
    with pytest.raises(TypeError, match="Mod needs integer operands"):
        a % a


def test_int_literal_out_of_range():
    with pytest.raises(TypeError, match="out of range for int8"):
        Var("i", int8) + 300


def test_truth_value_of_symbolic_expression_is_an_error():
    with pytest.raises(TypeError, match="truth value"):
        if Var("i") < 3:
            pass


def test_select_and_if_then_else_typing():
    i = Var("i")
    assert select(i < 3, i, 0).dtype == int32
    with pytest.raises(TypeError, match="condition"):
        select(i, i, 0)
    with pytest.raises(TypeError, match="different dtypes"):
        select(i < 3, i, Var("f", float32))
    assert str(if_then_else(i < 3, i, 0)) == "if_then_else(i < 3, i, 0)"


def test_intrinsics():
    x = Var("x", float32)
    assert str(exp(x) + sqrt(x)) == "exp(x) + sqrt(x)"
    assert isnan(x).dtype == bool_
    with pytest.raises(TypeError, match="exp needs a floating-point argument"):
        exp(Var("i"))
    assert str(maximum(x, 0.0)) == "max(x, 0.0f)"
    assert minimum(Var("i"), 7).dtype == int32
    assert te.abs(Var("i")).dtype == int32
    assert str(te.pow(x, 2.0)) == "pow(x, 2.0f)"


def test_cast():
    i = Var("i")
    c = cast(i, "float32")
    assert c.dtype == float32 and str(c) == "float32(i)"
    assert cast(i, int32) is i
    with pytest.raises(TypeError):
        cast(i, "float99")


def test_vectors():
    r = Ramp(Var("b"), 1, 4)
    assert r.dtype == te.int32.with_lanes(4)
    assert (r + 1).dtype.lanes == 4  # the literal becomes a Broadcast
    assert isinstance((r + 1).b, Broadcast)
    with pytest.raises(TypeError):
        Ramp(Var("b"), 1, 1)
    A = Buffer("A", (16,), "float32")
    assert A[r].dtype == float32.with_lanes(4)


def test_buffer_indexing_rank_check():
    A = Buffer("A", (4, 4), "float32")
    with pytest.raises(IndexError, match="A has 2 dimension"):
        A[1]
    with pytest.raises(TypeError, match="indices must be integers"):
        A[Var("x", float32), 0]


def test_substitute_and_structural_equality():
    i, j = Var("i"), Var("j")
    e = substitute(i * 2 + 1, {i: j + 3})
    assert str(e) == "(j + 3) * 2 + 1"
    assert structural_equal(i + 1, Var("i") + 1)
    assert not structural_equal(i + 1, i + 2)


@pytest.mark.parametrize("name", ["1abc", "a-b", "a b", "x;y", "", "a\nb", "A]{}"])
def test_invalid_names_are_rejected(name):
    with pytest.raises(ValueError, match="invalid"):
        Var(name)
    with pytest.raises(ValueError, match="invalid"):
        Buffer(name, (4,), "float32")


def test_numpy_scalars_are_literals():
    i = Var("i")
    assert (i + np.int64(3)).dtype == int32
    assert (Var("x", float32) * np.float32(2)).dtype == float32
