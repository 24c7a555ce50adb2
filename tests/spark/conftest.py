"""Spark test fixtures: ONE local SparkSession and one Kafka-protocol broker per test session."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed")
if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.skip("Spark needs Java", allow_module_level=True)

from spark_support import NotificationProducer, kafka_broker  # noqa: E402

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark():
    """The shared local SparkSession (2 cores, small shuffle, no UI), built by the pipeline's code."""
    from notify_transport.pipeline.session import build_session

    session = build_session("local[2]", app_name="notify-transport-tests", class_cache=False)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap():
    with kafka_broker() as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def producer(kafka_bootstrap):
    notifications = NotificationProducer(kafka_bootstrap)
    yield notifications
    notifications.close()
