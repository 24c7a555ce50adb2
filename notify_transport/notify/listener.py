"""Notification listeners: a thread that polls a driver and dispatches to endpoints.

``get_notification_listener(transport, targets, endpoints, pool=...)`` returns a
server with ``start()``, ``stop()`` and ``wait()``, as in oslo.messaging.
``start()`` returns once the subscription is live, so nothing sent after it
returns is missed.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Iterable, Sequence

from notify_transport.drivers.base import Executor, IncomingMessage, Listener
from notify_transport.exceptions import ConfigurationError
from notify_transport.notify.dispatcher import (BatchNotificationDispatcher, NotificationDispatcher,
                                                NotificationResult)
from notify_transport.notify.stats import ListenerStats
from notify_transport.serializer import Serializer
from notify_transport.server import POLL_INTERVAL, MessageHandlingServer
from notify_transport.target import Target

LOG = logging.getLogger(__name__)

#: Most messages one poll may return to a (non-batch) listener, which then
#: dispatches them one by one. Taking what the driver already has in one call
#: instead of one message per poll saves a poll per message; drivers return as
#: soon as they have one, and may hand a large take out over several polls
#: (which is why a graceful stop polls until ``[]``). A driver whose own take
#: is larger (``Listener.take_size``) is asked for that many instead.
DISPATCH_POLL_SIZE = 500


def dispatch_poll_size(listener: Listener) -> int:
    """How many messages to ask ``listener`` for at once when dispatching one by one."""
    own = getattr(listener, "take_size", None)  # a third-party driver's listener may not declare it
    return own if own is not None and own > DISPATCH_POLL_SIZE else DISPATCH_POLL_SIZE


class NotificationServer(MessageHandlingServer):
    """Owns one driver listener and the thread that dispatches what it receives.

    The lifecycle (start, stop, wait, ``with``) is
    :class:`~notify_transport.MessageHandlingServer`'s.
    """

    def __init__(self, transport: Any, targets: Sequence[Target], dispatcher: NotificationDispatcher,
                 executor: str = "threading", allow_requeue: bool = False, pool: str | None = None,
                 batch_size: int = 1, batch_timeout: float | None = None,
                 **driver_options: Any) -> None:
        super().__init__(transport, dispatcher, executor)
        if not targets:
            raise ConfigurationError("A notification listener needs at least one target")
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        if batch_timeout is not None and batch_timeout < 0:
            raise ConfigurationError(f"batch_timeout must be >= 0, got {batch_timeout}")
        self.targets = list(targets)
        self.allow_requeue = allow_requeue
        self.pool = pool
        self.batch_size = batch_size
        self.batch_timeout = batch_timeout
        self.driver_options = driver_options
        self.stats = ListenerStats()
        #: stats are bumped from the driver's worker threads when it runs processing
        self._stats_lock = threading.Lock()
        #: the driver listener of the last run, for metrics() after it stopped
        self._last_listener: Listener | None = None
        self._executor: Executor | None = None

    def __repr__(self) -> str:
        topics = ",".join(t.topic or "" for t in self.targets)
        return f"<NotificationServer topics={topics} pool={self.pool!r}>"

    @property
    def _thread(self) -> threading.Thread | None:
        """The dispatch thread of the current run."""
        return self._workers[0] if self._workers else None

    def _listen_target(self) -> Any:
        return self.targets

    def _listen(self) -> Listener:
        pairs = [(t, p) for t in self.targets for p in self.dispatcher.supported_priorities]
        if not pairs:
            raise ConfigurationError("No endpoint has a method named after a priority "
                                     "(audit, debug, info, warn, error, critical, sample)")
        return self.transport._listen_for_notifications(  # noqa: SLF001
            pairs, self.pool, self.batch_size, self.batch_timeout, **self.driver_options)

    def _attach(self, listener: Listener) -> None:
        #: the driver runs each dispatch itself (workers, hooks), or None: inline
        self._executor = listener.executor(batch=self.dispatcher.batch)

    def _launch(self, listener: Listener) -> None:
        self._last_listener = listener
        self._spawn(self._run, f"notify-listener-{self.pool or 'default'}", listener)

    def metrics(self) -> dict[str, Any]:
        """Counters of this listener: :attr:`stats` plus the driver's own.

        The Kafka driver adds ``undecodable``, ``retried``, ``dead_lettered``,
        ``copy_failures``, ``stale``, ``cancelled``, ``commits``,
        ``commit_failures``, ``in_flight``, ``held_for_retry``, ``assignment``
        and, per ``(topic, partition)``, ``committed`` offsets and ``lag``.
        """
        with self._stats_lock:
            out: dict[str, Any] = self.stats.as_dict()
        listener = self._listener or self._last_listener
        if listener is not None:
            try:
                out.update(listener.metrics())
            except Exception:
                LOG.exception("%r: reading the driver's metrics failed", self)
        return out

    def _run(self, listener: Listener) -> None:
        executor = self._executor
        submit = executor.submit if executor is not None and not self.dispatcher.batch else None
        failures = 0
        while not self._stopping.is_set():
            try:
                batch = self._next_batch(listener)
                failures = 0
            except Exception:
                failures += 1
                self._poll_failed(failures)
                continue
            if batch:
                self._handle(batch, submit)
        self._drain_held_back(listener, submit)
        try:
            listener.commit()
        except Exception:
            LOG.exception("%r: final commit failed", self)

    def _handle(self, batch: list[IncomingMessage], submit: Any) -> None:
        self.stats.received += len(batch)
        if self.dispatcher.batch:
            self._process_batch(batch)
        elif submit is not None:
            self._submit_each(batch, submit)
        else:
            self._process_each(batch)

    def _drain_held_back(self, listener: Listener, submit: Any) -> None:
        """After a graceful stop(): dispatch what the driver already took for us (it
        may be committed already, so nobody else would ever dispatch it)."""
        while not self._aborting:
            try:
                batch = listener.poll(timeout=0, max_messages=dispatch_poll_size(listener))
            except Exception:
                LOG.exception("%r: polling what was received before the stop failed", self)
                return
            if not batch:
                return
            self._handle(batch, submit)

    def _next_batch(self, listener: Listener) -> list[IncomingMessage]:
        if not self.dispatcher.batch:
            # dispatched one at a time: take whatever is there, never wait for more
            return listener.poll(timeout=POLL_INTERVAL, max_messages=dispatch_poll_size(listener))
        size = self.batch_size
        batch = listener.poll(timeout=POLL_INTERVAL, max_messages=size)
        if not batch or size == 1 or len(batch) >= size:
            return batch
        deadline = None if self.batch_timeout is None else time.monotonic() + self.batch_timeout
        while len(batch) < size and not self._stopping.is_set():
            wait = POLL_INTERVAL if deadline is None else deadline - time.monotonic()
            if wait <= 0:
                break
            batch.extend(listener.poll(timeout=min(wait, POLL_INTERVAL), max_messages=size - len(batch)))
        return batch

    def _dispatch(self, message: IncomingMessage) -> Any:
        """The dispatcher's result; an exception counts as REQUEUE, as in oslo.messaging."""
        try:
            return self.dispatcher.dispatch(message)
        except Exception:
            LOG.exception("%r: dispatch of %s failed", self, message.coordinates)
            return NotificationResult.REQUEUE

    def _count(self, result: Any) -> None:
        stats = self.stats
        if result != NotificationResult.REQUEUE:
            stats.dispatched += 1
        elif self.allow_requeue:
            stats.requeued += 1
        else:
            stats.failed += 1

    def _hand_back(self, message: IncomingMessage, result: Any) -> None:
        """Requeue or acknowledge, as the result and ``allow_requeue`` say."""
        try:
            if result == NotificationResult.REQUEUE and self.allow_requeue:
                message.requeue()
            else:
                if result == NotificationResult.REQUEUE:
                    LOG.warning("%r: endpoint asked to requeue %s but allow_requeue is off; "
                                "acknowledging it", self, message.coordinates)
                message.acknowledge()
        except Exception:
            LOG.exception("%r: could not settle %s", self, message.coordinates)

    def _settle(self, message: IncomingMessage, result: Any) -> None:
        self._count(result)
        self._hand_back(message, result)

    def _process_each(self, batch: list[IncomingMessage]) -> None:
        """:meth:`_dispatch` and :meth:`_settle` for each message, the common case (handled) inlined."""
        dispatch = self.dispatcher.dispatch
        stats = self.stats
        handled = NotificationResult.HANDLED
        for message in batch:
            if self._aborting:
                break  # abrupt stop: the rest is not dispatched
            try:
                result = dispatch(message)
            except Exception:
                LOG.exception("%r: dispatch of %s failed", self, message.coordinates)
                result = NotificationResult.REQUEUE
            if result is handled:
                stats.dispatched += 1
                try:
                    message.acknowledge()
                except Exception:
                    LOG.exception("%r: could not settle %s", self, message.coordinates)
            else:
                self._settle(message, result)

    def _submit_each(self, batch: list[IncomingMessage], submit: Any) -> None:
        """Hand each message to the driver, which runs :meth:`_work` (maybe on a worker)."""
        work = self._work
        for message in batch:
            if self._aborting:
                break
            submit(message, work)

    def _work(self, message: IncomingMessage) -> Any:
        """Dispatch and settle one message; safe to run on several threads at once."""
        result = self._dispatch(message)
        with self._stats_lock:
            self._count(result)
        self._hand_back(message, result)
        return result

    def _process_batch(self, batch: list[IncomingMessage]) -> None:
        assert isinstance(self.dispatcher, BatchNotificationDispatcher)
        try:
            requeues = self.dispatcher.dispatch_batch(batch)
        except Exception:
            LOG.exception("%r: dispatch of a batch of %d failed", self, len(batch))
            requeues = set(batch)
        for message in batch:
            self._settle(message, NotificationResult.REQUEUE if message in requeues
                         else NotificationResult.HANDLED)


