"""The pipeline: one streaming query whose micro-batches feed the archive and the statistics.

Kafka is read once per micro-batch. Each micro-batch goes to
:class:`PipelineBatch`, which deduplicates it by ``message_id`` (:mod:`.dedup`:
the first copy by broker time is kept, ids are remembered over
``dedup_horizon`` of processing time, late notifications are never dropped),
keeps it in memory and writes:

- **archive**: the notifications as Parquet partitioned by ``date`` (of the
  notification timestamp, UTC) and ``event_type``, timestamps as UTC-adjusted
  ``TIMESTAMP_MICROS``; undecodable records to ``errors/`` with their Kafka
  coordinates.
- **stats**: partial counts per ``window`` of notification time, event type,
  publisher, priority and delay bucket (:mod:`.delays`), which add up across
  batches (:mod:`.stats_files`). A notification more than ``lateness``
  behind its own partition's progress is counted as late, apart from the
  windows (:mod:`.lateness`): the numbers do not depend on batch sizes,
  restarts or partition skew.

Writes are idempotent per micro-batch (:mod:`.sink`), which with the
checkpoint makes both outputs exactly once across restarts.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import signal
import threading
import time
import uuid
from typing import Callable

from notify_transport.pipeline import caught_up, decode, dedup, delays, lateness
from notify_transport.times import parse_duration, spark_interval
from notify_transport.pipeline.kafka_settings import KafkaSettings
from notify_transport.pipeline.reading import Subscription, read_decoded
from notify_transport.pipeline.run_config import (JOBS, PROGRESS_LOG, PipelineConfig, RunSummary,  # noqa: F401
                                                  default_output)
from notify_transport.pipeline.sink import BatchParquetWriter
from notify_transport.pipeline.stats_files import STATS_KEY, effective_files

LOG = logging.getLogger(__name__)

ARCHIVE_PARTITIONS = ("date", "event_type")
QUERY_NAME = "notify_pipeline"


# -- transformations ---------------------------------------------------------------------------

def archive_rows(notifications_df):
    """Archive columns plus the ``date`` partition column."""
    from pyspark.sql import functions as F

    return notifications_df.withColumn("date", F.date_format("timestamp", "yyyy-MM-dd"))


def partial_stats(notifications_df, window: str = "1 minute"):
    """Partial counts (:data:`~.stats_files.STATS_KEY` plus count, delay min/max) of notifications.

    ``notifications_df`` may carry a boolean ``late`` column; without one
    every row is on time.
    """
    from pyspark.sql import functions as F

    rows = notifications_df if "late" in notifications_df.columns else notifications_df.withColumn(
        "late", F.lit(False))
    delay = F.col("kafka_timestamp").cast("double") - F.col("timestamp").cast("double")
    rows = rows.withColumn("delay", delay).withColumn("delay_bucket", delays.bucket_column(F.col("delay")))
    win = F.window("timestamp", spark_interval(window))
    grouped = rows.groupBy(win.alias("w"), "event_type", "publisher_id", "priority", "late", "delay_bucket").agg(
        F.count(F.lit(1)).alias("count"), F.min("delay").alias("delay_min"), F.max("delay").alias("delay_max"))
    return grouped.select(F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
                          *STATS_KEY[2:], "count", "delay_min", "delay_max")


def window_stats(notifications_df, window: str = "1 minute"):
    """Batch statistics of a whole DataFrame: each ``message_id`` once, nothing late."""
    return partial_stats(notifications_df.dropDuplicates(["message_id"]), window)


# -- micro-batch writers -----------------------------------------------------------------------

@dataclasses.dataclass
class BatchCounts:
    """What one micro-batch held after deduplication."""

    notifications: int = 0
    undecodable: int = 0
    late: int = 0
    #: copies of ids kept by an earlier batch with an earlier broker time than the kept copy
    earlier_duplicates: int = 0
    #: (topic, partition) -> (oldest, newest) notification timestamp, microseconds
    bounds: dict = dataclasses.field(default_factory=dict)


def count_batch(df) -> BatchCounts:
    """Notifications and undecodable records per partition, in one pass over the batch.

    ``df`` carries :data:`~.dedup.SEEN_TS` (:meth:`~.dedup.SeenIds.mark`):
    copies of ids an earlier batch kept are not counted as notifications.
    """
    from pyspark.sql import functions as F

    micros = F.unix_micros(F.col("timestamp"))
    seen = F.col(dedup.SEEN_TS)
    counts = BatchCounts()
    for row in df.groupBy("topic", "partition", F.col("error").isNull().alias("ok"), seen.isNotNull().alias("seen"),
                          F.coalesce(F.col("kafka_timestamp") < seen, F.lit(False)).alias("earlier")).agg(
            F.count(F.lit(1)).alias("n"), F.min(micros).alias("oldest"), F.max(micros).alias("newest")).collect():
        if row["seen"]:
            counts.earlier_duplicates += row["n"] if row["earlier"] else 0
        elif row["ok"]:
            counts.notifications += row["n"]
            counts.bounds[(row["topic"], row["partition"])] = (row["oldest"], row["newest"])
        else:
            counts.undecodable += row["n"]
    return counts


class ArchiveWriter:
    """Notifications to ``archive/``, the rest to ``errors/``."""

    def __init__(self, config: PipelineConfig) -> None:
        self.archive = BatchParquetWriter(config.path("archive"), ARCHIVE_PARTITIONS)
        self.errors = BatchParquetWriter(config.path("errors"))

    def write(self, df, batch_id: int, counts: BatchCounts) -> None:
        # An empty batch still clears files of an earlier attempt of the same batch. Each task
        # writes one file per date and event type it holds: at most spark.sql.shuffle.partitions
        # files per folder and batch, without shuffling the notifications once more.
        archive = archive_rows(decode.notifications(df))
        self.archive.write(archive, batch_id, empty=not counts.notifications)
        self.errors.write(decode.errors(df).coalesce(1), batch_id, empty=not counts.undecodable)
        if counts.undecodable:
            LOG.warning("Batch %d: %d records are not notifications; see %s", batch_id,
                        counts.undecodable, self.errors.root)


class StatsWriter:
    """Partial counts of a micro-batch to ``stats/``, late notifications judged per partition.

    Every ``compact_every`` batches the files so far are merged into one, so
    a long run does not leave one small file per micro-batch for the report.
    """

    def __init__(self, config: PipelineConfig) -> None:
        self.stats = BatchParquetWriter(config.path("stats"))
        self.progress = lateness.PartitionProgress(config.checkpoint_path("partition_progress"))
        self.window = config.window
        self.lateness_us = config.lateness_us
        self.compact_every = config.stats_compact_every

    def write(self, df, batch_id: int, counts: BatchCounts) -> int:
        """Write batch ``batch_id``'s partial counts; return how many notifications were late."""
        from pyspark.sql import functions as F

        spark = df.sparkSession
        notifications = decode.notifications(df).select(
            "topic", "partition", "offset", "timestamp", "kafka_timestamp", "event_type", "publisher_id",
            "priority")
        carried = self.progress.before(spark, batch_id) if counts.notifications else {}
        maybe_late = counts.notifications and lateness.may_have_late(carried, counts.bounds, self.lateness_us)
        if maybe_late:
            notifications = lateness.flag_late(notifications, carried, self.lateness_us)
        partial = partial_stats(notifications, self.window).withColumn(
            "batch_id", F.lit(batch_id).cast("long")).coalesce(1)
        late = 0
        if maybe_late:  # the late count needs the partial rows twice: keep them
            partial = partial.persist()
        try:
            self.stats.write(partial, batch_id, empty=not counts.notifications)
            if maybe_late:
                late = partial.filter("late").agg(F.sum("count")).first()[0]
        finally:
            if maybe_late:
                partial.unpersist()
        if counts.notifications:
            newest = {tp: bounds[1] for tp, bounds in counts.bounds.items()}
            self.progress.save(spark, batch_id, lateness.merge(carried, newest))
        if batch_id and batch_id % self.compact_every == 0:
            self.compact(spark, batch_id)
        return int(late or 0)

    def compact(self, spark, batch_id: int) -> int:
        """Merge the effective statistics files into one ``compact-N-*`` file; return how many it replaced.

        Readers take the newest compaction and ignore the batch files it
        covers, so a crash between writing it and deleting them counts nothing twice.
        """
        from pyspark.sql import functions as F

        files = effective_files(self.stats.files(spark))
        if len(files) < 2:
            return 0
        merged = (spark.read.parquet(*files).groupBy(*STATS_KEY)
                  .agg(F.sum("count").alias("count"), F.min("delay_min").alias("delay_min"),
                       F.max("delay_max").alias("delay_max"))
                  .withColumn("batch_id", F.lit(batch_id).cast("long")).coalesce(1))
        self.stats.write(merged, batch_id, prefix=f"compact-{batch_id:012d}-{uuid.uuid4().hex[:8]}-")
        every = self.stats.files(spark)
        keep = set(effective_files(every))
        self.stats.delete(spark, [f for f in every if f not in keep])
        LOG.info("Statistics: %d files merged into one at batch %d", len(files), batch_id)
        return len(files)


