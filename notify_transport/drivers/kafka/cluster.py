"""What the driver asks of a Kafka cluster, in one place: the one AdminClient user.

Topics (listing, creating), offsets and watermarks, a pool's description and
its committed positions and lag: a listener creates missing topics before
subscribing (a subscription to a missing topic sees nothing until the next
metadata refresh, and auto-creation may be off), resolves its start position,
waits for a KIP-848 join and reports its lag. Listing every pool and moving a
pool's offsets are operator tools, above the driver
(:mod:`notify_transport.reading.pools`).
"""
from __future__ import annotations

import dataclasses
import logging
import re
import time
from typing import Any, Iterable, Mapping, Sequence

from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, ConsumerGroupTopicPartitions, IsolationLevel,
                             KafkaError, KafkaException, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from notify_transport.drivers import threads
from notify_transport.drivers.kafka.client_properties import RDKAFKA_LOG_BESIDE_ERROR_CB
from notify_transport.drivers.kafka.partitions import Partition, partitions_in
from notify_transport.exceptions import AccessDenied, BrokerUnreachable, MessagingException

LOG = logging.getLogger(__name__)

#: Offset Kafka returns for "no committed offset" (and for "no message at that time").
NO_OFFSET = -1

#: Error codes that mean the cluster did not answer (as opposed to refusing).
UNREACHABLE = frozenset(getattr(KafkaError, name) for name in (
    "_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE", "REQUEST_TIMED_OUT",
    "COORDINATOR_NOT_AVAILABLE", "_WAIT_COORD") if hasattr(KafkaError, name))
#: Group states in which no consumer is a member.
IDLE_GROUP_STATES = frozenset({"empty", "dead"})

#: Error codes that mean the cluster answered and refused the client's credentials.
REFUSED_CREDENTIALS = frozenset(getattr(KafkaError, name) for name in (
    "_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED") if hasattr(KafkaError, name))

_NOT_ALLOWED = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED)
#: How much longer than its own timeouts an admin request may take to answer.
_RESULT_MARGIN = 5.0


def _result(future: Any, timeout: float) -> Any:
    """The result of an AdminClient future, waiting at most ``timeout`` seconds.

    On a native event (:mod:`notify_transport.drivers.threads`): under eventlet the
    future's own condition is green, and librdkafka's thread that resolves it cannot wake it.
    """
    done = threads.Event()
    future.add_done_callback(lambda _future: done.set())
    if not done.wait(timeout):
        raise MessagingException(f"The Kafka cluster did not answer an admin request within {timeout:.1f}s")
    return future.result(timeout=0)


class ClusterUnavailable(BrokerUnreachable):
    """The Kafka brokers did not answer in time (the CLI's exit status 3)."""


class ClusterError(Exception):
    """The cluster answered but refused or failed an operation (the CLI's exit status 1)."""


@dataclasses.dataclass(frozen=True)
class Member:
    """A consumer in a group (a pool), as the group coordinator describes it."""

    member_id: str
    client_id: str
    host: str


@dataclasses.dataclass(frozen=True)
class GroupInfo:
    """A consumer group (a pool) as the group coordinator describes it."""

    pool: str
    state: str
    members: int
    #: which member holds each assigned partition
    owners: Mapping[Partition, Member] = dataclasses.field(default_factory=dict)
    #: every member's id, those without partitions too
    member_ids: frozenset[str] = frozenset()

    @property
    def unknown(self) -> bool:
        """The coordinator knows no such group (Kafka describes a group it never saw as dead)."""
        return self.members == 0 and self.state in ("dead", "unknown")

    @property
    def active(self) -> bool:
        """Whether consumers are in the group (or the broker says it is not idle)."""
        return self.members > 0 or self.state not in IDLE_GROUP_STATES


