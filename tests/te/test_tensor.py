import pytest

from te import Buffer, Compute, Max, Min, Prod, Reduce, Reducer, Sum, Var, float32, int32, maximum
from te.expr import Cast


def test_compute_names_indices_after_the_lambda_parameters():
    A = Buffer("A", (4, 8), "float32")
    B = Compute("B", (4, 8), lambda row, col: A[row, col] + 1.0)
    assert [a.name for a in B.args] == ["row", "col"]
    assert str(B.body) == "A[row, col] + 1.0f"
    assert B.dtype == float32 and B.shape == (4, 8)
    assert B.inputs() == [A]


def test_compute_with_dtype_casts_the_body():
    B = Compute("B", (4,), lambda i: i * 2, dtype="float32")
    assert isinstance(B.body, Cast) and B.dtype == float32


def test_compute_body_arity_error():
    with pytest.raises(TypeError, match="2 index argument"):
        Compute("B", (4, 4), lambda i: i)


def test_symbolic_dims():
    N = Var("N")
    A = Buffer("A", (N, 3), "float32")
    assert A.shape[0] is N and A.shape[1] == 3
    assert A.static_size() is None
    assert Buffer("B", (2, 3)).static_size() == 6


def test_bad_dims():
    with pytest.raises(TypeError, match="dimension 0 of A"):
        Buffer("A", (1.5,))
    with pytest.raises(ValueError, match="negative"):
        Buffer("A", (-1,))
    with pytest.raises(TypeError, match="dimension 1 of A"):
        Buffer("A", (2, Var("x", float32)))


def test_reduce():
    A = Buffer("A", (4, 8), "float32")
    C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (8,))
    assert C.is_reduction and [v.name for v in C.reduce_args] == ["k"]
    assert str(C.reducer.identity(float32)) == "0.0f"
    assert str(Max().identity(float32)) == "-inff"
    assert Max().identity(int32).value == -(2 ** 31)
    assert Min().identity(int32).value == 2 ** 31 - 1
    assert str(Prod().identity(float32)) == "1.0f"


def test_custom_reducer():
    absmax = Reducer(lambda a, b: maximum(a, b), 0.0, name="absmax")
    A = Buffer("A", (4, 8), "float32")
    C = Reduce("C", (4,), absmax, lambda i, k: A[i, k], (8,))
    acc = Var("acc", float32)
    assert str(C.reducer.combine(acc, A[0, 1])) == "max(acc, A[0, 1])"


def test_reduce_errors():
    A = Buffer("A", (4, 8), "float32")
    with pytest.raises(TypeError, match="must be a Reducer"):
        Reduce("C", (4,), "sum", lambda i, k: A[i, k], (8,))
    with pytest.raises(ValueError, match="at least one reduction dimension"):
        Reduce("C", (4,), Sum(), lambda i: A[i, 0], ())