class PipelineBatch:
    """``foreachBatch`` of the pipeline: one deduplicated, cached micro-batch, written to each output."""

    def __init__(self, config: PipelineConfig) -> None:
        self.archive = ArchiveWriter(config) if "archive" in config.jobs else None
        self.stats = StatsWriter(config) if "stats" in config.jobs else None
        self.seen = dedup.SeenIds(config.checkpoint_path("dedup"), parse_duration(config.dedup_horizon),
                                  config.stats_compact_every)
        self.totals = BatchCounts()

    def __call__(self, df, batch_id: int) -> None:
        steps = [time.monotonic()]
        now = time.time()
        df = self.seen.mark(dedup.first_copies(df), batch_id, now).persist()
        try:
            counts = count_batch(df)  # reads, decodes and deduplicates the batch into memory
            new = df.filter(f"{dedup.SEEN_TS} IS NULL").drop(dedup.SEEN_TS)
            steps.append(time.monotonic())
            if self.archive is not None:
                self.archive.write(new, batch_id, counts)
            steps.append(time.monotonic())
            if self.stats is not None:
                counts.late = self.stats.write(new, batch_id, counts)
            steps.append(time.monotonic())
            self.seen.save(decode.notifications(new), batch_id, empty=not counts.notifications, now=now)
        finally:
            df.unpersist()
        for name in ("notifications", "undecodable", "late", "earlier_duplicates"):
            setattr(self.totals, name, getattr(self.totals, name) + getattr(counts, name))
        if counts.earlier_duplicates:
            LOG.warning("Batch %d: %d copies of notifications archived by an earlier batch have an earlier "
                        "broker time than the archived copy; the archived copy stays", batch_id,
                        counts.earlier_duplicates)
        LOG.info("Batch %d written in %.1f s (read and decode %.1f s, archive %.1f s, statistics %.1f s): "
                 "%d notifications (%d late), %d undecodable", batch_id, steps[-1] - steps[0],
                 steps[1] - steps[0], steps[2] - steps[1], steps[3] - steps[2], counts.notifications,
                 counts.late, counts.undecodable)


