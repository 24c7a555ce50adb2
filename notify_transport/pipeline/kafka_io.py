"""Kafka records of the ``notify_kafka`` source as Arrow, and its data-loss policy.

The planner lists partitions and offsets through the driver's
:class:`~notify_transport.drivers.kafka.cluster.ClusterAdmin`; executors read
offset ranges with the driver's
:class:`~notify_transport.reading.RangeReader` (assigned, no
consumer group, no commits), so the checkpoint alone says what was read and a
replay reads the same records.
"""
from __future__ import annotations

import logging
from typing import Mapping, Sequence

from notify_transport.drivers.kafka import ConsumedRecord, admin_properties as kafka_admin_properties
from notify_transport.exceptions import MessagingException

LOG = logging.getLogger(__name__)

#: Spark's Kafka ``timestampType``: 0 CreateTime, 1 LogAppendTime.
_TIMESTAMP_TYPES = {1: 0, 2: 1}


class KafkaReadError(MessagingException):
    """Records a micro-batch planned to read are gone or never arrive."""


def admin_properties(config: Mapping[str, str]) -> dict[str, str]:
    """The client properties for :class:`~notify_transport.drivers.kafka.cluster.ClusterAdmin`
    (consumer-only properties removed by the driver's properties builder)."""
    return kafka_admin_properties(config)


def record_batch(records: Sequence[ConsumedRecord], arrow_schema):
    """A ``pyarrow.RecordBatch`` of Spark's Kafka columns (key, value, topic, partition, offset,
    timestamp, timestampType) from records as :class:`~notify_transport.reading.RangeReader` reads them."""
    import pyarrow as pa

    stamps = [r.timestamp() for r in records]
    arrays = [
        pa.array([r.key() for r in records], pa.binary()),
        pa.array([r.value() for r in records], pa.binary()),
        pa.array([r.topic() for r in records], pa.string()),
        pa.array([r.partition() for r in records], pa.int32()),
        pa.array([r.offset() for r in records], pa.int64()),
        pa.array([ms * 1000 if kind else None for kind, ms in stamps], pa.int64()).cast(
            pa.timestamp("us", tz="UTC")),
        pa.array([_TIMESTAMP_TYPES.get(kind) for kind, _ in stamps], pa.int32()),
    ]
    return pa.RecordBatch.from_arrays([a.cast(f.type) for a, f in zip(arrays, arrow_schema)], schema=arrow_schema)


def report_data_loss(fail: bool, message: str) -> None:
    if fail:
        raise KafkaReadError(message + " (set failOnDataLoss=false to skip them)")
    LOG.warning("Data loss: %s", message)
