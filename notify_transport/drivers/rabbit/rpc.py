"""RPC over RabbitMQ, on the wire exactly as oslo.messaging's rabbit driver.

Requests and replies are oslo's envelopes (``_msg_id``, ``_reply_q``, ``_unique_id``,
``failure`` as :mod:`~notify_transport.drivers.remote_errors` writes it; a reply with
``ending: false`` and no result is a call-monitor heartbeat). One reply queue per
process; a waiting caller reads replies itself when nobody else does, so its answer
needs no thread hop. Requests are acknowledged when a server takes them (a call runs
at most once, as in oslo), and ``_unique_id`` drops what a reconnect delivers twice.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any, Callable

from cachetools import TTLCache

from notify_transport.backoff import Backoff
from notify_transport.drivers import envelope
from notify_transport.drivers.base import IncomingMessage, Listener
from notify_transport.drivers.rabbit.codec import BodyCodec
from notify_transport.drivers.rabbit.connection import RabbitConnection
from notify_transport.drivers.rabbit.consumer import Delivery, QueueConsumer
from notify_transport.drivers.rabbit.dedup import DUPLICATES_LOG_INTERVAL, DedupCache
from notify_transport.drivers.rabbit.publisher import PendingPublish, Publisher
from notify_transport.drivers.naming import server_routing_key
from notify_transport.drivers.rabbit.topology import ExchangeSpec, Topology
from notify_transport.drivers.reporting import RateLimitedLog
from notify_transport.drivers.remote_errors import (deserialize_remote_exception,
                                                    serialize_remote_exception)
from notify_transport.exceptions import (DecodeError, InvalidTarget, MessageDeliveryFailure,
                                         MessageUndeliverable, MessagingTimeout)
from notify_transport.target import Target

LOG = logging.getLogger(__name__)

DEFAULT_EXCHANGE = ExchangeSpec("", "direct")
#: Spacing of a call's publishes while no queue is bound to its routing key (a server starting).
NO_QUEUE_BACKOFF = Backoff(initial=0.05, factor=2.0, maximum=1.0)
#: Spacing of a reply's publishes while the caller's reply queue is missing (oslo: every 0.25 s).
MISSING_REPLY_QUEUE_BACKOFF = Backoff(initial=0.25, factor=1.0, maximum=0.25)


class _Waiter:
    """A call waiting for its reply (filled on the I/O thread)."""

    __slots__ = ("event", "result", "failure", "done", "heartbeats", "publish")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.result: Any = None
        self.failure: str | None = None
        self.done = False
        self.heartbeats = 0
        self.publish: PendingPublish | None = None

    def deliver(self, data: dict) -> None:
        failure = data.get("failure")
        result = data.get("result")
        if failure:
            self.failure = failure
        elif result is not None:
            self.result = result
        if data.get("ending", False):
            self.done = True
            self.event.set()
        elif result is None and not failure:
            self.heartbeats += 1

    def on_publish_done(self, message: PendingPublish) -> None:
        if not message.ok:
            self.publish = message
            self.event.set()


class ReplyRouter:
    """The process's reply queue and the calls waiting on it."""

    def __init__(self, conn: RabbitConnection, topology: Topology, codec: BodyCodec,
                 reconnect_delay: float) -> None:
        self.queue = topology.reply_queue()
        self._codec = codec
        self._waiters: dict[str, _Waiter] = {}
        self._dedup = DedupCache()
        self.consumer = QueueConsumer(conn, [self.queue], prefetch=0, auto_ack=True,
                                      on_delivery=self._io_on_reply, name="replies",
                                      reconnect_delay=reconnect_delay)
        self.consumer.start()

    @property
    def name(self) -> str:
        return self.queue.name

    def register(self, msg_id: str) -> _Waiter:
        waiter = _Waiter()
        self._waiters[msg_id] = waiter
        return waiter

    def unregister(self, msg_id: str) -> None:
        self._waiters.pop(msg_id, None)

    def close(self) -> None:
        self.consumer.close()

    def read_while_waiting(self, done: Callable[[], bool], timeout: float) -> None:
        """Read the replies on this thread until ``done()`` (see ``RabbitConnection``).

        A failed publish of the request (on the other connection) is noticed
        within 50 ms; a reply at once.
        """
        self.consumer.conn.read_while_waiting(done, timeout, recheck=0.05)

    def _io_on_reply(self, delivery: Delivery) -> None:
        try:
            data = self._codec.decode(delivery.body, delivery.properties)
        except DecodeError as exc:
            LOG.warning("Ignoring an undecodable reply on %s: %s", self.queue.name, exc)
            return
        msg_id = data.pop("_msg_id", None)
        unique_id = data.pop("_unique_id", None)
        if unique_id and self._dedup.seen(unique_id):
            LOG.debug("Dropping duplicate reply %s", unique_id)
            return
        waiter = self._waiters.get(msg_id) if msg_id else None
        if waiter is None:
            LOG.debug("Reply to %s arrived after its caller stopped waiting", msg_id)
            return
        waiter.deliver(data)


