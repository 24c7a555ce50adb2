"""The Kafka driver's public types, in one place to import them from::

    from notify_transport.kafka import ListenerHooks, MessageId, StartPosition, merge
"""
from notify_transport.drivers.kafka.driver import KafkaDriver
from notify_transport.drivers.kafka.delivery.hooks import DeadLetter, ListenerHooks
from notify_transport.drivers.kafka.positions import KINDS, MessageId, StartPosition, parse_start_position
from notify_transport.drivers.kafka.reader import (MergedIterator, PartitionConsumer, PartitionIterator, Reader,
                                                   Record, merge)

__all__ = ["DeadLetter", "KINDS", "KafkaDriver", "ListenerHooks", "MergedIterator", "MessageId",
           "PartitionConsumer", "PartitionIterator", "Reader", "Record", "StartPosition", "merge",
           "parse_start_position"]
