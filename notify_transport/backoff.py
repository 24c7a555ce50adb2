"""The one retry/backoff policy: how long to wait after the n-th failure in a row.

Blocking loops call :meth:`Backoff.wait` (cut short by an event or a deadline);
event loops call :meth:`Backoff.delay` and schedule the attempt themselves.
The delay is ``initial * factor**(n-1) + step * (n-1)``, capped at ``maximum``,
plus a random ``0..jitter`` (kombu's reconnect splay).
"""
from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Delays between attempts; immutable, so one policy may serve many loops."""

    initial: float = 0.1
    factor: float = 2.0
    step: float = 0.0
    maximum: float = 5.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if self.initial < 0 or self.step < 0 or self.maximum < 0 or self.jitter < 0:
            raise ValueError(f"backoff delays must not be negative: {self!r}")
        if self.factor < 1:
            raise ValueError(f"backoff factor must be >= 1 (delays never shrink): {self!r}")

    def delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` failures in a row (0 when nothing failed)."""
        if failures <= 0:
            return 0.0
        done = failures - 1
        try:
            grown = self.initial * self.factor ** done
        except OverflowError:
            grown = self.maximum
        base = min(grown + self.step * done, self.maximum)
        if self.jitter > 0:
            base += random.uniform(0, self.jitter)  # noqa: S311 - spacing, not security
        return base

    def wait(self, failures: int, stop: threading.Event | None = None,
             deadline: float | None = None) -> bool:
        """Wait out :meth:`delay` for ``failures``, no later than ``deadline`` (monotonic).

        Returns True when ``stop`` was set (the caller should give up), False
        when the delay (or the time left before the deadline) passed.
        """
        delay = self.delay(failures)
        if deadline is not None:
            delay = min(delay, max(0.0, deadline - time.monotonic()))
        if stop is not None:
            return stop.wait(delay)
        if delay > 0:
            time.sleep(delay)
        return False
