"""Where reading starts: message ids and start positions, resolved to offsets.

A :class:`MessageId` names one record; a :class:`StartPosition` says where a
listener or reader starts. :func:`resolve_offsets` turns a position into offsets
from what the brokers answer to ListOffsets, asked through
:meth:`~notify_transport.drivers.kafka.cluster.ClusterAdmin.offsets_at` (the one
place offsets are listed), rather than from a high watermark report.
"""
from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

from notify_transport.drivers.kafka.partitions import Partition
from notify_transport.exceptions import ConfigurationError
from notify_transport.times import TIME_HELP, epoch_seconds, parse_time

COMMITTED = "committed"
EARLIEST = "earliest"
LATEST = "latest"
OFFSET = "offset"
TIMESTAMP = "timestamp"
LAST = "last"
KINDS = (COMMITTED, EARLIEST, LATEST, OFFSET, TIMESTAMP, LAST)

#: ``list_offsets(partitions, spec)``: ListOffsets for ``spec`` (OFFSET_BEGINNING, OFFSET_END or a
#: time in ms) -> the offset per partition, -1 where no record is that recent (``ClusterAdmin.offsets_at``).
OffsetLister = Callable[[Sequence[Partition], int], Mapping[Partition, int]]


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

    ``kind`` is one of :data:`KINDS`; ``value`` is the offset (``offset``),
    the time in seconds since the epoch (``timestamp``) or how many records
    before the end (``last``), else None.
    """

    kind: str = COMMITTED
    value: float | int | None = None

    @property
    def overrides_committed(self) -> bool:
        """Whether this position replaces a pool's committed offset."""
        return self.kind != COMMITTED

    def __str__(self) -> str:
        if self.kind in (OFFSET, LAST):
            return f"{self.kind}:{self.value}"
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


def start_offset(position: StartPosition, low: int, high: int, at_time: int = -1) -> int:
    """The offset where ``position`` starts in a partition holding ``[low, high)``.

    An offset outside the range is clamped into it; ``at_time`` is the
    ListOffsets answer for a ``timestamp`` (-1: nothing that recent, so the end).
    """
    if position.kind == COMMITTED:
        raise ValueError("the committed position is the consumer group's to resolve")
    if position.kind == EARLIEST:
        return low
    if position.kind == LATEST:
        return high
    if position.kind == LAST:
        return max(low, high - int(position.value or 0))
    if position.kind == TIMESTAMP:
        return high if at_time < 0 else min(max(at_time, low), high)
    return min(max(int(position.value or 0), low), high)


def resolve_offsets(list_offsets: OffsetLister, partitions: list[TopicPartition], position: StartPosition,
                    offsets: Mapping[Partition, int] | None = None,
                    ends: Mapping[Partition, int] | None = None) -> list[TopicPartition]:
    """Concrete offsets where ``partitions`` start for ``position`` (not ``committed``), by
    :func:`start_offset` on what ``list_offsets`` answers.

    ``offsets`` may give an offset per ``(topic, partition)`` instead of
    ``position.value``; ``ends``, the end offsets the caller already listed.
    """
    if not partitions:
        return []
    if position.kind == COMMITTED:
        raise ValueError("the committed position is the consumer group's to resolve")
    keys = [(tp.topic, tp.partition) for tp in partitions]
    if position.kind == EARLIEST:
        starts = list_offsets(keys, OFFSET_BEGINNING)
        return [TopicPartition(t, p, starts[(t, p)]) for t, p in keys]
    if ends is None or any(key not in ends for key in keys):
        ends = list_offsets(keys, OFFSET_END)
    starts = {} if position.kind == LATEST else list_offsets(keys, OFFSET_BEGINNING)
    at = (list_offsets(keys, int(float(position.value or 0) * 1000)) if position.kind == TIMESTAMP else {})
    out = []
    for key in keys:
        wanted = (StartPosition(OFFSET, offsets[key]) if position.kind == OFFSET and offsets and key in offsets
                  else position)
        out.append(TopicPartition(key[0], key[1], start_offset(wanted, starts.get(key, 0), ends[key],
                                                               at.get(key, -1))))
    return out
