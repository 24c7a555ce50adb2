"""Rate-limited logging of repeated failures.

A broker outage can fail thousands of deliveries (or polls) at once; one line
per event would drown the log. Each kind of failure is logged at most once per
interval, and the next line says how many were left out. Counters elsewhere
keep the exact numbers. An owner that polls calls :meth:`RateLimitedLog.summarize_due`
as it goes, so that the count of a burst that has ended is said within an interval.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Hashable

from notify_transport.drivers import threads


class RateLimitedLog:
    """``log(level, key, fmt, *args)``: at most one line per ``key`` and ``interval``."""

    def __init__(self, logger: logging.Logger, interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self.interval = interval
        self._clock = clock
        # key -> [time of the last line, repeats left out since, level, fmt, args]
        self._seen: dict[Hashable, list[Any]] = {}
        self._lock = threads.Lock()

    def log(self, level: int, key: Hashable, fmt: str, *args: Any) -> None:
        now = self._clock()
        with self._lock:
            entry = self._seen.get(key)
            if entry is not None and now - entry[0] < self.interval:
                entry[1] += 1
                entry[2:] = [level, fmt, args]
                return
            left_out = entry[1] if entry is not None else 0
            self._seen[key] = [now, 0, level, fmt, args]
        if left_out:
            self._log.log(level, fmt + " (and %d more like it since the last report)",
                          *args, left_out)
        else:
            self._log.log(level, fmt, *args)

    def summarize(self) -> None:
        """Log the repeats that were left out and not yet reported, then forget them."""
        with self._lock:
            entries = [e for e in self._seen.values() if e[1]]
            self._seen.clear()
        self._say_left_out(entries)

    def summarize_due(self) -> None:
        """Log the repeats left out of each key whose last line is an interval old or more.

        Owners call it on every poll: with nothing logged lately it returns without the lock.
        """
        if not self._seen:
            return
        now = self._clock()
        due = []
        with self._lock:
            for key, entry in list(self._seen.items()):
                if now - entry[0] < self.interval:
                    continue
                if entry[1]:
                    due.append(entry)
                    self._seen[key] = [now, 0, *entry[2:]]
                else:
                    del self._seen[key]
        self._say_left_out(due)

    def _say_left_out(self, entries: list[list[Any]]) -> None:
        for _, left_out, level, fmt, args in entries:
            self._log.log(level, "%d more not logged one by one; the last: " + fmt, left_out, *args)
