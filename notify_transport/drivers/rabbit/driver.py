"""The ``rabbit://`` driver: RPC and notifications on RabbitMQ through pika.

Two connections per driver (per process), each with its own I/O thread, made
on first use: one publishes (requests, replies, notifications) and one
consumes (the reply queue and every listener, one channel each). Keeping
publishers off the consuming connection is RabbitMQ's advice: when the broker
blocks publishers under memory pressure, consumers still drain the queues.
Callers publish on their own thread, and read what they wait for themselves
when they can (see ``connection``): the I/O threads handle the rest.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Iterable

from notify_transport.drivers import exit_flush
from notify_transport.drivers.base import BaseDriver, Listener
from notify_transport.drivers.config import resolve_options
from notify_transport.drivers.rabbit.codec import BodyCodec
from notify_transport.drivers.rabbit.connection import RabbitConnection
from notify_transport.drivers.rabbit.notifications import (NotificationListener, NotificationSender,
                                                           check_listen_options)
from notify_transport.drivers.rabbit.options import GROUP, all_opts
from notify_transport.drivers.rabbit.publisher import Publisher
from notify_transport.drivers.rabbit.rpc import Replier, ReplyRouter, RpcListener, RpcSender
from notify_transport.drivers.rabbit.settings import RabbitSettings
from notify_transport.drivers.rabbit.topology import Topology
from notify_transport.exceptions import (BrokerUnreachable, ConfigurationError, MessageDeliveryFailure,
                                         MessagingTimeout)
from notify_transport.target import Target

LOG = logging.getLogger(__name__)

#: Default of ``[DEFAULT] rpc_response_timeout`` when a caller passes no timeout.
DEFAULT_CALL_TIMEOUT = 60.0


class RabbitDriver(BaseDriver):
    """RPC (call, cast, fanout) and notifications over RabbitMQ, wire-compatible with oslo.messaging."""

    name = "rabbit"
    supports_rpc = True

    def __init__(self, conf: Any, url: Any, default_exchange: str | None = None,
                 allowed_remote_exmods: Iterable[str] | None = None) -> None:
        super().__init__(conf, url, default_exchange, allowed_remote_exmods)
        self.opts = resolve_options(conf, GROUP, all_opts(), url.query, url.redacted())
        for name in ("use_queue_manager", "rabbit_stream_fanout"):
            if getattr(self.opts, name):
                raise ConfigurationError(f"[{GROUP}] {name} = True is not supported by the "
                                         "notify-transport rabbit driver")
        self.settings = RabbitSettings(url, self.opts)
        self.topology = Topology(self.opts, default_exchange or "openstack")
        self.codec = BodyCodec(self.opts.kombu_compression)
        self._lock = threading.Lock()
        self._send_conn: RabbitConnection | None = None
        self._listen_conn: RabbitConnection | None = None
        self._publisher: Publisher | None = None
        self._router: ReplyRouter | None = None
        self._rpc: RpcSender | None = None
        self._replier: Replier | None = None
        self._notifications: NotificationSender | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<RabbitDriver {self.url.redacted()}>"

    # -- connections, made on first use -------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise MessageDeliveryFailure(f"{self!r} was cleaned up")

    def _sending(self) -> tuple[RabbitConnection, Publisher]:
        with self._lock:
            self._check_open()
            if self._publisher is None:
                self._send_conn = RabbitConnection(self.settings, "send")
                self._publisher = Publisher(self._send_conn, self.opts.publisher_confirms)
            assert self._send_conn is not None
            return self._send_conn, self._publisher

    def _listening(self) -> RabbitConnection:
        with self._lock:
            self._check_open()
            if self._listen_conn is None:
                self._listen_conn = RabbitConnection(self.settings, "listen")
                self._listen_conn.start()
            return self._listen_conn

    def _reply_router(self, deadline: float) -> ReplyRouter:
        conn = self._listening()
        with self._lock:
            if self._router is None:
                self._router = ReplyRouter(conn, self.topology, self.codec,
                                           self.opts.kombu_reconnect_delay)
            router = self._router
        if not router.consumer.wait_ready(max(0.0, deadline - time.monotonic())):
            raise MessagingTimeout(f"Timed out waiting for the reply queue {router.name}: "
                                   f"{conn.last_error or 'RabbitMQ did not answer'}")
        return router

    def _rpc_sender(self) -> RpcSender:
        conn, publisher = self._sending()
        with self._lock:
            if self._rpc is None:
                self._rpc = RpcSender(conn, publisher, self.topology, self.codec, self._reply_router,
                                      self.allowed_remote_exmods, self.opts.connection_timeout,
                                      self.opts.send_timeout)
            return self._rpc

    def _get_replier(self) -> Replier:
        conn, publisher = self._sending()
        with self._lock:
            if self._replier is None:
                self._replier = Replier(conn, publisher, self.codec,
                                        float(self.opts.kombu_missing_consumer_retry_timeout))
            return self._replier

    def _notification_sender(self) -> NotificationSender:
        conn, publisher = self._sending()
        with self._lock:
            if self._notifications is None:
                self._notifications = NotificationSender(
                    conn, publisher, self.topology, self.codec, self.opts.max_pending_notifications,
                    self.opts.pending_notifications_timeout)
                exit_flush.register(self._notifications, self.opts.exit_flush_timeout,
                                    self.url.redacted())
            return self._notifications

    def _prefetch(self, bound: int) -> int:
        """A consumer's prefetch: ``rabbit_qos_prefetch_count`` when set (oslo's, for every
        consumer), else ``bound``, so that oslo's 0 ("no limit") does not let the broker push
        a whole queue to its first consumer while the others of the queue wait."""
        return self.opts.rabbit_qos_prefetch_count or bound

    # -- RPC ------------------------------------------------------------------------
    def send(self, target: Target, ctxt: dict, message: dict, wait_for_reply: bool = False,
             timeout: float | None = None, retry: int | None = None,
             transport_options: Any = None, call_monitor_timeout: float | None = None) -> Any:
        sender = self._rpc_sender()
        if wait_for_reply:
            return sender.call(target, ctxt, message, DEFAULT_CALL_TIMEOUT if timeout is None else timeout,
                               retry, call_monitor_timeout, transport_options)
        sender.cast(target, ctxt, message, retry, transport_options)
        return None

    def listen(self, target: Target, batch_size: int = 1,
               batch_timeout: float | None = None) -> Listener:
        replier = self._get_replier()
        return RpcListener(self._listening(), self.topology, self.codec, replier, target,
                           prefetch=self._prefetch(self.opts.rpc_prefetch_count),
                           reconnect_delay=self.opts.kombu_reconnect_delay)

    # -- notifications -----------------------------------------------------------------
    def send_notification(self, target: Target, ctxt: dict, message: dict, version: float,
                          retry: int | None = None) -> None:
        self._notification_sender().send(target, ctxt, message, version, retry)

    def listen_for_notifications(self, targets_and_priorities: list[tuple[Target, str]],
                                 pool: str | None, batch_size: int, batch_timeout: float | None,
                                 **options: Any) -> Listener:
        check_listen_options(options)
        return NotificationListener(self._listening(), self.topology, self.codec,
                                    list(targets_and_priorities), pool,
                                    self._prefetch(self.opts.notification_prefetch_count),
                                    self.opts.kombu_reconnect_delay)

    def flush(self, timeout: float | None = None) -> int:
        sender = self._notifications
        return sender.flush(timeout) if sender is not None else 0

    def delivery_stats(self) -> dict[str, int]:
        sender = self._notifications
        return sender.stats() if sender is not None else {"sent": 0, "delivered": 0, "failed": 0,
                                                          "pending": 0}

    def check_connection(self, timeout: float) -> None:
        """Open the sending connection (kept for the sends that follow), bounded by ``timeout``."""
        conn, _publisher = self._sending()
        conn.start()
        if not conn.wait_open(timeout):
            hosts = ", ".join(self.url.bootstrap_servers(5672))
            raise BrokerUnreachable(f"Cannot reach RabbitMQ at {hosts} within {timeout:g}s"
                                    + (f"; last error: {conn.last_error}" if conn.last_error else ""))

    def cleanup(self) -> None:
        """Wait (bounded) for unconfirmed notifications, delete the reply queue, close connections."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._notifications is not None:
            left = self._notifications.flush(self.opts.flush_timeout)
            if left:
                LOG.error("%r: %d notification(s) still unconfirmed after %.1fs; they may be lost",
                          self, left, self.opts.flush_timeout)
        if self._router is not None:
            self._router.close()
        for conn in (self._listen_conn, self._send_conn):
            if conn is not None:
                conn.close()
        if self._publisher is not None:
            self._publisher.io_fail_all(MessageDeliveryFailure("the transport was cleaned up"))
