"""The Kafka listener: one confluent-kafka Consumer in a consumer group (the pool).

``start()`` returns once the group was joined and every assigned partition has
a committed position (a partition never read gets its reset position
committed), so a message sent after ``start()`` is read even if another member
takes the partition later. ``poll()`` returns as soon as one message is there
and skips (and logs) undecodable records. When offsets are committed is the
:mod:`.delivery.commit` policy's business; retry delays, dead letters, workers
and hooks are in :mod:`.delivery`.
"""
from __future__ import annotations

import functools
import logging
import time
from typing import Any, Callable, Mapping, Sequence, cast

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from notify_transport.backoff import Backoff
from notify_transport.drivers import threads
from notify_transport.drivers.base import IncomingMessage, Listener
from notify_transport.drivers.envelope import decode_notification
from notify_transport.drivers.kafka.partitions import Partition, format_offsets, format_partitions
from notify_transport.drivers.kafka.cluster import ClusterAdmin, ClusterError
from notify_transport.drivers.kafka.delivery.commit import CommitPolicy, commit_sync
from notify_transport.drivers.kafka.client_properties import RDKAFKA_LOG
from notify_transport.drivers.kafka.delivery.counters import DeliveryCounters
from notify_transport.drivers.kafka.delivery.deadletter import SideProducer
from notify_transport.drivers.kafka.message import ConsumedRecord, KafkaMessage
from notify_transport.drivers.kafka.positions import EARLIEST, LATEST, StartPosition, resolve_offsets
from notify_transport.drivers.reporting import RateLimitedLog
from notify_transport.drivers.kafka.delivery.retry import DelayGate
from notify_transport.drivers.kafka.delivery.settings import ListenerSettings
from notify_transport.drivers.kafka.delivery.workers import OrderedWorkers, worker_index
from notify_transport.exceptions import (ConfigurationError, DecodeError, MessagingException,
                                         MessagingTimeout)
from notify_transport.secrets import mask_properties

LOG = logging.getLogger(__name__)

#: Records of one take (one commit, up to max_poll_records) decoded and handed out per
#: poll() to a listener that dispatches one at a time: hundreds of decoded
#: notifications alive at once would make the garbage collector scan and promote
#: them, a cost the listener benchmark shows.
HAND_OUT_CHUNK = 64

#: Longest single wait inside poll(), so that stop() is noticed quickly.
STOP_CHECK_INTERVAL = 0.2

#: Errors that retrying cannot fix: raised out of start() and poll().
PERMANENT_ERRORS = frozenset(getattr(KafkaError, name) for name in (
    "INVALID_SESSION_TIMEOUT", "GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
    "INVALID_GROUP_ID", "SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION", "_INVALID_ARG",
    "UNSUPPORTED_VERSION", "_FATAL") if hasattr(KafkaError, name))


#: Longest single wait while leaving the group before close.
LEAVE_POLL = 0.05

#: Seconds between checks, under KIP-848, that the group took a listener in without partitions.
KIP848_JOIN_CHECK = 0.25

#: Waits between attempts to read or set a new assignment's start offsets.
START_RETRY = Backoff(initial=0.1, factor=2.0, maximum=1.0)


class KafkaListenerError(MessagingException):
    """The consumer hit an error that retrying cannot fix."""


