"""A cost model: gradient-boosted regression trees over features of scheduled nests.

``GradientBoostedTrees`` is a small histogram-based implementation in numpy (squared loss,
depth-limited trees, shrinkage, row subsampling, L2-regularised leaves), seeded and
reproducible. ``CostModel`` wraps it to predict log-time; it uses scikit-learn's
``HistGradientBoostingRegressor`` instead when scikit-learn is installed and
``backend="sklearn"`` is asked for (the default ``"auto"`` keeps the numpy trees, so
results do not depend on what happens to be installed).

>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(-1, 1, size=(400, 3)); y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2
>>> m = GradientBoostedTrees(seed=0).fit(X[:300], y[:300])
>>> bool(np.mean((m.predict(X[300:]) - y[300:]) ** 2) < 0.2 * np.var(y[300:]))
True
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GradientBoostedTrees", "CostModel"]


@dataclass
class _Tree:
    feature: np.ndarray     # int, -1 at leaves
    threshold: np.ndarray   # bin index: go left when bin <= threshold
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray

    def predict_binned(self, Xb: np.ndarray) -> np.ndarray:
        node = np.zeros(len(Xb), dtype=np.int64)
        rows = np.arange(len(Xb))
        while True:
            f = self.feature[node]
            inner = f >= 0
            if not inner.any():
                return self.value[node]
            r = rows[inner]
            n = node[inner]
            go_left = Xb[r, f[inner]] <= self.threshold[n]
            node[inner] = np.where(go_left, self.left[n], self.right[n])


class GradientBoostedTrees:
    """Gradient-boosted regression trees (squared loss) with histogram splits.

    ``n_bins`` quantile bins per feature; each tree is grown depth-first to ``max_depth``
    with at least ``min_samples_leaf`` rows per leaf; leaves are ``-sum(g) / (n + l2)``.
    """

    def __init__(self, n_estimators: int = 120, learning_rate: float = 0.1, max_depth: int = 4,
                 min_samples_leaf: int = 2, n_bins: int = 32, subsample: float = 0.8, l2: float = 1.0,
                 seed: int = 0):
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.n_bins = n_bins
        self.subsample = subsample
        self.l2 = l2
        self.seed = seed
        self.trees: list[_Tree] = []
        self.base = 0.0
        self.edges: list[np.ndarray] = []

    # -- binning ----------------------------------------------------------------------
    def _fit_bins(self, X: np.ndarray) -> None:
        self.edges = []
        qs = np.linspace(0, 1, self.n_bins + 1)[1:-1]
        for j in range(X.shape[1]):
            col = X[:, j]
            uniq = np.unique(col)
            if len(uniq) <= self.n_bins:
                edges = (uniq[:-1] + uniq[1:]) / 2
            else:
                edges = np.unique(np.quantile(col, qs))
            self.edges.append(edges)

    def _bin(self, X: np.ndarray) -> np.ndarray:
        out = np.empty(X.shape, dtype=np.int32)
        for j, e in enumerate(self.edges):
            out[:, j] = np.searchsorted(e, X[:, j], side="right")
        return out

    # -- fitting ----------------------------------------------------------------------
    def fit(self, X, y) -> "GradientBoostedTrees":
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).ravel()
        if X.ndim != 2 or len(X) != len(y):
            raise ValueError(f"fit needs X of shape (n, features) and y of shape (n,); got {X.shape} and {y.shape}")
        if len(y) == 0:
            raise ValueError("fit needs at least one sample")
        rng = np.random.default_rng(self.seed)
        self._fit_bins(X)
        Xb = self._bin(X)
        self.base = float(y.mean())
        pred = np.full(len(y), self.base)
        self.trees = []
        n = len(y)
        for _ in range(self.n_estimators):
            g = pred - y
            rows = np.arange(n)
            if self.subsample < 1.0 and n > 8:
                rows = np.sort(rng.choice(n, size=max(2, int(n * self.subsample)), replace=False))
            tree = self._grow(Xb, g, rows)
            pred += self.learning_rate * tree.predict_binned(Xb)
            self.trees.append(tree)
        return self

    def _grow(self, Xb: np.ndarray, g: np.ndarray, rows: np.ndarray) -> _Tree:
        feat, thr, left, right, value = [], [], [], [], []
        nb = self.n_bins + 1
        F = Xb.shape[1]
        offsets = (np.arange(F) * nb)[None, :]

        def leaf(idx) -> int:
            feat.append(-1); thr.append(0); left.append(-1); right.append(-1)
            value.append(-g[idx].sum() / (len(idx) + self.l2))
            return len(feat) - 1

        def node(idx: np.ndarray, depth: int) -> int:
            if depth >= self.max_depth or len(idx) < 2 * self.min_samples_leaf:
                return leaf(idx)
            gi = g[idx]
            flat = (Xb[idx] + offsets).ravel()
            hg = np.bincount(flat, weights=np.repeat(gi, F), minlength=F * nb).reshape(F, nb)
            hn = np.bincount(flat, minlength=F * nb).reshape(F, nb)
            GL, NL = np.cumsum(hg, axis=1)[:, :-1], np.cumsum(hn, axis=1)[:, :-1]
            G, N = gi.sum(), len(idx)
            GR, NR = G - GL, N - NL
            gain = GL ** 2 / (NL + self.l2) + GR ** 2 / (NR + self.l2) - G ** 2 / (N + self.l2)
            gain[(NL < self.min_samples_leaf) | (NR < self.min_samples_leaf)] = -np.inf
            j, b = np.unravel_index(int(np.argmax(gain)), gain.shape)
            if not np.isfinite(gain[j, b]) or gain[j, b] <= 1e-12:
                return leaf(idx)
            me = len(feat)
            feat.append(int(j)); thr.append(int(b)); left.append(-1); right.append(-1); value.append(0.0)
            mask = Xb[idx, j] <= b
            left[me] = node(idx[mask], depth + 1)
            right[me] = node(idx[~mask], depth + 1)
            return me

        node(rows, 0)
        return _Tree(np.array(feat), np.array(thr), np.array(left), np.array(right), np.array(value, dtype=np.float64))

    def predict(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if not self.edges:
            raise ValueError("predict called before fit")
        if X.ndim != 2 or X.shape[1] != len(self.edges):
            raise ValueError(f"predict needs X with {len(self.edges)} features, got shape {X.shape}")
        Xb = self._bin(X)
        out = np.full(len(X), self.base)
        for t in self.trees:
            out += self.learning_rate * t.predict_binned(Xb)
        return out


class CostModel:
    """Predicts the log of a candidate's time from its features; lower is faster.

    >>> m = CostModel(seed=0)
    >>> X = np.arange(40, dtype=float).reshape(20, 2); t = np.exp(-X[:, 0] / 10)
    >>> _ = m.fit(X, t)
    >>> bool(m.predict(X)[0] > m.predict(X)[-1])
    True
    """

    def __init__(self, backend: str = "auto", seed: int = 0, **params):
        if backend not in ("auto", "numpy", "sklearn"):
            raise ValueError(f"backend must be 'auto', 'numpy' or 'sklearn', got {backend!r}")
        self.backend = "numpy" if backend == "auto" else backend
        self.seed = seed
        self.params = params
        self.model = None

    @property
    def trained(self) -> bool:
        return self.model is not None

    def fit(self, features, times) -> "CostModel":
        """Fit on measured candidates (``times`` in seconds; only finite, positive times)."""
        X = np.asarray(features, dtype=np.float64)
        t = np.asarray(times, dtype=np.float64)
        keep = np.isfinite(t) & (t > 0)
        X, y = X[keep], np.log(t[keep])
        if len(y) < 2:
            raise ValueError(f"the cost model needs at least 2 successful measurements, got {len(y)}")
        if self.backend == "sklearn":
            from sklearn.ensemble import HistGradientBoostingRegressor
            self.model = HistGradientBoostingRegressor(random_state=self.seed, **self.params).fit(X, y)
        else:
            params = dict(self.params)
            params.setdefault("n_estimators", min(150, 20 + 4 * len(y)))
            self.model = GradientBoostedTrees(seed=self.seed, **params).fit(X, y)
        return self

    def predict(self, features) -> np.ndarray:
        """Predicted log-seconds (untrained: zeros)."""
        X = np.asarray(features, dtype=np.float64)
        if self.model is None:
            return np.zeros(len(X))
        return np.asarray(self.model.predict(X), dtype=np.float64)
