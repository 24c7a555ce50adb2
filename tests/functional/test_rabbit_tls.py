"""RPC and notifications over TLS, through pika's TLS transport on the driver's I/O loop.

The machine's RabbitMQ listens in plain TCP, so the test puts a TLS proxy in front of it
(``tls_proxy`` in rabbit_fixtures: a certificate made for 127.0.0.1 with ``openssl``,
checked by the client through ``ssl_ca_file``): everything the driver sends and receives
crosses TLS.
"""
from __future__ import annotations

import subprocess
import time

import pytest

import notify_transport as nt
from notify_transport import rpc
from notify_transport.exceptions import MessageDeliveryFailure
from rabbit_checks import check_concurrent_calls, check_notifications_round_trip
from rabbit_fixtures import tls_url, wait_for

pytestmark = pytest.mark.functional


class Echo:
    def __init__(self) -> None:
        self.casts: list = []

    def echo(self, ctxt, value):
        return value

    def context(self, ctxt):
        return ctxt

    def note(self, ctxt, value):
        self.casts.append(value)


def test_calls_casts_and_concurrent_calls_over_tls(tls_proxy, transports, servers, unique):
    proxy, ca_file = tls_proxy
    before = proxy.connections
    transport = transports(tls_url(proxy, ca_file))
    topic = unique("tls")
    endpoint = Echo()
    servers(transport, nt.Target(topic=topic, server="s1"), [endpoint])
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=20)
    big = "x" * 300_000  # several frames, several TLS records
    assert client.call({"user": "u"}, "context") == {"user": "u"}
    assert client.call({}, "echo", value=big) == big
    for i in range(30):
        client.cast({}, "note", value=i)
    assert wait_for(lambda: len(endpoint.casts) == 30, timeout=30)
    assert sorted(endpoint.casts) == list(range(30))

    check_concurrent_calls(client, calls=20)
    assert proxy.connections >= before + 2  # sending and listening connections both went through TLS


def test_notifications_over_tls(tls_proxy, transports, unique):
    proxy, ca_file = tls_proxy
    transport = transports(tls_url(proxy, ca_file), kind="notification")
    topic = unique("tlsnote")
    check_notifications_round_trip(transport, topic)


def test_a_certificate_the_client_does_not_trust_is_refused(tls_proxy, transports, unique, tmp_path):
    proxy, _ca_file = tls_proxy
    other = tmp_path / "other.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=other", "-keyout", str(tmp_path / "k.pem"), "-out", str(other)],
                   check=True, capture_output=True, timeout=60)
    transport = transports(tls_url(proxy, str(other)))
    client = rpc.get_rpc_client(transport, nt.Target(topic=unique("untrusted")), timeout=2)
    started = time.monotonic()
    with pytest.raises(MessageDeliveryFailure) as raised:  # the call is refused, not left to time out
        client.prepare(retry=0).call({}, "echo", value=1)
    assert time.monotonic() - started < 30
    assert "guest:guest" not in str(raised.value)