# -- running -----------------------------------------------------------------------------------

def start_query(spark, settings: KafkaSettings, subscription: Subscription, config: PipelineConfig,
                once: bool, batch_fn: Callable):
    """Start the pipeline's streaming query: Kafka -> decode -> ``batch_fn`` (which deduplicates)."""
    decoded = read_decoded(spark, settings, subscription, streaming=True, fmt=config.source_format,
                           with_payload="archive" in config.jobs, starting_offsets=config.starting_offsets,
                           max_per_trigger=config.max_per_trigger, fail_on_data_loss=config.fail_on_data_loss)
    writer = (decoded.writeStream.queryName(QUERY_NAME)
              .outputMode("append").option("checkpointLocation", config.checkpoint_path("pipeline"))
              .foreachBatch(batch_fn))
    writer = (writer.trigger(availableNow=True) if once
              else writer.trigger(processingTime=spark_interval(config.trigger_interval)))
    return writer.start()


class ProgressLog:
    """Logs a line per finished micro-batch: records, rate, and how far behind the run is."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.records = 0
        self.batches = 0
        self.started = time.monotonic()

    def update(self, progress_list) -> None:
        for progress in progress_list:
            if progress.batchId in self.seen:
                continue
            self.seen.add(progress.batchId)
            rows = progress.numInputRows
            if not rows:
                continue
            self.records += rows
            self.batches += 1
            elapsed = time.monotonic() - self.started
            seconds = (progress.durationMs or {}).get("triggerExecution", 0) / 1000
            behind = _behind(progress)
            PROGRESS_LOG.info(
                "Batch %d: %d records in %.1f s (%.0f records/s); %d records in %d batches so far, "
                "%.0f records/s%s", progress.batchId, rows, seconds, rows / seconds if seconds else 0.0,
                self.records, self.batches, self.records / elapsed if elapsed else 0.0,
                "" if behind is None else f", {behind} behind")


def _behind(progress) -> int | None:
    """Records between the batch's end and the newest offsets the source reported, if it did."""
    try:
        source = progress.sources[0]
        latest, end = source.latestOffset, source.endOffset
        if not latest or not end:
            return None
        newest, done = json.loads(latest), json.loads(end)
        return sum(max(0, int(off) - int(done.get(topic, {}).get(part, 0)))
                   for topic, parts in newest.items() for part, off in parts.items())
    except (AttributeError, IndexError, TypeError, ValueError):
        return None


