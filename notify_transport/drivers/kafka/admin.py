"""Creating the topics a listener subscribes to.

A consumer that subscribes to a topic that does not exist yet sees nothing
until its next metadata refresh (minutes), and brokers with topic
auto-creation off never create it. Listeners therefore create missing topics
(``topic_partitions``, ``topic_replication_factor``) before subscribing.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Iterable

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from notify_transport.drivers.kafka.config import RDKAFKA_LOG
from notify_transport.exceptions import MessagingException

LOG = logging.getLogger(__name__)

_NOT_ALLOWED = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED)


class TopicAdmin:
    """Lazily created AdminClient shared by a driver's listeners."""

    def __init__(self, config: dict[str, Any], partitions: int, replication_factor: int,
                 timeout: float = 10.0) -> None:
        self._config = dict(config)
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.timeout = timeout
        self._client: AdminClient | None = None
        self._lock = threading.Lock()

    def client(self) -> AdminClient:
        with self._lock:
            if self._client is None:
                # "logger" is a documented config key; the stubs allow only str/int/float values
                self._client = AdminClient({**self._config, "logger": RDKAFKA_LOG})  # type: ignore[dict-item]
            return self._client

    def existing_topics(self) -> set[str]:
        """Names of the topics the cluster has now (no auto-creation side effect)."""
        try:
            metadata = self.client().list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise MessagingException(
                f"Cannot reach the Kafka cluster at {self._config.get('bootstrap.servers')} "
                f"within {self.timeout}s: {exc.args[0].str()}") from None
        return {name for name, topic in metadata.topics.items()
                if topic.error is None and topic.partitions}

    def ensure_topics(self, topics: Iterable[str]) -> list[str]:
        """Create those of ``topics`` that do not exist; return the ones created."""
        wanted = sorted(set(topics))
        missing = [t for t in wanted if t not in self.existing_topics()]
        if not missing:
            return []
        new = [NewTopic(t, num_partitions=self.partitions, replication_factor=self.replication_factor)
               for t in missing]
        futures = self.client().create_topics(new, operation_timeout=self.timeout,
                                              request_timeout=self.timeout)
        created = []
        for topic, future in futures.items():
            try:
                future.result()
                created.append(topic)
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue  # another listener created it first
                if err.code() in _NOT_ALLOWED:
                    LOG.warning("Not allowed to create Kafka topic %s (%s); subscribing anyway, "
                                "the topic must be created by an administrator", topic, err.str())
                    continue
                raise MessagingException(f"Cannot create Kafka topic {topic}: {err.str()}") from None
        if created:
            LOG.info("Created Kafka topic(s) %s with %d partition(s)", ", ".join(created),
                     self.partitions)
            self._wait_visible(created)
        return created

    def _wait_visible(self, topics: list[str]) -> None:
        """Wait (bounded) until the metadata shows the new topics, so a subscription sees them."""
        deadline = time.monotonic() + self.timeout
        while True:
            missing = set(topics) - self.existing_topics()
            if not missing:
                return
            if time.monotonic() >= deadline:
                LOG.warning("Kafka topic(s) %s created but not yet in the cluster metadata "
                            "after %.1fs", ", ".join(sorted(missing)), self.timeout)
                return
            time.sleep(0.05)

    def close(self) -> None:
        with self._lock:
            self._client = None
