"""Requeue: retry topics processed after a delay, then the dead-letter topic.

:class:`Requeuer` sends a failed record back through the pool's retry topic
while attempts are left, else to the dead-letter topic. :class:`DelayGate`
holds retried records until due, pausing only their partition; held records
are never handed out, so never committed.
"""
from __future__ import annotations

import collections
import logging
import time
from typing import Any, Callable, Iterable

from confluent_kafka import KafkaError, TopicPartition

from notify_transport.drivers.kafka.delivery import deadletter
from notify_transport.drivers.kafka.delivery.counters import DeliveryCounters
from notify_transport.drivers.kafka.delivery.deadletter import SideProducer
from notify_transport.drivers.kafka.delivery.hooks import DeadLetter, ListenerHooks
from notify_transport.drivers.kafka.delivery.settings import ListenerSettings
from notify_transport.drivers.kafka.message import ConsumedRecord
from notify_transport.exceptions import ConfigurationError

LOG = logging.getLogger(__name__)

#: ``on_done(ok)``: whether the copy was confirmed by the broker.
Confirmed = Callable[[bool], None]


class Requeuer:
    """Sends records to the retry or the dead-letter topic and reports when they are safe.

    Where a copy goes depends only on the topic it was read from and the configuration,
    never on headers, which anyone who can produce to the topic can set.
    """

    def __init__(self, settings: ListenerSettings, side: SideProducer, pool: str,
                 counters: DeliveryCounters, hooks: ListenerHooks, name: str = "listener",
                 topics: Iterable[str] = ()) -> None:
        self.settings = settings
        self.side = side
        self.pool = pool
        self.counters = counters
        self.hooks = hooks
        self.name = name
        #: the listener's own topics, and for each retry topic the main topics retried through it
        self.topics = frozenset(topics)
        self._mains_of: dict[str, list[str]] = {}
        for main in _unique(topics):
            retry = settings.retry_topic_for(main, pool)
            if retry is not None and retry not in self.topics:
                self._mains_of.setdefault(retry, []).append(main)
        #: topic name -> dead-letter topic, filled on first use (templates validated then)
        self._dead: dict[str, str | None] = {}

    def retry_topics(self, topics: Iterable[str]) -> list[str]:
        """The retry topic of each of ``topics`` (none when retries are off)."""
        return _unique(self.settings.retry_topic_for(t, self.pool) for t in topics)

    def dead_letter_topics(self, topics: Iterable[str]) -> list[str]:
        return _unique(self.settings.dead_letter_topic_for(t, self.pool) for t in topics)

    def main_topic(self, record: ConsumedRecord) -> str:
        """The listener topic ``record`` belongs to: its own topic, or the one its retry topic retries.

        A retry topic shared by several main topics (a template without
        ``{topic}``) is the one case a header helps: it may pick one of those
        main topics, nothing else.
        """
        topic = record.topic()
        mains = self._mains_of.get(topic)
        if not mains:
            return topic
        if len(mains) > 1:
            named = deadletter.header(record.headers(), deadletter.ORIGINAL_TOPIC)
            if named is not None:
                wanted = named.decode("utf-8", "replace")
                if wanted in mains:
                    return wanted
        return mains[0]

    def from_retry_topic(self, record: ConsumedRecord) -> bool:
        return record.topic() in self._mains_of

    def attempts_made(self, record: ConsumedRecord) -> int:
        """Attempts before this delivery: 0 for a record of a main topic, whatever its headers say."""
        return deadletter.attempts_of(record) if self.from_retry_topic(record) else 0

    def origin(self, record: ConsumedRecord) -> tuple[str, int, int]:
        """Where ``record`` was first read: its coordinates, or (retry topics) what the copy carries."""
        if self.from_retry_topic(record):
            return deadletter.origin_of(record)
        return record.topic(), record.partition(), record.offset()

    def _dead_letter_topic(self, main: str) -> str | None:
        if main not in self._dead:
            self._dead[main] = self.settings.dead_letter_topic_for(main, self.pool)
        return self._dead[main]

    def requeue(self, record: ConsumedRecord, error: BaseException | None, on_done: Confirmed) -> None:
        """Processing of ``record`` failed (``error``) or was requeued (None): retry or dead-letter."""
        attempts = self.attempts_made(record) + 1
        text = deadletter.error_text(error)
        settings = self.settings
        retry_allowed = error is None or settings.requeue_on_error
        if retry_allowed and settings.retry_topic is not None and attempts < settings.max_attempts:
            try:
                topic = settings.retry_topic_for(self.main_topic(record), self.pool)
            except ConfigurationError as exc:
                self._unroutable(record, exc, on_done)
                return
            self._send(record, topic, attempts, text, on_done, dead=False)  # type: ignore[arg-type]
        else:
            self.dead_letter(record, text, on_done, attempts)

    def dead_letter(self, record: ConsumedRecord, error: str, on_done: Confirmed,
                    attempts: int | None = None, logged: bool = False) -> None:
        """Send ``record`` to its dead-letter topic (``attempts`` made, the failed one included).

        ``logged``: the caller already logged the record (undecodable ones), so the
        confirmation is logged at debug level only.
        """
        if attempts is None:
            attempts = self.attempts_made(record) + 1
        try:
            topic = self._dead_letter_topic(self.main_topic(record))
        except ConfigurationError as exc:
            self._unroutable(record, exc, on_done)
            return
        if topic is None:
            LOG.error("%s: no dead_letter_topic: %s[%d]@%d (%s) is dropped", self.name,
                      record.topic(), record.partition(), record.offset(), error)
            on_done(True)
            return
        self._send(record, topic, attempts, error, on_done, dead=True, logged=logged)

    def _unroutable(self, record: ConsumedRecord, exc: Exception, on_done: Confirmed) -> None:
        """A topic outside the listener's own gives no valid copy topic: reported as a failed copy."""
        LOG.error("%s: no retry / dead-letter topic for %s[%d]@%d: %s", self.name, record.topic(),
                  record.partition(), record.offset(), exc)
        self.counters.copy_failures.incr()
        on_done(False)

    def _send(self, record: ConsumedRecord, topic: str, attempts: int, error: str, on_done: Confirmed,
              dead: bool, logged: bool = False) -> None:
        origin = self.origin(record)
        headers = deadletter.copy_headers(record, attempts, error, self.pool, origin)
        counters, hooks = self.counters, self.hooks

        def confirmed(err: KafkaError | None) -> None:
            if err is None:
                (counters.dead_lettered if dead else counters.retried).incr()
                hook = "on_dead_letter" if dead else "on_retry"
                if getattr(hooks, hook) is not None:
                    hooks.call(hook, DeadLetter(origin[0], origin[1], origin[2], attempts, error, topic))
                if dead:
                    LOG.log(logging.DEBUG if logged else logging.WARNING,
                            "%s: dead-lettered %s[%d]@%d to %s after %d attempt(s): %s",
                            self.name, origin[0], origin[1], origin[2], topic, attempts, error)
            else:
                counters.copy_failures.incr()
            on_done(err is None)

        self.side.send(topic, record.value(), record.key(), headers, confirmed)


