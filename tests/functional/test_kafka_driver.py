"""The Kafka driver at the driver level (drivers/base API), on every broker."""
from __future__ import annotations

import json
import logging
import threading
import uuid

import pytest
from confluent_kafka.admin import AdminClient

from notify_transport.drivers.base import IncomingMessage
from notify_transport.target import Target

pytestmark = pytest.mark.functional

PRIORITIES = ("audit", "debug", "info", "warn", "error", "critical", "sample")


def notification(i: int = 0, priority: str = "info", event_type: str = "compute.instance.create",
                 publisher_id: str = "compute.host-1", **payload) -> dict:
    return {"message_id": str(uuid.uuid4()), "publisher_id": publisher_id, "event_type": event_type,
            "priority": priority.upper(), "payload": {"i": i, **payload},
            "timestamp": "2024-01-02 03:04:05.678901"}


def send(driver, topic: str, priority: str, n: int = 1, version: float = 2.0, ctxt=None,
         start: int = 0, **kw) -> list[dict]:
    sent = []
    for i in range(start, start + n):
        msg = notification(i, priority, **kw)
        driver.send_notification(Target(topic=f"{topic}.{priority}"), ctxt or {"user": "u1"}, msg, version)
        sent.append(msg)
    return sent


def listener_for(driver, pairs, pool=None, **options):
    """A driver listener; each gets a pool of its own unless ``pool`` is given."""
    pool = pool or f"pool-{uuid.uuid4().hex[:8]}"
    return driver.listen_for_notifications([(Target(topic=t), p) for t, p in pairs], pool, 1, None,
                                           **options)


def started_with_sent(driver, topic: str, count: int, pool: str | None = None):
    """A started listener of ``pool`` on ``topic``'s info priority, with ``count`` notifications
    sent to it after start() returned and confirmed by the broker."""
    listener = listener_for(driver, [(topic, "info")], pool=pool)
    listener.start()
    send(driver, topic, "info", count)
    assert driver.flush(10) == 0
    return listener


def poll_until(listener, count: int, tries: int = 20) -> list[IncomingMessage]:
    """What ``listener.poll()`` returns until ``count`` messages came, or ``tries`` polls of 0.5 s."""
    got: list[IncomingMessage] = []
    for _ in range(tries):
        got += listener.poll(timeout=0.5, max_messages=10)
        if len(got) >= count:
            break
    return got


def payload_ids(messages: list[IncomingMessage]) -> list[int]:
    return [m.message["payload"]["i"] for m in messages]


def test_send_and_receive(kafka_bootstrap, kafka_driver, unique_topic, collectors):
    driver = kafka_driver(kafka_bootstrap.url())
    topic = unique_topic("n")
    collector = collectors(listener_for(driver, [(topic, "info")], pool="p1"))
    sent = send(driver, topic, "info", 3, version=2.0, ctxt={"user": "u1", "roles": ["admin"]})
    sent += send(driver, topic, "info", 2, version=1.0, start=3)
    assert driver.flush(10) == 0
    got = collector.wait_for(5)
    assert payload_ids(got) == [0, 1, 2, 3, 4]  # one publisher -> one partition -> in order
    for msg, original in zip(got, sent):
        assert msg.ctxt in ({"user": "u1", "roles": ["admin"]}, {"user": "u1"})
        assert msg.message == original
        assert msg.topic == f"{topic}.info"
        assert msg.partition == 0 and msg.offset is not None
        assert msg.key == b"compute.host-1"
        assert msg.timestamp and msg.timestamp > 1e9
        assert json.loads(msg.raw)  # the wire bytes as received
    assert json.loads(got[0].raw)["oslo.version"] == "2.0"  # messagingv2 envelope
    assert "oslo.version" not in json.loads(got[4].raw)  # messaging: plain JSON
    assert [m.offset for m in got] == sorted(m.offset for m in got)
    stats = driver.delivery_stats()
    assert stats == {"sent": 5, "delivered": 5, "failed": 0, "pending": 0}
    assert collector.settle() == got and not collector.errors


