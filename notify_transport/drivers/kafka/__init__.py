"""The Kafka driver as the layers above it see it: the only module of the driver they import.

The CLI, the pipeline, the listeners and the integrations take what they need
from here (``from notify_transport.drivers.kafka import ClusterAdmin``), never
from the driver's own modules, so that the driver's inside can change
without reaching them (``tests/unit/test_layers.py`` holds them to it). A
name's module is imported on first use.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: What the layers above may use, and the module of the driver that defines it.
_HOMES = {
    "KafkaDriver": "driver",
    "GROUP": "options",
    "all_opts": "options",
    "delivery_opts": "options",
    "CA_FILE": "client_properties",
    "CERT_FILE": "client_properties",
    "CONSUMER": "client_properties",
    "KEY_FILE": "client_properties",
    "KEY_PASSWORD": "client_properties",
    "RDKAFKA_LOG": "client_properties",
    "SSL_OPTIONS": "client_properties",
    "admin_config": "client_properties",
    "admin_properties": "client_properties",
    "client_config": "client_properties",
    "reader_config": "client_properties",
    "NO_OFFSET": "cluster",
    "UNREACHABLE": "cluster",
    "ClusterAdmin": "cluster",
    "ClusterError": "cluster",
    "GroupInfo": "cluster",
    "Member": "cluster",
    "OffsetRange": "partitions",
    "Partition": "partitions",
    "EARLIEST": "positions",
    "KINDS": "positions",
    "LAST": "positions",
    "LATEST": "positions",
    "OFFSET": "positions",
    "TIMESTAMP": "positions",
    "MessageId": "positions",
    "StartPosition": "positions",
    "parse_start_position": "positions",
    "start_offset": "positions",
    "MergedIterator": "reader",
    "PartitionConsumer": "reader",
    "PartitionIterator": "reader",
    "RangeReader": "reader",
    "Reader": "reader",
    "Record": "reader",
    "merge": "reader",
    "ConsumedRecord": "message",
    "DeadLetter": "delivery.hooks",
    "ListenerHooks": "delivery.hooks",
    "EXTRA_KEYWORDS": "delivery.settings",
    "OPTION_NAMES": "delivery.settings",
    "listener_settings": "delivery.settings",
    "side_templates": "delivery.settings",
    "topic_name": "delivery.settings",
}
__all__ = sorted(_HOMES)

if TYPE_CHECKING:  # the same names, for type checkers (tests/unit/test_layers.py compares)
    from notify_transport.drivers.kafka.driver import KafkaDriver  # noqa: F401
    from notify_transport.drivers.kafka.options import GROUP, all_opts, delivery_opts  # noqa: F401
    from notify_transport.drivers.kafka.client_properties import CA_FILE, CERT_FILE, CONSUMER, KEY_FILE, KEY_PASSWORD, RDKAFKA_LOG, SSL_OPTIONS, admin_config, admin_properties, client_config, reader_config  # noqa: F401
    from notify_transport.drivers.kafka.cluster import NO_OFFSET, UNREACHABLE, ClusterAdmin, ClusterError, GroupInfo, Member  # noqa: F401
    from notify_transport.drivers.kafka.partitions import OffsetRange, Partition  # noqa: F401
    from notify_transport.drivers.kafka.positions import EARLIEST, KINDS, LAST, LATEST, OFFSET, TIMESTAMP, MessageId, StartPosition, parse_start_position, start_offset  # noqa: F401
    from notify_transport.drivers.kafka.reader import MergedIterator, PartitionConsumer, PartitionIterator, RangeReader, Reader, Record, merge  # noqa: F401
    from notify_transport.drivers.kafka.message import ConsumedRecord  # noqa: F401
    from notify_transport.drivers.kafka.delivery.hooks import DeadLetter, ListenerHooks  # noqa: F401
    from notify_transport.drivers.kafka.delivery.settings import EXTRA_KEYWORDS, OPTION_NAMES, listener_settings, side_templates, topic_name  # noqa: F401


def __getattr__(name: str) -> Any:
    """Import a name's module on first use: importing the package stays cheap."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
