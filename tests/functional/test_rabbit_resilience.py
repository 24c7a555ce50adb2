"""Failures on the real RabbitMQ: a broker restart, failover, an unreachable broker,
virtual hosts the user cannot use, wrong credentials (never shown in logs)."""
from __future__ import annotations

import logging
import threading
import time
import uuid

import pytest

import notify_transport as nt
from notify_transport import rpc
from notify_transport.exceptions import (AccessDenied, MessageDeliveryFailure, MessagingTimeout,
                                         ServerListenError)
from notify_transport.testing.brokers import free_port
from endpoints import IdRecorder
from rabbit_fixtures import (FAST_RETRY, RABBIT_HOST, RABBIT_PORT, rabbit_url, rabbitmqctl,
                             wait_for, wait_rabbit_ready)

pytestmark = pytest.mark.functional


class Echo:
    def __init__(self):
        self.seen: list = []
        self.sleeping = threading.Event()

    def echo(self, ctxt, value):
        self.seen.append(value)
        return value

    def sleep(self, ctxt, seconds):
        self.sleeping.set()
        time.sleep(seconds)  # slow work, as an endpoint's
        return seconds


def call_until_ok(client, deadline_s: float = 30.0):
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return client.prepare(timeout=2).call({}, "echo", value="back")
        except MessagingTimeout:
            if time.monotonic() > deadline:
                raise


def test_broker_restart_recovery(transports, servers, unique, rabbit_admin):
    """stop_app/start_app: calls in flight time out, everything recovers by itself,
    and notifications sent during the outage are delivered afterwards."""
    url = rabbit_url(query=FAST_RETRY)
    topic = unique("restart")
    server_transport = transports(url)
    client_transport = transports(url)
    notify_transport = transports(url, kind="notify")
    endpoint = Echo()
    servers(server_transport, nt.Target(topic=topic, server="s1"), [endpoint])
    client = rpc.get_rpc_client(client_transport, nt.Target(topic=topic), timeout=5)
    notes = IdRecorder()
    # No pool: the topic.priority queue, which the sender declares too, so that what is
    # sent while the listener reconnects waits for it. (A pool's queue is the listener's;
    # with the default non-durable queues it is gone until the listener declares it again.)
    listener = nt.get_notification_listener(transports(url, kind="notify"), [nt.Target(topic=topic)],
                                            [notes])
    listener.start()
    notifier = nt.Notifier(notify_transport, publisher_id="p", driver="messagingv2", topics=[topic])
    try:
        assert client.call({}, "echo", value="before") == "before"
        notifier.info({}, "ev", "before")
        assert wait_for(lambda: notes.payloads == ["before"])

        outcome: dict = {}

        def in_flight():
            started = time.monotonic()
            try:
                client.prepare(timeout=2).call({}, "sleep", seconds=4)
                outcome["result"] = "answered"
            except MessagingTimeout:
                outcome["result"] = "timeout"
            outcome["elapsed"] = time.monotonic() - started

        caller = threading.Thread(target=in_flight)
        try:
            caller.start()
            assert endpoint.sleeping.wait(10)  # the call is in flight
            rabbitmqctl("stop_app")
            started = time.monotonic()
            with pytest.raises(MessagingTimeout):
                client.prepare(timeout=1).call({}, "echo", value="during")
            assert time.monotonic() - started < 2.5
            notifier.info({}, "ev", "during")  # does not block; sent after the reconnect
            caller.join(5)
            assert outcome["result"] == "timeout" and outcome["elapsed"] < 3
        finally:
            rabbitmqctl("start_app")
            wait_rabbit_ready()

        assert call_until_ok(client) == "back"
        client.cast({}, "echo", value="cast-after")
        client.prepare(fanout=True).cast({}, "echo", value="fanout-after")
        assert wait_for(lambda: {"cast-after", "fanout-after"} <= set(endpoint.seen), timeout=10)
        notifier.info({}, "ev", "after")
        assert notify_transport.flush(15) == 0
        assert wait_for(lambda: sorted(notes.payloads) == ["after", "before", "during"], timeout=15)
        assert notify_transport.delivery_stats()["failed"] == 0
    finally:
        listener.stop()
        listener.wait()


