"""A listener's place in its consumer group: joining, start positions, hand-backs, leaving.

The group (the listener's pool) decides which partitions this member reads.
:meth:`GroupMembership.join` returns once the group gave it its partitions and
every one of them has a committed position (a partition never read gets its
reset position committed), so a message sent after ``start()`` is read even if
another member takes the partition later. The rebalance callbacks keep
:attr:`GroupMembership.assignment` and tell the commit policy and the hooks;
:meth:`GroupMembership.leave` hands everything back before the consumer closes.
"""
from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import confluent_kafka
from confluent_kafka import KafkaException, Message, TopicPartition

from notify_transport.backoff import Backoff
from notify_transport.drivers import threads
from notify_transport.drivers.kafka.client_errors import ClientErrors, KafkaListenerError, is_permanent
from notify_transport.drivers.kafka.cluster import ClusterAdmin, ClusterError
from notify_transport.drivers.kafka.delivery.commit import CommitPolicy, commit_sync
from notify_transport.drivers.kafka.delivery.settings import ListenerSettings
from notify_transport.drivers.kafka.partitions import Partition, format_offsets, format_partitions
from notify_transport.drivers.kafka.positions import EARLIEST, LATEST, StartPosition, resolve_offsets
from notify_transport.exceptions import MessagingException, MessagingTimeout

if TYPE_CHECKING:
    import threading

LOG = logging.getLogger(__name__)

#: Seconds between checks, under KIP-848, that the group took a listener in without partitions.
KIP848_JOIN_CHECK = 0.25

#: Waits between attempts to read or set a new assignment's start offsets.
START_RETRY = Backoff(initial=0.1, factor=2.0, maximum=1.0)

#: Longest single wait while leaving the group before close.
LEAVE_POLL = 0.05

#: Longest single poll while waiting to join.
JOIN_POLL = 0.05


