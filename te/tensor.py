"""Buffers, tensors and reductions: what users write.

>>> from te import Var, Buffer, Compute, Reduce, Sum, int32, float32
>>> N = Var("N", int32)
>>> A = Buffer("A", (N, 64), float32)
>>> B = Compute("B", (N, 64), lambda i, j: A[i, j] * 2.0 + 1.0)
>>> C = Reduce("C", (N,), Sum(), lambda i, k: B[i, k], (64,))
>>> print(B[0, 1])
B[0, 1]
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Sequence

from .dtypes import Dtype, as_dtype, int32, int64
from .expr import Cast, Expr, IntImm, Load, Var, as_expr, check_identifier
from .queries import loaded_buffers

__all__ = ["Buffer", "Tensor", "Compute", "Reduce", "Reducer", "Sum", "Max", "Min", "Prod"]


def _as_dim(d: Any, name: str, k: int) -> Expr:
    if isinstance(d, bool):
        raise TypeError(f"dimension {k} of {name} must be an integer or an integer Var, got {d!r}")
    try:
        e = as_expr(d)
    except TypeError:
        raise TypeError(f"dimension {k} of {name} must be an integer or an integer Var, got {d!r}") from None
    if not e.dtype.is_integer or e.dtype.is_vector:
        raise TypeError(f"dimension {k} of {name} must be a scalar integer, got `{e}` of dtype {e.dtype}")
    if isinstance(e, IntImm) and e.value < 0:
        raise ValueError(f"dimension {k} of {name} is negative ({e.value})")
    return e


def _index_dtype(d: Any, name: str, k: int) -> Dtype:
    """The dtype of the index variable that runs over dimension ``d``: int64 when the
    dimension is an int64 expression or a constant past int32, int32 otherwise.

    >>> _index_dtype(Var("N", "int64"), "C", 0), _index_dtype(8, "C", 0)
    (int64, int32)
    """
    e = _as_dim(d, name, k)
    if e.dtype.bits > 32 or (isinstance(e, IntImm) and e.value > 2**31 - 1):
        return int64
    return int32


class Buffer:
    """A named n-dimensional array of one dtype: a kernel input/output or, as the
    ``buffer`` of a ``Tensor``, a computed intermediate.

    Dimensions may be ints or symbolic ``Var``s. ``layout`` (a ``te.layout.Layout``) maps
    indices to memory when it is not the default row-major one.

    >>> A = Buffer("A", (4, 8), "float32")
    >>> A.shape, A.ndim, A.dtype
    ((4, 8), 2, float32)
    >>> print(A[1, 2] + 1.0)
    A[1, 2] + 1.0f
    """

    def __init__(self, name: str, shape: Sequence[Any], dtype: Any = "float32", layout: Any = None):
        self.name = check_identifier(name, "buffer")
        if isinstance(shape, (int, Expr)):
            shape = (shape,)
        self.dims: tuple[Expr, ...] = tuple(_as_dim(d, name, k) for k, d in enumerate(shape))
        self.dtype: Dtype = as_dtype(dtype)
        self.layout = layout
        if layout is not None:
            self._check_layout(layout)

    def _check_layout(self, layout):
        from .layout import Layout  # local: layouts are optional for most buffers
        if not isinstance(layout, Layout):
            raise TypeError(f"layout of {self.name} must be a te.layout.Layout, got {type(layout).__name__}")

    # -- shape ---------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        """Dimensions as ints where constant, else expressions."""
        return tuple(d.value if isinstance(d, IntImm) else d for d in self.dims)

    @property
    def ndim(self) -> int:
        return len(self.dims)

    def static_size(self) -> int | None:
        """Number of elements when every dimension is constant, else None."""
        if all(isinstance(d, IntImm) for d in self.dims):
            return math.prod(d.value for d in self.dims)
        return None

    # -- indexing -------------------------------------------------------------------
    def __getitem__(self, idx) -> Load:
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) != self.ndim:
            raise IndexError(f"{self.name} has {self.ndim} dimension(s) but was indexed with {len(idx)} "
                             f"index(es): {self.name}[{', '.join(str(i) for i in idx)}]")
        return Load(self, idx)

    def load(self, *idx) -> Load:
        """``A.load(i, j)`` is ``A[i, j]``."""
        return self[idx]

    def as_expr(self) -> Expr:
        if self.ndim == 0:
            return Load(self, ())
        raise TypeError(f"buffer {self.name} has {self.ndim} dimension(s): index it, e.g. {self.name}[i]")

    def __repr__(self) -> str:
        dims = ", ".join(str(d) for d in self.dims)
        return f"Buffer({self.name}, ({dims}), {self.dtype})"

    # arithmetic on a 0-d buffer reads its single element
    def _scalar(self):
        return self.as_expr()

    def __add__(self, o): return self._scalar() + o
    def __radd__(self, o): return o + self._scalar()
    def __sub__(self, o): return self._scalar() - o
    def __rsub__(self, o): return o - self._scalar()
    def __mul__(self, o): return self._scalar() * o
    def __rmul__(self, o): return o * self._scalar()
    def __truediv__(self, o): return self._scalar() / o
    def __rtruediv__(self, o): return o / self._scalar()


class Tensor(Buffer):
    """A buffer defined by an expression over its indices (made by ``Compute`` / ``Reduce``).

    ``args`` are the index variables, ``body`` the value stored at ``self[args]``. For a
    reduction, ``reduce_args`` range over ``reduce_dims`` and ``reducer`` combines the
    values of ``body`` into the element.
    """

    def __init__(self, name, dims, dtype, args, body, reducer=None, reduce_args=(), reduce_dims=()):
        super().__init__(name, dims, dtype)
        self.args: tuple[Var, ...] = tuple(args)
        self.body: Expr = body
        self.reducer: Reducer | None = reducer
        self.reduce_args: tuple[Var, ...] = tuple(reduce_args)
        self.reduce_dims: tuple[Expr, ...] = tuple(reduce_dims)
        #: the tensors computed with this one by one loop nest (``te.multi.TensorGroup``), or None
        self.group = None

    @property
    def is_reduction(self) -> bool:
        return self.reducer is not None

    @property
    def buffer(self) -> "Tensor":
        return self

    def inputs(self) -> list[Buffer]:
        """Buffers (and tensors) read by the body (by the bodies of its group), in first-use order."""
        bodies = [t.body for t in self.group.members] if self.group is not None else [self.body]
        return loaded_buffers([*bodies, *self.dims, *self.reduce_dims])

    def __repr__(self) -> str:
        kind = "Reduce" if self.is_reduction else "Compute"
        return f"{kind}({self.name}, ({', '.join(str(d) for d in self.dims)}), {self.dtype})"


def _arg_names(fn: Callable, n: int, default: str) -> list[str]:
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    if len(params) >= n and all(p.kind != p.VAR_POSITIONAL for p in params[:n]):
        names = [p.name for p in params[:n]]
        if all(check_identifier_ok(x) for x in names):
            return names
    return [f"{default}{k}" for k in range(n)]


def check_identifier_ok(name: str) -> bool:
    try:
        check_identifier(name, "index")
        return True
    except ValueError:
        return False


def _call_body(fn: Callable, args: Sequence[Var], name: str, multi: int | None = None) -> Any:
    """The body's expression; with ``multi``, the tuple of that many expressions it returns
    (``multi=-1``: the raw result, for a tuple reducer to interpret)."""
    if not callable(fn):
        raise TypeError(f"the body of {name} must be a function of the indices, got {type(fn).__name__}")
    try:
        body = fn(*args)
    except TypeError as exc:
        if "positional argument" in str(exc):
            raise TypeError(f"the body function of {name} must take {len(args)} index argument(s): {exc}") from None
        raise
    if multi == -1:
        return body
    if multi is not None:
        if not isinstance(body, (tuple, list)) or len(body) != multi:
            raise TypeError(f"the body function of {name} must return a tuple of {multi} expressions "
                            f"(one per output), got {body!r}")
        return tuple(as_expr(b) for b in body)
    if isinstance(body, (tuple, list)):
        raise TypeError(f"the body function of {name} returned a tuple; give a tuple of names to make "
                        "several outputs: Compute((\"Q\", \"R\"), shape, lambda i: (..., ...))")
    return as_expr(body)


def Compute(name: str | Sequence[str], shape: Sequence[Any], fn: Callable[..., Any], dtype: Any = None):
    """Define a tensor by a function of its indices.

    ``dtype`` defaults to the body's dtype; when given and different, the body is cast.
    A vector body (``float32x4``) makes a tensor of vector elements, one per index.

    With a tuple of names, the body returns a tuple of expressions (one per name) and
    Compute returns a tuple of tensors computed by one loop nest (``dtype`` is then None or
    a tuple of dtypes); see ``te.multi``.

    >>> A = Buffer("A", (4,), "float32")
    >>> B = Compute("B", (4,), lambda i: A[i] * 2.0)
    >>> B.dtype, B.args[0].name
    (float32, 'i')
    >>> Q, R = Compute(("Q", "R"), (4,), lambda i: (A[i] * 2.0, i))
    >>> Q.dtype, R.dtype
    (float32, int32)
    """
    multi = not isinstance(name, str)
    label = ", ".join(name) if multi else name
    if not multi:
        check_identifier(name, "tensor")
    if isinstance(shape, (int, Expr)):
        shape = (shape,)
    names = _arg_names(fn, len(shape), "i")
    args = [Var(n, _index_dtype(d, label, k)) for k, (n, d) in enumerate(zip(names, shape))]
    if multi:
        from .multi import compute_group
        outs = tuple(name)
        values = _call_body(fn, args, label, multi=len(outs))
        for n in outs:
            check_identifier(n, "tensor")
        return compute_group(outs, shape, args, values, dtype)
    body = _call_body(fn, args, name)
    dt = as_dtype(dtype) if dtype is not None else body.dtype
    if body.dtype.is_vector and dt.is_scalar:   # a vector body makes a tensor of vector elements
        dt = dt.with_lanes(body.dtype.lanes)
    if body.dtype != dt:
        body = Cast(dt, body)
    return Tensor(name, shape, dt, args, body)


class Reducer:
    """A reduction: an associative ``combine(acc, x)`` and its ``identity``.

    ``identity`` is a value or a function of the dtype returning one.

    >>> from te import maximum
    >>> absmax = Reducer(lambda a, b: maximum(a, b), 0.0)
    """

    def __init__(self, combine: Callable[[Expr, Expr], Any], identity: Any, name: str = "reducer"):
        if not callable(combine):
            raise TypeError("Reducer combine must be a function (acc, x) -> expression")
        self.combine_fn = combine
        self.identity_value = identity
        self.name = name

    def identity(self, dtype: Dtype) -> Expr:
        v = self.identity_value(dtype) if callable(self.identity_value) else self.identity_value
        from .expr import const
        return v if isinstance(v, Expr) else const(v, dtype)

    def combine(self, acc: Expr, x: Expr) -> Expr:
        out = as_expr(self.combine_fn(acc, x), acc)
        if out.dtype != acc.dtype:
            raise TypeError(f"{self.name} combine returned {out.dtype}, expected {acc.dtype}")
        return out

    def __repr__(self):
        return f"{type(self).__name__}()" if type(self) is not Reducer else f"Reducer({self.name})"


def _lowest(dt: Dtype):
    return float("-inf") if dt.is_float and dt.kind not in ("float8_e4m3",) else dt.min_value()


def _highest(dt: Dtype):
    return float("inf") if dt.is_float and dt.kind not in ("float8_e4m3",) else dt.max_value()


class Sum(Reducer):
    """Sum reduction (identity 0)."""

    def __init__(self):
        super().__init__(lambda a, b: a + b, 0, "sum")


class Prod(Reducer):
    """Product reduction (identity 1)."""

    def __init__(self):
        super().__init__(lambda a, b: a * b, 1, "prod")


class Max(Reducer):
    """Max reduction (identity -inf, or the type's minimum for integers)."""

    def __init__(self):
        from .expr import Max as MaxE
        super().__init__(lambda a, b: MaxE(a, b), _lowest, "max")


class Min(Reducer):
    """Min reduction (identity +inf, or the type's maximum for integers)."""

    def __init__(self):
        from .expr import Min as MinE
        super().__init__(lambda a, b: MinE(a, b), _highest, "min")


def Reduce(name: str | Sequence[str], shape: Sequence[Any], reducer: Any, fn: Callable[..., Any],
           reduce_shape: Sequence[Any], dtype: Any = None):
    """Define a tensor by reducing ``fn(*out_indices, *reduce_indices)`` over ``reduce_shape``.

    With a tuple reducer (``te.ArgMax()``, ``te.ArgMin()``, a ``te.TupleReducer``) it returns
    a tuple of tensors computed by one loop nest, named ``name_<value>`` (or by a tuple of
    names); ``dtype`` is then None or a tuple of dtypes. See ``te.multi``.

    >>> A = Buffer("A", (4, 8), "float32")
    >>> C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (8,))
    >>> C.reduce_args[0].name
    'k'
    """
    from .multi import TupleReducer, reduce_group
    tuple_red = isinstance(reducer, TupleReducer)
    label = name if isinstance(name, str) else ", ".join(name)
    if not tuple_red:
        check_identifier(name, "tensor")
    if not (tuple_red or isinstance(reducer, Reducer)):
        raise TypeError(f"reducer of {label} must be a Reducer (Sum(), Max(), ...) or a TupleReducer (ArgMax(), "
                        f"ArgMin(), ...), got {reducer!r}")
    if isinstance(shape, (int, Expr)):
        shape = (shape,)
    if isinstance(reduce_shape, (int, Expr)):
        reduce_shape = (reduce_shape,)
    if len(reduce_shape) == 0:
        raise ValueError(f"reduction {label} needs at least one reduction dimension")
    n, r = len(shape), len(reduce_shape)
    names = _arg_names(fn, n + r, "i")
    args = [Var(x, _index_dtype(d, label, k)) for k, (x, d) in enumerate(zip(names[:n], shape))]
    rargs = [Var(x, _index_dtype(d, label, k)) for k, (x, d) in enumerate(zip(names[n:], reduce_shape))]
    if tuple_red:
        rdims = tuple(_as_dim(d, label, k) for k, d in enumerate(reduce_shape))
        body = _call_body(fn, args + rargs, label, multi=-1)
        return reduce_group(name, shape, reducer, args, rargs, rdims, body, dtype)
    body = _call_body(fn, args + rargs, name)
    dt = as_dtype(dtype) if dtype is not None else body.dtype
    if body.dtype != dt:
        body = Cast(dt, body)
    rdims = tuple(_as_dim(d, name, k) for k, d in enumerate(reduce_shape))
    t = Tensor(name, shape, dt, args, body, reducer, rargs, rdims)
    reducer.combine(Var("acc", dt), Var("x", dt))  # type-check the combiner now
    return t
