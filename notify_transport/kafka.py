"""The Kafka driver's public types, in one place to import them from::

    from notify_transport.kafka import ListenerHooks, MessageId, StartPosition, merge, read_topic
"""
from notify_transport.drivers.kafka import (KINDS, DeadLetter, KafkaDriver, ListenerHooks, MessageId, StartPosition,
                                            parse_start_position)
from notify_transport.reading import (MergedIterator, PartitionConsumer, PartitionIterator, Reader, Record, merge,
                                      open_reader, partition_consumer, read_topic)

__all__ = ["DeadLetter", "KINDS", "KafkaDriver", "ListenerHooks", "MergedIterator", "MessageId",
           "PartitionConsumer", "PartitionIterator", "Reader", "Record", "StartPosition", "merge",
           "open_reader", "parse_start_position", "partition_consumer", "read_topic"]
