"""Building a candidate: replay its schedule on a fresh nest, lower it, compile it.

``build_candidate`` runs inside a worker process (see ``tune.runner``); any exception it
raises is recorded as a ``BuildError``. ``apply_schedule`` runs in the tuner process to
turn a point of a search space into a schedule trace cheaply (no compilation).

>>> from te import Buffer, Compute
>>> from tune.task import Task
>>> A = Buffer("A", (8,), "float32")
>>> B = Compute("B", (8,), lambda i: A[i] * 2.0)
>>> task = Task([B], [A, B], reference=lambda ins: ins["A"] * 2)
>>> nest = replay_on_fresh_nest(task, "[]")
>>> nest.history
[]
"""
from __future__ import annotations

import json
from typing import Any, Callable

from .task import Task

__all__ = ["build_candidate", "replay_on_fresh_nest", "Builder"]

#: a builder turns (task, schedule trace JSON, target, build options) into a callable kernel
Builder = Callable[[Task, str, str, dict], Callable[..., Any]]


def replay_on_fresh_nest(task: Task, trace: str | list):
    """A new LoopNest of the task's outputs with the schedule ``trace`` (history JSON) replayed."""
    from loopnest import LoopNest
    nest = LoopNest(task.outputs)
    nest.replay(json.loads(trace) if isinstance(trace, str) else trace)
    return nest


def build_candidate(task: Task, trace: str, target: str, options: dict | None = None):
    """The compiled Kernel of the task scheduled by ``trace`` for ``target`` (the default builder)."""
    from codegen import build
    nest = replay_on_fresh_nest(task, trace)
    return build(nest, task.args, target=target, **(options or {}))
