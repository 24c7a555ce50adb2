"""Free loopback ports for the launchers: distinct within one request, whatever the OS reuses."""
from __future__ import annotations

import socket
import types

import pytest
from hypothesis import given, strategies as st

from notify_transport.testing import brokers
from notify_transport.testing.apache_kafka import ApacheKafka
from notify_transport.testing.brokers import free_port, free_ports
from notify_transport.testing.rabbitmq import RabbitCluster, RabbitNode


class _LowestFreePortOS:
    """An OS that binds port 0 to the lowest port not bound now, so a closed port comes back at once.

    Linux may do the same with its ephemeral range; asking for ports one at a time then gave
    a three-node Kafka cluster one port for two listeners (CI, stop 39).
    """

    AF_INET, SOCK_STREAM = socket.AF_INET, socket.SOCK_STREAM

    def __init__(self, first: int = 40000) -> None:
        self.first = first
        self.bound: set[int] = set()
        self.opened = 0

    def socket(self, *args: object) -> "_Socket":
        self.opened += 1
        return _Socket(self)


class _Socket:
    def __init__(self, os_: _LowestFreePortOS) -> None:
        self.os, self.port = os_, 0

    def bind(self, address: tuple[str, int]) -> None:
        port = self.os.first
        while port in self.os.bound:
            port += 1
        self.os.bound.add(port)
        self.port = port

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def close(self) -> None:
        self.os.bound.discard(self.port)

    def __enter__(self) -> "_Socket":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture
def reusing_os(monkeypatch) -> _LowestFreePortOS:
    fake = _LowestFreePortOS()
    monkeypatch.setattr(brokers, "socket", types.SimpleNamespace(
        AF_INET=fake.AF_INET, SOCK_STREAM=fake.SOCK_STREAM, socket=fake.socket))
    return fake


def test_one_at_a_time_the_reusing_os_repeats_a_port(reusing_os):
    # the hazard itself: separate requests may get the same port back
    assert free_port() == free_port()


@given(count=st.integers(min_value=0, max_value=40), avoid=st.sets(st.integers(40000, 40060), max_size=20))
def test_one_request_gives_distinct_ports_outside_avoid_and_releases_them(count, avoid):
    fake = _LowestFreePortOS()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(brokers, "socket", types.SimpleNamespace(
            AF_INET=fake.AF_INET, SOCK_STREAM=fake.SOCK_STREAM, socket=fake.socket))
        ports = free_ports(count, avoid=avoid)
    assert len(ports) == count and len(set(ports)) == count
    assert not set(ports) & avoid
    assert fake.bound == set()  # nothing stays bound for the broker to trip over


def test_avoid_skips_a_port_already_given(reusing_os):
    first = free_port()
    assert free_port(avoid={first}) != first


def test_a_negative_count_is_refused():
    with pytest.raises(ValueError, match="-1 ports"):
        free_ports(-1)


def test_a_three_node_cluster_gets_six_distinct_ports_on_a_reusing_os(reusing_os, tmp_path):
    cluster = ApacheKafka(nodes=3, base_dir=tmp_path)
    ports = [n.port for n in cluster.nodes] + [n.controller_port for n in cluster.nodes]
    assert len(set(ports)) == 6


def test_real_ports_are_distinct_and_free():
    ports = free_ports(16)
    assert len(set(ports)) == 16
    for port in ports:
        with socket.socket() as sock:
            sock.bind((brokers.LOOPBACK, port))


def test_a_rabbit_cluster_and_a_lone_node_get_distinct_ports_on_a_reusing_os(reusing_os, tmp_path):
    cluster = RabbitCluster(3)
    try:
        ports = [n.port for n in cluster.nodes] + [n.dist_port for n in cluster.nodes]
        assert len(set(ports)) == 6
    finally:
        cluster.close()
    node = RabbitNode("lone", tmp_path)
    try:
        assert node.dist_port != node.port
    finally:
        node.close()
