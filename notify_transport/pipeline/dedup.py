"""Which copy of a duplicated notification the pipeline keeps, in every run shape.

The first copy by broker time (ties by topic, partition, offset) among those read in
the first micro-batch that reads any copy; later copies are duplicates, and one with an
earlier broker time than the archived copy is counted apart (``earlier_duplicates``),
since archived rows are never rewritten. As micro-batches are cut on broker time, one
run, incremental runs and interrupted capped runs keep the same copies, provided broker
times grow with offsets (``LogAppendTime``, or such producers). The kept ids live in a
Parquet file per batch under the checkpoint (``dedup/``), replaced on replay, forgotten
after ``dedup_horizon``, and merged every ``compact_every`` batches.
"""
from __future__ import annotations

import logging
import time
import uuid

from notify_transport.pipeline.sink import BatchParquetWriter
from notify_transport.pipeline.stats_files import batch_number, effective_files

LOG = logging.getLogger(__name__)

#: the order that picks the kept copy: broker time first, then the coordinates
KEEP_ORDER = ("kafka_timestamp", "topic", "partition", "offset")
#: columns of the state files
STATE_COLUMNS = ("message_id", "kafka_timestamp", "seen_at")
#: their types, given when reading the files: inferring them would cost a Spark job per read
STATE_SCHEMA = "message_id string, kafka_timestamp timestamp, seen_at double"
#: column the batch gets: the broker time of the copy kept in an earlier batch, else null
SEEN_TS = "seen_kafka_timestamp"


def first_copies(decoded_df):
    """``decoded_df`` with one notification per ``message_id`` (the first by :data:`KEEP_ORDER`).

    Undecodable records are kept as they are: each is its own record.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy("message_id").orderBy(*[F.col(c).asc_nulls_last() for c in KEEP_ORDER])
    rank = F.when(F.col("error").isNull(), F.row_number().over(order)).otherwise(F.lit(1))
    return decoded_df.withColumn("_copy", rank).filter(F.col("_copy") == 1).drop("_copy")


class SeenIds:
    """The ids kept by earlier micro-batches (see the module docstring), under ``root``."""

    def __init__(self, root: str, horizon_seconds: float, compact_every: int = 100) -> None:
        self.files = BatchParquetWriter(root)
        self.horizon = horizon_seconds
        self.compact_every = compact_every

    def mark(self, decoded_df, batch_id: int, now: float | None = None):
        """``decoded_df`` (first copies) with :data:`SEEN_TS`: the kept copy's broker time when an
        earlier batch kept the id, null for the rest (new ids and undecodable records)."""
        from pyspark.sql import functions as F

        spark = decoded_df.sparkSession
        now = time.time() if now is None else now
        if batch_id and batch_id % self.compact_every == 0:
            self.compact(spark, batch_id, now)
        files = self._before(spark, batch_id)
        if not files:
            return decoded_df.withColumn(SEEN_TS, F.lit(None).cast("timestamp"))
        # each id is in the state once: a batch records only the ids no earlier batch kept
        seen = (spark.read.schema(STATE_SCHEMA).parquet(*files).filter(F.col("seen_at") >= F.lit(now - self.horizon))
                .select("message_id", F.col("kafka_timestamp").alias(SEEN_TS)))
        return decoded_df.join(seen, "message_id", "left").select(*decoded_df.columns, SEEN_TS)

    def save(self, kept_df, batch_id: int, empty: bool, now: float | None = None) -> None:
        """Record the ids batch ``batch_id`` kept (replacing an earlier attempt's file)."""
        from pyspark.sql import functions as F

        now = time.time() if now is None else now
        rows = kept_df.select("message_id", "kafka_timestamp",
                              F.lit(now).cast("double").alias("seen_at")).coalesce(1)
        self.files.write(rows, batch_id, empty=empty)

    def compact(self, spark, before: int, now: float | None = None) -> int:
        """Merge the files of batches before ``before`` into one, without expired ids.

        It is named after batch ``before - 1``: a replay of batch ``before``
        still reads it, and never its own first attempt's file.
        """
        from pyspark.sql import functions as F

        now = time.time() if now is None else now
        files = self._before(spark, before)
        if len(files) < 2:
            return 0
        merged = (spark.read.schema(STATE_SCHEMA).parquet(*files).filter(F.col("seen_at") >= F.lit(now - self.horizon))
                  .select(*STATE_COLUMNS).coalesce(1))
        self.files.write(merged, before - 1, prefix=f"compact-{before - 1:012d}-{uuid.uuid4().hex[:8]}-")
        every = self.files.files(spark)
        keep = set(effective_files(every))
        self.files.delete(spark, [f for f in every if f not in keep])
        LOG.info("Deduplication state: %d files merged into one before batch %d", len(files), before)
        return len(files)

    def _before(self, spark, batch_id: int) -> list[str]:
        return [f for f in effective_files(self.files.files(spark)) if batch_number(f) < batch_id]