class RpcSender:
    """Sends calls and casts; one per driver."""

    def __init__(self, conn: RabbitConnection, publisher: Publisher, topology: Topology,
                 codec: BodyCodec, router: Callable[[float], ReplyRouter],
                 allowed_remote_exmods: list[str], connect_timeout: float, send_timeout: float) -> None:
        self._conn = conn
        self._publisher = publisher
        self._topology = topology
        self._codec = codec
        self._router = router
        self._allowed = allowed_remote_exmods
        self._connect_timeout = connect_timeout
        self._send_timeout = send_timeout

    def route(self, target: Target) -> tuple[ExchangeSpec, str]:
        if not target.topic:
            raise InvalidTarget("A topic is required to send", target)
        if target.fanout:
            return self._topology.fanout_exchange(target.topic), target.topic
        key = server_routing_key(target.topic, target.server) if target.server else target.topic
        return self._topology.topic_exchange(target.exchange), key

    def _check_connection(self, retry: int | None, deadline: float | None = None) -> None:
        """Fail fast on a refused login or vhost, and when ``retry=0`` finds no connection."""
        if self._conn.is_open:
            return
        if self._conn.fatal_error is not None:
            raise self._conn.fatal_error
        wait = self._connect_timeout
        if deadline is not None:
            wait = max(0.0, min(wait, deadline - time.monotonic()))
        if retry == 0 and not self._conn.wait_open(
                wait, max_failures=len(self._conn.settings.endpoints)):
            raise MessageDeliveryFailure(f"Not connected to RabbitMQ and retry=0: "
                                         f"{self._conn.last_error or 'connecting'}")

    def call(self, target: Target, ctxt: dict, message: dict, timeout: float,
             retry: int | None, call_monitor_timeout: float | None,
             transport_options: Any = None) -> Any:
        """Send a request and wait for its reply.

        While no queue is bound to the routing key the request is published
        again until the timeout (a server may be starting), unless
        ``transport_options`` asks for ``at_least_once``: then the broker's
        return raises :class:`MessageUndeliverable` at once, as in oslo.
        """
        if target.fanout:
            raise InvalidTarget("A call cannot be used with fanout", target)
        deadline = time.monotonic() + timeout
        exchange, key = self.route(target)
        self._check_connection(retry, deadline)
        router = self._router(deadline)
        msg_id = uuid.uuid4().hex
        msg = dict(message)
        msg["_msg_id"] = msg_id
        msg["_reply_q"] = router.name
        msg["_timeout"] = call_monitor_timeout
        msg["_unique_id"] = uuid.uuid4().hex
        body = self._codec.encode(msg, ctxt)
        waiter = router.register(msg_id)
        unroutable = 0
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                waiter.publish = None
                waiter.event.clear()
                pending = PendingPublish(exchange, key, body, self._codec.properties(remaining),
                                         mandatory=True, retry=retry, on_done=waiter.on_publish_done)
                self._publisher.publish(pending)
                if self._wait(router, waiter, deadline, call_monitor_timeout):
                    return self._outcome(waiter)
                failed = waiter.publish
                if failed is None:  # deadline (or call-monitor) expired
                    pending.cancel()
                    break
                if failed.error is not None:
                    raise failed.error
                if _at_least_once(transport_options):
                    raise MessageUndeliverable(failed.returned, exchange.name, key, message)
                unroutable += 1  # no queue yet: a server may be starting
                LOG.debug("Call %s to %s: no queue bound yet (%s); retrying", msg_id, key, failed.returned)
                NO_QUEUE_BACKOFF.wait(unroutable, deadline=deadline)
        finally:
            router.unregister(msg_id)
        detail = (f"; no queue is bound to routing key {key!r} on exchange {exchange.name!r} "
                  f"(no server listening)" if unroutable else "")
        raise MessagingTimeout(f"Timed out waiting for a reply to message ID {msg_id} "
                               f"(topic {key!r}, {timeout:g}s){detail}")

    @staticmethod
    def _wait(router: ReplyRouter, waiter: _Waiter, deadline: float,
              call_monitor_timeout: float | None) -> bool:
        """Wait for the reply: True once it ended; False on timeout or a publishing problem."""
        monitor_deadline = None
        seen_heartbeats = waiter.heartbeats
        if call_monitor_timeout:
            monitor_deadline = time.monotonic() + call_monitor_timeout
        while True:
            now = time.monotonic()
            limit = deadline if monitor_deadline is None else min(deadline, monitor_deadline)
            router.read_while_waiting(waiter.event.is_set, limit - now)
            if waiter.event.wait(max(0.0, limit - time.monotonic())):
                return waiter.done
            if monitor_deadline is not None and waiter.heartbeats != seen_heartbeats:
                seen_heartbeats = waiter.heartbeats
                monitor_deadline = time.monotonic() + call_monitor_timeout  # type: ignore[operator]
                continue
            return False

    def _outcome(self, waiter: _Waiter) -> Any:
        if waiter.failure:
            raise deserialize_remote_exception(waiter.failure, self._allowed)
        return waiter.result

    def cast(self, target: Target, ctxt: dict, message: dict, retry: int | None,
             transport_options: Any = None) -> None:
        exchange, key = self.route(target)
        self._check_connection(retry)
        msg = dict(message)
        msg["_unique_id"] = uuid.uuid4().hex
        body = self._codec.encode(msg, ctxt)
        pending = PendingPublish(exchange, key, body, self._codec.properties(), mandatory=True,
                                 retry=retry)
        if not self._publisher.publish_and_wait(pending, self._send_timeout or None):
            pending.cancel()
            raise MessageDeliveryFailure(f"RabbitMQ did not confirm the cast to {key!r} within "
                                         f"{self._send_timeout:g}s: {self._conn.last_error or 'no answer'}")
        if pending.error is not None:
            raise pending.error
        if pending.returned:
            if _at_least_once(transport_options):
                raise MessageUndeliverable(pending.returned, exchange.name, key, message)
            level = logging.INFO if target.fanout else logging.WARNING
            LOG.log(level, "Cast of %r to %s/%s was not delivered: no server listens (%s)",
                    message.get("method"), exchange.name, key, pending.returned)


