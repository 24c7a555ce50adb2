"""The public notification API over the Kafka driver: pools, batches, filters, priorities."""
from __future__ import annotations

import contextlib
import threading
import time
import uuid
from typing import Any, Iterator

import pytest
from kafka_fixtures import settled
from waits import wait_until

import notify_transport
from notify_transport import NotificationFilter, Notifier, Target
from notify_transport.drivers.kafka.delivery.commit import CommitBeforeDispatch

pytestmark = pytest.mark.functional

PRIORITIES = ("audit", "debug", "info", "warn", "error", "critical", "sample")


class Endpoint:
    """Records ``(priority, publisher_id, event_type, payload)`` for the priorities it is given."""

    def __init__(self, priorities=("info",), filter_rule=None) -> None:
        self.received: list[tuple] = []
        self.lock = threading.Lock()
        if filter_rule is not None:
            self.filter_rule = filter_rule
        for priority in priorities:
            setattr(self, priority, self._make(priority))

    def _make(self, priority):
        def callback(ctxt, publisher_id, event_type, payload, metadata):
            with self.lock:
                self.received.append((priority, publisher_id, event_type, payload))
        return callback

    def wait_for(self, count: int, timeout: float = 10.0) -> list[tuple]:
        wait_until(lambda: len(self.received) >= count, timeout)
        return list(self.received)

    def settle(self, server) -> list[tuple]:
        """Everything received, once nothing more can arrive: the server's group committed the
        end of every partition, and a graceful stop dispatches everything committed."""
        assert wait_until(lambda: settled(server), 30, interval=0.2), server.metrics()
        assert server.stop(graceful=True, timeout=30)
        return list(self.received)


class BatchEndpoint:
    def __init__(self) -> None:
        self.batches: list[list[dict]] = []

    def info(self, messages):
        self.batches.append(list(messages))


