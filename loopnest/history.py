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

from te.expr import Var
from te.tensor import Buffer

from .errors import ScheduleError
from .loop import Loop
from .stmt import For


def _encode(x: Any) -> Any:
    if isinstance(x, Loop):
        return {"loop": x.name}
    if isinstance(x, For):
        return {"loop": x.var.name}
    if isinstance(x, Var):      # a loop variable, as a nest written by hand names its loops
        return {"loop": x.name}
    if isinstance(x, Buffer):
        return {"buffer": x.name}
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
