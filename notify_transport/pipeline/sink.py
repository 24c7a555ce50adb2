"""Idempotent Parquet writes of a micro-batch, keyed on its batch id.

Spark replays an unfinished micro-batch with the same id and offsets; every file of
batch ``N`` is named ``batch-N-...`` and writing batch ``N`` first deletes such files,
so a replay replaces what the first attempt wrote. Files are written under ``_staging/``
and renamed into place, so readers see whole files. Hadoop's FileSystem API does the
file work: local folders, HDFS and object stores alike.
"""
from __future__ import annotations

import logging
from typing import Sequence

from notify_transport.pipeline.hadoop_fs import filesystem as _filesystem

LOG = logging.getLogger(__name__)

STAGING = "_staging"


def batch_prefix(batch_id: int) -> str:
    """File name prefix of a micro-batch's files; zero-padded so names sort by batch."""
    return f"batch-{batch_id:012d}-"


class BatchParquetWriter:
    """Writes each micro-batch's rows under ``root``, partitioned by ``partition_by``."""

    def __init__(self, root: str, partition_by: Sequence[str] = ()) -> None:
        self.root = root.rstrip("/")
        self.partition_by = tuple(partition_by)

    def write(self, df, batch_id: int, empty: bool = False, prefix: str | None = None) -> list[str]:
        """Replace batch ``batch_id``'s files by ``df``'s rows; return the paths of the new files.

        ``empty`` says ``df`` has no rows: only the files of an earlier attempt
        are removed. ``prefix`` names the files otherwise than ``batch-N-``.
        """
        fs, path = _filesystem(df.sparkSession, self.root)
        prefix = prefix or batch_prefix(batch_id)
        root = fs.makeQualified(path(self.root))
        staging = path(root, f"{STAGING}/{prefix.rstrip('-')}")
        removed = self._delete_batch(fs, path, root, prefix)
        fs.delete(staging, True)
        if removed:
            LOG.info("Batch %d was written before (replay after a restart): %d old files replaced",
                     batch_id, removed)
        if empty:
            return []
        df.write.mode("overwrite").partitionBy(*self.partition_by).parquet(staging.toString())
        staging_dir = fs.makeQualified(staging).toUri().getPath().rstrip("/")
        moved: list[str] = []
        for source in _files_under(fs, staging):
            name = source.getName()
            if not name.endswith(".parquet"):
                continue
            relative = source.getParent().toUri().getPath()[len(staging_dir):].strip("/")
            target_dir = path(root, relative) if relative else root
            fs.mkdirs(target_dir)
            target = path(target_dir, prefix + name)
            if not fs.rename(source, target):
                raise OSError(f"Could not move {source} into {target_dir}")
            moved.append(target.toString())
        fs.delete(staging, True)
        return moved

    def read(self, spark, files: Sequence[str], schema):
        """The rows of ``files`` (written by :meth:`write`) with the columns of ``schema``.

        Partition columns come from the folder names, as strings (never
        inferred as dates or numbers); they need not be in ``schema``.
        """
        from pyspark.sql.types import StringType, StructField, StructType

        fields = [*schema.fields, *[StructField(c, StringType()) for c in self.partition_by
                                    if c not in schema.fieldNames()]]
        return (spark.read.schema(StructType(fields)).option("basePath", self.root).parquet(*files)
                .select(*schema.fieldNames()))

    def files(self, spark) -> list[str]:
        """Paths of the data files written so far (not staging)."""
        fs, path = _filesystem(spark, self.root)
        pattern = "/".join(["*"] * len(self.partition_by) + ["*.parquet"])
        return [s.getPath().toString() for s in (fs.globStatus(path(path(self.root), pattern)) or [])]

    def delete(self, spark, files: Sequence[str]) -> None:
        fs, path = _filesystem(spark, self.root)
        for name in files:
            fs.delete(path(name), False)

    def _delete_batch(self, fs, path, root, prefix: str) -> int:
        pattern = "/".join(["*"] * len(self.partition_by) + [prefix + "*"])
        matches = fs.globStatus(path(root, pattern)) or []
        for status in matches:
            fs.delete(status.getPath(), False)
        return len(matches)


def _files_under(fs, folder):
    """Paths of the files under ``folder``, at any depth.

    Walks with ``listStatus`` rather than ``listFiles``: the latter's located
    statuses carry permissions and owners, which Hadoop's local file system
    (without its native library) reads by running ``ls`` once per file and folder.
    """
    for status in fs.listStatus(folder):
        if status.isDirectory():
            yield from _files_under(fs, status.getPath())
        else:
            yield status.getPath()
