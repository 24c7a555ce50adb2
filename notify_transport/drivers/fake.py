"""An in-memory driver for users' unit tests, with the Kafka driver's semantics.

Each topic is a log; each pool reads it from its own cursor, starting at the
end when it first subscribes. Messages go through the real wire encoding.
State lives in the driver: share one transport between notifier and listeners.
"""
from __future__ import annotations

import collections
import threading
from typing import Any

from notify_transport.drivers import envelope
from notify_transport.drivers.base import BaseDriver, IncomingMessage, Listener
from notify_transport.drivers.naming import notification_topic
from notify_transport.exceptions import ConfigurationError, InvalidTransportURL
from notify_transport.target import Target

DEFAULT_POOL = "fake_default_pool"


class _Topic:
    """An append-only log with one cursor and a redelivery queue per pool."""

    def __init__(self) -> None:
        self.log: list[bytes] = []
        self.cursors: dict[str, int] = {}
        self.requeued: dict[str, collections.deque[tuple[int, bytes]]] = {}


class FakeDriver(BaseDriver):
    """``fake://`` — in memory, same pools, filters and priorities as Kafka."""

    name = "fake"

    def __init__(self, conf: Any, url: Any, default_exchange: str | None = None,
                 allowed_remote_exmods: Any = None) -> None:
        super().__init__(conf, url, default_exchange, allowed_remote_exmods)
        if url.query:
            raise InvalidTransportURL(url.redacted(), f"The fake driver takes no options, got "
                                      f"{', '.join(sorted(url.query))}")
        self._topics: dict[str, _Topic] = collections.defaultdict(_Topic)
        self._cond = threading.Condition()
        self._sent = 0

    def _topic_name(self, topic: str, priority: str | None = None) -> str:
        return notification_topic(topic, priority, self.url.virtual_host)

    def send_notification(self, target: Target, ctxt: dict, message: dict, version: float,
                          retry: int | None = None) -> None:
        raw = envelope.encode(message, ctxt, version)
        with self._cond:
            self._topics[self._topic_name(target.topic or "")].log.append(raw)
            self._sent += 1
            self._cond.notify_all()

    def delivery_stats(self) -> dict[str, int]:
        return {"sent": self._sent, "delivered": self._sent, "failed": 0, "pending": 0}

    def listen_for_notifications(self, targets_and_priorities: list[tuple[Target, str]],
                                 pool: str | None, batch_size: int, batch_timeout: float | None,
                                 **options: Any) -> Listener:
        if options:
            raise ConfigurationError(f"The fake driver takes no listener options, got {sorted(options)}")
        topics = sorted({self._topic_name(t.topic or "", p) for t, p in targets_and_priorities})
        return FakeListener(self, topics, pool or DEFAULT_POOL)


class FakeListener(Listener):
    """Reads the pool's share of its topics from the driver's logs."""

    def __init__(self, driver: FakeDriver, topics: list[str], pool: str) -> None:
        super().__init__()
        self._driver = driver
        self._topics = topics
        self._pool = pool

    def start(self) -> None:
        with self._driver._cond:
            for name in self._topics:
                topic = self._driver._topics[name]
                topic.cursors.setdefault(self._pool, len(topic.log))
                topic.requeued.setdefault(self._pool, collections.deque())

    def stop(self) -> None:
        super().stop()
        with self._driver._cond:
            self._driver._cond.notify_all()

    def _take(self, max_messages: int) -> list[IncomingMessage]:
        out: list[IncomingMessage] = []
        for name in self._topics:
            topic = self._driver._topics[name]
            pending = topic.requeued[self._pool]
            while pending and len(out) < max_messages:
                offset, raw = pending.popleft()
                out.append(self._incoming(name, offset, raw))
            while topic.cursors[self._pool] < len(topic.log) and len(out) < max_messages:
                offset = topic.cursors[self._pool]
                topic.cursors[self._pool] = offset + 1
                out.append(self._incoming(name, offset, topic.log[offset]))
        return out

    def _incoming(self, topic: str, offset: int, raw: bytes) -> IncomingMessage:
        ctxt, message = envelope.decode_notification(raw)
        return IncomingMessage(ctxt, message, topic=topic, partition=0, offset=offset, raw=raw,
                               on_requeue=self._requeue)

    def _requeue(self, message: IncomingMessage) -> None:
        with self._driver._cond:
            self._driver._topics[message.topic or ""].requeued[self._pool].append(
                (message.offset or 0, message.raw or b""))
            self._driver._cond.notify_all()

    def poll(self, timeout: float | None = None, max_messages: int = 1) -> list[IncomingMessage]:
        with self._driver._cond:
            self._driver._cond.wait_for(lambda: self.stopped or bool(self._take_peek()), timeout)
            if self.stopped:
                return []
            return self._take(max_messages)

    def _take_peek(self) -> bool:
        for name in self._topics:
            topic = self._driver._topics[name]
            if topic.requeued[self._pool] or topic.cursors[self._pool] < len(topic.log):
                return True
        return False
