"""Fixtures for the tests that use the real RabbitMQ on 127.0.0.1:5672 (guest/guest).

The broker is the machine's own service: started with ``rabbitmq-server
-detached`` when it is not running, never stopped by the fixtures (a test that
stops it starts it again). Each test gets unique names and an admin handle
that deletes whatever queues and exchanges the test declared.

The broker is shared with every other test session on the machine: names
carry this session's :data:`SESSION_PREFIX`, and the sweep at the end deletes
only this session's queues. (Sweeping every ``nt_test_`` queue deleted the
queues of tests running in other sessions; their casts came back unroutable,
and test_ntrabbit_reconnect counted them as lost.) A test that must not share
anything takes :func:`own_vhost`.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import ssl
import subprocess
import threading
import uuid
from typing import Callable, Iterator

import pika
import pytest
from oslo_config import cfg
from rabbit_ctl import rabbitmqctl
from waits import wait_until

RABBIT_HOST = os.environ.get("NOTIFY_TRANSPORT_RABBIT_HOST", "127.0.0.1")
RABBIT_PORT = int(os.environ.get("NOTIFY_TRANSPORT_RABBIT_PORT", "5672"))
#: Quick reconnects so that restart tests stay short.
FAST_RETRY = "rabbit_retry_interval=1&rabbit_retry_backoff=0&rabbit_interval_max=1"
#: Start of every queue, exchange and vhost name this test session makes (see the module docstring).
SESSION_PREFIX = f"nt_test_{uuid.uuid4().hex[:6]}"


def rabbit_url(vhost: str = "", query: str = "", user: str = "guest", password: str = "guest") -> str:
    url = f"rabbit://{user}:{password}@{RABBIT_HOST}:{RABBIT_PORT}/{vhost}"
    return f"{url}?{query}" if query else url


def _port_open() -> bool:
    with contextlib.suppress(OSError), socket.create_connection((RABBIT_HOST, RABBIT_PORT), 1.0):
        return True
    return False


def _amqp_ready() -> bool:
    try:
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            RABBIT_HOST, RABBIT_PORT, "/", pika.PlainCredentials("guest", "guest"),
            connection_attempts=1, socket_timeout=2, blocked_connection_timeout=5))
    except Exception:  # noqa: BLE001 - not up yet
        return False
    conn.close()
    return True


def wait_rabbit_ready(timeout: float = 90.0) -> None:
    if wait_until(lambda: _port_open() and _amqp_ready(), timeout, interval=0.3):
        return
    raise RuntimeError(f"RabbitMQ at {RABBIT_HOST}:{RABBIT_PORT} did not become ready in {timeout}s")


def ensure_rabbit_running() -> None:
    """Start the machine's RabbitMQ if it is down, and wait until it accepts logins."""
    if _port_open() and _amqp_ready():
        return
    if RABBIT_HOST not in ("127.0.0.1", "localhost") or not shutil.which("rabbitmq-server"):
        pytest.skip(f"RabbitMQ is not reachable at {RABBIT_HOST}:{RABBIT_PORT}")
    if shutil.which("rabbitmqctl") and rabbitmqctl("status", check=False).returncode == 0:
        rabbitmqctl("start_app", check=False)  # the node runs but the app was stopped
    else:
        subprocess.run(["rabbitmq-server", "-detached"], check=False, capture_output=True)
    wait_rabbit_ready()


