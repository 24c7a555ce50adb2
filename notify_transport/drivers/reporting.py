"""Rate-limited logging of repeated failures.

A broker outage can fail thousands of deliveries (or polls) at once; one line
per event would drown the log. Each kind of failure is logged at most once per
interval, and the next line says how many were left out; with a ``max_interval``
the interval of a kind doubles while it keeps failing, so a long outage writes a
few lines, not one a second. Counters elsewhere keep the exact numbers. An owner
that polls calls :meth:`RateLimitedLog.summarize_due` as it goes, so that the count
of a burst that has ended is said within an interval.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Hashable

from notify_transport.drivers import threads

#: The longest interval between two lines about an outage that goes on (a broker down):
#: one a second at first, then 2, 4... seconds apart, a line a minute after two minutes.
OUTAGE_MAX_INTERVAL = 60.0


class RateLimitedLog:
    """``log(level, key, fmt, *args)``: at most one line per ``key`` and interval.

    A key's interval starts at ``interval``. A key that comes again within ``max_interval``
    of its last event is a failure that goes on: its next interval is twice the last one
    (or twice the time since its last line, when longer), up to ``max_interval``
    (default: ``interval``, a fixed rate). After that long without an event it starts again.
    """

    def __init__(self, logger: logging.Logger, interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, max_interval: float | None = None) -> None:
        self._log = logger
        self.interval = interval
        self.max_interval = interval if max_interval is None else max(interval, max_interval)
        self._clock = clock
        # key -> [time of the last line, repeats left out since, level, fmt, args,
        #         the key's interval, time of its last event]
        self._seen: dict[Hashable, list[Any]] = {}
        self._lock = threads.Lock()

    def _next_interval(self, entry: list[Any] | None, now: float) -> float:
        """The interval after a line for ``entry`` at ``now``: longer while its failure goes on."""
        if entry is None or now - entry[6] >= self.max_interval:
            return self.interval
        return min(max(entry[5], now - entry[0]) * 2, self.max_interval)

    def log(self, level: int, key: Hashable, fmt: str, *args: Any) -> None:
        now = self._clock()
        with self._lock:
            entry = self._seen.get(key)
            if entry is not None and now - entry[0] < entry[5] and now - entry[6] < self.max_interval:
                entry[1] += 1
                entry[2:5] = [level, fmt, args]
                entry[6] = now
                return
            left_out = entry[1] if entry is not None else 0
            self._seen[key] = [now, 0, level, fmt, args, self._next_interval(entry, now), now]
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
                if now - entry[0] < entry[5]:
                    continue
                if entry[1]:
                    due.append(entry)
                    self._seen[key] = [now, 0, *entry[2:5], self._next_interval(entry, now), entry[6]]
                elif now - entry[6] >= self.max_interval:  # quiet long enough: the next line starts over
                    del self._seen[key]
        self._say_left_out(due)

    def _say_left_out(self, entries: list[list[Any]]) -> None:
        for _, left_out, level, fmt, args, *_ in entries:
            self._log.log(level, "%d more not logged one by one; the last: " + fmt, left_out, *args)
