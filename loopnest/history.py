"""Schedules as data: transform calls encoded as JSON-able records, and their replay.

A record is ``{"op": "split_with_tail", "args": [{"loop": "i"}, 8], "kwargs": {}}``. Loops
are named by their variable's name, buffers by name; names are made deterministically, so
the same history replays on a fresh LoopNest of the same tensors to the identical nest.

>>> from te import Compute
>>> from loopnest import LoopNest
>>> B = Compute("B", (16,), lambda i: i * 2)
>>> n = LoopNest([B]); _ = n.split_with_tail(n.get_loops_for(B)[0], 4)
>>> n.history
[{'op': 'split_with_tail', 'args': [{'loop': 'i'}, 4], 'kwargs': {}}]
"""
from __future__ import annotations

import json
from typing import Any

from te import expr as E
from te.expr import Expr, Var
from te.tensor import Buffer

from .errors import ScheduleError
from .loop import Loop
from .state import NestState
from .stmt import For


#: the expression nodes a recorded condition (``specialize``) may hold, by record name
_EXPR_NODES = {"add": E.Add, "sub": E.Sub, "mul": E.Mul, "floordiv": E.FloorDiv, "floormod": E.FloorMod,
               "div": E.Div, "mod": E.Mod, "min": E.Min, "max": E.Max, "eq": E.EQ, "ne": E.NE, "lt": E.LT,
               "le": E.LE, "gt": E.GT, "ge": E.GE, "and": E.And, "or": E.Or}
_EXPR_NAMES = {cls: name for name, cls in _EXPR_NODES.items()}


def encode_expr(e: Expr) -> Any:
    """A JSON-able record of an integer or boolean expression of variables (by name) and
    integer constants: ``["le", {"var": "N"}, 24]``.

    >>> from te import Var
    >>> N = Var("N")
    >>> encode_expr((N % 8 == 0) & (N <= 64))
    ['and', ['eq', ['mod', {'var': 'N'}, 8], 0], ['le', {'var': 'N'}, 64]]
    >>> print(decode_expr(encode_expr(N // 2 >= 3), {"N": N}))
    floordiv(N, 2) >= 3
    """
    if isinstance(e, Var):
        return {"var": e.name}
    if isinstance(e, E.IntImm):
        return int(e.value)
    if isinstance(e, E.Not):
        return ["not", encode_expr(e.a)]
    name = _EXPR_NAMES.get(type(e))
    if name is None:
        raise ScheduleError(f"cannot record `{e}` in the history: a recorded condition holds variables, integer "
                            f"constants and + - * / % min max, comparisons, and, or, not (found {type(e).__name__})")
    return [name, encode_expr(e.a), encode_expr(e.b)]


def decode_expr(x: Any, variables: dict) -> Expr:
    """The expression of an ``encode_expr`` record, its variables looked up by name in
    ``variables``; ScheduleError for a malformed record or an unknown variable.

    >>> from te import Var
    >>> print(decode_expr(["and", ["ge", {"var": "M"}, 2], ["not", ["eq", {"var": "M"}, 5]]], {"M": Var("M")}))
    M >= 2 && !(M == 5)
    >>> decode_expr(["le", {"var": "K"}, 2], {"M": Var("M")})
    Traceback (most recent call last):
      ...
    loopnest.errors.ScheduleError: the recorded condition names 'K', which is not a size or parameter of this nest (['M'])
    """
    if isinstance(x, dict) and set(x) == {"var"}:
        v = variables.get(x["var"])
        if v is None:
            raise ScheduleError(f"the recorded condition names {x['var']!r}, which is not a size or parameter of "
                                f"this nest ({sorted(variables)})")
        return v
    if isinstance(x, int) and not isinstance(x, bool):
        return E.as_expr(x)
    if isinstance(x, list) and len(x) == 2 and x[0] == "not":
        return E.Not(decode_expr(x[1], variables))
    if isinstance(x, list) and len(x) == 3 and x[0] in _EXPR_NODES:
        a, b = decode_expr(x[1], variables), decode_expr(x[2], variables)
        if isinstance(x[1], int) and not isinstance(x[2], int):
            a = E.as_expr(x[1], like=b)
        elif isinstance(x[2], int):
            b = E.as_expr(x[2], like=a)
        return _EXPR_NODES[x[0]](a, b)
    raise ScheduleError(f"malformed recorded expression {x!r}")


