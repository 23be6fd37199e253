"""Tensors computed together by one loop nest: multi-output ``Compute`` (a body returning a
tuple) and tuple reductions (``ArgMax``, ``ArgMin``, a user ``TupleReducer``).

Each output is an ordinary ``Tensor``; its ``group`` (a ``TensorGroup``) lists the tensors
computed with it, and lowering stores all of them in one loop nest.

>>> from te import Buffer, Compute, Reduce, ArgMax
>>> A = Buffer("A", (4, 8), "float32")
>>> Q, R = Compute(("Q", "R"), (4,), lambda i: (A[i, 0] * 2.0, A[i, 1] + 1.0))
>>> Q.group is R.group, Q.group.members == (Q, R)
(True, True)
>>> AI, AV = Reduce("AM", (4,), ArgMax(), lambda i, k: A[i, k], (8,))
>>> AI.name, AI.dtype, AV.name, AV.dtype
('AM_index', int32, 'AM_value', float32)
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .dtypes import Dtype, as_dtype, int32, int64
from .expr import Cast, Expr, Var, as_expr, check_identifier, const
from .queries import uses_var

__all__ = ["TensorGroup", "TupleReducer", "ArgMax", "ArgMin", "argmax", "argmin"]


class TensorGroup:
    """Tensors computed by one loop nest (the outputs of one multi-output ``Compute`` or one
    tuple reduction). ``update_order`` is the order of a tuple reduction's accumulating
    stores: each store comes before the stores of the accumulators its new value reads, so
    every new value is computed from the old accumulators.

    >>> from te import Buffer, Compute
    >>> A = Buffer("A", (4,), "int32")
    >>> Q, R = Compute(("Q", "R"), (4,), lambda i: (A[i] // 3, A[i] % 3))
    >>> [t.name for t in Q.group.members], Q.group.reducer is None
    (['Q', 'R'], True)
    """

    def __init__(self, members: Sequence[Any], reducer: "TupleReducer | None" = None,
                 update_order: Sequence[int] = ()):
        self.members = tuple(members)
        self.reducer = reducer
        self.update_order = tuple(update_order)

    def __repr__(self) -> str:
        return f"TensorGroup({', '.join(t.name for t in self.members)})"


def _identity_exprs(values: Any, dtypes: Sequence[Dtype], what: str) -> tuple[Expr, ...]:
    values = values(tuple(dtypes)) if callable(values) else values
    if not isinstance(values, (tuple, list)) or len(values) != len(dtypes):
        raise TypeError(f"{what}: the identity must be a tuple of {len(dtypes)} values, got {values!r}")
    return tuple(v if isinstance(v, Expr) else const(v, dt) for v, dt in zip(values, dtypes))


class TupleReducer:
    """A reduction carrying several values (like TVM's ``comm_reducer`` over tuples).

    ``combine(accs, xs)`` returns the new accumulators (a tuple) from the old ones and one
    element's values, each a tuple of expressions; it must be associative and must not
    depend on the order of the elements beyond what the loops give (reduction loops run in
    increasing order unless a schedule reorders them). ``identity`` is a tuple of values or
    a function of the tuple of dtypes returning one. ``names`` are the suffixes of the
    output tensors (``Reduce("S", ...)`` makes ``S_<name>`` for each); the body of the
    ``Reduce`` returns one expression per value.

    >>> from te import Buffer, Reduce, select
    >>> A = Buffer("A", (4, 8), "float32")
    >>> # the sum of the values and the index of the last positive one
    >>> r = TupleReducer(lambda a, x: (a[0] + x[0], select(x[0] > 0.0, x[1], a[1])), (0.0, -1),
    ...                  names=("sum", "last"))
    >>> S, L = Reduce("S", (4,), r, lambda i, k: (A[i, k], k), (8,))
    >>> S.name, L.name, L.dtype
    ('S_sum', 'S_last', int32)
    """

    def __init__(self, combine: Callable[[tuple, tuple], Any], identity: Any,
                 names: Sequence[str] | None = None, name: str = "tuple_reducer"):
        if not callable(combine):
            raise TypeError("TupleReducer combine must be a function (accs, xs) -> tuple of expressions")
        self.combine_fn = combine
        self.identity_value = identity
        self.names = tuple(names) if names is not None else None
        self.name = name

    def operands(self, body: Any, index: Expr, what: str) -> tuple[Expr, ...]:
        """The values one element contributes, from the body's result (``index`` is the
        row-major position of the element in the reduction domain)."""
        if not isinstance(body, (tuple, list)) or not body:
            raise TypeError(f"{what}: the body of a {self.name} reduction must return a tuple of expressions, "
                            f"got {body!r}")
        return tuple(as_expr(b) for b in body)

    def identity(self, dtypes: Sequence[Dtype]) -> tuple[Expr, ...]:
        return _identity_exprs(self.identity_value, dtypes, self.name)

    def combine(self, accs: Sequence[Expr], xs: Sequence[Expr]) -> tuple[Expr, ...]:
        out = self.combine_fn(tuple(accs), tuple(xs))
        if not isinstance(out, (tuple, list)) or len(out) != len(accs):
            raise TypeError(f"{self.name} combine must return a tuple of {len(accs)} expressions, got {out!r}")
        out = tuple(as_expr(o, a) for o, a in zip(out, accs))
        for k, (o, a) in enumerate(zip(out, accs)):
            if o.dtype != a.dtype:
                raise TypeError(f"{self.name} combine returned {o.dtype} for value {k}, expected {a.dtype}")
        return out

    def suffixes(self, n: int) -> tuple[str, ...]:
        if self.names is None:
            return tuple(str(k) for k in range(n))
        if len(self.names) != n:
            raise TypeError(f"{self.name} names {len(self.names)} values ({', '.join(self.names)}), "
                            f"the body returns {n}")
        return self.names

    def __repr__(self) -> str:
        return f"{type(self).__name__}()" if type(self) is not TupleReducer else f"TupleReducer({self.name})"


def _extreme(dt: Dtype, lowest: bool):
    if dt.is_float and dt.kind != "float8_e4m3":
        return float("-inf") if lowest else float("inf")
    return dt.min_value() if lowest else dt.max_value()


class _ArgBest(TupleReducer):
    _lowest = True

    def __init__(self):
        super().__init__(self._combine, self._identity, names=("index", "value"), name=type(self).__name__)

    def operands(self, body, index, what):
        if isinstance(body, (tuple, list)):
            raise TypeError(f"{what}: the body of an {self.name} reduction returns the one value compared, "
                            f"got a tuple {body!r}")
        return (index, as_expr(body))

    def _identity(self, dtypes):
        return (0, _extreme(dtypes[1], self._lowest))

    def _combine(self, accs, xs):
        from .expr import logical_and, logical_not, logical_or
        from .intrinsics import isnan, select
        (ai, av), (xi, xv) = accs, xs
        better = xv > av if self._lowest else xv < av
        if xv.dtype.is_float:   # a NaN beats every number; the first NaN wins
            better = logical_or(better, logical_and(isnan(xv), logical_not(isnan(av))))
        return (select(better, xi, ai), select(better, xv, av))


class ArgMax(_ArgBest):
    """The index and the value of the largest element, as ``numpy.argmax``: the first index
    wins among equal values, a NaN counts as larger than every number (the first NaN wins),
    and an empty reduction gives index 0 and the dtype's lowest value. The index is the
    row-major position in the reduction domain, of dtype int32 (int64 when a reduction
    dimension is int64). ``Reduce`` with it returns ``(index tensor, value tensor)``.

    >>> from te import Buffer, Reduce
    >>> A = Buffer("A", (4, 8), "float32")
    >>> I, V = Reduce("AM", (4,), ArgMax(), lambda i, k: A[i, k], (8,))
    >>> I.name, V.name
    ('AM_index', 'AM_value')
    """

    _lowest = True


class ArgMin(_ArgBest):
    """The index and the value of the smallest element, as ``numpy.argmin`` (the first index
    wins among equal values, the first NaN wins over every number). See ``ArgMax``.

    >>> from te import Buffer, Reduce
    >>> A = Buffer("A", (4, 8), "float32")
    >>> I, V = Reduce(("I", "V"), (4,), ArgMin(), lambda i, k: A[i, k], (8,))
    >>> I.name, V.name
    ('I', 'V')
    """

    _lowest = False


def update_order(reducer: TupleReducer, dtypes: Sequence[Dtype], what: str) -> tuple[int, ...]:
    """The order of the accumulating stores of a tuple reduction: store j comes before store
    k when the new value of j reads accumulator k. Raises ValueError when the new values
    read each other's accumulators in a cycle.

    >>> update_order(ArgMax(), (int32, as_dtype("float32")), "AM")
    (0, 1)
    """
    accs = [Var(f"acc{k}", dt) for k, dt in enumerate(dtypes)]
    xs = [Var(f"x{k}", dt) for k, dt in enumerate(dtypes)]
    new = reducer.combine(accs, xs)
    n = len(dtypes)
    before = {k: {j for j in range(n) if j != k and uses_var(new[j], accs[k])} for k in range(n)}
    order: list[int] = []
    while len(order) < n:
        ready = [k for k in range(n) if k not in order and before[k] <= set(order)]
        if not ready:
            left = [k for k in range(n) if k not in order]
            raise ValueError(f"{what}: the new values {left} of the {reducer.name} combiner read each other's "
                             "accumulators in a cycle, so no order of their stores computes each from the old "
                             "values; rewrite the combiner so that the values it updates last are read by the "
                             "others, not the other way round")
        order.append(ready[0])
    return tuple(order)


def _names(name: Any, suffixes: Sequence[str], what: str) -> tuple[str, ...]:
    if isinstance(name, str):
        check_identifier(name, "tensor")
        return tuple(f"{name}_{s}" for s in suffixes)
    names = tuple(name)
    if len(names) != len(suffixes):
        raise ValueError(f"{what} has {len(suffixes)} outputs, {len(names)} names were given: {names}")
    for n in names:
        check_identifier(n, "tensor")
    return names


def _dtypes(dtype: Any, values: Sequence[Expr], what: str) -> tuple[Dtype, ...]:
    if dtype is None:
        return tuple(v.dtype for v in values)
    if not isinstance(dtype, (tuple, list)) or len(dtype) != len(values):
        raise TypeError(f"{what}: dtype must be a tuple of {len(values)} dtypes (one per output), got {dtype!r}")
    return tuple(v.dtype if d is None else as_dtype(d) for d, v in zip(dtype, values))


def compute_group(names: Sequence[str], shape, args: Sequence[Var], values: Sequence[Expr], dtype: Any):
    """The tensors of a multi-output Compute (called by ``te.Compute``)."""
    from .tensor import Tensor
    what = f"Compute({', '.join(names)})"
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: the outputs need distinct names")
    dts = _dtypes(dtype, values, what)
    members = []
    for n, v, dt in zip(names, values, dts):
        if v.dtype.is_vector:
            raise TypeError(f"{what}: output {n} is a vector ({v.dtype}); a multi-output Compute makes scalar elements")
        members.append(Tensor(n, shape, dt, args, v if v.dtype == dt else Cast(dt, v)))
    group = TensorGroup(members)
    for t in members:
        t.group = group
    return tuple(members)


def reduce_group(name: Any, shape, reducer: TupleReducer, args, rargs, rdims, body: Any, dtype: Any):
    """The tensors of a tuple reduction (called by ``te.Reduce``)."""
    from .tensor import Tensor
    what = f"Reduce({name})"
    idt = int64 if any(r.dtype.bits > 32 for r in rargs) else int32
    index: Expr = Cast(idt, rargs[0]) if rargs[0].dtype != idt else rargs[0]
    for r, d in zip(rargs[1:], rdims[1:]):
        index = index * (Cast(idt, d) if d.dtype != idt else d) + (Cast(idt, r) if r.dtype != idt else r)
    values = reducer.operands(body, index, what)
    names = _names(name, reducer.suffixes(len(values)), what)
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: the outputs need distinct names, got {names}")
    dts = _dtypes(dtype, values, what)
    values = tuple(v if v.dtype == dt else Cast(dt, v) for v, dt in zip(values, dts))
    for v in values:
        if v.dtype.is_vector:
            raise TypeError(f"{what}: value `{v}` is a vector ({v.dtype}); tuple reductions reduce scalars")
    order = update_order(reducer, dts, what)
    reducer.identity(dts)   # check the identity now
    members = [Tensor(n, shape, dt, args, v, reducer, rargs, rdims) for n, v, dt in zip(names, values, dts)]
    group = TensorGroup(members, reducer, order)
    for t in members:
        t.group = group
    return tuple(members)


def argmax(name: Any, shape: Sequence[Any], fn: Callable[..., Any], reduce_shape: Sequence[Any],
           dtype: Any = None):
    """``Reduce(name, shape, ArgMax(), fn, reduce_shape)``: the index tensor and the value
    tensor of the largest element (see ``ArgMax`` for the tie and NaN rules).

    >>> from te import Buffer
    >>> A = Buffer("A", (4, 8), "float32")
    >>> I, V = argmax("AM", (4,), lambda i, k: A[i, k], (8,))
    >>> I.name, I.reduce_dims
    ('AM_index', (8,))
    """
    from .tensor import Reduce
    return Reduce(name, shape, ArgMax(), fn, reduce_shape, dtype=None if dtype is None else (None, dtype))


def argmin(name: Any, shape: Sequence[Any], fn: Callable[..., Any], reduce_shape: Sequence[Any],
           dtype: Any = None):
    """``Reduce(name, shape, ArgMin(), fn, reduce_shape)``: the index tensor and the value
    tensor of the smallest element (see ``ArgMin``).

    >>> from te import Buffer
    >>> A = Buffer("A", (4, 8), "int32")
    >>> I, V = argmin("Am", (4,), lambda i, k: A[i, k], (8,))
    >>> V.dtype
    int32
    """
    from .tensor import Reduce
    return Reduce(name, shape, ArgMin(), fn, reduce_shape, dtype=None if dtype is None else (None, dtype))