#: oslo.messaging's name for the base of both listener kinds.
NotificationServerBase = NotificationServer


class BatchNotificationServer(NotificationServer):
    """A listener dispatching batches (what :func:`get_batch_notification_listener` returns)."""


def get_notification_listener(transport: Any, targets: Sequence[Target], endpoints: Iterable[Any],
                              executor: str = "threading", serializer: Serializer | None = None,
                              allow_requeue: bool = False, pool: str | None = None,
                              **driver_options: Any) -> NotificationServer:
    """A listener calling ``endpoint.<priority>(ctxt, publisher_id, event_type, payload, metadata)``.

    ``pool`` names the group of listeners that share the stream (a Kafka
    consumer group, a rabbit queue); every pool receives every notification.
    Extra keyword arguments go to the driver (e.g. Kafka delivery modes).
    """
    dispatcher = NotificationDispatcher(endpoints, serializer)
    return NotificationServer(transport, targets, dispatcher, executor, allow_requeue, pool,
                              **driver_options)


def get_batch_notification_listener(transport: Any, targets: Sequence[Target], endpoints: Iterable[Any],
                                    executor: str = "threading", serializer: Serializer | None = None,
                                    allow_requeue: bool = False, pool: str | None = None,
                                    batch_size: int | None = None, batch_timeout: float | None = None,
                                    **driver_options: Any) -> BatchNotificationServer:
    """A listener calling ``endpoint.<priority>(messages)`` with up to ``batch_size`` at a time.

    A batch is dispatched when full, or ``batch_timeout`` seconds after its
    first message arrived (never empty).
    """
    dispatcher = BatchNotificationDispatcher(endpoints, serializer)
    return BatchNotificationServer(transport, targets, dispatcher, executor, allow_requeue, pool,
                              batch_size=batch_size or 1, batch_timeout=batch_timeout, **driver_options)