class GroupMembership:
    """The partitions one consumer owns, kept by the group's rebalance callbacks.

    ``on_gone(partitions)`` is told of partitions revoked or lost (the
    listener drops what it holds of them); ``before_hand_back()``, if given,
    runs before a revoke is passed on to the commit policy.
    """

    def __init__(self, name: str, config: Mapping[str, Any], topics: list[str], policy: CommitPolicy,
                 settings: ListenerSettings, admin: ClusterAdmin | None, operation_timeout: float,
                 stopped: threading.Event, on_gone: Callable[[set[Partition]], None],
                 before_hand_back: Callable[[], None] | None = None) -> None:
        self.name = name
        self.group_id: str = config["group.id"]
        self.topics = topics
        self.policy = policy
        self.settings = settings
        self._hooks = settings.hooks
        self._admin = admin
        self._op_timeout = operation_timeout
        self._stopped = stopped
        self._on_gone = on_gone
        self._before_hand_back = before_hand_back
        self._earliest = str(config.get("auto.offset.reset", "latest")) in ("earliest", "smallest", "beginning")
        self.kip848 = config.get("group.protocol") == "consumer"
        #: a static member (KIP-345) keeps its place in the group when it stops
        self._static = bool(config.get("group.instance.id"))
        # KIP-848 groups hand out and take back partitions incrementally, as cooperative ones do
        self._cooperative = "cooperative" in str(config.get("partition.assignment.strategy", "")) or self.kip848
        #: replaced, never changed in place: other threads (metrics) read it without a lock
        self.assignment: frozenset[Partition] = frozenset()
        self.joined = threads.Event()
        #: partitions the start_position was applied to (only the first assignment replays)
        self._positioned: set[Partition] = set()
        #: partitions revoked or lost while :meth:`watching` (see the listener's take of a batch)
        self._gone_meanwhile: set[Partition] | None = None

    def subscribe(self, consumer: confluent_kafka.Consumer, topics: list[str]) -> None:
        consumer.subscribe(topics, on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_lost)

    def join(self, consumer: confluent_kafka.Consumer, timeout: float, errors: ClientErrors,
             keep: Callable[[Message], None]) -> None:
        """Poll until the group gave this member its partitions (records read meanwhile go to
        ``keep``); a permanent error raises :class:`KafkaListenerError`, ``timeout`` seconds
        without partitions :class:`MessagingTimeout`."""
        deadline = time.monotonic() + timeout
        next_check = time.monotonic() + KIP848_JOIN_CHECK
        while not self.joined.is_set():
            if self._stopped.is_set():
                return
            if self.kip848 and time.monotonic() >= next_check:
                next_check = time.monotonic() + KIP848_JOIN_CHECK
                if self.joined_without_partitions(consumer):
                    return
            record = consumer.poll(JOIN_POLL)
            if record is not None:
                err = record.error()
                if err is not None and is_permanent(err):
                    raise KafkaListenerError(f"{self.name}: cannot join the group: {err.str()}")
                keep(record)
            errors.raise_if_fatal()
            if time.monotonic() >= deadline:
                last = f"; last error: {errors.last.str()}" if errors.last else ""
                raise MessagingTimeout(
                    f"{self.name} did not get its partitions within {timeout}s "
                    f"(is the broker reachable? is another listener of the group not polling?){last}")

    def joined_without_partitions(self, consumer: confluent_kafka.Consumer) -> bool:
        """KIP-848: whether the group took this member in and has nothing for it.

        Under the consumer protocol librdkafka calls no callback for an empty assignment, so
        a member of a full pool would wait out its start timeout. A stable group listing this
        member with no partition for it means it is in, but only once every partition of its
        topics has a committed offset; one without would be read from its end later, after
        what was sent meanwhile, so it keeps waiting.
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

    def on_assign(self, consumer: confluent_kafka.Consumer, partitions: list[TopicPartition]) -> None:
        try:
            positioned = self.start_positions(consumer, partitions) if partitions else partitions
        except Exception as exc:  # noqa: BLE001 - an exception here would break poll()
            LOG.error("%s: could not set the start positions of %s (%s); falling back to the "
                      "committed offsets or auto_offset_reset", self.name, format_offsets(partitions), exc)
            positioned = partitions
        if self._cooperative:
            consumer.incremental_assign(positioned)
        else:
            consumer.assign(positioned)
        self.assignment = self.assignment | {(tp.topic, tp.partition) for tp in positioned}
        try:
            self.policy.on_assigned(positioned)
        except Exception:  # noqa: BLE001
            LOG.exception("%s: commit policy failed on assignment", self.name)
        if self._hooks.on_assign is not None:
            self._hooks.call("on_assign", [(tp.topic, tp.partition) for tp in positioned])
        self.joined.set()

    def start_positions(self, consumer: confluent_kafka.Consumer,
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
        # counts on the stored position (see joined_without_partitions)
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
                if time.monotonic() >= deadline or self._stopped.is_set():
                    raise
                LOG.debug("%s: could not %s %s yet (%s); trying again", self.name, what,
                          format_offsets(partitions), exc)
                START_RETRY.wait(failures, stop=self._stopped, deadline=deadline)

    def on_revoke(self, consumer: confluent_kafka.Consumer, partitions: list[TopicPartition]) -> None:
        self._give_up(partitions, lost=False)

    def on_lost(self, consumer: confluent_kafka.Consumer, partitions: list[TopicPartition]) -> None:
        LOG.warning("%s: lost partitions %s (session timed out?)", self.name, format_offsets(partitions))
        self._give_up(partitions, lost=True)

    def _give_up(self, partitions: list[TopicPartition], lost: bool) -> None:
        if self._before_hand_back is not None and not lost:
            self._before_hand_back()
        try:
            self.policy.on_revoke(partitions, lost)
        except Exception:  # noqa: BLE001
            LOG.exception("%s: commit policy failed on revoke", self.name)
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self.assignment = self.assignment - gone
        if self._gone_meanwhile is not None:
            self._gone_meanwhile |= gone
        self._on_gone(gone)
        if self._hooks.on_revoke is not None:
            self._hooks.call("on_revoke", sorted(gone))

    @contextlib.contextmanager
    def watching(self) -> Iterator[set[Partition]]:
        """The partitions revoked or lost while the block runs (a poll serving the callbacks)."""
        gone: set[Partition] = set()
        self._gone_meanwhile = gone
        try:
            yield gone
        finally:
            self._gone_meanwhile = None

    def committed_and_lag(self, closed: bool) -> tuple[dict[Partition, int], dict[Partition, int]]:
        """Per partition owned, the committed offset and the lag, asked of the cluster through the
        admin client (never the polling consumer); the policy's own commits where it cannot answer."""
        committed: dict[Partition, int] = dict(self.policy.committed)
        partitions = sorted(self.assignment)
        if self._admin is None or not partitions or closed:
            return committed, {}
        try:
            found, lag = self._admin.committed_and_lag(self.group_id, partitions)
        except Exception as exc:  # noqa: BLE001 - metrics must not break the caller
            LOG.debug("%s: metrics: %s", self.name, exc)
            return committed, {}
        committed.update(found)
        return committed, lag

    def leave(self, consumer: confluent_kafka.Consumer) -> None:
        """Unsubscribe and serve the hand-back here, so that ``close()`` finds nothing to revoke.

        A close that serves a rebalance can block forever in librdkafka (#4884); leaving
        first, with the consumer open, runs the revoke through the usual callbacks. Records
        taken meanwhile are dropped uncommitted, for the next owner. A static member does not
        leave (unsubscribe() would send a LeaveGroup and move its partitions to members that
        may be stopping too): its partitions wait for its ``group.instance.id``, as KIP-345
        intends, and close() revokes them locally.
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
            elif not self.assignment:
                break
            if time.monotonic() >= deadline:
                LOG.warning("%s: partitions %s still assigned %.1fs after unsubscribing; closing anyway",
                            self.name, sorted(self.assignment), self._op_timeout)
                break
        if dropped:
            LOG.debug("%s: %d record(s) read while leaving the group left uncommitted", self.name, dropped)


def close_within(consumer: confluent_kafka.Consumer, timeout: float, name: str, thread_name: str) -> None:
    """``consumer.close()`` on a thread of its own, waited for at most ``timeout`` seconds.

    A close that does not return (a librdkafka hang, see
    :meth:`GroupMembership.leave`) must not hold the service's stop() or
    wait(): past the bound the close is logged as an error and left running
    on its daemon thread, which keeps the handle alive.
    """
    def close() -> None:
        try:
            consumer.close()
        except (KafkaException, RuntimeError) as exc:
            LOG.warning("%s: error while closing the consumer: %s", name, exc)

    thread = threads.Thread(close, name=thread_name)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        LOG.error("%s: closing the consumer did not finish within %.1fs; it is left to finish in the "
                  "background (the group drops this member after its session timeout)", name, timeout)
