"""A three-node RabbitMQ cluster of the tests' own, beside the machine's broker on 127.0.0.1:5672.

Started once per session (:class:`notify_transport.testing.rabbitmq.RabbitCluster`:
own node names, ports and directories, its own Erlang cookie), so nothing here
reaches the broker other tests use. A test that kills, stops or pauses a node
brings it back before it ends (:func:`node_back`); the cluster's logs are kept
when a test failed.
"""
from __future__ import annotations

import contextlib
import os
import signal
from typing import Callable, Iterator

import pytest
from oslo_config import cfg

from notify_transport.testing.rabbitmq import RabbitCluster, RabbitNode
from rabbit_fixtures import transport_factory
from session_brokers import kept_logs_on_failure

#: Quick reconnects, and every queue a quorum queue, as a cluster's operators configure it.
CLUSTER_QUERY = ("rabbit_retry_interval=1&rabbit_retry_backoff=0&rabbit_interval_max=1"
                 "&rabbit_quorum_queue=true&rabbit_transient_quorum_queue=true")


@pytest.fixture(scope="session")
def rabbit_cluster(request: pytest.FixtureRequest) -> Iterator[RabbitCluster]:
    """Three RabbitMQ nodes joined into one cluster (guest/guest on each)."""
    if not os.path.exists("/usr/lib/rabbitmq/bin/rabbitmq-server"):
        pytest.skip("RabbitMQ is not installed (scripts/rabbitmq.sh installs it)")
    with kept_logs_on_failure(request, RabbitCluster(3)) as cluster:
        yield cluster


@contextlib.contextmanager
def node_back(cluster: RabbitCluster, index: int) -> Iterator[RabbitNode]:
    """Yield node ``index``; afterwards make sure it runs and is clustered again, whatever the test did."""
    node = cluster.node(index)
    try:
        yield node
    finally:
        node.signal(signal.SIGCONT)
        if not node.running:
            cluster.restart(index)
        else:
            cluster.wait_clustered()


def nodes_holding_connections(cluster: RabbitCluster, pid: int | None = None) -> list[str]:
    """The node of each connection process ``pid`` (default: this one) opened."""
    return cluster.connections_of(os.getpid() if pid is None else pid)


def _own_conf() -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    conf([])
    return conf


@pytest.fixture
def cluster_transports() -> Iterator[Callable[..., object]]:
    """``cluster_transports(url, kind="rpc")``: transports each on a config of its own, cleaned up after."""
    with transport_factory(_own_conf) as make:
        yield make
