"""The pipeline: one streaming query whose micro-batches feed the archive and the statistics.

Each micro-batch is deduplicated (:mod:`.dedup`) and written once: notifications to the
archive (Parquet by ``date`` and ``event_type``), undecodable records to ``errors/``;
the statistics (partial counts per window, event type, publisher, priority and delay
bucket, which add up: :mod:`.stats_files`) come from the files just written, so the
batch is never cached. Lateness is judged per partition (:mod:`.lateness`). Writes are
idempotent per batch (:mod:`.sink`): with the checkpoint, both outputs are exactly once.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
import uuid
from typing import Any, Callable

from notify_transport.pipeline import caught_up, decode, dedup, delays, lateness
from notify_transport.times import parse_duration, spark_interval
from notify_transport.pipeline.kafka_settings import KafkaSettings
from notify_transport.pipeline.reading import (Subscription, choose_format, planned_ranges, read_decoded,
                                               read_ranges)
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

#: the columns of a batch's notifications that the statistics and the deduplication state read back
ROW_COLUMNS = ("message_id", "topic", "partition", "offset", "timestamp", "kafka_timestamp", "event_type",
               "publisher_id", "priority")


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


class BatchObservation:
    """:class:`BatchCounts` of a micro-batch, taken while the first action over it runs (no pass of its own).

    ``records`` counts what was read (duplicates included) because Spark's
    own count of a micro-batch's input rows grows with every action that
    reads the batch again, as the errors' write does.
    """

    def __init__(self) -> None:
        from pyspark.sql import Observation

        self.read, self.kept = Observation(), Observation()

    def observe_read(self, df):
        """``df`` as read from Kafka, observed."""
        from pyspark.sql import functions as F

        return df.observe(self.read, F.count(F.lit(1)).alias("records"))

    def observe_kept(self, marked_df):
        """``marked_df`` (:meth:`~.dedup.SeenIds.mark`) observed: copies of ids an earlier batch kept
        are not notifications."""
        from pyspark.sql import functions as F

        seen = F.col(dedup.SEEN_TS)
        ok = F.col("error").isNull()

        def count(condition):
            return F.count(F.when(condition, F.lit(1)))

        return marked_df.observe(self.kept, count(seen.isNull() & ok).alias("notifications"),
                                 count(seen.isNull() & ~ok).alias("undecodable"),
                                 count(F.col("kafka_timestamp") < seen).alias("earlier_duplicates"))

    def counts(self) -> tuple[int, BatchCounts]:
        """Records read and the :class:`BatchCounts` (without bounds), once the action ran."""
        kept = self.kept.get
        return self.read.get["records"], BatchCounts(
            notifications=kept["notifications"], undecodable=kept["undecodable"],
            earlier_duplicates=kept["earlier_duplicates"])


def partition_bounds(rows_df) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (oldest, newest) notification timestamp in microseconds, of ``rows_df``."""
    from pyspark.sql import functions as F

    micros = F.unix_micros(F.col("timestamp"))
    return {(row["topic"], row["partition"]): (row["oldest"], row["newest"])
            for row in rows_df.groupBy("topic", "partition").agg(
                F.min(micros).alias("oldest"), F.max(micros).alias("newest")).collect()}


class BatchRows:
    """A micro-batch's notifications written once, then read back from their files by the other outputs.

    With the archive job the rows are the archive itself (partitioned by
    ``date`` and ``event_type``); otherwise only :data:`ROW_COLUMNS` are
    written, to a scratch folder under the checkpoint whose files are removed
    once the batch is done. Reading a few columns of the batch's Parquet
    files costs far less than keeping the decoded batch (payloads included)
    in memory or reading Kafka again.
    """

    def __init__(self, config: PipelineConfig) -> None:
        self.archive = "archive" in config.jobs
        self.files = (BatchParquetWriter(config.path("archive"), ARCHIVE_PARTITIONS) if self.archive
                      else BatchParquetWriter(config.checkpoint_path("batch_rows")))

    def write(self, notifications_df, batch_id: int) -> list[str]:
        # Each task writes one file per date and event type it holds: at most
        # spark.sql.shuffle.partitions files per folder and batch, without shuffling the rows once more.
        rows = archive_rows(notifications_df) if self.archive else notifications_df.select(*ROW_COLUMNS)
        return self.files.write(rows, batch_id)

    def read(self, spark, files: list[str]):
        """The :data:`ROW_COLUMNS` of the files :meth:`write` returned."""
        from pyspark.sql.types import StructType

        schema = StructType([decode.DECODED_SCHEMA[c] for c in ROW_COLUMNS])
        return self.files.read(spark, files, schema)

    def discard(self, notifications_df, batch_id: int) -> None:
        """Remove batch ``batch_id``'s files (``notifications_df`` is not read)."""
        self.files.write(notifications_df, batch_id, empty=True)

    def done(self, spark, files: list[str]) -> None:
        """The batch is written: its scratch files (not the archive) go."""
        if not self.archive:
            self.files.delete(spark, files)


