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

from notify_transport.backoff import Backoff
from notify_transport.drivers.base import Executor, IncomingMessage, Listener
from notify_transport.exceptions import ConfigurationError, ExecutorLoadFailure, ServerListenError
from notify_transport.lifecycle import ServerContext
from notify_transport.notify.dispatcher import (BatchNotificationDispatcher, NotificationDispatcher,
                                                NotificationResult)
from notify_transport.notify.stats import ListenerStats
from notify_transport.serializer import Serializer
from notify_transport.target import Target

LOG = logging.getLogger(__name__)

#: How long one driver poll may block; stop() also wakes it.
POLL_INTERVAL = 1.0
#: Spacing of the retries after a poll failed (0.1 s doubling up to 5 s).
POLL_RETRY = Backoff(initial=0.1, factor=2.0, maximum=5.0)
#: Most messages one poll may return to a (non-batch) listener, which then
#: dispatches them one by one. Taking what the driver already has in one call
#: instead of one message per poll saves a poll per message; drivers return as
#: soon as they have one, and may hand a large take out over several polls
#: (which is why a graceful stop polls until ``[]``).
DISPATCH_POLL_SIZE = 500


class NotificationServer(ServerContext):
    """Owns one driver listener and the thread that dispatches what it receives.

    ``with server:`` starts it and, on leaving the block, stops it and waits
    for what was received to be dispatched and the connection released.
    """

    def __init__(self, transport: Any, targets: Sequence[Target], dispatcher: NotificationDispatcher,
                 executor: str = "threading", allow_requeue: bool = False, pool: str | None = None,
                 batch_size: int = 1, batch_timeout: float | None = None,
                 **driver_options: Any) -> None:
        if executor != "threading":
            raise ExecutorLoadFailure(executor, "only the 'threading' executor is supported "
                                      "(no eventlet)")
        if not targets:
            raise ConfigurationError("A notification listener needs at least one target")
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
        if batch_timeout is not None and batch_timeout < 0:
            raise ConfigurationError(f"batch_timeout must be >= 0, got {batch_timeout}")
        self.transport = transport
        self.targets = list(targets)
        self.dispatcher = dispatcher
        self.allow_requeue = allow_requeue
        self.pool = pool
        self.batch_size = batch_size
        self.batch_timeout = batch_timeout
        self.driver_options = driver_options
        self.stats = ListenerStats()
        self._listener: Listener | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        #: set by an abrupt stop: the dispatch loop drops what it has not started
        self._aborting = False
        #: stats are bumped from the driver's worker threads when it runs processing
        self._stats_lock = threading.Lock()
        #: the driver listener of the last run, for metrics() after it stopped
        self._last_listener: Listener | None = None
        self._executor: Executor | None = None

    def __repr__(self) -> str:
        topics = ",".join(t.topic or "" for t in self.targets)
        return f"<NotificationServer topics={topics} pool={self.pool!r}>"

    @property
    def listener(self) -> Listener | None:
        """The driver listener, while the server runs (for driver-specific controls)."""
        return self._listener

    def start(self) -> None:
        """Subscribe and start dispatching; returns once the subscription is live."""
        with self._lock:
            if self._thread is not None:
                return
            pairs = [(t, p) for t in self.targets for p in self.dispatcher.supported_priorities]
            if not pairs:
                raise ConfigurationError("No endpoint has a method named after a priority "
                                         "(audit, debug, info, warn, error, critical, sample)")
            try:
                listener = self.transport._listen_for_notifications(
                    pairs, self.pool, self.batch_size, self.batch_timeout, **self.driver_options)
            except ConfigurationError:
                raise
            except Exception as exc:
                raise ServerListenError(self.targets, exc) from exc
            try:
                #: the driver runs each dispatch itself (workers, hooks), or None: inline
                self._executor = listener.executor(batch=self.dispatcher.batch)
            except Exception:
                listener.cleanup()
                raise
            try:
                listener.start()
            except Exception as exc:
                listener.stop()
                listener.cleanup()
                raise ServerListenError(self.targets, exc) from exc
            self._listener = self._last_listener = listener
            self._stopping.clear()
            self._aborting = False
            self._thread = threading.Thread(target=self._run, name=f"notify-listener-{self.pool or 'default'}",
                                            daemon=True)
            self._thread.start()

    def stop(self, graceful: bool = True, timeout: float | None = None) -> bool:
        """Stop receiving.

        ``stop()``, as in oslo.messaging, returns at once: messages already
        received are still dispatched, and :meth:`wait` releases the connection.

        With ``timeout`` the whole shutdown happens here, bounded by it:

        * ``graceful=True``: stop reading, let the work in flight finish,
          commit, close. Work still running at the deadline is abandoned as
          in an abrupt stop.
        * ``graceful=False`` (abrupt): stop reading and drop every message not
          yet dispatched; an endpoint call already running cannot be
          interrupted but its result no longer counts. What did not finish is
          not committed, so drivers that track completion (Kafka's
          at_least_once mode) deliver it again later.

        Returns True when the shutdown finished in time (for a graceful stop:
        everything received was processed), False otherwise.
        """
        self._stopping.set()
        listener = self._listener
        if listener is not None:
            listener.stop()
            if not graceful:
                self._abort(listener)
        if timeout is None:
            return True
        return self._finish(graceful, time.monotonic() + max(0.0, timeout))

    def _abort(self, listener: Listener) -> None:
        self._aborting = True
        try:
            listener.abort()
        except Exception:
            LOG.exception("%r: abort failed", self)

    def _finish(self, graceful: bool, deadline: float) -> bool:
        """The bounded part of :meth:`stop`: end the dispatch thread, drain, close."""
        finished = True
        thread, listener = self._thread, self._listener
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                finished = False
        if listener is not None and not self._aborting:
            if not finished or not listener.drain(max(0.0, deadline - time.monotonic())):
                LOG.warning("%r: work still in flight at the stop deadline; abandoning it", self)
                finished = False
                self._abort(listener)
        closer = threading.Thread(target=self._close_listener, daemon=True,
                                  name=f"notify-listener-close-{self.pool or 'default'}")
        closer.start()
        # closing commits and leaves the group: a little time even when the deadline passed
        closer.join(max(1.0, deadline - time.monotonic()))
        if closer.is_alive():
            LOG.warning("%r: closing the listener is taking longer than the stop timeout; "
                        "it goes on in the background", self)
            return False
        return finished

    def _close_listener(self) -> None:
        with self._lock:
            listener = self._listener
            if listener is None:
                return
            try:
                listener.cleanup()
            except Exception:
                LOG.exception("%r: closing the listener failed", self)
            finally:
                self._listener = None
                thread = self._thread
                if thread is None or not thread.is_alive():
                    self._thread = None

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

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the dispatch thread to end, then release the connection.

        Returns False when ``timeout`` ran out first (the server is still
        stopping; call again).
        """
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                return False
        with self._lock:
            if self._listener is not None:
                try:
                    self._listener.cleanup()
                finally:
                    self._listener = None
                    self._thread = None
        return True

    def reset(self) -> None:
        """Kept for oslo.messaging compatibility; nothing to reset."""

    # -- the dispatch thread --------------------------------------------------
    def _run(self) -> None:
        listener = self._listener
        assert listener is not None
        executor = self._executor
        submit = executor.submit if executor is not None and not self.dispatcher.batch else None
        failures = 0
        while not self._stopping.is_set():
            try:
                batch = self._next_batch(listener)
                failures = 0
            except Exception:
                failures += 1
                LOG.exception("%r: polling failed (%d in a row); retrying", self, failures)
                POLL_RETRY.wait(failures, stop=self._stopping)
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
                batch = listener.poll(timeout=0, max_messages=DISPATCH_POLL_SIZE)
            except Exception:
                LOG.exception("%r: polling what was received before the stop failed", self)
                return
            if not batch:
                return
            self._handle(batch, submit)

    def _next_batch(self, listener: Listener) -> list[IncomingMessage]:
        if not self.dispatcher.batch:
            # dispatched one at a time: take whatever is there, never wait for more
            return listener.poll(timeout=POLL_INTERVAL, max_messages=DISPATCH_POLL_SIZE)
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
