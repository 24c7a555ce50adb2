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


class _Kind:
    """What :class:`RateLimitedLog` remembers of one key."""

    __slots__ = ("said_at", "left_out", "level", "fmt", "args", "interval", "last_event")

    def __init__(self, now: float, level: int, fmt: str, args: tuple[Any, ...], interval: float,
                 last_event: float) -> None:
        #: when its last line was written, and how many events came since without one
        self.said_at = now
        self.left_out = 0
        #: the last event's line, said in the summary of those left out
        self.level, self.fmt, self.args = level, fmt, args
        #: how long after ``said_at`` the next line may come
        self.interval = interval
        self.last_event = last_event

    def say_left_out(self, log: logging.Logger) -> None:
        log.log(self.level, "%d more not logged one by one; the last: " + self.fmt,
                self.left_out, *self.args)


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
        self._seen: dict[Hashable, _Kind] = {}
        self._lock = threads.Lock()

    def _next_interval(self, kind: _Kind | None, now: float) -> float:
        """The interval after a line for ``kind`` at ``now``: longer while its failure goes on."""
        if kind is None or now - kind.last_event >= self.max_interval:
            return self.interval
        return min(max(kind.interval, now - kind.said_at) * 2, self.max_interval)

    def log(self, level: int, key: Hashable, fmt: str, *args: Any) -> None:
        now = self._clock()
        with self._lock:
            kind = self._seen.get(key)
            if kind is not None and now - kind.said_at < kind.interval \
                    and now - kind.last_event < self.max_interval:
                kind.left_out += 1
                kind.level, kind.fmt, kind.args, kind.last_event = level, fmt, args, now
                return
            left_out = kind.left_out if kind is not None else 0
            self._seen[key] = _Kind(now, level, fmt, args, self._next_interval(kind, now), now)
        if left_out:
            self._log.log(level, fmt + " (and %d more like it since the last report)",
                          *args, left_out)
        else:
            self._log.log(level, fmt, *args)

    def summarize(self) -> None:
        """Log the repeats that were left out and not yet reported, then forget them."""
        with self._lock:
            kinds = [k for k in self._seen.values() if k.left_out]
            self._seen.clear()
        for kind in kinds:
            kind.say_left_out(self._log)

    def summarize_due(self) -> None:
        """Log the repeats left out of each key whose last line is an interval old or more.

        Owners call it on every poll: with nothing logged lately it returns without the lock.
        """
        if not self._seen:
            return
        now = self._clock()
        due = []
        with self._lock:
            for key, kind in list(self._seen.items()):
                if now - kind.said_at < kind.interval:
                    continue
                if kind.left_out:
                    due.append(kind)
                    self._seen[key] = _Kind(now, kind.level, kind.fmt, kind.args,
                                            self._next_interval(kind, now), kind.last_event)
                elif now - kind.last_event >= self.max_interval:  # quiet long enough: start over
                    del self._seen[key]
        for kind in due:
            kind.say_left_out(self._log)
