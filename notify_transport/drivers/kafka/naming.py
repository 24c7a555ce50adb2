"""Kafka topic names: ``topic.priority`` plus ``.vhost`` when the URL has one.

The same function names topics on the sending and the listening side, so a
listener on one vhost never sees another vhost's notifications (oslo.messaging
adds the vhost only when sending, so its listeners never get vhost traffic).
"""
from __future__ import annotations

import re

from notify_transport.drivers.naming import notification_topic
from notify_transport.exceptions import InvalidTarget

#: Kafka's own limits (kafka.common.internals.Topic).
MAX_TOPIC_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def kafka_topic(topic: str, priority: str | None = None, vhost: str | None = None) -> str:
    """The shared notification topic name, checked to be a legal Kafka topic."""
    name = notification_topic(topic, priority, vhost)
    validate(name)
    return name


def validate(name: str) -> None:
    """Raise :class:`InvalidTarget` when ``name`` cannot be a Kafka topic."""
    if not name or name in (".", ".."):
        raise InvalidTarget(f"{name!r} is not a valid Kafka topic name", name)
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTarget(f"Kafka topic name is longer than {MAX_TOPIC_LENGTH} characters", name)
    if not _LEGAL.fullmatch(name):
        raise InvalidTarget("Kafka topic names may only contain ASCII letters, digits, '.', '_' "
                            "and '-' (check the target topic and the URL's virtual host)", name)


class SendTopics:
    """Caches ``target topic -> Kafka topic`` for the send path (a dict hit per send)."""

    __slots__ = ("vhost", "_cache")

    _MAX_ENTRIES = 10_000

    def __init__(self, vhost: str | None) -> None:
        self.vhost = vhost or None
        self._cache: dict[str | None, str] = {}  # None is never stored: a miss, refused below

    def __call__(self, target_topic: str | None) -> str:
        try:
            return self._cache[target_topic]
        except KeyError:
            pass
        if not target_topic:
            raise InvalidTarget("A topic is required to send", target_topic)
        name = kafka_topic(target_topic, None, self.vhost)
        if len(self._cache) >= self._MAX_ENTRIES:
            self._cache.clear()
        self._cache[target_topic] = name
        return name
