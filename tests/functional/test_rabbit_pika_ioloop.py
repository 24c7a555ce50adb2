"""The RabbitMQ driver on pika's own ``IOLoop``, as on a platform without epoll: every pika
call is handed to the I/O thread (publishes batched in the publisher's outbox), and calls,
casts, concurrent callers and notifications behave as on the lending loop."""
from __future__ import annotations

import threading

import pytest

import notify_transport as nt
from notify_transport import rpc
from notify_transport.drivers.rabbit import connection
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
    results, errors = [], []

    def caller(n):
        try:
            results.extend(client.call({}, "echo", value=[n, i]) for i in range(15))
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert sorted(map(tuple, results)) == [(n, i) for n in range(4) for i in range(15)]
    assert len(pika_ioloop) == 2  # the sending and the listening connection


def test_notifications_on_pikas_own_loop(pika_ioloop, transports, unique):
    transport = transports(kind="notification")
    topic = unique("pikaloopnote")
    got: list = []

    class Endpoint:
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            got.append(payload["n"])

    listener = nt.get_notification_listener(transport, [nt.Target(topic=topic)], [Endpoint()])
    listener.start()
    try:
        notifier = nt.Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
        for i in range(25):
            notifier.info({}, "ev", {"n": i})
        assert transport.flush(30) == 0
        assert wait_for(lambda: len(got) == 25, timeout=30)
        assert sorted(got) == list(range(25))
        assert len(pika_ioloop) == 2
    finally:
        listener.stop()
        listener.wait()
