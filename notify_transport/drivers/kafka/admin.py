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
#: How much longer than its own timeouts an admin request may take to answer.
_RESULT_MARGIN = 5.0


def _result(future: Any, timeout: float) -> Any:
    """The result of an AdminClient future, waiting at most ``timeout`` seconds.

    Waits on an Event of this module's ``threading``, set by a done-callback,
    not on the future's own condition: librdkafka resolves the future from its
    background thread, and under eventlet monkey-patching the condition of
    ``concurrent.futures`` is a green one that such a thread cannot wake (the
    oslo.messaging integration gives this module native threading).
    """
    done = threading.Event()
    future.add_done_callback(lambda _future: done.set())
    if not done.wait(timeout):
        raise MessagingException(f"The Kafka cluster did not answer an admin request within {timeout:.1f}s")
    return future.result(timeout=0)


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
        #: the last error librdkafka reported (TLS handshake, authentication, ...)
        self.last_error: KafkaError | None = None

    def client(self) -> AdminClient:
        with self._lock:
            if self._client is None:
                # "logger" and "error_cb" are documented config keys; the stubs allow
                # only str/int/float values
                config: dict[str, Any] = {**self._config, "logger": RDKAFKA_LOG, "error_cb": self._on_error}
                self._client = AdminClient(config)
            return self._client

    def _on_error(self, err: KafkaError) -> None:
        self.last_error = err

    def existing_topics(self) -> set[str]:
        """Names of the topics the cluster has now (no auto-creation side effect)."""
        try:
            metadata = self.client().list_topics(timeout=self.timeout)
        except KafkaException as exc:
            try:
                self.client().poll(0)  # serves the error callbacks that tell why
            except (KafkaException, RuntimeError):
                pass
            last = self.last_error
            cause = f"; last error: {last.str()}" if last is not None else ""
            raise MessagingException(
                f"Cannot reach the Kafka cluster at {self._config.get('bootstrap.servers')} "
                f"within {self.timeout}s: {exc.args[0].str()}{cause}") from None
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
                _result(future, self.timeout + _RESULT_MARGIN)
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
