"""Delivery modes on real brokers: at-least-once commits, requeue through retry topics,
dead letters, ordered workers, graceful and abrupt stops, hooks and metrics."""
from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from typing import Any, Callable, Iterator

import pytest

import notify_transport
from notify_transport import NotificationResult, Notifier, Target
from notify_transport.drivers.kafka.delivery.hooks import ListenerHooks
from notify_transport.reading import read_topic
from kafka_fixtures import group_offsets
from waits import wait_until

pytestmark = pytest.mark.functional


# -- helpers ------------------------------------------------------------------------



#: The id of a last notification: once a listener has it, it has everything sent before it.
MARK = 10**6


class Recorder:
    """An endpoint recording ``(i, publisher_id, thread, time)``; ``behave(i, attempt)`` may
    raise, return a result, or block."""

    def __init__(self, behave: Callable[[int, int], Any] | None = None) -> None:
        self.calls: list[tuple[int, str, str, float]] = []
        self.lock = threading.Lock()
        self.behave = behave
        self.running = 0
        self.most_running = 0

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        i = payload["i"]
        with self.lock:
            attempt = sum(1 for c in self.calls if c[0] == i) + 1
            self.calls.append((i, publisher_id, threading.current_thread().name, time.time()))
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            return self.behave(i, attempt) if self.behave else None
        finally:
            with self.lock:
                self.running -= 1

    def ids(self) -> list[int]:
        with self.lock:
            return [c[0] for c in self.calls]


@pytest.fixture
def api(kafka_conf) -> Iterator[Any]:
    class Api:
        def __init__(self) -> None:
            self.transports: list[Any] = []
            self.servers: list[Any] = []

        def transport(self, broker, vhost=None, **query):
            transport = notify_transport.get_notification_transport(kafka_conf, broker.url(vhost, **query))
            self.transports.append(transport)
            return transport

        def listener(self, transport, topic, endpoints, pool=None, batch=False, **options):
            pool = pool or f"pool-{uuid.uuid4().hex[:8]}"
            if batch:
                server = notify_transport.get_batch_notification_listener(
                    transport, [Target(topic=topic)], endpoints, pool=pool, **options)
            else:
                server = notify_transport.get_notification_listener(
                    transport, [Target(topic=topic)], endpoints, pool=pool, **options)
            self.servers.append(server)
            return server

        def start(self, *servers):
            threads = [threading.Thread(target=s.start) for s in servers]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            for server in servers:
                assert server.listener is not None, f"{server!r} did not start"
            return servers[0] if len(servers) == 1 else servers

    made = Api()
    yield made
    for server in made.servers:
        with contextlib.suppress(Exception):
            server.stop(timeout=10)
    for transport in made.transports:
        with contextlib.suppress(Exception):
            transport.cleanup()


def notify(transport, topic: str, ids, publishers: int | list[str] = 1) -> None:
    names = publishers if isinstance(publishers, list) else [f"pub-{n}" for n in range(publishers)]
    notifier = Notifier(transport, driver="messagingv2", topics=[topic])
    for i in ids:
        notifier.prepare(publisher_id=names[i % len(names)]).info({}, "e", {"i": i})
    assert transport.flush(10) == 0


def publishers_on_each_worker(workers: int) -> list[str]:
    """One publisher id per worker (the key decides the worker)."""
    from notify_transport.drivers.kafka.delivery.workers import worker_index

    chosen: dict[int, str] = {}
    n = 0
    while len(chosen) < workers:
        name = f"pub-{n}"
        chosen.setdefault(worker_index(name.encode(), "t", 0, workers), name)
        n += 1
    return [chosen[i] for i in range(workers)]


def read_all(driver, topic: str) -> list:
    reader = read_topic(driver, topic, "earliest", until_end=True)
    try:
        return list(reader)
    finally:
        reader.close()


def listener_for(driver, topic: str, pool: str, **options):
    return driver.listen_for_notifications([(Target(topic=topic), "info")], pool, 1, None, **options)