def test_vhost_isolation(kafka_bootstrap, kafka_driver, unique_topic, collectors):
    topic = unique_topic("n")
    on_a = kafka_driver(kafka_bootstrap.url("vhost_a"))
    on_b = kafka_driver(kafka_bootstrap.url("vhost_b"))
    no_vhost = kafka_driver(kafka_bootstrap.url(""))
    col_a, col_b, col_none = collectors(listener_for(on_a, [(topic, "info")]),
                                        listener_for(on_b, [(topic, "info")]),
                                        listener_for(no_vhost, [(topic, "info")]))
    send(on_a, topic, "info", 2)
    send(on_b, topic, "info", 1, start=10)
    send(no_vhost, topic, "info", 1, start=20)
    for driver in (on_a, on_b, no_vhost):
        assert driver.flush(10) == 0
    assert payload_ids(col_a.wait_for(2)) == [0, 1]
    assert payload_ids(col_b.wait_for(1)) == [10]
    assert payload_ids(col_none.wait_for(1)) == [20]
    assert {m.topic for m in col_a.messages} == {f"{topic}.info.vhost_a"}
    for collector, count in ((col_a, 2), (col_b, 1), (col_none, 1)):
        assert len(collector.settle()) == count


def test_several_topics_per_listener(kafka_bootstrap, kafka_driver, unique_topic, collectors):
    driver = kafka_driver(kafka_bootstrap.url("v1"))
    first, second = unique_topic("a"), unique_topic("b")
    collector = collectors(listener_for(driver, [(first, "info"), (second, "error"), (first, "error")]))
    send(driver, first, "info", 1, start=0)
    send(driver, second, "error", 1, start=1)
    send(driver, first, "error", 1, start=2)
    send(driver, second, "info", 1, start=3)  # not subscribed
    assert driver.flush(10) == 0
    got = collector.wait_for(3)
    assert sorted(payload_ids(got)) == [0, 1, 2]
    assert {m.topic for m in got} == {f"{first}.info.v1", f"{second}.error.v1", f"{first}.error.v1"}
    assert len(collector.settle()) == 3


def test_all_priorities(kafka_bootstrap, kafka_driver, unique_topic, collectors):
    driver = kafka_driver(kafka_bootstrap.url())
    topic = unique_topic("p")
    collector = collectors(listener_for(driver, [(topic, p) for p in PRIORITIES]))
    for i, priority in enumerate(PRIORITIES):
        send(driver, topic, priority, 1, start=i)
    assert driver.flush(10) == 0
    got = collector.wait_for(len(PRIORITIES))
    assert sorted((m.topic.rsplit(".", 1)[1], m.message["priority"]) for m in got) == sorted(
        (p, p.upper()) for p in PRIORITIES)


def test_every_compression_codec(kafka_bootstrap, kafka_driver, unique_topic, collectors):
    topic = unique_topic("z")
    receiver = kafka_driver(kafka_bootstrap.url())
    collector = collectors(listener_for(receiver, [(topic, "info")]))
    codecs = ("none", "gzip", "snappy", "lz4", "zstd")
    for n, codec in enumerate(codecs):
        sender = kafka_driver(kafka_bootstrap.url(compression_codec=codec))
        send(sender, topic, "info", 3, start=10 * n, blob="compressible " * 50, publisher_id=codec)
        assert sender.flush(10) == 0
        assert sender.delivery_stats()["delivered"] == 3
    got = collector.wait_for(15)
    assert sorted(payload_ids(got)) == sorted(10 * n + i for n in range(5) for i in range(3))
    assert {m.key.decode() for m in got} == set(codecs)
    assert all(m.message["payload"]["blob"] == "compressible " * 50 for m in got)


