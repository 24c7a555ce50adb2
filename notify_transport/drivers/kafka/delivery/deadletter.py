"""Retry and dead-letter records: their headers, and the producer that sends them.

A copy keeps the original key, value and headers and gains the ``nt-*``
headers listed in doc/source/delivery.rst. They inform people and tools only:
where a copy goes is decided by the topic and the listener's configuration,
never by a header anyone can set. The original offset is committed only once
the copy is confirmed, so :class:`SideProducer` reports each delivery.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

from confluent_kafka import KafkaError, KafkaException

from notify_transport.drivers import threads
from notify_transport.drivers.kafka.message import ConsumedRecord
from notify_transport.drivers.kafka.producer import KafkaProducer
from notify_transport.drivers.reporting import RateLimitedLog
from notify_transport.exceptions import MessageDeliveryFailure

LOG = logging.getLogger(__name__)

ORIGINAL_TOPIC = "nt-original-topic"
ORIGINAL_PARTITION = "nt-original-partition"
ORIGINAL_OFFSET = "nt-original-offset"
ATTEMPTS = "nt-attempts"
ERROR = "nt-error"
POOL = "nt-pool"
OUR_HEADERS = frozenset({ORIGINAL_TOPIC, ORIGINAL_PARTITION, ORIGINAL_OFFSET, ATTEMPTS, ERROR, POOL})
#: Longest error text kept in a header.
MAX_ERROR_LENGTH = 2000
REQUEUED = "requeued"

#: How often a failed delivery of a retry / dead-letter copy is sent again.
RESEND_ATTEMPTS = 3
#: Seconds a send waits for room in a full local queue before failing.
QUEUE_WAIT = 10.0


def header(headers: list[tuple[str, bytes]] | None, name: str) -> bytes | None:
    """The last value of header ``name``, or None."""
    found = None
    for key, value in headers or ():
        if key == name:
            found = value
    return found


def attempts_of(record: ConsumedRecord) -> int:
    """Processing attempts already made before this delivery of ``record`` (0 for a fresh one)."""
    raw = header(record.headers(), ATTEMPTS)
    try:
        return max(0, int(raw)) if raw is not None else 0
    except ValueError:
        return 0


def origin_of(record: ConsumedRecord) -> tuple[str, int, int]:
    """``(topic, partition, offset)`` where ``record`` was first read."""
    headers = record.headers()
    topic = header(headers, ORIGINAL_TOPIC)
    partition = header(headers, ORIGINAL_PARTITION)
    offset = header(headers, ORIGINAL_OFFSET)
    if topic is not None and partition is not None and offset is not None:
        try:
            return topic.decode("utf-8", "replace"), int(partition), int(offset)
        except ValueError:
            pass
    return record.topic(), record.partition(), record.offset()


def error_text(error: BaseException | str | None) -> str:
    """What ``nt-error`` says."""
    if error is None:
        text = REQUEUED
    elif isinstance(error, BaseException):
        text = f"{type(error).__name__}: {error}"
    else:
        text = str(error)
    return text[:MAX_ERROR_LENGTH]


def copy_headers(record: ConsumedRecord, attempts: int, error: str, pool: str,
                 origin: tuple[str, int, int] | None = None) -> list[tuple[str, bytes]]:
    """The record's own headers with ours set for a retry or dead-letter copy.

    ``origin`` is where the record was first read (default: what its headers
    say, see :func:`origin_of`); a caller that read the record from a main
    topic passes the record's own coordinates, so forged headers are replaced.
    """
    topic, partition, offset = origin if origin is not None else origin_of(record)
    kept = [(k, v) for k, v in (record.headers() or ()) if k not in OUR_HEADERS]
    return kept + [(ORIGINAL_TOPIC, topic.encode()), (ORIGINAL_PARTITION, str(partition).encode()),
                   (ORIGINAL_OFFSET, str(offset).encode()), (ATTEMPTS, str(attempts).encode()),
                   (ERROR, error.encode("utf-8", "replace")), (POOL, pool.encode("utf-8", "replace"))]


Done = Callable[[KafkaError | None], None]


class _Delivery:
    """Delivery callback of one copy: resend what a resend can fix, then report."""

    __slots__ = ("owner", "topic", "on_done", "left")

    def __init__(self, owner: "SideProducer", topic: str, on_done: Done) -> None:
        self.owner = owner
        self.topic = topic
        self.on_done = on_done
        self.left = RESEND_ATTEMPTS

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        owner = self.owner
        if err is not None and self.left > 0 and not owner.closed and not err.fatal():
            self.left -= 1
            owner.failures.log(logging.WARNING, (self.topic, err.code()),
                               "Copy to Kafka topic %s failed (%s); sending again", self.topic, err.str())
            try:
                # no waiting for room inside a delivery callback
                owner.client.produce(self.topic, msg.value(), msg.key(), msg.headers(), self,
                                     wait=False)
                return
            except (BufferError, KafkaException, TypeError, ValueError) as exc:
                LOG.error("Could not send a copy to Kafka topic %s again: %s", self.topic, exc)
        owner.settled(self, err)


class SideProducer:
    """One producer per listener for retry and dead-letter copies, every delivery reported.

    On :class:`~notify_transport.drivers.kafka.producer.KafkaProducer`; reports are served by
    :meth:`serve` (the polling thread), by sends waiting for room and by :meth:`flush`.
    """

    def __init__(self, config: dict[str, Any], name: str) -> None:
        config = dict(config)
        # each copy's success must be reported: only then is its original committed
        config["delivery.report.only.error"] = False
        self.name = name
        self._lock = threads.Lock()
        self._pending = 0
        self.closed = False
        self.failures = RateLimitedLog(LOG)
        self.client = KafkaProducer(config, f"{name} (retry/dead-letter copies)", self._unexpected,
                                    self._lost, QUEUE_WAIT, background=False, unit="copy")

    @property
    def pending(self) -> int:
        """Copies sent and not yet confirmed or failed."""
        return self._pending

    def send(self, topic: str, value: Any, key: Any, headers: list[tuple[str, bytes]],
             on_done: Done) -> None:
        """Send one copy; ``on_done(None)`` once confirmed, ``on_done(error)`` if it failed for good.

        A copy that cannot even be queued is reported at once through ``on_done``.
        """
        delivery = _Delivery(self, topic, on_done)
        with self._lock:
            self._pending += 1
        try:
            if self.closed:
                raise KafkaException(KafkaError(KafkaError._DESTROY, "producer closed"))
            self.client.produce(topic, value, key, headers, delivery)
        except (BufferError, KafkaException, TypeError, ValueError, MessageDeliveryFailure) as exc:
            err = exc.args[0] if isinstance(exc, KafkaException) else KafkaError(
                KafkaError._QUEUE_FULL if isinstance(exc, BufferError) else KafkaError._INVALID_ARG,
                str(exc))
            self.settled(delivery, err)

    def settled(self, delivery: _Delivery, err: KafkaError | None) -> None:
        with self._lock:
            self._pending -= 1
        if err is not None:
            self.failures.log(logging.ERROR, (delivery.topic, err.code()),
                              "%s: copy to Kafka topic %s failed: %s", self.name, delivery.topic,
                              err.str())
        try:
            delivery.on_done(err)
        except Exception:  # noqa: BLE001 - a delivery callback must not break poll()
            LOG.exception("%s: delivery callback for topic %s failed", self.name, delivery.topic)

    def _unexpected(self, err: KafkaError | None, msg: Any) -> None:
        """Every copy has its own callback; a report without one is a bug worth seeing."""
        LOG.error("%s: delivery report for a copy without a callback (topic %s): %s", self.name,
                  msg.topic(), err.str() if err is not None else "delivered")

    def _lost(self, count: int) -> None:
        """Copies a replaced client never reported: their originals stay uncommitted."""
        with self._lock:
            self._pending -= count

    def serve(self) -> None:
        """Run the delivery callbacks that are due (non-blocking)."""
        if self._pending:
            self.client.poll(0)

    def flush(self, timeout: float) -> int:
        """Wait up to ``timeout`` for every copy to be confirmed; return how many are pending."""
        deadline = time.monotonic() + max(0.0, timeout)
        while self._pending:
            self.client.flush(max(0.0, min(0.1, deadline - time.monotonic())))
            if time.monotonic() >= deadline or not self.client.pending:
                break
        return self._pending

    def close(self, timeout: float) -> int:
        """Flush for up to ``timeout``, then drop the producer; return how many copies were lost."""
        left = self.flush(timeout)
        self.closed = True
        if left:
            LOG.error("%s: %d retry/dead-letter copies were not confirmed within %.1fs; their "
                      "original records stay uncommitted and will be delivered again", self.name,
                      left, timeout)
        self.client.close(0)
        self.failures.summarize()
        return left
