"""Send a computation (its output tensors and kernel arguments) to another process.

Tensors hold their bodies as expressions, which pickle; only a ``Reducer`` holds Python
functions (its combiner and identity). A reducer is sent as expressions instead: its
combiner applied to two placeholder variables, and its identity, for every dtype it is
used with in the computation. The receiving side gets an ``ExprReducer`` that computes the
same expressions, so the lowered nests (and their printed text) are identical.

>>> from te import Buffer, Reduce, Sum
>>> A = Buffer("A", (4, 8), "float32")
>>> C = Reduce("C", (4,), Sum(), lambda i, k: A[i, k], (8,))
>>> outputs, args = loads_computation(dumps_computation([C], [A, C]))
>>> outputs[0].name, [a.name for a in args]
('C', ['A', 'C'])
"""
from __future__ import annotations

import io
import pickle
from typing import Any, Sequence

from te.dtypes import Dtype
from te.expr import Expr, Var, substitute
from te.tensor import Buffer, Reducer, Tensor

__all__ = ["dumps_computation", "loads_computation", "ExprReducer"]


class ExprReducer(Reducer):
    """A reducer given by expressions per dtype: ``{dtype name: (acc, x, combined, identity)}``."""

    def __init__(self, name: str, forms: dict[str, tuple[Var, Var, Expr, Expr]]):
        super().__init__(self._combine, self._identity, name)
        self.forms = forms

    def _form(self, dtype: Dtype):
        try:
            return self.forms[dtype.name]
        except KeyError:
            raise TypeError(f"reducer {self.name} was serialised for dtypes {sorted(self.forms)}, "
                            f"not {dtype}") from None

    def _combine(self, acc: Expr, x: Expr) -> Expr:
        a, b, combined, _ = self._form(acc.dtype)
        return substitute(combined, {a: acc, b: x})

    def _identity(self, dtype: Dtype) -> Expr:
        return self._form(dtype)[3]

    def __reduce__(self):
        return (ExprReducer, (self.name, self.forms))

    def __repr__(self):
        return f"ExprReducer({self.name})"


def _all_tensors(outputs: Sequence[Tensor]) -> list[Tensor]:
    seen: dict[int, Tensor] = {}
    stack = list(outputs)
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen[id(t)] = t
        stack.extend(b for b in t.inputs() if isinstance(b, Tensor))
    return list(seen.values())


def _as_expr_reducer(r: Reducer, dtypes: set[Dtype]) -> ExprReducer:
    if isinstance(r, ExprReducer):
        return r
    forms = {}
    for dt in sorted(dtypes, key=lambda d: d.name):
        a, b = Var("acc", dt), Var("x", dt)
        forms[dt.name] = (a, b, r.combine(a, b), r.identity(dt))
    return ExprReducer(r.name, forms)


class _Pickler(pickle.Pickler):
    def __init__(self, f, reducers: dict[int, ExprReducer]):
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self._reducers = reducers

    def reducer_override(self, obj):
        if isinstance(obj, Reducer) and not isinstance(obj, ExprReducer):
            r = self._reducers.get(id(obj))
            if r is None:
                raise pickle.PicklingError(f"reducer {obj!r} is not used by the computation being sent")
            return (ExprReducer, (r.name, r.forms))
        return NotImplemented


def dumps_computation(outputs: Sequence[Tensor], args: Sequence[Any]) -> bytes:
    """Bytes from which ``loads_computation`` rebuilds ``(outputs, args)`` in another process.

    Buffer, tensor and variable identities shared between ``outputs`` and ``args`` are kept.
    """
    tensors = _all_tensors(outputs)
    dtypes: dict[int, set] = {}
    by_id: dict[int, Reducer] = {}
    for t in tensors:
        if isinstance(t.reducer, Reducer):    # a TupleReducer (te.multi) pickles as it is
            dtypes.setdefault(id(t.reducer), set()).add(t.dtype)
            by_id[id(t.reducer)] = t.reducer
    reducers = {k: _as_expr_reducer(by_id[k], v) for k, v in dtypes.items()}
    buf = io.BytesIO()
    _Pickler(buf, reducers).dump((list(outputs), list(args)))
    return buf.getvalue()


def loads_computation(data: bytes) -> tuple[list[Tensor], list[Any]]:
    """The ``(outputs, args)`` sent by ``dumps_computation``."""
    outputs, args = pickle.loads(data)
    for t in outputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"serialised computation holds {t!r} where a Tensor was expected")
    for a in args:
        if not isinstance(a, (Buffer, Var)):
            raise TypeError(f"serialised computation holds the argument {a!r}; expected Buffers and Vars")
    return outputs, args