def test_poison_records_are_skipped(kafka_bootstrap, kafka_driver, unique_topic, collectors,
                                    raw_producer, caplog):
    driver = kafka_driver(kafka_bootstrap.url())
    topic = unique_topic("poison")
    listener = listener_for(driver, [(topic, "info")], pool="poison")
    collector = collectors(listener)
    kafka_topic = f"{topic}.info"
    raw = raw_producer(kafka_bootstrap)
    good = [json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(
        {**notification(i), "_context": {"n": i}})}).encode() for i in range(3)]
    poison = [b"\x00\xff not json", b'{"no": "event_type"}', b'"a string"', None,
              b'{"oslo.version": "2.0", "oslo.message": "{broken"}']
    caplog.set_level(logging.WARNING, "notify_transport.drivers.kafka")
    raw.produce(kafka_topic, good[0])
    for bad in poison[:3]:
        raw.produce(kafka_topic, bad)
    raw.produce(kafka_topic, good[1])
    for bad in poison[3:]:
        raw.produce(kafka_topic, bad)
    raw.produce(kafka_topic, good[2])
    assert raw.flush(10) == 0
    got = collector.wait_for(3)
    assert payload_ids(got) == [0, 1, 2]
    assert [m.ctxt for m in got] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert collector.settle() == got
    assert listener.skipped == len(poison)
    skipped_lines = [r.getMessage() for r in caplog.records if "undecodable" in r.getMessage()]
    assert len(skipped_lines) == len(poison)
    assert f"{kafka_topic}[0]@1" in skipped_lines[0]  # coordinates of the first bad record
    # they were committed with the good ones: the pool does not read them again
    collector.stop()
    again = collectors(listener_for(driver, [(topic, "info")], pool="poison"))
    send(driver, topic, "info", 1, start=99)
    assert driver.flush(10) == 0
    assert payload_ids(again.wait_for(1)) == [99]
    assert len(again.settle()) == 1


def test_message_sent_right_after_start_is_received(kafka_bootstrap, kafka_driver, unique_topic):
    driver = kafka_driver(kafka_bootstrap.url())
    topic = unique_topic("first")
    listener = started_with_sent(driver, topic, 1, pool="first")
    assert payload_ids(poll_until(listener, 1)) == [0]
    listener.stop()
    listener.cleanup()


def test_first_message_not_lost_when_another_listener_takes_the_partition(
        kafka_bootstrap, kafka_driver, unique_topic, collectors):
    """The first listener of a pool commits its start position, so a message sent after
    start() returns reaches whoever owns the partition next (oslo's driver loses it)."""
    driver = kafka_driver(kafka_bootstrap.url())
    topic = unique_topic("handover")
    first = listener_for(driver, [(topic, "info")], pool="handover")
    first.start()
    send(driver, topic, "info", 2)
    assert driver.flush(10) == 0
    first.stop()
    first.cleanup()  # never polled
    second = collectors(listener_for(driver, [(topic, "info")], pool="handover"))
    assert payload_ids(second.wait_for(2)) == [0, 1]


def test_commit_before_dispatch(kafka_bootstrap, kafka_driver, unique_topic, collectors):
    """What poll() returned was committed first: the next listener of the pool never gets it
    again, even though it was never acknowledged."""
    driver = kafka_driver(kafka_bootstrap.url())
    topic = unique_topic("cbd")
    listener = started_with_sent(driver, topic, 3, pool="cbd")
    assert payload_ids(poll_until(listener, 3)) == [0, 1, 2]
    send(driver, topic, "info", 2, start=3)  # fetched by nobody yet
    assert driver.flush(10) == 0
    listener.stop()
    listener.cleanup()
    successor = collectors(listener_for(driver, [(topic, "info")], pool="cbd"))
    assert payload_ids(successor.wait_for(2)) == [3, 4]
    assert len(successor.settle()) == 2


