"""Spark test fixtures: ONE local SparkSession, and the session's brokers (tests/session_brokers.py).

The pipeline's tests read Apache Kafka (the broker of record) with the pipeline's
reader of record, Spark's Kafka connector; the truth test of every run shape also
reads noida and uses the ``notify_kafka`` source.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed")
if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.skip("Spark needs Java", allow_module_level=True)

from spark_support import NotificationProducer  # noqa: E402

from notify_transport.testing.brokers import external_kafka  # noqa: E402

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark():
    """The shared local SparkSession (2 cores, small shuffle, no UI), built by the pipeline's code."""
    from notify_transport.pipeline.session import build_session

    # the tests' queries are small: a quick start, as the CLI's runs of a small backlog get
    session = build_session("local[2]", app_name="notify-transport-tests", class_cache=False, quick_start=True)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(request):
    """``host:port`` of the cluster named by ``$NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP``, else of Apache Kafka."""
    external = external_kafka()
    return external.bootstrap if external is not None else request.getfixturevalue("apache_kafka").bootstrap


@pytest.fixture(scope="session")
def connector(spark) -> str:
    """The source the pipeline reads with by default: Spark's Kafka connector, which the set-up fetched."""
    from notify_transport.pipeline.reading import choose_format

    fmt = choose_format(spark, "auto")
    assert fmt == "kafka", "Spark's Kafka connector is not in the jar cache: run scripts/setup.sh"
    return fmt


@pytest.fixture(scope="session")
def producer(kafka_bootstrap):
    notifications = NotificationProducer(kafka_bootstrap)
    yield notifications
    notifications.close()
