"""Strategies on a synthetic objective (no compilation): reproducible, no repeats, and the
guided ones beat random search on a smooth function."""
import numpy as np
import pytest

from tune.space import Knob, Space
from tune.strategies import STRATEGIES, Evolutionary, GridSearch, ModelGuided, RandomSearch, make_strategy


def space2d(n=16):
    return Space([Knob("a", "split", tuple(range(1, n + 1))), Knob("b", "split", tuple(range(1, n + 1))),
                  Knob("c", "flag", (False, True))])


def objective(space, p):
    v = space.values(p)
    return 1.0 + (v["a"] - 11) ** 2 + 0.5 * (v["b"] - 4) ** 2 + (0.0 if v["c"] else 3.0)


def run(strategy, trials, batch=8, objective=objective):
    best, seen = float("inf"), []
    while len(seen) < trials:
        pts = strategy.propose(min(batch, trials - len(seen)))
        if not pts:
            break
        costs = [objective(strategy.space, p) for p in pts]
        strategy.update(pts, costs)
        seen += pts
        best = min([best] + costs)
    return seen, best


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_reproducible_and_never_repeats(name):
    a, best_a = run(make_strategy(name, space2d(), seed=3), 40)
    b, best_b = run(make_strategy(name, space2d(), seed=3), 40)
    assert a == b and best_a == best_b
    assert len(a) == len(set(a)) == 40


def test_different_seeds_differ():
    a, _ = run(RandomSearch(space2d(), seed=1), 10)
    b, _ = run(RandomSearch(space2d(), seed=2), 10)
    assert a != b


def test_grid_enumerates_everything_then_stops():
    sp = Space([Knob("a", "choice", (0, 1, 2)), Knob("b", "flag", (False, True))])
    g = GridSearch(sp)
    pts, _ = run(g, 100, batch=4, objective=lambda space, p: float(sum(p)))
    assert pts == list(sp.enumerate()) and g.exhausted


def test_random_runs_out_on_a_small_space():
    sp = Space([Knob("a", "choice", (0, 1, 2))])
    r = RandomSearch(sp, seed=0)
    assert sorted(r.propose(10)) == [(0,), (1,), (2,)]
    assert r.propose(1) == []


def _median_best(cls, trials, seeds=range(5), **kw):
    return float(np.median([run(cls(space2d(), seed=s, **kw), trials)[1] for s in seeds]))


def test_guided_strategies_beat_random():
    # optimum is 1.0; 512 points in the space, 48 trials
    rnd = _median_best(RandomSearch, 48)
    evo = _median_best(Evolutionary, 48, population=16)
    model = _median_best(ModelGuided, 48, n_init=16)
    assert model <= 2.0, model
    assert evo <= rnd and model <= rnd, (rnd, evo, model)


def test_model_guided_skips_unschedulable_points():
    sp = space2d(8)

    def featurize(points):
        X = sp.encode(points)
        X[[sp.values(p)["a"] == 3 for p in points]] = np.nan   # a == 3 cannot be scheduled
        return X

    s = ModelGuided(sp, seed=0, n_init=8, featurize=featurize, explore=0.0)
    pts, _ = run(s, 8)
    later = s.propose(8)
    assert later and all(sp.values(p)["a"] != 3 for p in later)


def test_update_checks_lengths():
    s = RandomSearch(space2d(), seed=0)
    with pytest.raises(ValueError, match="2 points and 1 costs"):
        s.update([(0, 0, 0), (1, 1, 1)], [1.0])


def test_failures_are_never_best():
    s = RandomSearch(space2d(), seed=0)
    s.update([(0, 0, 0), (1, 1, 1)], [float("inf"), 5.0])
    assert s.best() == ((1, 1, 1), 5.0)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_seed_points_come_first_and_only_once(name):
    space = space2d()
    space.set_seeds([{"a": 11, "b": 4, "c": True}, {"a": 2}])
    s = make_strategy(name, space, seed=0)
    first = s.propose(1)
    assert first == [space.point({"a": 11, "b": 4, "c": True})]
    rest, _ = run(s, 30)
    assert space.point({"a": 2}) == rest[0] and len(set(first + rest)) == len(first + rest)


def test_seed_points_already_measured_are_skipped():
    space = space2d()
    space.set_seeds([{"a": 3}, {"a": 4}])
    s = make_strategy("random", space, seed=0)
    s.update([space.point({"a": 3})], [1.0])       # e.g. read back from the records of an earlier run
    assert s.propose(1) == [space.point({"a": 4})]
