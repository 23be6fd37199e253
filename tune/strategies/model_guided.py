"""Model-guided search: a gradient-boosted cost model ranks candidates before measuring.

After ``n_init`` random measurements, each batch is chosen from a pool of candidates
(mutations of the best points so far plus random points) by the cost model's predicted
time; a fraction ``explore`` of the batch stays random (epsilon-greedy). The model is
retrained on every measurement as they arrive. Features come from ``featurize(points)``
(the tuner passes features of the scheduled nests; without it, the knob encoding is used);
a row of NaN marks a point that cannot be scheduled, which is then never proposed.

>>> from tune.space import Knob, Space
>>> sp = Space([Knob("a", "split", tuple(range(1, 17))), Knob("b", "split", tuple(range(1, 17)))])
>>> s = ModelGuided(sp, seed=0, n_init=8)
>>> for _ in range(4):
...     pts = s.propose(8); s.update(pts, [1.0 + (sp.values(p)["a"] - 11) ** 2 for p in pts])
>>> s.best()[1] <= 2.0
True
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from ..cost_model import CostModel
from .base import Strategy

__all__ = ["ModelGuided"]


class ModelGuided(Strategy):
    """Cost-model ranked proposals (``CostModel``: numpy gradient-boosted trees by default)."""

    name = "model"

    def __init__(self, space, seed: int = 0, featurize: Callable[[Sequence], np.ndarray] | None = None,
                 n_init: int = 8, pool: int = 256, explore: float = 0.2, model: CostModel | None = None,
                 featurize_budget_s: float | None = 4.0):
        super().__init__(space, seed)
        self.featurize_budget_s = featurize_budget_s
        self._feat_s_per_point = 0.0   # running estimate of featurize's cost per point
        self.featurize = featurize or space.encode
        self.n_init = n_init
        self.pool = pool
        self.explore = explore
        self.model = model or CostModel(seed=seed)
        self._stale = True

    def update(self, points, costs):
        super().update(points, costs)
        self._stale = True

    def _train(self) -> bool:
        ok = [k for k, c in enumerate(self.costs) if np.isfinite(c) and c > 0]
        if len(ok) < 2:
            return False
        if self._stale:
            X = self._features([self.points[k] for k in ok], timed=False)   # cached by the tuner: cheap
            good = np.isfinite(X).all(axis=1)
            if good.sum() < 2:
                return False
            self.model.fit(X[good], np.asarray([self.costs[k] for k in ok])[good])
            self._stale = False
        return True

    def _features(self, points, timed: bool = True) -> np.ndarray:
        t0 = time.perf_counter()
        X = self.featurize(points)
        if timed and len(points):
            per = (time.perf_counter() - t0) / len(points)
            self._feat_s_per_point = per if not self._feat_s_per_point else 0.5 * (per + self._feat_s_per_point)
        return X

    def _pool_size(self) -> int:
        """``pool``, reduced so that featurizing one pool takes about ``featurize_budget_s``."""
        if not self.featurize_budget_s:
            return self.pool
        if not self._feat_s_per_point:
            return min(self.pool, 32)     # first round: small, to learn what a point costs
        return int(max(16, min(self.pool, self.featurize_budget_s / self._feat_s_per_point)))

    def _candidates(self, taken: set) -> list:
        pool = self._pool_size()
        ranked = sorted((c, k) for k, c in enumerate(self.costs) if np.isfinite(c))
        parents = [self.points[k] for _, k in ranked[:16]]
        out, seen = [], set(taken) | self.proposed
        n_mut = pool // 2 if parents else 0
        tries = 0
        while len(out) < n_mut and tries < 20 * pool:
            tries += 1
            p = parents[min(int(self.rng.geometric(0.3)) - 1, len(parents) - 1)]   # biased to the best
            c = self.space.mutate(p, self.rng)
            if c not in seen:
                seen.add(c)
                out.append(c)
        out += self._fresh_random(pool - len(out), seen)
        return out

    def _propose(self, n):
        if len(self.costs) < self.n_init or not self._train():
            return self._fresh_random(n)
        n_random = int(round(n * self.explore))
        cands = self._candidates(set())
        if not cands:
            return []
        X = self._features(cands)
        valid = np.isfinite(X).all(axis=1)
        pred = np.full(len(cands), np.inf)
        if valid.any():
            pred[valid] = self.model.predict(X[valid])
        order = [k for k in np.argsort(pred, kind="stable") if np.isfinite(pred[k])]
        out = [cands[k] for k in order[: n - n_random]]
        out += self._fresh_random(n - len(out), set(out) | {cands[k] for k in np.flatnonzero(~valid)})
        return out
