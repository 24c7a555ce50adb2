"""Where ``tail --from`` starts in each partition: earliest, latest, OFFSET, -N or TIME.

The same words as kcat's ``-o``: an offset is absolute in every partition,
``-N`` is the last N records of each partition, and a time (ISO 8601 or
relative with a unit, ``-1h``) is the first record at or after it. Kept apart
from argparse and the cluster so that parsing is unit tested; where a start
falls in a partition is the readers' :mod:`~notify_transport.drivers.kafka.positions`.
"""
from __future__ import annotations

import dataclasses
import re

from notify_transport import times
from notify_transport.drivers.kafka import (EARLIEST, LAST, LATEST, OFFSET, TIMESTAMP, StartPosition,
                                            start_offset)

TIME = "time"

HELP = ("earliest, latest, OFFSET (that offset in every partition), -N (the last N of each "
        "partition) or TIME (the first notification at or after it: " + times.TIME_HELP + ")")

_COUNT = re.compile(r"-(\d+)")
_OFFSET = re.compile(r"\d+")


@dataclasses.dataclass(frozen=True)
class Start:
    """A parsed ``--from``: ``kind`` and, for offset / last / time, its number."""

    kind: str
    value: float = 0

    def describe(self) -> str:
        if self.kind == OFFSET:
            return f"offset {int(self.value)}"
        if self.kind == LAST:
            return f"the last {int(self.value)} of each partition"
        if self.kind == TIME:
            return times.format_time(self.value)
        return self.kind

    @property
    def position(self) -> StartPosition:
        """The same place as a reader's start position."""
        return StartPosition(TIMESTAMP if self.kind == TIME else self.kind, self.value)

    def resolve(self, low: int, high: int, at_time: int = -1) -> int:
        """The offset to start at in a partition holding ``[low, high)``; ``at_time`` is the
        broker's answer for :data:`TIME` (-1: nothing that recent, so the end)."""
        return start_offset(self.position, low, high, at_time)


def parse_start(text: str, now: float | None = None) -> Start:
    """``earliest``/``latest``/``1200``/``-10``/``-1h``/``2024-05-01T12:00Z`` -> :class:`Start`;
    ValueError with a readable message otherwise."""
    value = text.strip().lower()
    if value in (EARLIEST, "beginning"):
        return Start(EARLIEST)
    if value in (LATEST, "end"):
        return Start(LATEST)
    if _OFFSET.fullmatch(value):
        return Start(OFFSET, int(value))
    count = _COUNT.fullmatch(value)
    if count:
        if int(count.group(1)) == 0:
            return Start(LATEST)
        return Start(LAST, int(count.group(1)))
    try:
        return Start(TIME, times.parse_time(text, now))
    except ValueError:
        raise ValueError(f"--from {text!r}: expected {HELP}") from None
