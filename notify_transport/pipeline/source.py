"""``notify_kafka``: a PySpark Python data source reading Kafka through confluent-kafka.

It gives the columns of Spark's own Kafka source, batch and streaming, where that
connector's jars are missing. Each input partition reads explicit ``[start, end)``
ranges of several Kafka partitions with one kept :class:`~notify_transport.reading.RangeReader`
(no group, no commit), so the cost does not grow with the partition count. The
streaming offset lives in Spark's checkpoint (a replayed micro-batch reads the same
records), and a capped micro-batch is cut on broker time (:func:`~.offsets.time_cut`),
so capped and uncapped runs read in the same order. ``decode`` decodes in the worker
that read the records; ``plannedRanges`` streams only each batch's ranges, for
Spark's connector to read. The options are listed in ``doc/source/pipeline.rst``.
"""
from __future__ import annotations

import atexit
import logging
from typing import Iterator, Mapping, Sequence

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)
from pyspark.sql.types import (BinaryType, BooleanType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from notify_transport.drivers.kafka import ClusterAdmin
from notify_transport.reading import RangeReader
from notify_transport.exceptions import ConfigurationError
from notify_transport.pipeline import caught_up, decode, kafka_io, offsets
from notify_transport.pipeline.kafka_settings import KafkaSettings

LOG = logging.getLogger(__name__)

FORMAT_NAME = "notify_kafka"

#: The options the source takes besides ``kafka.<property>`` (matched in any case);
#: ``doc/source/pipeline.rst`` lists them, and a test keeps the two equal.
OPTIONS = frozenset({
    "transport_url", "subscribe", "subscribepattern", "startingoffsets", "endingoffsets",
    "maxoffsetspertrigger", "maxrecordspertrigger", "failondataloss", "kafkaconsumer.polltimeoutms",
    "metadatatimeoutms", "arrowbatchsize", "readertasks", "decode", "basetopics", "decodepayload",
    "plannedranges"})

#: The columns of Spark's Kafka source (without headers), in its order.
KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])


#: What a ``plannedRanges`` read gives: one row per Kafka partition range of a micro-batch.
RANGES_SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("startOffset", LongType()),
    StructField("endOffset", LongType()),
    StructField("fromEarliest", BooleanType()),
])


class SourceOptions:
    """The data source options, checked once on the driver."""

    def __init__(self, options: Mapping[str, str], streaming: bool) -> None:
        opts = {k.lower(): str(v) for k, v in options.items()}
        unknown = sorted(k for k in opts if k not in OPTIONS and not k.startswith("kafka."))
        if unknown:  # a misspelt option would otherwise read everything with its default
            raise ConfigurationError(f"{FORMAT_NAME}: unknown option(s) {', '.join(unknown)}; "
                                     f"see the notify_kafka options in the pipeline guide")
        config = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
        if "transport_url" in opts:
            config = {**KafkaSettings.from_url(opts["transport_url"]).librdkafka_config(), **config}
        if "bootstrap.servers" not in config:
            raise ConfigurationError(f"{FORMAT_NAME}: set kafka.bootstrap.servers or transport_url")
        self.kafka_config: dict[str, str] = config
        self.topics = [t.strip() for t in opts.get("subscribe", "").split(",") if t.strip()]
        self.pattern = opts.get("subscribepattern") or None
        if bool(self.topics) == bool(self.pattern):
            raise ConfigurationError(f"{FORMAT_NAME}: set exactly one of subscribe and subscribePattern")
        self.starting = offsets.parse_offsets_option(opts.get("startingoffsets"),
                                                     "latest" if streaming else "earliest")
        self.ending = offsets.parse_offsets_option(opts.get("endingoffsets"), "latest")
        if streaming and "endingoffsets" in opts:
            raise ConfigurationError(f"{FORMAT_NAME}: endingOffsets is for batch queries only")
        if self.ending == "earliest":
            raise ConfigurationError(f"{FORMAT_NAME}: endingOffsets cannot be 'earliest'")
        limit = opts.get("maxoffsetspertrigger") or opts.get("maxrecordspertrigger")
        self.max_per_trigger = _positive_int("maxOffsetsPerTrigger", limit) if limit else None
        self.fail_on_data_loss = _boolean("failOnDataLoss", opts.get("failondataloss", "true"))
        self.poll_timeout = _positive_int("kafkaConsumer.pollTimeoutMs",
                                          opts.get("kafkaconsumer.polltimeoutms", "120000")) / 1000
        self.metadata_timeout = _positive_int("metadataTimeoutMs",
                                              opts.get("metadatatimeoutms", "30000")) / 1000
        self.arrow_batch_size = _positive_int("arrowBatchSize", opts.get("arrowbatchsize", "10000"))
        self.reader_tasks = _positive_int("readerTasks", opts.get("readertasks", "2"))
        self.decode = _boolean("decode", opts.get("decode", "false"))
        self.base_topics = tuple(t.strip() for t in opts.get("basetopics", "").split(",") if t.strip())
        self.decode_payload = _boolean("decodePayload", opts.get("decodepayload", "true"))
        self.planned_ranges = _boolean("plannedRanges", opts.get("plannedranges", "false"))
        if self.planned_ranges and (self.decode or not streaming):
            raise ConfigurationError(f"{FORMAT_NAME}: plannedRanges is for streaming reads without decode")


