"""Partitions and offset ranges: one name for each, and one way to write them in a message.

A partition is ``(topic, number)`` everywhere above confluent-kafka's own
``TopicPartition``; a range of records is an :class:`OffsetRange`. Log lines and
errors write a partition ``topic[number]`` and a position in it
``topic[number]@offset``, as :class:`~notify_transport.drivers.kafka.positions.MessageId` does.
"""
from __future__ import annotations

from typing import Any, Iterable, NamedTuple

#: One partition of one topic: ``(topic, partition number)``.
Partition = tuple[str, int]


class OffsetRange(NamedTuple):
    """Records ``[start, end)`` of one partition (a reader's range, a Spark input partition)."""

    topic: str
    partition: int
    start: int
    end: int
    #: the partition appeared after a streaming query started: read from its earliest record
    from_earliest: bool = False

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def format_partitions(partitions: Iterable[Any]) -> str:
    """``topic[p], ...`` of confluent-kafka ``TopicPartition`` objects or ``(topic, partition)``
    pairs (:data:`Partition`), for log lines and errors."""
    return ", ".join(f"{tp[0]}[{tp[1]}]" if isinstance(tp, tuple) else f"{tp.topic}[{tp.partition}]"
                     for tp in partitions) or "none"


def format_offsets(partitions: Iterable[Any]) -> str:
    """``topic[p]@offset, ...`` of confluent-kafka ``TopicPartition`` objects (positions, commits)."""
    return ", ".join(f"{tp.topic}[{tp.partition}]@{tp.offset}" for tp in partitions) or "none"


def partitions_in(metadata: Any, topics: Iterable[str]) -> tuple[list[Partition], list[str]]:
    """The partitions of those of ``topics`` that a cluster's metadata (``list_topics()`` of
    any client) shows, and the names of the others (absent, in error, or without partitions)."""
    found: list[Partition] = []
    missing: list[str] = []
    for name in topics:
        topic = metadata.topics.get(name)
        if topic is None or topic.error is not None or not topic.partitions:
            missing.append(name)
        else:
            found.extend((name, p) for p in sorted(topic.partitions))
    return found, missing
