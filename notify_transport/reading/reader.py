"""Reading Kafka from a position without a consumer group: the one reader.

:class:`Reader` reads several partitions, each from its own offset (``tail``);
:class:`PartitionConsumer` one partition with ``seek``; :class:`PartitionIterator`
iterates one partition with a fetch thread and a bounded buffer; :func:`merge`
composes iterators; :class:`RangeReader` reads fixed ``[start, end)`` ranges of
several partitions with one client that may be kept between reads (the Spark
source). Partitions are assigned, never subscribed: no group is joined, nothing
committed. Closing stops and joins everything it started.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar, cast

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition

from notify_transport.drivers import threads
from notify_transport.drivers.kafka import (COMMITTED, EARLIEST, LATEST, RDKAFKA_LOG, ClusterAdmin, ConsumedRecord,
                                            MessageId, OffsetRange, Partition, StartPosition, admin_properties,
                                            partitions_in, reader_config, resolve_offsets, without_group)
from notify_transport.exceptions import ConfigurationError, MessagingException

if TYPE_CHECKING:
    import queue
    import threading

LOG = logging.getLogger(__name__)

_Self = TypeVar("_Self", bound="_Closing")

#: Longest wait of one fetch, so that close() is noticed quickly.
_FETCH_SLICE = 0.1
_END = object()
#: Record errors that mean the partition cannot be read (raised unless the reader has ``on_error``).
_MISSING = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION)

__all__ = ["MergedIterator", "PartitionConsumer", "PartitionIterator", "RangeReader", "Reader", "Record",
           "RecordsGone", "merge", "merged_topic", "partitions_of", "reader_config"]


@dataclasses.dataclass(frozen=True)
class Record:
    """One record as read: coordinates, key, value, headers and timestamp (seconds or None)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: float | None = None

    @property
    def id(self) -> MessageId:
        return MessageId(self.topic, self.partition, self.offset)


def _record(msg: ConsumedRecord) -> Record:
    kind, millis = msg.timestamp()
    return Record(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                  tuple(msg.headers() or ()), millis / 1000.0 if kind else None)


