"""Delivery accounting with failure-only delivery reports, without a broker."""
from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError

from notify_transport.drivers.kafka import producer as producer_module
from notify_transport.drivers.kafka.delivery import deadletter
from notify_transport.drivers.kafka.producer import NotificationProducer


class HeldProducer:
    """A stand-in client: produce() holds messages until the test confirms or fails them."""

    def __init__(self, config):
        self.config = config
        self.held = []

    def produce(self, topic, value, key=None, on_delivery=None):
        self.held.append((topic, value, on_delivery))

    def __len__(self):
        return len(self.held)

    def confirm(self, n):
        del self.held[:n]  # a success: no report, the client just lets go of it

    def fail(self, n, code=KafkaError._MSG_TIMED_OUT):
        for topic, _, callback in self.held[:n]:
            message = type("M", (), {"topic": lambda self, t=topic: t})()
            (callback or self.config["on_delivery"])(KafkaError(code, "timed out"), message)
        del self.held[:n]

    def poll(self, timeout=None):
        return 0

    def flush(self, timeout=None):
        return len(self.held)

    def close(self):
        pass


@pytest.fixture
def made(monkeypatch):
    clients = []

    def make(config):
        clients.append(HeldProducer(config))
        return clients[-1]
    monkeypatch.setattr(producer_module.confluent_kafka, "Producer", make)
    return clients


def test_delivered_is_what_is_neither_failed_nor_held(made, caplog):
    p = NotificationProducer({"bootstrap.servers": "x", "delivery.report.only.error": True}, 1.0, 1.0)
    for i in range(10):
        p.send("t.info", b"v%d" % i)
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
    p.send("t.info", b"v", retry=2)
    client = made[0]
    client.fail(1, KafkaError._TRANSPORT)   # re-sent by its callback: still pending, not failed
    assert p.stats() == {"sent": 1, "delivered": 0, "failed": 0, "pending": 1}
    client.confirm(1)
    assert p.stats() == {"sent": 1, "delivered": 1, "failed": 0, "pending": 0}
    p.close()


def test_retry_and_dead_letter_copies_keep_their_success_reports(monkeypatch):
    seen = {}
    monkeypatch.setattr(deadletter.confluent_kafka, "Producer",
                        lambda config: seen.update(config) or HeldProducer(config))
    side = deadletter.SideProducer({"bootstrap.servers": "x", "delivery.report.only.error": True},
                                   "test")
    side._client()
    assert seen["delivery.report.only.error"] is False
