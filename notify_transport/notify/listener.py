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

from notify_transport.drivers.base import IncomingMessage, Listener
from notify_transport.exceptions import ConfigurationError, ServerListenError
from notify_transport.notify.dispatcher import (BatchNotificationDispatcher, NotificationDispatcher,
                                                NotificationResult)
from notify_transport.notify.stats import ListenerStats
from notify_transport.serializer import Serializer
from notify_transport.target import Target

LOG = logging.getLogger(__name__)

#: How long one driver poll may block; stop() also wakes it.
POLL_INTERVAL = 1.0
_MAX_BACKOFF = 5.0


class NotificationServer:
    """Owns one driver listener and the thread that dispatches what it receives."""

    def __init__(self, transport: Any, targets: Sequence[Target], dispatcher: NotificationDispatcher,
                 executor: str = "threading", allow_requeue: bool = False, pool: str | None = None,
                 batch_size: int = 1, batch_timeout: float | None = None,
                 **driver_options: Any) -> None:
        if executor != "threading":
            raise ConfigurationError(f"Unsupported executor {executor!r}: only 'threading' "
                                     "is supported (no eventlet)")
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
                listener.start()
            except Exception as exc:
                listener.stop()
                listener.cleanup()
                raise ServerListenError(self.targets, exc) from exc
            self._listener = listener
            self._stopping.clear()
            self._thread = threading.Thread(target=self._run, name=f"notify-listener-{self.pool or 'default'}",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop receiving; messages already received are still dispatched."""
        self._stopping.set()
        if self._listener is not None:
            self._listener.stop()

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
        backoff = 0.1
        while not self._stopping.is_set():
            try:
                batch = self._next_batch(listener)
                backoff = 0.1
            except Exception:
                LOG.exception("%r: polling failed; retrying in %.1fs", self, backoff)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
                continue
            if batch:
                self.stats.received += len(batch)
                if self.dispatcher.batch:
                    self._process_batch(batch)
                else:
                    for message in batch:
                        self._process_one(message)
        try:
            listener.commit()
        except Exception:
            LOG.exception("%r: final commit failed", self)

    def _next_batch(self, listener: Listener) -> list[IncomingMessage]:
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

    def _settle(self, message: IncomingMessage, result: Any) -> None:
        try:
            if result == NotificationResult.REQUEUE and self.allow_requeue:
                self.stats.requeued += 1
                message.requeue()
            else:
                if result == NotificationResult.REQUEUE:
                    self.stats.failed += 1
                    LOG.warning("%r: endpoint asked to requeue %s but allow_requeue is off; "
                                "acknowledging it", self, message.coordinates)
                else:
                    self.stats.dispatched += 1
                message.acknowledge()
        except Exception:
            LOG.exception("%r: could not settle %s", self, message.coordinates)

    def _process_one(self, message: IncomingMessage) -> None:
        try:
            result = self.dispatcher.dispatch(message)
        except Exception:
            LOG.exception("%r: dispatch of %s failed", self, message.coordinates)
            result = NotificationResult.REQUEUE
        self._settle(message, result)

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
                                    **driver_options: Any) -> NotificationServer:
    """A listener calling ``endpoint.<priority>(messages)`` with up to ``batch_size`` at a time.

    A batch is dispatched when full, or ``batch_timeout`` seconds after its
    first message arrived (never empty).
    """
    dispatcher = BatchNotificationDispatcher(endpoints, serializer)
    return NotificationServer(transport, targets, dispatcher, executor, allow_requeue, pool,
                              batch_size=batch_size or 1, batch_timeout=batch_timeout, **driver_options)
