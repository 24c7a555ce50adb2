"""The operator's hold on pools: which pools a cluster has, and moving a pool's committed offsets.

A service's listener never needs either: it describes its own pool and reads
its own positions through the driver's
:class:`~notify_transport.drivers.kafka.ClusterAdmin`. ``lag`` lists every
pool and ``replay`` rewrites one's offsets; those two requests live here,
above the driver, so that a transport can never move a pool's positions.
"""
from __future__ import annotations

from typing import Mapping

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from notify_transport.drivers.kafka import ClusterAdmin, ClusterError, Partition


class PoolAdmin(ClusterAdmin):
    """:class:`ClusterAdmin` plus the two pool requests only the operator commands make."""

    def pools(self) -> list[str]:
        """The consumer groups the cluster knows, sorted."""
        future = self.client().list_consumer_groups(request_timeout=self.timeout)
        return sorted(group.group_id for group in self.answer(future, "listing consumer groups").valid)

    def commit(self, pool: str, offsets: Mapping[Partition, int]) -> None:
        """Store ``offsets`` as ``pool``'s positions; Kafka takes them only while the pool has no members."""
        if not offsets:
            return
        request = ConsumerGroupTopicPartitions(
            pool, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
        futures = self.client().alter_consumer_group_offsets([request], request_timeout=self.timeout)
        result = self.answer(futures[pool], f"committing offsets of pool {pool!r}")
        failed = [f"{tp.topic}[{tp.partition}]: {tp.error.str()}"
                  for tp in result.topic_partitions or [] if tp.error is not None]
        if failed:
            raise ClusterError(f"the broker refused the new offsets of pool {pool!r}: " + "; ".join(failed))
