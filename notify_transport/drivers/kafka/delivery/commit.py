"""Commit policies: when a Kafka listener's offsets are committed.

The consumer loop fetches, decodes and hands messages out; *when* offsets are
committed is a :class:`CommitPolicy` it calls at fixed points (``on_assigned``,
``on_polled``, ``on_undecodable``, ``on_revoke``, ``commit``, ``on_close``), so
other delivery modes plug in without touching the loop. ``on_polled`` may return
a callable the loop runs once the batch is decoded. Policies that track each
record set ``take`` instead; ``tick`` runs at every turn of the loop and
``on_commit_result`` becomes the consumer's ``on_commit``.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from notify_transport.backoff import Backoff
from notify_transport.drivers import threads
from notify_transport.drivers.base import IncomingMessage
from notify_transport.drivers.kafka.delivery.counters import DeliveryCounters
from notify_transport.drivers.kafka.message import ConsumedRecord
from notify_transport.drivers.kafka.partitions import format_offsets

if TYPE_CHECKING:
    import queue

LOG = logging.getLogger(__name__)

#: Attempts of a synchronous commit on errors that may pass (a coordinator moving, a rebalance).
SYNC_COMMIT_ATTEMPTS = 3
#: Waits between them: 0.05 s, then 0.1 s; those errors pass in a moment or not at all.
SYNC_COMMIT_BACKOFF = Backoff(initial=0.05, factor=1.0, step=0.05, maximum=0.1)


def commit_sync(consumer: Consumer, offsets: list[TopicPartition]
                ) -> tuple[list[TopicPartition], KafkaError | None]:
    """Commit ``offsets`` synchronously, retrying what may pass.

    Returns what the broker answered (the offsets, each with its own error if
    any) and None, or the offsets and the last error. Nothing to commit
    (``_NO_OFFSET``) is no failure: nothing and None.
    """
    for attempt in range(1, SYNC_COMMIT_ATTEMPTS + 1):
        try:
            return consumer.commit(offsets=offsets, asynchronous=False) or offsets, None
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.code() == KafkaError._NO_OFFSET:
                return [], None
            if err.fatal() or not err.retriable() or attempt == SYNC_COMMIT_ATTEMPTS:
                return offsets, err
            # this module's sleep: native where eventlet_support switched the driver's modules
            threads.sleep(SYNC_COMMIT_BACKOFF.delay(attempt))
    return offsets, None  # pragma: no cover - the loop always returns


def next_offsets(records: Iterable[ConsumedRecord]) -> list[TopicPartition]:
    """Offsets to commit after ``records``: one past the highest offset of each partition."""
    highest: dict[tuple[str, int], int] = {}
    for record in records:
        key = (record.topic(), record.partition())
        offset = record.offset()
        if highest.get(key, -1) < offset:
            highest[key] = offset
    return [TopicPartition(topic, partition, offset + 1)
            for (topic, partition), offset in highest.items()]


class CommitPolicy:
    """Base policy: commits nothing by itself. Subclasses choose the moment."""

    #: Attached to every IncomingMessage; None means "nothing to do" (and costs nothing).
    on_ack: Callable[[IncomingMessage], None] | None = None
    on_requeue: Callable[[IncomingMessage], None] | None = None
    #: Per-record tracking (see the module docstring); None: on_polled() is used.
    take: Callable[[ConsumedRecord], Any] | None = None
    #: Called at every turn of the polling loop when not None.
    tick: Callable[[], None] | None = None
    #: The consumer's on_commit callback when not None (results of asynchronous commits).
    on_commit_result: Callable[[Any, list[TopicPartition]], None] | None = None

    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.name = "listener"
        #: ``(topic, partition) -> next offset`` of the commits this policy made and saw succeed
        self.committed: dict[tuple[str, int], int] = {}

    def attach(self, consumer: Consumer, name: str) -> None:
        """Called once the consumer exists; ``name`` identifies the listener in logs."""
        self.consumer = consumer
        self.name = name

    def on_assigned(self, partitions: list[TopicPartition]) -> None:
        pass

    def on_polled(self, records: list[ConsumedRecord]) -> Callable[[], None] | None:
        return None

    def on_undecodable(self, record: ConsumedRecord, error: Exception) -> None:
        pass

    def on_revoke(self, partitions: list[TopicPartition], lost: bool = False) -> None:
        pass

    def commit(self) -> None:
        pass

    def on_close(self) -> None:
        pass

    def still_owned(self, message: IncomingMessage) -> bool:
        """Whether processing ``message`` can still count (its partition was not revoked since)."""
        return True

    def in_flight(self) -> int:
        """Records handed out whose processing this policy still waits for."""
        return 0


class _CommitJob:
    """One synchronous commit run by a :class:`BackgroundCommitter`, and its outcome.

    Calling it waits for the outcome and hands it to ``settle`` (in the
    caller's thread); ``pending()`` says whether that would wait.
    """

    __slots__ = ("offsets", "settle", "started", "done", "error")

    def __init__(self, offsets: list[TopicPartition],
                 settle: Callable[[list[TopicPartition], KafkaError | None], None]) -> None:
        self.offsets = offsets
        self.settle = settle
        self.started = threads.Event()
        self.done = threads.Event()
        self.error: KafkaError | None = None

    def pending(self) -> bool:
        return not self.done.is_set()

    def __call__(self) -> None:
        self.done.wait()
        self.settle(self.offsets, self.error)


class BackgroundCommitter:
    """A thread that runs synchronous commits, overlapping the broker's round trip with decoding.

    One commit in flight, waited for before the batch is handed out and before the next poll,
    so offsets are still committed in order and before dispatch.
    """

    #: Most time the polling thread waits for the commit to have been sent
    #: before going on with decoding (the thread first needs the GIL to send it).
    START_WAIT = 0.05

    def __init__(self, commit: Callable[[list[TopicPartition]], KafkaError | None], name: str) -> None:
        self._commit = commit
        self._jobs: queue.SimpleQueue[_CommitJob | None] = threads.SimpleQueue()
        self._thread = threads.Thread(target=self._run, name=f"notify-kafka-commit-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job.started.set()
            try:
                job.error = self._commit(job.offsets)
            except BaseException as exc:  # noqa: BLE001 - reported to the waiting thread
                job.error = KafkaError(KafkaError._FAIL, f"commit raised {exc!r}")
            finally:
                job.done.set()

    def begin(self, offsets: list[TopicPartition],
              settle: Callable[[list[TopicPartition], KafkaError | None], None]) -> _CommitJob:
        job = _CommitJob(offsets, settle)
        self._jobs.put(job)
        # let the committer send the request now: it runs while we decode
        job.started.wait(self.START_WAIT)
        return job

    def close(self) -> None:
        self._jobs.put(None)
        if self._thread is not threads.current_thread():
            self._thread.join(5.0)


class CommitBeforeDispatch(CommitPolicy):
    """oslo.messaging's semantics: a polled batch is committed synchronously before it is returned.

    At most once; ``requeue()`` cannot bring a message back. The commit runs on a
    :class:`BackgroundCommitter` while the batch is decoded.
    """

    def __init__(self, requeuer: Any = None, hooks: Any = None, counters: DeliveryCounters | None = None) -> None:
        super().__init__()
        #: the listener's ``commits`` and ``commit_failures`` counters (for ``metrics()``)
        self.counters = counters if counters is not None else DeliveryCounters()
        self._warned_requeue = False
        #: a :class:`~.retry.Requeuer` when retry / dead-letter topics are configured
        self.requeuer = requeuer
        self._on_commit_hook = getattr(hooks, "on_commit", None)
        self._hooks = hooks
        self.on_requeue = self._requeue_unsupported if requeuer is None else self._requeue_to_topic
        self._committer: BackgroundCommitter | None = None

    #: Smallest batch whose commit runs while it is decoded; a smaller one
    #: decodes too fast to hide anything and is committed inline.
    OVERLAP_MIN_RECORDS = 32

    def on_polled(self, records: list[ConsumedRecord]) -> Callable[[], None] | None:
        offsets = next_offsets(records)
        if len(records) < self.OVERLAP_MIN_RECORDS:
            self._settle(offsets, self._commit_with_retries(offsets))
            return None
        committer = self._committer
        if committer is None:
            committer = self._committer = BackgroundCommitter(self._commit_with_retries, self.name)
        return committer.begin(offsets, self._settle)

    def _commit_with_retries(self, offsets: list[TopicPartition]) -> KafkaError | None:
        """Commit synchronously, retrying what may pass; the last error, or None."""
        return commit_sync(self.consumer, offsets)[1]  # type: ignore[arg-type]

    def _settle(self, offsets: list[TopicPartition], err: KafkaError | None) -> None:
        """In the polling thread: record the commit and tell the hooks, or say why it failed."""
        if err is not None:
            self.counters.commit_failures.incr()
            # Not lost: uncommitted, the batch will be read again by whoever
            # owns the partition next; it is still handed out now.
            LOG.warning("%s: could not commit offsets %s before dispatch (%s); "
                        "dispatching anyway, these messages may be delivered again",
                        self.name, format_offsets(offsets), err.str())
            return
        if offsets:
            self.counters.commits.incr()
        committed = self.committed
        for tp in offsets:
            committed[(tp.topic, tp.partition)] = tp.offset
        if self._on_commit_hook is not None:
            self._hooks.call("on_commit", [(tp.topic, tp.partition, tp.offset)
                                           for tp in offsets], None)

    def on_close(self) -> None:
        committer, self._committer = self._committer, None
        if committer is not None:
            committer.close()

    def _requeue_to_topic(self, message: IncomingMessage) -> None:
        """Already committed: the copy in the retry / dead-letter topic is what brings it back."""
        self.requeuer.requeue(message.record, getattr(message, "error", None),  # type: ignore[attr-defined]
                              _ignore)

    def on_undecodable(self, record: ConsumedRecord, error: Exception) -> None:
        if self.requeuer is not None:
            self.requeuer.dead_letter(record, f"undecodable: {error}", _ignore, logged=True)

    def _requeue_unsupported(self, message: IncomingMessage) -> None:
        if not self._warned_requeue:
            self._warned_requeue = True
            LOG.warning("%s: requeue() is not possible in commit-before-dispatch mode: %s was "
                        "committed before dispatch (this is logged once)", self.name,
                        message.coordinates)


class AutoCommit(CommitPolicy):
    """``enable_auto_commit``: offsets of polled records are stored when polled and
    committed in the background by librdkafka (oslo.messaging's asynchronous commits)."""

    def on_polled(self, records: list[ConsumedRecord]) -> None:
        try:
            self.consumer.store_offsets(offsets=next_offsets(records))  # type: ignore[union-attr]
        except KafkaException as exc:  # partition revoked meanwhile: the next owner reads them
            LOG.warning("%s: could not store offsets: %s", self.name, exc.args[0].str())

    def commit(self) -> None:
        try:
            self.consumer.commit(asynchronous=False)  # type: ignore[union-attr]
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._NO_OFFSET:
                LOG.warning("%s: commit failed: %s", self.name, exc.args[0].str())


def _ignore(confirmed: bool) -> None:
    """Delivery outcome of a copy whose original was committed before dispatch (failures are logged)."""
