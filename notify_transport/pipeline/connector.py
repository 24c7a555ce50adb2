"""Spark's own Kafka connector (``spark-sql-kafka-0-10``): its jars, and how a session gets them.

``notify-transport pipeline setup`` (:func:`set_up`) fetches the release matching the
installed PySpark through :mod:`notify_transport.jvm`; :func:`session_conf` names the
cached jars in ``spark.jars``, which reach the driver and a cluster's executors alike.
Nothing here downloads: without a fetch the pipeline reads with ``notify_kafka``.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Iterable

from notify_transport.exceptions import ConfigurationError
from notify_transport.jvm.artifacts import ArtifactSet, JvmArtifactsError, classpath, fetch

LOG = logging.getLogger(__name__)

#: The pom of :mod:`notify_transport.jvm` listing the connector.
POM = "spark-kafka"

#: ``name-1.2.3.jar`` -> ``name`` (the version is the last dash followed by digits and a dot).
_ARTIFACT = re.compile(r"(?P<name>.+)-\d+\.\d+[^/]*\.jar$")


#: The command that sets the connector (and the JVM decoder) up; every "not set up" error names it.
SETUP_COMMAND = "notify-transport pipeline setup"


class ConnectorNotSetUp(ConfigurationError):
    """Spark's Kafka connector is not in the jar cache for the installed PySpark (exit status 2)."""

    def __init__(self, spark_version: str) -> None:
        super().__init__(f"Spark's Kafka connector (spark-sql-kafka-0-10) for Spark {spark_version} is "
                         "not set up")
        self.next_step = f"run '{SETUP_COMMAND}', or read with --source notify_kafka"


def set_up(spark_version: str | None = None) -> list[Path]:
    """Fetch the connector's jars for ``spark_version`` (default: the installed PySpark's) into the
    jar cache with Maven, once; the jars a session adds to Spark's."""
    fetch(artifacts(spark_version))
    jars = connector_jars(spark_version)
    assert jars is not None  # just fetched
    return jars


def pyspark_version() -> str:
    """The installed PySpark's version, which the connector's must equal."""
    import pyspark

    return pyspark.__version__


def artifacts(spark_version: str | None = None) -> ArtifactSet:
    """The connector's jar set for ``spark_version`` (default: the installed PySpark's)."""
    return ArtifactSet(POM, {"spark.version": spark_version or pyspark_version()})


def artifact_name(jar: Path | str) -> str:
    """The artifact a jar file holds, without its version (``kafka-clients-3.9.2.jar`` -> ``kafka-clients``)."""
    name = Path(jar).name
    match = _ARTIFACT.match(name)
    return match.group("name") if match else name.removesuffix(".jar")


def spark_jars_dir() -> Path:
    """The folder of jars PySpark ships (Spark's own classpath)."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def connector_jars(spark_version: str | None = None) -> list[Path] | None:
    """The cached jars the connector needs beyond what Spark ships; None when they were never fetched.

    Spark's own copy of a library (Scala, lz4, snappy, slf4j, Hadoop's client)
    is left to Spark: a second copy at another version on the same classpath
    is a conflict waiting to happen.
    """
    try:
        jars = classpath(artifacts(spark_version))
    except JvmArtifactsError:
        return None
    shipped = {artifact_name(jar) for jar in spark_jars_dir().glob("*.jar")}
    return [jar for jar in jars if artifact_name(jar) not in shipped]


def session_conf(existing: str | None = None) -> dict[str, str]:
    """``{"spark.jars": ...}`` adding the connector to ``existing`` jars; empty when not fetched."""
    jars = connector_jars()
    if not jars:
        LOG.debug("Spark's Kafka connector is not in the jar cache: the notify_kafka source reads")
        return {}
    return with_jars(existing, jars)


def with_jars(existing: str | None, jars: Iterable[Path | str]) -> dict[str, str]:
    """``{"spark.jars": ...}``: the comma-separated ``existing`` list, then each of ``jars`` not yet in it."""
    listed = [j for j in (existing or "").split(",") if j]
    return {"spark.jars": ",".join(listed + [str(j) for j in jars if str(j) not in listed])}
