"""What the pipeline adds to the notification topic naming of :mod:`notify_transport.drivers.naming`.

Topic names are built and parsed in one place for the drivers, the CLI and the
pipeline (``drivers/naming.py``); the pipeline only adds which topics a run
reads (:class:`Subscription`). No Spark here: the CLI checks for new records without it.
"""
from __future__ import annotations

import dataclasses

from notify_transport.drivers import naming as topic_names
from notify_transport.exceptions import ConfigurationError


@dataclasses.dataclass(frozen=True)
class Subscription:
    """Which notification topics to read.

    ``base_topics`` are the notifier's topics (``notifications``); the Kafka
    topics are ``base.priority`` plus ``.vhost`` for ``vhost``, or on every
    vhost with ``all_vhosts``. ``kafka_topics`` names Kafka topics exactly
    instead.
    """

    base_topics: tuple[str, ...] = ("notifications",)
    vhost: str | None = None
    priorities: tuple[str, ...] = topic_names.PRIORITIES
    all_vhosts: bool = False
    kafka_topics: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [p for p in self.priorities if p.lower() not in topic_names.PRIORITIES]
        if unknown:
            raise ConfigurationError(f"Unknown priorities {unknown}; valid: {', '.join(topic_names.PRIORITIES)}")
        if not self.kafka_topics and not self.base_topics:
            raise ConfigurationError("No topic to read")

    def options(self) -> dict[str, str]:
        """``subscribe`` or ``subscribePattern``, as both formats spell them."""
        if self.kafka_topics:
            return {"subscribe": ",".join(self.kafka_topics)}
        if self.all_vhosts:
            return {"subscribePattern": topic_names.all_vhosts_pattern(self.base_topics, self.priorities)}
        return {"subscribe": ",".join(topic_names.subscription_topics(self.base_topics, self.vhost,
                                                                      self.priorities))}
