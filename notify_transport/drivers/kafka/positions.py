"""Where reading starts: message ids and start positions, resolved to offsets.

A :class:`MessageId` names one record, ``(topic, partition, offset)``, as
Milvus's stream interface does. A :class:`StartPosition` says where a listener
or a reader starts: the pool's committed offset (listeners only), the
earliest or the latest offset, a given offset, or the first record at or
after a time. :func:`resolve_offsets` turns one into concrete offsets with
Kafka's ListOffsets request (``offsets_for_times``; the timestamps ``-2`` and
``-1`` mean earliest and latest in the protocol), so no broker's high
watermark report is trusted.
"""
from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Mapping, NamedTuple

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException, TopicPartition

from notify_transport.exceptions import ConfigurationError, MessagingException
from notify_transport.times import TIME_HELP, epoch_seconds, parse_time

COMMITTED = "committed"
EARLIEST = "earliest"
LATEST = "latest"
OFFSET = "offset"
TIMESTAMP = "timestamp"
KINDS = (COMMITTED, EARLIEST, LATEST, OFFSET, TIMESTAMP)


class MessageId(NamedTuple):
    """One record of a Kafka topic."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


@dataclasses.dataclass(frozen=True)
class StartPosition:
    """Where to start reading a partition.

    ``kind`` is one of :data:`KINDS`; ``value`` is the offset (``offset``) or
    the time in seconds since the epoch (``timestamp``), else None.
    """

    kind: str = COMMITTED
    value: float | int | None = None

    @property
    def overrides_committed(self) -> bool:
        """Whether this position replaces a pool's committed offset."""
        return self.kind != COMMITTED

    def __str__(self) -> str:
        if self.kind == OFFSET:
            return f"offset:{self.value}"
        if self.kind == TIMESTAMP:
            stamp = datetime.datetime.fromtimestamp(float(self.value or 0), datetime.timezone.utc)
            return f"time:{stamp.isoformat()}"
        return self.kind


def parse_start_position(value: Any) -> StartPosition:
    """A :class:`StartPosition` from what a user may write.

    Accepted: a StartPosition; None or ``"committed"``; ``"earliest"``;
    ``"latest"``; an int >= 0 or ``"offset:N"`` (an offset); a
    :class:`datetime.datetime` (naive means UTC) or ``"time:T"`` where T is
    what ``notify_transport.times.parse_time`` reads (ISO 8601, seconds
    since the epoch, or ``-1h``: that long before this call). A bare float is
    refused: it could be an offset or a time.
    """
    if isinstance(value, StartPosition):
        return value
    if value is None:
        return StartPosition(COMMITTED)
    if isinstance(value, bool):
        raise ConfigurationError(f"start_position {value!r} is not a position")
    if isinstance(value, int):
        return _offset(value)
    if isinstance(value, datetime.datetime):
        return StartPosition(TIMESTAMP, epoch_seconds(value))
    if isinstance(value, str):
        text = value.strip()
        lowered = text.lower()
        if lowered in (COMMITTED, EARLIEST, LATEST, ""):
            return StartPosition(lowered or COMMITTED)
        head, sep, rest = text.partition(":")
        if sep and head.lower() == OFFSET:
            try:
                return _offset(int(rest))
            except ValueError:
                raise ConfigurationError(f"start_position {value!r}: {rest!r} is not an offset") from None
        if sep and head.lower() in ("time", TIMESTAMP):
            return StartPosition(TIMESTAMP, _parse_time(rest, value))
    raise ConfigurationError(
        f"start_position {value!r} is not understood; use committed, earliest, latest, "
        f"an offset (int or 'offset:N') or a time (datetime or 'time:ISO-8601|epoch-seconds|-1h')")


def _offset(value: int) -> StartPosition:
    if value < 0:
        raise ConfigurationError(f"start_position offset must be >= 0, got {value}")
    return StartPosition(OFFSET, value)


def _parse_time(text: str, original: Any) -> float:
    try:
        return parse_time(text)
    except ConfigurationError:
        raise ConfigurationError(f"start_position {original!r}: {text.strip()!r} is not a time; "
                                 f"expected {TIME_HELP}") from None


def _list_offsets(consumer: Any, partitions: list[TopicPartition], spec: int,
                  timeout: float) -> dict[tuple[str, int], int]:
    """ListOffsets for ``spec`` (a time in ms, or OFFSET_BEGINNING / OFFSET_END)."""
    query = [TopicPartition(tp.topic, tp.partition, spec) for tp in partitions]
    try:
        found = consumer.offsets_for_times(query, timeout=timeout)
    except KafkaException as exc:
        raise MessagingException(f"cannot list offsets of {_names(partitions)}: "
                                 f"{exc.args[0].str()}") from None
    out = {}
    for tp in found:
        if tp.error is not None:
            raise MessagingException(f"cannot list offsets of {tp.topic}[{tp.partition}]: {tp.error}")
        out[(tp.topic, tp.partition)] = tp.offset
    return out


def resolve_offsets(consumer: Any, partitions: list[TopicPartition], position: StartPosition,
                    timeout: float = 10.0,
                    offsets: Mapping[tuple[str, int], int] | None = None) -> list[TopicPartition]:
    """Concrete offsets where ``partitions`` start for ``position`` (not ``committed``).

    An offset outside the partition's range is clamped into it; a time after
    the last record gives the end of the partition. ``offsets`` may give an
    offset per ``(topic, partition)`` instead of ``position.value``.
    """
    if not partitions:
        return []
    if position.kind == COMMITTED:
        raise ValueError("the committed position is the consumer group's to resolve")
    ends = _list_offsets(consumer, partitions, OFFSET_END, timeout)
    if position.kind == LATEST:
        wanted = ends
    else:
        starts = _list_offsets(consumer, partitions, OFFSET_BEGINNING, timeout)
        if position.kind == EARLIEST:
            wanted = starts
        elif position.kind == TIMESTAMP:
            at = _list_offsets(consumer, partitions, int(float(position.value or 0) * 1000), timeout)
            wanted = {key: (offset if offset >= 0 else ends[key]) for key, offset in at.items()}
        else:
            wanted = {}
            for key in starts:
                target = int(offsets[key]) if offsets and key in offsets else int(position.value or 0)
                wanted[key] = min(max(target, starts[key]), ends[key])
    return [TopicPartition(tp.topic, tp.partition, wanted[(tp.topic, tp.partition)])
            for tp in partitions]


def _names(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions)
