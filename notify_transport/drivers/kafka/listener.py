"""The Kafka listener: one confluent-kafka Consumer in a consumer group (the pool).

The listener composes parts with one job each: :mod:`.membership` (joining,
start positions, rebalances, leaving), :mod:`.hand_out` (decoding a take,
skipping what cannot be decoded), :mod:`.dispatching` (workers and hooks) and
:mod:`.client_errors`. It keeps the poll loop: ``poll()`` returns as soon as one
message is there, and a hand-out that fails rewinds, so its records are read
again. When offsets are committed is the :mod:`.delivery.commit` policy's
business; retry delays and dead letters are in :mod:`.delivery`.
"""
from __future__ import annotations

import logging
import time
from typing import Any, cast

import confluent_kafka
from confluent_kafka import KafkaException, Message

from notify_transport.drivers import threads
from notify_transport.drivers.base import IncomingMessage, Listener
from notify_transport.drivers.kafka.client_errors import ClientErrors, KafkaListenerError
from notify_transport.drivers.kafka.client_properties import RDKAFKA_LOG_BESIDE_ERROR_CB
from notify_transport.drivers.kafka.outage import STATS_INTERVAL_MS
from notify_transport.drivers.kafka.cluster import ClusterAdmin
from notify_transport.drivers.kafka.delivery.commit import CommitPolicy
from notify_transport.drivers.kafka.delivery.counters import DeliveryCounters
from notify_transport.drivers.kafka.delivery.deadletter import SideProducer
from notify_transport.drivers.kafka.delivery.retry import DelayGate
from notify_transport.drivers.kafka.delivery.settings import ListenerSettings
from notify_transport.drivers.kafka.dispatching import Dispatcher, Work
from notify_transport.drivers.kafka.fetching import Fetcher
from notify_transport.drivers.kafka.hand_out import HandOut
from notify_transport.drivers.kafka.membership import GroupMembership, close_within
from notify_transport.drivers.kafka.message import ConsumedRecord
from notify_transport.drivers.kafka.partitions import Partition
from notify_transport.exceptions import ConfigurationError, MessagingException
from notify_transport.secrets import mask_properties

LOG = logging.getLogger(__name__)

#: Longest single wait inside poll(), so that stop() is noticed quickly.
STOP_CHECK_INTERVAL = 0.2

__all__ = ["KafkaListener", "KafkaListenerError"]


