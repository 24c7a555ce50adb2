"""10k fuzzed and poison records interleaved with good notifications, at-least-once mode.

The listener never stops, every good notification is dispatched exactly
once, every bad record lands in the dead-letter topic (counted exactly, each
with its original coordinates and bytes), and everything is committed.
Records are small (noida-db ignores fetch size limits).
"""
from __future__ import annotations

import collections
import json
import random
import uuid

import pytest
from confluent_kafka import Producer

import notify_transport
from notify_transport import Notifier, Target
from notify_transport.drivers.envelope import decode_notification
from notify_transport.exceptions import DecodeError
from notify_transport.reading import read_topic
from endpoints import IdRecorder
from kafka_fixtures import settled
from waits import wait_until

pytestmark = [pytest.mark.functional, pytest.mark.slow]

BAD = 10_000
GOOD = 2_000
PARTITIONS = 2


def envelope(message: dict, version: object = "2.0") -> bytes:
    return json.dumps({"oslo.version": version, "oslo.message": json.dumps(message)}).encode()


def good_message(n: int, rng: random.Random) -> bytes:
    message = {"message_id": str(uuid.UUID(int=rng.getrandbits(128))), "publisher_id": f"pub-{n % 7}",
               "event_type": "compute.instance.update", "priority": "INFO",
               "payload": {"n": n, "name": "ünïcødé ✓" if n % 3 == 0 else "plain"},
               "timestamp": "2024-01-02 03:04:05.000001", "_context": {"request_id": f"req-{n}"}}
    if n % 4 == 1:  # the plain ``messaging`` (1.0) format
        return json.dumps(message).encode()
    return envelope(message)


def bad_record(rng: random.Random) -> tuple[bytes | None, bytes | None]:
    """``(key, value)`` of a record that is not a valid notification, of a random kind."""
    good = envelope({"event_type": "e", "priority": "INFO", "payload": {}})
    kind = rng.randrange(10)
    key = None
    if kind == 0:  # random bytes
        value = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 60)))
    elif kind == 1:  # truncated JSON
        value = good[:rng.randint(1, len(good) - 1)]
    elif kind == 2:  # wrong envelope versions
        value = envelope({"event_type": "e", "priority": "INFO"},
                         rng.choice(["3.0", "1.0", "banana", "", 9, None]))
    elif kind == 3:  # JSON that is not an object
        value = rng.choice([b"[1, 2]", b"42", b'"text"', b"null", b"true", b"[]"])
    elif kind == 4:  # missing or wrong fields
        value = envelope(rng.choice([{"priority": "INFO"}, {"event_type": "e"},
                                     {"event_type": "e", "priority": 3}, {}]))
    elif kind == 5:  # envelope holding a non-object, or broken inner JSON
        value = json.dumps({"oslo.version": "2.0",
                            "oslo.message": rng.choice(["[1]", "{broken", "7"])}).encode()
    elif kind == 6:  # invalid UTF-8
        value = b'{"oslo.version": "2.0", "oslo.message": "\xff\xfe\xfd"}'
    elif kind == 7:  # huge-ish key, garbage value
        key = bytes(rng.getrandbits(8) for _ in range(600))
        value = b"\x00" * rng.randint(0, 20)
    elif kind == 8:  # empty value or tombstone
        value = rng.choice([b"", None])
    else:  # _context that is not an object
        value = envelope({"event_type": "e", "priority": "INFO", "_context": ["x"]})
    return key, value


def test_generated_records_are_what_they_claim():
    """The generator's bad records are undecodable and its good ones decode (no self-deception)."""
    rng = random.Random(11)
    for _ in range(3000):
        _, value = bad_record(rng)
        with pytest.raises(DecodeError):
            decode_notification(value)
    for n in range(200):
        ctxt, message = decode_notification(good_message(n, rng))
        assert message["payload"]["n"] == n and ctxt == {"request_id": f"req-{n}"}


