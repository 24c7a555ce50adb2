"""Delivery accounting with failure-only delivery reports, without a broker."""
from __future__ import annotations

import logging
import threading

import pytest
from confluent_kafka import KafkaError

import kafka_fake_producer
from kafka_fake_producer import install, send
from waits import wait_until

from notify_transport.drivers.kafka.delivery import deadletter
from notify_transport.drivers.kafka.producer import KafkaProducer, NotificationProducer
from tests.unit.test_reporting import events_said


@pytest.fixture
def made(monkeypatch):
    return install(monkeypatch)


def test_delivered_is_what_is_neither_failed_nor_held(made, caplog):
    p = NotificationProducer({"bootstrap.servers": "x", "delivery.report.only.error": True}, 1.0, 1.0)
    for i in range(10):
        send(p, "t.info", b"v%d" % i)
    client = made[0]
    assert p.stats() == {"sent": 10, "delivered": 0, "failed": 0, "pending": 10}
    client.confirm(6)
    with caplog.at_level(logging.ERROR):
        client.fail(3)
    assert p.stats() == {"sent": 10, "delivered": 6, "failed": 3, "pending": 1}
    assert "Notification delivery to Kafka topic t.info failed" in caplog.text
    assert p.flush(0) == 1
    client.confirm(1)
    assert p.stats() == {"sent": 10, "delivered": 7, "failed": 3, "pending": 0}
    p.close()
    assert p.stats()["pending"] == 0


def test_a_resent_message_counts_once(made):
    p = NotificationProducer({"bootstrap.servers": "x"}, 1.0, 1.0)
    send(p, "t.info", b"v", retry=2)
    client = made[0]
    client.fail(1, KafkaError._TRANSPORT)   # re-sent by its callback: still pending, not failed
    assert p.stats() == {"sent": 1, "delivered": 0, "failed": 0, "pending": 1}
    client.confirm(1)
    assert p.stats() == {"sent": 1, "delivered": 1, "failed": 0, "pending": 0}
    p.close()


def test_retry_and_dead_letter_copies_keep_their_success_reports(made):
    side = deadletter.SideProducer({"bootstrap.servers": "x", "delivery.report.only.error": True},
                                   "test")
    outcomes = []
    side.send("t.dlq", b"v", None, [], outcomes.append)
    assert made[0].config["delivery.report.only.error"] is False
    made[0].confirm(1)
    assert outcomes == [None] and side.pending == 0
    side.close(0)


def test_callbacks_waiting_for_a_poll_are_not_counted_as_messages(made, caplog):
    """librdkafka's ``len()`` also counts the error and log callbacks waiting for a poll, which a
    broker that is down keeps queueing: what flush() and close() report as not confirmed (and
    the exit flush as lost) is the messages alone. (Regression: 22 of 20 notifications lost.)"""
    lost: list[int] = []
    p = KafkaProducer({"bootstrap.servers": "x", "delivery.report.only.error": True}, "kafka://x",
                      on_report=lambda err, msg: None, on_lost=lost.append, queue_timeout=1.0,
                      background=False, unit="notification")
    for i in range(20):
        p.produce("t.info", b"v%d" % i)
    client = made[0]
    client.events = 2  # two connection errors queued, not served yet
    assert p.flush(0) == 20
    client.events = 3
    with caplog.at_level(logging.ERROR):
        assert p.close(0) == 20
    assert "20 notification(s) to kafka://x were not confirmed" in caplog.text
    assert lost == []


class _ErrorsAfterAPoll(kafka_fake_producer.FakeClient):
    """A broker that is down: ``bursts`` times, two connection errors are queued just after a
    poll that found nothing to serve (the moment the producer counts what it holds)."""

    bursts = 0

    def poll(self, timeout=None):
        served = super().poll(timeout)
        if not served and self.bursts:
            self.bursts -= 1
            self.events = 2
        return served


def test_errors_queued_after_the_last_poll_are_not_counted_as_messages(monkeypatch):
    """Regression (CI, broker down): flush() returned 2 although its one message had been
    reported failed: two connection errors arrived between the last poll and the count."""
    made = install(monkeypatch, _ErrorsAfterAPoll)
    failed: list[KafkaError] = []
    p = KafkaProducer({"bootstrap.servers": "x", "delivery.report.only.error": True}, "kafka://x",
                      on_report=lambda err, msg: failed.append(err), on_lost=lambda n: None,
                      queue_timeout=1.0, background=False, unit="notification")
    p.produce("t.info", b"v")
    p.produce("t.info", b"w")
    made[0].fail(1)
    assert len(failed) == 1
    made[0].bursts = 1
    assert p.flush(0) == 1 and p.pending == 1  # the other message is still held
    made[0].confirm(1)  # not reported (errors only): the count alone says it left
    made[0].bursts = 1
    assert p.flush(0) == 0 and p.pending == 0
    made[0].bursts = 1
    assert p.close(0) == 0


def test_flush_returns_once_a_report_being_handled_is_counted(made):
    """Regression (CI, Apache Kafka): flush() returned 0 while the report thread was still inside
    the failure's callback, so the failure's log line was not written yet (and its count could
    have been missing from the stats). A report being handled is still held."""
    entered, release = threading.Event(), threading.Event()
    handled: list[KafkaError] = []

    def on_report(err, msg):
        entered.set()
        release.wait(10)
        handled.append(err)

    p = KafkaProducer({"bootstrap.servers": "x", "delivery.report.only.error": True}, "kafka://x",
                      on_report=on_report, on_lost=lambda n: None, queue_timeout=1.0, unit="notification")
    p.produce("t.info", b"v")
    client = made[0]
    client.reports.append((client.held.pop(0), KafkaError(KafkaError._MSG_TIMED_OUT, "failed")))
    assert entered.wait(10)  # the report thread is inside the callback; librdkafka still counts it
    assert len(client) == 1 and p.pending == 1
    threading.Timer(0.2, release.set).start()
    assert p.flush(10) == 0
    assert len(handled) == 1 and p.pending == 0
    p.close(0)


