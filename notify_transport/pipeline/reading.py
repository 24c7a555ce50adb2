"""The Kafka DataFrame of the pipeline, from ``notify_kafka`` or Spark's own ``kafka`` format.

Both give the same columns and options; :func:`choose_format` picks the Python source
for a small run and the connector otherwise, when it is there. Both admit the same
records per micro-batch: ``notify_kafka`` plans each batch and, with the connector,
:func:`planned_ranges` streams that plan while :func:`read_ranges` reads it.
"""
from __future__ import annotations

import json
import logging
import re
from typing import Sequence

from pyspark.errors import AnalysisException

from notify_transport.exceptions import ConfigurationError
from notify_transport.pipeline.kafka_settings import CONNECTOR_PARTITION_FETCH_BYTES, KafkaSettings
from notify_transport.pipeline.session import read_tasks, small_run
from notify_transport.pipeline.source import FORMAT_NAME
from notify_transport.pipeline.topics import Subscription

LOG = logging.getLogger(__name__)

SPARK_KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
FORMATS = ("auto", FORMAT_NAME, "kafka")


def kafka_format_available(spark) -> bool:
    """True when Spark's JVM Kafka connector can be loaded in this session.

    Asks through the public reader: defining (not starting) a streaming read
    resolves the data source, and Spark answers AnalysisException when the
    connector is not on the classpath. Nothing connects to a broker.
    """
    try:
        (spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
         .option("subscribe", "notify-transport-probe").load())
        return True
    except AnalysisException:
        return False


class ChosenFormat(str):
    """A format :func:`choose_format` has already resolved and checked in this session: passing it
    on to :func:`read_decoded` or :func:`read_kafka` does not probe the classpath again."""

    __slots__ = ()


def choose_format(spark, fmt: str = "auto", backlog: int | None = None) -> ChosenFormat:
    """The format :func:`read_kafka` will use for ``fmt`` (``auto`` resolved, ``kafka`` checked).

    ``backlog``: the records the run is known to read (None: not known). For
    a small one (:func:`~notify_transport.pipeline.session.small_run`)
    ``auto`` takes ``notify_kafka`` even where the connector is set up: the
    run ends seconds sooner without the connector's consumers and the trip of
    every record to a decoding worker, and both readers admit and write the
    same records, so runs of either kind continue one checkpoint.
    """
    if isinstance(fmt, ChosenFormat):
        return fmt
    return ChosenFormat(_resolve_format(spark, fmt, backlog))


