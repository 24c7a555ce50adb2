"""The RabbitMQ driver on pika's own ``IOLoop``, as on a platform without epoll: every pika
call is handed to the I/O thread (publishes batched in the publisher's outbox), and calls,
casts, concurrent callers and notifications behave as on the lending loop."""
from __future__ import annotations

import pytest

import notify_transport as nt
from notify_transport import rpc
from notify_transport.drivers.rabbit import connection
from rabbit_checks import check_concurrent_calls, check_notifications_round_trip
from rabbit_fixtures import wait_for

pytestmark = pytest.mark.functional


@pytest.fixture
def pika_ioloop(monkeypatch):
    """No lending loop; returns the pika IOLoops the driver makes instead."""
    made: list = []

    class CountingIOLoop(connection.IOLoop):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    monkeypatch.setattr(connection.ioloop, "AVAILABLE", False)
    monkeypatch.setattr(connection, "IOLoop", CountingIOLoop)
    return made


class Echo:
    def __init__(self) -> None:
        self.casts: list = []

    def echo(self, ctxt, value):
        return value

    def note(self, ctxt, value):
        self.casts.append(value)


def test_rpc_on_pikas_own_loop(pika_ioloop, transports, servers, unique):
    transport = transports()
    topic = unique("pikaloop")
    endpoint = Echo()
    servers(transport, nt.Target(topic=topic, server="s1"), [endpoint])
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=20)
    assert client.call({}, "echo", value={"a": 1}) == {"a": 1}
    for i in range(20):
        client.cast({}, "note", value=i)
    assert wait_for(lambda: len(endpoint.casts) == 20, timeout=30)
    check_concurrent_calls(client)
    assert len(pika_ioloop) == 2  # the sending and the listening connection


def test_notifications_on_pikas_own_loop(pika_ioloop, transports, unique):
    transport = transports(kind="notification")
    topic = unique("pikaloopnote")
    check_notifications_round_trip(transport, topic)
    assert len(pika_ioloop) == 2
