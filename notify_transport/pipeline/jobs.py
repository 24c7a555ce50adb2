"""The pipeline's jobs: the notification archive and the windowed statistics.

Both are Structured Streaming queries over the Kafka DataFrame, each with its
own checkpoint, run once (``availableNow``) or continuously:

- **archive**: decoded notifications, deduplicated by ``message_id``, as
  Parquet partitioned by ``date`` (of the notification timestamp, UTC) and
  ``event_type``; undecodable records go to ``errors/`` with their Kafka
  coordinates. Deduplication keeps each ``message_id`` in the state store for
  ``dedup_horizon`` of processing time, so late notifications are archived,
  never dropped as late. Writes are idempotent per micro-batch
  (:mod:`.sink`), which with the checkpoint makes the archive exactly once
  across restarts.
- **stats**: per ``window`` of notification time, with a watermark of
  ``lateness``: counts per event_type, publisher and priority, error and
  critical rates, and p50/p95 of the delay from the notification timestamp to
  the broker timestamp. Duplicates within the watermark are counted once.
  Updated windows are appended each micro-batch with their batch id; the
  latest row of a window is its value (:func:`notify_transport.pipeline.report.load_stats`).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import signal
import threading
import time
from typing import Callable, Sequence

from notify_transport.exceptions import ConfigurationError
from notify_transport.pipeline import decode
from notify_transport.pipeline.kafka_settings import KafkaSettings
from notify_transport.pipeline.reading import Subscription, read_kafka
from notify_transport.pipeline.report import STATS_KEY
from notify_transport.pipeline.sink import BatchParquetWriter
from notify_transport.pipeline.topics import ERROR_PRIORITIES

LOG = logging.getLogger(__name__)

JOBS = ("archive", "stats")
ARCHIVE_PARTITIONS = ("date", "event_type")


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Where the jobs write and how they window, deduplicate and trigger."""

    output: str
    checkpoint: str | None = None
    jobs: tuple[str, ...] = JOBS
    window: str = "1 minute"
    lateness: str = "10 minutes"
    dedup_horizon: str = "24 hours"
    trigger_interval: str = "10 seconds"
    source_format: str = "auto"
    starting_offsets: str = "earliest"
    max_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    #: merge the statistics files every this many micro-batches
    stats_compact_every: int = 100

    def __post_init__(self) -> None:
        unknown = [j for j in self.jobs if j not in JOBS]
        if unknown or not self.jobs:
            raise ConfigurationError(f"Unknown jobs {unknown}; choose from {', '.join(JOBS)}")

    def path(self, name: str) -> str:
        """An output folder: ``archive``, ``errors`` or ``stats``."""
        return _join(self.output, name)

    def checkpoint_path(self, job: str) -> str:
        return _join(self.checkpoint or _join(self.output, "_checkpoints"), job)


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


# -- transformations, shared by batch and streaming ---------------------------------------------

def archive_rows(notifications_df):
    """Archive columns plus the ``date`` partition column."""
    from pyspark.sql import functions as F

    return notifications_df.withColumn("date", F.date_format("timestamp", "yyyy-MM-dd"))


def window_stats(notifications_df, window: str = "1 minute", lateness: str | None = None):
    """Statistics per window, at two levels: ``detail`` (event_type, publisher_id, priority) and ``window``.

    With ``lateness`` (streaming) notifications older than the watermark are
    left out and duplicates within it counted once; without it (batch) every
    duplicate is dropped.
    """
    from pyspark.sql import functions as F

    if lateness:
        unique = notifications_df.withWatermark("timestamp", lateness).dropDuplicatesWithinWatermark(
            ["message_id"])
    else:
        unique = notifications_df.dropDuplicates(["message_id"])
    rows = unique.withColumn(
        "delay", F.col("kafka_timestamp").cast("double") - F.col("timestamp").cast("double"))
    win = F.window("timestamp", window)
    dims = ["event_type", "publisher_id", "priority"]
    aggregated = rows.groupingSets([[win, *dims], [win]], win, *dims).agg(
        F.grouping_id().alias("grouping"),
        F.count(F.lit(1)).alias("count"),
        F.sum((F.col("priority") == ERROR_PRIORITIES[0]).cast("long")).alias("error_count"),
        F.sum((F.col("priority") == ERROR_PRIORITIES[1]).cast("long")).alias("critical_count"),
        F.percentile_approx("delay", [0.5, 0.95], 10000).alias("delay_pct"),
        F.max("delay").alias("delay_max"),
    )
    return aggregated.select(
        F.when(F.col("grouping") == 0, F.lit("detail")).otherwise(F.lit("window")).alias("level"),
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        *dims,
        "count", "error_count", "critical_count",
        (F.col("error_count") / F.col("count")).alias("error_rate"),
        (F.col("critical_count") / F.col("count")).alias("critical_rate"),
        F.col("delay_pct")[0].alias("delay_p50"),
        F.col("delay_pct")[1].alias("delay_p95"),
        "delay_max",
    )


