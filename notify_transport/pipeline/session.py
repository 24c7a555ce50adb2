"""A SparkSession set up for the pipeline.

The environment Spark's launcher reads is set here, not by hand: the Python
workers run this interpreter (``PYSPARK_PYTHON``) and a local driver binds to
loopback (``SPARK_LOCAL_IP``). Defaults are sized for a small machine (two
shuffle partitions, no UI); ``extra_conf`` overrides any of them.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Mapping

from notify_transport.pipeline.class_cache import ClassCache

LOG = logging.getLogger(__name__)

DEFAULT_MASTER = "local[2]"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"

#: Option and conf keys whose values Spark must hide in plans, logs and the UI.
REDACTION_REGEX = r"(?i)secret|password|token|access[.]?key|url|jaas|keystore[.]key"


def is_local(master: str) -> bool:
    """True for ``local``, ``local[N]`` and ``local-cluster[...]`` masters."""
    return master.startswith("local")


def prepare_environment(master: str) -> None:
    """Set what the Spark launcher reads from the environment, before the JVM starts.

    A local master runs its Python workers on this machine, so they must use
    this interpreter; on a cluster the executors' own setting is kept when the
    user gave one.
    """
    if is_local(master):
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def default_conf(master: str, shuffle_partitions: int = 2) -> dict[str, str]:
    """Spark settings of the pipeline; small enough for two cores."""
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
        # The micro-batch is cached for one use per output: compressing it costs more than it saves.
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # Spark's stop path matches a long message with a recursive regex; give it room.
        # C1 only: the JVM starts about 2 s sooner; its hot paths are Parquet encoding and shuffle I/O,
        # where C2 gains little over the few seconds a scheduled run lasts.
        JAVA_OPTIONS: "-Xss16m -XX:TieredStopAtLevel=1",
    }
    if is_local(master):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf


def build_session(master: str | None = None, app_name: str = "notify-transport-pipeline",
                  shuffle_partitions: int = 2, extra_conf: Mapping[str, str] | None = None,
                  log_level: str = "WARN", class_cache: bool = True):
    """Return the pipeline's SparkSession (reusing a running one) with ``notify_kafka`` registered.

    ``class_cache``: a local driver JVM uses (or writes) the class-data-sharing
    archive of :mod:`.class_cache`, unless ``extra_conf`` sets the driver's Java options.
    """
    from pyspark.sql import SparkSession

    from notify_transport.pipeline.source import NotifyKafkaDataSource

    master = master or DEFAULT_MASTER
    prepare_environment(master)
    conf = {**default_conf(master, shuffle_partitions), **(extra_conf or {})}
    cache = None
    if class_cache and is_local(master) and JAVA_OPTIONS not in (extra_conf or {}) \
            and SparkSession.getActiveSession() is None:
        cache = ClassCache()
        conf[JAVA_OPTIONS] = f"{conf[JAVA_OPTIONS]} {cache.java_options()}"
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if cache is not None:
        # py4j gateway: the JVM's own pid, so a later run knows when its archive is complete
        jvm = spark.sparkContext._jvm  # noqa: SLF001
        if jvm is not None:
            cache.started(jvm.java.lang.ProcessHandle.current().pid())
    spark.sparkContext.setLogLevel(log_level)
    spark.dataSource.register(NotifyKafkaDataSource)
    LOG.info("Spark %s session on %s", spark.version, spark.sparkContext.master)
    return spark
