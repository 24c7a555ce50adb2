"""Records read from a listener's consumer and not yet handed out.

A take is one record waited for and the rest of what the client already has,
up to the take's limit; records read while joining, or left over, wait in the
backlog. Two things can make a record belong to no one: its partition was
revoked between two reads (it is left to the next owner), or handing it out
failed (the consumer is rewound so that it is read again).
"""
from __future__ import annotations

import logging
from typing import Any, cast

import confluent_kafka
from confluent_kafka import KafkaException, Message, TopicPartition

from notify_transport.drivers.kafka.delivery.counters import DeliveryCounters
from notify_transport.drivers.kafka.membership import GroupMembership
from notify_transport.drivers.kafka.message import ConsumedRecord
from notify_transport.drivers.kafka.partitions import Partition, format_offsets

LOG = logging.getLogger(__name__)


class Fetcher:
    """Reads takes for one listener; :attr:`backlog` holds what was read and not handed out."""

    def __init__(self, name: str, membership: GroupMembership, counters: DeliveryCounters) -> None:
        self.name = name
        self.membership = membership
        self.counters = counters
        self.backlog: list[Message] = []

    def take(self, consumer: confluent_kafka.Consumer, wait: float, limit: int) -> list[Message] | None:
        """Up to ``limit`` records: from the backlog, else one waited for (up to ``wait`` seconds)
        and the rest the client holds. None: nothing came; an empty list: what came was stale."""
        backlog = self.backlog
        if backlog:
            records = backlog[:limit]
            del backlog[:limit]
            return records
        first = consumer.poll(wait)
        if first is None:
            return None
        return self._take_rest(consumer, first, limit) if limit > 1 else [first]

    def _take_rest(self, consumer: confluent_kafka.Consumer, first: Message, limit: int) -> list[Message]:
        """``first`` and up to ``limit - 1`` records more, without waiting.

        ``first`` came from an earlier ``consume()``; if its partition was revoked since, it
        belongs to the old assignment, and handing it out would dispatch it twice and could
        move the next owner's commit back. It is left out uncommitted: the next reader reads
        it from the committed offset.
        """
        with self.membership.watching() as gone:
            rest = consumer.consume(limit - 1, 0)
        if gone and first.error() is None and (first.topic(), first.partition()) in gone:
            self.counters.stale.incr()
            LOG.debug("%s: %s[%d]@%d left to its next reader: its partition was revoked before it "
                      "was handed out", self.name, first.topic(), first.partition(), first.offset())
            return rest
        rest.insert(0, first)
        return rest

    def drop(self, gone: set[Partition]) -> None:
        """Partitions revoked or lost: their records are left to the next owner (nothing committed them)."""
        if self.backlog:
            self.backlog = [r for r in self.backlog if (r.topic(), r.partition()) not in gone]

    def rewind(self, consumer: Any, records: list[Message],
               ready: list[ConsumedRecord]) -> list[ConsumedRecord]:
        """Seek back to where ``records`` began in each partition, after handing them out failed;
        return what is left of ``ready`` (decoded later) once those partitions' records are gone.

        The client's position is already past them, so without this a caller that polls again
        (as the server does after logging the error) would never see them: the next poll reads
        them again instead. The records held back behind them go too; they are read again.
        """
        first: dict[Partition, int] = {}
        taken = [r for r in (*records, *self.backlog) if r.error() is None]
        for record in [*cast("list[ConsumedRecord]", taken), *ready]:
            key = (record.topic(), record.partition())
            offset = record.offset()
            if key not in first or offset < first[key]:
                first[key] = offset
        self.backlog = [r for r in self.backlog if (r.topic(), r.partition()) not in first]
        for (topic, partition), offset in first.items():
            position = TopicPartition(topic, partition, offset)
            try:
                consumer.seek(position)
            except KafkaException as exc:  # no longer assigned: its next owner starts at the commit
                LOG.warning("%s: could not rewind %s after a failed hand-out: %s", self.name,
                            format_offsets([position]), exc)
            else:
                LOG.warning("%s: handing out failed; %s will be read again", self.name, format_offsets([position]))
        return [r for r in ready if (r.topic(), r.partition()) not in first]
