"""Lateness judged against each Kafka partition's own progress.

A notification is late when it is more than ``lateness`` behind the newest timestamp
before it in its own partition, whatever batch that was read in: one watermark over all
partitions would drop on-time records of the partitions a capped batch advanced least.
The newest timestamp per partition is a small JSON file per batch beside the checkpoint,
written before the batch commits, so a replayed batch judges as its first attempt did.
"""
from __future__ import annotations

import json
import logging
import re

from notify_transport.pipeline import hadoop_fs

LOG = logging.getLogger(__name__)

#: topic -> partition -> newest notification timestamp (microseconds since the epoch)
Progress = dict[str, dict[str, int]]
KEEP_FILES = 5
_NAME = re.compile(r"^progress-(\d{12})\.json$")


class PartitionProgress:
    """The per-partition progress files under ``root`` (a folder or URI)."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")

    def before(self, spark, batch_id: int) -> Progress:
        """The progress after the newest batch before ``batch_id`` (empty at the start)."""
        fs = hadoop_fs.FileSystem(spark, self.root)
        older = sorted(n for n, _ in self._files(fs) if n < batch_id)
        if not older:
            return {}
        return json.loads(fs.read_text(self._name(older[-1])))

    def save(self, spark, batch_id: int, progress: Progress) -> None:
        """Write the progress after ``batch_id``; drop files older than the last :data:`KEEP_FILES`."""
        fs = hadoop_fs.FileSystem(spark, self.root)
        fs.write_text(self._name(batch_id), json.dumps(progress, sort_keys=True))
        numbers = sorted(n for n, _ in self._files(fs))
        for number in numbers[:-KEEP_FILES]:
            if number < batch_id:
                fs.delete(self._name(number))

    def _name(self, batch_id: int) -> str:
        return f"{self.root}/progress-{batch_id:012d}.json"

    def _files(self, fs: "hadoop_fs.FileSystem") -> list[tuple[int, str]]:
        out = []
        for path in fs.list(self.root):
            match = _NAME.match(path.rsplit("/", 1)[-1])
            if match:
                out.append((int(match.group(1)), path))
        return out


def merge(carried: Progress, newest: dict[tuple[str, int], int]) -> Progress:
    """``carried`` advanced by a batch's newest timestamp per partition."""
    out = {topic: dict(parts) for topic, parts in carried.items()}
    for (topic, partition), micros in newest.items():
        parts = out.setdefault(topic, {})
        parts[str(partition)] = max(micros, parts.get(str(partition), micros))
    return out


def may_have_late(carried: Progress, bounds: dict[tuple[str, int], tuple[int, int]], lateness_us: int) -> bool:
    """Whether any record of the batch can be late, from each partition's (oldest, newest) timestamp.

    A record's reference is at most max(carried, newest in the batch), so a
    partition whose oldest record is within ``lateness`` of that holds no
    late record; the per-record check (a sort) is then skipped.
    """
    for (topic, partition), (oldest, newest) in bounds.items():
        before = carried.get(topic, {}).get(str(partition))
        reference = newest if before is None else max(before, newest)
        if oldest < reference - lateness_us:
            return True
    return False


def flag_late(notifications_df, carried: Progress, lateness_us: int):
    """``notifications_df`` with a boolean ``late`` column (see the module docstring)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    micros = F.unix_micros(F.col("timestamp"))
    earlier = Window.partitionBy("topic", "partition").orderBy("offset").rowsBetween(
        Window.unboundedPreceding, -1)
    reference = F.max(micros).over(earlier)
    pairs = [F.lit(x) for topic, parts in carried.items() for partition, us in parts.items()
             for x in (f"{topic}\x00{partition}", int(us))]
    if pairs:
        before = F.create_map(*pairs)[F.concat_ws("\x00", F.col("topic"), F.col("partition").cast("string"))]
        reference = F.greatest(reference, before)
    return notifications_df.withColumn("late", F.coalesce(micros < reference - F.lit(lateness_us), F.lit(False)))