class RabbitAdmin:
    """A blocking pika connection for checking and removing what tests declared."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: pika.BlockingConnection | None = None
        self.queues: set[str] = set()
        self.exchanges: set[str] = set()

    def _channel(self) -> pika.adapters.blocking_connection.BlockingChannel:
        if self._conn is None or self._conn.is_closed:
            self._conn = pika.BlockingConnection(pika.ConnectionParameters(
                RABBIT_HOST, RABBIT_PORT, "/", pika.PlainCredentials("guest", "guest")))
        return self._conn.channel()

    def queue_exists(self, name: str) -> bool:
        with self._lock:
            channel = self._channel()
            try:
                channel.queue_declare(name, passive=True)
            except pika.exceptions.ChannelClosedByBroker:
                return False
            channel.close()
            return True

    def declare_queue(self, name: str) -> None:
        with self._lock:
            channel = self._channel()
            channel.queue_declare(name)
            channel.close()

    def queue_info(self, name: str) -> tuple[int, int]:
        """(messages, consumers) of an existing queue."""
        with self._lock:
            channel = self._channel()
            frame = channel.queue_declare(name, passive=True)
            channel.close()
            return frame.method.message_count, frame.method.consumer_count

    def consumers(self, name: str) -> int:
        """How many consumers the queue has (0 if it does not exist yet): a passive declare."""
        with self._lock:
            channel = self._channel()
            try:
                frame = channel.queue_declare(name, passive=True)
            except pika.exceptions.ChannelClosedByBroker:
                return 0
            channel.close()
            return int(frame.method.consumer_count)

    def wait_consumers(self, *queues: str, at_least: int = 1, timeout: float = 10.0) -> bool:
        """Wait until each queue has ``at_least`` consumers, as the broker sees them.

        A server's ``start()`` (oslo.messaging's above all) may return before its
        ``basic.consume`` reached the broker; a test asks the broker instead of sleeping.
        """
        return wait_until(lambda: all(self.consumers(q) >= at_least for q in queues), timeout)

    def publish_raw(self, exchange: str, routing_key: str, body: bytes,
                    properties: pika.BasicProperties | None = None) -> None:
        with self._lock:
            channel = self._channel()
            channel.basic_publish(exchange, routing_key, body, properties)
            channel.close()

    def delete_queue(self, name: str) -> None:
        with self._lock, contextlib.suppress(Exception):
            channel = self._channel()
            channel.queue_delete(name)
            channel.close()

    def delete_exchange(self, name: str) -> None:
        with self._lock, contextlib.suppress(Exception):
            channel = self._channel()
            channel.exchange_delete(name)
            channel.close()

    def cleanup(self) -> None:
        for queue in sorted(self.queues):
            self.delete_queue(queue)
        for exchange in sorted(self.exchanges):
            self.delete_exchange(exchange)
        self.queues.clear()
        self.exchanges.clear()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._conn.is_open:
                with contextlib.suppress(Exception):
                    self._conn.close()
            self._conn = None


def sweep_test_queues(prefix: str = SESSION_PREFIX) -> None:
    """Delete queues this session's tests left (e.g. ``<topic>.<server>``, named by whoever listened).

    Only this session's: other sessions' tests may be running on the same broker.
    """
    listing = rabbitmqctl("list_queues", "-q", "--no-table-headers", "name", check=False)
    names = [line.strip() for line in listing.stdout.splitlines() if line.strip().startswith(prefix)]
    if not names:
        return
    admin = RabbitAdmin()
    for name in names:
        admin.delete_queue(name)
    admin.close()


@pytest.fixture(scope="session")
def rabbit() -> Iterator[str]:
    """The URL of the running RabbitMQ (started if needed); test queues swept at the end."""
    ensure_rabbit_running()
    yield rabbit_url()
    if shutil.which("rabbitmqctl"):
        sweep_test_queues()


@pytest.fixture
def rabbit_admin(rabbit: str) -> Iterator[RabbitAdmin]:
    admin = RabbitAdmin()
    yield admin
    admin.cleanup()
    admin.close()


@pytest.fixture
def unique(rabbit_admin: RabbitAdmin) -> Callable[[str], str]:
    """``unique("rpc")`` -> a fresh name; queues and exchanges named after it are removed after the test."""
    made: list[str] = []

    def make(prefix: str = "nt") -> str:
        name = f"{SESSION_PREFIX}_{prefix}_{uuid.uuid4().hex[:8]}"
        made.append(name)
        return name

    yield make
    for name in made:
        rabbit_admin.queues.add(name)
        rabbit_admin.exchanges.add(f"{name}_fanout")
        for prio in ("audit", "debug", "info", "warn", "error", "critical", "sample"):
            rabbit_admin.queues.add(f"{name}.{prio}")


@pytest.fixture
def own_vhost(rabbit: str) -> Iterator[str]:
    """A virtual host of the test's own (guest may use it), deleted with all it holds afterwards.

    Nothing another test session does on the shared broker (deleting queues,
    exchanges) reaches it.
    """
    if not shutil.which("rabbitmqctl"):
        pytest.skip("rabbitmqctl is needed to make a virtual host")
    name = f"{SESSION_PREFIX}_vh_{uuid.uuid4().hex[:8]}"
    rabbitmqctl("add_vhost", name)
    try:
        rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
        yield name
    finally:
        rabbitmqctl("delete_vhost", name, check=False)


@pytest.fixture
def fresh_conf() -> cfg.ConfigOpts:
    """A ConfigOpts of its own, so that option overrides do not leak between tests."""
    conf = cfg.ConfigOpts()
    conf([])
    return conf


@contextlib.contextmanager
def transport_factory(conf_for: Callable[[], cfg.ConfigOpts],
                      default_url: str | None = None) -> Iterator[Callable[..., object]]:
    """``make(url=default_url, kind="rpc"|"notify", **kw)`` -> a transport on ``conf_for()``;
    every one made is cleaned up at the end."""
    from notify_transport import get_notification_transport, get_rpc_transport

    made: list[object] = []

    def make(url: str | None = None, kind: str = "rpc", **kwargs: object) -> object:
        factory = get_rpc_transport if kind == "rpc" else get_notification_transport
        transport = factory(conf_for(), url or default_url, **kwargs)
        made.append(transport)
        return transport

    try:
        yield make
    finally:
        for transport in reversed(made):
            with contextlib.suppress(Exception):
                transport.cleanup()


@pytest.fixture
def transports(rabbit: str, fresh_conf: cfg.ConfigOpts,
               rabbit_admin: RabbitAdmin) -> Iterator[Callable[..., object]]:
    """Factory for RPC/notification transports, all cleaned up after the test."""
    with transport_factory(lambda: fresh_conf, rabbit) as make:
        yield make


@pytest.fixture
def servers(transports: Callable[..., object]) -> Iterator[Callable[..., object]]:
    """``servers(transport, target, endpoints, **kw)`` -> a started RPC server, stopped after the test."""
    from notify_transport.rpc import get_rpc_server

    made: list[object] = []

    def start(transport: object, target: object, endpoints: list, **kwargs: object) -> object:
        server = get_rpc_server(transport, target, endpoints, **kwargs)
        server.start()
        made.append(server)
        return server

    yield start
    for server in made:
        with contextlib.suppress(Exception):
            server.stop()
            server.wait(timeout=10)


# -- TLS: the machine's RabbitMQ listens in plain TCP; tests put a TLS proxy in front of it ------
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
def tls_proxy(tmp_path_factory: pytest.TempPathFactory, rabbit: str) -> Iterator[tuple[TlsProxy, str]]:
    """``(proxy, ca_file)``: a TLS listener on 127.0.0.1 relaying to RabbitMQ, and its certificate
    (made for IP 127.0.0.1 with ``openssl``), the CA file a client verifies the proxy with."""
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
    """A ``rabbit://`` URL to the proxy with TLS and verification on, in the URL's query."""
    return (f"rabbit://guest:guest@127.0.0.1:{proxy.port}/?ssl=true&ssl_ca_file={ca_file}"
            f"&ssl_enforce_hostname_verification=true")


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.01) -> bool:
    """:func:`waits.wait_until` with the rabbit tests' shorter defaults."""
    return wait_until(predicate, timeout, interval)
