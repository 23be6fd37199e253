"""Timing helpers shared by the benchmarks: warm-up, repeats, median, best and spread.

The machine the suite runs on may be shared (other processes, a hypervisor taking time):
noise only ever adds time, so besides the median each timing keeps the best sample, and
``time_interleaved`` times several candidates round-robin, so a burst of load hits all of
them instead of whichever ran at the time. Each of its samples follows an untimed warm-up
of the same function lasting ``WARM_S``: a core that idled (a single-threaded peer ran
before) runs slowly for a millisecond or two after it wakes, the threads of the
previous candidate's thread pool may still be spinning, and a candidate that streams more
than the caches hold leaves the next one to fetch its data again: after one call of the
unscheduled blur (a 15 MB intermediate), the automatic schedule's next calls took 2.4, 2.4,
1.6, 1.5 ms, then 1.2 ms, about 8 ms in all. With a 3 ms warm-up, whichever schedule was
timed after the unscheduled one came out 15-30% slower than the same code timed later
(blur, transpose; 15 ms: within 10%, either order). The unscheduled transpose (134 ms a
call over 128 MB) still slowed the next candidate's calls for longer than that (the same
nest timed 12.6 ms after it, 9.6 ms after another): every other round runs in the
opposite order, so no candidate always follows the same one, and the best of the rounds
is a clean one.

>>> t = time_call(lambda: sum(range(1000)), repeats=5)
>>> t.median > 0 and t.best <= t.median
True
>>> ts = time_interleaved({"a": lambda: sum(range(100)), "b": lambda: sum(range(1000))}, rounds=3)
>>> sorted(ts), ts["a"].repeats >= 3
(['a', 'b'], True)
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

#: a sample lasts at least this long: faster functions are called several times per sample
MIN_SAMPLE_S = 2e-3
#: untimed running of a function before each of its interleaved samples
WARM_S = 15e-3


@dataclass
class Timing:
    """Seconds per call: median, min and the interquartile spread over ``repeats`` samples."""

    median: float
    best: float
    spread: float
    repeats: int

    def as_dict(self) -> dict:
        return {"median_s": self.median, "best_s": self.best, "spread_s": self.spread, "repeats": self.repeats}


def _summary(samples: list[float]) -> Timing:
    samples = sorted(samples)
    q1 = samples[len(samples) // 4]
    q3 = samples[(3 * len(samples)) // 4]
    return Timing(statistics.median(samples), samples[0], q3 - q1, len(samples))


def _calls_per_sample(fn: Callable[[], object]) -> tuple[int, float]:
    """How many calls make one sample of at least ``MIN_SAMPLE_S``; and one call's time."""
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-9)
    return (max(1, int(MIN_SAMPLE_S / one)) if one < MIN_SAMPLE_S else 1), one


def time_call(fn: Callable[[], object], repeats: int = 10, warmup: int = 2, min_time: float = 0.0,
              budget: float | None = None) -> Timing:
    """Time ``fn()``: ``warmup`` untimed calls, then ``repeats`` timed samples (more while the
    total is under ``min_time`` seconds; fewer, but at least one, when ``budget`` seconds
    would be exceeded). Very fast functions are called several times per sample."""
    for _ in range(warmup):
        fn()
    inner, one = _calls_per_sample(fn)
    if budget is not None and one * repeats > budget:
        repeats = max(1, int(budget / one))
    samples = []
    start = time.perf_counter()
    while len(samples) < repeats or (time.perf_counter() - start) < min_time:
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
        if len(samples) > 10 * repeats:
            break
    return _summary(samples)


def time_interleaved(fns: dict[str, Callable[[], object]], rounds: int = 5, warmup: int = 1,
                     budget: float | None = None, min_time: float = 0.0) -> dict[str, Timing]:
    """Time several functions round-robin: each round takes one sample of every function,
    after running it untimed for ``WARM_S`` (at least one call), every other round in the
    opposite order. More rounds (up to ten times ``rounds``) run while the total is under
    ``min_time`` seconds; ``budget`` (seconds, for all of them together) lowers the number
    of rounds (at least one) when they are slow."""
    plan = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        plan[name] = _calls_per_sample(fn)
    per_round = sum(inner * one + max(one, WARM_S) for inner, one in plan.values())
    if budget is not None and per_round * rounds > budget:
        rounds = max(1, int(budget / max(per_round, 1e-9)))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    start = time.perf_counter()
    done = 0
    while done < rounds or (time.perf_counter() - start < min_time and done < 10 * rounds
                            and (budget is None or time.perf_counter() - start + per_round < budget)):
        # every other round runs in the opposite order: a candidate that disturbs the caches
        # for longer than the warm-up is then followed by another one every other round
        names = list(fns) if done % 2 == 0 else list(fns)[::-1]
        done += 1
        for name in names:
            fn = fns[name]
            inner = plan[name][0]
            t0 = time.perf_counter()
            fn()
            while time.perf_counter() - t0 < WARM_S:
                fn()
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples[name].append((time.perf_counter() - t0) / inner)
    return {name: _summary(s) for name, s in samples.items()}