def format_before_session(fmt: str = "auto", backlog: int | None = None) -> str | None:
    """The format a run will read with, where it is known before the session starts (None: only a
    session can tell, by probing the classpath). A run that reads with ``notify_kafka`` starts its
    session without the connector's and the JVM decoder's jars, which it never loads."""
    if fmt not in FORMATS:
        raise ConfigurationError(f"Unknown source format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "auto":
        return FORMAT_NAME if small_run(backlog) else None
    return fmt


def _resolve_format(spark, fmt: str, backlog: int | None = None) -> str:
    known = format_before_session(fmt, backlog)
    if known is None:
        return "kafka" if kafka_format_available(spark) else FORMAT_NAME
    if known == "kafka" and not kafka_format_available(spark):
        from notify_transport.pipeline.connector import ConnectorNotSetUp, pyspark_version

        raise ConnectorNotSetUp(pyspark_version())
    return known


def reads_in_python(spark, fmt: str = "auto") -> bool:
    """Whether a read with ``fmt`` runs in Python (``notify_kafka``), the read
    :func:`~notify_transport.pipeline.session.warm_up` starts processes for."""
    return choose_format(spark, fmt) == FORMAT_NAME


def source_options(settings: KafkaSettings, subscription: Subscription, fmt: str,
                   starting_offsets: str = "earliest", max_per_trigger: int | None = None,
                   fail_on_data_loss: bool = True, streaming: bool = True,
                   ending_offsets: str | None = None) -> dict[str, str]:
    """Options for ``fmt`` (``notify_kafka`` or ``kafka``) with the same meaning in both."""
    if fmt == "kafka":
        options = settings.spark_kafka_options()
    else:
        options = {f"kafka.{k}": v for k, v in settings.librdkafka_config().items()}
    options.update(subscription.options())
    if fmt == "kafka" and "subscribe" in options:
        options["subscribePattern"] = exact_topics_pattern(options.pop("subscribe").split(","))
    options["startingOffsets"] = starting_offsets
    options["failOnDataLoss"] = "true" if fail_on_data_loss else "false"
    if max_per_trigger and streaming:
        options["maxOffsetsPerTrigger"] = str(max_per_trigger)
    elif fmt == "kafka":
        options.setdefault("kafka.max.partition.fetch.bytes", str(CONNECTOR_PARTITION_FETCH_BYTES))
    if ending_offsets and not streaming:
        options["endingOffsets"] = ending_offsets
    return options


def exact_topics_pattern(topics: Sequence[str]) -> str:
    """A regular expression matching exactly ``topics``, for the connector's ``subscribePattern``.

    Spark's connector fails a query whose ``subscribe`` list names a topic
    that does not exist yet (a priority nobody has sent at); a pattern reads
    the topics that exist and takes the others when they appear, as a consumer
    group subscription and the ``notify_kafka`` source do.
    """
    return "|".join(re.escape(topic) for topic in topics)


def read_kafka(spark, settings: KafkaSettings, subscription: Subscription, *, streaming: bool,
               fmt: str = "auto", starting_offsets: str = "earliest",
               max_per_trigger: int | None = None, fail_on_data_loss: bool = True,
               ending_offsets: str | None = None):
    """A DataFrame of Kafka records (key, value, topic, partition, offset, timestamp, timestampType)."""
    fmt = choose_format(spark, fmt)
    options = source_options(settings, subscription, fmt, starting_offsets, max_per_trigger,
                             fail_on_data_loss, streaming, ending_offsets)
    if fmt == FORMAT_NAME:
        options["readerTasks"] = str(read_tasks(spark))
    LOG.info("Reading %s with the %s format from %s", subscription.options(), fmt, settings.url)
    reader = spark.readStream if streaming else spark.read
    df = reader.format(fmt).options(**options).load()
    columns: Sequence[str] = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
    return df.select(*columns)


def planned_ranges(spark, settings: KafkaSettings, subscription: Subscription, *,
                   starting_offsets: str = "earliest", max_per_trigger: int | None = None,
                   fail_on_data_loss: bool = True):
    """A streaming DataFrame of each micro-batch's offset ranges (:data:`.source.RANGES_SCHEMA`).

    The connector's own ``maxOffsetsPerTrigger`` splits a cap over the
    partitions by their backlog, so a capped batch could read a later copy of
    a notification before its first one; the ``notify_kafka`` source cuts on
    broker time instead, and here it plans without reading.
    """
    options = source_options(settings, subscription, FORMAT_NAME, starting_offsets, max_per_trigger,
                             fail_on_data_loss)
    options.update({"plannedRanges": "true", "readerTasks": "1"})
    return spark.readStream.format(FORMAT_NAME).options(**options).load()


def ranges_options(rows: Sequence) -> dict[str, str]:
    """The connector's ``assign``, ``startingOffsets`` and ``endingOffsets`` for planned range rows
    (a range from a partition's earliest record starts at -2, as the connector spells it)."""
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for row in rows:
        topic, partition = row["topic"], int(row["partition"])
        assign.setdefault(topic, []).append(partition)
        starting.setdefault(topic, {})[str(partition)] = -2 if row["fromEarliest"] else int(row["startOffset"])
        ending.setdefault(topic, {})[str(partition)] = int(row["endOffset"])
    return {"assign": json.dumps(assign, sort_keys=True), "startingOffsets": json.dumps(starting, sort_keys=True),
            "endingOffsets": json.dumps(ending, sort_keys=True)}


def read_ranges(spark, settings: KafkaSettings, subscription: Subscription, rows: Sequence, *,
                with_payload: bool = True, fail_on_data_loss: bool = True):
    """The decoded records of planned range ``rows`` (:func:`planned_ranges`), read by the connector
    as a batch; None when the rows plan nothing."""
    from notify_transport.pipeline import decode

    if not rows:
        return None
    options = settings.spark_kafka_options()
    options.setdefault("kafka.max.partition.fetch.bytes", str(CONNECTOR_PARTITION_FETCH_BYTES))
    options.update(ranges_options(rows))
    options["failOnDataLoss"] = "true" if fail_on_data_loss else "false"
    columns: Sequence[str] = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
    records = spark.read.format("kafka").options(**options).load().select(*columns)
    # one task per core rather than per Kafka partition (see read_decoded)
    return decode.decode(records.coalesce(read_tasks(spark)), subscription.base_topics, with_payload)


def read_decoded(spark, settings: KafkaSettings, subscription: Subscription, *, streaming: bool,
                 fmt: str = "auto", with_payload: bool = True, **read_options):
    """A DataFrame of decoded records (:data:`~notify_transport.pipeline.decode.DECODED_SCHEMA`).

    The ``notify_kafka`` source decodes where it reads; records read by
    Spark's ``kafka`` format go through the reference decoder's Arrow UDF.
    (:func:`.decode.decode` with ``in_jvm`` decodes in the JVM and gives the
    same rows, but it is the slower of the two, so it is not the default; the
    pipeline docs give the figures.) ``read_options`` are those of
    :func:`read_kafka`.
    """
    from notify_transport.pipeline import decode

    fmt = choose_format(spark, fmt)
    if fmt != FORMAT_NAME:
        records = read_kafka(spark, settings, subscription, streaming=streaming, fmt=fmt, **read_options)
        # The connector makes a task of every Kafka partition, and each task pays for a trip
        # through the decoder's Python worker: on many small partitions that costs more than
        # the records do. One task per core reads its partitions one after another.
        records = records.coalesce(read_tasks(spark))
        return decode.decode(records, subscription.base_topics, with_payload)
    options = source_options(settings, subscription, fmt, streaming=streaming, **read_options)
    options.update({"decode": "true", "baseTopics": ",".join(subscription.base_topics),
                    "decodePayload": "true" if with_payload else "false", "readerTasks": str(read_tasks(spark))})
    LOG.info("Reading and decoding %s with the %s format from %s", subscription.options(), fmt, settings.url)
    reader = spark.readStream if streaming else spark.read
    return reader.format(fmt).options(**options).load()
