"""The brokers of a run: a Kafka-protocol broker and a RabbitMQ vhost, both cleaned up.

Kafka: an external cluster (``--kafka-bootstrap``), else the broker that
``--kafka-broker`` names started for the run: Apache Kafka (one KRaft node,
``notify_transport.testing.apache_kafka``, the broker of record) or noida-db
(``notify_transport.testing.brokers.NoidaBroker``). Topics of a run share a prefix and are
deleted at the end.

RabbitMQ (127.0.0.1:5672 by default): each run gets its own vhost, made with
``rabbitmqctl`` and deleted at the end, so every queue and exchange that
oslo.messaging, notify-transport or pika declared goes with it. Without
``rabbitmqctl`` the default vhost is used and the run's queues are deleted by
name.
"""
from __future__ import annotations

import contextlib
import logging
import shutil
import socket
import subprocess
import time
from typing import Iterator

LOG = logging.getLogger(__name__)


def wait_port(host: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s") from None
            time.sleep(0.1)


@contextlib.contextmanager
def kafka_broker(bootstrap: str | None = None, kind: str = "noida") -> Iterator[tuple[str, str]]:
    """Yield ``(bootstrap, description)`` for the run's Kafka-protocol broker."""
    if bootstrap:
        yield bootstrap, f"external Kafka at {bootstrap}"
        return
    if kind == "apache-kafka":
        from notify_transport.testing.apache_kafka import ApacheKafka

        with ApacheKafka() as kafka:
            version = kafka.artifacts.properties.get("kafka.version", "pinned")
            yield kafka.bootstrap, f"Apache Kafka ({version}, one KRaft node) at {kafka.bootstrap}"
        return
    from notify_transport.testing.brokers import NoidaBroker

    broker = NoidaBroker()
    broker.start()
    try:
        yield broker.bootstrap, f"noida-db at {broker.bootstrap}"
    finally:
        broker.close()


# -- Kafka topics --------------------------------------------------------------

def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    """Create topics and wait until their metadata shows every partition."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, partitions, 1) for n in names], operation_timeout=10)
    for name, fut in futures.items():
        try:
            fut.result(timeout=15)
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    deadline = time.monotonic() + 15
    while True:
        md = admin.list_topics(timeout=5)
        if all(n in md.topics and len(md.topics[n].partitions) == partitions for n in names):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics {names} not visible with {partitions} partitions")
        time.sleep(0.1)


def delete_topics(bootstrap: str, prefix: str) -> list[str]:
    """Delete every topic whose name starts with ``prefix``; return their names."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
    if names:
        for name, fut in admin.delete_topics(names, operation_timeout=10).items():
            try:
                fut.result(timeout=15)
            except Exception as exc:
                LOG.warning("could not delete topic %s: %s", name, exc)
    return names


def end_offsets(bootstrap: str, topic: str) -> int:
    """Sum over partitions of the high watermark (messages written to ``topic``)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks",
                         "enable.auto.commit": False})
    try:
        md = consumer.list_topics(topic, timeout=10)
        total = 0
        for p in md.topics[topic].partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high
        return total
    finally:
        consumer.close()


def commit_start_offsets(bootstrap: str, group: str, topic: str, offset: int = 0) -> None:
    """Commit ``offset`` on every partition of ``topic`` for ``group`` before it joins.

    oslo.messaging's consumer starts at ``latest`` when its group has no
    offset; committing 0 first makes every implementation read the same
    pre-filled messages, without a driver-specific start option.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        md = consumer.list_topics(topic, timeout=10)
        parts = [TopicPartition(topic, p, offset) for p in md.topics[topic].partitions]
        consumer.commit(offsets=parts, asynchronous=False)
    finally:
        consumer.close()


# -- RabbitMQ ------------------------------------------------------------------

class RabbitVhost:
    """A vhost of its own for the run (``rabbitmqctl``), or ``/`` with named cleanup."""

    def __init__(self, run_id: str, host: str = "127.0.0.1", port: int = 5672,
                 user: str = "guest", password: str = "guest") -> None:
        self.host, self.port, self.user, self.password = host, port, user, password
        self.name = f"bench-{run_id}"
        self.own = False
        self._queues: set[str] = set()

    def __enter__(self) -> "RabbitVhost":
        wait_port(self.host, self.port, 5)
        ctl = shutil.which("rabbitmqctl")
        if ctl and self.host in ("127.0.0.1", "localhost"):
            try:
                subprocess.run([ctl, "add_vhost", self.name], check=True, capture_output=True, timeout=60)
                self.own = True
                subprocess.run([ctl, "set_permissions", "-p", self.name, self.user, ".*", ".*", ".*"],
                               check=True, capture_output=True, timeout=60)
            except (subprocess.SubprocessError, OSError) as exc:
                LOG.warning("rabbitmqctl could not make vhost %s (%s); using '/'", self.name, exc)
                self._delete_vhost()
                self.own = False
        if not self.own:
            self.name = "/"
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def url(self, scheme: str = "rabbit") -> str:
        vhost = self.name if self.name != "/" else ""
        return f"{scheme}://{self.user}:{self.password}@{self.host}:{self.port}/{vhost}"

    def pika_params(self):  # -> pika.ConnectionParameters
        import pika

        return pika.ConnectionParameters(host=self.host, port=self.port, virtual_host=self.name,
                                         credentials=pika.PlainCredentials(self.user, self.password))

    def remember_queue(self, name: str) -> None:
        """A queue to delete at the end when the run has no vhost of its own."""
        self._queues.add(name)

    def _delete_vhost(self) -> None:
        ctl = shutil.which("rabbitmqctl")
        if ctl:
            subprocess.run([ctl, "delete_vhost", self.name], capture_output=True, timeout=60)

    def cleanup(self) -> None:
        if self.own:
            self._delete_vhost()
            return
        if not self._queues:
            return
        import pika

        try:
            conn = pika.BlockingConnection(self.pika_params())
        except Exception as exc:
            LOG.warning("could not clean up rabbit queues %s: %s", sorted(self._queues), exc)
            return
        try:
            for name in self._queues:
                with contextlib.suppress(Exception):
                    ch = conn.channel()
                    ch.queue_delete(name)
        finally:
            conn.close()
