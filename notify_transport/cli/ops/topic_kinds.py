"""What a Kafka topic is to notify-transport: a notification topic, a retry or a dead-letter topic.

The retry and dead-letter templates are matched before the plain
``topic.priority[.vhost]`` split, so ``notifications.info.retry.billing`` is the
retry topic of ``notifications.info`` for pool ``billing``, not vhost
``retry.billing``. Names are parsed by :mod:`notify_transport.drivers.naming`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from notify_transport.drivers.kafka import side_templates
from notify_transport.drivers.naming import (DEFAULT_DEAD_LETTER_TOPIC, DEFAULT_RETRY_TOPIC,
                                             parse_side_topic, parse_topic)

NOTIFICATION, RETRY, DEAD_LETTER, OTHER = "notification", "retry", "dead-letter", "other"


@dataclasses.dataclass(frozen=True)
class TopicKind:
    """One Kafka topic, labelled."""

    kafka_topic: str
    kind: str
    #: the notifier's topic (``notifications``), the Kafka topic itself for ``other``
    base: str
    priority: str | None = None
    vhost: str | None = None
    #: retry / dead-letter: the pool in the name, when the template has ``{pool}``
    pool: str | None = None
    #: retry / dead-letter: the notification topic the records were copied from
    source: str | None = None


def templates(opts: Any) -> dict[str, str]:
    """``{kind: template}`` of the Kafka driver's resolved options, named as a listener names
    them (:func:`~notify_transport.drivers.kafka.delivery.settings.side_templates`): unset, the
    defaults; disabled ("none"), left out."""
    retry, dead = side_templates(getattr(opts, "retry_topic", None), getattr(opts, "dead_letter_topic", None))
    return {kind: template for kind, template in ((RETRY, retry), (DEAD_LETTER, dead)) if template}


class TopicNamer:
    """Labels Kafka topics with the retry / dead-letter templates of one configuration."""

    def __init__(self, retry_template: str | None = DEFAULT_RETRY_TOPIC,
                 dead_letter_template: str | None = DEFAULT_DEAD_LETTER_TOPIC,
                 base_topics: Sequence[str] = ()) -> None:
        self.base_topics = tuple(base_topics)
        self._templates = [(kind, t) for kind, t in
                           ((DEAD_LETTER, dead_letter_template), (RETRY, retry_template)) if t]

    @classmethod
    def from_options(cls, opts: Any, base_topics: Sequence[str] = ()) -> "TopicNamer":
        """From the Kafka driver's resolved options (unset templates: the driver's defaults)."""
        found = templates(opts)
        return cls(found.get(RETRY), found.get(DEAD_LETTER), base_topics)

    def classify(self, name: str) -> TopicKind:
        for kind, template in self._templates:
            side = parse_side_topic(template, name)
            if side is None:
                continue
            parts = parse_topic(side.topic, self.base_topics)
            if parts.priority is None or not self._wanted(parts.base):
                continue
            return TopicKind(name, kind, parts.base, parts.priority, parts.vhost, side.pool, side.topic)
        parts = parse_topic(name, self.base_topics)
        if parts.priority is None or not self._wanted(parts.base):
            return TopicKind(name, OTHER, name)
        return TopicKind(name, NOTIFICATION, parts.base, parts.priority, parts.vhost)

    def _wanted(self, base: str) -> bool:
        return not self.base_topics or base in self.base_topics
