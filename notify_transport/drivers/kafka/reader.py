"""Reading a topic from a position without a consumer group.

* :class:`PartitionConsumer` (Milvus's stream consumer): one partition,
  assigned, never committed; ``receive()``, ``seek(message_id, inclusive)``,
  ``latest_message_id()``.
* :class:`PartitionIterator` (kafka-go's reader): iterates over one partition
  from a position; a fetch thread fills a bounded buffer, so fetching runs
  ahead of the caller by at most ``buffer`` records.
* :class:`MergedIterator`: several iterators composed into one that yields
  what any of them read, in arrival order (per partition, offset order).

Closing an iterator stops and joins its thread and closes its client (and
with it librdkafka's own threads): nothing is left running.
"""
from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from typing import Any, Iterable, Iterator, cast

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition

from notify_transport.drivers.kafka.client_properties import RDKAFKA_LOG
from notify_transport.drivers.kafka import client_properties
from notify_transport.drivers.kafka.message import ConsumedRecord
from notify_transport.drivers.kafka.positions import (COMMITTED, LATEST, MessageId, StartPosition,
                                                      resolve_offsets)
from notify_transport.exceptions import ConfigurationError, MessagingException

LOG = logging.getLogger(__name__)

#: Longest wait of one fetch, so that close() is noticed quickly.
_FETCH_SLICE = 0.1
_END = object()


#: Consumer properties of a reader (the one builder's, kept importable from here).
reader_config = client_properties.reader_config


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