def archive_dedup(decoded_df, horizon: str):
    """Streaming deduplication of decoded records over ``horizon`` of processing time.

    Notifications are keyed by ``message_id``, undecodable records by their
    coordinates. The watermark is on the micro-batch time, which only grows,
    so no record is ever dropped as late.
    """
    from pyspark.sql import functions as F

    key = F.when(F.col("error").isNull(), F.concat(F.lit("m:"), F.col("message_id"))).otherwise(
        F.concat_ws(":", F.lit("e"), F.col("topic"), F.col("partition"), F.col("offset")))
    return (decoded_df.withColumn("dedup_key", key)
            .withColumn("ingested_at", F.current_timestamp())
            .withWatermark("ingested_at", horizon)
            .dropDuplicatesWithinWatermark(["dedup_key"])
            .drop("dedup_key", "ingested_at"))


# -- micro-batch writers -----------------------------------------------------------------------

class ArchiveBatch:
    """``foreachBatch`` of the archive: notifications to ``archive/``, the rest to ``errors/``."""

    def __init__(self, config: PipelineConfig) -> None:
        self.archive = BatchParquetWriter(config.path("archive"), ARCHIVE_PARTITIONS)
        self.errors = BatchParquetWriter(config.path("errors"))

    def __call__(self, df, batch_id: int) -> None:
        from pyspark.sql import functions as F

        df = df.persist()
        try:
            counts = {row["ok"]: row["count"] for row in
                      df.groupBy(F.col("error").isNull().alias("ok")).count().collect()}
            good, bad = counts.get(True, 0), counts.get(False, 0)
            # An empty batch still clears files of an earlier attempt of the same batch.
            # One file per date and event type per batch: no small-file explosion.
            archive = archive_rows(decode.notifications(df)).repartition(*ARCHIVE_PARTITIONS)
            self.archive.write(archive, batch_id, empty=not good)
            self.errors.write(decode.errors(df).coalesce(1), batch_id, empty=not bad)
            if bad:
                LOG.warning("Batch %d: %d records are not notifications; see %s", batch_id, bad,
                            self.errors.root)
            LOG.info("Batch %d: %d notifications archived", batch_id, good)
        finally:
            df.unpersist()


class StatsBatch:
    """``foreachBatch`` of the statistics: updated windows, tagged with the batch id.

    Every ``compact_every`` batches the files so far are merged into one that
    keeps the latest row of each window and group, so a long run does not
    leave one small file per micro-batch for the report to read.
    """

    def __init__(self, config: PipelineConfig) -> None:
        self.stats = BatchParquetWriter(config.path("stats"))
        self.compact_every = config.stats_compact_every

    def __call__(self, df, batch_id: int) -> None:
        from pyspark.sql import functions as F

        self.stats.write(df.withColumn("batch_id", F.lit(batch_id).cast("long")).coalesce(1), batch_id)
        if batch_id and batch_id % self.compact_every == 0:
            self.compact(df.sparkSession, batch_id)

    def compact(self, spark, batch_id: int) -> int:
        """Merge the statistics files into one ``compact-N-*`` file; return how many it replaced.

        A crash in between leaves both the merged file and some originals:
        identical rows, which readers already reduce to one per key.
        """
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        files = self.stats.files(spark)
        if len(files) < 2:
            return 0
        frame = spark.read.parquet(*files)
        latest = Window.partitionBy(*[F.col(c) for c in STATS_KEY]).orderBy(F.col("batch_id").desc())
        merged = (frame.withColumn("_rank", F.row_number().over(latest)).filter("_rank = 1")
                  .drop("_rank").coalesce(1))
        self.stats.write(merged, batch_id, prefix=f"compact-{batch_id:012d}-")
        self.stats.delete(spark, files)
        LOG.info("Statistics: %d files merged into one at batch %d", len(files), batch_id)
        return len(files)


