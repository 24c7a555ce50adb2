"""``ntkafka://``: the oslo.messaging integration's scheme, accepted by notify_transport too.

A deployment that points oslo.messaging services at ``ntkafka://host:9092/vhost``
(:mod:`notify_transport.integrations.oslo_messaging`) can hand the same config
file to a service that imports notify_transport: this driver is the Kafka
driver under that name, reading the URL query the way the integration does.
A ``listener.<name>=<value>`` key, the old way to give every listener an
option, is read as ``<name>=<value>`` (the query sets every listener's
delivery options already) and logs a deprecation warning.
"""
from __future__ import annotations

import logging
from typing import Any, Iterable

from notify_transport.drivers.kafka.driver import KafkaDriver
from notify_transport.exceptions import InvalidTransportURL
from notify_transport.url import TransportURL

LOG = logging.getLogger(__name__)

#: The deprecated prefix of URL query keys that named listener options.
LISTENER_OPTION_PREFIX = "listener."


def driver_query(url: TransportURL) -> dict[str, str]:
    """The Kafka driver's query of an ``ntkafka://`` URL: ``listener.<name>`` keys read as ``<name>``."""
    query: dict[str, str] = {}
    aliases: dict[str, str] = {}
    for key, value in url.query.items():
        if key.startswith(LISTENER_OPTION_PREFIX):
            name = key[len(LISTENER_OPTION_PREFIX):]
            if not name:
                raise InvalidTransportURL(url.redacted(), f"Empty listener option name in {key!r}: "
                                          "write the option's name alone, <name>=<value>")
            aliases[name] = value
        else:
            query[key] = value
    for name, value in aliases.items():
        if name in query and query[name] != value:
            raise InvalidTransportURL(url.redacted(), f"{name!r} and {LISTENER_OPTION_PREFIX}{name!r} have "
                                      f"different values; keep {name!r} only")
        LOG.warning("%s: the query key %s%s is deprecated: write %s=... (the URL query sets every "
                    "listener's options)", url.redacted(), LISTENER_OPTION_PREFIX, name, name)
        query[name] = value
    return query


class NtKafkaSchemeDriver(KafkaDriver):
    """The Kafka driver registered as ``ntkafka``; see the module docstring."""

    name = "ntkafka"

    def __init__(self, conf: Any, url: TransportURL, default_exchange: str | None = None,
                 allowed_remote_exmods: Iterable[str] | None = None) -> None:
        kafka_url = TransportURL(url.conf, url.transport, url.virtual_host, url.hosts, driver_query(url))
        super().__init__(conf, kafka_url, default_exchange, allowed_remote_exmods)