def test_a_full_queue_is_never_counted_past_its_bound(made):
    """Regression (CI, two Kafka nodes down, queue bound 2,000): the pending count read 2,001.
    A message whose callback runs is still in librdkafka's count and was added once more;
    a send waiting for room is counted until it is refused. Neither is a message held."""
    entered, release = threading.Event(), threading.Event()

    def on_report(err, msg):
        entered.set()
        release.wait(10)

    p = KafkaProducer({"bootstrap.servers": "x", "delivery.report.only.error": True}, "kafka://x",
                      on_report=on_report, on_lost=lambda n: None, queue_timeout=0.5, unit="notification")
    p.produce("t.info", b"v0")
    client = made[0]
    client.capacity = 3
    for i in (1, 2):
        p.produce("t.info", b"v%d" % i)
    # a send waiting for room (counted from its call), then a failure whose callback runs
    waiting = threading.Thread(target=p.produce, args=("t.info", b"w"))
    waiting.start()
    client.reports.append((client.held.pop(0), KafkaError(KafkaError._MSG_TIMED_OUT, "failed")))
    assert entered.wait(10)
    assert len(client) == 3 and p.pending == 3
    release.set()  # the failure is settled: its room goes to the waiting send
    waiting.join(10)
    assert client.values() == [b"v1", b"v2", b"w"] and p.pending == 3
    p.close(0)


class _ErrorsKeepComing(kafka_fake_producer.FakeClient):
    """A broker that is down: every poll leaves a new connection error queued behind it."""

    down = True

    def poll(self, timeout=None):
        served = super().poll(timeout)
        self.events = int(self.down)
        return served


def test_a_send_waiting_for_room_is_not_counted_while_errors_queue_up(monkeypatch):
    """Regression (CI, two Kafka nodes down, queue bound 2,000): the pending count read 2,001 while
    sends waited for room: librdkafka's length counted a queued connection error and our own count
    the waiting send, so the smaller of the two was still one too many."""
    made = install(monkeypatch, _ErrorsKeepComing)
    p = KafkaProducer({"bootstrap.servers": "x", "delivery.report.only.error": True}, "kafka://x",
                      on_report=lambda err, msg: None, on_lost=lambda n: None, queue_timeout=0.5,
                      background=False, unit="notification")
    p.produce("t.info", b"v0")
    made[0].capacity = 3
    for i in (1, 2):
        p.produce("t.info", b"v%d" % i)
    refused: list[BufferError] = []

    def send_one_more():
        try:
            p.produce("t.info", b"w")
        except BufferError as exc:
            refused.append(exc)

    waiting = threading.Thread(target=send_one_more)
    waiting.start()
    counts = []
    while waiting.is_alive():  # sampled for as long as the send waits (queue_timeout)
        counts.append(p.pending)
    waiting.join()
    assert len(refused) == 1 and len(counts) > 1
    assert max(counts) == 3 and p.pending == 3
    made[0].down = False
    p.close(0)


def test_confirmed_messages_and_queued_errors_never_count_past_the_bound(monkeypatch):
    """Regression (CI, two Kafka nodes down, queue bound 2,000, seen twice): the pending count read
    2,001. Confirmations are not reported (failure-only reports), so our own count keeps them;
    librdkafka's length counts a full queue plus the connection error waiting for a poll."""
    made = install(monkeypatch, _ErrorsKeepComing)
    p = KafkaProducer({"bootstrap.servers": "x", "delivery.report.only.error": True,
                       "queue.buffering.max.messages": 3}, "kafka://x",
                      on_report=lambda err, msg: None, on_lost=lambda n: None, queue_timeout=0.1,
                      background=False, unit="notification")
    for i in range(5):  # five sent and confirmed: never reported back
        p.produce("t.info", b"c%d" % i)
        made[0].confirm(1)
    for i in range(3):  # the nodes go down: the queue fills up
        p.produce("t.info", b"v%d" % i)
    p.poll(0)  # a connection error is queued behind the poll
    assert len(made[0]) == 4 and p.pending == 3
    with pytest.raises(BufferError):
        p.produce("t.info", b"w")
    assert p.pending == 3
    made[0].confirm(3)
    made[0].down = False
    p.poll(0)
    assert p.pending == 0
    p.close(0)


def test_a_burst_of_failed_deliveries_is_counted_in_the_log_before_close(caplog):
    """Thirty notifications time out together on an unreachable cluster (the real client, no
    broker): one line names the first, and the count of the others follows within a second or
    so, while the producer is still open, not only when it closes."""
    p = NotificationProducer({"bootstrap.servers": "127.0.0.1:1", "delivery.report.only.error": True,
                              "message.timeout.ms": 300}, 1.0, 1.0)
    send_one = p.sender("t.info", lambda message, ctxt: b"v")

    def lines() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "delivery to Kafka topic t.info failed" in r.getMessage()]

    try:
        with caplog.at_level(logging.ERROR, "notify_transport.drivers.kafka.producer"):
            for i in range(30):
                send_one({}, {"publisher_id": "p", "n": i})
            assert wait_until(lambda: p.stats()["failed"] == 30, 10)
            assert wait_until(lambda: sum(map(events_said, lines())) == 30, 10), caplog.text
            assert 2 <= len(lines()) <= 4  # not a line per failure
    finally:
        p.close()
