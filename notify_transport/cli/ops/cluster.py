"""What the operator commands ask of a Kafka cluster: topics, offsets, pools.

Built on the transport the public API makes from the URL, so options, vhost and
query mean what they mean to the driver, whose properties builder and topic
naming it uses. A pool is a consumer group.
"""
from __future__ import annotations

import argparse
import contextlib
import logging
from typing import Iterator, Sequence

from oslo_config import cfg

from notify_transport.cli.common import load_conf, not_kafka, required_url
from notify_transport.drivers.kafka import KafkaDriver, admin_config
from notify_transport.exceptions import ConfigurationError, InvalidTarget
from notify_transport.reading.pools import PoolAdmin
from notify_transport.target import Target
from notify_transport.transport import NotificationTransport, get_notification_transport

LOG = logging.getLogger(__name__)
#: librdkafka's own log lines (connection refused, ...): std logging, shown with -v.
RDKAFKA_LOG = logging.getLogger("notify_transport.cli.librdkafka")


class KafkaCluster(PoolAdmin):
    """The cluster and pool operations of :class:`PoolAdmin` on one ``kafka://`` transport."""

    def __init__(self, transport: NotificationTransport, timeout: float) -> None:
        driver = transport.driver
        if not isinstance(driver, KafkaDriver):
            raise not_kafka(transport.url, "this command")
        admin_conf = admin_config(driver.url, driver.opts)
        admin_conf["socket.connection.setup.timeout.ms"] = max(1000, int(timeout * 1000))
        super().__init__(admin_conf, timeout=timeout, logger=RDKAFKA_LOG)
        self.transport = transport
        self.driver = driver
        self.vhost: str | None = driver.vhost

    def __repr__(self) -> str:
        return f"<KafkaCluster {self.driver.url.redacted()}>"

    def notification_topics(self, topics: Sequence[str], priorities: Sequence[str]) -> list[str]:
        """Kafka topics of ``topic.priority[.vhost]`` for each pair, named as the driver names them."""
        try:
            return self.driver.kafka_topics((Target(topic=t), p) for t in topics for p in priorities)
        except InvalidTarget as exc:
            raise ConfigurationError(str(exc)) from None


@contextlib.contextmanager
def open_cluster(args: argparse.Namespace) -> Iterator[KafkaCluster]:
    """The cluster of the configured transport URL; checks the brokers answer."""
    with open_transport(args) as transport:
        cluster = KafkaCluster(transport, args.connect_timeout)
        try:
            cluster.topic_partitions()  # unreachable -> ClusterUnavailable (exit 3) now
            yield cluster
        finally:
            cluster.close()


@contextlib.contextmanager
def open_transport(args: argparse.Namespace,
                   conf: cfg.ConfigOpts | None = None) -> Iterator[NotificationTransport]:
    """A notification transport from --transport-url, --config-file or $NOTIFY_TRANSPORT_URL
    (``conf``: already loaded, with overrides of the command)."""
    conf = conf if conf is not None else load_conf(args)
    transport = get_notification_transport(conf, required_url(args, conf))
    try:
        yield transport
    finally:
        transport.cleanup()


def default_topics(args: argparse.Namespace) -> list[str]:
    """--topic values, else ``[oslo_messaging_notifications] topics`` of the config files."""
    if getattr(args, "topic", None):
        return list(dict.fromkeys(args.topic))
    conf = load_conf(args)
    return list(conf.oslo_messaging_notifications.topics)
