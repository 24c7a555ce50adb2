"""An endpoint that always fails: each notification is retried, then dead-lettered with the
right attempt count, original coordinates and error; nothing else is lost or repeated."""
from __future__ import annotations

import threading
import time
import uuid

import pytest

import notify_transport
from notify_transport import NotificationResult, Notifier, Target
from notify_transport.reading import read_topic
from kafka_fixtures import settled
from waits import wait_until

pytestmark = [pytest.mark.functional, pytest.mark.slow]

MAX_ATTEMPTS = 4
RETRY_DELAY = 0.5
COUNT = 5


class AlwaysFails:
    def __init__(self, how: str) -> None:
        self.how = how
        self.calls: list[tuple[int, float]] = []
        self.lock = threading.Lock()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        with self.lock:
            self.calls.append((payload["i"], time.time()))
        if self.how == "raise":
            raise RuntimeError(f"cannot handle {payload['i']}")
        return NotificationResult.REQUEUE


def read_back(driver, topic: str, expected: int, quiet: float = 1.0) -> list:
    """Every record of ``topic``: follows it until ``expected`` arrived and ``quiet`` seconds
    passed without more (Tansu under-reports a topic's end offset, so "read to the end"
    cannot be trusted there)."""
    reader = read_topic(driver, topic, "earliest", until_end=False)
    records: list = []
    try:
        deadline = time.monotonic() + 30
        while len(records) < expected and time.monotonic() < deadline:
            record = reader.next(timeout=0.5)
            if record is not None:
                records.append(record)
        while True:
            record = reader.next(timeout=quiet)
            if record is None:
                return records
            records.append(record)
    finally:
        reader.close()




@pytest.mark.parametrize("how", ["raise", "requeue"])
def test_always_failing_endpoint_retries_then_dead_letters(kafka_bootstrap, kafka_conf, unique_topic,
                                                           how):
    topic = unique_topic("fails")
    pool = f"fails-{uuid.uuid4().hex[:6]}"
    transport = notify_transport.get_notification_transport(kafka_conf, kafka_bootstrap.url())
    endpoint = AlwaysFails(how)
    server = notify_transport.get_notification_listener(
        transport, [Target(topic=topic)], [endpoint], pool=pool, allow_requeue=True,
        delivery_mode="at_least_once", max_attempts=MAX_ATTEMPTS, retry_delay=RETRY_DELAY,
        workers=2)
    server.start()
    try:
        notifier = Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
        for i in range(COUNT):
            notifier.info({}, "e", {"i": i})
        assert transport.flush(10) == 0
        assert wait_until(lambda: server.metrics()["dead_lettered"] == COUNT, 60), server.metrics()
        assert wait_until(lambda: settled(server), 30, interval=0.2)  # nothing more comes back
        metrics = server.metrics()
    finally:
        server.stop(timeout=10)
    kafka_topic = f"{topic}.info"
    dead = read_back(transport.driver, f"{kafka_topic}.dlq", COUNT)
    retries = read_back(transport.driver, f"{kafka_topic}.retry.{pool}", COUNT * (MAX_ATTEMPTS - 1))
    transport.cleanup()

    # each notification: MAX_ATTEMPTS calls, spaced by at least the retry delay
    per_id: dict[int, list[float]] = {}
    for i, at in endpoint.calls:
        per_id.setdefault(i, []).append(at)
    assert sorted(per_id) == list(range(COUNT))
    for i, times in per_id.items():
        assert len(times) == MAX_ATTEMPTS, (i, times)
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert min(gaps) >= RETRY_DELAY - 0.05, gaps  # broker timestamps have ms precision
    # counters
    assert (metrics["received"], metrics["requeued"], metrics["dispatched"]) == (
        COUNT * MAX_ATTEMPTS, COUNT * MAX_ATTEMPTS, 0)
    assert (metrics["retried"], metrics["dead_lettered"]) == (COUNT * (MAX_ATTEMPTS - 1), COUNT)
    # the retry topic: attempts 1 .. MAX_ATTEMPTS - 1 of each
    assert sorted((int(dict(r.headers)["nt-original-offset"]), int(dict(r.headers)["nt-attempts"]))
                  for r in retries) == sorted((i, a) for i in range(COUNT)
                                              for a in range(1, MAX_ATTEMPTS))
    # the dead-letter topic: one copy each, with its first coordinates, the attempts and the error
    assert len(dead) == COUNT
    seen = set()
    for record in dead:
        headers = dict(record.headers)
        offset = int(headers["nt-original-offset"])
        seen.add(offset)
        assert headers["nt-original-topic"] == kafka_topic.encode()
        assert headers["nt-original-partition"] == b"0"
        assert headers["nt-attempts"] == str(MAX_ATTEMPTS).encode()
        assert headers["nt-pool"] == pool.encode()
        expected = f"RuntimeError: cannot handle {offset}" if how == "raise" else "requeued"
        assert headers["nt-error"] == expected.encode()
    assert seen == set(range(COUNT))  # one publisher, one partition: offset == i
