"""Apache Kafka (KRaft) for tests, benchmarks and the demo: one node, or a cluster of three.

The broker of record, from Maven Central jars (:mod:`notify_transport.jvm`), each node a
``java kafka.Kafka`` process group on free loopback ports, broker and controller of a
static quorum. Three nodes replicate each topic three times with
``min.insync.replicas=2``, as production does. Nodes stop, die and restart one at a time;
logs stay in :attr:`ApacheKafka.base_dir` until :meth:`close` (``keep_logs`` keeps them).
"""
from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import quote

from notify_transport.jvm import ArtifactSet, fetch
from notify_transport.pipeline.kafka_settings import JAAS_MODULES, jaas_config
from notify_transport.testing.brokers import (LOOPBACK, Broker, BrokerNotInstalled, BrokerProcess, BrokerStartError,
                                              free_ports, kafka_url, probe_admin, probe_metadata)

LOG = logging.getLogger(__name__)

#: The pom of :mod:`notify_transport.jvm` that holds Apache Kafka's broker.
POM = "apache-kafka"

#: Broker settings every node gets; a launcher's ``broker_config`` overrides them.
#: They keep Kafka's semantics and only shorten waits that suit a data centre, not a test:
#: A lone node is its own controller: restarted after a crash, it registers again only once its
#: old incarnation's broker session has expired (9 s by default), and nothing fails over meanwhile,
#: so a short session only shortens that wait (14 s to about 6 s per SIGKILL and restart here).
#: A cluster keeps Kafka's defaults: there the session decides when a dead node's partitions move.
ONE_NODE_CONFIG: Mapping[str, Any] = {
    "broker.session.timeout.ms": 2000,
    "broker.heartbeat.interval.ms": 500,
}
BASE_CONFIG: Mapping[str, Any] = {
    "auto.create.topics.enable": "true",
    "num.partitions": 1,
    # a first consumer group is served at once instead of after 3 s
    "group.initial.rebalance.delay.ms": 0,
    # the offsets topic is created on the first group's first request: 50 partitions
    # (Kafka's default) times three replicas would make that first request slow
    "offsets.topic.num.partitions": 10,
    # KIP-848 groups: the broker decides the session and heartbeat (the client's
    # session.timeout.ms does not apply); defaults 45 s and 5 s, here a dead member
    # is evicted after 10 s and a new member's assignment spreads within half a second
    "group.consumer.session.timeout.ms": 10000,
    "group.consumer.min.session.timeout.ms": 6000,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.min.heartbeat.interval.ms": 500,
    "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
}

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


def java_binary() -> str:
    """``$JAVA_HOME/bin/java`` when set, else ``java`` on the PATH (Kafka 4 needs Java 17+)."""
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "java" if home else None
    if candidate is not None and candidate.is_file():
        return str(candidate)
    found = shutil.which("java")
    if not found:
        raise BrokerNotInstalled("Java 17 or later is needed to run Apache Kafka",
                                 "apt-get install openjdk-17-jre-headless")
    return found


