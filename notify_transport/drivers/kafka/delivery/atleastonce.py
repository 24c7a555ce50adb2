"""The at-least-once commit policy (``delivery_mode = at_least_once``).

An offset is committed only once its record and every earlier one of its
partition finished (:mod:`.tracker`): every ``commit_interval`` seconds
asynchronously, and synchronously on revoke, ``commit()`` and close. Records of a
revoked partition change nothing when they finish (their track is closed).
"""
from __future__ import annotations

import logging
import time
from typing import Any, Iterable

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from notify_transport.drivers.base import IncomingMessage
from notify_transport.drivers.kafka.delivery.commit import CommitPolicy, commit_sync
from notify_transport.drivers.kafka.partitions import format_offsets
from notify_transport.drivers.kafka.delivery.counters import DeliveryCounters
from notify_transport.drivers.kafka.delivery.hooks import ListenerHooks
from notify_transport.drivers.kafka.delivery.retry import Requeuer
from notify_transport.drivers.kafka.delivery.tracker import OffsetTracker, PartitionTrack
from notify_transport.drivers.kafka.message import ConsumedRecord, KafkaMessage

LOG = logging.getLogger(__name__)


class _Handle:
    """The ack/requeue callbacks of the records of one partition assignment."""

    __slots__ = ("policy", "track")

    def __init__(self, policy: "AtLeastOnce", track: PartitionTrack) -> None:
        self.policy = policy
        self.track = track

    def on_ack(self, message: IncomingMessage) -> None:
        self.track.finish(message.offset)  # type: ignore[arg-type]

    def on_requeue(self, message: IncomingMessage) -> None:
        self.policy.requeue(self, message)


class AtLeastOnce(CommitPolicy):
    """See the module docstring."""

    def __init__(self, requeuer: Requeuer, counters: DeliveryCounters,
                 hooks: ListenerHooks, commit_interval: float = 1.0) -> None:
        super().__init__()
        self.tracker = OffsetTracker()
        self.requeuer = requeuer
        self.counters = counters
        self.hooks = hooks
        self.interval = commit_interval
        self._next_commit = time.monotonic() + commit_interval
        self._handles: dict[tuple[str, int], _Handle] = {}
        self.take = self._take
        self.tick = self._tick
        self.on_commit_result = self._on_commit_result

    def _handle(self, topic: str, partition: int) -> _Handle:
        handle = self._handles.get((topic, partition))
        if handle is None or handle.track.closed:
            handle = _Handle(self, self.tracker.get(topic, partition))
            self._handles[(topic, partition)] = handle
        return handle

    def _take(self, record: ConsumedRecord) -> _Handle:
        handle = self._handle(record.topic(), record.partition())
        handle.track.add(record.offset())
        return handle

    def on_assigned(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            track = self.tracker.assign(tp.topic, tp.partition, tp.offset)
            self._handles[(tp.topic, tp.partition)] = _Handle(self, track)

    def still_owned(self, message: IncomingMessage) -> bool:
        handle = message.owner if isinstance(message, KafkaMessage) else None
        return not isinstance(handle, _Handle) or not handle.track.closed

    def in_flight(self) -> int:
        return self.tracker.in_flight

    def requeue(self, handle: _Handle, message: IncomingMessage) -> None:
        record: ConsumedRecord = message.record  # type: ignore[attr-defined]
        self._copy(handle.track, record, lambda done: self.requeuer.requeue(
            record, getattr(message, "error", None), done))

    def on_undecodable(self, record: ConsumedRecord, error: Exception) -> None:
        track = self._handle(record.topic(), record.partition()).track
        self._copy(track, record, lambda done: self.requeuer.dead_letter(
            record, f"undecodable: {error}", done, logged=True))

    def _copy(self, track: PartitionTrack, record: ConsumedRecord, send: Any) -> None:
        offset = record.offset()

        def done(confirmed: bool) -> None:
            if confirmed:
                track.finish(offset)
            elif not track.closed:
                LOG.error("%s: %s[%d]@%d could not be copied to its retry/dead-letter topic; it "
                          "stays uncommitted (with what follows it in its partition) and will be "
                          "delivered again after a restart or rebalance", self.name, record.topic(),
                          record.partition(), offset)

        send(done)

    def _tick(self) -> None:
        now = time.monotonic()
        if now >= self._next_commit:
            self._next_commit = now + self.interval
            self._commit_async()

    def _commit_async(self) -> None:
        tracks = self.tracker.uncommitted()
        if not tracks or self.consumer is None:
            return
        offsets = [TopicPartition(t.topic, t.partition, t.position) for t in tracks]  # type: ignore[arg-type]
        try:
            self.consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            self.counters.commit_failures.incr()
            LOG.warning("%s: could not start a commit of %s: %s", self.name, format_offsets(offsets),
                        exc.args[0].str())

    def _on_commit_result(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        self._record(partitions, err)

    def _record(self, partitions: list[TopicPartition], err: Any) -> None:
        """Note confirmed positions; count and report the outcome."""
        done = [tp for tp in partitions if tp.error is None and tp.offset >= 0] if err is None else []
        for tp in done:
            key = (tp.topic, tp.partition)
            if self.committed.get(key, -1) < tp.offset:
                self.committed[key] = tp.offset
            handle = self._handles.get(key)
            if handle is not None and not handle.track.closed:
                track = handle.track
                if track.committed is None or track.committed < tp.offset:
                    track.committed = tp.offset
        failed = err is not None or len(done) < len(partitions)
        (self.counters.commit_failures if failed else self.counters.commits).incr()
        text = None
        if failed:
            text = err.str() if isinstance(err, KafkaError) else str(err or "; ".join(
                str(tp.error) for tp in partitions if tp.error is not None))
            LOG.warning("%s: commit of %s failed: %s (retried with the next commit; records "
                        "of a partition revoked meanwhile are delivered again)", self.name,
                        format_offsets(partitions), text)
        if self.hooks.on_commit is not None:
            self.hooks.call("on_commit", [(tp.topic, tp.partition, tp.offset) for tp in partitions],
                            text)

    def _commit_sync(self, offsets: list[TopicPartition]) -> bool:
        if not offsets or self.consumer is None:
            return True
        answered, err = commit_sync(self.consumer, offsets)
        if not answered:  # nothing to commit
            return True
        self._record(answered, err)
        return err is None

    def commit(self) -> None:
        tracks = self.tracker.uncommitted()
        self._commit_sync([TopicPartition(t.topic, t.partition, t.position)  # type: ignore[arg-type]
                           for t in tracks])

    def on_revoke(self, partitions: list[TopicPartition], lost: bool = False) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        tracks = self.tracker.revoke(keys)
        for key in keys:
            self._handles.pop(key, None)
        offsets = _close(tracks)
        if lost:
            if offsets:
                LOG.warning("%s: partitions lost before %s could be committed; those records "
                            "will be delivered again", self.name, format_offsets(offsets))
            return
        self._commit_sync(offsets)

    def on_close(self) -> None:
        tracks = self.tracker.revoke([(t.topic, t.partition) for t in self.tracker.tracks()])
        self._handles.clear()
        self._commit_sync(_close(tracks))


def _close(tracks: Iterable[PartitionTrack]) -> list[TopicPartition]:
    """Close each track; the commit positions of those that have one."""
    return [TopicPartition(t.topic, t.partition, position) for t in tracks if (position := t.close()) is not None]
