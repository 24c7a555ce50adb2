"""Fixtures for every test: nothing a test starts may outlive it.

A thread or transport left running after its test keeps logging into the
next tests (or into a closed capture stream: "Logging error ... I/O operation
on closed file") and makes failures depend on test order. The autouse fixture
below fails the test that leaves a non-daemon thread or an open transport
behind, or changes the level of the loggers the command line sets up (a test
that ran the CLI without ``logs.restored()`` silenced librdkafka's logger, and
a later test passed only because of it). ``waits.py`` in this folder is the one home for waiting on a condition.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Iterator

import pytest
from oslo_config import cfg

from notify_transport.cli import logs
from notify_transport.transport import open_transport_drivers
from session_brokers import apache_kafka, noida  # noqa: F401 - session fixtures of every folder

#: How long a thread that is finishing (its stop already asked for) may take to end.
THREAD_GRACE = 5.0
#: The loggers whose levels the command line sets (the root, the chatty and the progress ones).
CLI_LOGGERS = ("", "notify_transport", *logs.CHATTY, *logs.PROGRESS)


def _join_new_threads(before: set[threading.Thread], timeout: float) -> list[threading.Thread]:
    """Wait (bounded) for the non-daemon threads started since ``before`` to end; those still alive."""
    deadline = time.monotonic() + timeout
    left = []
    for thread in threading.enumerate():
        if thread in before or thread.daemon or thread is threading.current_thread():
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            left.append(thread)
    return left


@pytest.fixture
def conf() -> cfg.ConfigOpts:
    """A configuration of the test's own, parsed with no arguments (no file, no command line)."""
    opts = cfg.ConfigOpts()
    opts([])
    return opts


@pytest.fixture
def oslo_conf() -> cfg.ConfigOpts:
    """oslo.messaging's global configuration, parsed with no arguments: oslo.messaging registers
    some of its options only there, so a test that runs both libraries side by side uses it."""
    cfg.CONF([])
    return cfg.CONF


@pytest.fixture(autouse=True)
def nothing_outlives_the_test() -> Iterator[None]:
    """Fail the test that leaves an open transport or a non-daemon thread behind."""
    threads_before = set(threading.enumerate())
    drivers_before = set(open_transport_drivers())
    levels_before = {name: logging.getLogger(name).level for name in CLI_LOGGERS}
    yield
    levels = {name: logging.getLogger(name).level for name in CLI_LOGGERS}
    changed = {name or "root": level for name, level in levels.items() if level != levels_before[name]}
    for name, level in levels_before.items():
        logging.getLogger(name).setLevel(level)
    leaked = [d for d in open_transport_drivers() if d not in drivers_before]
    for driver in leaked:  # so that the leak does not spill into the next tests
        try:
            driver.cleanup()
        except Exception:  # noqa: BLE001 - reported below as a leak anyway
            pass
    threads = _join_new_threads(threads_before, THREAD_GRACE)
    problems = []
    if changed:
        problems.append(f"logger levels changed (run the CLI inside logs.restored()): {changed}")
    if leaked:
        problems.append(f"transports not cleaned up (their drivers): {leaked}")
    if threads:
        problems.append(f"non-daemon threads still running {THREAD_GRACE:g}s after the test: "
                        f"{[t.name for t in threads]}")
    if problems:
        pytest.fail("the test left things running: " + "; ".join(problems), pytrace=False)
