"""A counter that many threads can increment without a lock.

The hot path uses ``itertools.count``'s atomic ``__next__``; reading (rare)
takes a lock and corrects for the number it consumes. The Kafka producer
counts its sends and reports with it, the listeners what they did.
"""
from __future__ import annotations

import itertools

from notify_transport.drivers import threads


class Counter:
    """``incr()`` is lock-free and thread-safe; ``value`` is exact when nobody increments."""

    __slots__ = ("incr", "_count", "_reads", "_lock")

    def __init__(self) -> None:
        self._count = itertools.count()
        #: Add one. Bound method of the underlying counter: no Python frame per call.
        self.incr = self._count.__next__
        self._reads = 0
        self._lock = threads.Lock()

    @property
    def value(self) -> int:
        with self._lock:
            # next() returns increments + reads so far; each read consumed one number
            current = next(self._count) - self._reads
            self._reads += 1
            return current

    def __repr__(self) -> str:
        return f"<Counter {self.value}>"
