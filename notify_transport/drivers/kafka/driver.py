"""The ``kafka://`` notification driver on confluent-kafka.

Topics are ``topic.priority[.vhost]`` on both sides, a pool is a consumer group,
the wire format is oslo.messaging's, and the URL query overrides any
``[oslo_messaging_kafka]`` option; listeners take the delivery options of
:mod:`.delivery.settings`. RPC is not carried (``NotSupported``).
"""
from __future__ import annotations

import logging
from typing import Any, Iterable

from notify_transport.drivers import threads
from notify_transport.drivers import envelope, exit_flush
from notify_transport.drivers.base import BaseDriver, Listener, NotificationSender, close_listeners
from notify_transport.drivers.config import resolve_options
from notify_transport.drivers.kafka import client_check, client_properties
from notify_transport.drivers.kafka.cluster import ClusterAdmin
from notify_transport.drivers.kafka.delivery.atleastonce import AtLeastOnce
from notify_transport.drivers.kafka.delivery.commit import AutoCommit, CommitBeforeDispatch, CommitPolicy
from notify_transport.drivers.kafka.hand_out import HAND_OUT_CHUNK
from notify_transport.drivers.kafka.listener import KafkaListener
from notify_transport.drivers.kafka.delivery.counters import DeliveryCounters
from notify_transport.drivers.kafka.delivery.deadletter import SideProducer
from notify_transport.drivers.kafka.naming import SendTopics, kafka_topic, validate
from notify_transport.drivers.kafka.options import GROUP, all_opts, delivery_opts, listener_start_timeout
from notify_transport.drivers.kafka.producer import NotificationProducer
from notify_transport.drivers.kafka.delivery.retry import Requeuer
from notify_transport.drivers.kafka.delivery.settings import EXTRA_KEYWORDS, OPTION_NAMES, listener_settings
from notify_transport.exceptions import ConfigurationError, InvalidTarget, InvalidTransportURL
from notify_transport.target import Target

LOG = logging.getLogger(__name__)

#: Keyword options a listener accepts from ``listen_for_notifications(**options)``:
#: a custom ``commit_policy``, every delivery option of :mod:`.options` and ``hooks``.
LISTENER_OPTIONS = ("commit_policy",) + OPTION_NAMES + EXTRA_KEYWORDS

_CONTEXT_DICT = envelope.CONTEXT_DICT


