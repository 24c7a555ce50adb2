"""The Kafka driver's public types, in one place to import them from::

    from notify_transport.kafka import ListenerHooks, MessageId, StartPosition, merge
"""
from notify_transport.drivers.kafka import (KINDS, DeadLetter, KafkaDriver, ListenerHooks, MergedIterator,
                                            MessageId, PartitionConsumer, PartitionIterator, Reader, Record,
                                            StartPosition, merge, parse_start_position)

__all__ = ["DeadLetter", "KINDS", "KafkaDriver", "ListenerHooks", "MergedIterator", "MessageId",
           "PartitionConsumer", "PartitionIterator", "Reader", "Record", "StartPosition", "merge",
           "parse_start_position"]
