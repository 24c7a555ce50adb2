"""Files through Hadoop's FileSystem API, so outputs and state may be local, HDFS or an object store."""
from __future__ import annotations


def filesystem(spark, root: str):
    """Hadoop FileSystem of ``root`` and a Path constructor, through the session's JVM."""
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - py4j gateway: the only way to Hadoop's API
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()  # noqa: SLF001
    path_class = jvm.org.apache.hadoop.fs.Path

    def path(parent, child: str | None = None):
        if child is None:
            return path_class(parent)
        return path_class(parent, child)

    return path_class(root).getFileSystem(hadoop_conf), path


class FileSystem:
    """The few small-file operations the pipeline's state needs."""

    def __init__(self, spark, root: str) -> None:
        self._jvm = spark.sparkContext._jvm  # noqa: SLF001
        self.fs, self.path = filesystem(spark, root)

    def list(self, folder: str) -> list[str]:
        """Paths of the files directly in ``folder`` (none when it does not exist)."""
        directory = self.path(folder)
        if not self.fs.exists(directory):
            return []
        return [s.getPath().toString() for s in self.fs.listStatus(directory) if s.isFile()]

    def read_text(self, name: str) -> str:
        stream = self.fs.open(self.path(name))
        try:
            return self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()

    def write_text(self, name: str, text: str) -> None:
        """Write ``text`` whole: to a temporary name first, then renamed over ``name``."""
        target = self.path(name)
        temporary = self.path(name + ".tmp")
        stream = self.fs.create(temporary, True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()
        self.fs.delete(target, False)
        if not self.fs.rename(temporary, target):
            raise OSError(f"Could not rename {temporary} to {target}")

    def delete(self, name: str) -> None:
        self.fs.delete(self.path(name), False)