class KafkaInputPartition(InputPartition):
    """The offset ranges one task reads (no connection settings: it may be printed)."""

    def __init__(self, ranges: Sequence[offsets.OffsetRange]) -> None:
        super().__init__(tuple(ranges))


def input_partitions(ranges: Sequence[offsets.OffsetRange], tasks: int) -> list[KafkaInputPartition]:
    """At most ``tasks`` input partitions, each reading several Kafka partitions with one client."""
    return [KafkaInputPartition(group) for group in offsets.spread(ranges, tasks)]


#: Range readers this Python worker keeps between tasks and micro-batches (Spark reuses the
#: worker), per connection settings, so a micro-batch does not pay for new clients.
_IDLE_READERS: dict[tuple, list[RangeReader]] = {}
_IDLE_PER_SETTINGS = 2


def _take_reader(config: Mapping[str, str]) -> tuple[tuple, RangeReader]:
    key = tuple(sorted(config.items()))
    idle = _IDLE_READERS.get(key)
    if idle:
        return key, idle.pop()
    if not _IDLE_READERS:
        atexit.register(_close_idle_readers)
    _IDLE_READERS.setdefault(key, [])
    return key, RangeReader(dict(config), name=f"{FORMAT_NAME} reader")


def _give_back(key: tuple, reader: RangeReader) -> None:
    idle = _IDLE_READERS.setdefault(key, [])
    if len(idle) < _IDLE_PER_SETTINGS:
        idle.append(reader)
    else:
        reader.close()


def _close_idle_readers() -> None:
    for idle in _IDLE_READERS.values():
        while idle:
            idle.pop().close()


class NotifyKafkaDataSource(DataSource):
    """``spark.read/readStream.format("notify_kafka")``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        opts = {k.lower(): v for k, v in self.options.items()}
        if _boolean("plannedRanges", opts.get("plannedranges", "false")):
            return RANGES_SCHEMA
        if _boolean("decode", opts.get("decode", "false")):
            return decode.DECODED_SCHEMA
        return KAFKA_SCHEMA

    def reader(self, schema: StructType) -> "KafkaBatchReader":
        return KafkaBatchReader(SourceOptions(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> "KafkaStreamReader":
        return KafkaStreamReader(SourceOptions(self.options, streaming=True), schema)


class _KafkaReading:
    """What the batch and the stream reader share: planning helpers and ``read``."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._admin: ClusterAdmin | None = None

    def _admin_client(self) -> ClusterAdmin:
        if self._admin is None:
            self._admin = ClusterAdmin(kafka_io.admin_properties(self.options.kafka_config),
                                       timeout=self.options.metadata_timeout)
        return self._admin

    def _partitions(self) -> list[offsets.Partition]:
        """Partitions of the listed topics that exist, and of every topic matching the pattern."""
        return caught_up.subscribed_partitions(self._admin_client(), self.options.topics, self.options.pattern)

    def _offsets(self, partitions: Sequence[offsets.Partition], which: str) -> offsets.Offsets:
        """Earliest or latest (last stable, as read_committed consumers see it) offsets."""
        return caught_up.list_offsets(self._admin_client(), partitions, which)

    def read(self, partition: InputPartition) -> Iterator:
        from pyspark.sql.pandas.types import to_arrow_schema

        if not isinstance(partition, KafkaInputPartition):
            raise TypeError(f"expected a KafkaInputPartition, got {type(partition).__name__}")

        options = self.options
        ranges: tuple[offsets.OffsetRange, ...] = partition.value
        if options.planned_ranges:  # the plan itself; Spark's connector reads it
            yield from (tuple(r) for r in ranges)
            return
        from_earliest = {(r.topic, r.partition) for r in ranges if r.from_earliest}

        def on_gone(topic: str, part: int, message: str) -> None:
            if (topic, part) in from_earliest:  # read from the earliest record kept: nothing planned is gone
                LOG.debug("%s", message)
            else:
                kafka_io.report_data_loss(options.fail_on_data_loss, message)

        arrow_schema = to_arrow_schema(KAFKA_SCHEMA, timezone="UTC")
        key, reader = _take_reader(options.kafka_config)
        done = False
        try:
            chunks = reader.read(ranges,
                                 chunk=options.arrow_batch_size, timeout=options.poll_timeout, on_gone=on_gone)
            batches = (kafka_io.record_batch(chunk, arrow_schema) for chunk in chunks)
            if options.decode:
                yield from decode.decode_batches(batches, options.base_topics, options.decode_payload)
            else:
                yield from batches
            done = True
        finally:
            if done:
                _give_back(key, reader)
            else:  # failed or abandoned half-way: its state is unknown
                reader.close()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_admin"] = None  # executors never need it, and it does not pickle
        return state


