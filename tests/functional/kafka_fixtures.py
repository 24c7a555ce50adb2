"""Fixtures for the tests that use Kafka-protocol brokers.

Brokers start once per session on free loopback ports: ``apache_kafka`` (Apache
Kafka, one KRaft node: the broker of record), ``kafka_cluster`` (Apache Kafka, three
nodes, for the replication and failover tests), ``noida`` (noida-db, persists: the
embedded default) and ``tansu`` (memory only, short session timeout because it
joins groups slowly otherwise). ``kafka_broker`` runs a test on Apache Kafka and
noida, ``kafka_bootstrap`` on all three kinds; both add the cluster named by
``$NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP`` when it is set. An Apache Kafka fixture keeps
its brokers' logs (and says where) when a test of the session failed.
"""
from __future__ import annotations

import contextlib
import re
import threading
import time
import uuid
from typing import Any, Callable, Iterator

import pytest
from oslo_config import cfg

from endpoints import IdRecorder
from waits import wait_until

from notify_transport.testing.apache_kafka import ApacheKafka
from notify_transport.testing.brokers import Broker, NoidaBroker, TansuBroker, external_kafka
from session_brokers import kept_logs_on_failure

#: Every topic a test session creates starts with this, so that they can be found and deleted.
SESSION_PREFIX = f"nt{uuid.uuid4().hex[:6]}"


def settled(server: Any) -> bool:
    """True when a Kafka listener can get nothing more of what was sent so far.

    Nothing in flight or held for a retry, and its group committed the end of every
    partition it reads (main and retry topics): a retry copy is produced before its
    original is committed, so it shows as lag until it is consumed. Poll it with
    ``waits.wait_until`` instead of sleeping to see that "nothing more arrives".
    """
    metrics = server.metrics()
    lag = metrics.get("lag") or {}
    return (metrics.get("in_flight") == 0 and not metrics.get("held_for_retry")
            and bool(lag) and not any(lag.values()))


def kafka_url(broker: Broker, vhost: str | None = None, **query: Any) -> str:
    """``kafka://`` URL for ``broker`` with its client defaults and ``query`` options."""
    return broker.url(vhost, **query)


#: The external cluster's fixture name, when $NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP is set.
EXTERNAL = ["external"] if external_kafka() is not None else []
#: Brokers a test of the Kafka driver's behaviour runs on: the broker of record, the embedded default.
KAFKA_BROKERS = ["apache_kafka", "noida", *EXTERNAL]


@pytest.fixture(scope="session")
def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[ApacheKafka]:
    """Apache Kafka, three nodes (replication factor 3, min.insync.replicas=2).

    Tests that stop or kill a node start it again before they end (a fault test's
    ``finally``), so the next test finds all three registered.
    """
    with kept_logs_on_failure(request, ApacheKafka(nodes=3)) as cluster:
        yield cluster


@pytest.fixture(params=KAFKA_BROKERS)
def kafka_broker(request: pytest.FixtureRequest) -> Broker:
    """Apache Kafka (one node), then noida (and the external cluster when set)."""
    return request.getfixturevalue(request.param)


@pytest.fixture
def broker(kafka_broker: Broker) -> Broker:
    """:func:`kafka_broker` under the shorter name the CLI, serve and service tests use."""
    return kafka_broker


@pytest.fixture
def own_noida(tmp_path: Any) -> Iterator[NoidaBroker]:
    """A noida-db broker of the test's own (data in its tmp_path), for tests that stop or kill it."""
    broker = NoidaBroker(data_dir=tmp_path / "data")
    broker.start()
    yield broker
    broker.close()


