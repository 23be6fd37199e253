"""Search spaces: knobs declared by a schedule function, and the points of their product.

A schedule function takes a ``Config`` (``cfg``) and a fresh ``LoopNest`` and schedules
it, asking ``cfg`` for each decision: ``cfg.split(name, loop, candidates)`` (a split
factor), ``cfg.choice(name, options)``, ``cfg.flag(name)``. ``ScheduleSpace(fn, outputs)``
runs it once to declare the knobs (each knob answers its first option then), and
``space.apply(point)`` runs it again with the point's values on a fresh nest.

A point is a tuple of option indices, one per knob (in declaration order).

>>> from te import Buffer, Compute
>>> A = Buffer("A", (64,), "float32")
>>> B = Compute("B", (64,), lambda i: A[i] * 2.0)
>>> def schedule(cfg, nest):
...     i, = nest.get_loops_for(B)
...     f = cfg.split("split_i", i, [1, 4, 8])
...     if cfg.flag("unused"):
...         pass
>>> space = ScheduleSpace(schedule, [B])
>>> space.dims, space.size
([3, 2], 6)
>>> space.values((2, 1))
{'split_i': 8, 'unused': True}
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from .errors import SpaceError

__all__ = ["Knob", "Space", "Config", "ScheduleSpace", "Point", "split_candidates"]

Point = tuple  # of ints: one option index per knob


def split_candidates(extent: Any, max_factor: int = 256, divisors_only: bool = False) -> list[int]:
    """Default split factors for a loop of ``extent``: its divisors and the powers of two
    up to ``min(extent, max_factor)`` (powers of two up to 64 for a symbolic extent).

    >>> split_candidates(24)
    [1, 2, 3, 4, 6, 8, 12, 16, 24]
    >>> split_candidates(24, divisors_only=True)
    [1, 2, 3, 4, 6, 8, 12, 24]
    """
    if not isinstance(extent, (int, np.integer)):
        return [1, 2, 4, 8, 16, 32, 64]
    e = int(extent)
    top = max(1, min(e, max_factor))
    out = {d for d in range(1, top + 1) if e % d == 0}
    if not divisors_only:
        out |= {1 << k for k in range(0, int(math.log2(top)) + 1)}
    return sorted(out)


@dataclass(frozen=True)
class Knob:
    """One decision: ``kind`` is "split", "choice" or "flag"; ``options`` its JSON-able values."""

    name: str
    kind: str
    options: tuple

    def __post_init__(self):
        if not self.options:
            raise SpaceError(f"knob {self.name!r} has no options")
        try:
            json.dumps(list(self.options))
        except TypeError as e:
            raise SpaceError(f"options of knob {self.name!r} must be JSON values (ints, strings, ...): {e}") from None


class Space:
    """The product of some knobs' option sets; strategies see only ``dims``.

    >>> s = Space([Knob("a", "choice", (1, 2, 3)), Knob("b", "flag", (False, True))])
    >>> s.size, s.from_index(4), s.index((1, 1))
    (6, (2, 0), 3)
    """

    def __init__(self, knobs: Sequence[Knob] = ()):
        self.knobs: list[Knob] = []
        self._by_name: dict[str, int] = {}
        #: points every strategy proposes first, in order (``set_seeds``)
        self.seeds: list[Point] = []
        for k in knobs:
            self.add(k)

    def set_seeds(self, seeds: Sequence[Mapping[str, Any] | Sequence[int]]) -> None:
        """Points to measure before any search: knob-value dicts (missing knobs take their
        first option) or points. Strategies propose them first, in order, skipping those
        already measured (a resumed run does not measure them again).

        >>> s = Space([Knob("a", "choice", (1, 2, 3)), Knob("b", "flag", (False, True))])
        >>> s.set_seeds([{"a": 3, "b": True}]); s.seeds
        [(2, 1)]
        """
        out: list[Point] = []
        for sd in seeds:
            p = self.point(sd) if isinstance(sd, Mapping) else self.check(sd)
            if p not in out:
                out.append(p)
        self.seeds = out

    def add(self, knob: Knob) -> Knob:
        if knob.name in self._by_name:
            old = self.knobs[self._by_name[knob.name]]
            if old != knob:
                raise SpaceError(f"knob {knob.name!r} declared twice with different options: "
                                 f"{list(old.options)} and {list(knob.options)}")
            return old
        self._by_name[knob.name] = len(self.knobs)
        self.knobs.append(knob)
        return knob

    # -- shape ----------------------------------------------------------------------------
    @property
    def dims(self) -> list[int]:
        """Number of options of each knob."""
        return [len(k.options) for k in self.knobs]

    @property
    def size(self) -> int:
        return math.prod(self.dims)

    def __len__(self) -> int:
        return self.size

    def knob(self, name: str) -> Knob:
        if name not in self._by_name:
            raise SpaceError(f"no knob named {name!r}; knobs are {[k.name for k in self.knobs]}")
        return self.knobs[self._by_name[name]]

    # -- points ---------------------------------------------------------------------------
    def check(self, point: Sequence[int]) -> Point:
        p = tuple(int(x) for x in point)
        if len(p) != len(self.knobs):
            raise SpaceError(f"a point of this space has {len(self.knobs)} entries, got {len(p)}: {p}")
        for x, k in zip(p, self.knobs):
            if not 0 <= x < len(k.options):
                raise SpaceError(f"knob {k.name!r} has {len(k.options)} options; index {x} is out of range")
        return p

    def values(self, point: Sequence[int]) -> dict[str, Any]:
        """The knob values of ``point`` by knob name."""
        p = self.check(point)
        return {k.name: k.options[x] for k, x in zip(self.knobs, p)}

    def point(self, values: Mapping[str, Any]) -> Point:
        """The point with the given knob values (missing knobs take their first option)."""
        unknown = set(values) - set(self._by_name)
        if unknown:
            raise SpaceError(f"unknown knobs {sorted(unknown)}; knobs are {[k.name for k in self.knobs]}")
        out = []
        for k in self.knobs:
            if k.name not in values:
                out.append(0)
                continue
            v = values[k.name]
            try:
                out.append(list(k.options).index(v))
            except ValueError:
                raise SpaceError(f"{v!r} is not an option of knob {k.name!r}: {list(k.options)}") from None
        return tuple(out)

    def index(self, point: Sequence[int]) -> int:
        """The point's position in ``enumerate()`` order (mixed radix, last knob fastest)."""
        idx = 0
        for x, d in zip(self.check(point), self.dims):
            idx = idx * d + x
        return idx

    def from_index(self, idx: int) -> Point:
        if not 0 <= idx < self.size:
            raise SpaceError(f"index {idx} is outside a space of {self.size} points")
        out = []
        for d in reversed(self.dims):
            idx, x = divmod(idx, d)
            out.append(x)
        return tuple(reversed(out))

    def enumerate(self) -> Iterator[Point]:
        """Every point, in mixed-radix order."""
        return itertools.product(*(range(d) for d in self.dims))

    def sample(self, rng: np.random.Generator) -> Point:
        """One uniformly random point."""
        return tuple(int(rng.integers(d)) for d in self.dims)

    def mutate(self, point: Sequence[int], rng: np.random.Generator, rate: float | None = None) -> Point:
        """A neighbour: each knob re-drawn with probability ``rate`` (default 1/knobs), at least one changed."""
        p = list(self.check(point))
        free = [k for k, d in enumerate(self.dims) if d > 1]
        if not free:
            return tuple(p)
        rate = rate if rate is not None else 1.0 / len(free)
        changed = [k for k in free if rng.random() < rate] or [free[int(rng.integers(len(free)))]]
        for k in changed:
            d = self.dims[k]
            if self.knobs[k].kind == "split" and rng.random() < 0.7:   # ordered options: step to a neighbour
                p[k] = int(np.clip(p[k] + (1 if rng.random() < 0.5 else -1), 0, d - 1))
                if p[k] == point[k]:
                    p[k] = (p[k] + 1) % d if p[k] == 0 else p[k] - 1
            else:
                p[k] = (p[k] + 1 + int(rng.integers(d - 1))) % d
        return tuple(p)

    def encode(self, points: Sequence[Sequence[int]]) -> np.ndarray:
        """Numeric features of points: log2 of split factors, one-hot choices, 0/1 flags."""
        rows = []
        for p in points:
            row: list[float] = []
            for k, x in zip(self.knobs, p):
                v = k.options[x]
                if k.kind == "split":
                    row.append(math.log2(max(1, int(v))) if isinstance(v, (int, np.integer)) else float(x))
                elif k.kind == "flag":
                    row.append(float(bool(v)))
                else:
                    row.extend(1.0 if j == x else 0.0 for j in range(len(k.options)))
            rows.append(row)
        return np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)

    def describe(self) -> str:
        return "\n".join(f"{k.name} ({k.kind}): {list(k.options)}" for k in self.knobs)


