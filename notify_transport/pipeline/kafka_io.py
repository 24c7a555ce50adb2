"""confluent-kafka calls of the ``notify_kafka`` source: metadata, offsets, reading a range.

The planner lists partitions and offsets through the driver's
:class:`~notify_transport.drivers.kafka.cluster.ClusterAdmin`;
executors read one offset range each with a consumer that ``assign()``s the
partition at an explicit offset: no consumer group, no commits, so the
checkpoint alone says what was read and a replay reads the same records.
"""
from __future__ import annotations

import logging
import time
from typing import Iterator, Mapping, cast

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from notify_transport.drivers.kafka import client_properties
from notify_transport.exceptions import MessagingException
from notify_transport.pipeline.offsets import OffsetRange

LOG = logging.getLogger(__name__)

#: Spark's Kafka ``timestampType``: 0 CreateTime, 1 LogAppendTime.
_TIMESTAMP_TYPES = {1: 0, 2: 1}


class KafkaReadError(MessagingException):
    """Records a micro-batch planned to read are gone or never arrive."""


def admin_properties(config: Mapping[str, str]) -> dict[str, str]:
    """The client properties for :class:`~notify_transport.drivers.kafka.cluster.ClusterAdmin`
    (consumer-only properties removed by the driver's properties builder)."""
    return client_properties.admin_properties(config)


def consumer_config(config: Mapping[str, str]) -> dict[str, str | bool]:
    """Properties of a reader that assigns partitions itself and commits nothing."""
    return {
        "group.id": "notify-transport-pipeline",  # required by the client; never joined
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",  # a planned offset that is gone is an error, not a jump
        **config,
    }


def read_range(config: Mapping[str, str], offset_range: OffsetRange, arrow_schema,
               batch_size: int = 10000, poll_timeout: float = 120.0,
               fail_on_data_loss: bool = True) -> Iterator:
    """Yield ``pyarrow.RecordBatch`` es of the records in ``offset_range``, in offset order.

    Columns are Spark's Kafka columns (key, value, topic, partition, offset,
    timestamp, timestampType). Stops at the range end; offsets missing inside
    the range (compaction, transaction markers) are skipped. Raises
    :class:`KafkaReadError` when records before the end cannot be read within
    ``poll_timeout`` seconds or were deleted, unless ``fail_on_data_loss`` is
    false, in which case the loss is logged with its coordinates.
    """
    import pyarrow as pa

    topic, partition, start, end = offset_range[:4]
    consumer = Consumer(consumer_config(config))
    try:
        low, high = consumer.get_watermark_offsets(KafkaTopicPartition(topic, partition),
                                                   timeout=poll_timeout, cached=False)
        if start < low:
            if not offset_range.from_earliest:
                report_data_loss(fail_on_data_loss,
                                 f"{topic}[{partition}] offsets {start}..{min(low, end) - 1} "
                                 f"were deleted before they were read (earliest is now {low})")
            start = low
        if start >= end:
            return
        consumer.assign([KafkaTopicPartition(topic, partition, start)])
        position = start
        deadline = time.monotonic() + poll_timeout
        columns: tuple[list, ...] = ([], [], [], [])  # key, value, offset, timestamp(us)
        ts_types: list = []
        while position < end:
            messages = consumer.consume(min(batch_size, end - position), timeout=min(1.0, poll_timeout))
            progressed = False
            for msg in messages:
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        eof = msg.offset()  # the end offset, on an EOF event
                        if eof is not None:
                            position = max(position, eof)
                    elif error.fatal() or error.code() == KafkaError._AUTO_OFFSET_RESET:
                        raise KafkaException(error)
                    else:  # librdkafka retries by itself; the deadline bounds the wait
                        LOG.warning("Reading %s[%d] at %d: %s", topic, partition, position, error)
                    continue
                offset = cast(int, msg.offset())  # set on every record without an error
                if offset >= end:
                    position = end
                    break
                ts_type, ts_ms = msg.timestamp()
                columns[0].append(msg.key())
                columns[1].append(msg.value())
                columns[2].append(offset)
                columns[3].append(ts_ms * 1000 if ts_type else None)
                ts_types.append(_TIMESTAMP_TYPES.get(ts_type))
                position = offset + 1
                progressed = True
            if len(columns[2]) >= batch_size:
                yield _record_batch(topic, partition, columns, ts_types, arrow_schema, pa)
                columns, ts_types = ([], [], [], []), []
            if progressed:
                deadline = time.monotonic() + poll_timeout
            elif position < end:
                position = max(position, _position(consumer, topic, partition))
                if position < end and time.monotonic() > deadline:
                    report_data_loss(fail_on_data_loss,
                                     f"{topic}[{partition}] offsets {position}..{end - 1} did not arrive "
                                     f"within {poll_timeout:g}s (broker high watermark {high})")
                    break
        if columns[2]:
            yield _record_batch(topic, partition, columns, ts_types, arrow_schema, pa)
    finally:
        _close(consumer)


def _close(consumer: Consumer) -> None:
    # Closing must never hide the outcome of the read; it commits nothing anyway.
    try:
        consumer.close()
    except KafkaException as exc:
        LOG.debug("Closing the reader failed: %s", exc)


def _record_batch(topic: str, partition: int, columns: tuple[list, ...], ts_types: list,
                  arrow_schema, pa):
    keys, values, offsets, timestamps = columns
    n = len(offsets)
    arrays = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(timestamps, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array(ts_types, pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(
        [a.cast(f.type) for a, f in zip(arrays, arrow_schema)], schema=arrow_schema)


def _position(consumer: Consumer, topic: str, partition: int) -> int:
    (tp,) = consumer.position([KafkaTopicPartition(topic, partition)])
    return tp.offset if tp.offset >= 0 else -1


def report_data_loss(fail: bool, message: str) -> None:
    if fail:
        raise KafkaReadError(message + " (set failOnDataLoss=false to skip them)")
    LOG.warning("Data loss: %s", message)
