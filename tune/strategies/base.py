"""The strategy interface: ``propose(n)`` points, then ``update(points, costs)``.

A strategy sees only the space's ``dims`` (options per knob) and the costs it is told
(seconds; ``inf`` for a failed or illegal candidate). It never proposes a point twice, and
everything random comes from ``numpy.random.default_rng(seed)``, so a run is reproducible.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..space import Point, Space

__all__ = ["Strategy"]


class Strategy:
    """Base class: keeps the history of measured points and the proposed set.

    >>> from tune.space import Knob, Space
    >>> from tune.strategies import RandomSearch
    >>> s = RandomSearch(Space([Knob("a", "choice", (1, 2, 3))]), seed=0)
    >>> pts = s.propose(5); len(pts), len(set(pts))
    (3, 3)
    """

    name = "base"

    def __init__(self, space: Space, seed: int = 0):
        self.space = space
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.proposed: set[Point] = set()
        self.points: list[Point] = []
        self.costs: list[float] = []

    @property
    def exhausted(self) -> bool:
        return len(self.proposed) >= self.space.size

    def propose(self, n: int) -> list[Point]:
        """Up to ``n`` new points (fewer when the space runs out): the space's seed points
        not proposed yet first, then the strategy's own."""
        n = max(0, int(n))
        out = [p for p in getattr(self.space, "seeds", ()) if p not in self.proposed][:n]
        self.proposed.update(out)          # before _propose, so the strategy does not repeat them
        if len(out) < n:
            out += self._propose(n - len(out))
        for p in out:
            self.proposed.add(p)
        return out

    def _propose(self, n: int) -> list[Point]:   # pragma: no cover - abstract
        raise NotImplementedError

    def update(self, points: Sequence[Point], costs: Sequence[float]) -> None:
        """Report measured costs (seconds, ``inf`` for failures) of proposed points."""
        if len(points) != len(costs):
            raise ValueError(f"update got {len(points)} points and {len(costs)} costs")
        for p, c in zip(points, costs):
            p = tuple(p)
            self.proposed.add(p)
            self.points.append(p)
            self.costs.append(float(c))

    def best(self) -> tuple[Point, float] | None:
        """The best measured point and its cost (None before any success)."""
        ok = [(c, k) for k, c in enumerate(self.costs) if np.isfinite(c)]
        if not ok:
            return None
        c, k = min(ok)
        return self.points[k], c

    # -- helpers ------------------------------------------------------------------------
    def _fresh_random(self, n: int, taken: set | None = None, tries: int = 50) -> list[Point]:
        """Up to ``n`` random points not proposed yet (enumerates small spaces)."""
        taken = set(self.proposed) | (taken or set())
        out: list[Point] = []
        left = self.space.size - len(taken)
        if left <= 0:
            return out
        if self.space.size <= 4096 and left <= 4 * n:
            rest = [p for p in self.space.enumerate() if p not in taken]
            order = self.rng.permutation(len(rest))
            return [rest[i] for i in order[:n]]
        misses = 0
        while len(out) < n and misses < tries * max(1, n):
            p = self.space.sample(self.rng)
            if p in taken:
                misses += 1
                continue
            taken.add(p)
            out.append(p)
        return out
