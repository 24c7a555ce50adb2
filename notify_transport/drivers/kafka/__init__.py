"""The Kafka driver as the layers above it see it: the only module of the driver they import.

The CLI, the pipeline, the group-less readers (:mod:`notify_transport.reading`),
the listeners and the integrations take what they need
from here (``from notify_transport.drivers.kafka import ClusterAdmin``), never
from the driver's own modules, so that the driver's inside can change
without reaching them (``tests/unit/test_layers.py`` holds them to it). A
name's module is imported on first use.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from notify_transport.drivers.face import lazy_names

if TYPE_CHECKING:  # the face: what the layers above may use (read by lazy_names too)
    from notify_transport.drivers.kafka.driver import KafkaDriver  # noqa: F401
    from notify_transport.drivers.kafka.options import GROUP, all_opts, delivery_opts  # noqa: F401
    from notify_transport.drivers.kafka.client_properties import (  # noqa: F401
        CA_FILE, CERT_FILE, CONSUMER, KEY_FILE, KEY_PASSWORD, RDKAFKA_LOG, SSL_OPTIONS, admin_config,
        admin_properties, client_config, reader_config, without_group)
    from notify_transport.drivers.kafka.cluster import (  # noqa: F401
        NO_OFFSET, UNREACHABLE, ClusterAdmin, ClusterError, GroupInfo, Member)
    from notify_transport.drivers.kafka.partitions import OffsetRange, Partition, partitions_in  # noqa: F401
    from notify_transport.drivers.kafka.positions import (  # noqa: F401
        COMMITTED, EARLIEST, KINDS, LAST, LATEST, OFFSET, TIMESTAMP, MessageId, StartPosition, parse_start_position,
        resolve_offsets, start_offset)
    from notify_transport.drivers.kafka.message import ConsumedRecord  # noqa: F401
    from notify_transport.drivers.kafka.delivery.hooks import DeadLetter, ListenerHooks  # noqa: F401
    from notify_transport.drivers.kafka.delivery.settings import (  # noqa: F401
        EXTRA_KEYWORDS, OPTION_NAMES, listener_settings, side_templates, topic_name)


__all__, __getattr__ = lazy_names(__name__, __file__)
