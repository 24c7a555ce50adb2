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

import pytest

import notify_transport
from notify_transport import Target
from endpoints import IdRecorder
from kafka_fixtures import listener_start_error
from session_brokers import SECURE_PASSWORD, SECURE_USER
from waits import wait_until

pytestmark = [pytest.mark.functional]


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