def test_poison_and_fuzz_are_dead_lettered_good_ones_dispatched_once(kafka_broker, kafka_conf, unique_topic):
    topic = unique_topic("fuzz")
    kafka_topic = f"{topic}.info"
    transport = notify_transport.get_notification_transport(
        kafka_conf, kafka_broker.url(topic_partitions=PARTITIONS))
    endpoint = IdRecorder("n")
    server = notify_transport.get_notification_listener(
        transport, [Target(topic=topic)], [endpoint], pool=f"fuzz-{uuid.uuid4().hex[:6]}",
        delivery_mode="at_least_once", workers=4, commit_interval=0.2)
    server.start()
    try:
        rng = random.Random(2024)
        producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 20})
        kinds = ["bad"] * BAD + ["good"] * GOOD
        rng.shuffle(kinds)
        bad_at: dict[tuple[int, int], bytes | None] = {}
        reports: list = []

        def reporter(kind, value):
            def report(err, msg):
                reports.append(err)
                if err is None and kind == "bad":
                    bad_at[(msg.partition(), msg.offset())] = value
            return report

        good_n = 0
        total_bytes = 0
        for index, kind in enumerate(kinds):
            if kind == "bad":
                key, value = bad_record(rng)
            else:
                key = f"pub-{good_n % 7}".encode() if good_n % 50 else b"k" * 1500  # some huge keys
                value = good_message(good_n, rng)
                good_n += 1
            total_bytes += len(value or b"") + len(key or b"")
            producer.produce(kafka_topic, value, key, partition=index % PARTITIONS,
                             on_delivery=reporter(kind, value))
            if index % 1000 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0
        assert len(reports) == BAD + GOOD and not any(reports)
        assert len(bad_at) == BAD and total_bytes < 2_000_000

        assert wait_until(lambda: server.metrics()["dead_lettered"] >= BAD
                          and len(endpoint.ids) >= GOOD, 90), server.metrics()
        assert wait_until(lambda: settled(server), 30, interval=0.2)  # nothing more arrives
        metrics = server.metrics()
        assert server._thread is not None and server._thread.is_alive()  # never stopped

        # every good notification dispatched exactly once
        counts = collections.Counter(endpoint.ids)
        assert set(counts) == set(range(GOOD)) and set(counts.values()) == {1}
        assert (metrics["received"], metrics["dispatched"]) == (GOOD, GOOD)
        # every bad record dead-lettered, exactly once, with its coordinates and bytes
        assert (metrics["undecodable"], metrics["dead_lettered"]) == (BAD, BAD)
        assert metrics["copy_failures"] == 0
        dead = list(read_topic(transport.driver, f"{kafka_topic}.dlq", "earliest"))
        assert len(dead) == BAD
        by_origin = {}
        for record in dead:
            headers = dict(record.headers)
            assert headers["nt-original-topic"] == kafka_topic.encode()
            assert headers["nt-error"].startswith(b"undecodable: ")
            assert headers["nt-attempts"] == b"1"
            by_origin[(int(headers["nt-original-partition"]), int(headers["nt-original-offset"]))] = \
                record.value
        assert by_origin == bad_at
        # all of it committed
        def main_lag():
            return {tp: n for tp, n in server.metrics()["lag"].items() if tp[0] == kafka_topic}

        assert wait_until(lambda: main_lag() == {(kafka_topic, p): 0 for p in range(PARTITIONS)},
                          10), main_lag()

        # and the listener still works
        Notifier(transport, publisher_id="after", driver="messagingv2", topics=[topic]).info(
            {}, "e", {"n": -1})
        assert transport.flush(10) == 0
        assert wait_until(lambda: -1 in endpoint.ids, 10)
        print(f"\n{BAD} bad + {GOOD} good records, {total_bytes} bytes: dead-lettered "
              f"{metrics['dead_lettered']}, dispatched {metrics['dispatched']}")
    finally:
        server.stop(timeout=10)
        transport.cleanup()
