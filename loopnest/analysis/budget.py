"""Bounded isl work: exact polyhedral operations (dataflow, convex hulls, parametric
minima) are exponential in the worst case, and a few programs of many guarded stages make
them run for minutes. An analysis runs such work under :func:`isl_budget` and takes its
safe answer (a looser bound, "undecided") when isl gives up.

>>> with isl_budget(10 ** 6) as within:
...     n = isl.Set("{ [i] : 0 <= i < 10 }").count_val()
>>> within(), n.to_python()
(True, 10)
"""
from __future__ import annotations

import contextlib

import islpy as isl

__all__ = ["isl_budget", "within_budget"]


@contextlib.contextmanager
def isl_budget(operations: int):
    """Bound the isl operations of the block: ``with isl_budget(n) as within:``; past ``n``
    isl gives up, the isl.Error it raises is swallowed and ``within()`` is False. (islpy does
    not say which error stopped isl, so any isl.Error in the block counts: use it only where
    the caller has a safe answer for "undecided".)

    >>> with isl_budget(5) as within:
    ...     _ = isl.Set("[n] -> { [i, j] : 0 <= i < n and 0 <= j < i and (i + j) mod 7 = 3 }").lexmin()
    >>> within()
    False
    """
    ctx = isl.DEFAULT_CONTEXT
    before = ctx.get_max_operations()
    ctx.set_max_operations(operations)
    ctx.reset_operations()
    ok = [True]
    try:
        yield lambda: ok[0]
    except isl.Error:
        ok[0] = False
    finally:
        ctx.set_max_operations(before)
        ctx.reset_operations()


def within_budget(operations: int, fn, *args):
    """``fn(*args)``, or None when isl gives up (or fails) within ``operations`` isl operations.

    >>> within_budget(10 ** 6, lambda: isl.Set("{ [i] : 0 <= i < 3 }").count_val().to_python())
    3
    """
    out = None
    with isl_budget(operations) as within:
        out = fn(*args)
    return out if within() else None
