"""A counter that many threads can increment without a lock.

Producers are shared by every sending thread and delivery reports arrive on
whichever thread polls, so plain ``x += 1`` could lose updates. The hot path
uses ``itertools.count``'s ``__next__``, which is atomic; reading (rare) takes
a lock and corrects for the number it consumes.
"""
from __future__ import annotations

import itertools
import threading


class Counter:
    """``incr()`` is lock-free and thread-safe; ``value`` is exact when nobody increments."""

    __slots__ = ("incr", "_count", "_reads", "_lock")

    def __init__(self) -> None:
        self._count = itertools.count()
        #: Add one. Bound method of the underlying counter: no Python frame per call.
        self.incr = self._count.__next__
        self._reads = 0
        self._lock = threading.Lock()

    @property
    def value(self) -> int:
        with self._lock:
            # next() returns increments + reads so far; each read consumed one number
            current = next(self._count) - self._reads
            self._reads += 1
            return current

    def __repr__(self) -> str:
        return f"<Counter {self.value}>"
