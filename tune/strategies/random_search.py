"""Random search: uniform points of the space, without repetition.

>>> from tune.space import Knob, Space
>>> s = RandomSearch(Space([Knob("a", "choice", tuple(range(10)))]), seed=1)
>>> s.propose(3) == RandomSearch(s.space, seed=1).propose(3)
True
"""
from __future__ import annotations

from .base import Strategy

__all__ = ["RandomSearch"]


class RandomSearch(Strategy):
    """Uniformly random points, never the same twice."""

    name = "random"

    def _propose(self, n):
        return self._fresh_random(n)
