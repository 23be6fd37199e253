"""Grid search: every point in mixed-radix order (the last knob varies fastest).

>>> from tune.space import Knob, Space
>>> s = GridSearch(Space([Knob("a", "choice", (0, 1)), Knob("b", "flag", (False, True))]))
>>> s.propose(3), s.propose(3)
([(0, 0), (0, 1), (1, 0)], [(1, 1)])
"""
from __future__ import annotations

from .base import Strategy

__all__ = ["GridSearch"]


class GridSearch(Strategy):
    """Exhaustive enumeration in order (seed unused): for small spaces."""

    name = "grid"

    def __init__(self, space, seed: int = 0):
        super().__init__(space, seed)
        self._next = 0

    def _propose(self, n):
        out = []
        while len(out) < n and self._next < self.space.size:
            p = self.space.from_index(self._next)
            self._next += 1
            if p not in self.proposed:
                out.append(p)
        return out
