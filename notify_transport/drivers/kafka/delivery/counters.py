"""A counter that many threads can increment without a lock.

The hot path uses ``itertools.count``'s atomic ``__next__``; reading (rare)
takes a lock and corrects for the number it consumes.
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


class DeliveryCounters:
    """What a Kafka listener did with the records it read, for ``metrics()``.

    ``retried``/``dead_lettered`` count copies the broker confirmed;
    ``copy_failures`` copies that could not be delivered (their originals stay
    uncommitted); ``undecodable`` records that were not valid notifications;
    ``stale`` records not dispatched because their partition was revoked
    while they waited for a worker or before they were handed out; ``cancelled`` records an abrupt stop
    dropped before dispatch; ``commit_failures`` commits the broker refused.
    """

    NAMES = ("undecodable", "retried", "dead_lettered", "copy_failures", "stale",
             "cancelled", "commits", "commit_failures")
    # the slots' types (set in __init__ by name)
    undecodable: Counter
    retried: Counter
    dead_lettered: Counter
    copy_failures: Counter
    stale: Counter
    cancelled: Counter
    commits: Counter
    commit_failures: Counter

    __slots__ = NAMES

    def __init__(self) -> None:
        for name in self.NAMES:
            setattr(self, name, Counter())

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name).value for name in self.NAMES}
