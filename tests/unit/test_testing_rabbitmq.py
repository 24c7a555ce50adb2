"""The RabbitMQ cluster launcher's addresses and environment, without starting a node."""
from __future__ import annotations

import socket
import threading

from notify_transport.testing.rabbitmq import RabbitCluster, amqp_answers


def test_each_node_names_its_own_ports_directories_and_cookie(monkeypatch):
    monkeypatch.setenv("RABBITMQ_NODENAME", "rabbit@machine")  # the machine's node: never inherited
    cluster = RabbitCluster(3)
    try:
        envs = [node.environment() for node in cluster.nodes]
        assert len({env["RABBITMQ_NODENAME"] for env in envs}) == 3
        assert all(env["RABBITMQ_NODENAME"] != "rabbit@machine" for env in envs)
        assert len({env["RABBITMQ_NODE_PORT"] for env in envs} | {env["RABBITMQ_DIST_PORT"] for env in envs}) == 6
        assert len({env["RABBITMQ_MNESIA_BASE"] for env in envs}) == 3
        assert {env["HOME"] for env in envs} == {str(cluster.home)}
        assert (cluster.home / ".erlang.cookie").stat().st_mode & 0o077 == 0
    finally:
        cluster.close()
    assert not cluster.home.exists()


def test_urls_list_the_nodes_in_the_order_asked():
    cluster = RabbitCluster(3)
    try:
        ports = [node.port for node in cluster.nodes]
        assert cluster.url("ntrabbit", order=[2, 0]) == (
            f"ntrabbit://guest:guest@127.0.0.1:{ports[2]},guest:guest@127.0.0.1:{ports[0]}/")
        assert cluster.node(1).url(heartbeat_timeout_threshold=10) == (
            f"rabbit://guest:guest@127.0.0.1:{ports[1]}/?heartbeat_timeout_threshold=10")
    finally:
        cluster.close()


def test_a_port_answers_only_with_an_amqp_method_frame():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        def answer(first: bytes) -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(8)
                conn.sendall(first)

        for first, expected in ((b"\x01\x00\x00", True), (b"HTTP/1.1 400", False)):
            thread = threading.Thread(target=answer, args=(first,))
            thread.start()
            assert amqp_answers(port) is expected
            thread.join()
    assert amqp_answers(port) is False  # closed now
