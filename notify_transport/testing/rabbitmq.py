"""RabbitMQ nodes of our own on loopback, alone or clustered, beside the machine's broker.

Each :class:`RabbitNode` runs the installed ``rabbitmq-server`` in its own process
group with its own name, ports and directories; a :class:`RabbitCluster`'s nodes share
a cookie in the cluster's ``HOME``, so the machine's node on 127.0.0.1:5672 is never
touched. ``scripts/rabbitmq.sh`` installs RabbitMQ.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from notify_transport.testing.brokers import BrokerProcess, BrokerStartError, LOOPBACK, free_port, free_ports

LOG = logging.getLogger(__name__)

#: Where Debian's package keeps the scripts its ``/usr/sbin`` wrappers run as the ``rabbitmq`` user;
#: run directly, they keep our environment (node name, ports, directories, cookie).
SCRIPTS = Path("/usr/lib/rabbitmq/bin")
#: The AMQP 0-9-1 protocol header; a node that serves answers it with a Connection.Start frame.
_AMQP_HEADER = b"AMQP\x00\x00\x09\x01"
_METHOD_FRAME = 1


def _script(name: str) -> str:
    path = SCRIPTS / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise BrokerStartError(f"{name} is not installed (scripts/rabbitmq.sh installs RabbitMQ)")
    return found


def amqp_answers(port: int, host: str = LOOPBACK, timeout: float = 1.0) -> bool:
    """Whether a broker at ``host:port`` answers the AMQP protocol header with Connection.Start."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(_AMQP_HEADER)
            first = sock.recv(1)
    except OSError:
        return False
    return first == bytes([_METHOD_FRAME])


