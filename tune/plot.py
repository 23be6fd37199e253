"""The tuning curve: best time (or GFLOP/s) so far against the trial number (matplotlib).

matplotlib is optional: without it ``plot_tuning_curve`` prints why and returns None.

>>> best_so_far([3.0, float("inf"), 2.0, 5.0])
[3.0, 3.0, 2.0, 2.0]
"""
from __future__ import annotations

import sys
from typing import Sequence

__all__ = ["plot_tuning_curve", "best_so_far"]


def best_so_far(costs: Sequence[float]) -> list[float]:
    """The running minimum of ``costs`` (``inf`` until the first success)."""
    out, best = [], float("inf")
    for c in costs:
        best = min(best, c)
        out.append(best)
    return out


def plot_tuning_curve(curves: dict[str, Sequence[float]] | Sequence[float], path: str, flops: float | None = None,
                      title: str = "tuning curve", baseline: float | None = None) -> str | None:
    """Save the best-so-far curve(s) of per-trial costs (seconds; ``inf`` for failures) to ``path``.

    ``curves`` is one cost list or ``{label: costs}``; with ``flops`` the y axis is GFLOP/s;
    ``baseline`` (seconds) draws a horizontal reference line (e.g. numpy). Returns ``path``,
    or None when matplotlib is not installed.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_tuning_curve: matplotlib is not installed; skipping the plot "
              "(pip install matplotlib)", file=sys.stderr)
        return None
    if not isinstance(curves, dict):
        curves = {"best so far": curves}
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, costs in curves.items():
        ys = best_so_far(costs)
        xs = [k + 1 for k, y in enumerate(ys) if y != float("inf")]
        ys = [y for y in ys if y != float("inf")]
        if flops:
            ys = [flops / y / 1e9 for y in ys]
        ax.step(xs, ys, where="post", label=label)
    if baseline:
        ax.axhline(flops / baseline / 1e9 if flops else baseline, color="gray", linestyle="--", label="baseline")
    ax.set_xlabel("trial")
    ax.set_ylabel("GFLOP/s" if flops else "seconds")
    if not flops:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
