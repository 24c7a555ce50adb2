"""Publishing with publisher confirms on one channel, many messages in flight.

Callers publish a :class:`PendingPublish` themselves under the connection's I/O
lock and wait on it (callbacks run once the lock is let go); when the lock is
busy, messages queue in an outbox that one wake-up of the I/O thread publishes.
Declarations are ``nowait`` (processed in channel order before the publish).
Messages whose channel was lost before the confirm are published again after
the reconnect, within their ``retry`` budget (``_unique_id`` lets receivers drop
the duplicate).
"""
from __future__ import annotations

import collections
import functools
import logging
import threading
import time
from typing import Callable

import pika
import pika.exceptions as pex
from pika.channel import Channel

from notify_transport.backoff import Backoff
from notify_transport.drivers.rabbit.connection import ChannelUser, RabbitConnection, describe
from notify_transport.drivers.rabbit.topology import ExchangeSpec, QueueSpec
from notify_transport.drivers.reporting import RateLimitedLog
from notify_transport.exceptions import AccessDenied, MessageDeliveryFailure

LOG = logging.getLogger(__name__)

#: Channel errors a message may meet (e.g. a fanout exchange deleted under it) before failing.
MAX_CHANNEL_ERRORS = 5
#: Spacing of the publishing channel's reopening after channel errors in a row (until a confirm).
REOPEN_BACKOFF = Backoff(initial=0.02, factor=2.0, maximum=2.0)
#: Waits before publishing a nacked message again. A cluster nacks while a quorum queue has no
#: leader (a node just died): publishing again at once would only be nacked again, in a loop that
#: keeps the I/O thread busy. The sender's own timeout (it cancels the message) bounds the retries.
NACK_BACKOFF = Backoff(initial=0.05, factor=2.0, maximum=2.0, jitter=0.05)


class PendingPublish:
    """One message until the broker confirmed it, returned it, or it failed."""

    __slots__ = ("exchange", "routing_key", "body", "properties", "mandatory", "queue", "retry",
                 "attempts", "channel_errors", "returned", "error", "cancelled", "pending_return",
                 "on_done", "_done", "_unfinished", "_settling")

    def __init__(self, exchange: ExchangeSpec, routing_key: str, body: bytes,
                 properties: pika.BasicProperties, mandatory: bool = False,
                 queue: QueueSpec | None = None, retry: int | None = None,
                 on_done: Callable[["PendingPublish"], None] | None = None) -> None:
        self.exchange = exchange
        self.routing_key = routing_key
        self.body = body
        self.properties = properties
        self.mandatory = mandatory
        self.queue = queue
        self.retry = None if retry is None or retry < 0 else retry
        self.attempts = 0
        self.channel_errors = 0
        #: "<code> <text>" when the broker returned the message as unroutable
        self.returned: str | None = None
        self.error: BaseException | None = None
        self.cancelled = False
        self.pending_return: str | None = None
        self._done = False
        # Held until finished: waiting is acquiring it (a bare lock, cheaper than an Event).
        self._unfinished = threading.Lock()
        self._unfinished.acquire()
        # Taken by the one finish() that settles the outcome.
        self._settling = threading.Lock()
        #: called with the message once it is done, outside the connection's lock
        self.on_done = on_done

    def __repr__(self) -> str:
        return f"<PendingPublish {self.exchange.name or '(default)'}/{self.routing_key}>"

    @property
    def done(self) -> bool:
        return self._done

    @property
    def ok(self) -> bool:
        """Confirmed by the broker and routed to at least one queue."""
        return self._done and self.error is None and self.returned is None

    def wait(self, timeout: float | None = None) -> bool:
        if self._done:
            return True
        if self._unfinished.acquire(True, -1 if timeout is None else max(timeout, 0.0)):
            self._unfinished.release()  # for any other waiter
        return self._done

    def cancel(self) -> None:
        """The sender gave up: do not publish it if it has not gone out yet."""
        self.cancelled = True

    def finish(self, error: BaseException | None = None, returned: str | None = None) -> bool:
        """Settle the outcome and release the waiters, once; True for the call that did.

        Thread-safe: of two concurrent calls one outcome wins whole; the winner owes ``on_done``.
        """
        if not self._settling.acquire(False):
            return False
        self.error = error
        self.returned = returned
        self._done = True
        self._unfinished.release()
        return True

    def run_on_done(self) -> None:
        """Call ``on_done`` (a failing one is logged)."""
        if self.on_done is not None:
            try:
                self.on_done(self)
            except Exception:
                LOG.exception("Callback of %r failed", self)


