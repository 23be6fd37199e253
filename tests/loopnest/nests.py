"""Helpers shared by the loopnest tests: building and running a nest on a backend, random
inputs, checking that a refused transform leaves the nest as it was, history replay, and
small nests built by hand.

The test files import it as ``from nests import ...`` (pytest's default ``prepend`` import
mode puts this folder on ``sys.path``, as tests/tune does for tune_fakes.py).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck

from codegen import build
from loopnest import LoopNest, ScheduleError
from loopnest.stmt import Block, For, Store
from te import Buffer, Compute, IntImm, float32

# hypothesis tests use the ``backend`` fixture, which is a constant per test item
FIXTURE_OK = [HealthCheck.function_scoped_fixture]


def run(nest, args, arrays, backend, sizes=()):
    """Build ``nest`` for ``backend`` and call it on ``arrays`` (outputs last, modified in place)."""
    opts = {"poison": True} if backend == "ireval" else {}
    build(nest, args, target=backend, **opts)(*arrays, *sizes)
    return arrays


def float_source(rng):
    """A function ``rand(*shape)`` that draws float32 arrays uniform in [-2, 2) from ``rng``."""
    def rand(*shape):
        return rng.uniform(-2, 2, shape).astype(np.float32)
    return rand


def unchanged(nest, f):
    """``f()`` raises ScheduleError and leaves ``nest`` exactly as it was; returns the message."""
    text, hist = str(nest), list(nest.history)
    with pytest.raises(ScheduleError) as info:
        f()
    assert str(nest) == text and nest.history == hist
    return str(info.value)


def unchanged_with_buffers(nest, f):
    """Like ``unchanged``, and the nest's buffers and intermediates are also as they were."""
    bufs, inter = dict(nest.buffers), list(nest.intermediates)
    msg = unchanged(nest, f)
    assert nest.buffers == bufs and nest.intermediates == inter
    return msg


def roundtrip(nest, outputs):
    """Replaying ``nest``'s history on a fresh nest of ``outputs`` gives the same text."""
    assert str(LoopNest(outputs).replay(nest.history_json())) == str(nest)


def stencil_nest():
    """C[i, j] = C[i - 1, j + 1] + C[i, j - 1] on [1, 15)^2: distances (1, -1) and (0, 1).

    Returns ``(nest, C)``.
    """
    M = Buffer("M", (16, 16), float32)
    C = Compute("C", (16, 16), lambda i, j: M[i, j])
    nest = LoopNest([C])
    a, b = (l.var for l in nest.get_loops_for(C))
    nest.root = Block([For(a, IntImm(1), IntImm(15), Block([For(b, IntImm(1), IntImm(15), Block([
        Store(C, (a, b), C[a - 1, b + 1] + C[a, b - 1])]))]))])
    return nest, C


class PreparedNest:
    """A hand-built prepared nest (what the passes and ``build`` take): a statement tree
    ``root`` with its input and output buffers and the ``intermediates`` it allocates."""

    prepared = True

    def __init__(self, root, inputs, outputs, intermediates=()):
        self.root, self.inputs, self.outputs = root, list(inputs), list(outputs)
        self.intermediates = list(intermediates)

    def copy(self):
        return PreparedNest(self.root, self.inputs, self.outputs, self.intermediates)