# -- running -----------------------------------------------------------------------------------

def start_jobs(spark, settings: KafkaSettings, subscription: Subscription, config: PipelineConfig,
               once: bool, archive_batch: Callable | None = None) -> list:
    """Start the configured streaming queries; return them."""
    queries = []
    bases = subscription.base_topics

    def source(with_payload: bool = True):
        kafka_df = read_kafka(spark, settings, subscription, streaming=True, fmt=config.source_format,
                              starting_offsets=config.starting_offsets,
                              max_per_trigger=config.max_per_trigger,
                              fail_on_data_loss=config.fail_on_data_loss)
        return decode.decode(kafka_df, bases, with_payload)

    def start(job: str, df, batch_fn, output_mode: str):
        writer = (df.writeStream.queryName(f"notify_{job}").outputMode(output_mode)
                  .option("checkpointLocation", config.checkpoint_path(job)).foreachBatch(batch_fn))
        writer = writer.trigger(availableNow=True) if once else writer.trigger(
            processingTime=config.trigger_interval)
        queries.append(writer.start())

    try:
        if "archive" in config.jobs:
            start("archive", archive_dedup(source(), config.dedup_horizon),
                  archive_batch or ArchiveBatch(config), "append")
        if "stats" in config.jobs:
            stats = window_stats(decode.notifications(source(with_payload=False)), config.window,
                                 config.lateness)
            start("stats", stats, StatsBatch(config), "update")
    except BaseException:
        for query in queries:
            query.stop()
        raise
    return queries


@dataclasses.dataclass
class RunSummary:
    """What each query read (over its last 100 micro-batches) and how long the run took."""

    seconds: float
    input_rows: dict[str, int]
    batches: dict[str, int]
    dropped_by_watermark: dict[str, int]

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def run(spark, settings: KafkaSettings, subscription: Subscription, config: PipelineConfig,
        once: bool = True, max_seconds: float | None = None,
        archive_batch: Callable | None = None) -> RunSummary:
    """Run the jobs: until everything available is processed (``once``) or until stopped.

    Continuous runs stop on SIGINT/SIGTERM or after ``max_seconds``; a failed
    query stops the others and its error is raised.
    """
    started = time.monotonic()
    queries = start_jobs(spark, settings, subscription, config, once, archive_batch)
    stop = threading.Event()
    restore = _stop_on_signals(stop) if not once else None
    try:
        while any(q.isActive for q in queries):
            if stop.is_set() or (max_seconds is not None and time.monotonic() - started > max_seconds):
                break
            for query in queries:
                if query.exception() is not None:
                    raise query.exception()
            next(q for q in queries if q.isActive).awaitTermination(0.5)
        for query in queries:
            if query.exception() is not None:
                raise query.exception()
    finally:
        for query in queries:
            if query.isActive:
                query.stop()
        if restore:
            restore()
    return _summary(queries, time.monotonic() - started)


def _summary(queries: Sequence, seconds: float) -> RunSummary:
    rows, batches, dropped = {}, {}, {}
    for query in queries:
        progress = [p for p in query.recentProgress]
        rows[query.name] = sum(p.numInputRows for p in progress)
        batches[query.name] = sum(1 for p in progress if p.numInputRows)
        dropped[query.name] = sum(op.numRowsDroppedByWatermark for p in progress for op in p.stateOperators)
    return RunSummary(seconds, rows, batches, dropped)


def _stop_on_signals(stop: threading.Event) -> Callable[[], None] | None:
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum, _frame):
        LOG.info("Signal %d: stopping the pipeline after the current micro-batch", signum)
        stop.set()

    for sig in previous:
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)
    return restore


def default_output(path: str) -> str:
    """An absolute local path, or a URI kept as given (``hdfs://``, ``s3a://``...)."""
    return path if "://" in path else os.path.abspath(path)