class KafkaDriver(BaseDriver):
    """Notifications over Kafka: topics ``topic.priority[.vhost]``, a pool is a consumer group."""

    name = "kafka"
    supports_rpc = False

    @classmethod
    def listener_options(cls) -> list[Any]:
        """The delivery options (``[oslo_messaging_kafka]``), each also a listener keyword."""
        return list(delivery_opts)

    @classmethod
    def listener_keywords(cls) -> tuple[str, ...]:
        return EXTRA_KEYWORDS

    def __init__(self, conf: Any, url: Any, default_exchange: str | None = None,
                 allowed_remote_exmods: Iterable[str] | None = None) -> None:
        super().__init__(conf, url, default_exchange, allowed_remote_exmods)
        self.opts = resolve_options(conf, GROUP, all_opts(), url.query, url.redacted())
        self._start_timeout = listener_start_timeout(self.opts)
        self.vhost: str | None = url.virtual_host or None
        if self.vhost is not None:
            try:
                validate(self.vhost)
            except InvalidTarget:
                raise InvalidTransportURL(
                    url.redacted(), f"Virtual host {self.vhost!r} cannot be part of a Kafka topic "
                    "name: use ASCII letters, digits, '.', '_' and '-'") from None
        # built now so that a bad option fails here, not at the first send
        producer_conf = client_properties.producer_config(url, self.opts)
        consumer_conf = client_properties.consumer_config(url, self.opts, self.opts.consumer_group)
        # librdkafka itself checks the properties (unknown ones, bad values, TLS files)
        client_check.check_clients(producer_conf, consumer_conf, client_check.option_files(self.opts))
        self._kafka_topic_for = SendTopics(self.vhost)
        self._producer = NotificationProducer(producer_conf, self.opts.producer_queue_timeout,
                                              self.opts.flush_timeout, url.redacted())
        exit_flush.register(self._producer, self.opts.exit_flush_timeout, url.redacted())
        #: (topic, version) -> the sender send_notification uses (notification_sender's)
        self._senders: dict[tuple[str | None, float], NotificationSender] = {}
        self._admin = ClusterAdmin(client_properties.admin_config(url, self.opts), self.opts.topic_partitions,
                                 self.opts.topic_replication_factor,
                                 timeout=min(10.0, self._start_timeout))
        self._listeners: list[KafkaListener] = []
        self._listeners_lock = threads.Lock()

    def __repr__(self) -> str:
        return f"<KafkaDriver {self.url.redacted()}>"

    def send_notification(self, target: Target, ctxt: Any, message: dict,
                          version: float, retry: int | None = None) -> None:
        if ctxt is not None and type(ctxt) is not dict:
            ctxt = ctxt.to_dict() if hasattr(ctxt, "to_dict") else dict(ctxt)
        send = self._senders.get((target.topic, version))
        if send is None:
            send = self._senders[(target.topic, version)] = self.notification_sender(target, version)
        send(ctxt, message, retry)

    def notification_sender(self, target: Target, version: float) -> NotificationSender:
        """:meth:`send_notification` for one target: its Kafka topic named and its encoding
        bound once, the context taken as the dict the notifier made (a Notifier is this
        method's caller)."""
        return self._producer.sender(self._kafka_topic_for(target.topic),
                                     envelope.encoder(version, _CONTEXT_DICT))

    def flush(self, timeout: float | None = None) -> int:
        return self._producer.flush(timeout)

    def delivery_stats(self) -> dict[str, int]:
        return self._producer.stats()

    def check_connection(self, timeout: float) -> None:
        """Ask the cluster for its topics with a client of its own, bounded by ``timeout``."""
        config = client_properties.admin_config(self.url, self.opts)
        config["socket.connection.setup.timeout.ms"] = max(1000, int(timeout * 1000))
        admin = ClusterAdmin(config, timeout=timeout)
        try:
            admin.existing_topics()
        finally:
            admin.close()

    def kafka_topics(self, targets_and_priorities: Iterable[tuple[Target, str | None]]) -> list[str]:
        """The Kafka topics a listener on these pairs subscribes to, in order, without repeats."""
        topics: list[str] = []
        for target, priority in targets_and_priorities:
            if not target.topic:
                raise InvalidTarget("A topic is required to listen", target)
            name = kafka_topic(target.topic, priority, self.vhost)
            if name not in topics:
                topics.append(name)
        return topics

    def listen_for_notifications(self, targets_and_priorities: list[tuple[Target, str]],
                                 pool: str | None, batch_size: int = 1,
                                 batch_timeout: float | None = None, **options: Any) -> Listener:
        unknown = sorted(set(options) - set(LISTENER_OPTIONS))
        if unknown:
            raise ConfigurationError(f"Unknown Kafka listener option(s) {', '.join(unknown)}; "
                                     f"known: {', '.join(LISTENER_OPTIONS)}")
        settings = listener_settings(self.opts, options)
        topics = self.kafka_topics(targets_and_priorities)
        group = pool or self.opts.consumer_group
        name = f"Kafka listener (group {group}, topics {','.join(topics)})"
        counters = DeliveryCounters()
        side = requeuer = None
        if settings.requeue_possible:
            side = SideProducer(client_properties.producer_config(self.url, self.opts), name)
            requeuer = Requeuer(settings, side, group, counters, settings.hooks, name, topics)
        policy = self._policy(options.get("commit_policy"), settings, requeuer, counters)
        config = client_properties.consumer_config(self.url, self.opts, group)
        if settings.at_least_once:
            config["enable.auto.commit"] = False  # the policy commits exactly what finished
        listener = KafkaListener(
            config, topics, policy,
            admin=self._admin, max_poll_records=self.opts.max_poll_records,
            consumer_timeout=self.opts.kafka_consumer_timeout,
            start_timeout=self._start_timeout, settings=settings,
            retry_topics=requeuer.retry_topics(topics) if requeuer else [],
            dead_letter_topics=requeuer.dead_letter_topics(topics) if requeuer else [],
            side=side, counters=counters,
            # one message per dispatch: hand large takes out in pieces (never to batch listeners)
            hand_out_chunk=HAND_OUT_CHUNK if batch_size == 1 else None)
        with self._listeners_lock:
            self._listeners = [lst for lst in self._listeners if not lst.closed]
            self._listeners.append(listener)
        return listener

    def _policy(self, given: Any, settings: Any, requeuer: Requeuer | None,
                counters: DeliveryCounters) -> CommitPolicy:
        """The commit policy for the delivery mode (or the one given)."""
        if given is not None:
            if settings.at_least_once or requeuer is not None:
                raise ConfigurationError("commit_policy cannot be combined with delivery_mode="
                                         "at_least_once or retry / dead-letter topics")
            policy = given() if isinstance(given, type) else given
            if not isinstance(policy, CommitPolicy):
                raise ConfigurationError(f"commit_policy must be a CommitPolicy, got {policy!r}")
            return policy
        if settings.at_least_once:
            if self.opts.enable_auto_commit:
                raise ConfigurationError("delivery_mode=at_least_once commits what finished "
                                         "processing; it cannot be combined with "
                                         "enable_auto_commit=true")
            assert requeuer is not None  # at_least_once always has a dead-letter topic
            return AtLeastOnce(requeuer, counters, settings.hooks, settings.commit_interval)
        if self.opts.enable_auto_commit:
            if requeuer is not None:
                raise ConfigurationError("retry / dead-letter topics need delivery_mode="
                                         "commit_before_dispatch or at_least_once, not "
                                         "enable_auto_commit=true")
            return AutoCommit()
        return CommitBeforeDispatch(requeuer, settings.hooks, counters)

    @property
    def admin(self) -> ClusterAdmin:
        """The cluster admin client of this transport (topics, offsets, pools), shared by its listeners."""
        return self._admin

    def cleanup(self) -> None:
        """Flush pending notifications (bounded by ``flush_timeout``) and close every client."""
        self._producer.close()
        with self._listeners_lock:
            listeners, self._listeners = self._listeners, []
        close_listeners(listeners)
        self._admin.close()
