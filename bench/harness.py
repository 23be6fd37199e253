"""Timing helpers shared by the benchmarks: warm-up, repeats, median and spread.

>>> t = time_call(lambda: sum(range(1000)), repeats=5)
>>> t.median > 0
True
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class Timing:
    """Seconds per call: median, min and the interquartile spread over ``repeats`` runs."""

    median: float
    best: float
    spread: float
    repeats: int

    def as_dict(self) -> dict:
        return {"median_s": self.median, "best_s": self.best, "spread_s": self.spread, "repeats": self.repeats}


def time_call(fn: Callable[[], object], repeats: int = 10, warmup: int = 2, min_time: float = 0.0) -> Timing:
    """Time ``fn()``: ``warmup`` untimed calls, then ``repeats`` timed ones (more while the
    total is under ``min_time`` seconds, so very fast kernels are timed over several calls)."""
    for _ in range(warmup):
        fn()
    # calibrate the number of calls per sample for very fast functions
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-9)
    inner = max(1, int(2e-3 / one)) if one < 2e-3 else 1
    samples = []
    start = time.perf_counter()
    while len(samples) < repeats or (time.perf_counter() - start) < min_time:
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
        if len(samples) > 10 * repeats:
            break
    samples.sort()
    q1 = samples[len(samples) // 4]
    q3 = samples[(3 * len(samples)) // 4]
    return Timing(statistics.median(samples), samples[0], q3 - q1, len(samples))
