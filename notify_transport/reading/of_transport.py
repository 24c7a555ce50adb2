"""Readers of a Kafka transport's topics: its brokers, credentials and TLS, no consumer group.

Services send and listen through the transport; tests, the command-line tool
and scripts also read what a topic holds, from a position, without joining a
pool or committing anything. These functions make such readers from a
transport (or its Kafka driver), so they connect the way it does.
"""
from __future__ import annotations

from typing import Any

from notify_transport.drivers.kafka import KafkaDriver, StartPosition, parse_start_position, reader_config
from notify_transport.exceptions import ConfigurationError
from notify_transport.reading.reader import MergedIterator, PartitionConsumer, Reader, merged_topic


def kafka_driver(transport: Any) -> KafkaDriver:
    """The Kafka driver of ``transport`` (or ``transport`` itself, when it is that driver)."""
    driver = getattr(transport, "driver", transport)
    if not isinstance(driver, KafkaDriver):
        raise ConfigurationError(f"reading topics needs a Kafka transport (kafka:// or ntkafka://), "
                                 f"not {driver!r}")
    return driver


def partition_consumer(transport: Any, topic: str, partition: int = 0,
                       start: StartPosition | Any = "latest") -> PartitionConsumer:
    """A consumer of one partition of Kafka topic ``topic`` (a full Kafka topic name, e.g. from
    ``driver.kafka_topics()``), with ``seek()`` and ``latest_message_id()``."""
    driver = kafka_driver(transport)
    return PartitionConsumer(reader_config(driver.url, driver.opts), topic, partition,
                             parse_start_position(start), name=f"reader {topic}[{partition}]")


def open_reader(transport: Any, name: str = "reader") -> Reader:
    """A :class:`~notify_transport.kafka.Reader`: many partitions, one client, no consumer group."""
    driver = kafka_driver(transport)
    return Reader(reader_config(driver.url, driver.opts), name, timeout=driver.admin.timeout, admin=driver.admin)


def read_topic(transport: Any, topic: str, start: StartPosition | Any = "earliest",
               until_end: bool = True, buffer: int = 1000) -> MergedIterator:
    """Iterate over every partition of Kafka topic ``topic`` from ``start``, merged; with
    ``until_end`` the iteration ends at the end the partitions had when it began."""
    driver = kafka_driver(transport)
    return merged_topic(reader_config(driver.url, driver.opts), topic, parse_start_position(start),
                        until_end=until_end, buffer=buffer, timeout=driver.admin.timeout)
