"""The deduplication state read by every micro-batch: many earlier files cost no Spark job of their own."""
from __future__ import annotations

import datetime
import time

import pyarrow as pa
import pyarrow.parquet as pq

from notify_transport.pipeline import dedup
from notify_transport.pipeline.sink import batch_prefix
from notify_transport.pipeline.session import DRIVER_LISTED_PATHS

#: more than Spark's own threshold (32) for listing a read's paths with a job of its own
EARLIER_BATCHES = 40


def _state_file(root, batch_id: int, now: float) -> None:
    """What :meth:`dedup.SeenIds.save` leaves for a batch that kept one id, ``id-<batch_id>``."""
    kept_at = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=batch_id)
    table = pa.table({"message_id": [f"id-{batch_id}"],
                      "kafka_timestamp": pa.array([kept_at], pa.timestamp("us", tz="UTC")),
                      "seen_at": [now]})
    pq.write_table(table, root / f"{batch_prefix(batch_id)}part-00000.parquet")


def test_a_batch_reads_forty_earlier_state_files_without_a_listing_job(spark, tmp_path):
    assert EARLIER_BATCHES < DRIVER_LISTED_PATHS
    now = time.time()
    for batch_id in range(EARLIER_BATCHES):
        _state_file(tmp_path, batch_id, now)
    seen = dedup.SeenIds(str(tmp_path), horizon_seconds=3600)
    batch = spark.createDataFrame([("id-7", "t", 0, 1), ("id-39", "t", 0, 2), ("new", "t", 0, 3)],
                                  "message_id string, topic string, partition int, offset long")
    context = spark.sparkContext
    group = f"dedup-state-{time.monotonic_ns()}"
    context.setJobGroup(group, "reading the deduplication state")
    try:
        marked = seen.mark(batch, batch_id=EARLIER_BATCHES, now=now)
        jobs_to_plan = list(context.statusTracker().getJobIdsForGroup(group))
        rows = {row["message_id"]: row[dedup.SEEN_TS] for row in marked.collect()}
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert jobs_to_plan == []  # Spark's default threshold lists the 40 paths with a job of 40 tasks
    assert rows["new"] is None
    assert rows["id-7"] is not None and rows["id-39"] is not None and rows["id-7"] < rows["id-39"]