class PartitionConsumer:
    """One partition of one topic, read from a position; see the module docstring."""

    def __init__(self, config: dict[str, Any], topic: str, partition: int = 0,
                 start: StartPosition = StartPosition(LATEST), name: str = "reader",
                 timeout: float = 10.0) -> None:
        if start.kind == COMMITTED:
            raise ConfigurationError("a reader has no consumer group, hence no committed offset: "
                                     "start it at earliest, latest, an offset or a time")
        self.topic = topic
        self.partition = partition
        self.name = name
        self.timeout = timeout
        config = dict(config)
        config["logger"] = RDKAFKA_LOG
        try:
            self._consumer: confluent_kafka.Consumer | None = confluent_kafka.Consumer(config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise MessagingException(f"{name}: cannot create the consumer: {exc}") from None
        try:
            self._position = resolve_offsets(self._consumer, [TopicPartition(topic, partition)],
                                             start, timeout)[0].offset
            self._assign(self._position)
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"<PartitionConsumer {self.topic}[{self.partition}]@{self._position}>"

    def _client(self) -> confluent_kafka.Consumer:
        if self._consumer is None:
            raise MessagingException(f"{self.name} is closed")
        return self._consumer

    def _assign(self, offset: int) -> None:
        # assign() replaces the position and drops what was fetched: a seek that always works
        self._client().assign([TopicPartition(self.topic, self.partition, offset)])
        self._position = offset

    @property
    def position(self) -> int:
        """Offset of the next record :meth:`receive` returns."""
        return self._position

    def seek(self, message_id: MessageId, inclusive: bool = True) -> None:
        """Read next from ``message_id`` (``inclusive``) or from the record after it."""
        if (message_id.topic, message_id.partition) != (self.topic, self.partition):
            raise ConfigurationError(f"{self.name} reads {self.topic}[{self.partition}], "
                                     f"not {message_id.topic}[{message_id.partition}]")
        if message_id.offset < 0:
            raise ConfigurationError(f"cannot seek to a negative offset ({message_id})")
        self._assign(message_id.offset if inclusive else message_id.offset + 1)

    def _list(self, spec: int) -> int:
        found = self._client().offsets_for_times([TopicPartition(self.topic, self.partition, spec)],
                                                 timeout=self.timeout)[0]
        if found.error is not None:
            raise MessagingException(f"{self.name}: cannot list offsets: {found.error}")
        return found.offset

    def end_offset(self) -> int:
        """Offset the next record written to the partition will get."""
        return self._list(OFFSET_END)

    def latest_message_id(self) -> MessageId | None:
        """The last record written to the partition, None when the partition holds none."""
        end = self.end_offset()
        if end <= self._list(OFFSET_BEGINNING):
            return None
        return MessageId(self.topic, self.partition, end - 1)

    def receive(self, timeout: float | None = None) -> Record | None:
        """The next record, or None when none arrived within ``timeout`` seconds."""
        consumer = self._client()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = _FETCH_SLICE if deadline is None else min(_FETCH_SLICE, deadline - time.monotonic())
            msg = consumer.poll(max(0.0, left))
            if msg is not None:
                err = msg.error()
                if err is None:
                    record = cast(ConsumedRecord, msg)  # no error: topic, partition, offset are set
                    self._position = record.offset() + 1
                    return _record(record)
                if err.fatal() or err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                                 KafkaError._UNKNOWN_PARTITION):
                    raise MessagingException(f"{self.name}: {err.str()}")
                LOG.warning("%s: %s", self.name, err.str())
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except (KafkaException, RuntimeError) as exc:
                LOG.debug("%s: close: %s", self.name, exc)

    def __enter__(self) -> "PartitionConsumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class PartitionIterator:
    """Iterates over one partition; see the module docstring.

    ``until_end``: stop at the end offset the partition had when iteration
    began (read what is there, then finish) instead of waiting for more.
    """

    def __init__(self, consumer: PartitionConsumer, buffer: int = 100, until_end: bool = False) -> None:
        self.consumer = consumer
        self.until_end = until_end
        self._buffer = max(1, buffer)
        self._queue: queue.Queue | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._done = False
        self._error: BaseException | None = None

    def _start(self, sink: queue.Queue | None = None) -> None:
        """Start fetching into ``sink`` (a merge's queue) or a queue of its own."""
        if self._thread is not None:
            if sink is not None:
                raise MessagingException("an iterator already being read cannot join a merge")
            return
        self._queue = sink if sink is not None else queue.Queue(self._buffer)
        self._thread = threading.Thread(target=self._fetch, daemon=True,
                                        name=f"notify-reader-{self.consumer.topic}[{self.consumer.partition}]")
        self._thread.start()

    def _put(self, item: Any) -> bool:
        assert self._queue is not None
        while not self._stop.is_set():
            try:
                self._queue.put((self, item), timeout=_FETCH_SLICE)
                return True
            except queue.Full:
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
        except queue.Empty:
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

    def __iter__(self) -> Iterator[Record]:
        return self

    def __next__(self) -> Record:
        while True:
            record = self.next(_FETCH_SLICE)
            if record is not None:
                return record
            if self._stop.is_set():
                raise StopIteration

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

    def __enter__(self) -> "PartitionIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class MergedIterator:
    """Yields what any of its iterators read; finishes when all have finished."""

    def __init__(self, iterators: Iterable[PartitionIterator], buffer: int = 1000) -> None:
        self.iterators = list(iterators)
        self._queue: queue.Queue = queue.Queue(max(1, buffer))
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
            except queue.Empty:
                return None
            try:
                return source._take(item)
            except StopIteration:
                self._running.discard(source)
        raise StopIteration

    def __iter__(self) -> Iterator[Record]:
        return self

    def __next__(self) -> Record:
        while True:
            record = self.next(_FETCH_SLICE)
            if record is not None:
                return record

    def close(self, timeout: float = 5.0) -> None:
        for iterator in self.iterators:
            iterator._stop.set()
        for iterator in self.iterators:
            iterator.close(timeout)
        self._running.clear()

    def __enter__(self) -> "MergedIterator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def merge(iterators: Iterable[PartitionIterator], buffer: int = 1000) -> MergedIterator:
    """Compose per-partition iterators into one (kafka-go's ``NewMultiIter``)."""
    return MergedIterator(iterators, buffer)


def partitions_of(config: dict[str, Any], topic: str, timeout: float = 10.0) -> list[int]:
    """Partition numbers of ``topic``; raises when the topic does not exist."""
    config = dict(config)
    config["logger"] = RDKAFKA_LOG
    consumer = confluent_kafka.Consumer(config)
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
    except KafkaException as exc:
        raise MessagingException(f"cannot read the metadata of topic {topic}: "
                                 f"{exc.args[0].str()}") from None
    finally:
        consumer.close()
    found = metadata.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        raise MessagingException(f"topic {topic} does not exist"
                                 + (f" ({found.error})" if found is not None and found.error else ""))
    return sorted(found.partitions)


def read_topic(config: dict[str, Any], topic: str, start: StartPosition, until_end: bool = True,
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
