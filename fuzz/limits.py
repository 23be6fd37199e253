"""The per-case time limit of the random tester: CPU time, and a multiple of it in wall time.

>>> with time_limit(5.0):
...     pass
"""
from __future__ import annotations

import contextlib
import signal
import traceback
from pathlib import Path

__all__ = ["TimeLimit", "WALL_FACTOR", "time_limit"]


class TimeLimit(Exception):
    """A schedule (or a program's own check) ran past the campaign's per-case time limit; the
    fuzzer reports it as a failure where it happened (``crash:cache_accesses:TimeLimit``)."""


#: the wall-clock limit of a case, in multiples of its CPU-time limit: it catches a case that
#: waits without computing (a deadlock), where a loaded machine only slows the others down
WALL_FACTOR = 4


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise :class:`TimeLimit` in the block after ``seconds`` of this process's CPU time (all
    its threads), or ``WALL_FACTOR * seconds`` of wall time (None: no limit; main thread only)."""
    if not seconds:
        yield
        return

    def expire(signum, frame):
        where = "\n  <- ".join(f"{Path(f.filename).stem}.{f.name}:{f.lineno}"
                               for f in reversed(traceback.extract_stack(frame)[-16:]))
        limit = f"{seconds:g} s of CPU time" if signum == signal.SIGPROF else f"{WALL_FACTOR * seconds:g} s of wall time"
        raise TimeLimit(f"ran past the per-case time limit of {limit} in {where}")

    old = signal.signal(signal.SIGPROF, expire), signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, WALL_FACTOR * seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, old[0])
        signal.signal(signal.SIGALRM, old[1])