def _encode(x: Any) -> Any:
    if isinstance(x, Loop):
        return {"loop": x.name}
    if isinstance(x, For):
        return {"loop": x.var.name}
    if isinstance(x, Var) and x.dtype.is_bool:     # a condition (a loop variable is an integer)
        return {"expr": encode_expr(x)}
    if isinstance(x, Var):      # a loop variable, as a nest written by hand names its loops
        return {"loop": x.name}
    if isinstance(x, Buffer):
        return {"buffer": x.name}
    if isinstance(x, Expr):
        return {"expr": encode_expr(x)}
    if isinstance(x, NestState):      # a version of the nest (specialize): its schedule
        return {"schedule": list(x.history)}
    if isinstance(x, (list, tuple)):
        return [_encode(v) for v in x]
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if hasattr(x, "__index__"):
        return int(x)
    raise ScheduleError(f"cannot record the argument {x!r} of type {type(x).__name__} in the history")


def encode_call(nest, op: str, args, kwargs) -> dict:
    """The history record of ``nest.op(*args, **kwargs)``.

    >>> from te import Compute
    >>> from loopnest import LoopNest
    >>> nest = LoopNest([Compute("B", (16,), lambda i: i)]); i, = nest.get_loops_for("B")
    >>> encode_call(nest, "unroll", (i,), {"factor": 2})
    {'op': 'unroll', 'args': [{'loop': 'i'}], 'kwargs': {'factor': 2}}
    """
    return {"op": op, "args": [_encode(a) for a in args], "kwargs": {k: _encode(v) for k, v in kwargs.items()}}


def _decode(nest, x: Any) -> Any:
    if isinstance(x, dict):
        if set(x) == {"loop"}:
            return nest.loop(x["loop"])
        if set(x) == {"buffer"}:
            return nest.buffer(x["buffer"])
        if set(x) == {"expr"}:
            return decode_expr(x["expr"], nest.sizes())
        if set(x) == {"schedule"} and isinstance(x["schedule"], list):
            return x["schedule"]
        raise ScheduleError(f"malformed history argument {x!r}")
    if isinstance(x, list):
        return [_decode(nest, v) for v in x]
    return x


def replay(nest, history: Any) -> None:
    """Apply ``history`` (records, or their JSON text) to ``nest`` in order, all or nothing:
    when a record fails, the nest (history included) is restored to what it was before the
    first record and the error propagates.

    >>> from te import Compute
    >>> from loopnest import LoopNest
    >>> nest = LoopNest([Compute("B", (16,), lambda i: i)])
    >>> replay(nest, '[{"op": "split_with_mask", "args": [{"loop": "i"}, 4], "kwargs": {}}]')
    >>> [l.name for l in nest.get_all_loops()]
    ['i_outer', 'i_inner']
    >>> replay(nest, [{"op": "unroll", "args": [{"loop": "i_inner"}], "kwargs": {}},
    ...               {"op": "unroll", "args": [{"loop": "i_inner"}], "kwargs": {}}])
    Traceback (most recent call last):
      ...
    loopnest.errors.ScheduleError: no loop named 'i_inner' in this nest; loops are ['i_outer']
    >>> [l.name for l in nest.get_all_loops()], len(nest.history)
    (['i_outer', 'i_inner'], 1)
    """
    if isinstance(history, (str, bytes)):
        history = json.loads(history)
    saved, recorded = nest._snapshot(), len(nest.history)
    done = False
    try:
        for k, rec in enumerate(history):
            op = rec.get("op") if isinstance(rec, dict) else None
            fn = getattr(nest, op, None) if isinstance(op, str) else None
            if fn is None or not getattr(fn, "is_transform", False):
                raise ScheduleError(f"history record {k} names no transform: {rec!r}")
            args = [_decode(nest, a) for a in rec.get("args", [])]
            kwargs = {key: _decode(nest, v) for key, v in rec.get("kwargs", {}).items()}
            fn(*args, **kwargs)
        done = True
    finally:
        if not done:
            nest._restore(saved)
            del nest.history[recorded:]
