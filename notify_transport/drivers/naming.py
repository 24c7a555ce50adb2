"""Notification topic naming, once for every driver, the CLI and the pipeline.

A notification topic is ``topic.priority`` plus ``.vhost`` when the transport
URL has a virtual host. :func:`notification_topic` builds names, and
:func:`parse_topic` reads them back (the CLI labels topics with it, the
pipeline fills its ``vhost`` column). Kafka's own rules for topic names are
checked in :mod:`notify_transport.drivers.kafka.naming`.
"""
from __future__ import annotations

import re
from typing import Iterable, NamedTuple, Sequence

#: Priorities in oslo.messaging's order; topics use these lower-case names.
PRIORITIES: tuple[str, ...] = ("audit", "debug", "info", "warn", "error", "critical", "sample")


class TopicParts(NamedTuple):
    """A notification topic split into what the notifier put in it."""

    base: str
    priority: str | None
    vhost: str | None


def notification_topic(topic: str, priority: str | None = None, vhost: str | None = None) -> str:
    """``topic[.priority][.vhost]``, leaving out empty parts.

    The notifier already passes ``topic.priority`` as the topic when sending;
    listeners pass topic and priority apart. Both sides add the vhost, which
    oslo.messaging's Kafka driver forgets on the listening side.
    """
    return ".".join(p for p in (topic, priority, vhost) if p)


def subscription_topics(base_topics: Iterable[str], vhost: str | None,
                        priorities: Sequence[str] = PRIORITIES) -> list[str]:
    """Every topic a listener on ``base_topics`` of ``vhost`` reads, in a stable order."""
    return [notification_topic(base, prio.lower(), vhost or None)
            for base in base_topics for prio in priorities]


def all_vhosts_pattern(base_topics: Iterable[str], priorities: Sequence[str] = PRIORITIES) -> str:
    """A regex matching the topics of ``base_topics`` on every vhost, and on none."""
    bases = "|".join(re.escape(b) for b in base_topics)
    prios = "|".join(re.escape(p.lower()) for p in priorities)
    return rf"^(?:{bases})\.(?:{prios})(?:\..+)?$"


def parse_topic(topic: str, base_topics: Sequence[str] = ()) -> TopicParts:
    """Split ``topic`` into base topic, priority and vhost.

    With ``base_topics`` (the configured ones) the split is exact even when a
    base topic or a vhost contains dots. Otherwise the first segment after the
    first one that names a priority is taken as the priority; a topic with no
    priority segment is returned whole as the base.
    """
    for base in sorted(base_topics, key=len, reverse=True):
        if topic.startswith(base + "."):
            prio, _, vhost = topic[len(base) + 1:].partition(".")
            if prio in PRIORITIES:
                return TopicParts(base, prio, vhost or None)
    segments = topic.split(".")
    for index in range(1, len(segments)):
        if segments[index] in PRIORITIES:
            vhost = ".".join(segments[index + 1:])
            return TopicParts(".".join(segments[:index]), segments[index], vhost or None)
    return TopicParts(topic, None, None)