@pytest.fixture
def api(kafka_bootstrap, kafka_conf) -> Iterator[Any]:
    """Builds transports and listeners on the broker under test; stops them all afterwards."""

    class Api:
        def __init__(self) -> None:
            self.transports: list[Any] = []
            self.servers: list[Any] = []

        def transport(self, vhost=None, **query):
            transport = notify_transport.get_notification_transport(
                kafka_conf, kafka_bootstrap.url(vhost, **query))
            self.transports.append(transport)
            return transport

        def start(self, *servers):
            """Start listeners in parallel (each start() blocks until its partitions are assigned)."""
            self.servers.extend(servers)
            threads = [threading.Thread(target=s.start) for s in servers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            for server in servers:
                assert server.listener is not None, f"{server!r} did not start"
            return servers

    made = Api()
    yield made
    for server in made.servers:
        with contextlib.suppress(Exception):
            server.stop()
            server.wait(10)
    for transport in made.transports:
        with contextlib.suppress(Exception):
            transport.cleanup()


def test_every_pool_gets_every_notification(api, unique_topic):
    transport = api.transport()
    topic = unique_topic("fan")
    endpoints = [Endpoint() for _ in range(3)]
    servers = api.start(*[notify_transport.get_notification_listener(
        transport, [Target(topic=topic)], [endpoint], pool=f"pool-{n}-{uuid.uuid4().hex[:6]}")
        for n, endpoint in enumerate(endpoints)])
    notifier = Notifier(transport, publisher_id="svc.host", driver="messagingv2", topics=[topic])
    for i in range(10):
        notifier.info({}, "thing.happened", {"i": i})
    assert transport.flush(10) == 0
    for endpoint in endpoints:
        got = endpoint.wait_for(10)
        assert sorted(p["i"] for _, _, _, p in got) == list(range(10))
    for endpoint, server in zip(endpoints, servers):
        assert len(endpoint.settle(server)) == 10


def test_one_pool_splits_partitions_without_duplicates(api, unique_topic):
    """Listeners without a pool share the consumer_group option's group and split the work."""
    group = f"shared-{uuid.uuid4().hex[:6]}"
    transport = api.transport(topic_partitions=2, consumer_group=group)
    topic = unique_topic("split")
    endpoints = [Endpoint(), Endpoint()]
    api.start(*[notify_transport.get_notification_listener(transport, [Target(topic=topic)], [e])
                for e in endpoints])
    assert {len(s.listener.assignment) for s in api.servers} == {1}  # one partition each
    notifier = Notifier(transport, driver="messagingv2", topics=[topic])
    count = 40
    for i in range(count):
        notifier.prepare(publisher_id=f"publisher-{i % 8}").info({}, "e", {"i": i})
    assert transport.flush(10) == 0
    wait_until(lambda: sum(len(e.received) for e in endpoints) >= count, 10)
    for endpoint, server in zip(endpoints, api.servers):
        endpoint.settle(server)
    ids = [p["i"] for e in endpoints for _, _, _, p in e.received]
    assert sorted(ids) == list(range(count))  # everything, once
    assert all(e.received for e in endpoints)  # both listeners worked
    # each publisher's notifications went to one listener, in order
    for endpoint in endpoints:
        by_publisher: dict[str, list[int]] = {}
        for _, publisher, _, payload in endpoint.received:
            by_publisher.setdefault(publisher, []).append(payload["i"])
        for numbers in by_publisher.values():
            assert numbers == sorted(numbers)
    publishers = [{pub for _, pub, _, _ in e.received} for e in endpoints]
    assert not publishers[0] & publishers[1]


def test_batch_listener_sizes_and_timeout(api, unique_topic):
    transport = api.transport()
    topic = unique_topic("batch")
    endpoint = BatchEndpoint()
    api.start(notify_transport.get_batch_notification_listener(
        transport, [Target(topic=topic)], [endpoint], pool=f"b-{uuid.uuid4().hex[:6]}",
        batch_size=5, batch_timeout=1.0))
    notifier = Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
    for i in range(12):
        notifier.info({}, "e", {"i": i})
    assert transport.flush(10) == 0
    wait_until(lambda: sum(map(len, endpoint.batches)) >= 12, 10)
    sizes = [len(b) for b in endpoint.batches]
    assert sum(sizes) == 12 and max(sizes) <= 5
    assert sizes[-1] == 2  # the rest, delivered by the timeout rather than a full batch
    assert [m["payload"]["i"] for b in endpoint.batches for m in b] == list(range(12))
    first = endpoint.batches[0][0]
    assert set(first) >= {"ctxt", "publisher_id", "event_type", "payload", "metadata"}


def test_filters(api, unique_topic):
    transport = api.transport()
    topic = unique_topic("filter")
    rule = NotificationFilter(publisher_id="^compute", event_type=r"^instance\.create",
                              context={"user": "^alice$"}, payload={"state": "^active$"})
    screened, everything = Endpoint(filter_rule=rule), Endpoint()
    server, = api.start(notify_transport.get_notification_listener(
        transport, [Target(topic=topic)], [screened, everything], pool=f"f-{uuid.uuid4().hex[:6]}"))
    notifier = Notifier(transport, driver="messagingv2", topics=[topic])
    cases = [  # (publisher, event_type, user, state, matches)
        ("compute.h1", "instance.create.end", "alice", "active", True),
        ("network.h1", "instance.create.end", "alice", "active", False),
        ("compute.h2", "instance.delete.end", "alice", "active", False),
        ("compute.h3", "instance.create.start", "bob", "active", False),
        ("compute.h4", "instance.create.end", "alice", "error", False),
        ("compute.h5", "instance.create.error", "alice", "active", True),
    ]
    for n, (publisher, event_type, user, state, _) in enumerate(cases):
        notifier.prepare(publisher_id=publisher).info({"user": user}, event_type, {"n": n, "state": state})
    assert transport.flush(10) == 0
    assert len(everything.wait_for(len(cases))) == len(cases)
    screened.settle(server)
    assert sorted(p["n"] for _, _, _, p in screened.received) == [
        n for n, case in enumerate(cases) if case[-1]]


def test_all_priorities(api, unique_topic):
    transport = api.transport("vh")
    topic = unique_topic("prio")
    endpoint = Endpoint(PRIORITIES)
    server, = api.start(notify_transport.get_notification_listener(
        transport, [Target(topic=topic)], [endpoint], pool=f"p-{uuid.uuid4().hex[:6]}"))
    notifier = Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
    for method in ("audit", "debug", "info", "warn", "warning", "error", "critical", "sample"):
        getattr(notifier, method)({}, f"event.{method}", {"via": method})
    assert transport.flush(10) == 0
    got = endpoint.wait_for(8)
    assert sorted((prio, payload["via"]) for prio, _, _, payload in got) == sorted(
        [(p, p) for p in PRIORITIES] + [("warn", "warning")])
    assert len(endpoint.settle(server)) == 8


def test_graceful_stop_dispatches_everything_it_committed(api, unique_topic):
    """The listener takes (and commits) batches of hundreds but dispatches them in
    pieces; stopped in the middle, it still dispatches every committed record, and
    a new listener of the pool starts exactly after them: nothing lost, nothing twice."""
    transport = api.transport(max_poll_records=400, auto_offset_reset="earliest")
    topic = unique_topic("stop")
    pool = f"stop-{uuid.uuid4().hex[:6]}"
    notifier = Notifier(transport, publisher_id="svc", driver="messagingv2", topics=[topic])
    count = 1000
    for i in range(count):  # all there before the listener starts: it takes full batches
        notifier.info({}, "e", {"i": i})
    assert transport.flush(10) == 0
    slow = Endpoint()
    original = slow.info

    def info(*args):
        time.sleep(0.002)  # ~1 s per batch of 400: the stop lands inside the first one
        original(*args)
    slow.info = info
    # committed inline, the listener decodes no piece ahead while the commit runs, so
    # most of each batch is always held back when the stop comes (what is tested here)
    inline = type("InlineCommit", (CommitBeforeDispatch,), {"OVERLAP_MIN_RECORDS": 10 ** 6})
    server = notify_transport.get_notification_listener(transport, [Target(topic=topic)], [slow],
                                                        pool=pool, commit_policy=inline)
    api.start(server)
    assert len(slow.wait_for(100, timeout=20)) >= 100
    assert server.stop(graceful=True, timeout=30) is True
    first = [p["i"] for _, _, _, p in slow.received]
    assert first == list(range(len(first)))   # in order, no gap
    committed = server.metrics()["committed"]
    assert list(committed.values()) == [len(first)]   # dispatched exactly what it committed
    assert len(first) < count
    rest = Endpoint()
    successor, = api.start(notify_transport.get_notification_listener(
        transport, [Target(topic=topic)], [rest], pool=pool))
    second = [p["i"] for _, _, _, p in rest.wait_for(count - len(first), timeout=20)]
    assert second == list(range(len(first), count))   # exactly the rest
    assert len(rest.settle(successor)) == count - len(first)


def test_a_take_larger_than_the_servers_default_poll_is_one_commit_on_apache_kafka(
        apache_kafka, kafka_conf, unique_topic):
    """max_poll_records above 500 is honoured by a listener that dispatches one by one: each take
    of up to 1,500 records is one commit (capped at 500 before, 3,000 records cost six commits
    or more), and every record is dispatched once, in order."""
    transport = notify_transport.get_notification_transport(
        kafka_conf, apache_kafka.url(max_poll_records=1500, auto_offset_reset="earliest"))
    try:
        topic = unique_topic("take")
        notifier = Notifier(transport, publisher_id="svc", driver="messagingv2", topics=[topic])
        count = 3000
        for i in range(count):  # all on the broker before the listener starts: it takes full batches
            notifier.info({}, "e", {"i": i})
        assert transport.flush(10) == 0
        endpoint = Endpoint()
        server = notify_transport.get_notification_listener(transport, [Target(topic=topic)], [endpoint],
                                                            pool=f"take-{uuid.uuid4().hex[:6]}")
        server.start()
        try:
            got = endpoint.settle(server)
            metrics = server.metrics()
        finally:
            server.stop()
            server.wait()
        assert [p["i"] for _, _, _, p in got] == list(range(count))
        assert list(metrics["committed"].values()) == [count]
        assert 2 <= metrics["commits"] < count // 500, metrics
    finally:
        transport.cleanup()