class Config:
    """The ``cfg`` a schedule function asks for its decisions.

    In the define pass every knob answers its first option and is added to the space; when
    applying a point, each knob answers the point's value.
    """

    def __init__(self, space: Space, values: Mapping[str, Any] | None = None):
        self.space = space
        self._values = None if values is None else dict(values)

    @property
    def defining(self) -> bool:
        return self._values is None

    def _declare(self, knob: Knob) -> Any:
        if self._values is None:
            return self.space.add(knob).options[0]
        if knob.name not in self._values:
            raise SpaceError(f"knob {knob.name!r} was not declared when the space was defined; a schedule "
                             "function must declare the same knobs whatever their values (declare them first)")
        return self._values[knob.name]

    def split(self, name: str, loop: Any, candidates: Sequence[int] | None = None) -> int:
        """A split factor for ``loop`` (a loop handle or an extent) from ``candidates``
        (default ``split_candidates(extent)``)."""
        if candidates is None:
            extent = getattr(loop, "extent", loop)
            candidates = split_candidates(extent)
        cands = tuple(int(c) for c in candidates)
        if any(c < 1 for c in cands):
            raise SpaceError(f"split factors of {name!r} must be positive, got {list(cands)}")
        return self._declare(Knob(name, "split", cands))

    def choice(self, name: str, options: Sequence[Any]) -> Any:
        """One of ``options`` (JSON values)."""
        return self._declare(Knob(name, "choice", tuple(options)))

    def flag(self, name: str) -> bool:
        """A yes/no decision (False first)."""
        return bool(self._declare(Knob(name, "flag", (False, True))))

    def __getitem__(self, name: str) -> Any:
        if self._values is None:
            return self.space.knob(name).options[0]
        return self._values[name]


class ScheduleSpace(Space):
    """The space of a schedule function ``fn(cfg, nest)`` over the computation of ``outputs``.

    ``apply(point)`` returns the scheduled LoopNest (its ``history`` is the trace), or raises
    ``loopnest.ScheduleError`` when the point's schedule is illegal.
    """

    def __init__(self, fn: Callable[[Config, Any], Any], outputs: Sequence[Any], name: str | None = None):
        super().__init__()
        from loopnest import LoopNest, ScheduleError
        self.fn = fn
        self.outputs = list(outputs)
        self.name = name or getattr(fn, "__name__", "schedule")
        cfg = Config(self)
        try:
            fn(cfg, LoopNest(self.outputs))
        except ScheduleError as e:
            raise SpaceError(f"defining the space of {self.name!r}: the schedule with every knob at its first "
                             f"option raised ScheduleError ({e}); declare every knob before the first transform, "
                             "or make the first options legal") from e

    def apply(self, point: Sequence[int]):
        """A fresh LoopNest scheduled with ``point``'s knob values."""
        from loopnest import LoopNest
        nest = LoopNest(self.outputs)
        self.fn(Config(self, self.values(point)), nest)
        return nest
