"""Rate-limited logging of repeated events (drivers/reporting.py): what is left out is counted,
and every count is said, at the next line, as the owner polls, or as it closes."""
from __future__ import annotations

import contextlib
import logging
from typing import Iterator

import pytest
from hypothesis import given, strategies as st
from waits import Clock

from notify_transport.drivers.reporting import RateLimitedLog

LEFT_OUT = "%d more not logged one by one; the last: "



class Recording(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def recorded(name: str) -> Iterator[Recording]:
    """The records of logger ``name`` while the block runs, kept from the root's handlers."""
    handler = Recording()
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.propagate = True


def events_said(record: logging.LogRecord) -> int:
    """How many events one line stands for: itself, plus the repeats it counts."""
    if record.msg.startswith(LEFT_OUT):
        return record.args[0]
    if record.msg.endswith(" (and %d more like it since the last report)"):
        return 1 + record.args[-1]
    return 1


def test_rate_limited_log_counts_what_it_leaves_out(caplog):
    log = RateLimitedLog(logging.getLogger("t.ratelimit"), interval=60)
    with caplog.at_level(logging.ERROR, "t.ratelimit"):
        for _ in range(5):
            log.log(logging.ERROR, "k", "delivery to %s failed", "topic-x")
        log.log(logging.ERROR, "other", "other failure")
        log.summarize()
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "delivery to topic-x failed"
    assert lines[1] == "other failure"
    assert lines[2] == "4 more not logged one by one; the last: delivery to topic-x failed"
    assert len(lines) == 3


@given(st.lists(st.tuples(st.sampled_from(["event", "poll"]), st.sampled_from("ab"), st.floats(0, 25)),
                max_size=80), st.sampled_from([None, 25.0, 80.0]))
def test_every_event_is_said_once_and_each_key_at_most_twice_an_interval(
        steps: list[tuple[str, str, float]], max_interval: float | None) -> None:
    clock = Clock()
    with recorded("t.ratelimit.property") as handler:
        log = RateLimitedLog(logging.getLogger("t.ratelimit.property"), interval=10.0, clock=clock,
                             max_interval=max_interval)
        for n, (kind, key, pause) in enumerate(steps):
            clock.now += pause
            if kind == "event":
                log.log(logging.WARNING, key, "%s: event %d", key, n)
            else:
                log.summarize_due()
        log.summarize()
    for key in "ab":
        lines = [r for r in handler.records if r.getMessage().split("the last: ")[-1].startswith(f"{key}:")]
        assert sum(map(events_said, lines)) == sum(kind == "event" and k == key for kind, k, _ in steps)
        # a line starts an interval; at most one more line (its count) closes it
        assert len(lines) <= 2 * (1 + int(clock.now // 10.0))


def test_a_burst_is_one_line_then_its_count_once_the_interval_passed(caplog) -> None:
    """A failover's redelivered copies: 300 in a moment, then none; the count comes at the next poll
    an interval later, not only when the owner closes."""
    clock = Clock()
    log = RateLimitedLog(logging.getLogger("t.burst"), interval=10.0, clock=clock)
    with caplog.at_level(logging.WARNING, "t.burst"):
        for n in range(300):
            log.log(logging.WARNING, "duplicate", "dropping duplicate notification %s", f"id{n}")
        assert [r.getMessage() for r in caplog.records] == ["dropping duplicate notification id0"]
        clock.now = 9.9
        log.summarize_due()
        assert len(caplog.records) == 1
        clock.now = 10.0
        log.summarize_due()
        assert caplog.records[-1].getMessage() == \
            "299 more not logged one by one; the last: dropping duplicate notification id299"
        log.summarize()  # nothing left to say
        clock.now = 30.0
        log.summarize_due()
        assert len(caplog.records) == 2


def _outage(log: RateLimitedLog, clock: Clock, seconds: float, every: float) -> int:
    """One failure each ``every`` seconds for ``seconds``, the owner polling between; how many."""
    events = 0
    end = clock.now + seconds
    while clock.now < end:
        log.log(logging.WARNING, "down", "broker down (%d)", events)
        events += 1
        clock.now += every
        log.summarize_due()
    return events


@pytest.mark.parametrize("every", [0.3, 10.0])  # librdkafka's reconnect attempts; its "all brokers down"
def test_an_outage_that_goes_on_is_logged_further_and_further_apart(every: float) -> None:
    # before: a line a second (or one per 10 s repeat) for as long as the broker stayed away
    clock = Clock()
    with recorded("t.ratelimit.outage") as handler:
        log = RateLimitedLog(logging.getLogger("t.ratelimit.outage"), interval=1.0, clock=clock, max_interval=60.0)
        events = _outage(log, clock, 120.0, every)
        two_minutes = len(handler.records)
        assert two_minutes <= 9  # 0, 1, 3, 7, 15, 31, 63 s... (10 s apart: 0, 10, 30, 70 s...)
        events += _outage(log, clock, 600.0, every)
        assert len(handler.records) - two_minutes <= 11  # then a line a minute
        clock.now += 60.0  # a minute without the failure: the next outage starts at a line a second
        log.summarize_due()
        said = sum(map(events_said, handler.records))
        before = len(handler.records)
        events += _outage(log, clock, 3.0, 0.3)
        log.summarize()
    assert said + sum(map(events_said, handler.records[before:])) == events  # every event counted
    assert len(handler.records) - before >= 3  # 0, 1 s, then the count


def test_a_fixed_rate_log_stays_at_its_interval() -> None:
    clock = Clock()
    with recorded("t.ratelimit.fixed") as handler:
        _outage(RateLimitedLog(logging.getLogger("t.ratelimit.fixed"), interval=1.0, clock=clock), clock, 30.0, 0.25)
    assert len(handler.records) >= 29  # no max_interval: a line a second, as before