def test_failover_to_the_next_host(transports, servers, unique):
    dead = f"127.0.0.1:{free_port()}"
    url = f"rabbit://guest:guest@{dead},{RABBIT_HOST}:{RABBIT_PORT}/?{FAST_RETRY}"
    topic = unique("failover")
    for _ in range(3):  # hosts are shuffled, as oslo does; try both orders
        transport = transports(url)
        servers(transport, nt.Target(topic=topic, server=uuid.uuid4().hex[:6]), [Echo()])
        client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=10)
        assert client.call({}, "echo", value=1) == 1


def test_unreachable_broker_fails_within_bounds(transports, unique):
    url = f"rabbit://guest:guest@127.0.0.1:{free_port()}/?{FAST_RETRY}"
    transport = transports(url)
    client = rpc.get_rpc_client(transport, nt.Target(topic=unique("down")), timeout=1.5)
    started = time.monotonic()
    with pytest.raises(MessagingTimeout):
        client.call({}, "echo", value=1)
    assert time.monotonic() - started < 3
    started = time.monotonic()
    with pytest.raises(MessageDeliveryFailure):
        client.prepare(retry=0).cast({}, "echo", value=1)
    with pytest.raises(MessageDeliveryFailure):
        client.prepare(retry=1).cast({}, "echo", value=1)
    assert time.monotonic() - started < 10

    notify_transport = transports(url, kind="notify")
    notifier = nt.Notifier(notify_transport, publisher_id="p", driver="messagingv2",
                           topics=[unique("down")], retry=0)
    notifier.info({}, "ev", 1)  # never raises (oslo semantics); counted and logged instead
    assert notify_transport.flush(10) == 0
    assert notify_transport.delivery_stats()["failed"] == 1


@pytest.fixture(scope="module")
def vhosts():
    """Two scratch vhosts: one guest may use, one it may not (guest only has '/')."""
    allowed = f"nt_test_vh_ok_{uuid.uuid4().hex[:6]}"
    denied = f"nt_test_vh_no_{uuid.uuid4().hex[:6]}"
    rabbitmqctl("add_vhost", allowed)
    rabbitmqctl("set_permissions", "-p", allowed, "guest", ".*", ".*", ".*")
    rabbitmqctl("add_vhost", denied)
    try:
        yield allowed, denied
    finally:
        rabbitmqctl("delete_vhost", allowed, check=False)
        rabbitmqctl("delete_vhost", denied, check=False)


def test_vhost_without_permission_gives_a_clear_error(rabbit, transports, unique, vhosts):
    _allowed, denied = vhosts
    url = rabbit_url(denied, FAST_RETRY)
    transport = transports(url)
    client = rpc.get_rpc_client(transport, nt.Target(topic=unique("vh")), timeout=10)
    started = time.monotonic()
    with pytest.raises(AccessDenied) as err:
        client.call({}, "echo", value=1)
    assert time.monotonic() - started < 5  # at once, not after the call timeout
    assert denied in str(err.value) and "guest" in str(err.value) and "refused" in str(err.value)
    with pytest.raises(AccessDenied):
        client.cast({}, "echo", value=1)
    server = rpc.get_rpc_server(transport, nt.Target(topic=unique("vh"), server="s"), [Echo()])
    with pytest.raises(ServerListenError) as listen_err:
        server.start()
    assert denied in str(listen_err.value)
    notify_transport = transports(url, kind="notify")
    listener = nt.get_notification_listener(notify_transport, [nt.Target(topic=unique("vh"))], [IdRecorder()])
    with pytest.raises(Exception, match="refused"):
        listener.start()


