"""Delivering at interpreter exit what live senders still hold.

A process that exits without ``transport.cleanup()`` would lose what its
producers hold until the broker confirms it. Drivers register each sender with
its ``exit_flush_timeout``; at exit every live sender is flushed, all from the
same start (the wait is the longest timeout, not the sum), and what was not
delivered is logged at WARNING. The flush takes no lock and starts no thread,
so it works once other threads (and eventlet's hub) are gone. Weak references:
a collected sender is dropped; a forked child does not flush its parent's.
"""
from __future__ import annotations

import atexit
import itertools
import logging
import os
import time
import weakref
from typing import NamedTuple, Protocol

LOG = logging.getLogger(__name__)

#: The option each driver's group has for the timeout (named in the warning).
OPTION = "exit_flush_timeout"


class Flushable(Protocol):
    """A sender: ``flush(timeout)`` waits for confirmations, returns how many are still pending."""

    def flush(self, timeout: float) -> int: ...


class _Entry(NamedTuple):
    sender: "weakref.ref[Flushable]"
    timeout: float
    name: str
    pid: int


#: Live senders by registration number. Plain dict operations (atomic under the
#: GIL), no lock: registration happens on any thread, green or native.
_LIVE: dict[int, _Entry] = {}
_NUMBERS = itertools.count()
_hook_registered = False


def register(sender: Flushable, timeout: float, name: str) -> None:
    """Flush ``sender`` for up to ``timeout`` seconds at interpreter exit, if it is still alive then.

    ``name`` says whose notifications were lost in the warning (no secrets:
    a redacted URL).
    """
    global _hook_registered
    number = next(_NUMBERS)

    def forget(_ref: object, number: int = number) -> None:
        _LIVE.pop(number, None)

    _LIVE[number] = _Entry(weakref.ref(sender, forget), max(0.0, timeout), name, os.getpid())
    if not _hook_registered:
        _hook_registered = True
        # registered after logging's own exit hook (logging is imported above), so run before it
        atexit.register(flush_all)


def live_count() -> int:
    """How many registered senders are still alive in this process."""
    pid = os.getpid()
    return sum(1 for entry in list(_LIVE.values()) if entry.pid == pid and entry.sender() is not None)


def flush_all() -> int:
    """Flush every live sender of this process for up to its timeout; return how many
    notifications were not delivered. Each sender is flushed once: later calls find it gone."""
    started = time.monotonic()
    pid = os.getpid()
    lost = 0
    while _LIVE:
        try:
            _number, entry = _LIVE.popitem()
        except KeyError:  # emptied meanwhile
            break
        sender = entry.sender()
        if sender is None or entry.pid != pid:
            continue
        wait = max(0.0, started + entry.timeout - time.monotonic())
        try:
            pending = sender.flush(wait)
        except Exception as exc:  # noqa: BLE001 - the others are flushed all the same
            LOG.warning("At exit, notifications held for %s could not be flushed: %s", entry.name, exc)
            continue
        if pending:
            lost += pending
            LOG.warning("At exit, %d notification(s) for %s were not confirmed by the broker within "
                        "%.1fs (%s) and are lost", pending, entry.name, entry.timeout, OPTION)
        else:
            LOG.debug("At exit, every notification for %s was delivered", entry.name)
    return lost
