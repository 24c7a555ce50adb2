"""The notifier recovers from a fatal producer error (issue 11, item 2), without a broker.

After a broker restart that lost acknowledged writes, the idempotent producer
gets OUT_OF_ORDER_SEQUENCE_NUMBER: a fatal error, which confluent-kafka may
raise as a KafkaException out of ``poll()`` (in the delivery-report thread)
and which makes every later ``produce()`` fail with "Local: Fatal error". The
client must then be replaced, its messages counted as failed, and sending
resume on a new client.
"""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from notify_transport.drivers.kafka import producer as producer_module
from notify_transport.drivers.kafka.delivery import deadletter
from notify_transport.drivers.kafka.producer import NotificationProducer

OUT_OF_ORDER = KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, "Broker: out of order sequence",
                          fatal=True)


class FatalAfterRestart:
    """A client that turns fatal when told: poll() raises once, produce() refuses from then on."""

    def __init__(self, config):
        self.config = config
        self.held = []
        self.fatal = False
        self.raise_in_poll = threading.Event()
        self.closed = False

    def produce(self, topic, value, key=None, on_delivery=None, headers=None):
        if self.closed:
            raise RuntimeError("Producer has been closed")
        if self.fatal:
            raise KafkaException(KafkaError(KafkaError._FATAL, "Local: Fatal error"))
        self.held.append((topic, value, on_delivery))

    def __len__(self):
        return len(self.held)

    def poll(self, timeout=None):
        if self.closed:
            raise RuntimeError("Producer has been closed")
        if self.raise_in_poll.is_set():
            self.raise_in_poll.clear()
            self.fatal = True
            raise KafkaException(OUT_OF_ORDER)
        time.sleep(min(timeout or 0, 0.01))
        return 0

    def flush(self, timeout=None):
        return len(self.held)

    def purge(self, in_queue=True, in_flight=True, blocking=True):
        failed, self.held = self.held, []
        for topic, _, callback in failed:
            message = type("M", (), {"topic": lambda self, t=topic: t})()
            (callback or self.config["on_delivery"])(
                KafkaError(KafkaError._PURGE_QUEUE, "Local: Purged in queue"), message)

    def close(self):
        self.closed = True


@pytest.fixture
def clients(monkeypatch):
    made = []

    def make(config):
        made.append(FatalAfterRestart(config))
        return made[-1]
    monkeypatch.setattr(producer_module.confluent_kafka, "Producer", make)
    return made


def wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_fatal_error_out_of_poll_replaces_the_producer(clients):
    p = NotificationProducer({"bootstrap.servers": "x", "delivery.report.only.error": True},
                             1.0, 1.0, "kafka://x")
    for i in range(5):
        p.send("t.info", b"v%d" % i)
    first = clients[0]
    first.raise_in_poll.set()  # the reporter thread's next poll raises the fatal error
    assert wait_for(lambda: first.closed), "the fatal client was never replaced"
    # its 5 queued messages are failed and counted, not silently gone
    assert p.stats() == {"sent": 5, "delivered": 0, "failed": 5, "pending": 0}
    p.send("t.info", b"after")
    assert len(clients) == 2 and clients[1].held == [("t.info", b"after", None)]
    assert p.stats() == {"sent": 6, "delivered": 0, "failed": 5, "pending": 1}
    p.close()


def test_fatal_error_at_produce_replaces_the_producer_and_sends_on_the_new_one(clients):
    p = NotificationProducer({"bootstrap.servers": "x", "delivery.report.only.error": True},
                             1.0, 1.0, "kafka://x")
    p.send("t.info", b"before")
    clients[0].fatal = True  # fatal, and no error_cb / poll told us yet
    p.send("t.info", b"after")
    assert len(clients) == 2 and clients[0].closed
    assert clients[1].held == [("t.info", b"after", None)]
    assert p.stats() == {"sent": 2, "delivered": 0, "failed": 1, "pending": 1}
    p.close()


def test_fatal_error_reported_by_error_cb_replaces_the_producer_at_the_next_send(clients):
    p = NotificationProducer({"bootstrap.servers": "x"}, 1.0, 1.0, "kafka://x")
    p.send("t.info", b"v")
    clients[0].config["error_cb"](OUT_OF_ORDER)
    p.send("t.info", b"w")
    assert len(clients) == 2 and clients[0].closed and p.stats()["failed"] == 1
    # a late report of the old client's fatal error does not condemn the new one
    clients[0].config["error_cb"](OUT_OF_ORDER)
    p.send("t.info", b"x")
    assert len(clients) == 2 and p.stats() == {"sent": 3, "delivered": 0, "failed": 1, "pending": 2}
    p.close()


# -- the retry / dead-letter producer of a listener ----------------------------------

@pytest.fixture
def side_clients(monkeypatch):
    made = []

    def make(config):
        made.append(FatalAfterRestart(config))
        return made[-1]
    monkeypatch.setattr(deadletter.confluent_kafka, "Producer", make)
    return made


def test_dead_letter_copies_move_to_a_new_client_after_a_fatal_error(side_clients):
    side = deadletter.SideProducer({"bootstrap.servers": "x"}, "test")
    outcomes = []
    side.send("t.dlq", b"a", b"k", [], outcomes.append)
    first = side_clients[0]
    first.raise_in_poll.set()
    side.serve()  # the listener's polling thread serves reports: the fatal error surfaces here
    assert len(side_clients) == 2 and first.held == []  # replaced; the old one was purged
    assert [held[:2] for held in side_clients[1].held] == [("t.dlq", b"a")]  # the copy resent
    side.send("t.dlq", b"b", b"k", [], outcomes.append)
    assert len(side_clients[1].held) == 2 and side.pending == 2 and outcomes == []


def test_a_fatal_produce_sends_the_copy_on_a_new_client(side_clients):
    side = deadletter.SideProducer({"bootstrap.servers": "x"}, "test")
    side.send("t.dlq", b"a", b"k", [], lambda err: None)
    side_clients[0].fatal = True
    side.send("t.dlq", b"b", b"k", [], lambda err: None)
    assert len(side_clients) == 2
    assert sorted(h[1] for h in side_clients[1].held) == [b"a", b"b"]
