"""A one-line progress display on stderr: trials done, best time so far, failures.

On a terminal the line is redrawn in place; otherwise a line is printed at most every
``interval`` seconds (and at the end), so logs stay short.

>>> import io
>>> out = io.StringIO()
>>> p = Progress(3, stream=out, interval=0.0)
>>> p.update(best=2e-3); p.update(error=True); p.update(best=1e-3); p.close()
>>> "3/3" in out.getvalue() and "best 1.000 ms" in out.getvalue()
True
"""
from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress", "format_time"]


def format_time(seconds: float | None) -> str:
    """``1.234 ms`` style; ``-`` for None or infinity."""
    if seconds is None or seconds == float("inf"):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3f} {unit}"
    return f"{seconds / 1e-9:.1f} ns"


class Progress:
    """``[#####     ] 12/40  best 1.234 ms  (3 failed)``; ``update`` once per finished trial."""

    def __init__(self, total: int, stream: TextIO | None = None, label: str = "tuning", width: int = 24,
                 interval: float = 2.0, enabled: bool = True, flops: float | None = None):
        self.total = max(1, int(total))
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.width = width
        self.interval = interval
        self.enabled = enabled
        self.flops = flops
        self.done = 0
        self.failed = 0
        self.best: float | None = None
        self._last = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def update(self, best: float | None = None, error: bool = False, n: int = 1) -> None:
        self.done += n
        self.failed += int(error)
        if best is not None and (self.best is None or best < self.best):
            self.best = best
        self._draw(final=False)

    def line(self) -> str:
        filled = int(self.width * min(self.done, self.total) / self.total)
        bar = "#" * filled + " " * (self.width - filled)
        text = f"{self.label} [{bar}] {self.done}/{self.total}  best {format_time(self.best)}"
        if self.flops and self.best:
            text += f" ({self.flops / self.best / 1e9:.2f} GFLOP/s)"
        if self.failed:
            text += f"  ({self.failed} failed)"
        return text

    def _draw(self, final: bool) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self._tty:
            self.stream.write("\r" + self.line() + ("\n" if final else ""))
        elif final or now - self._last >= self.interval:
            self.stream.write(self.line() + "\n")
            self._last = now
        self.stream.flush()

    def close(self) -> None:
        self._draw(final=True)