def test_vhosts_are_isolated(rabbit, transports, servers, unique, vhosts):
    allowed, _denied = vhosts
    topic = unique("vhiso")
    vhost_transport = transports(rabbit_url(allowed))
    root_transport = transports(rabbit)
    in_vhost, in_root = Echo(), Echo()
    servers(vhost_transport, nt.Target(topic=topic, server="s"), [in_vhost])
    servers(root_transport, nt.Target(topic=topic, server="s"), [in_root])
    client = rpc.get_rpc_client(transports(rabbit_url(allowed)), nt.Target(topic=topic), timeout=10)
    for i in range(5):
        assert client.call({}, "echo", value=i) == i
    assert in_vhost.seen == list(range(5)) and in_root.seen == []

    notes_vhost, notes_root = IdRecorder(), IdRecorder()
    listeners = [nt.get_notification_listener(transports(rabbit_url(allowed), kind="notify"),
                                              [nt.Target(topic=topic)], [notes_vhost]),
                 nt.get_notification_listener(transports(rabbit, kind="notify"),
                                              [nt.Target(topic=topic)], [notes_root])]
    for listener in listeners:
        listener.start()
    try:
        notify_transport = transports(rabbit_url(allowed), kind="notify")
        nt.Notifier(notify_transport, publisher_id="p", driver="messagingv2",
                    topics=[topic]).info({}, "ev", "in-vhost")
        notify_transport.flush(5)
        assert wait_for(lambda: notes_vhost.payloads == ["in-vhost"])
        # one sent to the root vhost now comes after anything that leaked there (same queue)
        root_notify = transports(rabbit, kind="notify")
        nt.Notifier(root_notify, publisher_id="p", driver="messagingv2",
                    topics=[topic]).info({}, "ev", "in-root")
        root_notify.flush(5)
        assert wait_for(lambda: notes_root.payloads == ["in-root"])
        assert notes_vhost.payloads == ["in-vhost"]
    finally:
        for listener in listeners:
            listener.stop()
            listener.wait()


def test_wrong_password_is_refused_and_never_logged(transports, unique, caplog):
    secret = f"s3cr3t-{uuid.uuid4().hex}"
    url = f"rabbit://guest:{secret}@{RABBIT_HOST}:{RABBIT_PORT}/?{FAST_RETRY}"
    caplog.set_level(logging.DEBUG)
    transport = transports(url)
    client = rpc.get_rpc_client(transport, nt.Target(topic=unique("pw")), timeout=5)
    with pytest.raises(AccessDenied) as err:
        client.call({}, "echo", value=1)
    assert "login" in str(err.value)
    for text in (caplog.text, str(err.value), repr(transport), repr(transport.driver),
                 repr(transport.driver.settings.endpoints), repr(transport.url)):
        assert secret not in text


def test_queue_deleted_under_a_running_server_is_declared_again(transports, servers, unique,
                                                                 rabbit_admin):
    transport = transports()
    topic = unique("deleted")
    servers(transport, nt.Target(topic=topic, server="s1"), [Echo()])
    client = rpc.get_rpc_client(transports(), nt.Target(topic=topic), timeout=10)
    assert client.call({}, "echo", value=1) == 1
    rabbit_admin.delete_queue(topic)  # the broker cancels the consumer
    assert wait_for(lambda: rabbit_admin.queue_exists(topic), timeout=10)
    assert client.call({}, "echo", value=2) == 2


def test_entities_declared_with_other_attributes_are_used_as_they_are(transports, servers, unique,
                                                                      rabbit_admin, caplog):
    """Another service made the exchange and queue durable (oslo falls back the same way)."""
    topic = unique("durable")
    exchange = unique("durable_ex")
    channel = rabbit_admin._channel()  # noqa: SLF001
    channel.exchange_declare(exchange, "topic", durable=True)
    channel.queue_declare(topic, durable=True)
    channel.queue_bind(topic, exchange, topic)
    channel.close()
    rabbit_admin.exchanges.add(exchange)
    transport = transports()
    servers(transport, nt.Target(exchange=exchange, topic=topic, server="s1"), [Echo()])
    client = rpc.get_rpc_client(transports(), nt.Target(exchange=exchange, topic=topic), timeout=10)
    assert client.call({}, "echo", value="ok") == "ok"
    client.cast({}, "echo", value="cast")
    assert "already exists with other attributes" in caplog.text
