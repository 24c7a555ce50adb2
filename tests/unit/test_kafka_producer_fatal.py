"""A fatal producer error costs no message and blocks no caller (issues 11 and 19), without a broker.

After a broker restart that lost acknowledged writes, the idempotent producer
gets OUT_OF_ORDER_SEQUENCE_NUMBER: a fatal error, which confluent-kafka raises
as a KafkaException out of ``poll()`` (in the delivery-report thread) and
which makes every later ``produce()`` fail with "Local: Fatal error". The
client is replaced; what it held comes back through purge reports and is sent
again on the new client (not failed), unless its message timeout passed or
the transport is closing. The notifier and the retry/dead-letter producer
share that code (:class:`~notify_transport.drivers.kafka.producer.KafkaProducer`).
"""
from __future__ import annotations

import json
import sys
import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka_fake_producer import FakeClient, install, send, wait_for

from notify_transport.drivers.kafka.delivery import deadletter
from notify_transport.drivers.kafka.producer import NotificationProducer

OUT_OF_ORDER = KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, "Broker: out of order sequence",
                          fatal=True)
CONFIG = {"bootstrap.servers": "x", "delivery.report.only.error": True, "message.timeout.ms": 60000}


class FatalInPoll(FakeClient):
    """``raise_in_poll(until)``: the poll running now (or the next) raises the fatal error
    once ``until()`` holds (at most 5 s later); the client refuses produce() from then on."""

    def __init__(self, config):
        super().__init__(config)
        self._until = None
        self.polling_armed = threading.Event()

    def raise_in_poll(self, until=lambda: True):
        self._until = until

    def poll(self, timeout=None):
        until = self._until
        if until is None:
            return super().poll(timeout)
        self._until = None
        self.polling_armed.set()
        deadline = time.monotonic() + 5.0
        while not until() and time.monotonic() < deadline:
            time.sleep(0.005)
        self.fatal = True
        raise KafkaException(OUT_OF_ORDER)


@pytest.fixture
def clients(monkeypatch):
    return install(monkeypatch, FatalInPoll)


def notifier():
    return NotificationProducer(dict(CONFIG), 1.0, 0.2, "kafka://x")


def test_a_send_and_the_report_thread_hitting_the_fatal_error_together_do_not_deadlock(clients):
    """Regression: the sender replaced the client and joined the report thread under the lock
    while that thread, its poll() raising the same fatal error, waited for the lock."""
    p = notifier()
    for i in range(3):
        send(p, "t.info", b"v%d" % i)
    first = clients[0]
    sending_done = threading.Event()
    sender = threading.Thread(target=lambda: (send(p, "t.info", b"x"), sending_done.set()),
                              daemon=True, name="sender")

    def sender_waits_on_a_thread():
        """The sender is done, or blocked in threading (a join) after seeing the fatal error."""
        if sending_done.is_set():
            return True
        frame = sys._current_frames().get(sender.ident or -1)
        return frame is not None and frame.f_code.co_filename == threading.__file__

    # the report thread is inside poll() when the sender meets the fatal error, and that
    # poll raises it once the sender is replacing the client
    first.raise_in_poll(sender_waits_on_a_thread)
    assert first.polling_armed.wait(5)
    first.fatal = True
    sender.start()
    sender.join(20)
    assert not sender.is_alive(), "Notifier send blocked: producer deadlock"
    assert wait_for(lambda: first.closed)
    assert len(clients) == 2 and sorted(clients[1].values()) == [b"v0", b"v1", b"v2", b"x"]
    assert p.stats() == {"sent": 4, "delivered": 0, "failed": 0, "pending": 4}
    p.close()


def test_a_fatal_error_out_of_poll_moves_what_the_client_held_to_a_new_one(clients):
    p = notifier()
    for i in range(5):
        send(p, "t.info", b"v%d" % i, key="k")
    first = clients[0]
    created = [m.timestamp() for m in first.held]
    first.raise_in_poll()  # the report thread's next poll raises the fatal error
    assert wait_for(lambda: first.closed), "the fatal client was never replaced"
    assert len(clients) == 2
    second = clients[1]
    # re-sent, not failed: same topic, value, key and create time
    assert [(m.topic(), m.value(), m.key(), m.timestamp()) for m in second.held] == \
        [("t.info", b"v%d" % i, "k", created[i]) for i in range(5)]
    assert p.stats() == {"sent": 5, "delivered": 0, "failed": 0, "pending": 5}
    send(p, "t.info", b"after")
    second.confirm(6)
    assert p.stats() == {"sent": 6, "delivered": 6, "failed": 0, "pending": 0}
    p.close()


def test_a_fatal_error_at_produce_resends_the_held_messages_then_the_new_one(clients):
    p = notifier()
    send(p, "t.info", b"before")
    clients[0].fatal = True  # fatal, and no error_cb / poll told us yet
    send(p, "t.info", b"after")
    assert len(clients) == 2 and clients[0].closed
    assert clients[1].values() == [b"before", b"after"]
    assert p.stats() == {"sent": 2, "delivered": 0, "failed": 0, "pending": 2}
    p.close()


