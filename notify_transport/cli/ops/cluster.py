"""What the operator commands ask of a Kafka cluster: topics, offsets, pools.

Built on the transport the public API makes from the URL, so the scheme, the
vhost, the ``[oslo_messaging_kafka]`` options (SASL, TLS, ...) and the URL
query mean exactly what they mean to the driver: the librdkafka
configuration comes from the driver's own builder
(:mod:`notify_transport.drivers.kafka.config`) and topic names from its
naming (``KafkaDriver.kafka_topics``). A pool is a consumer group.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import uuid
from typing import Any, Iterable, Iterator, Mapping, Sequence

import confluent_kafka
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from oslo_config import cfg

from notify_transport.cli.common import configured_url, load_conf
from notify_transport.drivers.kafka import config as kafka_config
from notify_transport.drivers.kafka.driver import KafkaDriver
from notify_transport.exceptions import (ConfigurationError, DriverLoadFailure, InvalidTarget,
                                         MessagingException)
from notify_transport.target import Target
from notify_transport.transport import NotificationTransport, get_notification_transport

LOG = logging.getLogger(__name__)
#: librdkafka's own log lines (connection refused, ...): std logging, shown with -v.
RDKAFKA_LOG = logging.getLogger("notify_transport.cli.librdkafka")

#: A partition: ``(topic, partition)``.
Partition = tuple[str, int]

#: Offset Kafka returns for "no committed offset" (and for "no message at that time").
NO_OFFSET = -1

UNREACHABLE = frozenset(getattr(KafkaError, name) for name in (
    "_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN", "_RESOLVE", "REQUEST_TIMED_OUT",
    "COORDINATOR_NOT_AVAILABLE", "_WAIT_COORD") if hasattr(KafkaError, name))
#: Group states in which no consumer is a member.
IDLE_GROUP_STATES = frozenset({"empty", "dead"})


class ClusterUnavailable(MessagingException):
    """The brokers did not answer in time (exit status 3)."""


class ClusterError(Exception):
    """The cluster answered but refused or failed an operation (exit status 1)."""


@dataclasses.dataclass(frozen=True)
class Member:
    """A consumer in a pool, as the group coordinator describes it."""

    member_id: str
    client_id: str
    host: str


@dataclasses.dataclass(frozen=True)
class GroupInfo:
    """A pool as the group coordinator describes it."""

    pool: str
    state: str
    members: int
    #: which member holds each assigned partition
    owners: Mapping[Partition, Member] = dataclasses.field(default_factory=dict)

    @property
    def unknown(self) -> bool:
        """The coordinator knows no such group (Kafka describes a group it never saw as dead)."""
        return self.members == 0 and self.state in ("dead", "unknown")

    @property
    def active(self) -> bool:
        """Whether consumers are in the group (or the broker says it is not idle)."""
        return self.members > 0 or self.state not in IDLE_GROUP_STATES


class KafkaCluster:
    """Admin operations on the cluster of one ``kafka://`` transport."""

    def __init__(self, transport: NotificationTransport, timeout: float) -> None:
        driver = transport.driver
        if not isinstance(driver, KafkaDriver):
            raise ConfigurationError(
                f"this command works on Kafka only; {transport.url.redacted()} uses the "
                f"{transport.url.transport!r} driver (give a kafka:// transport URL)")
        self.transport = transport
        self.driver = driver
        self.timeout = timeout
        self.vhost: str | None = driver.vhost
        self.bootstrap = kafka_config.bootstrap_servers(driver.url)
        admin_conf = kafka_config.admin_config(driver.url, driver.opts)
        admin_conf.update({"logger": RDKAFKA_LOG,
                           "socket.connection.setup.timeout.ms": max(1000, int(timeout * 1000))})
        self._admin = AdminClient(admin_conf)

    def __repr__(self) -> str:
        return f"<KafkaCluster {self.driver.url.redacted()}>"

    # -- names ----------------------------------------------------------------
    def notification_topics(self, topics: Sequence[str], priorities: Sequence[str]) -> list[str]:
        """Kafka topics of ``topic.priority[.vhost]`` for each pair, named as the driver names them."""
        try:
            return self.driver.kafka_topics((Target(topic=t), p) for t in topics for p in priorities)
        except InvalidTarget as exc:
            raise ConfigurationError(str(exc)) from None

    # -- metadata and offsets -------------------------------------------------------
    def topic_partitions(self) -> dict[str, int]:
        """Every topic of the cluster (internal ones left out) and its partition count."""
        try:
            metadata = self._admin.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise self._error("listing topics", exc) from None
        return {name: len(topic.partitions) for name, topic in metadata.topics.items()
                if topic.error is None and topic.partitions and not name.startswith("__")}

    def partitions_of(self, topics: Iterable[str]) -> tuple[list[Partition], list[str]]:
        """The partitions of ``topics`` that exist, and the names of those that do not."""
        existing = self.topic_partitions()
        found: list[Partition] = []
        missing: list[str] = []
        for name in topics:
            if name in existing:
                found.extend((name, p) for p in range(existing[name]))
            else:
                missing.append(name)
        return found, missing

    def list_offsets(self, specs: Mapping[Partition, Any]) -> dict[Partition, int]:
        """One ListOffsets request: ``OffsetSpec`` per partition -> offset (-1: none)."""
        if not specs:
            return {}
        request = {TopicPartition(t, p): spec for (t, p), spec in specs.items()}
        futures = self._admin.list_offsets(request, request_timeout=self.timeout)
        return {(tp.topic, tp.partition): self._result(future, f"offsets of {tp.topic}[{tp.partition}]").offset
                for tp, future in futures.items()}

    def watermarks(self, partitions: Sequence[Partition]) -> dict[Partition, tuple[int, int]]:
        """``(low, high)`` per partition: the first offset kept and the next offset to write."""
        low = self.list_offsets({tp: OffsetSpec.earliest() for tp in partitions})
        high = self.list_offsets({tp: OffsetSpec.latest() for tp in partitions})
        return {tp: (low[tp], high[tp]) for tp in partitions}

    def offsets_for_time(self, partitions: Sequence[Partition], millis: int) -> dict[Partition, int]:
        """First offset at or after ``millis`` per partition; -1 where no message is that recent."""
        return self.list_offsets({tp: OffsetSpec.for_timestamp(millis) for tp in partitions})

    # -- pools ----------------------------------------------------------------------
    def pools(self) -> list[str]:
        """Consumer groups the cluster knows."""
        future = self._admin.list_consumer_groups(request_timeout=self.timeout)
        result = self._result(future, "listing consumer groups")
        return sorted(g.group_id for g in result.valid)

    def describe_pool(self, pool: str) -> GroupInfo:
        futures = self._admin.describe_consumer_groups([pool], request_timeout=self.timeout)
        description = self._result(futures[pool], f"describing pool {pool!r}")
        state = getattr(description.state, "name", str(description.state)).lower()
        owners: dict[Partition, Member] = {}
        for member in description.members or []:
            who = Member(member.member_id, member.client_id, member.host)
            assignment = member.assignment.topic_partitions if member.assignment is not None else []
            for tp in assignment or []:
                owners[(tp.topic, tp.partition)] = who
        return GroupInfo(pool, state, len(description.members or []), owners)

    def committed(self, pool: str, partitions: Sequence[Partition] | None = None) -> dict[Partition, int]:
        """The pool's committed offsets (-1 where it has none); all of its partitions when None."""
        tps = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
        if tps == []:
            return {}
        futures = self._admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(pool, tps)], request_timeout=self.timeout)
        result = self._result(futures[pool], f"committed offsets of pool {pool!r}")
        out: dict[Partition, int] = {}
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise ClusterError(f"committed offset of pool {pool!r} for {tp.topic}[{tp.partition}]: "
                                   f"{tp.error.str()}")
            out[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else NO_OFFSET
        return out

    def commit(self, pool: str, offsets: Mapping[Partition, int]) -> None:
        """Set the pool's committed offsets (the group must have no members on a real Kafka)."""
        if not offsets:
            return
        request = ConsumerGroupTopicPartitions(
            pool, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
        futures = self._admin.alter_consumer_group_offsets([request], request_timeout=self.timeout)
        result = self._result(futures[pool], f"committing offsets of pool {pool!r}")
        failed = [f"{tp.topic}[{tp.partition}]: {tp.error.str()}"
                  for tp in result.topic_partitions or [] if tp.error is not None]
        if failed:
            raise ClusterError(f"the broker refused the new offsets of pool {pool!r}: " + "; ".join(failed))

    # -- consumers --------------------------------------------------------------------
    def reader(self, name: str = "tail", error_cb: Any = None, **extra: Any) -> confluent_kafka.Consumer:
        """A consumer that never joins a group nor commits: it reads what it is assigned.

        Its group id is unique and unused (librdkafka wants one), so it takes
        nothing from any pool and leaves nothing behind on the brokers.
        ``error_cb`` gets the client's errors (default: one log line each);
        ``extra`` is more librdkafka configuration.
        """
        group = f"notify-transport-{name}-{uuid.uuid4().hex[:12]}"
        conf = kafka_config.consumer_config(self.driver.url, self.driver.opts, group)
        conf.update({"enable.auto.commit": False, "enable.auto.offset.store": False,
                     "logger": RDKAFKA_LOG, "error_cb": error_cb or self._log_client_error, **extra})
        try:
            return confluent_kafka.Consumer(conf)
        except (KafkaException, ValueError, TypeError) as exc:
            raise ConfigurationError(f"cannot create a Kafka consumer: {exc}") from None

    # -- end ------------------------------------------------------------------------------
    def close(self) -> None:
        self._admin = None  # type: ignore[assignment]  # AdminClient has no close()

    # -- errors ----------------------------------------------------------------------------
    def _result(self, future: Any, what: str) -> Any:
        try:
            return future.result()
        except KafkaException as exc:
            raise self._error(what, exc) from None

    def _error(self, what: str, exc: KafkaException) -> Exception:
        err = exc.args[0] if exc.args else None
        if not isinstance(err, KafkaError):
            return ClusterError(f"{what}: {exc}")
        if err.code() in UNREACHABLE:
            return ClusterUnavailable(f"cannot reach the Kafka cluster at {self.bootstrap} within "
                                      f"{self.timeout:g}s ({what}: {err.str()})")
        return ClusterError(f"{what}: {err.str()}")

    @staticmethod
    def _log_client_error(err: KafkaError) -> None:
        RDKAFKA_LOG.warning("%s", err.str())


@contextlib.contextmanager
def open_cluster(args: argparse.Namespace) -> Iterator[KafkaCluster]:
    """The cluster of the configured transport URL; checks the brokers answer."""
    with open_transport(args) as transport:
        cluster = KafkaCluster(transport, args.connect_timeout)
        try:
            cluster.topic_partitions()  # unreachable -> ClusterUnavailable (exit 3) now
            yield cluster
        finally:
            cluster.close()


@contextlib.contextmanager
def open_transport(args: argparse.Namespace,
                   conf: cfg.ConfigOpts | None = None) -> Iterator[NotificationTransport]:
    """A notification transport from --transport-url, --config-file or $NOTIFY_TRANSPORT_URL
    (``conf``: already loaded, with overrides of the command)."""
    conf = conf if conf is not None else load_conf(args)
    url = configured_url(args, conf)
    if not url:
        raise ConfigurationError("no transport URL: give --transport-url, a --config-file with "
                                 "[oslo_messaging_notifications] transport_url, or set "
                                 "NOTIFY_TRANSPORT_URL")
    try:
        transport = get_notification_transport(conf, url)
    except DriverLoadFailure as exc:  # an unknown scheme is a usage error, not an outage
        raise ConfigurationError(str(exc)) from None
    try:
        yield transport
    finally:
        transport.cleanup()


def default_topics(args: argparse.Namespace) -> list[str]:
    """--topic values, else ``[oslo_messaging_notifications] topics`` of the config files."""
    if getattr(args, "topic", None):
        return list(dict.fromkeys(args.topic))
    conf = load_conf(args)
    return list(conf.oslo_messaging_notifications.topics)