class KafkaListener(Listener):
    """A driver listener over one consumer; see the module docstring for its guarantees."""

    def __init__(self, config: dict[str, Any], topics: list[str], policy: CommitPolicy, *,
                 admin: ClusterAdmin | None = None, max_poll_records: int = 500,
                 consumer_timeout: float = 1.0, start_timeout: float = 30.0,
                 operation_timeout: float = 10.0, settings: ListenerSettings | None = None,
                 retry_topics: list[str] | None = None,
                 dead_letter_topics: list[str] | None = None,
                 side: SideProducer | None = None,
                 counters: DeliveryCounters | None = None,
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
        self._side = side
        self._hooks = self.settings.hooks
        self.name = f"Kafka listener (group {self.group_id}, topics {','.join(self.topics)})"
        self._config = dict(config)
        self._earliest = str(config.get("auto.offset.reset", "latest")) in ("earliest", "smallest",
                                                                            "beginning")
        self._kip848 = config.get("group.protocol") == "consumer"
        #: a static member (KIP-345) keeps its place in the group when it stops
        self._static = bool(config.get("group.instance.id"))
        # KIP-848 groups hand out and take back partitions incrementally, as cooperative ones do
        self._cooperative = ("cooperative" in str(config.get("partition.assignment.strategy", ""))
                             or self._kip848)
        self._admin = admin
        #: max_poll_records: the most one poll takes from the client (one commit)
        self.take_size: int = max(1, int(max_poll_records))
        self._slice = max(0.001, min(consumer_timeout, STOP_CHECK_INTERVAL))
        self._start_timeout = start_timeout
        self._op_timeout = operation_timeout
        self._consumer: confluent_kafka.Consumer | None = None
        self._backlog: list[Message] = []
        self._joined = threads.Event()
        #: replaced, never changed in place: other threads (metrics) read it without a lock
        self._assignment: frozenset[tuple[str, int]] = frozenset()
        self._lock = threads.Lock()
        self._fatal: KafkaError | None = None
        self._last_error: KafkaError | None = None
        self._errors = RateLimitedLog(LOG)
        #: Records skipped because they could not be decoded.
        self.skipped = 0
        self._gate: DelayGate | None = None
        self._workers: OrderedWorkers | None = None
        self._tick: Callable[[], None] | None = None
        self._aborted = False
        #: partitions the start_position was applied to (only the first assignment replays)
        self._positioned: set[tuple[str, int]] = set()
        #: a large take (one commit) is decoded and handed out this many records per poll,
        #: so each piece is freed before the next is decoded; the rest waits in _ready
        #: (taken by the policy: committed before dispatch, or stored), returned by
        #: poll() even after stop(), as the Listener contract says
        self._chunk: int | None = None if hand_out_chunk is None else max(1, int(hand_out_chunk))
        self._ready: list[ConsumedRecord] = []
        #: partitions revoked or lost while poll() takes the rest of a batch (see _take_rest)
        self._gone_meanwhile: set[tuple[str, int]] | None = None

    def __repr__(self) -> str:
        return f"<{self.name}>"

    @property
    def closed(self) -> bool:
        """Stopped and its consumer closed (or never started)."""
        return self.stopped and self._consumer is None

    @property
    def assignment(self) -> set[tuple[str, int]]:
        """``(topic, partition)`` pairs this listener owns now."""
        return set(self._assignment)

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
        config["error_cb"] = self._on_error
        config["logger"] = RDKAFKA_LOG
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
            self._gate = DelayGate(self.retry_topics, self.settings.retry_delay, consumer.pause,
                                   consumer.resume)
        if self._side is not None or self.policy.tick is not None:
            self._tick = self._housekeeping
        if self.settings.workers > 1 and self._workers is None:
            self._workers = OrderedWorkers(self.settings.workers, self.settings.max_in_flight,
                                           name=f"notify-kafka-{self.group_id}")
        consumer.subscribe(self.topics + self.retry_topics, on_assign=self._on_assign,
                           on_revoke=self._on_revoke, on_lost=self._on_lost)
        deadline = time.monotonic() + self._start_timeout
        next_check = time.monotonic() + KIP848_JOIN_CHECK
        try:
            while not self._joined.is_set():
                if self.stopped:
                    return
                if self._kip848 and time.monotonic() >= next_check:
                    next_check = time.monotonic() + KIP848_JOIN_CHECK
                    if self._joined_without_partitions(consumer):
                        break
                record = consumer.poll(0.05)
                if record is not None:
                    err = record.error()
                    if err is not None and (err.fatal() or err.code() in PERMANENT_ERRORS):
                        raise KafkaListenerError(f"{self.name}: cannot join the group: {err.str()}")
                    self._backlog.append(record)
                self._raise_if_fatal()
                if time.monotonic() >= deadline:
                    last = f"; last error: {self._last_error.str()}" if self._last_error else ""
                    raise MessagingTimeout(
                        f"{self.name} did not get its partitions within {self._start_timeout}s "
                        f"(is the broker reachable? is another listener of the group not "
                        f"polling?){last}")
        except BaseException:
            self._close_consumer()
            raise
        LOG.debug("%s started with partitions %s", self.name, sorted(self._assignment))

    def _joined_without_partitions(self, consumer: confluent_kafka.Consumer) -> bool:
        """KIP-848: whether the group took this member in and has nothing for it.

        librdkafka calls no rebalance callback for an empty assignment under the
        consumer protocol, so a listener joining a pool whose partitions are all
        held would otherwise wait for its whole start timeout. A stable group
        that lists this member and gives it no partition means it is in, provided
        every partition of its topics has a committed offset: only then is a
        notification sent once start() returned read by the pool, whoever gets the
        partition later. A partition without one (its owner died before storing its
        start position, or the group has not handed the topic out yet) would be read
        from its end at assignment, after what was sent meanwhile: keep waiting.
        """
        if self._admin is None:
            return False
        try:
            info = self._admin.describe_pool(self.group_id)
            me = consumer.memberid()
            if info.state != "stable" or me not in info.member_ids:
                return False
            if any(owner.member_id == me for owner in info.owners.values()):
                return False  # partitions are on their way: on_assign will come
            partitions, missing = self._admin.partitions_of(self.topics)
            if missing or not partitions:
                return False
            committed = self._admin.committed(self.group_id, partitions)
        except Exception as exc:  # noqa: BLE001 - the next check or an assignment may succeed
            LOG.debug("%s: checking the group failed: %s", self.name, exc)
            return False
        unpositioned = [tp for tp in partitions if committed.get(tp, -1) < 0]
        if unpositioned:
            LOG.debug("%s: in the group with no partition, but %s have no committed offset yet; waiting",
                      self.name, format_partitions(unpositioned))
            return False
        LOG.debug("%s: in the group with no partition (all held by other listeners)", self.name)
        return True

    def _on_assign(self, consumer: confluent_kafka.Consumer, partitions: list[TopicPartition]) -> None:
        try:
            positioned = self._start_positions(consumer, partitions) if partitions else partitions
        except Exception as exc:  # noqa: BLE001 - an exception here would break poll()
            LOG.error("%s: could not set the start positions of %s (%s); falling back to the "
                      "committed offsets or auto_offset_reset", self.name,
                      format_offsets(partitions), exc)
            positioned = partitions
        if self._cooperative:
            consumer.incremental_assign(positioned)
        else:
            consumer.assign(positioned)
        self._assignment = self._assignment | {(tp.topic, tp.partition) for tp in positioned}
        try:
            self.policy.on_assigned(positioned)
        except Exception:  # noqa: BLE001
            LOG.exception("%s: commit policy failed on assignment", self.name)
        if self._hooks.on_assign is not None:
            self._hooks.call("on_assign", [(tp.topic, tp.partition) for tp in positioned])
        self._joined.set()

    def _start_positions(self, consumer: confluent_kafka.Consumer,
                         partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Committed offsets; for partitions without one, resolve the end (or start) and commit it.

        The first time this listener gets a partition of its own topics, a
        ``start_position`` other than ``committed`` replaces the committed
        offset (and is committed, so the whole pool replays from there).
        Every partition returned has a concrete offset: one left to the
        consumer's lazy ``auto.offset.reset`` would be resolved at its first
        fetch, possibly after notifications sent since start() returned.
        """
        committed = self._retrying("read the committed offsets of", partitions,
                                   lambda: consumer.committed(partitions, timeout=self._op_timeout))
        position = self.settings.start_position
        first = [tp for tp in committed if tp.topic in self.topics
                 and (tp.topic, tp.partition) not in self._positioned]
        if first and position.overrides_committed:
            self._commit_start(consumer, first, position)
            LOG.info("%s: start_position %s: reading %s", self.name, position, format_offsets(first))
        self._positioned.update((tp.topic, tp.partition) for tp in first)
        fresh = [tp for tp in committed if tp.offset < 0]
        if fresh:
            self._commit_start(consumer, fresh, StartPosition(EARLIEST if self._earliest else LATEST))
            LOG.debug("%s: first reader of %s; committed start positions", self.name, format_offsets(fresh))
        return committed

    def _commit_start(self, consumer: confluent_kafka.Consumer, partitions: list[TopicPartition],
                      position: StartPosition) -> None:
        """Move ``partitions`` to where ``position`` starts (resolved by :mod:`.positions`) and
        commit that, so that the whole pool reads from there.

        The offsets are set on ``partitions`` even when the commit fails (the
        group may be rebalancing again): this member reads from them, and its
        first commit saves them for the pool.
        """
        resolved = self._retrying("find the start offsets of", partitions,
                                  lambda: resolve_offsets(self._offsets_at, partitions, position))
        wanted = {(tp.topic, tp.partition): tp.offset for tp in resolved}
        for tp in partitions:
            tp.offset = wanted[(tp.topic, tp.partition)]
        # retried a moment where that may pass: a listener of the pool that joins meanwhile
        # counts on the stored position (see _joined_without_partitions)
        _, err = commit_sync(consumer, [TopicPartition(tp.topic, tp.partition, tp.offset) for tp in partitions])
        if err is not None:
            LOG.warning("%s: could not commit the start positions of %s (%s); reading from them anyway",
                        self.name, format_offsets(partitions), err.str())

    def _offsets_at(self, partitions: Sequence[Partition], spec: int) -> Mapping[Partition, int]:
        """ListOffsets through the admin client (:meth:`ClusterAdmin.offsets_at`), errors as ours."""
        if self._admin is None:
            raise MessagingException(f"{self.name}: no admin client to list the offsets of "
                                     f"{format_partitions(partitions)} with")
        try:
            return self._admin.offsets_at(partitions, spec)
        except ClusterError as exc:  # answered, but refused: may pass (a leader being elected)
            raise MessagingException(f"cannot list {exc}") from None

    def _retrying(self, what: str, partitions: list[TopicPartition], call: Callable[[], Any]) -> Any:
        """``call()``, tried again on a broker error until ``operation_timeout`` has passed.

        A topic created a moment ago may not have a leader yet, and a
        coordinator that just moved may still be loading its offsets: both
        answer with an error that passes.
        """
        deadline = time.monotonic() + self._op_timeout
        failures = 0
        while True:
            try:
                return call()
            except (KafkaException, MessagingException) as exc:
                failures += 1
                if time.monotonic() >= deadline or self.stopped:
                    raise
                LOG.debug("%s: could not %s %s yet (%s); trying again", self.name, what,
                          format_offsets(partitions), exc)
                START_RETRY.wait(failures, stop=self._stopped, deadline=deadline)

    def _on_revoke(self, consumer: confluent_kafka.Consumer, partitions: list[TopicPartition]) -> None:
        self._give_up(partitions, lost=False)

    def _on_lost(self, consumer: confluent_kafka.Consumer, partitions: list[TopicPartition]) -> None:
        LOG.warning("%s: lost partitions %s (session timed out?)", self.name, format_offsets(partitions))
        self._give_up(partitions, lost=True)

    def _give_up(self, partitions: list[TopicPartition], lost: bool) -> None:
        if self._side is not None and not lost:
            # copies confirmed now let their originals be committed before the hand-over
            self._side.flush(min(self._op_timeout, self.settings.shutdown_timeout))
        try:
            self.policy.on_revoke(partitions, lost)
        except Exception:  # noqa: BLE001
            LOG.exception("%s: commit policy failed on revoke", self.name)
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._assignment = self._assignment - gone
        if self._gone_meanwhile is not None:
            self._gone_meanwhile |= gone
        if self._backlog:  # not handed out, not committed: the next owner reads them
            self._backlog = [r for r in self._backlog if (r.topic(), r.partition()) not in gone]
        if self._gate is not None:
            self._gate.drop(gone)
        if self._hooks.on_revoke is not None:
            self._hooks.call("on_revoke", sorted(gone))

    def _on_error(self, err: KafkaError) -> None:
        self._last_error = err
        if err.fatal() or err.code() in PERMANENT_ERRORS:
            self._fatal = err
            LOG.error("%s: %s", self.name, err.str())
        else:
            self._errors.log(logging.WARNING, err.code(), "%s: %s", self.name, err.str())

    def _raise_if_fatal(self) -> None:
        if self._fatal is not None:
            raise KafkaListenerError(f"{self.name}: {self._fatal.str()}")

    def _record_error(self, err: KafkaError) -> None:
        """An error delivered as a record: raise what is permanent, log the rest."""
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            return
        self._last_error = err
        if err.fatal() or code in PERMANENT_ERRORS:
            raise KafkaListenerError(f"{self.name}: {err.str()}")
        self._errors.log(logging.WARNING, code, "%s: %s", self.name, err.str())

    def poll(self, timeout: float | None = None, max_messages: int = 1) -> list[IncomingMessage]:
        if self._ready:
            with self._lock:
                taken = self._take_ready(max_messages)
            if taken:
                return taken
        consumer = self._consumer
        if consumer is None:
            if self.stopped:
                return []
            raise MessagingException(f"{self.name}: poll() called before start()")
        take = self.take_size
        limit = max_messages if max_messages < take else take
        if limit < 1:
            limit = 1
        deadline = None if timeout is None else time.monotonic() + timeout
        stopped = self._stopped.is_set
        tick = self._tick
        gate = self._gate
        workers = self._workers
        wanted = limit
        with self._lock:
            while not stopped():
                if self._fatal is not None:
                    self._raise_if_fatal()
                if tick is not None:
                    tick()
                if workers is not None:
                    # hand out no more than the workers can take at once, so that the
                    # caller never blocks in submit() and this loop keeps committing
                    room = workers.room
                    if room <= 0:
                        wait = self._slice if deadline is None else min(
                            self._slice, deadline - time.monotonic())
                        if wait <= 0:
                            return []
                        workers.wait_for_room(wait)
                        continue
                    limit = wanted if wanted < room else room
                if gate is not None:
                    due = gate.release(limit)
                    if due:
                        messages = self._hand_out(due)
                        if messages:
                            return messages
                        continue
                if self._backlog:
                    records = self._backlog[:limit]
                    del self._backlog[:limit]
                else:
                    wait = self._slice
                    if gate is not None:
                        due_in = gate.seconds_to_next()
                        if due_in is not None and due_in < wait:
                            wait = due_in
                    if deadline is not None:
                        left = deadline - time.monotonic()
                        if left < wait:
                            wait = left if left > 0 else 0
                    first = consumer.poll(wait)
                    if first is None:
                        if deadline is not None and time.monotonic() >= deadline:
                            return []
                        continue
                    records = self._take_rest(consumer, first, limit) if limit > 1 else [first]
                    if not records:
                        continue
                try:
                    messages = self._process(records)
                except Exception:
                    self._rewind(consumer, records)
                    raise
                if messages:
                    return messages
                if deadline is not None and time.monotonic() >= deadline:
                    return []
        return []

    def _take_rest(self, consumer: confluent_kafka.Consumer, first: Message, limit: int) -> list[Message]:
        """``first`` and up to ``limit - 1`` records more, without waiting.

        ``consume()`` serves the rebalance callbacks before it returns records
        (and drops those of a revoked assignment), but ``first`` came from an
        earlier call. If its partition was revoked or lost in between, it
        belongs to the old assignment: handed out, it would be dispatched a
        second time beside its next owner, and its commit could move that
        owner's committed offset back. It is left out; nothing committed it, so
        the partition's next reader (this listener again, perhaps) reads it from
        the committed offset.
        """
        self._gone_meanwhile = set()
        try:
            rest = consumer.consume(limit - 1, 0)
            gone = self._gone_meanwhile
        finally:
            self._gone_meanwhile = None
        if gone and first.error() is None and (first.topic(), first.partition()) in gone:
            self.counters.stale.incr()
            LOG.debug("%s: %s[%d]@%d left to its next reader: its partition was revoked before it "
                      "was handed out", self.name, first.topic(), first.partition(), first.offset())
            return rest
        rest.insert(0, first)
        return rest

    def _rewind(self, consumer: Any, records: list[Message]) -> None:
        """Seek back to where ``records`` began in each partition, after handing them out failed.

        The client's position is already past them, so without this a caller that polls again
        (as the server does after logging the error) would never see them: the next poll reads
        them again instead. The records held back behind them go too; they are read again.
        """
        first: dict[Partition, int] = {}
        taken = [r for r in (*records, *self._backlog) if r.error() is None]
        for record in [*cast("list[ConsumedRecord]", taken), *self._ready]:
            key = (record.topic(), record.partition())
            offset = record.offset()
            if key not in first or offset < first[key]:
                first[key] = offset
        self._backlog = [r for r in self._backlog if (r.topic(), r.partition()) not in first]
        self._ready = [r for r in self._ready if (r.topic(), r.partition()) not in first]
        for (topic, partition), offset in first.items():
            position = TopicPartition(topic, partition, offset)
            try:
                consumer.seek(position)
            except KafkaException as exc:  # no longer assigned: its next owner starts at the commit
                LOG.warning("%s: could not rewind %s after a failed hand-out: %s", self.name,
                            format_offsets([position]), exc)
            else:
                LOG.warning("%s: handing out failed; %s will be read again", self.name,
                            format_offsets([position]))

    def _process(self, records: list[Message]) -> list[IncomingMessage]:
        """Errors out, delayed records held, then :meth:`_hand_out`."""
        good = cast("list[ConsumedRecord]", records)  # unless the check below finds an error
        for record in records:
            if record.error() is not None:
                kept: list[Message] = []
                for r in records:
                    err = r.error()
                    if err is None:
                        kept.append(r)
                    else:
                        self._record_error(err)
                good = cast("list[ConsumedRecord]", kept)
                break
        if self._gate is not None and good:
            good = self._gate.admit(good)
        if not good:
            return []
        return self._hand_out(good)

    def _hand_out(self, good: list[ConsumedRecord]) -> list[IncomingMessage]:
        """Commit policy told, then decode; undecodable records are skipped (or dead-lettered).

        With a hand-out chunk, only the first pieces are decoded now (more of
        them while the policy's commit is still in flight); the rest waits in
        ``_ready`` for the next polls.
        """
        policy = self.policy
        if policy.take is not None:
            return self._decode(good, policy.take)
        # the policy's commit (if any) runs while the batch is decoded
        finish = policy.on_polled(good)
        try:
            chunk = self._chunk
            if chunk is None or len(good) <= chunk:
                return self._decode(good)
            pending = getattr(finish, "pending", None)
            out = self._decode(good[:chunk])
            taken = chunk
            while taken < len(good) and (not out or (pending is not None and pending())):
                out += self._decode(good[taken:taken + chunk])
                taken += chunk
            self._ready.extend(good[taken:])
            return out
        finally:
            if finish is not None:
                finish()

    def _decode(self, records: list[ConsumedRecord],
                take: Callable[[ConsumedRecord], Any] | None = None) -> list[IncomingMessage]:
        """Messages of ``records``; undecodable ones are skipped.

        ``take`` (a tracking policy's) is told of every record first and gives
        each message its acknowledgement handlers; else they are the policy's.
        """
        out: list[IncomingMessage] = []
        append = out.append
        decode = decode_notification
        on_ack, on_requeue = self.policy.on_ack, self.policy.on_requeue
        handle = None
        for record in records:
            if take is not None:
                handle = take(record)
                on_ack, on_requeue = handle.on_ack, handle.on_requeue
            try:
                ctxt, message = decode(record.value())
            except DecodeError as exc:
                self._skip(record, exc)
                continue
            except Exception as exc:  # noqa: BLE001 - no record may stop the loop or its neighbours
                self._skip(record, DecodeError(f"cannot decode: {type(exc).__name__}: {str(exc)[:200]}"))
                continue
            append(KafkaMessage(ctxt, message, record, on_ack, on_requeue, handle))
        return out

    def _take_ready(self, max_messages: int) -> list[IncomingMessage]:
        """The next piece of ``_ready`` (held by the caller's lock), decoded."""
        ready = self._ready
        size = max(1, min(max_messages, self._chunk or len(ready)))
        out: list[IncomingMessage] = []
        while ready and not out:
            piece = ready[:size]
            del ready[:size]
            out = self._decode(piece)
        return out

    def _skip(self, record: ConsumedRecord, exc: Exception) -> None:
        self.skipped += 1
        self.counters.undecodable.incr()
        action = ("dead-lettering" if self.settings.dead_letter_topic is not None
                  else "skipping")
        LOG.warning("%s: %s undecodable record %s[%d]@%d (%d bytes): %s", self.name, action,
                    record.topic(), record.partition(), record.offset(),
                    len(record.value() or b""), exc)
        try:
            self.policy.on_undecodable(record, exc)
        except Exception:  # noqa: BLE001
            LOG.exception("%s: commit policy failed on an undecodable record", self.name)

    def _housekeeping(self) -> None:
        """Delivery reports of retry / dead-letter copies, periodic commits."""
        if self._side is not None:
            self._side.serve()
        tick = self.policy.tick
        if tick is not None:
            tick()

    def submit(self, message: IncomingMessage, work: Callable[[IncomingMessage], Any]) -> None:
        """Run ``work(message)`` (dispatch and settle) inline or on the key's worker."""
        workers = self._workers
        if workers is None:
            self._run_work(message, work)
            return
        record = message.record  # type: ignore[attr-defined]
        index = worker_index(record.key(), record.topic(), record.partition(), workers.count)
        if not workers.submit(index, functools.partial(self._run_work, message, work)):
            self.counters.cancelled.incr()

    def _run_work(self, message: IncomingMessage, work: Callable[[IncomingMessage], Any]) -> None:
        if self._aborted:
            self.counters.cancelled.incr()
            return
        if not self.policy.still_owned(message):
            # its partition went to another listener, which reads it again: not dispatched here
            self.counters.stale.incr()
            return
        hooks = self._hooks
        if not hooks.around_dispatch:
            work(message)
        else:
            hooks.call("before_dispatch", message)
            started = time.perf_counter()
            result = work(message)
            elapsed = time.perf_counter() - started
            error = getattr(message, "error", None)
            if error is not None:
                hooks.call("on_error", message, error)
            hooks.call("after_dispatch", message, result, elapsed)
        if self._workers is None and self._tick is not None:
            # inline, this is the polling thread: keep committing during a long batch
            self._tick()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for dispatches handed to workers and for retry / dead-letter copies to finish."""
        deadline = None if timeout is None else time.monotonic() + timeout
        finished = True
        if self._workers is not None:
            finished = self._workers.drain(timeout)
        if self._side is not None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            finished = self._side.flush(self.settings.shutdown_timeout if left is None else left) == 0 \
                and finished
        return finished

    def abort(self) -> None:
        """Abrupt stop: stop reading, drop dispatches not started; unfinished work is not committed."""
        self._aborted = True
        self.stop()
        if self._workers is not None:
            self._workers.cancel()

    def metrics(self) -> dict[str, Any]:
        """Counters, in-flight work, and per partition the committed offset and the lag."""
        out: dict[str, Any] = dict(self.counters.as_dict())
        if self._workers is not None:
            out["cancelled"] += self._workers.dropped  # queued for a worker when aborted
        out["in_flight"] = self.policy.in_flight() + (self._workers.in_flight if self._workers else 0)
        out["held_for_retry"] = self._gate.held if self._gate is not None else 0
        out["assignment"] = sorted(self._assignment)
        committed, lag = self._positions_and_lag()
        out["committed"] = committed
        out["lag"] = lag
        return out

    def _positions_and_lag(self) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
        """Asked of the cluster through the admin client: never touches the polling consumer."""
        committed: dict[tuple[str, int], int] = dict(self.policy.committed)
        partitions = sorted(self._assignment)
        if self._admin is None or not partitions or self.closed:
            return committed, {}
        try:
            found, lag = self._admin.committed_and_lag(self.group_id, partitions)
        except Exception as exc:  # noqa: BLE001 - metrics must not break the caller
            LOG.debug("%s: metrics: %s", self.name, exc)
            return committed, {}
        committed.update(found)
        return committed, lag


    def commit(self) -> None:
        if self._consumer is not None:
            self.policy.commit()

    def cleanup(self) -> None:
        """Stop; finish work in flight (unless aborted, bounded by ``shutdown_timeout``); commit;
        close the consumer (leaving the group) and the workers."""
        self._stopped.set()
        grace = self.settings.shutdown_timeout
        if not self._aborted:
            if not self.drain(grace):
                LOG.warning("%s: work still in flight after shutdown_timeout (%.1fs); it is not "
                            "committed and will be delivered again", self.name, grace)
                self.abort()
        elif self._side is not None:
            self._side.flush(min(1.0, grace))
        wait = self._op_timeout + 2 * STOP_CHECK_INTERVAL
        if not self._lock.acquire(timeout=wait):
            LOG.error("%s: a poll() is still running after %.1fs; consumer left open", self.name, wait)
            return
        try:
            self._close_consumer()
        finally:
            self._lock.release()
        if self._workers is not None:
            self._workers.close(min(grace, 5.0) if not self._aborted else 1.0)
        if self._side is not None:
            self._side.close(0)
        self._errors.summarize()

    def _close_consumer(self) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        try:
            self.policy.on_close()
        except Exception:  # noqa: BLE001
            LOG.exception("%s: commit policy failed on close", self.name)
        self._consumer = None
        if self._ready:
            # an abrupt stop (or a caller that did not poll them): taken, never dispatched
            LOG.warning("%s: %d received notification(s) not dispatched at close", self.name,
                        len(self._ready))
            for _ in self._ready:
                self.counters.cancelled.incr()
            self._ready = []
        self._leave(consumer)
        self._close_within(consumer, self._op_timeout)
        self._assignment = frozenset()
        self._backlog = []
        if self._gate is not None:
            self._gate.clear()

    def _leave(self, consumer: confluent_kafka.Consumer) -> None:
        """Unsubscribe and serve the hand-back here, so that ``close()`` finds nothing to revoke.

        librdkafka can block forever in a close that serves a rebalance: the
        assignment it makes from that callback waits for a group already
        terminating (librdkafka #4884, open in 2.16). Leaving the group first,
        while the consumer is still open, runs the revoke (and any assignment
        that was on its way) through the callbacks the usual way. Records taken
        meanwhile are dropped uncommitted: the partitions' next owner reads them.

        A static member does not leave: librdkafka sends a LeaveGroup on
        unsubscribe() even for one (not on close()), and the group would then
        move its partitions to the members still running, which are perhaps
        stopping too and committing their last offsets: a broker may refuse
        those commits once the group has moved on. Kept in the group, its
        partitions wait for the member with its ``group.instance.id`` (a
        restarted worker takes them back at once) or for its session to time
        out, as KIP-345 intends. Its close() revokes them locally.
        """
        if self._static:
            return
        try:
            consumer.unsubscribe()
        except (KafkaException, RuntimeError) as exc:
            LOG.debug("%s: unsubscribe before close failed: %s", self.name, exc)
            return
        deadline = time.monotonic() + self._op_timeout
        dropped = 0
        while True:
            try:
                record = consumer.poll(LEAVE_POLL)
            except (KafkaException, RuntimeError) as exc:
                LOG.debug("%s: poll while leaving the group failed: %s", self.name, exc)
                return
            if record is not None:
                dropped += record.error() is None
            elif not self._assignment:
                break
            if time.monotonic() >= deadline:
                LOG.warning("%s: partitions %s still assigned %.1fs after unsubscribing; closing anyway",
                            self.name, sorted(self._assignment), self._op_timeout)
                break
        if dropped:
            LOG.debug("%s: %d record(s) read while leaving the group left uncommitted", self.name, dropped)

    def _close_within(self, consumer: confluent_kafka.Consumer, timeout: float) -> None:
        """``consumer.close()`` on a thread of its own, waited for at most ``timeout`` seconds.

        A close that does not return (a librdkafka hang, see :meth:`_leave`)
        must not hold the service's stop() or wait(): past the bound the
        close is logged as an error and left running on its daemon thread,
        which keeps the handle alive.
        """
        def close() -> None:
            try:
                consumer.close()
            except (KafkaException, RuntimeError) as exc:
                LOG.warning("%s: error while closing the consumer: %s", self.name, exc)

        thread = threads.Thread(close, name=f"notify-kafka-close-{self.group_id}")
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            LOG.error("%s: closing the consumer did not finish within %.1fs; it is left to finish "
                      "in the background (the group drops this member after its session timeout)",
                      self.name, timeout)
