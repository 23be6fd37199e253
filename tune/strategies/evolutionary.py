"""Evolutionary search: mutate and cross over the best points measured so far.

Until ``population`` points are measured it proposes random points; afterwards each
child comes from a tournament-selected parent, mutated (and, with probability
``crossover``, first crossed with a second parent knob by knob). A fraction
``explore`` of each batch stays random.

>>> from tune.space import Knob, Space
>>> sp = Space([Knob("a", "choice", tuple(range(8))), Knob("b", "choice", tuple(range(8)))])
>>> s = Evolutionary(sp, seed=0, population=4)
>>> pts = s.propose(4); s.update(pts, [abs(a - 5) + abs(b - 2) + 1.0 for a, b in pts])
>>> len(s.propose(4))
4
"""
from __future__ import annotations

import numpy as np

from .base import Strategy

__all__ = ["Evolutionary"]


class Evolutionary(Strategy):
    """A (mu + lambda)-style genetic search over knob indices."""

    name = "evolutionary"

    def __init__(self, space, seed: int = 0, population: int = 16, elite: int = 8, crossover: float = 0.3,
                 explore: float = 0.1, tournament: int = 3):
        super().__init__(space, seed)
        self.population = population
        self.elite = elite
        self.crossover = crossover
        self.explore = explore
        self.tournament = tournament

    def _parents(self) -> list:
        ranked = sorted((c, k) for k, c in enumerate(self.costs) if np.isfinite(c))
        return [self.points[k] for _, k in ranked[: max(self.elite, 2)]]

    def _pick(self, parents):
        k = min(len(parents), self.tournament)
        idx = self.rng.choice(len(parents), size=k, replace=False)
        return parents[int(min(idx))]          # parents are sorted best first

    def _propose(self, n):
        parents = self._parents()
        if len(self.costs) < self.population or len(parents) < 2:
            return self._fresh_random(n)
        out: list = []
        taken: set = set()
        n_random = int(round(n * self.explore))
        tries = 0
        while len(out) < n - n_random and tries < 50 * n:
            tries += 1
            a = self._pick(parents)
            if self.rng.random() < self.crossover:
                b = self._pick(parents)
                a = tuple(x if self.rng.random() < 0.5 else y for x, y in zip(a, b))
            child = self.space.mutate(a, self.rng)
            if child in self.proposed or child in taken:
                continue
            taken.add(child)
            out.append(child)
        out += self._fresh_random(n - len(out), taken)
        return out
