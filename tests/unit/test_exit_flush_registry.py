"""The exit flush registry (notify_transport.drivers.exit_flush), with fake senders: no broker.

Each test gets an empty registry of its own and records ``atexit.register``
instead of calling it, so nothing here runs at the test process's exit. The
real exit, in a child process, is in tests/functional/test_exit_flush.py.
"""
from __future__ import annotations

import gc
import logging
import os
from typing import Any, Callable

import pytest

from notify_transport.drivers import exit_flush


class FakeSender:
    """Holds ``held`` notifications; a flush of ``t`` seconds delivers ``per_second * t`` of them."""

    def __init__(self, held: int, per_second: float = float("inf"), fail: bool = False) -> None:
        self.held = held
        self.per_second = per_second
        self.fail = fail
        self.waits: list[float] = []

    def flush(self, timeout: float | None = None) -> int:
        assert timeout is not None
        self.waits.append(timeout)
        if self.fail:
            raise RuntimeError("client closed")
        if self.per_second == float("inf"):
            self.held = 0
        else:
            self.held = max(0, self.held - int(self.per_second * timeout))
        return self.held


@pytest.fixture
def hooks(monkeypatch: pytest.MonkeyPatch) -> list[Callable[[], Any]]:
    """A fresh registry; the exit hooks it would register are returned instead."""
    registered: list[Callable[[], Any]] = []
    monkeypatch.setattr(exit_flush, "_LIVE", {})
    monkeypatch.setattr(exit_flush, "_hook_registered", False)
    monkeypatch.setattr(exit_flush.atexit, "register", registered.append)
    return registered


def test_the_exit_hook_is_registered_once_when_the_first_sender_registers(hooks) -> None:
    assert hooks == []
    senders = [FakeSender(1), FakeSender(2)]
    for sender in senders:
        exit_flush.register(sender, 5.0, "kafka://k1:9092")
    assert hooks == [exit_flush.flush_all]
    assert exit_flush.live_count() == 2


def test_everything_delivered_logs_no_warning(hooks, caplog) -> None:
    caplog.set_level(logging.DEBUG, exit_flush.__name__)
    sender = FakeSender(20)
    exit_flush.register(sender, 5.0, "kafka://k1:9092")
    assert exit_flush.flush_all() == 0
    assert sender.held == 0 and len(sender.waits) == 1 and 0 < sender.waits[0] <= 5.0
    assert [r.levelno for r in caplog.records] == [logging.DEBUG]


def test_what_is_not_delivered_in_time_is_counted_and_logged_at_warning(hooks, caplog) -> None:
    caplog.set_level(logging.WARNING, exit_flush.__name__)
    senders = [FakeSender(20, per_second=0), FakeSender(3)]  # alive: the registry's refs are weak
    exit_flush.register(senders[0], 1.5, "kafka://k1:9092/prod")
    exit_flush.register(senders[1], 5.0, "rabbit://rmq:5672/")
    assert exit_flush.flush_all() == 20
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage() == ("At exit, 20 notification(s) for kafka://k1:9092/prod were not "
                                   "confirmed by the broker within 1.5s (exit_flush_timeout) and are lost")


def test_senders_share_one_deadline(hooks, monkeypatch) -> None:
    """Flushed one after the other, each gets what is left of its own timeout from the same start."""
    clock = [100.0]
    monkeypatch.setattr(exit_flush.time, "monotonic", lambda: clock[0])

    class SlowSender(FakeSender):
        def flush(self, timeout: float | None = None) -> int:
            held = super().flush(timeout)
            clock[0] += timeout or 0.0  # it used all of its time
            return held

    first, second = SlowSender(5, per_second=0), SlowSender(5, per_second=0)
    exit_flush.register(first, 2.0, "a")
    exit_flush.register(second, 3.0, "b")
    exit_flush.flush_all()
    # popped last-registered first: b waits 3s; a's 2s from the same start are over by then
    assert (second.waits, first.waits) == ([3.0], [0.0])


def test_a_collected_sender_is_dropped(hooks) -> None:
    exit_flush.register(FakeSender(1), 5.0, "gone")
    gc.collect()
    assert exit_flush.live_count() == 0
    assert exit_flush._LIVE == {}


def test_each_sender_is_flushed_once(hooks) -> None:
    sender = FakeSender(4, per_second=0)
    exit_flush.register(sender, 0.0, "k")
    assert exit_flush.flush_all() == 4
    assert exit_flush.flush_all() == 0
    assert sender.waits == [0.0]


def test_a_failing_flush_is_logged_and_the_others_still_flushed(hooks, caplog) -> None:
    caplog.set_level(logging.WARNING, exit_flush.__name__)
    good, broken = FakeSender(2), FakeSender(2, fail=True)
    exit_flush.register(good, 5.0, "good")
    exit_flush.register(broken, 5.0, "kafka://broken:9092")
    exit_flush.flush_all()
    assert good.held == 0
    assert any("kafka://broken:9092" in r.getMessage() and "client closed" in r.getMessage()
               for r in caplog.records)


def test_a_forked_child_does_not_flush_its_parents_senders(hooks, monkeypatch) -> None:
    sender = FakeSender(3)
    exit_flush.register(sender, 5.0, "parent's")
    parent = os.getpid()
    monkeypatch.setattr(exit_flush.os, "getpid", lambda: parent + 1)
    assert exit_flush.live_count() == 0
    assert exit_flush.flush_all() == 0
    assert sender.waits == []
