"""A hostile batch: deeply nested, huge, forged headers, invalid UTF-8, among valid ones.

In both delivery modes the listener never stops, no valid neighbour is lost,
every hostile record is dead-lettered to the dead-letter topic of the topic it
was read from (never one a header names), and no topic is created by a record.
"""
from __future__ import annotations

import collections
import json
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import notify_transport
from notify_transport import NotificationResult, Target
from notify_transport.reading import read_topic
from endpoints import IdRecorder
from kafka_fixtures import settled as listener_settled
from waits import wait_until

pytestmark = [pytest.mark.functional, pytest.mark.slow]

VALID = 600
FORGED = [("nt-original-topic", b"victim"), ("nt-original-partition", b"0"),
          ("nt-original-offset", b"1"), ("nt-attempts", b"99"), ("nt-pool", b"\xff\xfe")]
BAD_TOPIC = [("nt-original-topic", b"../bad topic!")]


def notification(n: int, requeue: bool = False) -> bytes:
    message = {"message_id": str(uuid.uuid4()), "publisher_id": "hostile", "event_type": "e",
               "priority": "INFO", "payload": {"n": n, "requeue": requeue},
               "timestamp": "2024-01-02 03:04:05.000001", "_context": {}}
    return json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(message)}).encode()


def nested_payload(levels: int) -> bytes:
    inner = ('{"event_type": "e", "priority": "INFO", "payload": ' + "[" * levels + "]" * levels + "}")
    return json.dumps({"oslo.version": "2.0", "oslo.message": inner}).encode()


def hostile_records() -> list[tuple[bytes | None, list[tuple[str, bytes]] | None]]:
    """``(value, headers)`` of records no decoder may choke on; none is a notification."""
    return [
        (b"[" * 3000 + b"]" * 3000, None),
        (nested_payload(2000), None),
        (b'{"a":' * 5000 + b"1" + b"}" * 5000, FORGED),
        (b'{"oslo.version": "2.0", "oslo.message": "\xff\xfe\xfd"}', BAD_TOPIC),
        (b"\xc3\x28" * 1000, FORGED + BAD_TOPIC),
        (b"{" + b" " * 400_000 + b"huge", FORGED),  # big and broken
        (b"x" * 300_000, [("nt-original-topic", b"x" * 5000)]),
        (None, BAD_TOPIC),  # a tombstone
    ]


def dead_letter_count(bootstrap: str, topic: str) -> int:
    """Records in ``topic`` (one partition), from its watermarks."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4().hex}"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()
    return high - low


def topics_of(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=10).topics)


@pytest.mark.parametrize("mode", ["commit_before_dispatch", "at_least_once"])
def test_hostile_batch_never_stops_the_listener_nor_loses_a_neighbour(kafka_bootstrap, kafka_conf,
                                                                      unique_topic, mode):
    if getattr(kafka_bootstrap, "name", "") == "tansu":
        # Tansu 0.6 (memory) confirms records of a few hundred KB but its watermark and its
        # group-less fetches never show them: what this test checks cannot be seen there
        pytest.skip("Tansu does not keep the large hostile records it acknowledges")
    topic = unique_topic(f"hostile-{mode[:3]}")
    main = f"{topic}.info"
    pool = f"hostile-{uuid.uuid4().hex[:6]}"
    transport = notify_transport.get_notification_transport(kafka_conf, kafka_bootstrap.url())
    endpoint = IdRecorder("n", lambda payload: NotificationResult.REQUEUE if payload.get("requeue")
                          else NotificationResult.HANDLED)
    options = {"delivery_mode": mode, "dead_letter_topic": "{topic}.dlq"}
    if mode == "at_least_once":
        options.update(retry_delay=0.2, max_attempts=2, commit_interval=0.2)
    server = notify_transport.get_notification_listener(
        transport, [Target(topic=topic)], [endpoint], pool=pool, allow_requeue=True, **options)
    server.start()
    try:
        before = topics_of(kafka_bootstrap.bootstrap)
        producer = Producer({"bootstrap.servers": kafka_bootstrap.bootstrap, "linger.ms": 5,
                             "message.max.bytes": 1_000_000})
        hostile = hostile_records()
        failures: list = []

        def report(err, msg):
            if err is not None:
                failures.append(err)

        requeued = set()
        step = VALID // len(hostile)
        for n in range(VALID):
            # valid notifications with forged headers too; some ask to be requeued
            requeue = mode == "at_least_once" and n % 100 == 7
            if requeue:
                requeued.add(n)
            producer.produce(main, notification(n, requeue), b"k",
                             headers=FORGED if n % 3 == 0 else None, on_delivery=report)
            if n % step == 0 and hostile:
                value, headers = hostile.pop()
                producer.produce(main, value, b"k", headers=headers, on_delivery=report)
        assert not hostile
        assert producer.flush(30) == 0 and failures == []
        bad = len(hostile_records())

        def settled():
            metrics = server.metrics()
            return (len(set(endpoint.ids)) >= VALID and metrics["undecodable"] >= bad
                    and metrics["dead_lettered"] >= bad + len(requeued))

        assert wait_until(settled, 60), (server.metrics(), collections.Counter(endpoint.ids).most_common(8))
        assert wait_until(lambda: listener_settled(server), 30, interval=0.2)  # nothing more arrives
        metrics = server.metrics()
        assert server._thread is not None and server._thread.is_alive()  # never stopped
        counts = collections.Counter(endpoint.ids)
        assert set(counts) == set(range(VALID))  # no neighbour lost
        for n, times in counts.items():
            assert times == (2 if n in requeued else 1), (n, times)  # requeued ones: one retry
        assert metrics["undecodable"] == bad and metrics["copy_failures"] == 0
        assert metrics["dead_lettered"] == bad + len(requeued)

        # every copy went to this topic's dead-letter topic, never to one a header named
        assert dead_letter_count(kafka_bootstrap.bootstrap, f"{main}.dlq") == bad + len(requeued)
        dead = list(read_topic(transport.driver, f"{main}.dlq", "earliest"))
        assert len(dead) == bad + len(requeued)
        for record in dead:
            headers = dict(record.headers)
            assert headers["nt-original-topic"] == main.encode()
        created = topics_of(kafka_bootstrap.bootstrap) - before
        assert created == set(), created
        assert not [t for t in topics_of(kafka_bootstrap.bootstrap) if "victim" in t or "bad topic" in t]

        def main_lag():
            return {tp: n for tp, n in server.metrics()["lag"].items() if tp[0] == main}
        assert wait_until(lambda: main_lag() and set(main_lag().values()) == {0}, 20), main_lag()
        print(f"\n{mode}: {VALID} valid (+{len(requeued)} retried) and {bad} hostile records: "
              f"dispatched {metrics['dispatched']}, dead-lettered {metrics['dead_lettered']}")
    finally:
        server.stop(timeout=10)
        transport.cleanup()
