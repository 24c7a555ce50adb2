"""Notifications over the real RabbitMQ through the public API: pools, priorities, batches,
requeue and poison messages. The same listener code runs on the Kafka driver."""
from __future__ import annotations

import collections
import logging
import threading

import pika
import pytest

import notify_transport as nt
from notify_transport.drivers import envelope
from rabbit_fixtures import wait_for

pytestmark = pytest.mark.functional

PRIORITIES = ["audit", "debug", "info", "warn", "error", "critical", "sample"]


class Recorder:
    def __init__(self, result=None, prios=PRIORITIES):
        self.got: list[tuple] = []
        self.lock = threading.Lock()
        self.result = result
        for prio in prios:
            setattr(self, prio, self._make(prio))

    def _make(self, prio):
        def handle(ctxt, publisher_id, event_type, payload, metadata):
            with self.lock:
                self.got.append((prio, event_type, payload))
            return self.result(payload) if callable(self.result) else self.result
        return handle

    def payloads(self):
        with self.lock:
            return [p for _prio, _ev, p in self.got]


@pytest.fixture
def listeners(rabbit_admin):
    made = []

    def start(transport, targets, endpoints, **kwargs):
        batch = kwargs.pop("batch", False)
        factory = nt.get_batch_notification_listener if batch else nt.get_notification_listener
        listener = factory(transport, targets, endpoints, **kwargs)
        listener.start()
        made.append(listener)
        if kwargs.get("pool"):
            rabbit_admin.queues.add(kwargs["pool"])
        return listener

    yield start
    for listener in made:
        listener.stop()
        listener.wait()


def test_every_priority_round_trips(transports, listeners, unique):
    transport = transports(kind="notify")
    topic = unique("prio")
    recorder = Recorder()
    listeners(transport, [nt.Target(topic=topic)], [recorder])
    notifier = nt.Notifier(transport, publisher_id="svc.host", driver="messagingv2", topics=[topic])
    for prio in PRIORITIES:
        getattr(notifier, prio)({"request_id": "r"}, f"ev.{prio}", {"prio": prio})
    assert transport.flush(5) == 0
    assert wait_for(lambda: len(recorder.got) == 7)
    assert sorted((p, ev) for p, ev, _ in recorder.got) == sorted((p, f"ev.{p}") for p in PRIORITIES)
    stats = transport.delivery_stats()
    assert stats["delivered"] == 7 and stats["failed"] == 0 and stats["pending"] == 0


def test_pools_each_get_everything_and_split_within_a_pool(transports, listeners, unique):
    transport = transports(kind="notify")
    topic = unique("pools")
    pool_a = f"{topic}_a"
    pool_b = f"{topic}_b"
    a1, a2, b = Recorder(prios=["info"]), Recorder(prios=["info"]), Recorder(prios=["info"])
    listeners(transports(kind="notify"), [nt.Target(topic=topic)], [a1], pool=pool_a)
    listeners(transports(kind="notify"), [nt.Target(topic=topic)], [a2], pool=pool_a)
    listeners(transports(kind="notify"), [nt.Target(topic=topic)], [b], pool=pool_b)
    notifier = nt.Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
    for i in range(300):
        notifier.info({}, "ev", i)
    notifier.info({}, "ev", "last")  # a marker, counted below with the rest
    transport.flush(10)
    # 300 and "last" in each pool. Pool A's two consumers share one queue: "last" handled by one
    # says nothing of what the other took before it and is still handling (seen in CI: 8 short)
    assert wait_for(lambda: len(b.payloads()) >= 301 and len(a1.payloads() + a2.payloads()) >= 301,
                    timeout=15)
    for recorder in (a1, a2, b):
        recorder.got = [g for g in recorder.got if g[2] != "last"]
    assert sorted(b.payloads()) == list(range(300))
    assert sorted(a1.payloads() + a2.payloads()) == list(range(300))  # no duplicates, none lost
    assert a1.payloads() and a2.payloads()  # both members of the pool worked


def test_several_topics_one_listener(transports, listeners, unique):
    transport = transports(kind="notify")
    topics = [unique("multi"), unique("multi")]
    recorder = Recorder(prios=["info", "error"])
    listeners(transport, [nt.Target(topic=t) for t in topics], [recorder], pool=f"{topics[0]}_pool")
    for topic in topics:
        notifier = nt.Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
        notifier.info({}, "ev", f"{topic}-info")
        notifier.error({}, "ev", f"{topic}-error")
    assert wait_for(lambda: len(recorder.got) == 4)
    assert sorted(recorder.payloads()) == sorted(f"{t}-{p}" for t in topics for p in ("info", "error"))


def test_requeue_delivers_again(transports, listeners, unique):
    transport = transports(kind="notify")
    topic = unique("requeue")
    attempts = collections.Counter()

    def result(payload):
        attempts[payload] += 1
        return nt.NotificationResult.REQUEUE if attempts[payload] < 3 else nt.NotificationResult.HANDLED

    recorder = Recorder(result=result, prios=["info"])
    listeners(transport, [nt.Target(topic=topic)], [recorder], allow_requeue=True)
    notifier = nt.Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
    notifier.info({}, "ev", "again")
    assert wait_for(lambda: attempts["again"] == 3)
    # a requeued message goes back to its place in the queue, ahead of one sent later
    notifier.info({}, "ev", "last")
    assert wait_for(lambda: attempts["last"] == 3)
    assert attempts["again"] == 3