class ClusterAdmin:
    """A lazily created AdminClient and every cluster operation of the package.

    ``config`` is the librdkafka configuration (from
    :func:`~notify_transport.drivers.kafka.client_properties.admin_config`);
    ``partitions`` and ``replication_factor`` are those of created topics;
    ``logger`` gets librdkafka's own log lines; by default its connection failures only at
    debug, since a request that fails names the client's last error. Safe to share between threads.
    """

    def __init__(self, config: dict[str, Any], partitions: int = 1, replication_factor: int = 1,
                 timeout: float = 10.0,
                 logger: "logging.Logger | logging.LoggerAdapter[Any]" = RDKAFKA_LOG_BESIDE_ERROR_CB) -> None:
        self._config = dict(config)
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.timeout = timeout
        self._logger = logger
        self._client: AdminClient | None = None
        self._lock = threads.Lock()
        #: the last error librdkafka reported (TLS handshake, authentication, ...)
        self.last_error: KafkaError | None = None

    def __repr__(self) -> str:
        return f"<ClusterAdmin {self.bootstrap}>"

    @property
    def bootstrap(self) -> str:
        """The bootstrap servers, for messages."""
        return str(self._config.get("bootstrap.servers", ""))

    def client(self) -> AdminClient:
        with self._lock:
            if self._client is None:
                # "logger" and "error_cb" are documented config keys; the stubs allow
                # only str/int/float values
                config: dict[str, Any] = {**self._config, "logger": self._logger,
                                          "error_cb": self._on_error}
                self._client = AdminClient(config)
            return self._client

    def _on_error(self, err: KafkaError) -> None:
        # "all brokers are down" follows the error that took the last one down: keep the cause
        if err.code() == KafkaError._ALL_BROKERS_DOWN and self.last_error is not None:
            return
        self.last_error = err

    def _unreachable(self, what: str, err: KafkaError) -> MessagingException:
        """The error for a request that got no answer in time, with why when the client knows:
        the request's own error says only that it timed out, while the reason (a refused
        password, a TLS handshake) is the client's last error, served by a poll first.

        A refused login is :class:`AccessDenied`, not an outage: waiting longer does not help.
        """
        try:
            self.client().poll(0)
        except (KafkaException, RuntimeError):
            pass
        last = self.last_error
        if last is not None and last.code() in REFUSED_CREDENTIALS:
            return AccessDenied(f"The Kafka cluster at {self.bootstrap} refused the client's "
                                f"credentials{self._last_error_text()}")
        return ClusterUnavailable(f"Cannot reach the Kafka cluster at {self.bootstrap} within {self.timeout:g}s "
                                  f"({what}: {err.str()}){self._last_error_text()}")

    def _last_error_text(self) -> str:
        """The client's last error with its stable code name (``_SSL``, ``_TRANSPORT``, ...).

        librdkafka's wording of one failure varies with timing; its code does not.
        A TLS client failing at the transport level is told which option to check.
        """
        last = self.last_error
        if last is None:
            return ""
        hint = ""
        protocol = str(self._config.get("security.protocol", "")).upper()
        if protocol.endswith("SSL") and last.code() in (KafkaError._SSL, KafkaError._TRANSPORT):
            hint = f" (security_protocol is {protocol}: does the listener speak TLS?)"
        return f"; last error: {last.name()}: {last.str()}{hint}"

    def existing_topics(self) -> set[str]:
        """Names of the topics the cluster has now (no auto-creation side effect)."""
        try:
            metadata = self.client().list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise self._unreachable("listing topics", exc.args[0]) from None
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
            threads.sleep(0.05)

    def metadata(self, topic: str | None = None) -> Any:
        """The cluster's metadata (brokers, topics, partitions with leaders and replicas),
        of every topic or of ``topic`` alone; ClusterUnavailable when nobody answers."""
        try:
            return self.client().list_topics(topic, timeout=self.timeout)
        except KafkaException as exc:
            raise self._error("listing topics", exc) from None

    def topic_partitions(self) -> dict[str, int]:
        """Every topic of the cluster (internal ones left out) and its partition count."""
        return {name: len(topic.partitions) for name, topic in self.metadata().topics.items()
                if topic.error is None and topic.partitions and not name.startswith("__")}

    def partitions_of(self, topics: Iterable[str]) -> tuple[list[Partition], list[str]]:
        """The partitions of ``topics`` that exist, and the names of those that do not."""
        return partitions_in(self.metadata(), topics)

    def partitions_matching(self, pattern: str) -> list[Partition]:
        """The partitions of every topic whose name matches the regular expression ``pattern``."""
        regex = re.compile(pattern)
        return sorted((name, p) for name, count in self.topic_partitions().items()
                      if regex.search(name) for p in range(count))

    def list_offsets(self, specs: Mapping[Partition, Any],
                     isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED) -> dict[Partition, int]:
        """One ListOffsets request: ``OffsetSpec`` per partition -> offset (-1: none).

        ``READ_COMMITTED`` gives the last stable offset as latest, what a
        read_committed consumer can reach (the pipeline plans its reads with it).
        """
        if not specs:
            return {}
        request = {TopicPartition(t, p): spec for (t, p), spec in specs.items()}
        futures = self.client().list_offsets(request, isolation_level=isolation_level,
                                             request_timeout=self.timeout)
        return {(tp.topic, tp.partition): self.answer(future, f"offsets of {tp.topic}[{tp.partition}]").offset
                for tp, future in futures.items()}

    def offsets_at(self, partitions: Sequence[Partition], spec: int) -> dict[Partition, int]:
        """ListOffsets in confluent-kafka's integers: ``OFFSET_BEGINNING``, ``OFFSET_END`` or a time
        in ms (-1 where no record is that recent), for start positions (:mod:`.positions`).

        Latest is the last stable offset, what a read_committed consumer (librdkafka's default)
        reaches; without transactions it is the high watermark.
        """
        if spec == OFFSET_BEGINNING:
            which = OffsetSpec.earliest()
        elif spec == OFFSET_END:
            which = OffsetSpec.latest()
        elif spec >= 0:
            which = OffsetSpec.for_timestamp(spec)
        else:
            raise ValueError(f"not an offset spec: {spec}")
        return self.list_offsets({tp: which for tp in partitions}, isolation_level=IsolationLevel.READ_COMMITTED)

    def watermarks(self, partitions: Sequence[Partition]) -> dict[Partition, tuple[int, int]]:
        """``(low, high)`` per partition: the first offset kept and the next offset to write."""
        low = self.list_offsets({tp: OffsetSpec.earliest() for tp in partitions})
        high = self.list_offsets({tp: OffsetSpec.latest() for tp in partitions})
        return {tp: (low[tp], high[tp]) for tp in partitions}

    def offsets_for_time(self, partitions: Sequence[Partition], millis: int) -> dict[Partition, int]:
        """First offset at or after ``millis`` per partition; -1 where no message is that recent."""
        return self.list_offsets({tp: OffsetSpec.for_timestamp(millis) for tp in partitions})

    def describe_pool(self, pool: str) -> GroupInfo:
        """The group's state, its members and which member holds which partition."""
        futures = self.client().describe_consumer_groups([pool], request_timeout=self.timeout)
        description = self.answer(futures[pool], f"describing pool {pool!r}")
        state = getattr(description.state, "name", str(description.state)).lower()
        owners: dict[Partition, Member] = {}
        member_ids = frozenset(member.member_id for member in description.members or [])
        for member in description.members or []:
            who = Member(member.member_id, member.client_id, member.host)
            assignment = member.assignment.topic_partitions if member.assignment is not None else []
            for tp in assignment or []:
                owners[(tp.topic, tp.partition)] = who
        return GroupInfo(pool, state, len(description.members or []), owners, member_ids)

    def committed(self, pool: str, partitions: Sequence[Partition] | None = None) -> dict[Partition, int]:
        """The pool's committed offsets (-1 where it has none); all of its partitions when None."""
        tps = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
        if tps == []:
            return {}
        futures = self.client().list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(pool, tps)], request_timeout=self.timeout)
        result = self.answer(futures[pool], f"committed offsets of pool {pool!r}")
        out: dict[Partition, int] = {}
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise ClusterError(f"committed offset of pool {pool!r} for {tp.topic}[{tp.partition}]: "
                                   f"{tp.error.str()}")
            out[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else NO_OFFSET
        return out

    def committed_and_lag(self, pool: str, partitions: Sequence[Partition]
                          ) -> tuple[dict[Partition, int], dict[Partition, int]]:
        """The pool's committed offsets and its lag (end offset - committed) per partition.

        Independent of any listener's consumer (the AdminClient is thread-safe).
        Partitions without a committed offset are in neither mapping.
        """
        if not partitions:
            return {}, {}
        committed = {tp: offset for tp, offset in self.committed(pool, partitions).items()
                     if offset >= 0}
        ends = self.list_offsets({tp: OffsetSpec.latest() for tp in committed})
        return committed, {tp: max(0, ends[tp] - offset) for tp, offset in committed.items()}

    def close(self) -> None:
        with self._lock:
            self._client = None  # AdminClient has no close()

    def answer(self, future: Any, what: str) -> Any:
        """The future's result; Kafka errors as :class:`ClusterUnavailable` or :class:`ClusterError`."""
        try:
            return _result(future, self.timeout + _RESULT_MARGIN)
        except KafkaException as exc:
            raise self._error(what, exc) from None

    def _error(self, what: str, exc: KafkaException) -> Exception:
        err = exc.args[0] if exc.args else None
        if not isinstance(err, KafkaError):
            return ClusterError(f"{what}: {exc}")
        if err.code() in UNREACHABLE:
            return self._unreachable(what, err)
        return ClusterError(f"{what}: {err.str()}")