def _unique(names: Iterable[str | None]) -> list[str]:
    out: list[str] = []
    for name in names:
        if name is not None and name not in out:
            out.append(name)
    return out


class DelayGate:
    """Holds records of delayed topics until they are due; pauses only their partitions."""

    def __init__(self, topics: Iterable[str], delay: float,
                 pause: Callable[[list[TopicPartition]], Any],
                 resume: Callable[[list[TopicPartition]], Any],
                 clock: Callable[[], float] = time.time) -> None:
        self.topics = frozenset(topics)
        self.delay = delay
        self._pause = pause
        self._resume = resume
        self._clock = clock
        self._held: dict[tuple[str, int], collections.deque[ConsumedRecord]] = {}

    @property
    def held(self) -> int:
        """Records waiting."""
        return sum(len(q) for q in self._held.values())

    def _due(self, record: ConsumedRecord) -> float:
        kind, millis = record.timestamp()
        return (millis / 1000.0 + self.delay) if kind and millis >= 0 else 0.0

    def admit(self, records: list[ConsumedRecord]) -> list[ConsumedRecord]:
        """The records that may be handed out now, in order; the others are held."""
        if not self.topics:
            return records
        now = self._clock()
        out = []
        for record in records:
            key = (record.topic(), record.partition())
            queue = self._held.get(key)
            if queue is not None:
                queue.append(record)  # behind a held record: keep the partition's order
            elif key[0] not in self.topics or self._due(record) <= now:
                out.append(record)
            else:
                self._held[key] = collections.deque([record])
                try:
                    self._pause([TopicPartition(key[0], key[1])])
                except Exception as exc:  # noqa: BLE001 - holding still works, it only fetches more
                    LOG.warning("Could not pause %s[%d] for its retry delay: %s", key[0], key[1], exc)
        return out

    def release(self, limit: int) -> list[ConsumedRecord]:
        """Up to ``limit`` held records that are due now; resume partitions left empty."""
        if not self._held:
            return []
        now = self._clock()
        out: list[ConsumedRecord] = []
        for key in list(self._held):
            queue = self._held[key]
            while queue and len(out) < limit and self._due(queue[0]) <= now:
                out.append(queue.popleft())
            if not queue:
                del self._held[key]
                try:
                    self._resume([TopicPartition(key[0], key[1])])
                except Exception as exc:  # noqa: BLE001
                    LOG.warning("Could not resume %s[%d]: %s", key[0], key[1], exc)
            if len(out) >= limit:
                break
        return out

    def seconds_to_next(self) -> float | None:
        """Seconds until the next held record is due (0 if one is), None if none is held."""
        if not self._held:
            return None
        now = self._clock()
        return max(0.0, min(self._due(q[0]) for q in self._held.values()) - now)

    def drop(self, partitions: Iterable[tuple[str, int]]) -> int:
        """Forget held records of revoked partitions (their next owner reads them); return how many."""
        dropped = 0
        for key in partitions:
            queue = self._held.pop(key, None)
            if queue:
                dropped += len(queue)
        return dropped

    def clear(self) -> None:
        self._held.clear()
