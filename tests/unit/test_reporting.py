"""Rate-limited logging of repeated events (drivers/reporting.py): what is left out is counted,
and every count is said, at the next line, as the owner polls, or as it closes."""
from __future__ import annotations

import logging

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
                max_size=80))
def test_every_event_is_said_once_and_each_key_at_most_twice_an_interval(
        steps: list[tuple[str, str, float]]) -> None:
    clock = Clock()
    handler = Recording()
    logger = logging.getLogger("t.ratelimit.property")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        log = RateLimitedLog(logger, interval=10.0, clock=clock)
        for n, (kind, key, pause) in enumerate(steps):
            clock.now += pause
            if kind == "event":
                log.log(logging.WARNING, key, "%s: event %d", key, n)
            else:
                log.summarize_due()
        log.summarize()
    finally:
        logger.removeHandler(handler)
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