def _at_least_once(transport_options: Any) -> bool:
    if transport_options is None:
        return False
    if isinstance(transport_options, dict):
        return bool(transport_options.get("at_least_once"))
    return bool(getattr(transport_options, "at_least_once", False))


class Replier:
    """Sends replies; waits for a missing reply queue in the background, as oslo does."""

    OBSOLETE_TTL = 60.0
    OBSOLETE_SIZE = 200

    def __init__(self, conn: RabbitConnection, publisher: Publisher, codec: BodyCodec,
                 missing_queue_timeout: float) -> None:
        self._conn = conn
        self._publisher = publisher
        self._codec = codec
        self._timeout = missing_queue_timeout
        #: reply queues found missing for good: replies to them are dropped for a while
        self._obsolete: TTLCache[str, bool] = TTLCache(self.OBSOLETE_SIZE, self.OBSOLETE_TTL,
                                                       timer=time.monotonic)
        self._lock = threading.Lock()  # cachetools' caches are not thread-safe

    def reply(self, msg_id: str, reply_q: str, result: Any = None, failure: Any = None,
              ending: bool = True) -> None:
        if self._is_obsolete(reply_q):
            LOG.warning("%s doesn't exist, drop reply to %s", reply_q, msg_id)
            return
        if failure is not None and not isinstance(failure, str):
            failure = serialize_remote_exception(failure)
        msg = {"result": result, "failure": failure, "ending": ending, "_msg_id": msg_id,
               "_unique_id": uuid.uuid4().hex}
        body = self._codec.encode(msg, None)
        self._send(body, msg_id, reply_q, time.monotonic(), 1)

    def _send(self, body: bytes, msg_id: str, reply_q: str, started: float, attempt: int) -> None:
        def done(message: PendingPublish) -> None:
            if message.ok:
                return
            if message.returned and time.monotonic() - started < self._timeout:
                self._conn.call_later(MISSING_REPLY_QUEUE_BACKOFF.delay(attempt),
                                      lambda: self._send(body, msg_id, reply_q, started, attempt + 1))
            elif message.returned:
                self._mark_obsolete(reply_q)
                LOG.error("The reply %s failed to send after %d seconds due to a missing queue "
                          "(%s). Abandoning...", msg_id, self._timeout, reply_q)
            else:
                LOG.error("The reply %s to %s could not be sent: %s", msg_id, reply_q, message.error)

        self._publisher.publish(PendingPublish(DEFAULT_EXCHANGE, reply_q, body, self._codec.properties(),
                                               mandatory=True, retry=None, on_done=done))

    def _is_obsolete(self, reply_q: str) -> bool:
        with self._lock:
            return reply_q in self._obsolete

    def _mark_obsolete(self, reply_q: str) -> None:
        with self._lock:
            self._obsolete[reply_q] = True