@pytest.fixture
def own_apache_kafka(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[ApacheKafka]:
    """An Apache Kafka node of the test's own (data in its tmp_path), for tests that stop or kill it."""
    with kept_logs_on_failure(request, ApacheKafka(base_dir=tmp_path / "kafka")) as broker:
        yield broker


@pytest.fixture(params=["own_apache_kafka", "own_noida"])
def own_kafka(request: pytest.FixtureRequest) -> Broker:
    """A broker of the test's own that keeps its data on disk: Apache Kafka, then noida-db."""
    return request.getfixturevalue(request.param)


@pytest.fixture
def own_tansu() -> Iterator[TansuBroker]:
    """A Tansu broker of the test's own, for tests that stop or kill it (memory only: a kill empties it)."""
    broker = TansuBroker()
    broker.start()
    yield broker
    broker.close()


@pytest.fixture(scope="session")
def tansu() -> Iterator[TansuBroker]:
    """The second broker: Tansu, memory only."""
    broker = TansuBroker()
    broker.start()
    yield broker
    broker.close()


@pytest.fixture(scope="session")
def external() -> Iterator[Broker]:
    """The cluster named by $NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP; topics this session made are deleted."""
    broker = external_kafka()
    if broker is None:
        pytest.skip("NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP is not set")
    yield broker
    _delete_session_topics(broker.bootstrap)


@pytest.fixture(params=["apache_kafka", "noida", "tansu", *EXTERNAL])
def kafka_bootstrap(request: pytest.FixtureRequest) -> Broker:
    """Each broker in turn (Apache Kafka, noida, tansu, and the external cluster when set).

    Returns the :class:`~notify_transport.testing.brokers.Broker`: ``.bootstrap``
    is its ``host:port`` list, ``.url(vhost, **options)`` a transport URL.
    """
    return request.getfixturevalue(request.param)


@pytest.fixture
def kafka_conf() -> cfg.ConfigOpts:
    """A ConfigOpts of its own per test, so option values never leak between tests."""
    conf = cfg.ConfigOpts()
    conf([])
    return conf


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``unique_topic("name")`` -> a topic name no other test uses."""
    test = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:40].strip("-")

    def make(name: str = "t") -> str:
        return f"{SESSION_PREFIX}-{test}-{name}-{uuid.uuid4().hex[:6]}"

    return make


@pytest.fixture
def kafka_driver(kafka_conf: cfg.ConfigOpts) -> Iterator[Callable[..., Any]]:
    """``kafka_driver(url)`` -> a KafkaDriver, cleaned up (flush_timeout bounded) after the test."""
    from notify_transport.drivers.kafka.driver import KafkaDriver
    from notify_transport.url import TransportURL

    made: list[KafkaDriver] = []

    def make(url: str, conf: cfg.ConfigOpts | None = None) -> KafkaDriver:
        conf = conf or kafka_conf
        driver = KafkaDriver(conf, TransportURL.parse(conf, url))
        made.append(driver)
        return driver

    yield make
    for driver in reversed(made):
        with contextlib.suppress(Exception):
            driver.cleanup()


@pytest.fixture
def raw_producer() -> Iterator[Callable[[Broker], Any]]:
    """``raw_producer(broker)`` -> a plain confluent-kafka Producer (for poison records, interop)."""
    from confluent_kafka import Producer

    made: list[Any] = []

    def make(broker: Broker, **config: Any) -> Any:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, **config})
        made.append(producer)
        return producer

    yield make
    for producer in made:
        producer.flush(5)


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int | None = 1) -> dict[int, int]:
    """``{partition: committed offset}`` of ``group`` on ``topic``, asked of the broker: of its
    first ``partitions`` partitions (an offset below 0 when none is committed), or with None of
    every partition of ``topic`` the group committed."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = None if partitions is None else [TopicPartition(topic, p) for p in range(partitions)]
    request = ConsumerGroupTopicPartitions(group, wanted)
    result = admin.list_consumer_group_offsets([request], request_timeout=10)[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic}


def committed_total(bootstrap: str, group: str, topic: str) -> int:
    """Sum of ``group``'s committed offsets on the partitions of ``topic``'s info topic (offsets
    start at 0, so on a fresh topic: how many records the pool committed)."""
    return sum(offset for offset in group_offsets(bootstrap, group, f"{topic}.info", None).values() if offset > 0)


def listener_start_error(transport: Any, topic: str, pool: str) -> str:
    """The text of the :class:`ServerListenError` a notification listener's ``start()`` raises on
    ``transport`` (the test fails if it starts)."""
    import notify_transport
    from notify_transport.exceptions import ServerListenError

    server = notify_transport.get_notification_listener(
        transport, [notify_transport.Target(topic=topic)], [IdRecorder()], pool=pool)
    with pytest.raises(ServerListenError) as info:
        server.start()
    return str(info.value)


class Collector:
    """Polls a driver listener in a thread (as the listener server does) and keeps what arrives."""

    def __init__(self, listener: Any, max_messages: int = 100) -> None:
        self.listener = listener
        self.max_messages = max_messages
        self.messages: list[Any] = []
        self.errors: list[BaseException] = []
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self._polls = 0

    def start(self) -> "Collector":
        """Start the listener (in this thread, as the server does), then poll in the background."""
        self.listener.start()
        self._thread = threading.Thread(target=self._run, daemon=True, name="collector")
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self.listener.stopped:
            try:
                batch = self.listener.poll(timeout=0.5, max_messages=self.max_messages)
            except Exception as exc:  # noqa: BLE001 - the test inspects errors
                self.errors.append(exc)
                time.sleep(0.1)
                continue
            with self._cond:
                self.messages.extend(batch)
                self._polls += 1
                self._cond.notify_all()

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Any]:
        """Wait until ``count`` messages arrived (or ``timeout``); return all received so far."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.messages) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return list(self.messages)

    def settle(self, timeout: float = 30.0) -> list[Any]:
        """Everything received, once nothing more can arrive (see :func:`settled`).

        The listener commits what a poll returns before the poll returns it: the poll
        running when the group is seen settled is waited for too.
        """
        wait_until(lambda: settled(self.listener), timeout, interval=0.2)
        with self._cond:
            polls = self._polls
            self._cond.wait_for(lambda: self._polls > polls, timeout)
            return list(self.messages)

    def stop(self) -> None:
        self.listener.stop()
        if self._thread is not None:
            self._thread.join(5)
        self.listener.cleanup()


@pytest.fixture
def collectors() -> Iterator[Callable[..., Any]]:
    """``collectors(listener)`` -> a started :class:`Collector`; with several listeners,
    they start in parallel (joining groups takes a while) and a list is returned.
    All are stopped after the test."""
    made: list[Collector] = []

    def start(*listeners: Any, max_messages: int = 100) -> Any:
        batch = [Collector(listener, max_messages) for listener in listeners]
        made.extend(batch)
        if len(batch) == 1:
            return batch[0].start()
        errors: list[BaseException] = []

        def run(collector: Collector) -> None:
            try:
                collector.start()
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(c,)) for c in batch]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        return batch

    yield start
    for collector in made:
        with contextlib.suppress(Exception):
            collector.stop()


def _delete_session_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    with contextlib.suppress(Exception):
        topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(SESSION_PREFIX)]
        if topics:
            for future in admin.delete_topics(topics, operation_timeout=30).values():
                with contextlib.suppress(Exception):
                    future.result()
