"""RPC and notifications over TLS, through pika's TLS transport on the driver's I/O loop.

The machine's RabbitMQ listens in plain TCP, so the test puts a TLS proxy of its own in
front of it (a certificate made for 127.0.0.1 with ``openssl``, checked by the client
through ``ssl_ca_file``): everything the driver sends and receives crosses TLS.
"""
from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
from typing import Iterator

import pytest

import notify_transport as nt
from notify_transport import rpc
from rabbit_checks import check_concurrent_calls, check_notifications_round_trip
from rabbit_fixtures import RABBIT_HOST, RABBIT_PORT, wait_for

pytestmark = pytest.mark.functional


class TlsProxy:
    """Accepts TLS on 127.0.0.1 and relays the plain bytes to RabbitMQ, one thread per direction."""

    def __init__(self, cert: str, key: str) -> None:
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(cert, key)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _addr = self._listener.accept()
            except (socket.timeout, OSError):
                continue
            client.settimeout(10)
            try:
                secure = self._context.wrap_socket(client, server_side=True)
                upstream = socket.create_connection((RABBIT_HOST, RABBIT_PORT), 10)
            except (OSError, ssl.SSLError):
                client.close()
                continue
            secure.settimeout(None)
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connections += 1
            self._sockets += [secure, upstream]
            for source, sink in ((secure, upstream), (upstream, secure)):
                threading.Thread(target=self._relay, args=(source, sink), daemon=True).start()

    @staticmethod
    def _relay(source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except (OSError, ssl.SSLError):
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except (OSError, ssl.SSLError):
                pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._listener.close()
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass


@pytest.fixture(scope="module")
def tls_proxy(tmp_path_factory, rabbit) -> Iterator[tuple[TlsProxy, str]]:
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make the test certificate")
    where = tmp_path_factory.mktemp("tls")
    cert, key = str(where / "cert.pem"), str(where / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=60)
    proxy = TlsProxy(cert, key)
    yield proxy, cert
    proxy.close()


def tls_url(proxy: TlsProxy, ca_file: str) -> str:
    return (f"rabbit://guest:guest@127.0.0.1:{proxy.port}/?ssl=true&ssl_ca_file={ca_file}"
            f"&ssl_enforce_hostname_verification=true")


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
    with pytest.raises(Exception) as raised:
        client.prepare(retry=0).call({}, "echo", value=1)
    assert time.monotonic() - started < 30
    assert "guest:guest" not in str(raised.value)