def test_poison_messages_are_set_aside_and_listener_goes_on(transports, listeners, unique,
                                                             rabbit_admin, caplog):
    transport = transports(kind="notify")
    topic = unique("poison")
    recorder = Recorder(prios=["info"])
    listeners(transport, [nt.Target(topic=topic)], [recorder])
    notifier = nt.Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
    json_props = pika.BasicProperties(content_type="application/json")
    notifier.info({}, "ev", 1)
    transport.flush(5)
    rabbit_admin.publish_raw("openstack", f"{topic}.info", b"\xff not json", json_props)
    rabbit_admin.publish_raw("openstack", f"{topic}.info", b'{"no": "event_type"}', json_props)
    rabbit_admin.publish_raw("openstack", f"{topic}.info", b"[1, 2]", json_props)
    notifier.info({}, "ev", 2)
    assert wait_for(lambda: sorted(recorder.payloads()) == [1, 2])
    assert wait_for(lambda: rabbit_admin.queue_info(f"{topic}.info")[0] == 0)
    assert caplog.text.count("rejecting an undecodable message") == 3


def test_redelivered_copies_are_dropped_and_counted_in_one_line(transports, listeners, unique,
                                                                  rabbit_admin, caplog):
    """After a failover RabbitMQ hands back copies by the hundred: each is dropped, and the log
    says so in one line and one count, not a line per copy."""
    transport = transports(kind="notify")
    topic = unique("copies")
    recorder = Recorder(prios=["info"])
    listener = listeners(transport, [nt.Target(topic=topic)], [recorder])
    message = {"message_id": "m-1", "publisher_id": "p", "event_type": "ev", "priority": "INFO",
               "payload": "once", "timestamp": "2026-12-07 05:00:00.000000", "_unique_id": "copy-1"}
    body = envelope.encode(message, {})
    json_props = pika.BasicProperties(content_type="application/json")
    rabbit_admin.publish_raw("openstack", f"{topic}.info", body, json_props)
    assert wait_for(lambda: recorder.payloads() == ["once"])
    with caplog.at_level(logging.WARNING, "notify_transport"):
        for _ in range(200):
            rabbit_admin.publish_raw("openstack", f"{topic}.info", body, json_props)
        notifier = nt.Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
        notifier.info({}, "ev", "after")
        assert wait_for(lambda: recorder.payloads() == ["once", "after"])
        assert wait_for(lambda: rabbit_admin.queue_info(f"{topic}.info")[0] == 0)
        listener.stop()
        listener.wait()
    lines = [r.getMessage() for r in caplog.records if "duplicate notification" in r.getMessage()]
    assert len(lines) == 2, lines
    assert "dropping duplicate notification copy-1" in lines[0]
    assert lines[1].startswith("199 more not logged one by one; the last: ")
    assert lines[1].endswith("dropping duplicate notification copy-1")


def test_batch_listener(transports, listeners, unique):
    transport = transports(kind="notify")
    topic = unique("batch")
    batches: list[int] = []

    class BatchEndpoint:
        def info(self, messages):
            batches.append(len(messages))

    listeners(transport, [nt.Target(topic=topic)], [BatchEndpoint()], batch=True,
              batch_size=10, batch_timeout=0.5)
    notifier = nt.Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
    for i in range(25):
        notifier.info({}, "ev", i)
    transport.flush(5)
    assert wait_for(lambda: sum(batches) == 25, timeout=10)
    assert max(batches) == 10 and all(0 < b <= 10 for b in batches)


def test_unacked_messages_come_back_to_the_pool(transports, listeners, unique, rabbit_admin):
    """A listener that leaves without acknowledging hands its messages back to the queue."""
    transport = transports(kind="notify")
    topic = unique("handback")
    notifier = nt.Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
    pool = f"{topic}_pool"
    driver_listener = transport._listen_for_notifications(  # noqa: SLF001 - driver level on purpose
        [(nt.Target(topic=topic), "info")], pool, 1, None)
    driver_listener.start()
    rabbit_admin.queues.add(pool)
    for i in range(5):
        notifier.info({}, "ev", i)
    transport.flush(5)
    taken = []
    while len(taken) < 5:
        taken.extend(driver_listener.poll(timeout=5, max_messages=5))
    taken[0].acknowledge()
    driver_listener.stop()
    driver_listener.cleanup()  # 4 unacknowledged
    recorder = Recorder(prios=["info"])
    listeners(transport, [nt.Target(topic=topic)], [recorder], pool=pool)
    assert wait_for(lambda: len(recorder.got) == 4)
    assert sorted(recorder.payloads()) == [1, 2, 3, 4]


def test_listener_options_are_checked(transports, unique):
    transport = transports(kind="notify")
    with pytest.raises(nt.ConfigurationError, match="delivery_mode"):
        transport._listen_for_notifications(  # noqa: SLF001
            [(nt.Target(topic=unique("opts")), "info")], None, 1, None, delivery_mode="x")
