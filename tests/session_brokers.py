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

from notify_transport.testing.apache_kafka import ApacheKafka, SecureListener
from notify_transport.testing.brokers import NoidaBroker
from notify_transport.testing.tls import self_signed_certificate


@contextlib.contextmanager
def kept_logs_on_failure(request: pytest.FixtureRequest, broker: ApacheKafka) -> Iterator[ApacheKafka]:
    """Start ``broker``; close it at the end, keeping its logs when a test failed meanwhile."""
    failed_before = request.session.testsfailed
    broker.start()
    try:
        yield broker
    finally:
        broker.close(keep_logs=request.session.testsfailed > failed_before)


#: The account of the secure listener; the password holds a quote and a backslash, which the
#: broker's properties file, the Java client's JAAS line and the URL each spell their own way.
SECURE_USER, SECURE_PASSWORD = "alice", 'pa"ss\\word-1'


@pytest.fixture(scope="session")
def apache_kafka(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """Apache Kafka, one KRaft node (broker and controller): the broker of record.

    Besides its plain listener it has a secure one (:meth:`ApacheKafka.secure_url`):
    SASL/PLAIN over TLS with a throwaway certificate (without TLS when openssl
    cannot make one), for the tests that a secured transport URL works end to end.
    """
    made = self_signed_certificate(tmp_path_factory.mktemp("kafka-tls"))
    key, certificate = made if made is not None else (None, None)
    secure = SecureListener(users={SECURE_USER: SECURE_PASSWORD}, key=key, certificate=certificate)
    with kept_logs_on_failure(request, ApacheKafka(secure=secure)) as broker:
        yield broker


@pytest.fixture(scope="session")
def noida() -> Iterator[NoidaBroker]:
    """The main broker: noida-db, data kept across restart()."""
    broker = NoidaBroker()
    broker.start()
    yield broker
    broker.close()