def test_poll_respects_max_messages_and_timeout(kafka_broker, kafka_driver, unique_topic):
    driver = kafka_driver(kafka_broker.url(max_poll_records=4))
    topic = unique_topic("max")
    listener = listener_for(driver, [(topic, "info")])
    listener.start()
    assert listener.poll(timeout=0.2, max_messages=10) == []
    send(driver, topic, "info", 10)
    assert driver.flush(10) == 0
    got: list = []
    sizes = []
    while len(got) < 10:
        batch = listener.poll(timeout=5, max_messages=3 if not got else 100)
        assert batch, "timed out"
        sizes.append(len(batch))
        got += batch
    assert sizes[0] <= 3 and max(sizes) <= 4  # max_messages, then max_poll_records
    assert payload_ids(got) == list(range(10))
    listener.stop()
    assert listener.poll(timeout=5) == []  # returns at once once stopped
    listener.cleanup()


def test_stop_wakes_a_blocked_poll(kafka_broker, kafka_driver, unique_topic):
    driver = kafka_driver(kafka_broker.url())
    listener = listener_for(driver, [(unique_topic("w"), "info")])
    listener.start()
    result = []
    poller = threading.Thread(target=lambda: result.append(listener.poll(timeout=None)))
    poller.start()
    listener.stop()
    poller.join(5)
    assert not poller.is_alive() and result == [[]]
    listener.cleanup()


def test_listener_creates_missing_topics_with_partitions(kafka_broker, kafka_driver, unique_topic):
    driver = kafka_driver(kafka_broker.url("vh", topic_partitions=3))
    topic = unique_topic("new")
    listener = listener_for(driver, [(topic, "info"), (topic, "error")])
    listener.start()
    metadata = AdminClient({"bootstrap.servers": kafka_broker.bootstrap}).list_topics(timeout=10)
    for name in (f"{topic}.info.vh", f"{topic}.error.vh"):
        assert len(metadata.topics[name].partitions) == 3
    assert listener.assignment == {(f"{topic}.{p}.vh", n) for p in ("info", "error") for n in range(3)}
    listener.stop()
    listener.cleanup()


def test_auto_commit_mode_delivers_and_commits(kafka_bootstrap, kafka_driver, unique_topic, collectors):
    driver = kafka_driver(kafka_bootstrap.url(enable_auto_commit="true"))
    topic = unique_topic("auto")
    collector = collectors(listener_for(driver, [(topic, "info")], pool="auto"))
    send(driver, topic, "info", 3)
    assert driver.flush(10) == 0
    assert payload_ids(collector.wait_for(3)) == [0, 1, 2]
    collector.stop()  # close() commits the stored offsets
    again = collectors(listener_for(driver, [(topic, "info")], pool="auto"))
    send(driver, topic, "info", 1, start=3)
    assert driver.flush(10) == 0
    assert payload_ids(again.wait_for(1)) == [3]
    assert len(again.settle()) == 1


def test_start_fails_clearly_when_the_broker_is_down(kafka_driver):
    from notify_transport.exceptions import MessagingException
    from notify_transport.testing.brokers import free_port, kafka_url

    driver = kafka_driver(kafka_url(f"127.0.0.1:{free_port()}", None, {"listener_start_timeout": 1}))
    listener = listener_for(driver, [("t", "info")])
    with pytest.raises(MessagingException, match="Cannot reach the Kafka cluster at 127.0.0.1:"):
        listener.start()
    listener.stop()
    listener.cleanup()


def test_start_fails_clearly_on_a_setting_the_broker_refuses(kafka_broker, kafka_driver, unique_topic):
    from notify_transport.drivers.kafka.listener import KafkaListenerError

    # kafka_broker, like Kafka, refuses session timeouts under 6 s
    driver = kafka_driver(kafka_broker.url(session_timeout=1, heartbeat_interval=0.2))
    listener = listener_for(driver, [(unique_topic("refused"), "info")])
    with pytest.raises(KafkaListenerError, match="(?i)invalid session timeout"):
        listener.start()
    listener.stop()
    listener.cleanup()


