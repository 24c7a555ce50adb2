"""A SparkSession set up for the pipeline.

The environment Spark's launcher reads is set here, not by hand: the Python
workers run this interpreter (``PYSPARK_PYTHON``) and a local driver binds to
loopback (``SPARK_LOCAL_IP``). Defaults are sized for a small machine (two
shuffle partitions, no UI); ``extra_conf`` overrides any of them.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Iterator, Mapping

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from notify_transport import secrets, user_cache
from notify_transport.pipeline import spark_home
from notify_transport.pipeline.class_cache import ClassCache

LOG = logging.getLogger(__name__)

DEFAULT_MASTER = "local[2]"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"

#: Option and conf keys whose values Spark must hide in plans, logs and the UI.
REDACTION_REGEX = secrets.name_pattern()


def is_local(master: str) -> bool:
    """True for ``local``, ``local[N]`` and ``local-cluster[...]`` masters."""
    return master.startswith("local")


def prepare_environment(master: str) -> None:
    """Set what the Spark launcher reads from the environment, before the JVM starts.

    A local master runs its Python workers on this machine, so they must use
    this interpreter, and, unless ``SPARK_HOME`` is set, Spark runs from the
    overlay of :mod:`.spark_home` so that they import PySpark compiled; on a
    cluster the executors' own setting is kept when the user gave one.
    """
    if is_local(master):
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        if "SPARK_HOME" not in os.environ:  # a Spark home the user chose is kept
            home = spark_home.prepared()
            if home is not None:
                os.environ["SPARK_HOME"] = str(home)
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


#: The driver JVM's option for a run known to be small: C1 only. The JVM starts sooner (about 2 s on
#: the development machine), but its compiled code runs two to three times slower than C2's: the
#: connector's read, the JVM decoder, Parquet encoding (the pipeline docs give the figures).
QUICK_START = "-XX:TieredStopAtLevel=1"


#: Most paths one read lists in the driver rather than in a Spark job (Spark's default is 32).
DRIVER_LISTED_PATHS = 4096


def default_conf(master: str, shuffle_partitions: int = 2, quick_start: bool = False) -> dict[str, str]:
    """Spark settings of the pipeline; small enough for two cores. ``quick_start``: see :data:`QUICK_START`."""
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(max(2, shuffle_partitions)),
        "spark.sql.session.timeZone": "UTC",
        # Parquet timestamps as UTC-adjusted TIMESTAMP_MICROS (timezone-aware to every reader), not INT96.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.driver.memory": "1g",
        "spark.redaction.regex": REDACTION_REGEX,
        "spark.sql.redaction.options.regex": REDACTION_REGEX,
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.stopTimeout": "30s",
        # No extra empty micro-batch after each one just to expire deduplication state: the state
        # expires with the next batch that has data, and a run saves a batch's fixed cost.
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        # No _SUCCESS marker: the pipeline moves the Parquet files out of each write's staging folder
        # itself; the marker is two more files per write (on a local folder without Hadoop's native
        # library, a chmod process each).
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        # The pipeline reads files it names itself (the deduplication state, a batch's rows, the
        # statistics): past 32 paths Spark would list them with a Spark job of one task per path,
        # run before every micro-batch once the state has that many files. Listed by the driver.
        "spark.sql.sources.parallelPartitionDiscovery.threshold": str(DRIVER_LISTED_PATHS),
        # Only a batch's few partial counts are ever cached (the late count reads them twice):
        # compressing them costs more than it saves.
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # Spark's stop path matches a long message with a recursive regex; give it room.
        JAVA_OPTIONS: "-Xss16m" + (f" {QUICK_START}" if quick_start else ""),
    }
    if is_local(master):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf


#: A run with at most this many records to read runs its plans interpreted (:func:`run_conf`).
SMALL_RUN_RECORDS = 100_000


def small_run(backlog: int | None) -> bool:
    """Whether a run will read few enough records that starting sooner beats running faster."""
    return backlog is not None and backlog <= SMALL_RUN_RECORDS


def read_tasks(spark) -> int:
    """One read task per core Spark gives a stage by default (either source, and the warm-up
    that starts their Python workers)."""
    return max(1, spark.sparkContext.defaultParallelism)


def run_conf(backlog: int | None) -> dict[str, str]:
    """Settings for a run known to read ``backlog`` records (None: not known, Spark's defaults).

    Whole-stage code generation compiles each stage of each plan to a Java
    class (Janino) the first time it runs: worth it over many rows, not in a
    scheduled run of a few thousand records, where compiling the micro-batch's
    plans costs more than interpreting them (the pipeline docs give the figures).
    """
    if small_run(backlog):
        return {"spark.sql.codegen.wholeStage": "false"}
    return {}


def jvm_log_path() -> Path:
    """Where a command's driver JVM writes its own stderr when the user did not ask for it (no ``--debug``)."""
    return user_cache.root() / "logs" / "spark-driver.log"


@contextlib.contextmanager
def stderr_of_children(path: Path | None) -> Iterator[None]:
    """Processes started inside the block write their standard error to ``path`` (None: unchanged).

    The driver JVM is such a process, and its own lines (the JVM's warnings,
    log4j's start-up notes, Spark's and the Python workers' messages) follow
    it there for its whole life; the file descriptor is redirected, so lines
    printed by native code go there too. This process's stderr is back as it
    was once the block ends.
    """
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    saved = os.dup(2)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def build_session(master: str | None = None, app_name: str = "notify-transport-pipeline",
                  shuffle_partitions: int = 2, extra_conf: Mapping[str, str] | None = None,
                  log_level: str = "WARN", class_cache: bool = True, kafka_connector: bool = True,
                  jvm_decoder: bool = True, quick_start: bool = False, jvm_log: Path | None = None):
    """Return the pipeline's SparkSession (reusing a running one) with ``notify_kafka`` registered.

    ``class_cache`` uses the CDS archive of :mod:`.class_cache` (unless ``extra_conf`` sets
    the driver's Java options); ``kafka_connector`` and ``jvm_decoder`` add their jars to
    ``spark.jars`` when present; ``quick_start`` compiles with C1 only (:data:`QUICK_START`),
    for a small run; ``jvm_log`` takes the driver JVM's stderr when this call starts it.
    """
    from pyspark.sql import SparkSession

    from notify_transport.pipeline import connector
    from notify_transport.pipeline.source import NotifyKafkaDataSource

    master = master or DEFAULT_MASTER
    prepare_environment(master)
    conf = {**default_conf(master, shuffle_partitions, quick_start), **(extra_conf or {})}
    if kafka_connector:
        conf.update(connector.session_conf(conf.get("spark.jars")))
    if jvm_decoder:
        from notify_transport.pipeline import jvm_decoder as decoder_jar

        conf.update(decoder_jar.session_conf(conf.get("spark.jars")))
    cache = None
    if class_cache and is_local(master) and JAVA_OPTIONS not in (extra_conf or {}) \
            and SparkSession.getActiveSession() is None:
        cache = ClassCache()
        conf[JAVA_OPTIONS] = f"{conf[JAVA_OPTIONS]} {cache.java_options()}"
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    with stderr_of_children(jvm_log):
        spark = builder.getOrCreate()
    if cache is not None:
        # py4j gateway: the JVM's own pid, so a later run knows when its archive is complete
        jvm = spark.sparkContext._jvm  # noqa: SLF001
        if jvm is not None:
            cache.started(jvm.java.lang.ProcessHandle.current().pid())
    spark.sparkContext.setLogLevel(log_level)
    spark.dataSource.register(NotifyKafkaDataSource)
    spark.dataSource.register(WarmUpDataSource)
    LOG.info("Spark %s session on %s", spark.version, spark.sparkContext.master)
    return spark


# -- Python processes started ahead ------------------------------------------------------------

WARM_UP_FORMAT = "notify_warm_up"


def _import_reading_modules() -> None:
    """What a process reading ``notify_kafka`` imports: the source, its decoder, Arrow."""
    import pyarrow  # noqa: F401

    from notify_transport.pipeline import decode, source  # noqa: F401


class WarmUpDataSource(DataSource):
    """A batch source of no rows that has Spark start the Python processes of a ``notify_kafka`` read.

    Spark starts a Python process the first time it needs one: the data
    source's planner (schema, then input partitions) and the workers of the
    read tasks, each importing the source's modules. Reading this source
    starts the same processes (``readerTasks`` workers) and imports those
    modules; with ``spark.python.worker.reuse`` they stay, idle, for the
    pipeline's query.
    """

    @classmethod
    def name(cls) -> str:
        return WARM_UP_FORMAT

    def schema(self) -> str:
        _import_reading_modules()
        return "ready int"

    def reader(self, schema) -> "_WarmUpReader":
        return _WarmUpReader(int(self.options.get("readerTasks", "2")))


class _WarmUpReader(DataSourceReader):
    def __init__(self, tasks: int) -> None:
        self.tasks = max(1, tasks)

    def partitions(self) -> list[InputPartition]:
        _import_reading_modules()
        return [InputPartition(task) for task in range(self.tasks)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        _import_reading_modules()
        return iter(())


def _imported_batches(batches: Iterator) -> Iterator:
    """``mapInArrow`` function of the warm-up: a worker that imported the decoder, no rows."""
    _import_reading_modules()
    for _ in batches:
        pass
    return iter(())


def warm_up(spark, reads_in_python: bool = True) -> threading.Thread:
    """Start Spark's Python processes for the run's read now, in a background thread.

    Otherwise the query starts them one after the other while the second core idles. A
    ``notify_kafka`` read needs its planner and readers; the connector only the decoder's
    Arrow UDF workers. Failures are only logged (the query starts what it needs); join the
    thread before stopping the session.
    """
    count = read_tasks(spark)
    tasks = str(count)

    def run() -> None:
        try:
            if reads_in_python:
                spark.read.format(WARM_UP_FORMAT).option("readerTasks", tasks).load().collect()
            else:
                spark.range(0, count, 1, count).mapInArrow(_imported_batches, "id long").collect()
        except Exception as exc:  # noqa: BLE001  (best effort: the query does the same work itself)
            LOG.debug("Warming up Python workers failed: %s", exc)

    thread = threading.Thread(target=run, name="spark-python-warm-up", daemon=True)
    thread.start()
    return thread