def poll_n(listener, count: int, timeout: float = 15.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += listener.poll(timeout=0.5, max_messages=count - len(got))
    return got


# -- at-least-once ----------------------------------------------------------------------

def test_at_least_once_commits_only_the_finished_prefix(kafka_bootstrap, kafka_driver, unique_topic):
    driver = kafka_driver(kafka_bootstrap.url())
    topic = unique_topic("alo")
    pool = f"alo-{uuid.uuid4().hex[:6]}"
    listener = listener_for(driver, topic, pool, delivery_mode="at_least_once", commit_interval=3600)
    listener.start()
    notify_through_own_transport(driver, topic, range(6))
    got = poll_n(listener, 6)
    assert [m.message["payload"]["i"] for m in got] == list(range(6))
    for index in (1, 2, 4, 5):  # out of order; 0 and 3 still "running"
        got[index].acknowledge()
    listener.commit()
    assert group_offsets(kafka_bootstrap.bootstrap, pool, f"{topic}.info") == {0: 0}
    got[0].acknowledge()
    listener.commit()
    assert group_offsets(kafka_bootstrap.bootstrap, pool, f"{topic}.info") == {0: 3}
    listener.stop()
    listener.cleanup()  # close commits the prefix again: still 3 (offset 3 never finished)
    assert group_offsets(kafka_bootstrap.bootstrap, pool, f"{topic}.info") == {0: 3}
    successor = listener_for(driver, topic, pool, delivery_mode="at_least_once")
    successor.start()
    again = poll_n(successor, 3)
    assert [m.message["payload"]["i"] for m in again] == [3, 4, 5]  # 3 unfinished, 4-5 after it
    assert successor.poll(timeout=1, max_messages=10) == []
    for message in again:
        message.acknowledge()
    successor.stop()
    successor.cleanup()
    assert group_offsets(kafka_bootstrap.bootstrap, pool, f"{topic}.info") == {0: 6}


def notify_through_own_transport(driver, topic: str, ids) -> None:
    """Send through a transport of its own to ``driver``'s broker, cleaned up after (the driver
    belongs to the ``kafka_driver`` fixture)."""
    url = driver.url.format(reveal_secrets=True)
    with notify_transport.get_notification_transport(driver.conf, url) as transport:
        notify(transport, topic, ids)


def _rebalancing_brokers() -> list[str]:
    from notify_transport.testing.brokers import external_kafka

    return ["apache_kafka", "tansu"] + (["external"] if external_kafka() is not None else [])


@pytest.fixture(params=_rebalancing_brokers())
def rebalancing_broker(request):
    """Brokers that accept a member's commit while a rebalance is in progress, as Kafka does.

    noida-db bumps the generation as soon as a member joins, so the revoked
    member's commit fails there (ILLEGAL_GENERATION): the records are then
    delivered again (at least once still holds), which this test does not model.
    """
    return request.getfixturevalue(request.param)


def test_revoke_commits_finished_work_and_late_acks_commit_nothing(rebalancing_broker, kafka_driver,
                                                                    unique_topic):
    driver = kafka_driver(rebalancing_broker.url())
    topic = unique_topic("revoke")
    pool = f"rv-{uuid.uuid4().hex[:6]}"
    first = listener_for(driver, topic, pool, delivery_mode="at_least_once", commit_interval=3600)
    first.start()
    notify_through_own_transport(driver, topic, range(5))
    got = poll_n(first, 5)
    for message in got[:3]:
        message.acknowledge()
    # a second listener joins: the partition is revoked from the first, which commits 0-2 then
    second = listener_for(driver, topic, pool, delivery_mode="at_least_once", commit_interval=3600)
    joiner = threading.Thread(target=second.start)
    joiner.start()
    redelivered: list = []
    while joiner.is_alive():  # the first must keep polling for the rebalance to happen
        redelivered += first.poll(timeout=0.2, max_messages=10)
    joiner.join()
    assert group_offsets(rebalancing_broker.bootstrap, pool, f"{topic}.info") == {0: 3}
    for message in got[3:]:
        message.acknowledge()  # finished after the revoke: must not be committed
    first.commit()
    assert group_offsets(rebalancing_broker.bootstrap, pool, f"{topic}.info") == {0: 3}
    # each listener also reads its pool's retry topic: the round-robin assignor may give the
    # main topic's partition to either member, and the retry topic's to the other
    owner = first if (f"{topic}.info", 0) in first.assignment else second
    redelivered += poll_n(owner, 2 - len(redelivered))
    assert sorted(m.message["payload"]["i"] for m in redelivered) == [3, 4]
    for message in redelivered:
        message.acknowledge()
    owner.commit()
    assert group_offsets(rebalancing_broker.bootstrap, pool, f"{topic}.info") == {0: 5}
    for listener in (first, second):
        listener.stop()
        listener.cleanup()


# -- requeue, retry topics, dead letters --------------------------------------------------

def test_requeue_waits_the_retry_delay_then_succeeds(api, kafka_broker, unique_topic):
    transport = api.transport(kafka_broker)
    topic = unique_topic("retry")
    endpoint = Recorder(lambda i, attempt: NotificationResult.REQUEUE
                        if attempt == 1 and i < 100 else None)
    server = api.start(api.listener(transport, topic, [endpoint], allow_requeue=True,
                                    delivery_mode="at_least_once", retry_delay=3.0, max_attempts=3))
    notify(transport, topic, range(3))
    assert wait_until(lambda: len(endpoint.calls) == 3)
    assert wait_until(lambda: server.metrics()["held_for_retry"] == 3, 2.5)
    notify(transport, topic, [100, 101])  # the main topic keeps flowing while retries wait
    assert wait_until(lambda: len(endpoint.calls) == 8)
    order = [i for i, _, _, _ in endpoint.calls]
    assert order[:3] == [0, 1, 2] and order[3:5] == [100, 101] and sorted(order[5:]) == [0, 1, 2]
    by_id: dict[int, list[float]] = {}
    for i, _, _, at in endpoint.calls:
        by_id.setdefault(i, []).append(at)
    for i in range(3):
        times = by_id[i]
        assert len(times) == 2 and times[1] - times[0] >= 2.9  # waited retry_delay (ms clock)
    assert wait_until(lambda: server.metrics()["retried"] == 3)
    assert server.stop(timeout=10)  # what it took is dispatched: the counts are final
    metrics = server.metrics()
    assert (metrics["received"], metrics["dispatched"], metrics["requeued"]) == (8, 5, 3)
    assert metrics["dead_lettered"] == 0 and len(endpoint.calls) == 8
    retries = read_all(transport.driver, f"{topic}.info.retry.{server.pool}")
    assert sorted(int(dict(r.headers)["nt-original-offset"]) for r in retries) == [0, 1, 2]
    assert {dict(r.headers)["nt-error"] for r in retries} == {b"requeued"}


def test_errors_dead_lettered_at_once_without_requeue_on_error(api, kafka_broker, unique_topic):
    transport = api.transport(kafka_broker)
    topic = unique_topic("noretry")

    def behave(i, attempt):
        if i == 1:
            raise KeyError("missing flavor")

    endpoint = Recorder(behave)
    server = api.start(api.listener(transport, topic, [endpoint], allow_requeue=True,
                                    delivery_mode="at_least_once", requeue_on_error=False))
    notify(transport, topic, range(3))
    assert wait_until(lambda: server.metrics()["dead_lettered"] == 1)
    dead = read_all(transport.driver, f"{topic}.info.dlq")
    assert len(dead) == 1
    headers = dict(dead[0].headers)
    assert headers["nt-attempts"] == b"1" and headers["nt-original-offset"] == b"1"
    assert headers["nt-error"] == b"KeyError: 'missing flavor'"
    assert json.loads(json.loads(dead[0].value)["oslo.message"])["payload"] == {"i": 1}
    assert sorted(endpoint.ids()) == [0, 1, 2] and server.metrics()["retried"] == 0


def test_commit_before_dispatch_with_a_dead_letter_topic(api, kafka_broker, unique_topic, raw_producer):
    """In the default mode too, a configured dead-letter topic receives undecodable records."""
    transport = api.transport(kafka_broker)
    topic = unique_topic("cbd-dlq")
    endpoint = Recorder()
    server = api.start(api.listener(transport, topic, [endpoint], dead_letter_topic="{topic}.dead"))
    raw = raw_producer(kafka_broker)
    raw.produce(f"{topic}.info", b"\x00garbage")
    assert raw.flush(10) == 0
    notify(transport, topic, [7])
    assert wait_until(lambda: endpoint.ids() == [7] and server.metrics()["dead_lettered"] == 1)
    dead = read_all(transport.driver, f"{topic}.info.dead")
    assert [r.value for r in dead] == [b"\x00garbage"]
    assert dict(dead[0].headers)["nt-error"].startswith(b"undecodable: ")


# -- ordered workers ----------------------------------------------------------------------

def test_workers_keep_each_publishers_order_and_run_in_parallel(api, kafka_broker, unique_topic):
    transport = api.transport(kafka_broker, topic_partitions=2)
    topic = unique_topic("workers")
    endpoint = Recorder(lambda i, attempt: time.sleep(0.01))
    server = api.start(api.listener(transport, topic, [endpoint], workers=4,
                                    delivery_mode="at_least_once"))
    count = 160
    notify(transport, topic, range(count), publishers=8)
    assert wait_until(lambda: len(endpoint.calls) == count)
    assert sorted(endpoint.ids()) == list(range(count))  # once each
    by_publisher: dict[str, list[int]] = {}
    threads_per_publisher: dict[str, set[str]] = {}
    for i, publisher, thread, _ in endpoint.calls:
        by_publisher.setdefault(publisher, []).append(i)
        threads_per_publisher.setdefault(publisher, set()).add(thread)
    for publisher, ids in by_publisher.items():
        assert ids == sorted(ids), publisher  # each publisher's order kept
        assert len(threads_per_publisher[publisher]) == 1  # one virtual partition per key
    assert len({t for ts in threads_per_publisher.values() for t in ts}) > 1
    assert endpoint.most_running > 1
    prefix = f"notify-kafka-{server.pool}-worker-"
    assert len([t for t in threading.enumerate() if t.name.startswith(prefix)]) == 4
    assert server.stop(timeout=10)
    assert not [t.name for t in threading.enumerate() if t.name.startswith(prefix)]  # none leaked
    records = read_all(transport.driver, f"{topic}.info")
    ends = {p: 1 + max(r.offset for r in records if r.partition == p) for p in (0, 1)}
    assert group_offsets(kafka_broker.bootstrap, server.pool, f"{topic}.info", 2) == ends  # all committed on close


# -- shutdown -----------------------------------------------------------------------------

@pytest.mark.parametrize("graceful", [True, False])
def test_stop_graceful_finishes_abrupt_cancels(api, kafka_broker, unique_topic, graceful):
    transport = api.transport(kafka_broker)
    topic = unique_topic("stop")
    release = threading.Event()
    endpoint = Recorder(lambda i, attempt: release.wait(10))
    pool = f"stop-{uuid.uuid4().hex[:6]}"
    server = api.start(api.listener(transport, topic, [endpoint], pool=pool, workers=2,
                                    delivery_mode="at_least_once", commit_interval=3600))
    notify(transport, topic, range(10), publishers=publishers_on_each_worker(2))
    assert wait_until(lambda: len(endpoint.calls) == 2)  # one per worker, both blocked
    threading.Timer(0.5, release.set).start()
    started = time.monotonic()
    finished = server.stop(graceful=graceful, timeout=8)
    took = time.monotonic() - started
    assert took < 10
    if graceful:
        assert finished and sorted(endpoint.ids()) == list(range(10))
        assert group_offsets(kafka_broker.bootstrap, pool, f"{topic}.info") == {0: 10}
        leftovers: list[int] = []
    else:
        # the two running calls return; once the workers are gone, nothing else started
        assert wait_until(lambda: not any(t.name.startswith(f"notify-kafka-{pool}-worker")
                                          for t in threading.enumerate()))
        assert len(endpoint.calls) == 2  # only the two calls running at the stop
        committed = group_offsets(kafka_broker.bootstrap, pool, f"{topic}.info")[0]
        assert committed < 10
        leftovers = list(range(committed, 10))
    # a successor gets exactly what was not committed
    successor_endpoint = Recorder()
    api.start(api.listener(transport, topic, [successor_endpoint], pool=pool,
                           delivery_mode="at_least_once"))
    # a mark sent now comes after everything the successor may get (one partition)
    notify(transport, topic, [MARK])
    assert wait_until(lambda: MARK in successor_endpoint.ids())
    assert sorted(successor_endpoint.ids()) == leftovers + [MARK]


# -- hooks and metrics --------------------------------------------------------------------

def test_hooks_and_metrics(api, kafka_broker, unique_topic):
    transport = api.transport(kafka_broker)
    topic = unique_topic("hooks")
    events: list[tuple] = []
    lock = threading.Lock()

    def log(name):
        def record(*args):
            with lock:
                events.append((name,) + args + (time.perf_counter(),))  # the clock dispatch is timed on
        return record

    hooks = ListenerHooks(before_dispatch=log("before"), after_dispatch=log("after"),
                          on_error=log("error"), on_retry=log("retry"),
                          on_dead_letter=log("dead"), on_commit=log("commit"),
                          on_assign=log("assign"), on_revoke=log("revoke"))

    def behave(i, attempt):
        if i == 2:
            raise ValueError("always")

    endpoint = Recorder(behave)
    server = api.start(api.listener(transport, topic, [endpoint], allow_requeue=True, hooks=hooks,
                                    delivery_mode="at_least_once", max_attempts=2, retry_delay=0.2,
                                    commit_interval=0.1))
    notify(transport, topic, range(4))
    assert wait_until(lambda: server.metrics()["dead_lettered"] == 1)
    retry_partition = (f"{topic}.info.retry.{server.pool}", 0)
    # the retry record is committed once its dead-letter copy is confirmed, at the next commit
    assert wait_until(lambda: server.metrics()["lag"] == {(f"{topic}.info", 0): 0, retry_partition: 0})
    metrics = server.metrics()
    assert (metrics["received"], metrics["dispatched"], metrics["requeued"]) == (5, 3, 2)
    assert (metrics["retried"], metrics["dead_lettered"], metrics["undecodable"]) == (1, 1, 0)
    assert metrics["committed"][(f"{topic}.info", 0)] == 4
    assert metrics["committed"][retry_partition] == 1
    assert metrics["in_flight"] == 0 and metrics["commits"] >= 1
    names = [e[0] for e in events]
    assert names.count("before") == 5 and names.count("after") == 5 and names.count("error") == 2
    assert names.count("retry") == 1 and names.count("dead") == 1
    dead = next(e[1] for e in events if e[0] == "dead")
    assert (dead.original_offset, dead.attempts, dead.error, dead.topic) == (
        2, 2, "ValueError: always", f"{topic}.info.dlq")
    after = [e for e in events if e[0] == "after"]
    # the seconds after_dispatch gets are those of the dispatch: within its own before/after hooks
    timed = []
    called: dict[int, float] = {}  # message -> when its latest before_dispatch ran
    for e in events:
        if e[0] == "before":
            called[id(e[1])] = e[-1]
        elif e[0] == "after":
            timed.append(0 < e[3] < e[-1] - called[id(e[1])])
    assert len(timed) == 5 and all(timed), after
    assert {e[2] for e in after} == {NotificationResult.HANDLED, NotificationResult.REQUEUE}
    assert ("assign", sorted([(f"{topic}.info", 0), (f"{topic}.info.retry.{server.pool}", 0)])) in [
        (e[0], sorted(e[1])) for e in events if e[0] == "assign"]
    assert any(e[0] == "commit" and e[2] is None for e in events)
    server.stop(timeout=10)
    assert any(e[0] == "revoke" for e in events)


def test_batch_listener_at_least_once_with_requeue(api, kafka_broker, unique_topic):
    transport = api.transport(kafka_broker)
    topic = unique_topic("batch")
    batches: list[list[int]] = []

    class BatchEndpoint:
        def info(self, messages):
            batches.append([m["payload"]["i"] for m in messages])
            return NotificationResult.REQUEUE if len(batches) == 1 else None

    server = api.start(api.listener(transport, topic, [BatchEndpoint()], batch=True, batch_size=5,
                                    batch_timeout=0.5, allow_requeue=True,
                                    delivery_mode="at_least_once", retry_delay=0.3))
    notify(transport, topic, range(3))
    assert wait_until(lambda: sum(map(len, batches)) == 6)
    assert batches[0] == [0, 1, 2] and sorted(i for b in batches[1:] for i in b) == [0, 1, 2]
    retry_partition = (f"{topic}.info.retry.{server.pool}", 0)
    assert wait_until(lambda: server.metrics()["committed"].get(retry_partition) == 3)
    metrics = server.metrics()
    assert metrics["committed"][(f"{topic}.info", 0)] == 3
    assert (metrics["requeued"], metrics["retried"], metrics["dispatched"]) == (3, 3, 3)
