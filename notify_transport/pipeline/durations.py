"""Durations as the pipeline's options spell them (``"10 minutes"``), and as people read them.

Spark takes interval strings for windows and lateness; the pipeline also
needs them as numbers (to judge lateness itself) and prints delays back in
human units (``22 h``, not ``80000 s``). Plain Python, no Spark.
"""
from __future__ import annotations

import math
import re

from notify_transport.exceptions import ConfigurationError

_UNITS = {
    "ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*")


def parse_duration(text: str) -> float:
    """Seconds of ``"10 minutes"``, ``"1 hour 30 minutes"``, ``"90s"``; ConfigurationError otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError(f"Empty duration {text!r}; write e.g. '10 minutes'")
    position, total = 0, 0.0
    body = text.strip()
    if body.lower().startswith("interval "):
        body = body[len("interval "):]
    while position < len(body):
        match = _PART.match(body, position)
        if not match or match.end() == position:
            raise ConfigurationError(f"Invalid duration {text!r}; write e.g. '10 minutes' or '1 hour 30 minutes'")
        unit = _UNITS.get(match.group(2).lower())
        if unit is None:
            raise ConfigurationError(f"Unknown unit {match.group(2)!r} in duration {text!r}; use "
                                     "milliseconds, seconds, minutes, hours, days or weeks")
        total += float(match.group(1)) * unit
        position = match.end()
    return total


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
