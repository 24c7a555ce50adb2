"""Reading Kafka topics without a consumer group, and the operator's pool requests, above the transport.

The Kafka driver carries a service's notifications; what reads a topic from a
position for a person or a job (``tail``, ``replay``'s plans, the Spark
source's ranges, tests checking what a topic holds) and what lists pools or
moves a pool's offsets (:mod:`.pools`) live here and reach the driver only
through its face, :mod:`notify_transport.drivers.kafka`. Each name is loaded
on first use: a Spark worker that only reads ranges does not import the
transport that :mod:`.of_transport` builds.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from notify_transport.drivers.face import lazy_names

if TYPE_CHECKING:
    from notify_transport.reading.of_transport import (kafka_driver, open_reader,  # noqa: F401
                                                       partition_consumer, read_topic)
    from notify_transport.reading.reader import (MergedIterator, PartitionConsumer,  # noqa: F401
                                                 PartitionIterator, RangeReader, Reader, Record, RecordsGone,
                                                 merge)

__all__, __getattr__ = lazy_names(__name__, __file__)