class RabbitNode(BrokerProcess):
    """One RabbitMQ node of ours: ``name@localhost`` on a free AMQP port."""

    name = "rabbitmq"
    start_timeout = 120.0
    stop_timeout = 30.0

    def __init__(self, node_name: str, home: Path, port: int | None = None, dist_port: int | None = None) -> None:
        super().__init__(port)
        self.node_name = f"{node_name}@localhost"
        self.dist_port = dist_port or free_port(avoid={self.port})
        self.home = home
        self.base = Path(tempfile.mkdtemp(prefix=f"{node_name}-", dir=home))
        shutil.rmtree(self._log_dir, ignore_errors=True)  # the node's log lives with its data
        self._log_dir, self.log_path = self.base, self.base / "rabbitmq.log"
        for folder in ("mnesia", "log"):
            (self.base / folder).mkdir()
        (self.base / "enabled_plugins").write_text("[].\n")
        # what operators of a three-node cluster set: a node cut off from the majority pauses
        (self.base / "rabbitmq.conf").write_text("cluster_partition_handling = pause_minority\n")

    def __repr__(self) -> str:
        return f"<RabbitNode {self.node_name} amqp={self.port}>"

    @property
    def bootstrap(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def url(self, vhost: str | None = None, scheme: str = "rabbit", **query: Any) -> str:
        """A transport URL naming this node alone (``scheme`` ``rabbit`` or ``ntrabbit``), options in ``query``."""
        url = RabbitCluster.url_of([self], scheme, vhost or "")
        return f"{url}?{urlencode({k: str(v) for k, v in query.items()})}" if query else url

    def environment(self) -> dict[str, str]:
        """What ``rabbitmq-server`` and ``rabbitmqctl`` read to run or reach this node and no other."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("RABBITMQ_")}
        env.update({
            "HOME": str(self.home),  # the cluster's .erlang.cookie
            "RABBITMQ_NODENAME": self.node_name,
            "RABBITMQ_NODE_IP_ADDRESS": LOOPBACK,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.base / "log"),
            "RABBITMQ_PID_FILE": str(self.base / "node.pid"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.base / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(self.base / "rabbitmq"),
            "RABBITMQ_LOGS": "-",  # the log to stdout, which is our log file
        })
        return env

    def command(self) -> list[str]:
        return [_script("rabbitmq-server")]

    def popen_options(self) -> dict[str, Any]:
        return {"env": self.environment(), "cwd": str(self.base)}

    def ready(self) -> bool:
        return amqp_answers(self.port)

    def ctl(self, *args: str, timeout: float = 120.0) -> str:
        """``rabbitmqctl -n <this node> args``; its output, or :class:`BrokerStartError` on failure."""
        done = subprocess.run([_script("rabbitmqctl"), "-n", self.node_name, *args], env=self.environment(),
                              capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode:
            raise BrokerStartError(f"rabbitmqctl {' '.join(args)} on {self.node_name} failed "
                                   f"({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the node's process group (SIGSTOP pauses it: a node gone silent)."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signum)


class RabbitCluster:
    """``size`` :class:`RabbitNode` s joined into one cluster; stops only what it started."""

    def __init__(self, size: int = 3, user: str = "guest", password: str = "guest") -> None:
        self.home = Path(tempfile.mkdtemp(prefix="notify-transport-rabbit-cluster-"))
        cookie = self.home / ".erlang.cookie"
        cookie.write_text(secrets.token_hex(16).upper())
        cookie.chmod(0o400)
        tag = secrets.token_hex(3)
        ports = free_ports(2 * size)
        self.nodes = [RabbitNode(f"nt{tag}n{i}", self.home, ports[2 * i], ports[2 * i + 1]) for i in range(size)]
        self.user, self.password = user, password

    def __repr__(self) -> str:
        return f"<RabbitCluster {', '.join(n.node_name for n in self.nodes)}>"

    def __enter__(self) -> "RabbitCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def node(self, index: int) -> RabbitNode:
        return self.nodes[index]

    @staticmethod
    def url_of(nodes: list[RabbitNode], scheme: str = "rabbit", vhost: str = "",
               user: str = "guest", password: str = "guest") -> str:
        hosts = ",".join(f"{user}:{password}@{LOOPBACK}:{node.port}" for node in nodes)
        return f"{scheme}://{hosts}/{vhost}"

    def url(self, scheme: str = "rabbit", vhost: str = "", order: list[int] | None = None) -> str:
        """A multi-host transport URL of the nodes, in ``order`` (default: as numbered)."""
        chosen = [self.nodes[i] for i in (order if order is not None else range(len(self.nodes)))]
        return self.url_of(chosen, scheme, vhost, self.user, self.password)

    def start(self) -> "RabbitCluster":
        """Start every node, join the others to the first, and return once all run as one cluster."""
        subprocess.run(["epmd", "-daemon"], check=False, start_new_session=True)  # shared; never ours to stop
        for node in self.nodes:
            node.spawn()
        try:
            for node in self.nodes:
                node.wait_ready()
            first = self.nodes[0]
            for node in self.nodes[1:]:
                node.ctl("stop_app")
                node.ctl("join_cluster", first.node_name)
                node.ctl("start_app")
            self.wait_clustered()
        except BaseException:
            self.close(keep_logs=True)
            raise
        LOG.info("RabbitMQ cluster %s on ports %s", self, [n.port for n in self.nodes])
        return self

    def running_nodes(self, via: RabbitNode) -> set[str]:
        """The cluster's running nodes as ``via`` sees them."""
        status = via.ctl("cluster_status", "--formatter", "json")
        return set(json.loads(status).get("running_nodes", []))

    def connections_of(self, pid: int) -> list[str]:
        """The node of each AMQP connection that process ``pid`` opened, from the broker's own listing.

        Both notify-transport and oslo.messaging name their connections
        ``<program>:<pid>:<id>`` (``connection_name``), which is what is matched.
        """
        via = next(node for node in self.nodes if node.running)
        listing = via.ctl("list_connections", "-q", "--no-table-headers", "pid", "client_properties")
        named = re.compile(rf'"connection_name","[^"]*:{pid}:')
        nodes = []
        for line in listing.splitlines():
            match = re.match(r"<([^.>]+@[^.>]+)\.", line)
            if match and named.search(line):
                nodes.append(match.group(1))
        return nodes

    def busiest_for(self, pid: int) -> int:
        """The index of the node holding most of process ``pid``'s connections."""
        holders = self.connections_of(pid)
        if not holders:
            raise BrokerStartError(f"process {pid} holds no connection to {self}")
        busiest = max(set(holders), key=holders.count)
        return next(i for i, node in enumerate(self.nodes) if node.node_name == busiest)

    def wait_clustered(self, timeout: float = 120.0) -> None:
        """Wait until every running node of ours sees all the running ones."""
        deadline = time.monotonic() + timeout
        wanted = {n.node_name for n in self.nodes if n.running}
        while True:
            seen = [self.running_nodes(n) for n in self.nodes if n.running]
            if all(view >= wanted for view in seen):
                return
            if time.monotonic() >= deadline:
                raise BrokerStartError(f"{self} did not form within {timeout}s: {seen}")
            time.sleep(0.5)

    def restart(self, index: int) -> RabbitNode:
        """Start a stopped or killed node again; it rejoins from its own data directory."""
        node = self.nodes[index]
        node.start()
        self.wait_clustered()
        return node

    def close(self, keep_logs: bool = False) -> None:
        """Stop every node; the directories go unless ``keep_logs`` (named in the log)."""
        for node in reversed(self.nodes):
            node.signal(signal.SIGCONT)  # a paused node cannot stop
            node.stop()
        if keep_logs:
            LOG.warning("RabbitMQ cluster logs kept in %s", self.home)
        else:
            shutil.rmtree(self.home, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(f"== {n.node_name}\n{n.log_tail(lines)}" for n in self.nodes)