class Publisher(ChannelUser):
    """The publishing channel of a connection."""

    name = "publisher"

    def __init__(self, conn: RabbitConnection, confirms: bool = True) -> None:
        self.conn = conn
        self.confirms = confirms
        self._channel: Channel | None = None
        self._ready = False
        self._next_tag = 1
        self._backlog: collections.deque[PendingPublish] = collections.deque()
        self._unconfirmed: dict[int, PendingPublish] = {}
        self._by_key: dict[str, PendingPublish] = {}
        self._declared: set[str] = set()
        self._declared_queues: set[str] = set()
        self._reopen_failures = 0
        self._nacks = RateLimitedLog(LOG, interval=5.0)
        #: nacked messages waiting out NACK_BACKOFF before they are published again
        self._waiting: set[PendingPublish] = set()
        #: Messages from other threads waiting for the I/O thread, and whether it was woken for them.
        self._outbox: collections.deque[PendingPublish] = collections.deque()
        self._outbox_lock = threading.Lock()
        self._outbox_scheduled = False
        conn.add_user(self)

    def publish(self, message: PendingPublish) -> PendingPublish:
        """Publish ``message`` (thread-safe) and return it; it completes when the broker confirms.

        Under the connection's lock when free, else through the outbox. Raises
        ``MessageDeliveryFailure`` when the connection is closed.
        """
        if self.conn.in_io_thread():
            self._io_send(message)
            return message
        # The lock free and nothing queued before (a thread's messages keep their order):
        # publish here; else the I/O thread, busy anyway, takes it with the others.
        if not self._outbox and self.conn.try_run_locked(self._io_send, message):
            return message
        with self._outbox_lock:
            self._outbox.append(message)
            if self._outbox_scheduled:
                return message
            self._outbox_scheduled = True
        try:
            self.conn.call_soon(self._io_flush_outbox)
        except MessageDeliveryFailure as exc:
            self._fail_outbox(exc)
            raise
        return message

    def publish_and_wait(self, message: PendingPublish, timeout: float | None) -> bool:
        """Publish ``message`` and wait until it is done; False on timeout.

        The confirm is read on this thread when no other thread reads the
        channel's connection (taken over before the publish, so that the
        I/O thread is not woken for it), else awaited from whoever reads.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.conn.in_io_thread() or not self.conn.read_while_waiting(
                lambda: message.done, timeout, first=lambda: self._io_send(message)):
            self.publish(message)
        return message.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def _finish(self, message: PendingPublish, error: BaseException | None = None,
                returned: str | None = None) -> None:
        """Settle ``message``; its ``on_done`` runs once this thread lets go of the connection's lock."""
        if message.finish(error, returned) and message.on_done is not None:
            self.conn.call_unlocked(message.run_on_done)

    def _take_outbox(self) -> collections.deque[PendingPublish]:
        with self._outbox_lock:
            batch, self._outbox = self._outbox, collections.deque()
            self._outbox_scheduled = False
        return batch

    def _fail_outbox(self, error: BaseException) -> None:
        for message in self._take_outbox():
            self._finish(message, error=error)

    def _io_flush_outbox(self) -> None:
        """Publish every message queued by other threads since the last wake-up."""
        for message in self._take_outbox():
            self._io_send(message)

    def io_channel_open(self, channel: Channel) -> None:
        self._channel = channel
        channel.add_on_return_callback(self._io_on_return)
        if self.confirms:
            channel.confirm_delivery(ack_nack_callback=self._io_on_confirm,
                                     callback=lambda _frame: self._io_ready(channel))
        else:
            self._io_ready(channel)

    def _io_ready(self, channel: Channel) -> None:
        if channel is not self._channel:
            return
        self._ready = True
        self._next_tag = 1
        self._declared.clear()
        self._declared_queues.clear()
        backlog, self._backlog = self._backlog, collections.deque()
        for message in backlog:
            self._io_send(message)

    def _io_send(self, message: PendingPublish) -> None:
        if message.done:
            return
        if message.cancelled:
            self._finish(message, error=MessageDeliveryFailure("cancelled by the sender"))
            return
        channel = self._channel
        if not self._ready or channel is None or not channel.is_open:
            self._backlog.append(message)
            return
        tag = self._next_tag
        try:
            self._io_declare(channel, message)
            if message.mandatory:
                key = str(tag)
                message.properties.message_id = key
                self._by_key[key] = message
            channel.basic_publish(message.exchange.name, message.routing_key, message.body,
                                  message.properties, mandatory=message.mandatory)
        except (pex.ChannelWrongStateError, pex.ChannelClosed, pex.ConnectionClosed,
                pex.StreamLostError, pex.ConnectionWrongStateError):
            self._by_key.pop(str(tag), None)
            self._backlog.append(message)
            return
        except Exception as exc:  # e.g. a body pika cannot frame
            self._by_key.pop(str(tag), None)
            self._finish(message, error=MessageDeliveryFailure(f"cannot publish: {exc}"))
            return
        self._next_tag = tag + 1
        if self.confirms:
            self._unconfirmed[tag] = message
        else:
            self._by_key.pop(str(tag), None)
            self._finish(message)

    def _io_send_again(self, message: PendingPublish) -> None:
        """Publish a nacked message once its wait is over (unless closing failed it meanwhile)."""
        if message in self._waiting:
            self._waiting.discard(message)
            self._io_send(message)

    def _io_declare(self, channel: Channel, message: PendingPublish) -> None:
        exchange = message.exchange
        if exchange.name and exchange.name not in self._declared:
            self._io_declare_exchange(channel, exchange)
        queue = message.queue
        if queue is not None and queue.name not in self._declared_queues:
            channel.queue_declare(queue.name, passive=queue.name in self.conn.passive_names,
                                  durable=queue.durable, auto_delete=queue.auto_delete,
                                  arguments=queue.arguments or None)
            for bound_exchange, routing_key in queue.bindings:
                if bound_exchange.name not in self._declared:
                    self._io_declare_exchange(channel, bound_exchange)
                channel.queue_bind(queue.name, bound_exchange.name, routing_key)
            self._declared_queues.add(queue.name)

    def _io_declare_exchange(self, channel: Channel, exchange: ExchangeSpec) -> None:
        channel.exchange_declare(exchange.name, exchange.type,
                                 passive=exchange.name in self.conn.passive_names,
                                 durable=exchange.durable, auto_delete=exchange.auto_delete)
        self._declared.add(exchange.name)

    def _io_on_return(self, channel: Channel, method: pika.spec.Basic.Return,
                      properties: pika.BasicProperties, body: bytes) -> None:
        message = self._by_key.get(properties.message_id or "")
        reason = f"{method.reply_code} {method.reply_text}"
        if message is None:
            LOG.warning("Message to exchange %r routing key %r returned by the broker: %s",
                        method.exchange, method.routing_key, reason)
            return
        if self.confirms:
            message.pending_return = reason  # completed by the ack that follows
        else:
            message.returned = reason

    def _io_on_confirm(self, frame: pika.frame.Method) -> None:
        method = frame.method
        self._io_confirmed(method.delivery_tag, method.multiple,
                           isinstance(method, pika.spec.Basic.Ack))

    def _io_confirmed(self, tag: int, multiple: bool, acked: bool) -> None:
        if multiple:
            tags = []
            for pending_tag in self._unconfirmed:
                if pending_tag > tag:
                    break
                tags.append(pending_tag)
        else:
            tags = [tag]
        if acked:
            self._reopen_failures = 0
        nacked = False
        for pending_tag in tags:
            message = self._unconfirmed.pop(pending_tag, None)
            if message is None:
                continue
            self._by_key.pop(str(pending_tag), None)
            if acked:
                self._finish(message, returned=message.pending_return)
            else:
                message.attempts += 1
                if message.retry is not None and message.attempts > message.retry:
                    self._finish(message, error=MessageDeliveryFailure(
                        "the broker rejected (nacked) the message"))
                else:
                    delay = NACK_BACKOFF.delay(message.attempts)
                    self._nacks.log(logging.WARNING, message.exchange.name,
                                    "The broker nacked a message to %r; publishing it again in %.2f s",
                                    message.exchange.name, delay)
                    self._waiting.add(message)
                    self.conn.call_later(delay, functools.partial(self._io_send_again, message))
                    nacked = True
        if nacked:
            self._io_recycle_channel()

    def _io_recycle_channel(self) -> None:
        """Close the publishing channel after a nack; the connection opens a new one.

        A channel keeps what it learnt of a quorum queue's members: after the
        leader's node died, RabbitMQ 3.10 went on nacking every publish on the
        channels that had used the queue, while a new channel published at
        once (seen in the cluster tests). Messages not yet confirmed are sent
        again on the new channel, the nacked ones after their backoff.
        """
        channel = self._channel
        if channel is not None and channel.is_open and self._ready:
            self._ready = False  # one close per channel, however many nacks follow
            LOG.info("Reopening the publishing channel after a nack")
            try:
                channel.close()
            except (pex.ChannelWrongStateError, pex.ConnectionWrongStateError):
                pass

    def io_channel_closed(self, channel: Channel, reason: BaseException) -> None:
        if channel is not self._channel:
            return
        self._channel = None
        self._ready = False
        lost = list(self._unconfirmed.values())
        self._unconfirmed.clear()
        self._by_key.clear()
        channel_error = isinstance(reason, pex.ChannelClosedByBroker)
        retry_may_help = self.conn.note_entity_error(reason) if channel_error else True
        if channel_error:
            LOG.warning("Publishing channel closed by the broker: %s", describe(reason))
        for message in reversed(lost):
            message.pending_return = None
            if channel_error:
                message.channel_errors += 1
                if not retry_may_help or message.channel_errors > MAX_CHANNEL_ERRORS:
                    self._finish(message, error=MessageDeliveryFailure(
                        f"publishing to exchange {message.exchange.name!r} failed: {describe(reason)}"))
                    continue
            else:
                message.attempts += 1
                if message.retry is not None and message.attempts > message.retry:
                    self._finish(message, error=MessageDeliveryFailure(
                        f"connection lost before the broker confirmed the message "
                        f"({describe(reason)}), after {message.attempts} attempt(s)"))
                    continue
            self._backlog.appendleft(message)

    def io_connect_failed(self, error: BaseException) -> None:
        fatal = self.conn.fatal_error
        keep: collections.deque[PendingPublish] = collections.deque()
        for message in self._backlog:
            message.attempts += 1
            if isinstance(fatal, AccessDenied):
                self._finish(message, error=fatal)
            elif message.retry is not None and message.attempts > message.retry:
                self._finish(message, error=MessageDeliveryFailure(
                    f"cannot connect to RabbitMQ after {message.attempts} attempt(s): "
                    f"{self.conn.last_error}"))
            elif not message.done:
                keep.append(message)
        self._backlog = keep

    def io_reopen_delay(self, reason: BaseException) -> float | None:
        self._reopen_failures += 1
        return REOPEN_BACKOFF.delay(self._reopen_failures)

    def io_fail_all(self, error: BaseException) -> None:
        """Fail everything not yet confirmed (used when closing)."""
        self._fail_outbox(error)
        for message in list(self._unconfirmed.values()) + list(self._backlog) + list(self._waiting):
            self._finish(message, error=error)
        self._unconfirmed.clear()
        self._backlog.clear()
        self._waiting.clear()
        self._by_key.clear()
