"""Timing a callable: warm-up calls, then repeats of ``number`` calls each; statistics.

>>> stats = time_callable(lambda: sum(range(100)), warmup=1, repeats=5, min_repeat_s=0.0)
>>> stats.repeats, stats.median > 0
(5, True)
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["TimeStats", "time_callable"]


@dataclass
class TimeStats:
    """Seconds per call: one entry of ``costs`` per repeat (each the mean over ``number`` calls)."""

    costs: list[float] = field(default_factory=list)
    number: int = 1

    @property
    def repeats(self) -> int:
        return len(self.costs)

    @property
    def median(self) -> float:
        return statistics.median(self.costs)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.costs)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.costs) if len(self.costs) > 1 else 0.0

    @property
    def min(self) -> float:
        return min(self.costs)

    @property
    def max(self) -> float:
        return max(self.costs)

    @property
    def spread(self) -> float:
        """(max - min) / median: how noisy the measurement was."""
        return (self.max - self.min) / self.median if self.median > 0 else 0.0

    def as_dict(self) -> dict:
        return {"costs": list(self.costs), "number": self.number, "median": self.median, "mean": self.mean,
                "std": self.std, "min": self.min, "max": self.max}


def time_callable(fn: Callable[[], object], warmup: int = 1, repeats: int = 5, min_repeat_s: float = 0.01,
                  max_number: int = 1 << 20) -> TimeStats:
    """Time ``fn()``: ``warmup`` untimed calls, then ``repeats`` timed repeats.

    Each repeat runs ``number`` calls, chosen from the warm-up so one repeat lasts at least
    ``min_repeat_s`` (fast kernels are otherwise below the clock's resolution).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    t0 = time.perf_counter()
    for _ in range(max(1, warmup)):
        fn()
    one = (time.perf_counter() - t0) / max(1, warmup)
    number = 1
    if min_repeat_s > 0 and one < min_repeat_s:
        number = int(min(max_number, max(1, min_repeat_s / max(one, 1e-9))))
    costs = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        costs.append((time.perf_counter() - t) / number)
    return TimeStats(costs, number)
