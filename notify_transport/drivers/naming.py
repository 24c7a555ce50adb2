"""Topic naming shared by the drivers: ``topic.priority`` plus ``.vhost``."""
from __future__ import annotations


def notification_topic(topic: str, priority: str | None = None, vhost: str | None = None) -> str:
    """``topic[.priority][.vhost]``, leaving out empty parts.

    The notifier already passes ``topic.priority`` as the topic when sending;
    listeners pass topic and priority apart. Both sides add the vhost, which
    oslo.messaging's Kafka driver forgets on the listening side.
    """
    return ".".join(p for p in (topic, priority, vhost) if p)