def test_a_fatal_error_reported_by_error_cb_replaces_the_producer(clients):
    p = notifier()
    send(p, "t.info", b"v")
    first = clients[0]
    first.config["error_cb"](OUT_OF_ORDER)
    assert wait_for(lambda: first.closed)  # retired by its report thread
    send(p, "t.info", b"w")
    assert len(clients) == 2 and clients[1].values() == [b"v", b"w"]
    # a late report of the old client's fatal error does not condemn the new one
    first.config["error_cb"](OUT_OF_ORDER)
    send(p, "t.info", b"x")
    assert len(clients) == 2 and p.stats() == {"sent": 3, "delivered": 0, "failed": 0, "pending": 3}
    p.close()


@pytest.mark.parametrize("code, fatal", [(KafkaError._FATAL, True),
                                         (KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, False)])
def test_fatal_delivery_reports_move_their_messages_to_a_new_client(clients, code, fatal):
    p = notifier()
    for i in range(4):
        send(p, "t.info", b"v%d" % i)
    first = clients[0]
    # librdkafka fails what it held with the fatal error's code (seen: without the fatal flag)
    first.fail(2, code, fatal=fatal)
    assert wait_for(lambda: first.closed)
    assert sorted(clients[1].values()) == [b"v0", b"v1", b"v2", b"v3"]
    assert p.stats() == {"sent": 4, "delivered": 0, "failed": 0, "pending": 4}
    p.close()


def test_a_message_past_its_timeout_is_failed_not_resent(clients):
    # a timeout far longer than the test, so that a slow machine never ages "young" past it
    p = NotificationProducer({**CONFIG, "message.timeout.ms": 60000}, 1.0, 0.2, "kafka://x")
    send(p, "t.info", b"old")
    send(p, "t.info", b"young")
    first = clients[0]
    first.held[0]._timestamp -= 120000  # created 2 min ago: its 1 min message timeout passed
    first.fatal = True
    send(p, "t.info", b"new")
    assert clients[1].values() == [b"young", b"new"]
    assert p.stats() == {"sent": 3, "delivered": 0, "failed": 1, "pending": 2}
    p.close()


def test_what_close_cannot_deliver_is_failed_and_counted(clients):
    p = notifier()
    for i in range(3):
        send(p, "t.info", b"v%d" % i)
    clients[0].confirm(1)
    p.close()  # the fake never confirms the other two: purged, failed, counted
    assert clients[0].closed and len(clients) == 1
    assert p.stats() == {"sent": 3, "delivered": 1, "failed": 2, "pending": 0}


# -- the retry / dead-letter producer of a listener ----------------------------------

def test_dead_letter_copies_move_to_a_new_client_after_a_fatal_error(clients):
    side = deadletter.SideProducer({"bootstrap.servers": "x"}, "test")
    outcomes = []
    side.send("t.dlq", b"a", b"k", [("h", b"1")], outcomes.append)
    first = clients[0]
    assert first.config["delivery.report.only.error"] is False
    first.raise_in_poll()
    side.serve()  # the listener's polling thread serves reports: the fatal error surfaces here
    assert len(clients) == 2 and first.closed
    second = clients[1]
    assert [(m.topic(), m.value(), m.headers()) for m in second.held] == [("t.dlq", b"a", [("h", b"1")])]
    side.send("t.dlq", b"b", b"k", [], outcomes.append)
    assert side.pending == 2 and outcomes == []
    second.confirm(2)
    side.serve()
    assert outcomes == [None, None] and side.pending == 0
    side.close(0)


def test_a_fatal_produce_sends_the_copies_on_a_new_client(clients):
    side = deadletter.SideProducer({"bootstrap.servers": "x"}, "test")
    outcomes = []
    side.send("t.dlq", b"a", b"k", [], outcomes.append)
    clients[0].fatal = True
    side.send("t.dlq", b"b", b"k", [], outcomes.append)
    assert len(clients) == 2 and clients[1].values() == [b"a", b"b"]
    assert side.pending == 2 and outcomes == []
    assert side.close(0) == 2 and side.pending == 0
    assert [e.code() for e in outcomes] == [KafkaError._PURGE_QUEUE] * 2


def test_a_producer_whose_epoch_keeps_being_bumped_is_replaced(clients):
    """A broker that restarted empty answers UNKNOWN_PRODUCER_ID to every bumped epoch, and
    librdkafka bumps until the messages time out: a new client gets a new producer id."""
    p = NotificationProducer({**CONFIG, "enable.idempotence": True}, 1.0, 0.2, "kafka://x")
    send(p, "t.info", b"v")
    first = clients[0]

    def stats(epoch):
        first.config["stats_cb"](json.dumps({"eos": {"producer_id": 1, "producer_epoch": epoch}}))
    stats(0)
    stats(2)  # a bump or two after a restart is librdkafka's normal recovery
    assert not first.closed and len(clients) == 1
    stats(40)
    assert wait_for(lambda: first.closed)
    assert len(clients) == 2 and clients[1].values() == [b"v"]
    assert p.stats() == {"sent": 1, "delivered": 0, "failed": 0, "pending": 1}
    p.close()
