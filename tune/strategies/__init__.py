"""Search strategies behind one interface: ``propose(n) -> points``, ``update(points, costs)``.

>>> from tune.space import Knob, Space
>>> s = make_strategy("random", Space([Knob("a", "flag", (False, True))]), seed=0)
>>> sorted(s.propose(4))
[(0,), (1,)]
"""
from __future__ import annotations

from .base import Strategy
from .evolutionary import Evolutionary
from .grid import GridSearch
from .model_guided import ModelGuided
from .random_search import RandomSearch

__all__ = ["Strategy", "RandomSearch", "GridSearch", "Evolutionary", "ModelGuided", "make_strategy", "STRATEGIES"]

STRATEGIES = {"random": RandomSearch, "grid": GridSearch, "evolutionary": Evolutionary, "model": ModelGuided}


def make_strategy(strategy, space, seed: int = 0, **options) -> Strategy:
    """A strategy by name (``random``, ``grid``, ``evolutionary``, ``model``), or an instance as is."""
    if isinstance(strategy, Strategy):
        return strategy
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; expected one of {sorted(STRATEGIES)} or a Strategy")
    cls = STRATEGIES[strategy]
    if cls is not ModelGuided:
        options.pop("featurize", None)
    return cls(space, seed=seed, **options)
