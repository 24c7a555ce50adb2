"""Reading Kafka topics without a consumer group, and the operator's pool requests, above the transport.

The Kafka driver carries a service's notifications; what reads a topic from a
position for a person or a job (``tail``, ``replay``'s plans, the Spark
source's ranges, tests checking what a topic holds) and what lists pools or
moves a pool's offsets (:mod:`.pools`) live here and reach the driver only
through its face, :mod:`notify_transport.drivers.kafka`.
"""
from notify_transport.reading.of_transport import kafka_driver, open_reader, partition_consumer, read_topic
from notify_transport.reading.reader import (MergedIterator, PartitionConsumer, PartitionIterator, RangeReader,
                                             Reader, Record, RecordsGone, merge)

__all__ = ["MergedIterator", "PartitionConsumer", "PartitionIterator", "RangeReader", "Reader", "Record",
           "RecordsGone", "kafka_driver", "merge", "open_reader", "partition_consumer", "read_topic"]