def cluster_id(random_bytes: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A new KRaft cluster id: 16 random bytes, URL-safe base64 without padding (as Kafka makes them).

    An id that starts with ``-`` is drawn again, as Kafka's own ``Uuid.randomUuid``
    does: the storage tool's argument parser would read it as an option and
    refuse to format the node (about one id in 64 starts so).
    """
    while True:
        candidate = base64.urlsafe_b64encode(random_bytes()).decode().rstrip("=")
        if not candidate.startswith("-"):
            return candidate


@dataclasses.dataclass(frozen=True)
class SecureListener:
    """A second listener on every node that clients reach with SASL/PLAIN, over TLS when given a
    certificate: what a production cluster asks of its clients, to test that the same transport
    URL and options reach the driver and the pipeline's readers. The plain listener stays for
    the nodes themselves and for the readiness probes.
    """

    #: user name -> password, the accounts the listener accepts (never shown in a repr)
    users: Mapping[str, str] = dataclasses.field(repr=False)
    #: PEM files of the TLS key and certificate (the certificate should name 127.0.0.1); None for no TLS
    key: Path | None = None
    certificate: Path | None = None

    NAME = "SECURE"

    @property
    def protocol(self) -> str:
        """The ``security_protocol`` clients of this listener set."""
        return "SASL_SSL" if self.certificate is not None else "SASL_PLAINTEXT"

    def properties(self, keystore: Path) -> dict[str, str]:
        """The broker's settings for this listener, its TLS key store read from ``keystore``
        (which :meth:`write_keystore` fills)."""
        prefix = f"listener.name.{self.NAME.lower()}."
        accounts = {f"user_{name}": password for name, password in sorted(self.users.items())}
        props = {f"{prefix}sasl.enabled.mechanisms": "PLAIN",
                 f"{prefix}plain.sasl.jaas.config": jaas_config(JAAS_MODULES["PLAIN"], accounts)}
        if self.certificate is not None:
            self._require_key()
            props.update({f"{prefix}ssl.keystore.type": "PEM", f"{prefix}ssl.keystore.location": str(keystore)})
        return props

    def write_keystore(self, keystore: Path) -> None:
        """Write the TLS key store a node's :meth:`properties` name (nothing without TLS)."""
        if self.certificate is None:
            return
        key = self._require_key()
        # Kafka reads a PEM key store from one file: the (unencrypted PKCS#8) key, then the chain
        keystore.write_text(Path(key).read_text() + Path(self.certificate).read_text())
        keystore.chmod(0o600)

    def _require_key(self) -> Path:
        if self.key is None:
            raise ValueError("a TLS listener needs the certificate's key")
        return self.key


def _properties_value(value: Any) -> str:
    """``value`` as a Java properties file spells it: a backslash there starts an escape, so a
    JAAS value's own escapes (a quote in a password) must be doubled to reach the broker."""
    return str(value).replace("\\", "\\\\").replace("\n", "\\n")


class KafkaNode(BrokerProcess):
    """One ``kafka.Kafka`` process, broker and controller, of an :class:`ApacheKafka` cluster."""

    name = "apache-kafka"
    start_timeout = 90.0
    # a controlled shutdown moves leadership away first; in a cluster it takes a few seconds
    stop_timeout = 30.0

    def __init__(self, cluster: "ApacheKafka", node_id: int, port: int, controller_port: int,
                 secure_port: int | None = None) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.controller_port = controller_port
        self.secure_port = secure_port
        self.data_dir = cluster.base_dir / f"node-{node_id}" / "data"
        super().__init__(port)
        # logs beside the data, under the cluster's directory, so that close() keeps or removes both
        shutil.rmtree(self._log_dir, ignore_errors=True)
        self._log_dir = cluster.base_dir / f"node-{node_id}"
        self._log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self._log_dir / "server.log"
        self.config_path = self._log_dir / "server.properties"
        self.keystore_path = self._log_dir / "keystore.pem"

    def __repr__(self) -> str:
        return f"<KafkaNode {self.node_id} {self.bootstrap}>"

    @property
    def secure_bootstrap(self) -> str:
        """``host:port`` of this node's :class:`SecureListener` (the cluster must have one)."""
        if self.secure_port is None:
            raise ValueError(f"{self!r} has no secure listener")
        return f"{LOOPBACK}:{self.secure_port}"

    def properties(self) -> dict[str, Any]:
        size = len(self.cluster.nodes)
        replicas = min(3, size)
        in_sync = 2 if size >= 3 else 1
        listeners = {"PLAINTEXT": ("PLAINTEXT", self.port), "CONTROLLER": ("PLAINTEXT", self.controller_port)}
        secure = self.cluster.secure
        if secure is not None and self.secure_port is not None:
            listeners[secure.NAME] = (secure.protocol, self.secure_port)
        props: dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            "controller.quorum.voters": self.cluster.voters(),
            "listeners": ",".join(f"{name}://{LOOPBACK}:{port}" for name, (_, port) in listeners.items()),
            "advertised.listeners": ",".join(f"{name}://{LOOPBACK}:{port}" for name, (_, port)
                                             in listeners.items() if name != "CONTROLLER"),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(f"{name}:{protocol}"
                                                       for name, (protocol, _) in listeners.items()),
            "log.dirs": str(self.data_dir),
            "default.replication.factor": replicas,
            "min.insync.replicas": in_sync,
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": in_sync,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": in_sync,
            **BASE_CONFIG,
            **(ONE_NODE_CONFIG if size == 1 else {}),
            **(secure.properties(self.keystore_path) if secure is not None else {}),
            **self.cluster.broker_config,
        }
        return props

    def write_config(self) -> None:
        lines = [f"{key}={_properties_value(value)}" for key, value in self.properties().items()]
        self.config_path.write_text("\n".join(lines) + "\n")
        (self._log_dir / "log4j2.properties").write_text(_LOG4J2)
        if self.cluster.secure is not None:
            self.cluster.secure.write_keystore(self.keystore_path)

    def formatted(self) -> bool:
        return (self.data_dir / "meta.properties").is_file()

    def format_command(self) -> list[str]:
        return [*self._java(), "kafka.tools.StorageTool", "format", "-t", self.cluster.cluster_id,
                "-c", str(self.config_path), "--ignore-formatted"]

    def _java(self) -> list[str]:
        return [java_binary(), *self.cluster.jvm_options,
                f"-Dlog4j2.configurationFile={self._log_dir / 'log4j2.properties'}",
                "-Djava.awt.headless=true", "-cp", self.cluster.classpath()]

    def command(self) -> list[str]:
        return [*self._java(), "kafka.Kafka", str(self.config_path)]

    def format(self) -> None:
        """Write the node's configuration and format its log directory (once)."""
        self.write_config()
        if self.formatted():
            return
        with open(self.log_path, "ab") as log:
            done = subprocess.run(self.format_command(), stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT, timeout=120)
        if done.returncode != 0:
            raise BrokerStartError(f"formatting Kafka node {self.node_id} failed "
                                   f"(status {done.returncode}):\n{self.log_tail()}")

    def ready(self) -> bool:
        """Registered and serving: the node answers metadata and lists itself among the brokers."""
        return self.node_id in self.cluster.registered_brokers(self.bootstrap)

    def start(self) -> "KafkaNode":
        """Start this node again (after stop or kill); returns once it is registered."""
        if self.running:
            return self
        self.format()
        self.spawn()
        self.wait_ready()
        return self

    def _wait_port_free(self, timeout: float = 5.0) -> None:
        super()._wait_port_free(timeout)
        port, self.port = self.port, self.controller_port
        try:
            super()._wait_port_free(timeout)
        finally:
            self.port = port


