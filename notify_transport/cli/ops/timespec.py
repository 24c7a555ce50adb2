"""Points in time given on the command line: ISO 8601 or relative to now (``-1h``).

Kept apart from argparse so that parsing can be unit tested with a fixed clock.
"""
from __future__ import annotations

import datetime as dt
import re
import time

#: Seconds per unit of a relative time.
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_RELATIVE = re.compile(r"-?((?:\d+(?:\.\d+)?[smhdw])+)")
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")

HELP = ("ISO 8601 (2024-05-01T12:00:00Z, 2024-05-01 12:00; a time without a zone is UTC, as "
        "oslo's notification timestamps) or relative to now (-90s, -30m, -1h, -2d, -1h30m)")


def parse_time(text: str, now: float | None = None) -> float:
    """Seconds since the epoch for ``text``; ValueError with a readable message otherwise."""
    value = text.strip()
    if not value:
        raise ValueError("empty time")
    relative = _RELATIVE.fullmatch(value)
    if relative:
        seconds = sum(float(n) * UNITS[u] for n, u in _PART.findall(relative.group(1)))
        return (time.time() if now is None else now) - seconds
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{text!r} is not a time: use {HELP}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return parsed.timestamp()


def to_millis(epoch_seconds: float) -> int:
    """Kafka timestamps are milliseconds since the epoch."""
    return int(round(epoch_seconds * 1000))


def format_time(epoch_seconds: float) -> str:
    """``2024-05-01T12:00:00.000Z``: how the CLI prints a point in time."""
    stamp = dt.datetime.fromtimestamp(epoch_seconds, tz=dt.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"