def test_requeue_is_reported_in_commit_before_dispatch_mode(kafka_broker, kafka_driver, unique_topic, caplog):
    driver = kafka_driver(kafka_broker.url())
    topic = unique_topic("rq")
    listener = started_with_sent(driver, topic, 2)
    got = poll_until(listener, 2)
    caplog.set_level(logging.WARNING, "notify_transport.drivers.kafka")
    for message in got:
        message.requeue()
    warnings = [r.getMessage() for r in caplog.records if "requeue() is not possible" in r.getMessage()]
    assert len(warnings) == 1 and got[0].coordinates in warnings[0]  # logged once
    listener.stop()
    listener.cleanup()


def test_a_hand_out_that_fails_after_the_fetch_reads_its_records_again(
        kafka_broker, kafka_driver, unique_topic, collectors, caplog):
    """The client's position is past what a poll took; when handing them out raises, the
    listener seeks back on the real broker and the next polls return every record once, in order
    (the hybrid service's pool once lost its first 40 notifications this way)."""
    driver = kafka_driver(kafka_broker.url())
    topic = unique_topic("rewind")
    listener = started_with_sent(driver, topic, 100, pool="rewind")
    policy = listener.policy
    real_on_polled = policy.on_polled
    failures: list[int] = []

    def fails_once(records):
        if not failures:
            failures.append(len(records))
            raise AttributeError("partially initialized module")
        return real_on_polled(records)

    policy.on_polled = fails_once
    got: list = []
    with caplog.at_level(logging.WARNING, logger="notify_transport"):
        for _ in range(60):
            try:
                got += listener.poll(timeout=0.5, max_messages=500)
            except AttributeError:
                assert failures and not got
            if len(got) >= 100:
                break
    assert failures and failures[0] > 0
    assert payload_ids(got) == list(range(100))
    assert any("will be read again" in r.getMessage() for r in caplog.records)
    listener.stop()
    listener.cleanup()
    send(driver, topic, "info", 1, start=100)
    assert driver.flush(10) == 0
    successor = collectors(listener_for(driver, [(topic, "info")], pool="rewind"))
    assert payload_ids(successor.wait_for(1)) == [100]  # everything before was committed once
    assert len(successor.settle()) == 1


def test_partitions_given_as_a_listener_stops_are_handed_back_through_its_hooks(
        kafka_broker, kafka_driver, unique_topic):
    """A listener that stops while the group hands it partitions revokes them before it closes.

    The first listener stops polling in its on_revoke hook while a second joins the pool, so
    the new assignment reaches it only when it cleans up. Closing the client straight away
    served that assignment inside close() and never revoked it (no on_revoke, no commit
    policy revoke): an assign inside close is also where librdkafka can hang for good
    (librdkafka #4884). The listener now leaves the group first, through its own poll.
    """
    from notify_transport.drivers.kafka.delivery.hooks import ListenerHooks

    driver = kafka_driver(kafka_broker.url(topic_partitions=4))
    topic = unique_topic("leave")
    events: list[tuple[str, frozenset]] = []

    def log(name):
        def record(partitions):
            events.append((name, frozenset(partitions)))
            if name == "revoke" and first.assignment == set():
                first.stop()  # no poll of this listener after this one returns
        return record

    first = listener_for(driver, [(topic, "info")], pool="leave",
                         hooks=ListenerHooks(on_assign=log("assign"), on_revoke=log("revoke")))
    first.start()
    assert [name for name, _ in events] == ["assign"] and len(events[0][1]) == 4

    def poll_first() -> None:
        while not first.stopped:
            first.poll(timeout=0.005)  # short polls: the next assignment finds nobody polling

    poller = threading.Thread(target=poll_first, daemon=True)
    poller.start()
    second = listener_for(driver, [(topic, "info")], pool="leave")
    second.start()  # the group's rebalance: the first listener's revoke stops it
    poller.join(30)
    assert not poller.is_alive()
    first.cleanup()
    held: set = set()
    for name, parts in events:  # what the hooks were told the listener holds
        held = held | parts if name == "assign" else held - parts
    assert held == set(), events
    assert first.assignment == set()
    second.stop()
    second.cleanup()