class ApacheKafka(Broker):
    """Apache Kafka in KRaft mode: ``nodes`` combined broker+controller processes on loopback.

    ``ApacheKafka()`` is one node (replication factor 1); ``ApacheKafka(nodes=3)`` a
    cluster (replication factor 3, ``min.insync.replicas=2``). :meth:`start` returns
    once every node is registered; :meth:`node` gives one node to stop, kill or restart.
    """

    name = "apache-kafka"

    def __init__(self, nodes: int = 1, version: str | None = None,
                 broker_config: Mapping[str, Any] | None = None,
                 jvm_options: tuple[str, ...] = ("-Xms128m", "-Xmx768m"),
                 base_dir: str | os.PathLike[str] | None = None,
                 secure: SecureListener | None = None) -> None:
        if nodes < 1:
            raise ValueError("an Apache Kafka cluster needs at least one node")
        self.secure = secure
        self.artifacts = ArtifactSet(POM, {"kafka.version": version} if version else {})
        self.broker_config = dict(broker_config or {})
        self.jvm_options = tuple(jvm_options)
        self._own_base_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir is not None else Path(
            tempfile.mkdtemp(prefix="notify-transport-apache-kafka-"))
        self.cluster_id = cluster_id()
        self._classpath: str | None = None
        self.nodes: list[KafkaNode] = []
        per_node = 2 if secure is None else 3
        ports = free_ports(per_node * nodes)
        for node_id in range(1, nodes + 1):
            own = ports[per_node * (node_id - 1):per_node * node_id]
            self.nodes.append(KafkaNode(self, node_id, own[0], own[1], own[2] if secure is not None else None))

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def secure_bootstrap(self) -> str:
        """``host:port`` list of the nodes' :class:`SecureListener` (the cluster must have one)."""
        return ",".join(node.secure_bootstrap for node in self.nodes)

    def secure_url(self, user: str, vhost: str | None = None, password: str | None = None, **query: Any) -> str:
        """A transport URL for ``user`` on the secure listener, with the options its protocol needs
        (``password`` defaults to the user's own); ``query`` adds or overrides options."""
        if self.secure is None:
            raise ValueError(f"{self!r} has no secure listener")
        options: dict[str, Any] = {"security_protocol": self.secure.protocol, "sasl_mechanism": "PLAIN"}
        if self.secure.certificate is not None:
            options["ssl_cafile"] = str(self.secure.certificate)
        secret = self.secure.users[user] if password is None else password
        credentials = f"{quote(user, safe='')}:{quote(secret, safe='')}@"
        return kafka_url(credentials + self.secure_bootstrap, vhost,
                         {**self.client_options, **options, **query})

    def __repr__(self) -> str:
        return f"<ApacheKafka {len(self.nodes)} node(s) {self.bootstrap}>"

    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{LOOPBACK}:{n.controller_port}" for n in self.nodes)

    def classpath(self) -> str:
        """The broker's jars (fetched with Maven on first use, then from the cache)."""
        if self._classpath is None:
            self._classpath = os.pathsep.join(str(jar) for jar in fetch(self.artifacts))
        return self._classpath

    def node(self, node_id: int) -> KafkaNode:
        """The node with this id (1-based)."""
        return self.nodes[node_id - 1]

    @property
    def running(self) -> bool:
        return any(node.running for node in self.nodes)

    # -- life cycle ------------------------------------------------------------------

    def start(self) -> "ApacheKafka":
        """Start every node that is not running; return once all are registered."""
        stopped = [node for node in self.nodes if not node.running]
        if not stopped:
            return self
        java_binary()  # before the jars: without Java, fetching them would be wasted
        self.classpath()
        self._each(lambda node: node.format(), stopped)
        for node in stopped:
            node.spawn()
        try:
            self._each(lambda node: node.wait_ready(), stopped)
        except BrokerStartError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM every node at once (a controlled shutdown), SIGKILL what does not exit."""
        self._each(lambda node: node.stop(), [n for n in self.nodes if n.running])

    def kill(self) -> None:
        """SIGKILL every node: the whole cluster crashes."""
        self._each(lambda node: node.kill(), [n for n in self.nodes if n.running])

    def restart(self) -> "ApacheKafka":
        self.stop()
        return self.start()

    def close(self, keep_logs: bool = False) -> None:
        """Stop every node and remove the data and logs, unless ``keep_logs`` (then say where)."""
        self.stop()
        if keep_logs:
            LOG.warning("Apache Kafka logs kept in %s", self.base_dir)
        elif self._own_base_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __exit__(self, *exc: Any) -> None:
        self.close(keep_logs=exc[0] is not None)

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(f"--- node {n.node_id} ---\n{n.log_tail(lines)}" for n in self.nodes)

    @staticmethod
    def _each(action: Callable[[KafkaNode], Any], nodes: list[KafkaNode]) -> None:
        if not nodes:  # e.g. stop() after every node failed to start
            return
        if len(nodes) == 1:
            action(nodes[0])
            return
        with concurrent.futures.ThreadPoolExecutor(len(nodes)) as pool:
            for future in [pool.submit(action, node) for node in nodes]:
                future.result()

    # -- what tests ask of the cluster ---------------------------------------------------

    def registered_brokers(self, bootstrap: str | None = None, timeout: float = 2.0) -> set[int]:
        """Ids of the brokers the cluster's metadata lists now (empty when nobody answers)."""
        return set(probe_metadata(bootstrap or self.bootstrap, timeout).brokers)

    def leader_of(self, topic: str, partition: int = 0, timeout: float = 10.0) -> KafkaNode:
        """The node that leads ``topic``'s ``partition`` now (waits for one to be elected)."""
        deadline = time.monotonic() + timeout
        admin = probe_admin(self.bootstrap)
        try:
            while True:
                with contextlib.suppress(KeyError):
                    meta = probe_metadata(self.bootstrap, topic=topic, admin=admin).topics[topic].partitions[partition]
                    if meta.leader >= 1:
                        return self.node(meta.leader)
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"no leader for {topic}[{partition}] within {timeout}s")
                time.sleep(0.1)
        finally:
            admin.close()

    def wait_in_sync(self, topic: str, partitions: int = 1, timeout: float = 60.0) -> None:
        """Wait until every replica of ``topic``'s partitions is in sync (after a node came back)."""
        deadline = time.monotonic() + timeout
        admin = probe_admin(self.bootstrap)
        try:
            while True:
                with contextlib.suppress(KeyError):
                    parts = probe_metadata(self.bootstrap, topic=topic, admin=admin).topics[topic].partitions
                    if len(parts) >= partitions and all(
                            set(p.isrs) == set(p.replicas) for p in parts.values()):
                        return
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"{topic}'s replicas not all in sync within {timeout}s")
                time.sleep(0.2)
        finally:
            admin.close()
