"""Times and durations as people write them: the one parser for the whole package.

The CLI, listener start positions and the pipeline accept the same forms
(doc/source/cli.rst, "Times and durations"); bad input is a ConfigurationError
naming them.
"""
from __future__ import annotations

import datetime as dt
import math
import re
import time

from dateutil.parser import isoparse

from notify_transport.exceptions import ConfigurationError

_UNITS = {
    **dict.fromkeys(("ms", "msec", "msecs", "millisecond", "milliseconds"), 0.001),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600.0),
    **dict.fromkeys(("d", "day", "days"), 86400.0),
    **dict.fromkeys(("w", "week", "weeks"), 604800.0),
}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*")
_EPOCH = re.compile(r"\d+(?:\.\d+)?")
#: 9999-12-31T23:59:59.999Z, the last time datetime can print
_LAST_EPOCH = 253402300799.999
_EPOCH_START = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MICROSECOND = dt.timedelta(microseconds=1)

DURATION_HELP = ("a duration such as 90s, 1h30m, 0.5h, '10 minutes' or '1 hour 30 minutes' "
                 "(units: ms, s, m, h, d, w or their names)")
TIME_HELP = ("ISO 8601 (2024-05-01T12:00:00Z, 2024-05-01 12:00; a time without a zone is UTC, as "
             "oslo's notification timestamps), seconds since the epoch, or relative to now "
             "(-90s, -30m, -1h, -2d, -1h30m, '-2 hours')")


def parse_duration(text: str) -> float:
    """Seconds of a duration (see the module); ConfigurationError otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError(f"Empty duration {text!r}; expected {DURATION_HELP}")
    body = text.strip()
    if body[:9].lower() == "interval ":
        body = body[9:]
    position, total = 0, 0.0
    while position < len(body):
        match = _PART.match(body, position)
        if not match:
            raise ConfigurationError(f"Invalid duration {text!r}; expected {DURATION_HELP}")
        unit = _UNITS.get(match.group(2).lower())
        if unit is None:
            raise ConfigurationError(f"Unknown unit {match.group(2)!r} in duration {text!r}; "
                                     f"expected {DURATION_HELP}")
        total += float(match.group(1)) * unit
        position = match.end()
    if not math.isfinite(total):
        raise ConfigurationError(f"Duration {text!r} is too long")
    return total


def parse_time(text: str, now: float | None = None) -> float:
    """Seconds since the epoch of a point in time (see the module); ``now`` anchors
    relative times (default: the clock). ConfigurationError otherwise, also for a
    time before the epoch (Kafka's ListOffsets reads negative times as earliest/latest)."""
    value = text.strip() if isinstance(text, str) else ""
    if not value:
        raise ConfigurationError(f"Empty time {text!r}; expected {TIME_HELP}")
    if _EPOCH.fullmatch(value):
        epoch = float(value)
    else:
        try:
            ago = parse_duration(value[1:] if value.startswith("-") else value)
        except ConfigurationError:
            try:
                epoch = epoch_seconds(isoparse(value))
            except (ValueError, OverflowError):
                raise ConfigurationError(f"{text!r} is not a time: expected {TIME_HELP}") from None
        else:
            epoch = (time.time() if now is None else now) - ago
    if not 0 <= epoch <= _LAST_EPOCH:
        raise ConfigurationError(f"{text!r} is outside 1970-01-01 to 9999-12-31 (UTC)")
    return epoch


def epoch_seconds(stamp: dt.datetime) -> float:
    """Seconds since the epoch of ``stamp``; a naive one is UTC."""
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.timezone.utc)
    return stamp.timestamp()


def timestamp_micros(text: str) -> int:
    """Microseconds since the epoch of a notification's timestamp (ValueError if it is none).

    oslo writes ``str(utcnow())``: ``YYYY-MM-DD HH:MM:SS.ffffff``, naive UTC
    (no fraction when it is zero); ISO 8601 with ``T`` and an offset is accepted too.
    Integer arithmetic, so that no microsecond is lost to a float on the pipeline's hot path.
    """
    parsed = dt.datetime.fromisoformat(text.strip())
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return (parsed - _EPOCH_START) // _MICROSECOND


def to_millis(epoch: float) -> int:
    """Kafka timestamps are milliseconds since the epoch."""
    return int(round(epoch * 1000))


def format_time(epoch: float) -> str:
    """``2024-05-01T12:00:00.000Z``: how a point in time is printed (parse_time reads it back)."""
    millis = to_millis(epoch)  # rounded as Kafka's timestamps are, not truncated
    stamp = _EPOCH_START + dt.timedelta(milliseconds=millis)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


def spark_interval(text: str) -> str:
    """A duration as Spark's interval strings spell it (``"90000000 microseconds"``):
    Spark reads ``10 minutes`` but not ``90s`` or ``1h30m``, which :func:`parse_duration` reads."""
    return f"{round(parse_duration(text) * 1_000_000)} microseconds"


_HUMAN = ((86400.0, "d"), (3600.0, "h"), (60.0, "min"), (1.0, "s"), (0.001, "ms"))


def human_duration(seconds: float | None) -> str:
    """``80000`` -> ``"22.2 h"``; three significant digits at most, sign kept, ``-`` for none."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    magnitude = abs(seconds)
    if magnitude == 0:
        return "0 s"
    for size, unit in _HUMAN:
        if magnitude >= size or unit == "ms":
            value = seconds / size
            digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
            text = f"{value:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{value:.0f}"
            return f"{text} {unit}"
    raise AssertionError("unreachable")
