"""The gradient-boosted cost model fits better than the mean and is reproducible."""
import numpy as np
import pytest

from tune.cost_model import CostModel, GradientBoostedTrees


def data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 5))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.5 * (X[:, 2] > 0.3) + 0.01 * rng.standard_normal(n)
    return X, y


def test_fits_a_synthetic_function_much_better_than_the_mean():
    X, y = data(600, 0)
    Xt, yt = data(300, 1)
    m = GradientBoostedTrees(seed=0).fit(X, y)
    mse = np.mean((m.predict(Xt) - yt) ** 2)
    base = np.mean((y.mean() - yt) ** 2)
    assert mse < 0.1 * base, (mse, base)


def test_reproducible_with_a_seed():
    X, y = data(200, 0)
    a = GradientBoostedTrees(seed=4).fit(X, y).predict(X[:20])
    b = GradientBoostedTrees(seed=4).fit(X, y).predict(X[:20])
    c = GradientBoostedTrees(seed=5).fit(X, y).predict(X[:20])
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_constant_and_tiny_inputs():
    m = GradientBoostedTrees().fit(np.zeros((5, 2)), np.full(5, 3.0))
    assert np.allclose(m.predict(np.ones((2, 2))), 3.0)
    with pytest.raises(ValueError, match="features"):
        m.predict(np.ones((2, 3)))
    with pytest.raises(ValueError, match="at least one"):
        GradientBoostedTrees().fit(np.zeros((0, 2)), np.zeros(0))


def test_cost_model_ranks_fast_candidates_first():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(80, 3))
    times = 1e-3 * np.exp(3 * X[:, 0]) * (1 + 0.5 * X[:, 1])
    times[:5] = np.inf        # failed measurements are ignored
    m = CostModel(seed=0).fit(X, times)
    Xt = rng.uniform(0, 1, size=(50, 3))
    truth = np.log(1e-3 * np.exp(3 * Xt[:, 0]) * (1 + 0.5 * Xt[:, 1]))
    pred = m.predict(Xt)
    # rank correlation of prediction and truth
    r = np.corrcoef(np.argsort(np.argsort(pred)), np.argsort(np.argsort(truth)))[0, 1]
    assert r > 0.85, r
    with pytest.raises(ValueError, match="at least 2"):
        CostModel().fit(X[:1], times[:1])
