"""Which of the connector's cached jars join ``spark.jars`` (no Spark, no Maven: a made-up cache)."""
from __future__ import annotations

from pathlib import Path

import pytest

from notify_transport.jvm.artifacts import MANIFEST
from notify_transport.pipeline import connector

CONNECTOR_JARS = ["commons-pool2-2.13.1.jar", "kafka-clients-3.9.2.jar", "lz4-java-1.10.1.jar",
                  "scala-library-2.13.15.jar", "spark-sql-kafka-0-10_2.13-4.2.0.jar",
                  "spark-tags_2.13-4.2.0.jar", "spark-token-provider-kafka-0-10_2.13-4.2.0.jar"]
SPARK_JARS = ["lz4-java-1.11.0.jar", "scala-library-2.13.18.jar", "spark-tags_2.13-4.2.0.jar",
              "commons-pool-1.5.4.jar"]


@pytest.mark.parametrize("name,artifact", [
    ("kafka-clients-3.9.2.jar", "kafka-clients"),
    ("spark-sql-kafka-0-10_2.13-4.2.0.jar", "spark-sql-kafka-0-10_2.13"),
    ("scala-parallel-collections_2.13-1.2.0.jar", "scala-parallel-collections_2.13"),
    ("snappy-java-1.1.10.8.jar", "snappy-java"),
    ("commons-pool-1.5.4.jar", "commons-pool"),
    ("jsr305-3.0.0.jar", "jsr305"),
    ("unversioned.jar", "unversioned"),
])
def test_artifact_name_drops_the_version(name, artifact):
    assert connector.artifact_name(name) == artifact


@pytest.fixture
def made_up(tmp_path, monkeypatch) -> Path:
    """A cache entry of the connector for Spark 4.2.0, and a Spark jars folder beside it."""
    monkeypatch.setenv("NOTIFY_TRANSPORT_JVM_CACHE", str(tmp_path / "cache"))
    entry = tmp_path / "cache" / connector.artifacts("4.2.0").key()
    (entry / "jars").mkdir(parents=True)
    for name in CONNECTOR_JARS:
        (entry / "jars" / name).write_text("jar")
    (entry / MANIFEST).write_text("\n".join(CONNECTOR_JARS) + "\n")
    spark_jars = tmp_path / "spark-jars"
    spark_jars.mkdir()
    for name in SPARK_JARS:
        (spark_jars / name).write_text("jar")
    monkeypatch.setattr(connector, "spark_jars_dir", lambda: spark_jars)
    monkeypatch.setattr(connector, "pyspark_version", lambda: "4.2.0")
    return entry


def test_only_what_spark_does_not_ship_joins_the_session(made_up):
    jars = connector.connector_jars()
    assert [jar.name for jar in jars] == ["commons-pool2-2.13.1.jar", "kafka-clients-3.9.2.jar",
                                          "spark-sql-kafka-0-10_2.13-4.2.0.jar",
                                          "spark-token-provider-kafka-0-10_2.13-4.2.0.jar"]
    assert all(jar.parent == made_up / "jars" for jar in jars)


def test_session_conf_adds_the_connector_to_the_users_jars_once(made_up):
    conf = connector.session_conf("/opt/mine.jar")
    listed = conf["spark.jars"].split(",")
    assert listed[0] == "/opt/mine.jar" and len(listed) == 5
    assert connector.session_conf(conf["spark.jars"]) == conf


def test_another_spark_version_has_no_connector_until_fetched(made_up, monkeypatch):
    monkeypatch.setattr(connector, "pyspark_version", lambda: "4.1.1")
    assert connector.connector_jars() is None
    assert connector.session_conf() == {}
