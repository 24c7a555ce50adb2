"""A TLS misconfiguration is reported with its cause, on a PLAINTEXT broker.

A missing CA file fails when the transport is built, naming the option and
the file; a valid CA file used against a listener that does not speak TLS
fails when the listener starts, naming the host, the client's last error by
its code and the option to check, rather than a bare "cannot reach the cluster".
librdkafka words that error differently from run to run ("SSL handshake
failed", "SSL connection closed by peer ..."), so only its code is asserted.
"""
from __future__ import annotations

import re

import pytest

import notify_transport
from notify_transport.exceptions import ConfigurationError
from notify_transport.testing.tls import self_signed_certificate
from kafka_fixtures import listener_start_error

pytestmark = [pytest.mark.functional]


def test_missing_ca_file_is_named_when_the_transport_is_built(kafka_broker, kafka_conf, tmp_path):
    missing = tmp_path / "ca.pem"
    with pytest.raises(ConfigurationError, match=f"ssl_cafile names '{missing}', which does not exist"):
        notify_transport.get_notification_transport(
            kafka_conf, kafka_broker.url(security_protocol="SSL", ssl_cafile=str(missing)))


def test_tls_against_a_plaintext_listener_reports_the_handshake(kafka_broker, kafka_conf, tmp_path,
                                                                 unique_topic):
    made = self_signed_certificate(tmp_path)
    if made is None:
        pytest.skip("openssl could not make a certificate")
    _, cert = made
    transport = notify_transport.get_notification_transport(
        kafka_conf, kafka_broker.url(security_protocol="SSL", ssl_cafile=str(cert), listener_start_timeout=3))
    try:
        text = listener_start_error(transport, unique_topic("tls"), pool="tls")
        assert f"Cannot reach the Kafka cluster at {kafka_broker.bootstrap}" in text, text
        # librdkafka's documented codes for a TLS connection refused at the transport level
        assert re.search(r"last error: (_SSL|_TRANSPORT): ", text), text
        assert "security_protocol is SSL: does the listener speak TLS?" in text, text
    finally:
        transport.cleanup()
