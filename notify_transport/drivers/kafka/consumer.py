"""The Kafka listener: one confluent-kafka Consumer in a consumer group (the pool).

What it guarantees, whatever the commit policy:

* ``start()`` returns once the group was joined and every assigned partition
  has a committed position: a partition the group never read is positioned at
  its end (or its start with ``auto_offset_reset=earliest``) *and that
  position is committed*, so a message sent after ``start()`` returns is read
  even when another listener of the pool takes the partition later;
* ``poll()`` returns as soon as one message is there (no waiting for a full
  batch), takes what else is already fetched up to the limit, and never stops
  on a bad record: an undecodable one is logged with its coordinates and
  skipped;
* transient errors are logged, fatal ones raised.

When offsets are committed is the :mod:`.commit` policy's business.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

import confluent_kafka
from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, Message,
                             TopicPartition)

from notify_transport.drivers.base import IncomingMessage, Listener
from notify_transport.drivers.envelope import decode_notification
from notify_transport.drivers.kafka.admin import TopicAdmin
from notify_transport.drivers.kafka.commit import CommitPolicy
from notify_transport.drivers.kafka.config import redact
from notify_transport.drivers.kafka.message import KafkaMessage
from notify_transport.drivers.kafka.reporting import RateLimitedLog
from notify_transport.exceptions import DecodeError, MessagingException, MessagingTimeout

LOG = logging.getLogger(__name__)
RDKAFKA_LOG = logging.getLogger("notify_transport.drivers.kafka.librdkafka")

#: Longest single wait inside poll(), so that stop() is noticed quickly.
STOP_CHECK_INTERVAL = 0.2

#: Errors that retrying cannot fix: raised out of start() and poll().
PERMANENT_ERRORS = frozenset(getattr(KafkaError, name) for name in (
    "INVALID_SESSION_TIMEOUT", "GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
    "INVALID_GROUP_ID", "SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION", "_INVALID_ARG",
    "UNSUPPORTED_VERSION", "_FATAL") if hasattr(KafkaError, name))


class KafkaListenerError(MessagingException):
    """The consumer hit an error that retrying cannot fix."""


class KafkaListener(Listener):
    """A driver listener over one consumer; see the module docstring for its guarantees."""

    def __init__(self, config: dict[str, Any], topics: list[str], policy: CommitPolicy, *,
                 admin: TopicAdmin | None = None, max_poll_records: int = 500,
                 consumer_timeout: float = 1.0, start_timeout: float = 30.0,
                 operation_timeout: float = 10.0) -> None:
        super().__init__()
        self.topics = list(topics)
        self.group_id: str = config["group.id"]
        self.policy = policy
        self.name = f"Kafka listener (group {self.group_id}, topics {','.join(self.topics)})"
        self._config = dict(config)
        self._earliest = str(config.get("auto.offset.reset", "latest")) in ("earliest", "smallest",
                                                                            "beginning")
        self._cooperative = "cooperative" in str(config.get("partition.assignment.strategy", ""))
        self._admin = admin
        self._max_records = max(1, int(max_poll_records))
        self._slice = max(0.001, min(consumer_timeout, STOP_CHECK_INTERVAL))
        self._start_timeout = start_timeout
        self._op_timeout = operation_timeout
        self._consumer: confluent_kafka.Consumer | None = None
        self._backlog: list[Message] = []
        self._joined = threading.Event()
        self._assignment: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._fatal: KafkaError | None = None
        self._last_error: KafkaError | None = None
        self._errors = RateLimitedLog(LOG)
        #: Records skipped because they could not be decoded.
        self.skipped = 0

    def __repr__(self) -> str:
        return f"<{self.name}>"

    @property
    def closed(self) -> bool:
        """Stopped and its consumer closed (or never started)."""
        return self.stopped and self._consumer is None

    @property
    def assignment(self) -> set[tuple[str, int]]:
        """``(topic, partition)`` pairs this listener owns now."""
        return set(self._assignment)

    # -- start ------------------------------------------------------------------
    def start(self) -> None:
        """Create missing topics, subscribe, and return once the group gave us our partitions."""
        if self._consumer is not None:
            return
        if self._admin is not None:
            self._admin.ensure_topics(self.topics)
        config = dict(self._config)
        config["error_cb"] = self._on_error
        config["logger"] = RDKAFKA_LOG
        LOG.debug("%s: creating the consumer: %s", self.name, redact(self._config))
        try:
            consumer = confluent_kafka.Consumer(config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise KafkaListenerError(f"{self.name}: cannot create the consumer: {exc}") from None
        self._consumer = consumer
        self.policy.attach(consumer, self.name)
        consumer.subscribe(self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                           on_lost=self._on_lost)
        deadline = time.monotonic() + self._start_timeout
        try:
            while not self._joined.is_set():
                if self.stopped:
                    return
                record = consumer.poll(0.05)
                if record is not None:
                    err = record.error()
                    if err is not None and (err.fatal() or err.code() in PERMANENT_ERRORS):
                        raise KafkaListenerError(f"{self.name}: cannot join the group: {err.str()}")
                    self._backlog.append(record)
                self._raise_if_fatal()
                if time.monotonic() >= deadline:
                    last = f"; last error: {self._last_error.str()}" if self._last_error else ""
                    raise MessagingTimeout(
                        f"{self.name} did not get its partitions within {self._start_timeout}s "
                        f"(is the broker reachable? is another listener of the group not "
                        f"polling?){last}")
        except BaseException:
            self._close_consumer()
            raise
        LOG.debug("%s started with partitions %s", self.name, sorted(self._assignment))

    # -- rebalance callbacks (run inside consumer.poll, in the polling thread) ---
    def _on_assign(self, consumer: confluent_kafka.Consumer, partitions: list[TopicPartition]) -> None:
        try:
            positioned = self._start_positions(consumer, partitions) if partitions else partitions
        except Exception as exc:  # noqa: BLE001 - an exception here would break poll()
            LOG.error("%s: could not set the start positions of %s (%s); falling back to the "
                      "committed offsets or auto_offset_reset", self.name,
                      _format(partitions), exc)
            positioned = partitions
        if self._cooperative:
            consumer.incremental_assign(positioned)
        else:
            consumer.assign(positioned)
        self._assignment.update((tp.topic, tp.partition) for tp in positioned)
        try:
            self.policy.on_assigned(positioned)
        except Exception:  # noqa: BLE001
            LOG.exception("%s: commit policy failed on assignment", self.name)
        self._joined.set()

    def _start_positions(self, consumer: confluent_kafka.Consumer,
                         partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Committed offsets; for partitions without one, resolve the end (or start) and commit it."""
        committed = consumer.committed(partitions, timeout=self._op_timeout)
        fresh = [tp for tp in committed if tp.offset < 0]
        if fresh:
            spec = OFFSET_BEGINNING if self._earliest else OFFSET_END
            query = [TopicPartition(tp.topic, tp.partition, spec) for tp in fresh]
            resolved = {(tp.topic, tp.partition): tp
                        for tp in consumer.offsets_for_times(query, timeout=self._op_timeout)}
            for tp in fresh:
                found = resolved.get((tp.topic, tp.partition))
                if found is None or found.error is not None or found.offset < 0:
                    raise KafkaListenerError(f"no {('start' if self._earliest else 'end')} offset "
                                             f"for {tp.topic}[{tp.partition}]: "
                                             f"{found.error if found is not None else 'missing'}")
                tp.offset = found.offset
            consumer.commit(offsets=[TopicPartition(tp.topic, tp.partition, tp.offset) for tp in fresh],
                            asynchronous=False)
            LOG.debug("%s: first reader of %s; committed start positions", self.name, _format(fresh))
        return committed

    def _on_revoke(self, consumer: confluent_kafka.Consumer, partitions: list[TopicPartition]) -> None:
        self._give_up(partitions, lost=False)

    def _on_lost(self, consumer: confluent_kafka.Consumer, partitions: list[TopicPartition]) -> None:
        LOG.warning("%s: lost partitions %s (session timed out?)", self.name, _format(partitions))
        self._give_up(partitions, lost=True)

    def _give_up(self, partitions: list[TopicPartition], lost: bool) -> None:
        try:
            self.policy.on_revoke(partitions, lost)
        except Exception:  # noqa: BLE001
            LOG.exception("%s: commit policy failed on revoke", self.name)
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._assignment -= gone
        if self._backlog:  # not handed out, not committed: the next owner reads them
            self._backlog = [r for r in self._backlog if (r.topic(), r.partition()) not in gone]

    # -- errors ---------------------------------------------------------------
    def _on_error(self, err: KafkaError) -> None:
        self._last_error = err
        if err.fatal() or err.code() in PERMANENT_ERRORS:
            self._fatal = err
            LOG.error("%s: %s", self.name, err.str())
        else:
            self._errors.log(logging.WARNING, err.code(), "%s: %s", self.name, err.str())

    def _raise_if_fatal(self) -> None:
        if self._fatal is not None:
            raise KafkaListenerError(f"{self.name}: {self._fatal.str()}")

    def _record_error(self, err: KafkaError) -> None:
        """An error delivered as a record: raise what is permanent, log the rest."""
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            return
        self._last_error = err
        if err.fatal() or code in PERMANENT_ERRORS:
            raise KafkaListenerError(f"{self.name}: {err.str()}")
        self._errors.log(logging.WARNING, code, "%s: %s", self.name, err.str())

    # -- polling --------------------------------------------------------------
    def poll(self, timeout: float | None = None, max_messages: int = 1) -> list[IncomingMessage]:
        consumer = self._consumer
        if consumer is None:
            if self.stopped:
                return []
            raise MessagingException(f"{self.name}: poll() called before start()")
        limit = max_messages if max_messages < self._max_records else self._max_records
        if limit < 1:
            limit = 1
        deadline = None if timeout is None else time.monotonic() + timeout
        stopped = self._stopped.is_set
        with self._lock:
            while not stopped():
                if self._fatal is not None:
                    self._raise_if_fatal()
                if self._backlog:
                    records = self._backlog[:limit]
                    del self._backlog[:limit]
                else:
                    wait = self._slice
                    if deadline is not None:
                        left = deadline - time.monotonic()
                        if left < wait:
                            wait = left if left > 0 else 0
                    first = consumer.poll(wait)
                    if first is None:
                        if deadline is not None and time.monotonic() >= deadline:
                            return []
                        continue
                    if limit > 1:
                        records = consumer.consume(limit - 1, 0)
                        records.insert(0, first)
                    else:
                        records = [first]
                messages = self._process(records)
                if messages:
                    return messages
                if deadline is not None and time.monotonic() >= deadline:
                    return []
        return []

    def _process(self, records: list[Message]) -> list[IncomingMessage]:
        """Errors out, commit policy told, then decode; undecodable records are skipped."""
        good = records
        for record in records:
            if record.error() is not None:
                good = []
                for r in records:
                    err = r.error()
                    if err is None:
                        good.append(r)
                    else:
                        self._record_error(err)
                break
        if not good:
            return []
        policy = self.policy
        policy.on_polled(good)
        on_ack, on_requeue = policy.on_ack, policy.on_requeue
        out = []
        append = out.append
        decode = decode_notification
        for record in good:
            try:
                ctxt, message = decode(record.value())
            except DecodeError as exc:
                self._skip(record, exc)
                continue
            append(KafkaMessage(ctxt, message, record, on_ack, on_requeue))
        return out

    def _skip(self, record: Message, exc: Exception) -> None:
        self.skipped += 1
        LOG.warning("%s: skipping undecodable record %s[%d]@%d (%d bytes): %s", self.name,
                    record.topic(), record.partition(), record.offset(),
                    len(record.value() or b""), exc)
        try:
            self.policy.on_undecodable(record, exc)
        except Exception:  # noqa: BLE001
            LOG.exception("%s: commit policy failed on an undecodable record", self.name)

    # -- end --------------------------------------------------------------------
    def commit(self) -> None:
        if self._consumer is not None:
            self.policy.commit()

    def cleanup(self) -> None:
        """Stop, let a poll in progress return, then close the consumer (leaving the group)."""
        self._stopped.set()
        wait = self._op_timeout + 2 * STOP_CHECK_INTERVAL
        if not self._lock.acquire(timeout=wait):
            LOG.error("%s: a poll() is still running after %.1fs; consumer left open", self.name, wait)
            return
        try:
            self._close_consumer()
        finally:
            self._lock.release()
        self._errors.summarize()

    def _close_consumer(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        try:
            self.policy.on_close()
        except Exception:  # noqa: BLE001
            LOG.exception("%s: commit policy failed on close", self.name)
        try:
            consumer.close()
        except (KafkaException, RuntimeError) as exc:
            LOG.warning("%s: error while closing the consumer: %s", self.name, exc)
        self._assignment.clear()
        self._backlog = []


def _format(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]@{tp.offset}" for tp in partitions) or "none"