class KafkaListener(Listener):
    """A driver listener over one consumer; see the module docstring for its guarantees."""

    def __init__(self, config: dict[str, Any], topics: list[str], policy: CommitPolicy, *,
                 admin: ClusterAdmin | None = None, max_poll_records: int = 500,
                 consumer_timeout: float = 1.0, start_timeout: float = 30.0,
                 operation_timeout: float = 10.0, settings: ListenerSettings | None = None,
                 retry_topics: list[str] | None = None, dead_letter_topics: list[str] | None = None,
                 side: SideProducer | None = None, counters: DeliveryCounters | None = None,
                 hand_out_chunk: int | None = None) -> None:
        super().__init__(threads.Event())
        self.topics = list(topics)
        #: retry topics, subscribed too; their records wait retry_delay before dispatch
        self.retry_topics = [t for t in (retry_topics or []) if t not in self.topics]
        #: dead-letter topics, created at start so that copies never wait for auto-creation
        self.dead_letter_topics = list(dead_letter_topics or [])
        self.group_id: str = config["group.id"]
        self.policy = policy
        self.settings = settings or ListenerSettings()
        self.counters = counters or DeliveryCounters()
        self.name = f"Kafka listener (group {self.group_id}, topics {','.join(self.topics)})"
        self._config = dict(config)
        self._admin = admin
        #: max_poll_records: the most one poll takes from the client (one commit)
        self.take_size: int = max(1, int(max_poll_records))
        self._slice = max(0.001, min(consumer_timeout, STOP_CHECK_INTERVAL))
        self._start_timeout = start_timeout
        self._op_timeout = operation_timeout
        self._consumer: confluent_kafka.Consumer | None = None
        self._lock = threads.Lock()
        self._gate: DelayGate | None = None
        self.errors = ClientErrors(self.name)
        self.membership = GroupMembership(
            self.name, config, self.topics, policy, self.settings, admin, operation_timeout, self._stopped,
            self._drop_gone, self._flush_copies if side is not None else None)
        self.fetcher = Fetcher(self.name, self.membership, self.counters)
        self.hand_out = HandOut(self.name, policy, self.counters, self.settings.dead_letter_topic is not None,
                                hand_out_chunk)
        self.dispatcher = Dispatcher(self.settings, policy, self.counters, side, f"notify-kafka-{self.group_id}")

    def __repr__(self) -> str:
        return f"<{self.name}>"

    @property
    def closed(self) -> bool:
        """Stopped and its consumer closed (or never started)."""
        return self.stopped and self._consumer is None

    @property
    def assignment(self) -> set[Partition]:
        """``(topic, partition)`` pairs this listener owns now."""
        return set(self.membership.assignment)

    @property
    def skipped(self) -> int:
        """Records skipped because they could not be decoded."""
        return self.hand_out.skipped

    def executor(self, batch: bool) -> KafkaListener | None:
        """This listener (its :meth:`submit`) when its settings need it to run each dispatch
        (workers, hooks or at-least-once checks); batch listeners dispatch inline."""
        if batch:
            if self.settings.workers > 1:
                raise ConfigurationError("workers > 1 needs a listener that dispatches one "
                                         "notification at a time, not a batch listener")
            return None
        return self if self.settings.runs_processing else None

    def start(self) -> None:
        """Create missing topics, subscribe, and return once the group gave us our partitions."""
        if self._consumer is not None:
            return
        if self._admin is not None:
            self._admin.ensure_topics(self.topics + self.retry_topics + self.dead_letter_topics)
        config = dict(self._config)
        config["error_cb"] = self.errors.on_error
        config["logger"] = RDKAFKA_LOG_BESIDE_ERROR_CB
        if "statistics.interval.ms" not in config:  # read only while all brokers are down
            config["statistics.interval.ms"] = STATS_INTERVAL_MS
            config["stats_cb"] = self.errors.outage.on_stats_json
        if self.policy.on_commit_result is not None:
            config["on_commit"] = self.policy.on_commit_result
        LOG.debug("%s: creating the consumer: %s", self.name, mask_properties(self._config))
        try:
            consumer = confluent_kafka.Consumer(config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise KafkaListenerError(f"{self.name}: cannot create the consumer: {exc}") from None
        self._consumer = consumer
        self.policy.attach(consumer, self.name)
        if self.retry_topics:
            self._gate = DelayGate(self.retry_topics, self.settings.retry_delay, consumer.pause, consumer.resume)
        self.dispatcher.start()
        self.membership.subscribe(consumer, self.topics + self.retry_topics)
        try:
            self.membership.join(consumer, self._start_timeout, self.errors, self.fetcher.backlog.append)
        except BaseException:
            self._close_consumer()
            raise
        LOG.debug("%s started with partitions %s", self.name, sorted(self.membership.assignment))

    def _flush_copies(self) -> None:
        """Before a hand-back: copies confirmed now let their originals be committed first."""
        side = self.dispatcher.side
        if side is not None:
            side.flush(min(self._op_timeout, self.settings.shutdown_timeout))

    def _drop_gone(self, gone: set[Partition]) -> None:
        """Partitions revoked or lost: what was read of them and not handed out is left to their
        next owner (nothing committed it)."""
        self.fetcher.drop(gone)
        if self._gate is not None:
            self._gate.drop(gone)

    def poll(self, timeout: float | None = None, max_messages: int = 1) -> list[IncomingMessage]:
        if self.hand_out.ready:
            with self._lock:
                taken = self.hand_out.next_ready(max_messages)
            if taken:
                return taken
        consumer = self._consumer
        if consumer is None:
            if self.stopped:
                return []
            raise MessagingException(f"{self.name}: poll() called before start()")
        take = self.take_size
        limit = wanted = max(1, max_messages if max_messages < take else take)
        deadline = None if timeout is None else time.monotonic() + timeout
        stopped = self._stopped.is_set
        tick, gate, workers = self.dispatcher.tick, self._gate, self.dispatcher.workers
        with self._lock:
            while not stopped():
                self.errors.raise_if_fatal()
                self.errors.summarize_due()
                if tick is not None:
                    tick()
                if workers is not None:
                    # hand out no more than the workers can take at once, so that the
                    # caller never blocks in submit() and this loop keeps committing
                    room = workers.room
                    if room <= 0:
                        wait = self._slice if deadline is None else min(self._slice, deadline - time.monotonic())
                        if wait <= 0:
                            return []
                        workers.wait_for_room(wait)
                        continue
                    limit = wanted if wanted < room else room
                if gate is not None:
                    due = gate.release(limit)
                    if due:
                        messages = self.hand_out.messages(due)
                        if messages:
                            return messages
                        continue
                records = self.fetcher.take(consumer, self._wait(deadline), limit)
                if records is None:
                    if deadline is not None and time.monotonic() >= deadline:
                        return []
                    continue
                if not records:
                    continue
                try:
                    messages = self._process(records)
                except Exception:
                    self.hand_out.ready = self.fetcher.rewind(consumer, records, self.hand_out.ready)
                    raise
                if messages:
                    return messages
                if deadline is not None and time.monotonic() >= deadline:
                    return []
        return []

    def _wait(self, deadline: float | None) -> float:
        """One client poll's wait: a slice, shorter when a delayed record or the deadline is due."""
        wait = self._slice
        if self._gate is not None:
            due_in = self._gate.seconds_to_next()
            if due_in is not None and due_in < wait:
                wait = due_in
        if deadline is not None:
            left = deadline - time.monotonic()
            if left < wait:
                wait = left if left > 0 else 0
        return wait

    def _process(self, records: list[Message]) -> list[IncomingMessage]:
        """Errors out, delayed records held, then the hand-out."""
        good = cast("list[ConsumedRecord]", records)  # unless the check below finds an error
        for record in records:
            if record.error() is not None:
                kept: list[Message] = []
                for r in records:
                    err = r.error()
                    if err is None:
                        kept.append(r)
                    else:
                        self.errors.on_record(err)
                good = cast("list[ConsumedRecord]", kept)
                break
        if self._gate is not None and good:
            good = self._gate.admit(good)
        if not good:
            return []
        return self.hand_out.messages(good)

    def submit(self, message: IncomingMessage, work: Work) -> None:
        """Run ``work(message)`` (dispatch and settle) inline or on the key's worker."""
        self.dispatcher.submit(message, work)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for dispatches handed to workers and for retry / dead-letter copies to finish."""
        return self.dispatcher.drain(timeout)

    def abort(self) -> None:
        """Abrupt stop: stop reading, drop dispatches not started; unfinished work is not committed."""
        self.dispatcher.aborted = True
        self.stop()
        self.dispatcher.abort()

    def metrics(self) -> dict[str, Any]:
        """Counters, in-flight work, and per partition the committed offset and the lag."""
        out: dict[str, Any] = dict(self.counters.as_dict())
        out["cancelled"] += self.dispatcher.cancelled_waiting()
        out["in_flight"] = self.dispatcher.in_flight()
        out["held_for_retry"] = self._gate.held if self._gate is not None else 0
        out["assignment"] = sorted(self.membership.assignment)
        out["committed"], out["lag"] = self.membership.committed_and_lag(self.closed)
        return out

    def commit(self) -> None:
        if self._consumer is not None:
            self.policy.commit()

    def cleanup(self) -> None:
        """Stop; finish work in flight (unless aborted, bounded by ``shutdown_timeout``); commit;
        close the consumer (leaving the group) and the workers."""
        self._stopped.set()
        grace = self.settings.shutdown_timeout
        side = self.dispatcher.side
        if not self.dispatcher.aborted:
            if not self.drain(grace):
                LOG.warning("%s: work still in flight after shutdown_timeout (%.1fs); it is not "
                            "committed and will be delivered again", self.name, grace)
                self.abort()
        elif side is not None:
            side.flush(min(1.0, grace))
        wait = self._op_timeout + 2 * STOP_CHECK_INTERVAL
        if not self._lock.acquire(timeout=wait):
            LOG.error("%s: a poll() is still running after %.1fs; consumer left open", self.name, wait)
            return
        try:
            self._close_consumer()
        finally:
            self._lock.release()
        self.dispatcher.close()
        self.errors.summarize()

    def _close_consumer(self) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        try:
            self.policy.on_close()
        except Exception:  # noqa: BLE001
            LOG.exception("%s: commit policy failed on close", self.name)
        self._consumer = None
        dropped = self.hand_out.drop_ready()
        if dropped:
            # an abrupt stop (or a caller that did not poll them): taken, never dispatched
            LOG.warning("%s: %d received notification(s) not dispatched at close", self.name, dropped)
            for _ in range(dropped):
                self.counters.cancelled.incr()
        self.membership.leave(consumer)
        close_within(consumer, self._op_timeout, self.name, f"notify-kafka-close-{self.group_id}")
        self.membership.assignment = frozenset()
        self.fetcher.backlog = []
        if self._gate is not None:
            self._gate.clear()
