"""Topic naming, once for every driver, the CLI and the pipeline.

Notification topics ``topic.priority[.vhost]`` (:func:`notification_topic`,
:func:`parse_topic`), retry and dead-letter names from templates
(:func:`side_topic`, :func:`parse_side_topic`) and RabbitMQ routing keys
(:func:`routing_key`, :func:`server_routing_key`). Kafka's own name rules: :mod:`notify_transport.drivers.kafka.naming`.
"""
from __future__ import annotations

import functools
import re
import string
from typing import Iterable, NamedTuple, Sequence

#: Priorities in oslo.messaging's order; topics use these lower-case names.
PRIORITIES: tuple[str, ...] = ("audit", "debug", "info", "warn", "error", "critical", "sample")
#: Priorities that count as errors (the pipeline's statistics, the CLI's error views).
ERROR_PRIORITIES: tuple[str, ...] = ("error", "critical")

#: Templates of a listener's retry and dead-letter topics (``retry_topic``, ``dead_letter_topic``).
DEFAULT_RETRY_TOPIC = "{topic}.retry.{pool}"
DEFAULT_DEAD_LETTER_TOPIC = "{topic}.dlq"
#: Template values that turn retry / dead-letter topics off.
DISABLED = ("", "none")
#: Placeholders a retry / dead-letter template may use.
SIDE_TOPIC_FIELDS = frozenset({"topic", "pool"})
_ILLEGAL_IN_TOPIC = re.compile(r"[^a-zA-Z0-9._-]")


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

    With ``base_topics`` the split is exact even with dots in a base topic or vhost; otherwise
    the first segment after the first that names a priority is the priority.
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


def routing_key(topic: str, priority: str) -> str:
    """The RabbitMQ routing key (and queue name) of ``topic`` at ``priority``: ``topic.priority``.

    A RabbitMQ virtual host is the broker's own, so it is no part of the key.
    """
    return f"{topic}.{priority}"


def server_routing_key(topic: str, server: str) -> str:
    """The RabbitMQ routing key (and queue name) of one RPC server of ``topic``: ``topic.server``.

    A call or cast aimed at that server alone is sent with it; the server binds its own queue
    with it beside the topic's shared queue.
    """
    return f"{topic}.{server}"


def template_fields(template: str) -> set[str]:
    """The placeholders of a retry / dead-letter template (ValueError if it is malformed)."""
    return {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}


def side_topic(template: str, topic: str, pool: str) -> str:
    """A retry / dead-letter topic: ``template`` filled with the notification topic and the pool.

    Characters a topic name cannot hold in the pool become ``_``.
    """
    return template.format(topic=topic, pool=_ILLEGAL_IN_TOPIC.sub("_", pool))


@functools.lru_cache(maxsize=64)
def side_topic_pattern(template: str) -> re.Pattern[str]:
    """A regex matching the names :func:`side_topic` makes from ``template``, with
    ``topic`` and ``pool`` groups for the placeholders it has."""
    parts = []
    seen: set[str] = set()
    for literal, field, _spec, _conv in string.Formatter().parse(template):
        parts.append(re.escape(literal))
        if field is None:
            continue
        if field in seen:
            parts.append(f"(?P={field})")
        else:
            seen.add(field)
            parts.append(f"(?P<{field}>.+)" if field == "topic" else f"(?P<{field}>[a-zA-Z0-9._-]+?)")
    return re.compile("".join(parts))


class SideTopic(NamedTuple):
    """A retry / dead-letter topic read back: the notification topic and the pool in its name."""

    topic: str
    pool: str | None


def parse_side_topic(template: str, name: str) -> SideTopic | None:
    """What :func:`side_topic` filled ``template`` with to make ``name``; None if it did not make it
    (or the template has no ``{topic}``)."""
    pattern = side_topic_pattern(template)
    match = pattern.fullmatch(name)
    if match is None or "topic" not in pattern.groupindex:
        return None
    return SideTopic(match.group("topic"), match.group("pool") if "pool" in pattern.groupindex else None)