class RpcIncomingMessage(IncomingMessage):
    """A request received by an RPC server; :meth:`reply` answers a call."""

    __slots__ = ("msg_id", "reply_q", "client_timeout", "unique_id", "_replier")

    def __init__(self, ctxt: dict, message: dict, delivery: Delivery, replier: Replier,
                 msg_id: str | None, reply_q: str | None, client_timeout: Any,
                 unique_id: str | None) -> None:
        super().__init__(ctxt, message, topic=delivery.routing_key, offset=delivery.delivery_tag,
                         headers=None, raw=delivery.body)
        self.msg_id = msg_id
        self.reply_q = reply_q
        self.client_timeout = client_timeout
        self.unique_id = unique_id
        self._replier = replier

    def __repr__(self) -> str:
        return f"<RpcIncomingMessage method={self.message.get('method')!r} msg_id={self.msg_id}>"

    def reply(self, reply: Any = None, failure: Any = None) -> None:
        """Answer the call (nothing to do for a cast). ``failure`` is an exception or exc_info."""
        if self.msg_id and self.reply_q:
            self._replier.reply(self.msg_id, self.reply_q, reply, failure)

    def heartbeat(self) -> None:
        """Tell a caller using a call-monitor timeout that the call is still running."""
        if self.msg_id and self.reply_q:
            self._replier.reply(self.msg_id, self.reply_q, None, None, ending=False)


class RpcListener(Listener):
    """The queues of one RPC server: its topic, ``topic.server`` and its fanout queue."""

    def __init__(self, conn: RabbitConnection, topology: Topology, codec: BodyCodec,
                 replier: Replier, target: Target, prefetch: int, reconnect_delay: float) -> None:
        super().__init__()
        if not (target.topic and target.server):
            raise InvalidTarget("A server's target must have topic and server names specified",
                                target)
        self.target = target
        self._codec = codec
        self._replier = replier
        self._dedup = DedupCache()
        self._duplicates = RateLimitedLog(LOG, interval=DUPLICATES_LOG_INTERVAL)
        queues = topology.rpc_queues(target.exchange, target.topic, target.server)
        # Requests are acknowledged when poll() hands them out, before dispatch (as
        # oslo does: a call runs at most once). Not on delivery: with automatic
        # acknowledgement the broker forgets a request as soon as it sends it, and
        # one still on its way when the connection is cut was lost.
        self.consumer = QueueConsumer(conn, queues, prefetch=prefetch, auto_ack=False,
                                      name=f"rpc {target.topic}.{target.server}",
                                      reconnect_delay=reconnect_delay)

    def __repr__(self) -> str:
        return f"<RpcListener {self.target.topic}.{self.target.server}>"

    def start(self) -> None:
        """Return once the three queues are consumed (raises if the broker refuses)."""
        self.consumer.start_and_wait()

    def poll(self, timeout: float | None = None, max_messages: int = 1) -> list[IncomingMessage]:
        deliveries = self.consumer.get(timeout, max_messages)
        self._duplicates.summarize_due()
        if not deliveries:
            return []
        self.consumer.ack(deliveries)
        out: list[IncomingMessage] = []
        for delivery in deliveries:
            try:
                data = self._codec.decode(delivery.body, delivery.properties)
            except DecodeError as exc:
                LOG.error("%r: dropping an undecodable request from exchange %r routing key %r: %s",
                          self, delivery.method.exchange, delivery.routing_key, exc)
                continue
            unique_id = data.pop("_unique_id", None)
            if unique_id and self._dedup.seen(unique_id):
                self._duplicates.log(logging.WARNING, "duplicate", "%r: dropping duplicate message %s", self,
                                         unique_id)
                continue
            msg_id = data.pop("_msg_id", None)
            reply_q = data.pop("_reply_q", None)
            client_timeout = data.pop("_timeout", None)
            ctxt, message = envelope.split_context(data)
            out.append(RpcIncomingMessage(ctxt, message, delivery, self._replier, msg_id, reply_q,
                                          client_timeout, unique_id))
        return out

    def stop(self) -> None:
        super().stop()
        self.consumer.stop()

    def cleanup(self) -> None:
        self.consumer.close()
        self._duplicates.summarize()