class ArchiveErrors:
    """Records that are not notifications, to ``errors/`` with their Kafka coordinates."""

    def __init__(self, config: PipelineConfig) -> None:
        self.errors = BatchParquetWriter(config.path("errors"))

    def write(self, df, batch_id: int, undecodable: int) -> None:
        """Write the undecodable records of ``df`` (the micro-batch as read) when it has any.

        Only a batch with such records is read a second time, without the
        deduplication (each of them is kept). A batch without any still clears
        the files of an earlier attempt.
        """
        self.errors.write(decode.errors(df).coalesce(1), batch_id, empty=not undecodable)
        if undecodable:
            LOG.warning("Batch %d: %d records are not notifications; see %s", batch_id, undecodable,
                        self.errors.root)


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

    def write(self, rows_df, batch_id: int, counts: BatchCounts) -> int:
        """Write batch ``batch_id``'s partial counts of its notifications ``rows_df`` (:data:`ROW_COLUMNS`,
        not read when there are none); return how many notifications were late."""
        from pyspark.sql import functions as F

        spark = rows_df.sparkSession
        carried = self.progress.before(spark, batch_id) if counts.notifications else {}
        maybe_late = counts.notifications and lateness.may_have_late(carried, counts.bounds, self.lateness_us)
        if maybe_late:
            rows_df = lateness.flag_late(rows_df, carried, self.lateness_us)
        partial = partial_stats(rows_df, self.window).withColumn(
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
    """``foreachBatch`` of the pipeline: each micro-batch read, decoded and deduplicated once.

    One Spark job reads the batch and writes its notifications (the archive,
    :class:`BatchRows`) while an observation counts what it held; the
    statistics, the late counts and the ids kept for deduplication come from
    the files just written. Nothing is cached: Kafka is read a second time
    only for a batch with undecodable records, to write them to ``errors/``.
    """

    def __init__(self, config: PipelineConfig) -> None:
        self.rows = BatchRows(config)
        self.errors = ArchiveErrors(config) if "archive" in config.jobs else None
        self.stats = StatsWriter(config) if "stats" in config.jobs else None
        self.seen = dedup.SeenIds(config.checkpoint_path("dedup"), parse_duration(config.dedup_horizon),
                                  config.stats_compact_every)
        self.totals = BatchCounts()
        #: records read per micro-batch (a replayed batch counts once)
        self.records: dict[int, int] = {}

    def __call__(self, df, batch_id: int) -> None:
        steps = [time.monotonic()]
        now = time.time()
        observation = BatchObservation()
        marked = observation.observe_kept(self.seen.mark(dedup.first_copies(observation.observe_read(df)),
                                                         batch_id, now))
        notifications = decode.notifications(marked.filter(f"{dedup.SEEN_TS} IS NULL"))
        files = self.rows.write(notifications, batch_id)  # reads, decodes, deduplicates and writes the batch
        self.records[batch_id], counts = observation.counts()
        if not counts.notifications:  # an empty write may still leave a file without rows
            self.rows.discard(notifications, batch_id)
            files = []
        if self.errors is not None:
            self.errors.write(df, batch_id, counts.undecodable)
        steps.append(time.monotonic())
        # with no notifications, the outputs below only clear an earlier attempt's files: never read
        rows = self.rows.read(df.sparkSession, files) if files else notifications
        if self.stats is not None:
            counts.bounds = partition_bounds(rows) if files else {}
            counts.late = self.stats.write(rows, batch_id, counts)
        steps.append(time.monotonic())
        self.seen.save(rows, batch_id, empty=not files, now=now)
        self.rows.done(df.sparkSession, files)
        for name in ("notifications", "undecodable", "late", "earlier_duplicates"):
            setattr(self.totals, name, getattr(self.totals, name) + getattr(counts, name))
        if counts.earlier_duplicates:
            LOG.warning("Batch %d: %d copies of notifications archived by an earlier batch have an earlier "
                        "broker time than the archived copy; the archived copy stays", batch_id,
                        counts.earlier_duplicates)
        LOG.info("Batch %d written in %.1f s (read, decode, deduplicate and write the notifications %.1f s, "
                 "statistics %.1f s): %d notifications (%d late), %d undecodable", batch_id,
                 steps[-1] - steps[0], steps[1] - steps[0], steps[2] - steps[1], counts.notifications,
                 counts.late, counts.undecodable)


# -- running -----------------------------------------------------------------------------------

class ConnectorBatch:
    """``foreachBatch`` over planned ranges (:func:`.reading.planned_ranges`): reads each
    micro-batch's ranges with Spark's connector and hands the decoded records to ``batch_fn``."""

    def __init__(self, settings: KafkaSettings, subscription: Subscription, config: PipelineConfig,
                 batch_fn: Callable) -> None:
        self.settings, self.subscription, self.batch_fn = settings, subscription, batch_fn
        self.with_payload = "archive" in config.jobs
        self.fail_on_data_loss = config.fail_on_data_loss

    def __call__(self, ranges_df, batch_id: int) -> None:
        spark = ranges_df.sparkSession
        records = read_ranges(spark, self.settings, self.subscription, ranges_df.collect(),
                              with_payload=self.with_payload, fail_on_data_loss=self.fail_on_data_loss)
        if records is None:  # nothing planned: the batch still clears an earlier attempt's files
            records = spark.createDataFrame([], decode.DECODED_SCHEMA)
        self.batch_fn(records, batch_id)


def start_query(spark, settings: KafkaSettings, subscription: Subscription, config: PipelineConfig,
                once: bool, batch_fn: Callable):
    """Start the pipeline's streaming query: Kafka -> decode -> ``batch_fn`` (which deduplicates).

    Both readers admit the same records per micro-batch: with Spark's connector the query streams
    the ``notify_kafka`` source's plan and each batch reads its ranges with the connector.
    """
    read: dict[str, Any] = dict(starting_offsets=config.starting_offsets, max_per_trigger=config.max_per_trigger,
                                fail_on_data_loss=config.fail_on_data_loss)
    fmt = choose_format(spark, config.source_format)
    if fmt == "kafka":
        stream = planned_ranges(spark, settings, subscription, **read)
        batch_fn = ConnectorBatch(settings, subscription, config, batch_fn)
    else:
        stream = read_decoded(spark, settings, subscription, streaming=True, fmt=fmt,
                              with_payload="archive" in config.jobs, **read)
    writer = (stream.writeStream.queryName(QUERY_NAME)
              .outputMode("append").option("checkpointLocation", config.checkpoint_path("pipeline"))
              .foreachBatch(batch_fn))
    writer = (writer.trigger(availableNow=True) if once
              else writer.trigger(processingTime=spark_interval(config.trigger_interval)))
    return writer.start()


class ProgressLog:
    """Logs a line per finished micro-batch: records, rate, and how far behind the run is.

    ``counted`` (batch id -> records) is what the batch function counted
    itself (:attr:`PipelineBatch.records`); Spark's count serves for the rest.
    """

    def __init__(self, counted: dict[int, int] | None = None) -> None:
        self.counted = {} if counted is None else counted
        self.seen: set[int] = set()
        self.records = 0
        self.batches = 0
        self.started = time.monotonic()

    def update(self, progress_list) -> None:
        for progress in progress_list:
            if progress.batchId in self.seen:
                continue
            self.seen.add(progress.batchId)
            rows = self.counted.get(progress.batchId, progress.numInputRows)
            if not rows:
                continue
            self.records += rows
            self.batches += 1
            elapsed = time.monotonic() - self.started
            seconds = (progress.durationMs or {}).get("triggerExecution", 0) / 1000
            behind = _behind(progress)
            PROGRESS_LOG.info(
                "Batch %d: %d records in %.1f s (%.0f records/s); %d records in %d batch%s so far, "
                "%.0f records/s%s", progress.batchId, rows, seconds, rows / seconds if seconds else 0.0,
                self.records, self.batches, "" if self.batches == 1 else "es",
                self.records / elapsed if elapsed else 0.0,
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
        batch_fn: Callable | None = None, max_batches: int | None = None,
        stop: threading.Event | None = None) -> RunSummary:
    """Run the pipeline: until everything available is processed (``once``) or until stopped.

    Runs stop when ``stop`` is set (the command line sets it on SIGINT/SIGTERM; the
    micro-batch under way is finished first), after ``max_seconds``, or once
    ``max_batches`` micro-batches with records are done; a failed
    query's error is raised. ``batch_fn`` wraps or replaces :class:`PipelineBatch`.
    """
    started = time.monotonic()
    batch = PipelineBatch(config)
    query = start_query(spark, settings, subscription, config, once, batch_fn or batch)
    progress = ProgressLog(getattr(batch_fn or batch, "records", None))
    stop = stop or threading.Event()
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
