"""The pipeline's decoder in the JVM: a Java UDF of this project, its jar and its registration.

``notifytransport.spark.DecodeNotification`` (``notify_transport/jvm/src/decoder``)
decodes strictly with Jackson and answers null where it cannot vouch for the Python
reference's row, which :mod:`.decode` then hands to Python. It is compiled against the
installed PySpark's jars by :mod:`notify_transport.jvm.build` and joins ``spark.jars``.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from notify_transport.jvm.artifacts import JvmArtifactsError
from notify_transport.jvm.build import JavaSources, build, jars_named
from notify_transport.pipeline.connector import spark_jars_dir, with_jars

LOG = logging.getLogger(__name__)

#: The sources' folder under ``notify_transport/jvm/src``.
SOURCES = "decoder"
#: The UDF's class, and the name it is registered under in a session.
CLASS = "notifytransport.spark.DecodeNotification"
FUNCTION = "notify_transport_decode"
#: The fields of the UDF's struct, in the class's order; a null struct leaves the record to Python.
FIELDS = ("message_id", "publisher_id", "event_type", "priority", "payload", "timestamp", "request_id",
          "envelope")
#: The PySpark jars the class compiles against.
COMPILE_JARS = ("spark-sql-api_", "jackson-core-")


def sources() -> JavaSources:
    """The decoder's sources with the installed PySpark's jars to compile against."""
    return JavaSources(SOURCES, jars_named(spark_jars_dir(), COMPILE_JARS))


def decoder_jar() -> Path | None:
    """The decoder's jar, compiled the first time; None (and a warning) when it cannot be built."""
    try:
        return build(sources())
    except JvmArtifactsError as exc:
        LOG.warning("The JVM decoder is not available, records are decoded in Python: %s", exc)
        return None


def session_conf(existing: str | None = None) -> dict[str, str]:
    """``{"spark.jars": ...}`` adding the decoder's jar to ``existing`` jars; empty without a jar."""
    jar = decoder_jar()
    if jar is None:
        return {}
    return with_jars(existing, [jar])


def register(spark) -> bool:
    """Register the UDF in ``spark`` as :data:`FUNCTION`; False when its class is not on the classpath."""
    from pyspark.sql.types import StringType, StructField, StructType

    result = StructType([StructField(name, StringType()) for name in FIELDS])
    try:
        spark.udf.registerJavaFunction(FUNCTION, CLASS, result)
    except Exception as exc:  # noqa: BLE001 - py4j or Spark's analysis error, whichever version raises
        LOG.debug("The JVM decoder's class is not on this session's classpath: %s", exc)
        return False
    return True


def main() -> int:
    """``python -m notify_transport.pipeline.jvm_decoder``: build the jar (the set-up does), print its path."""
    try:
        jar = build(sources())
    except JvmArtifactsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
