"""Fakes for the tuning tests: a space whose "schedules" are behaviours, and a builder that
acts them out in the worker (correct, slow, segfault, hang, wrong values, out of memory...).

Importable by spawned workers (tests/tune is on sys.path under pytest, and workers get the
parent's sys.path).
"""
from __future__ import annotations

import ctypes
import json
import os
import time
from types import SimpleNamespace

import numpy as np

from te import Buffer, Compute
from tune.space import Knob, Space
from tune.task import Task


def tiny_task(n: int = 16) -> Task:
    A = Buffer("A", (n,), "float32")
    B = Compute("B", (n,), lambda i: A[i] * 2.0)
    return Task([B], [A, B], reference=lambda ins: {"B": ins["A"] * 2})


class BehaviourSpace(Space):
    """Points are (behaviour, speed); ``apply`` returns a stand-in nest whose history names them."""

    def __init__(self, behaviours, speeds=(1, 2, 3, 4)):
        super().__init__([Knob("behaviour", "choice", tuple(behaviours)), Knob("speed", "choice", tuple(speeds))])

    def apply(self, point):
        v = self.values(point)
        if v["behaviour"] == "illegal":
            from loopnest import ScheduleError
            raise ScheduleError("this point is illegal")
        return SimpleNamespace(history=[{"op": v["behaviour"], "args": [v["speed"]], "kwargs": {}}], root=None)


def _log(path: str | None, text: str) -> None:
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


def fake_builder(task, trace, target, options):
    """Build log in ``options['log']`` (one line per build); behaviour from the trace."""
    rec = json.loads(trace)
    op, speed = (rec[0]["op"], rec[0]["args"][0]) if rec else ("ok", 5)
    _log(options.get("log"), f"{op} {speed}")
    if options.get("slow_s"):
        time.sleep(options["slow_s"])
    if op == "build_error":
        from codegen import BuildError
        raise BuildError("the compiler failed on purpose")
    if op == "build_hang":
        time.sleep(600)
    if op == "build_segv":
        ctypes.string_at(0)
    out = task.output_names[0]
    ref = task.reference[out]

    def kernel(**kw):
        if op == "segv":
            ctypes.string_at(0)
        if op == "hang":
            time.sleep(600)
        if op == "oom":
            np.ones(1 << 40, dtype=np.uint8)   # 1 TiB: beyond the worker's memory limit
        if op == "abort":
            os.abort()
        kw[out][...] = ref + (1.0 if op == "wrong" else 0.0)
        time.sleep(1e-4 * speed)
    return kernel