def run(spark, settings: KafkaSettings, subscription: Subscription, config: PipelineConfig,
        once: bool = True, max_seconds: float | None = None,
        batch_fn: Callable | None = None, max_batches: int | None = None) -> RunSummary:
    """Run the pipeline: until everything available is processed (``once``) or until stopped.

    Runs stop on SIGINT/SIGTERM (continuous), after ``max_seconds``, or once
    ``max_batches`` micro-batches with records are done; a failed
    query's error is raised. ``batch_fn`` wraps or replaces :class:`PipelineBatch`.
    """
    started = time.monotonic()
    batch = PipelineBatch(config)
    query = start_query(spark, settings, subscription, config, once, batch_fn or batch)
    progress = ProgressLog()
    stop = threading.Event()
    restore = _stop_on_signals(stop) if not once else None
    try:
        while query.isActive:
            if stop.is_set() or (max_seconds is not None and time.monotonic() - started > max_seconds):
                break
            if max_batches is not None and progress.batches >= max_batches:
                break
            if query.exception() is not None:
                raise query.exception()
            query.awaitTermination(0.5)
            progress.update(query.recentProgress)
        if query.exception() is not None:
            raise query.exception()
    finally:
        if query.isActive:
            _stop_between_batches(query, patience=10.0 if stop.is_set() else 0.0)
        if restore:
            restore()
    progress.update(query.recentProgress)
    caught_up.record(spark, config.checkpoint_root, query.recentProgress)
    totals = getattr(batch_fn, "totals", None) or batch.totals
    summary = RunSummary(round(time.monotonic() - started, 3), progress.records, progress.batches,
                         totals.notifications, totals.undecodable, totals.late, totals.earlier_duplicates)
    PROGRESS_LOG.info("Run done in %.1f s: %d records, %d notifications, %d duplicates, %d late, "
                      "%d undecodable", summary.seconds, summary.input_rows, summary.notifications,
                      summary.duplicates, summary.late, summary.undecodable)
    return summary


def _stop_between_batches(query, patience: float = 10.0) -> None:
    """Stop ``query``, preferably between two micro-batches (waiting up to ``patience`` seconds).

    A batch cut half-way is harmless (it is replayed from the checkpoint on
    the next run and its files replaced) but makes Spark log the interruption.
    """
    deadline = time.monotonic() + patience
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


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