class KafkaBatchReader(_KafkaReading, DataSourceReader):
    """Reads ``startingOffsets`` to ``endingOffsets`` once."""

    def partitions(self) -> list[KafkaInputPartition]:
        parts = self._partitions()
        earliest = self._offsets(parts, "earliest")
        latest = self._offsets(parts, "latest")
        start = offsets.resolve(self.options.starting, earliest, latest)
        end = offsets.resolve(self.options.ending, earliest, latest, unlisted="latest")
        end = {tp: off for tp, off in end.items() if tp in start}
        ranges = offsets.plan(start, end)
        LOG.info("Batch read of %d records from %d partitions", offsets.total(ranges), len(ranges))
        return input_partitions(ranges, self.options.reader_tasks)


class KafkaStreamReader(_KafkaReading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over Kafka offsets, with admission control and ``availableNow``."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        super().__init__(options, schema)
        self._target: offsets.Offsets | None = None
        self._latest: offsets.Offsets | None = None

    def initialOffset(self) -> dict:
        parts = self._partitions()
        start = offsets.resolve(self.options.starting, self._offsets(parts, "earliest"),
                                self._offsets(parts, "latest"))
        LOG.info("Streaming from %s", offsets.to_json(start))
        return offsets.to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_per_trigger:
            return ReadMaxRows(self.options.max_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        parts = self._partitions()
        self._target = self._offsets(parts, "latest")
        LOG.info("availableNow: reading up to %s", offsets.to_json(self._target))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets.from_json(start)
        parts = set(self._partitions())
        if self._target is not None:
            parts &= set(self._target)
        latest = self._offsets(sorted(parts), "latest")
        if self._target is not None:
            latest = offsets.cap(latest, self._target)
        self._latest = latest
        effective = dict(begin)
        new = [tp for tp in latest if tp not in begin]
        if new:
            effective.update(self._offsets(new, "earliest"))
            LOG.info("New partitions %s are read from their earliest record", new)
        for tp, offset in latest.items():
            if offset < effective[tp]:
                kafka_io.report_data_loss(self.options.fail_on_data_loss,
                                          f"{tp[0]}[{tp[1]}] ends at {offset}, before offset "
                                          f"{effective[tp]} already read: the topic was deleted "
                                          "or truncated")
                effective[tp] = self._offsets([tp], "earliest")[tp]
        max_rows = self._max_rows(limit, effective, latest)
        if max_rows == 0:
            return offsets.to_json(effective)
        parts_read = sorted(latest)
        end = offsets.time_cut(effective, latest, max_rows,
                               lambda millis: self._admin_client().offsets_for_time(parts_read, millis))
        return offsets.to_json(end)

    def reportLatestOffset(self) -> dict | None:
        return offsets.to_json(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> list[KafkaInputPartition]:
        ranges = offsets.plan(offsets.from_json(start), offsets.from_json(end))
        if self.options.planned_ranges:  # a few rows: one task
            return [KafkaInputPartition(ranges)] if ranges else []
        return input_partitions(ranges, self.options.reader_tasks)

    def commit(self, end: dict) -> None:
        LOG.debug("Micro-batch done up to %s", end)

    @staticmethod
    def _max_rows(limit: ReadLimit, start: offsets.Offsets, latest: offsets.Offsets) -> int | None:
        if isinstance(limit, ReadMaxRows):
            return limit.max_rows
        if isinstance(limit, ReadMinRows):
            available = sum(max(0, latest[tp] - start[tp]) for tp in latest)
            return None if available >= limit.min_rows else 0
        return None


def _boolean(name: str, value: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise ConfigurationError(f"{FORMAT_NAME}: {name} must be true or false, got {value!r}")
    return value.strip().lower() == "true"


def _positive_int(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ConfigurationError(f"{FORMAT_NAME}: {name} must be an integer, got {value!r}") from None
    if number <= 0:
        raise ConfigurationError(f"{FORMAT_NAME}: {name} must be positive, got {number}")
    return number
