"""Time in tests: waiting on a condition (one helper for every broker's tests), and a clock that
a unit test sets by hand."""
from __future__ import annotations

import os
import time
from typing import Any, Callable


def wait_until(predicate: Callable[[], Any], timeout: float = 15.0, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds pass; its last answer as a bool."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def time_between_batches(resolution: float = 0.001) -> float:
    """A wall-clock time after everything stamped so far and before anything stamped next.

    Kafka timestamps have millisecond resolution: the clock is waited past the returned time
    by more than that (a condition on the clock, not a sleep of a guessed length).
    """
    middle = time.time() + 2 * resolution
    wait_for_clock(middle + 2 * resolution, interval=resolution)
    return middle


def wait_for_clock(moment: float, interval: float = 0.001) -> None:
    """Wait until the wall clock (``time.time()``) is past ``moment``: for tests of relative times."""
    wait_until(lambda: time.time() > moment, timeout=max(0.0, moment - time.time()) + 5.0,
               interval=interval)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (signal 0 asks without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class Clock:
    """A clock for code that takes one (``clock=``): it says ``now``, which the test sets."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
