"""``ntkafka://``: the oslo.messaging integration's scheme, accepted by notify_transport too.

A deployment that points oslo.messaging services at ``ntkafka://host:9092/vhost``
(:mod:`notify_transport.integrations.oslo_messaging`) can hand the same config
file to a service that imports notify_transport: this driver is the Kafka
driver under that name, reading the URL query the way the integration does,
``listener.<name>=<value>`` keys being default listener options (explicit
keyword options of ``listen_for_notifications`` win over them).
"""
from __future__ import annotations

import re
from typing import Any, Iterable

from notify_transport.drivers.base import Listener
from notify_transport.drivers.kafka.driver import KafkaDriver
from notify_transport.exceptions import InvalidTransportURL
from notify_transport.target import Target
from notify_transport.url import TransportURL

#: URL query keys starting with this are listener options, not driver options.
LISTENER_OPTION_PREFIX = "listener."
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")


def listener_option_value(text: str) -> Any:
    """``true``/``false`` -> bool, ``12`` -> int, ``0.5`` -> float, anything else as given."""
    stripped = text.strip()
    if stripped.lower() in ("true", "false"):
        return stripped.lower() == "true"
    if _INT.fullmatch(stripped):
        return int(stripped)
    if _FLOAT.fullmatch(stripped):
        return float(stripped)
    return text


def split_listener_options(url: TransportURL) -> tuple[dict[str, str], dict[str, Any]]:
    """(driver query, listener options) of an ``ntkafka://`` URL's query."""
    query: dict[str, str] = {}
    listener_options: dict[str, Any] = {}
    for key, value in url.query.items():
        if key.startswith(LISTENER_OPTION_PREFIX):
            name = key[len(LISTENER_OPTION_PREFIX):]
            if not name:
                raise InvalidTransportURL(url.redacted(), f"Empty listener option name in {key!r}: "
                                          "use listener.<name>=<value>")
            listener_options[name] = listener_option_value(value)
        else:
            query[key] = value
    return query, listener_options


class NtKafkaDriver(KafkaDriver):
    """The Kafka driver registered as ``ntkafka``; see the module docstring."""

    name = "ntkafka"

    def __init__(self, conf: Any, url: TransportURL, default_exchange: str | None = None,
                 allowed_remote_exmods: Iterable[str] | None = None) -> None:
        query, self._url_listener_options = split_listener_options(url)
        kafka_url = TransportURL(url.conf, url.transport, url.virtual_host, url.hosts, query)
        super().__init__(conf, kafka_url, default_exchange, allowed_remote_exmods)

    def listen_for_notifications(self, targets_and_priorities: list[tuple[Target, str]],
                                 pool: str | None, batch_size: int = 1,
                                 batch_timeout: float | None = None, **options: Any) -> Listener:
        merged = {**self._url_listener_options, **options}
        return super().listen_for_notifications(targets_and_priorities, pool, batch_size,
                                                batch_timeout, **merged)