class _Closing:
    """``with`` closes it."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _OwnsConsumer(_Closing):
    """Holds one client in ``_consumer``; closing closes it (and librdkafka's threads) once.

    Offsets are listed through a :class:`ClusterAdmin` (the one place they are listed): the one
    given, or one made from the client's properties on first use and closed with it.
    """

    name: str
    timeout: float = 10.0
    _consumer: confluent_kafka.Consumer | None
    _config: Mapping[str, Any]
    _admin: ClusterAdmin | None = None
    _own_admin: bool = True

    def _offsets(self) -> ClusterAdmin:
        if self._consumer is None:
            raise MessagingException(f"{self.name} is closed")
        if self._admin is None:
            self._admin = ClusterAdmin(admin_properties(self._config), timeout=self.timeout)
        return self._admin

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except (KafkaException, RuntimeError) as exc:
                LOG.debug("%s: close: %s", self.name, exc)
        admin, self._admin = self._admin, None
        if admin is not None and self._own_admin:
            admin.close()


class _Records(_Closing):
    """Iterating calls ``next()`` until a record comes, or the iterator was stopped."""

    def next(self, timeout: float | None = None) -> Record | None:
        raise NotImplementedError

    def _stopped(self) -> bool:
        return False

    def __iter__(self) -> Iterator[Record]:
        return self

    def __next__(self) -> Record:
        while True:
            record = self.next(_FETCH_SLICE)
            if record is not None:
                return record
            if self._stopped():
                raise StopIteration


def _partitions(partitions: Iterable[Partition]) -> list[TopicPartition]:
    return [TopicPartition(topic, partition) for topic, partition in partitions]


class Reader(_OwnsConsumer):
    """Partitions read by one client without a consumer group, each from its own offset.

    :meth:`open` or :meth:`assign` adds or moves partitions; one with an end offset is
    finished at that offset or at the broker's partition EOF (:attr:`finished`), and
    :meth:`receive` returns records in offset order per partition. ``error_cb`` gets client
    errors, ``on_error`` record errors (by default a missing topic or partition raises, the
    rest is logged); fatal errors raise :class:`~notify_transport.exceptions.MessagingException`.
    """

    def __init__(self, config: Mapping[str, Any], name: str = "reader", timeout: float = 10.0,
                 error_cb: Callable[[KafkaError], None] | None = None,
                 on_error: Callable[[KafkaError], None] | None = None,
                 logger: logging.Logger = RDKAFKA_LOG, admin: ClusterAdmin | None = None) -> None:
        self.name = name
        self.timeout = timeout
        self._on_error = on_error
        conf = dict(config)
        conf["logger"] = logger
        conf["enable.partition.eof"] = True
        if error_cb is not None:
            conf["error_cb"] = error_cb
        self._config = conf
        self._admin, self._own_admin = admin, admin is None
        try:
            self._consumer: confluent_kafka.Consumer | None = confluent_kafka.Consumer(conf)
        except (KafkaException, ValueError, TypeError) as exc:
            raise MessagingException(f"{name}: cannot create the consumer: {exc}") from None
        #: the offset of the next record of each partition
        self.positions: dict[Partition, int] = {}
        #: where partitions given an end are finished
        self.ends: dict[Partition, int] = {}
        self._at_eof: set[Partition] = set()

    def __repr__(self) -> str:
        return f"<Reader {self.name} {len(self.positions)} partition(s)>"

    def _client(self) -> confluent_kafka.Consumer:
        if self._consumer is None:
            raise MessagingException(f"{self.name} is closed")
        return self._consumer

    def partitions_of(self, topics: Iterable[str], timeout: float | None = None
                      ) -> tuple[list[Partition], list[str]]:
        """The partitions of those of ``topics`` that exist, and the names of the others."""
        try:
            metadata = self._client().list_topics(timeout=self.timeout if timeout is None else timeout)
        except KafkaException as exc:
            raise MessagingException(f"{self.name}: cannot read the topics' metadata: "
                                     f"{exc.args[0].str()}") from None
        return partitions_in(metadata, topics)

    def resolve(self, partitions: Iterable[Partition], start: StartPosition,
                ends: Mapping[Partition, int] | None = None) -> dict[Partition, int]:
        """The offset each of ``partitions`` starts at for ``start`` (see :mod:`.positions`)."""
        if start.kind == COMMITTED:
            raise ConfigurationError("a reader has no consumer group, hence no committed offset: "
                                     "start it at earliest, latest, an offset or a time")
        found = resolve_offsets(self._offsets().offsets_at, _partitions(partitions), start, ends=ends)
        return {(tp.topic, tp.partition): tp.offset for tp in found}

    def end_offsets(self, partitions: Iterable[Partition]) -> dict[Partition, int]:
        """The offset the next record written to each partition will get."""
        return self._offsets().offsets_at(list(partitions), OFFSET_END)

    def open(self, partitions: Iterable[Partition], start: StartPosition,
             until_end: bool = False) -> dict[Partition, int]:
        """Read ``partitions`` too, from ``start``; with ``until_end``, up to the end each has now.
        Returns the start offsets."""
        partitions = list(partitions)
        if not partitions:
            return {}
        ends = self.end_offsets(partitions) if until_end else None
        starts = self.resolve(partitions, start, ends)
        self.assign(starts, ends)
        return starts

    def assign(self, starts: Mapping[Partition, int], ends: Mapping[Partition, int] | None = None) -> None:
        """Read each partition of ``starts`` from its offset (the others keep their positions);
        ``ends``: where partitions are finished."""
        for tp, offset in starts.items():
            if offset < 0:
                raise ConfigurationError(f"cannot read {tp[0]}[{tp[1]}] from offset {offset}")
            self.positions[tp] = offset
            self._at_eof.discard(tp)
        self.ends.update((tp, end) for tp, end in (ends or {}).items() if tp in starts)
        # assign() replaces every position and drops what was fetched: a seek that always works
        self._client().assign([TopicPartition(t, p, offset) for (t, p), offset in self.positions.items()])

    @property
    def assigned(self) -> set[Partition]:
        return set(self.positions)

    def done(self, tp: Partition) -> bool:
        """Whether partition ``tp`` has an end and was read up to it (or reported at its end)."""
        end = self.ends.get(tp)
        return end is not None and (tp in self._at_eof or self.positions.get(tp, 0) >= end)

    @property
    def finished(self) -> bool:
        """Every partition has an end and is :meth:`done`."""
        return bool(self.positions) and all(self.done(tp) for tp in self.positions)

    def receive(self, max_records: int = 500, timeout: float | None = None) -> list[Record]:
        """What arrived, up to ``max_records``; empty when nothing within ``timeout`` seconds
        (None: wait until something arrives)."""
        consumer = self._client()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = _FETCH_SLICE if deadline is None else max(0.0, min(_FETCH_SLICE, deadline - time.monotonic()))
            try:
                messages = consumer.consume(max(1, max_records), left)
            except KafkaException as exc:
                raise MessagingException(f"{self.name}: {exc.args[0].str() if exc.args else exc}") from None
            out: list[Record] = []
            for msg in messages:
                err = msg.error()
                if err is not None:
                    self._event(msg, err)
                    continue
                record = cast(ConsumedRecord, msg)  # no error: topic, partition, offset are set
                tp = (record.topic(), record.partition())
                end = self.ends.get(tp)
                if tp not in self.positions or (end is not None and record.offset() >= end):
                    continue  # not ours any more, or past its end
                self.positions[tp] = record.offset() + 1
                self._at_eof.discard(tp)
                out.append(_record(record))
            if out or (deadline is not None and time.monotonic() >= deadline):
                return out

    def _event(self, msg: confluent_kafka.Message, err: KafkaError) -> None:
        """A partition's end, or an error."""
        if err.code() == KafkaError._PARTITION_EOF:
            tp = (msg.topic() or "", msg.partition() or 0)
            if tp in self.positions:
                self._at_eof.add(tp)
                eof = msg.offset()  # where the partition ends now: past any gap (transaction markers)
                if eof is not None and eof > self.positions[tp]:
                    self.positions[tp] = eof
            return
        if err.fatal():
            raise MessagingException(f"{self.name}: {err.str()}")
        if self._on_error is not None:
            self._on_error(err)
        elif err.code() in _MISSING:
            raise MessagingException(f"{self.name}: {err.str()}")
        else:
            LOG.warning("%s: %s", self.name, err.str())


class PartitionConsumer(_Closing):
    """One partition of one topic, read from a position, never committed (Milvus's stream consumer)."""

    def __init__(self, config: dict[str, Any], topic: str, partition: int = 0,
                 start: StartPosition = StartPosition(LATEST), name: str = "reader",
                 timeout: float = 10.0) -> None:
        self.topic = topic
        self.partition = partition
        self.name = name
        self.timeout = timeout
        self._tp = (topic, partition)
        self._reader = Reader(config, name, timeout)
        try:
            self._reader.open([self._tp], start)
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"<PartitionConsumer {self.topic}[{self.partition}]@{self.position}>"

    @property
    def position(self) -> int:
        """Offset of the next record :meth:`receive` returns."""
        return self._reader.positions.get(self._tp, -1)

    def seek(self, message_id: MessageId, inclusive: bool = True) -> None:
        """Read next from ``message_id`` (``inclusive``) or from the record after it."""
        if not isinstance(message_id, MessageId):
            raise TypeError(f"{self.name}: seek() takes a MessageId (a record's id, or latest_message_id(), "
                            f"which is None while the partition is empty), not {type(message_id).__name__}")
        if (message_id.topic, message_id.partition) != self._tp:
            raise ConfigurationError(f"{self.name} reads {self.topic}[{self.partition}], "
                                     f"not {message_id.topic}[{message_id.partition}]")
        if message_id.offset < 0:
            raise ConfigurationError(f"cannot seek to a negative offset ({message_id})")
        self._reader.assign({self._tp: message_id.offset if inclusive else message_id.offset + 1})

    def end_offset(self) -> int:
        """Offset the next record written to the partition will get."""
        return self._reader.end_offsets([self._tp])[self._tp]

    def latest_message_id(self) -> MessageId | None:
        """The last record written to the partition, None when the partition holds none."""
        end = self.end_offset()
        if end <= self._reader.resolve([self._tp], StartPosition(EARLIEST))[self._tp]:
            return None
        return MessageId(self.topic, self.partition, end - 1)

    def receive(self, timeout: float | None = None) -> Record | None:
        """The next record, or None when none arrived within ``timeout`` seconds."""
        records = self._reader.receive(1, timeout)
        return records[0] if records else None

    def close(self) -> None:
        self._reader.close()


class PartitionIterator(_Records):
    """Iterates over one partition; a fetch thread fills a bounded buffer (kafka-go's reader).

    ``until_end``: stop at the end offset the partition had when iteration
    began (read what is there, then finish) instead of waiting for more.
    """

    def __init__(self, consumer: PartitionConsumer, buffer: int = 100, until_end: bool = False) -> None:
        self.consumer = consumer
        self.until_end = until_end
        self._buffer = max(1, buffer)
        self._queue: queue.Queue | None = None
        self._stop = threads.Event()
        self._thread: threading.Thread | None = None
        self._done = False
        self._error: BaseException | None = None

    def _start(self, sink: queue.Queue | None = None) -> None:
        """Start fetching into ``sink`` (a merge's queue) or a queue of its own."""
        if self._thread is not None:
            if sink is not None:
                raise MessagingException("an iterator already being read cannot join a merge")
            return
        self._queue = sink if sink is not None else threads.Queue(self._buffer)
        self._thread = threads.Thread(target=self._fetch, daemon=True,
                                      name=f"notify-reader-{self.consumer.topic}[{self.consumer.partition}]")
        self._thread.start()

    def _put(self, item: Any) -> bool:
        assert self._queue is not None
        while not self._stop.is_set():
            try:
                self._queue.put((self, item), timeout=_FETCH_SLICE)
                return True
            except threads.queue_full():
                continue
        return False

    def _fetch(self) -> None:
        try:
            end = self.consumer.end_offset() if self.until_end else None
            while not self._stop.is_set():
                if end is not None and self.consumer.position >= end:
                    break
                record = self.consumer.receive(_FETCH_SLICE)
                if record is not None and not self._put(record):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the reading thread
            self._put(exc)
            return
        self._put(_END)

    def next(self, timeout: float | None = None) -> Record | None:
        """The next record; None if none within ``timeout``; StopIteration once finished."""
        if self._done:
            raise StopIteration
        self._start()
        assert self._queue is not None
        try:
            _, item = self._queue.get(timeout=timeout)
        except threads.queue_empty():
            return None
        return self._take(item)

    def _take(self, item: Any) -> Record:
        if item is _END:
            self._done = True
            raise StopIteration
        if isinstance(item, BaseException):
            self._done = True
            self._error = item
            raise item
        return item

    def _stopped(self) -> bool:
        return self._stop.is_set()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the fetch thread, wait for it, close the client."""
        self._stop.set()
        self._done = True
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                LOG.error("reader thread %s did not stop within %.1fs", thread.name, timeout)
                return  # the thread still uses the client
        self.consumer.close()


class MergedIterator(_Records):
    """Yields what any of its iterators read; finishes when all have finished."""

    def __init__(self, iterators: Iterable[PartitionIterator], buffer: int = 1000) -> None:
        self.iterators = list(iterators)
        self._queue: queue.Queue = threads.Queue(max(1, buffer))
        self._running = set(self.iterators)
        for iterator in self.iterators:
            iterator._start(self._queue)

    def next(self, timeout: float | None = None) -> Record | None:
        """The next record; None if none within ``timeout``; StopIteration once all finished."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._running:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            try:
                source, item = self._queue.get(timeout=left)
            except threads.queue_empty():
                return None
            try:
                return source._take(item)
            except StopIteration:
                self._running.discard(source)
        raise StopIteration

    def close(self, timeout: float = 5.0) -> None:
        for iterator in self.iterators:
            iterator._stop.set()
        for iterator in self.iterators:
            iterator.close(timeout)
        self._running.clear()


def merge(iterators: Iterable[PartitionIterator], buffer: int = 1000) -> MergedIterator:
    """Compose per-partition iterators into one (kafka-go's ``NewMultiIter``)."""
    return MergedIterator(iterators, buffer)


def partitions_of(config: dict[str, Any], topic: str, timeout: float = 10.0) -> list[int]:
    """Partition numbers of ``topic``; raises when the topic does not exist."""
    with Reader(config, f"reader {topic}", timeout) as reader:
        found, missing = reader.partitions_of([topic])
    if missing:
        raise MessagingException(f"topic {topic} does not exist")
    return [partition for _, partition in found]


def merged_topic(config: dict[str, Any], topic: str, start: StartPosition, until_end: bool = True,
                 buffer: int = 1000, timeout: float = 10.0) -> MergedIterator:
    """Every partition of ``topic`` from ``start``, merged (see :class:`PartitionIterator`)."""
    iterators: list[PartitionIterator] = []
    try:
        for partition in partitions_of(config, topic, timeout):
            consumer = PartitionConsumer(config, topic, partition, start,
                                         name=f"reader {topic}[{partition}]", timeout=timeout)
            iterators.append(PartitionIterator(consumer, buffer, until_end))
    except BaseException:
        for iterator in iterators:
            iterator.close()
        raise
    return MergedIterator(iterators, buffer)


class RecordsGone(MessagingException):
    """Records of a range were deleted before they were read, or never arrived."""


def _raise_gone(topic: str, partition: int, message: str) -> None:
    raise RecordsGone(message)


class RangeReader(_OwnsConsumer):
    """Reads offset ranges of several partitions with one consumer: assigned, never committed.

    ``read`` yields each range's records in chunks, in offset order, skipping offsets
    that compaction or transaction markers left out. Records gone from the partition or
    not arriving within ``timeout`` go to ``on_gone(topic, partition, message)``, which
    raises (:class:`RecordsGone` by default) or returns to skip them. The client stays
    open between reads until :meth:`close`.
    """

    def __init__(self, config: dict[str, Any], name: str = "range reader") -> None:
        self.name = name
        config = {**without_group(config), "logger": RDKAFKA_LOG, "enable.partition.eof": True,
                  "auto.offset.reset": "error"}  # a planned offset that is gone is reported, not jumped over
        self._config = config
        try:
            self._consumer: confluent_kafka.Consumer | None = confluent_kafka.Consumer(config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise MessagingException(f"{name}: cannot create the consumer: {exc}") from None

    def _client(self) -> confluent_kafka.Consumer:
        if self._consumer is None:
            raise MessagingException(f"{self.name} is closed")
        return self._consumer

    def read(self, ranges: Sequence[OffsetRange], chunk: int = 10000, timeout: float = 120.0,
             on_gone: Callable[[str, int, str], None] = _raise_gone) -> Iterator[list[ConsumedRecord]]:
        """Lists of at most about ``chunk`` records, until every range is read."""
        consumer = self._client()
        todo = {(r.topic, r.partition): r for r in ranges if r.end > r.start}
        if not todo:
            return
        position = {tp: r.start for tp, r in todo.items()}
        assigned = [TopicPartition(t, p, r.start) for (t, p), r in todo.items()]
        consumer.assign(assigned)
        consumer.resume(assigned)  # a partition paused by an earlier read of this client
        try:
            yield from self._fetch(consumer, todo, position, chunk, timeout, on_gone)
        finally:
            consumer.unassign()

    def _fetch(self, consumer: confluent_kafka.Consumer, todo: dict, position: dict, chunk: int,
               timeout: float, on_gone: Callable[[str, int, str], None]) -> Iterator[list[ConsumedRecord]]:
        deadline = time.monotonic() + timeout
        out: list[ConsumedRecord] = []
        while todo:
            finished = []
            progressed = False
            for msg in consumer.consume(min(chunk, sum(r.end - position[tp] for tp, r in todo.items())),
                                        timeout=min(1.0, timeout)):
                tp = (cast(str, msg.topic()), cast(int, msg.partition()))  # set on records and their errors
                if tp not in todo:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        position[tp] = max(position[tp], msg.offset() or 0)
                    elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        position[tp] = self._skip_gone(consumer, tp, position[tp], todo[tp].end, on_gone)
                    elif err.fatal():
                        raise MessagingException(f"{self.name}: {err.str()}")
                    else:  # librdkafka retries by itself; the deadline bounds the wait
                        LOG.warning("%s: %s[%d] at %d: %s", self.name, tp[0], tp[1], position[tp], err.str())
                else:
                    record = cast(ConsumedRecord, msg)
                    offset = record.offset()
                    if offset < todo[tp].end:
                        out.append(record)
                        progressed = True
                    position[tp] = offset + 1
                if position[tp] >= todo[tp].end:
                    finished.append(tp)
            for tp in set(finished):
                consumer.pause([TopicPartition(tp[0], tp[1])])
                del todo[tp]
            if len(out) >= chunk or (out and not todo):
                yield out
                out = []
            if progressed or finished:
                deadline = time.monotonic() + timeout
            elif time.monotonic() > deadline:
                for tp, r in list(todo.items()):
                    on_gone(tp[0], tp[1], f"{tp[0]}[{tp[1]}] offsets {position[tp]}..{r.end - 1} did not arrive "
                            f"within {timeout:g}s")
                todo.clear()
        if out:
            yield out

    def _skip_gone(self, consumer: confluent_kafka.Consumer, tp: tuple[str, int], offset: int, end: int,
                   on_gone: Callable[[str, int, str], None]) -> int:
        low = self._offsets().offsets_at([tp], OFFSET_BEGINNING)[tp]
        on_gone(tp[0], tp[1], f"{tp[0]}[{tp[1]}] offsets {offset}..{min(low, end) - 1} were deleted before they "
                f"were read (earliest is now {low})")
        consumer.seek(TopicPartition(tp[0], tp[1], low))
        return max(offset, low)

