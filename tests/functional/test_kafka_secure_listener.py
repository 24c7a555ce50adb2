"""A secured transport URL works end to end on Apache Kafka: SASL/PLAIN over TLS.

The session's broker has a second listener that accepts only authenticated
clients over TLS (``tests/session_brokers.py``). The same URL form operators
write (``kafka://user:password@host/?security_protocol=SASL_SSL&...``)
carries notifications from a Notifier to a listener; a wrong password fails
the listener's start with the client's authentication error, and the password
appears in neither the error nor the log.
"""
from __future__ import annotations

import logging
import math
import time

import pytest
from confluent_kafka import KafkaError

import notify_transport
from notify_transport import Target
from notify_transport.drivers.kafka import producer as producer_module
from notify_transport.drivers.kafka.client_properties import RDKAFKA_LOG
from endpoints import IdRecorder
from kafka_fixtures import listener_start_error
from session_brokers import SECURE_PASSWORD, SECURE_USER
from waits import wait_until

pytestmark = [pytest.mark.functional]

#: librdkafka's own lines, and the producer's.
RDKAFKA = RDKAFKA_LOG.name
PRODUCER = producer_module.LOG.name


def test_notifications_travel_over_sasl_and_tls(apache_kafka, kafka_conf, unique_topic):
    topic = unique_topic("secure")
    url = apache_kafka.secure_url(SECURE_USER)
    assert f"security_protocol={apache_kafka.secure.protocol}" in url
    transport = notify_transport.get_notification_transport(kafka_conf, url)
    endpoint = IdRecorder()
    server = notify_transport.get_notification_listener(transport, [Target(topic=topic)], [endpoint],
                                                        pool="secure")
    try:
        server.start()
        notifier = notify_transport.Notifier(transport, publisher_id="secure.test", topics=[topic],
                                             driver="messaging")
        for i in range(20):
            notifier.info({}, "secure.sent", {"i": i})
        assert wait_until(lambda: len(endpoint.ids) >= 20, timeout=60)
        assert sorted(endpoint.ids) == list(range(20))
    finally:
        server.stop()
        server.wait()
        transport.cleanup()


def test_a_wrong_password_fails_the_start_with_the_cause_and_without_the_secret(
        apache_kafka, kafka_conf, unique_topic, caplog):
    caplog.set_level(logging.DEBUG, logger="notify_transport")
    wrong = "not-" + SECURE_PASSWORD
    transport = notify_transport.get_notification_transport(
        kafka_conf, apache_kafka.secure_url(SECURE_USER, password=wrong, listener_start_timeout=5))
    try:
        text = listener_start_error(transport, unique_topic("refused"), pool="refused")
        # librdkafka's documented code for a failed SASL authentication
        assert "last error: _AUTHENTICATION: " in text, text
        assert wrong not in text and SECURE_PASSWORD not in text
        assert not [r for r in caplog.records if wrong in r.getMessage() or SECURE_PASSWORD in r.getMessage()]
    finally:
        transport.cleanup()


def test_a_login_refused_at_every_reconnect_is_logged_further_and_further_apart(
        apache_kafka, kafka_conf, unique_topic, caplog):
    """librdkafka reports a refused login again at each reconnect (its own copy of each at
    debug, facility FAIL); the producer says it at most once per back-off interval (1, 2,
    4 ... s), each line with the count of those it left out. A fast reconnect makes the
    difference show in seconds: before, every report was a warning line of its own."""
    caplog.set_level(logging.DEBUG, logger="notify_transport.drivers.kafka")
    transport = notify_transport.get_notification_transport(
        kafka_conf, apache_kafka.secure_url(SECURE_USER, password="not-" + SECURE_PASSWORD,
                                            producer_config="reconnect.backoff.ms:20,reconnect.backoff.max.ms:50"))

    def reports() -> list:
        return [r for r in caplog.records if r.name == RDKAFKA and r.levelno == logging.DEBUG
                and r.args and r.args[0] == "FAIL"]
    started = time.monotonic()
    try:
        notifier = notify_transport.Notifier(transport, publisher_id="refused.test", driver="messagingv2",
                                             topics=[unique_topic("refused")])
        notifier.info({}, "refused.sent", {"n": 1})
        assert wait_until(lambda: len(reports()) >= 30, timeout=60), len(reports())
        said = [r.getMessage() for r in caplog.records if r.name == PRODUCER and r.levelno == logging.WARNING]
        elapsed = time.monotonic() - started  # after the lines are taken: the bound is never short
    finally:
        transport.cleanup()
    assert said and all("Kafka producer for" in line for line in said), said
    # per error code (here the refused login and "all brokers down"): a first line, then at most
    # one at the end of each interval, intervals doubling from 1 s (ends at 1, 3, 7, 15 ... s)
    codes = {KafkaError._AUTHENTICATION, KafkaError._ALL_BROKERS_DOWN}
    bound = len(codes) * (1 + math.floor(math.log2(1 + elapsed)))
    assert len(said) <= bound, (len(said), bound, said)
    assert len(said) < len(reports()) / 2, (len(said), len(reports()))
