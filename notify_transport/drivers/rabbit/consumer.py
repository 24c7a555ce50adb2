"""Consuming a set of queues on one channel, set up again after every reconnect.

Each (re)opened channel gets its prefetch, ``nowait`` declarations and
consumers; the consumer is *ready* once every ``Basic.ConsumeOk`` arrived.
Deliveries go to a callback (replies) or a buffer that a polling thread may
fill by reading the connection itself. A message whose channel is gone is not
acked: the broker has requeued it.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable

import pika
import pika.exceptions as pex
from pika.channel import Channel

from notify_transport.backoff import Backoff
from notify_transport.drivers.rabbit.connection import ChannelUser, RabbitConnection, describe
from notify_transport.drivers.rabbit.topology import QueueSpec
from notify_transport.exceptions import MessageDeliveryFailure

LOG = logging.getLogger(__name__)


class Delivery:
    """One message as the broker delivered it."""

    __slots__ = ("channel", "method", "properties", "body")

    def __init__(self, channel: Channel, method: pika.spec.Basic.Deliver,
                 properties: pika.BasicProperties, body: bytes) -> None:
        self.channel = channel
        self.method = method
        self.properties = properties
        self.body = body

    @property
    def routing_key(self) -> str:
        return self.method.routing_key

    @property
    def delivery_tag(self) -> int:
        return self.method.delivery_tag

    def __repr__(self) -> str:
        return (f"<Delivery exchange={self.method.exchange!r} routing_key={self.method.routing_key!r} "
                f"tag={self.method.delivery_tag}>")


class QueueConsumer(ChannelUser):
    """Consumes ``queues`` with one channel of ``conn``."""

    def __init__(self, conn: RabbitConnection, queues: list[QueueSpec], prefetch: int = 0,
                 auto_ack: bool = False, on_delivery: Callable[[Delivery], None] | None = None,
                 name: str = "consumer", reconnect_delay: float = 1.0) -> None:
        self.conn = conn
        self.queues = list(queues)
        self.prefetch = prefetch
        self.auto_ack = auto_ack
        self.name = name
        self._on_delivery = on_delivery
        self._reconnect_delay = max(reconnect_delay, 0.05)
        #: Spacing of the channel's reopening after the broker closed it n times in a row.
        self._reopen = Backoff(initial=0.05, factor=2.0, maximum=self._reconnect_delay)
        self._channel: Channel | None = None
        self._tags: list[str] = []
        self._pending_consumes = 0
        self._ready = threading.Event()
        self._cond = threading.Condition()
        self._buffer: collections.deque[Delivery] = collections.deque()
        self._local = threading.local()  # .reading: this thread reads for get()
        self._stopping = False
        self._failures = 0
        self._settle_lock = threading.Lock()
        self._to_settle: list[tuple[list[Delivery], bool, bool]] = []
        self._settle_scheduled = False
        #: A channel error that retrying will not fix (e.g. no permission on a queue).
        self.setup_error: MessageDeliveryFailure | None = None

    def __repr__(self) -> str:
        return f"<QueueConsumer {self.name} queues={[q.name for q in self.queues]}>"

    def start(self) -> None:
        self.conn.add_user(self)

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def wait_ready(self, timeout: float | None) -> bool:
        """Wait until every queue is consumed; raise if the broker refuses for good."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ready.wait(0.05 if deadline is None else
                                   max(0.0, min(0.05, deadline - time.monotonic()))):
            if self.conn.fatal_error is not None:
                raise self.conn.fatal_error
            if self.setup_error is not None:
                raise self.setup_error
            if deadline is not None and time.monotonic() >= deadline:
                return False
        return True

    def start_and_wait(self) -> None:
        """Start consuming and return once every queue is consumed.

        Waits as long as the broker is unreachable (logging every 5 s, since
        the connection keeps retrying) and raises if the broker refuses.
        """
        self.start()
        waited = 0.0
        while not self.wait_ready(5.0):
            waited += 5.0
            LOG.warning("%s: still waiting for RabbitMQ after %.0fs: %s", self.name, waited,
                        self.conn.last_error or "connecting")

    def get(self, timeout: float | None, max_messages: int = 1) -> list[Delivery]:
        """Up to ``max_messages`` buffered deliveries; ``[]`` after ``timeout`` or once stopped and drained."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._buffer and not self._stopping:
            # Read the deliveries on this thread if no other thread does: no hand-off.
            self._local.reading = True
            try:
                # stop() is heard through the socket too: it cancels the consumers
                self.conn.read_while_waiting(self._has_news, timeout, recheck=0.25)
            finally:
                self._local.reading = False
        with self._cond:
            while not self._buffer:
                if self._stopping:
                    return []
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return []
                self._cond.wait(remaining)
            count = min(max_messages, len(self._buffer))
            return [self._buffer.popleft() for _ in range(count)]

    def _has_news(self) -> bool:
        return bool(self._buffer) or self._stopping

    def ack(self, deliveries: list[Delivery]) -> None:
        if deliveries and not self.auto_ack:
            self._settle(deliveries, ack=True, requeue=False)

    def reject(self, deliveries: list[Delivery], requeue: bool) -> None:
        if deliveries and not self.auto_ack:
            self._settle(deliveries, ack=False, requeue=requeue)

    def _settle(self, deliveries: list[Delivery], ack: bool, requeue: bool) -> None:
        # Settlements queue up and one I/O callback sends all that are waiting:
        # a listener acking message by message does not wake the I/O thread each
        # time, and when the loop is free this thread sends them itself.
        with self._settle_lock:
            self._to_settle.append((deliveries, ack, requeue))
            if self._settle_scheduled:
                return
            self._settle_scheduled = True
        try:
            if not self.conn.try_run_locked(self._io_settle_pending):
                self.conn.call_soon(self._io_settle_pending)
        except MessageDeliveryFailure:
            LOG.debug("%r: connection closed; the broker requeues unacked messages", self)

    def _io_settle_pending(self) -> None:
        with self._settle_lock:
            pending, self._to_settle = self._to_settle, []
            self._settle_scheduled = False
        for deliveries, ack, requeue in pending:
            self._io_settle(deliveries, ack, requeue)

    def stop(self) -> None:
        """Stop consuming; buffered messages can still be polled and settled."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        try:
            self.conn.call_soon(self._io_cancel)
        except MessageDeliveryFailure:
            pass

    def close(self, timeout: float = 5.0) -> None:
        """Stop, delete the per-server queues and close the channel."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self.conn.remove_user(self, timeout)
        self._ready.clear()

    def io_channel_open(self, channel: Channel) -> None:
        self._channel = channel
        if self._stopping:
            return
        channel.add_on_cancel_callback(self._io_on_cancel)
        if self.prefetch > 0:
            channel.basic_qos(prefetch_count=self.prefetch)
        declared: set[str] = set()
        passive = self.conn.passive_names
        self._tags = []
        self._pending_consumes = len(self.queues)
        # Every queue and binding first, then the consumers: once any queue is
        # consumed, all of them exist (the broker handles a channel in order).
        for queue in self.queues:
            for exchange, _key in queue.bindings:
                if exchange.name and exchange.name not in declared:
                    channel.exchange_declare(exchange.name, exchange.type,
                                             passive=exchange.name in passive,
                                             durable=exchange.durable,
                                             auto_delete=exchange.auto_delete)
                    declared.add(exchange.name)
            channel.queue_declare(queue.name, passive=queue.name in passive, durable=queue.durable,
                                  auto_delete=queue.auto_delete, arguments=queue.arguments or None)
            for exchange, key in queue.bindings:
                channel.queue_bind(queue.name, exchange.name, key)
        for queue in self.queues:
            tag = channel.basic_consume(queue.name, self._io_on_message, auto_ack=self.auto_ack,
                                        arguments=queue.consumer_arguments,
                                        callback=lambda _frame: self._io_consume_ok(channel))
            self._tags.append(tag)

    def _io_consume_ok(self, channel: Channel) -> None:
        if channel is not self._channel:
            return
        self._pending_consumes -= 1
        if self._pending_consumes == 0:
            self._failures = 0
            self.setup_error = None
            self._ready.set()
            LOG.debug("%r: consuming", self)

    def _io_on_message(self, channel: Channel, method: pika.spec.Basic.Deliver,
                       properties: pika.BasicProperties, body: bytes) -> None:
        delivery = Delivery(channel, method, properties, body)
        if self._on_delivery is not None:
            self._on_delivery(delivery)
            return
        with self._cond:
            # A getter reading on its own thread takes the first delivery itself:
            # waking another one for it would only make them contend.
            own = not self._buffer and getattr(self._local, "reading", False)
            self._buffer.append(delivery)
            if not own:
                self._cond.notify()

    def _io_settle(self, deliveries: list[Delivery], ack: bool, requeue: bool) -> None:
        for delivery in deliveries:
            channel = delivery.channel
            if not channel.is_open:
                continue  # the broker requeued it when the channel closed
            try:
                if ack:
                    channel.basic_ack(delivery.delivery_tag)
                else:
                    channel.basic_reject(delivery.delivery_tag, requeue=requeue)
            except (pex.ChannelWrongStateError, pex.ChannelClosed, pex.ConnectionClosed,
                    pex.StreamLostError):
                continue

    def _io_cancel(self) -> None:
        channel = self._channel
        if channel is None or not channel.is_open:
            return
        for tag in self._tags:
            try:
                channel.basic_cancel(tag)
            except (pex.ChannelWrongStateError, pex.ChannelClosed):
                break
        self._tags = []

    def _io_on_cancel(self, frame: pika.frame.Method) -> None:
        channel = self._channel
        if self._stopping or channel is None:
            return
        LOG.warning("%r: the broker cancelled consuming (queue deleted or moved); "
                    "declaring the queues again", self)
        if channel.is_open:
            channel.close()

    def io_channel_closed(self, channel: Channel, reason: BaseException) -> None:
        if channel is not self._channel:
            return
        self._channel = None
        self._tags = []
        self._ready.clear()
        if not self.auto_ack:
            with self._cond:
                # The broker requeues what the channel held; it comes again on the next one.
                self._buffer = collections.deque(d for d in self._buffer if d.channel is not channel)
        if self._stopping:
            return
        if isinstance(reason, pex.ChannelClosedByBroker):
            self._failures += 1
            if self.conn.note_entity_error(reason):
                LOG.warning("%r: channel closed by the broker: %s", self, describe(reason))
            else:
                self.setup_error = MessageDeliveryFailure(
                    f"RabbitMQ refused consuming {[q.name for q in self.queues]} on virtual host "
                    f"{self.conn.settings.virtual_host!r}: {describe(reason)}")
                LOG.error("%s", self.setup_error)

    def io_reopen_delay(self, reason: BaseException) -> float | None:
        if self._stopping:
            return None
        if self.setup_error is not None:
            return max(self._reconnect_delay, 5.0)
        return self._reopen.delay(self._failures + 1)  # a first, lone closing: 0.05 s

    def io_before_close(self, channel: Channel) -> None:
        for queue in self.queues:
            if queue.delete_on_close:
                channel.queue_delete(queue.name)
