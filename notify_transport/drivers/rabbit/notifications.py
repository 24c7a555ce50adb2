"""Notifications over RabbitMQ, laid out as oslo.messaging's rabbit driver.

Sending publishes with routing key ``<topic>.<priority>`` and declares that
queue first, so nothing sent before a listener starts is lost; confirms are
counted as they arrive and failures logged. Listening consumes a queue per
pool (each pool gets every notification); a message is acked when the endpoint
is done, and an undecodable one is rejected without requeue (dead-lettered where
the queue has a dead-letter exchange).
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

from notify_transport.drivers import envelope
from notify_transport.drivers.base import IncomingMessage, Listener
from notify_transport.drivers.naming import routing_key
from notify_transport.drivers.rabbit.codec import BodyCodec
from notify_transport.drivers.rabbit.connection import RabbitConnection
from notify_transport.drivers.rabbit.consumer import Delivery, QueueConsumer
from notify_transport.drivers.rabbit.publisher import PendingPublish, Publisher
from notify_transport.drivers.rabbit.dedup import DUPLICATES_LOG_INTERVAL, DedupCache
from notify_transport.drivers.rabbit.topology import Topology
from notify_transport.drivers.reporting import RateLimitedLog
from notify_transport.exceptions import ConfigurationError, DecodeError, MessageDeliveryFailure
from notify_transport.target import Target

LOG = logging.getLogger(__name__)


class NotificationSender:
    """Publishes notifications with confirms tracked in the background."""

    def __init__(self, conn: RabbitConnection, publisher: Publisher, topology: Topology,
                 codec: BodyCodec, max_pending: int, pending_timeout: float) -> None:
        self._conn = conn
        self._publisher = publisher
        self._topology = topology
        self._codec = codec
        self._max_pending = max_pending
        self._pending_timeout = pending_timeout
        self._cond = threading.Condition()
        self._pending = 0
        self._counts = {"sent": 0, "delivered": 0, "failed": 0}

    def send(self, target: Target, ctxt: dict, message: dict, version: float,
             retry: int | None) -> None:
        if self._conn.fatal_error is not None and not self._conn.is_open:
            raise self._conn.fatal_error
        exchange = self._topology.topic_exchange(target.exchange)
        key = target.topic or ""
        queue = self._topology.topic_queue(exchange, key, [key])
        msg = dict(message)
        msg["_unique_id"] = uuid.uuid4().hex
        body = self._codec.encode(msg, ctxt, version)
        with self._cond:
            if self._pending >= self._max_pending:
                deadline = time.monotonic() + self._pending_timeout
                while self._pending >= self._max_pending:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise MessageDeliveryFailure(
                            f"{self._pending} notifications await RabbitMQ's confirmation "
                            f"(max_pending_notifications); {self._conn.last_error or 'broker slow'}")
                    self._cond.wait(remaining)
            self._pending += 1
            self._counts["sent"] += 1
        self._publisher.publish(PendingPublish(exchange, key, body, self._codec.properties(),
                                               queue=queue, retry=retry, on_done=self._on_done))

    def _on_done(self, message: PendingPublish) -> None:
        with self._cond:
            self._pending -= 1
            if message.error is None:
                self._counts["delivered"] += 1
            else:
                self._counts["failed"] += 1
            self._cond.notify_all()
        if message.error is not None:
            LOG.error("Notification to %s/%s was not delivered: %s", message.exchange.name,
                      message.routing_key, message.error)

    def flush(self, timeout: float | None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._cond.wait(remaining)
            return self._pending

    def stats(self) -> dict[str, int]:
        with self._cond:
            return dict(self._counts, pending=self._pending)


class NotificationListener(Listener):
    """A pool's queue (or the ``topic.priority`` queues) consumed on one channel."""

    def __init__(self, conn: RabbitConnection, topology: Topology, codec: BodyCodec,
                 targets_and_priorities: list[tuple[Target, str]], pool: str | None,
                 prefetch: int, reconnect_delay: float) -> None:
        super().__init__()
        keys = [(target.exchange, routing_key(target.topic or "", priority))
                for target, priority in targets_and_priorities]
        self.pool = pool
        self._codec = codec
        self._dedup = DedupCache()
        self._duplicates = RateLimitedLog(LOG, interval=DUPLICATES_LOG_INTERVAL)
        self.consumer = QueueConsumer(conn, topology.notification_queues(keys, pool),
                                      prefetch=prefetch, auto_ack=False,
                                      name=f"notifications pool={pool}",
                                      reconnect_delay=reconnect_delay)

    def __repr__(self) -> str:
        return f"<NotificationListener pool={self.pool!r} queues={[q.name for q in self.consumer.queues]}>"

    def start(self) -> None:
        """Return once every queue is consumed (raises if the broker refuses)."""
        self.consumer.start_and_wait()

    def poll(self, timeout: float | None = None, max_messages: int = 1) -> list[IncomingMessage]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            deliveries = self.consumer.get(remaining, max_messages)
            self._duplicates.summarize_due()
            if not deliveries:
                return []
            out = [m for m in (self._incoming(d) for d in deliveries) if m is not None]
            if out or (deadline is not None and time.monotonic() >= deadline):
                return out

    def _incoming(self, delivery: Delivery) -> IncomingMessage | None:
        try:
            data = self._codec.decode(delivery.body, delivery.properties)
            unique_id = data.pop("_unique_id", None)
            ctxt, message = envelope.split_context(data)
            if not isinstance(message.get("event_type"), str) or not isinstance(message.get("priority"), str):
                raise DecodeError("not a notification: missing or non-string event_type/priority")
        except DecodeError as exc:
            LOG.error("%r: rejecting an undecodable message from exchange %r routing key %r "
                      "(delivery %s): %s", self, delivery.method.exchange, delivery.routing_key,
                      delivery.delivery_tag, exc)
            self.consumer.reject([delivery], requeue=False)
            return None
        if unique_id and self._dedup.contains(unique_id):
            self.consumer.ack([delivery])
            self._duplicates.log(logging.WARNING, "duplicate", "%r: dropping duplicate notification %s", self,
                                     unique_id)
            return None
        props = delivery.properties
        headers = [(k, v if isinstance(v, bytes) else str(v).encode()) for k, v in (props.headers or {}).items()]

        def acknowledge(_message: IncomingMessage) -> None:
            # Remembered only once handled, so that a requeued message comes back.
            if unique_id:
                self._dedup.seen(unique_id)
            self.consumer.ack([delivery])

        return IncomingMessage(ctxt, message, topic=delivery.routing_key, offset=delivery.delivery_tag,
                               timestamp=props.timestamp, headers=headers, raw=delivery.body,
                               on_ack=acknowledge,
                               on_requeue=lambda _m: self.consumer.reject([delivery], requeue=True))

    def stop(self) -> None:
        super().stop()
        self.consumer.stop()

    def cleanup(self) -> None:
        self.consumer.close()
        self._duplicates.summarize()


def check_listen_options(options: dict[str, Any]) -> None:
    """The rabbit driver takes no per-listener options; name any that were given."""
    if options:
        raise ConfigurationError(f"The rabbit driver takes no listener options; got "
                                 f"{', '.join(sorted(options))}")
