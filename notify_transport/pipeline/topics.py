"""Kafka topic names of notifications: ``topic.priority[.vhost]``, both ways.

The drivers name topics with :func:`notify_transport.drivers.naming.notification_topic`;
the pipeline subscribes to the same names and recovers the base topic, the
priority and the vhost from a record's topic for the ``vhost`` column.
"""
from __future__ import annotations

import re
from typing import Iterable, NamedTuple, Sequence

from notify_transport.drivers.naming import notification_topic

#: oslo.messaging's priorities, as the notifier lower-cases them into topic names.
PRIORITIES: tuple[str, ...] = ("audit", "debug", "info", "warn", "error", "critical", "sample")

#: Priorities that count as errors in the statistics.
ERROR_PRIORITIES: tuple[str, ...] = ("ERROR", "CRITICAL")


class TopicParts(NamedTuple):
    """A notification topic split into what the notifier put in it."""

    base: str
    priority: str | None
    vhost: str | None


def subscription_topics(base_topics: Iterable[str], vhost: str | None,
                        priorities: Sequence[str] = PRIORITIES) -> list[str]:
    """Every Kafka topic a listener on ``base_topics`` of ``vhost`` reads, in a stable order."""
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
