"""The Kafka-protocol brokers shared by every test folder, started once per session.

``apache_kafka`` (Apache Kafka, one KRaft node: the broker of record) and
``noida`` (noida-db: the embedded default) serve the functional tests and the
Spark tests alike, so a whole run starts each once. ``tests/conftest.py``
imports them; fixtures for one folder stay in that folder.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import pytest

from notify_transport.testing.apache_kafka import ApacheKafka
from notify_transport.testing.brokers import NoidaBroker


@contextlib.contextmanager
def kept_logs_on_failure(request: pytest.FixtureRequest, broker: ApacheKafka) -> Iterator[ApacheKafka]:
    """Start ``broker``; close it at the end, keeping its logs when a test failed meanwhile."""
    failed_before = request.session.testsfailed
    broker.start()
    try:
        yield broker
    finally:
        broker.close(keep_logs=request.session.testsfailed > failed_before)


@pytest.fixture(scope="session")
def apache_kafka(request: pytest.FixtureRequest) -> Iterator[ApacheKafka]:
    """Apache Kafka, one KRaft node (broker and controller): the broker of record."""
    with kept_logs_on_failure(request, ApacheKafka()) as broker:
        yield broker


@pytest.fixture(scope="session")
def noida() -> Iterator[NoidaBroker]:
    """The main broker: noida-db, data kept across restart()."""
    broker = NoidaBroker()
    broker.start()
    yield broker
    broker.close()
