"""Wire compatibility with oslo.messaging 18.3.1's rabbit driver, both ways, on the real broker.

oslo.messaging registers some options only on the global ``cfg.CONF``, so both
libraries are driven with it here, which also shows that they share one
configuration without option conflicts.
"""
from __future__ import annotations

import contextlib
import json
import threading
import uuid

import pika
import pytest

oslo_messaging = pytest.importorskip("oslo_messaging")

import notify_transport as nt  # noqa: E402
from notify_transport import rpc  # noqa: E402
from notify_transport.exceptions import RemoteError  # noqa: E402
from rabbit_fixtures import wait_for  # noqa: E402

pytestmark = pytest.mark.functional


class InteropError(Exception):
    pass


class Endpoint:
    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: list[object] = []
        self.lock = threading.Lock()

    def echo(self, ctxt, value):
        with self.lock:
            self.seen.append(value)
        return {"server": self.name, "value": value, "user": ctxt.get("user")}

    def fail(self, ctxt):
        raise InteropError("interop failure")

    def fail_builtin(self, ctxt):
        raise ValueError("bad value")

    def values(self):
        with self.lock:
            return [v for v in self.seen if isinstance(v, (str, int))]


class Notes:
    def __init__(self) -> None:
        self.got: list[tuple] = []
        self.lock = threading.Lock()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        with self.lock:
            self.got.append(("info", ctxt, publisher_id, event_type, payload, metadata))

    def error(self, ctxt, publisher_id, event_type, payload, metadata):
        with self.lock:
            self.got.append(("error", ctxt, publisher_id, event_type, payload, metadata))


@pytest.fixture
def both(oslo_conf, rabbit, rabbit_admin):
    """(oslo transport, our transport) for RPC on one ConfigOpts; cleaned up after the test."""
    made: list[tuple[str, object]] = []
    servers: list[object] = []

    def make(kind: str = "rpc", allowed=None):
        if kind == "rpc":
            ot = oslo_messaging.get_rpc_transport(oslo_conf, rabbit, allowed_remote_exmods=allowed)
            our = rpc.get_rpc_transport(oslo_conf, rabbit, allowed_remote_exmods=allowed)
        else:
            ot = oslo_messaging.get_notification_transport(oslo_conf, rabbit)
            our = nt.get_notification_transport(oslo_conf, rabbit)
        made.extend([("oslo", ot), ("ours", our)])
        return ot, our

    make.servers = servers
    yield make
    for server in servers:
        with contextlib.suppress(Exception):
            server.stop()
            server.wait()
    for kind, transport in made:
        reply_q = getattr(getattr(transport, "_driver", None), "_reply_q", None)
        with contextlib.suppress(Exception):
            transport.cleanup()
        if kind == "oslo" and reply_q:
            rabbit_admin.delete_queue(reply_q)  # oslo leaves its reply queue to expire


def start(both, server):
    server.start()
    both.servers.append(server)
    return server


def test_rpc_both_ways(both, unique, rabbit_admin):
    ot, our = both(allowed=[__name__])
    topic = unique("interop")
    oslo_end, our_end = Endpoint("oslo"), Endpoint("ours")
    start(both, oslo_messaging.get_rpc_server(ot, oslo_messaging.Target(topic=topic, server="o1"),
                                              [oslo_end]))
    start(both, rpc.get_rpc_server(our, nt.Target(topic=topic, server="n1"), [our_end]))
    # oslo's start() returns before its consumer is declared: ask the broker
    assert rabbit_admin.wait_consumers(f"{topic}.o1", f"{topic}.n1")
    assert rabbit_admin.wait_consumers(topic, at_least=2)
    our_client = rpc.get_rpc_client(our, nt.Target(topic=topic), timeout=10)
    oslo_client = oslo_messaging.get_rpc_client(ot, oslo_messaging.Target(topic=topic), timeout=10)

    # server-targeted calls, context included
    assert our_client.prepare(server="o1").call({"user": "u1"}, "echo", value=[1, "two"]) == \
        {"server": "oslo", "value": [1, "two"], "user": "u1"}
    assert oslo_client.prepare(server="n1").call({"user": "u2"}, "echo", value={"k": 3}) == \
        {"server": "ours", "value": {"k": 3}, "user": "u2"}

    # a topic call is served by either library's server
    served = {our_client.call({}, "echo", value=i)["server"] for i in range(12)}
    served |= {oslo_client.call({}, "echo", value=i)["server"] for i in range(12)}
    assert served == {"oslo", "ours"}

    # casts, targeted and fanout
    our_client.prepare(server="o1").cast({}, "echo", value="cast-to-oslo")
    oslo_client.prepare(server="n1").cast({}, "echo", value="cast-to-ours")
    our_client.prepare(fanout=True).cast({}, "echo", value="fan-ours")
    oslo_client.prepare(fanout=True).cast({}, "echo", value="fan-oslo")
    # a fanout queue keeps each sender's order: once the senders' last casts are in,
    # a second copy of an earlier one would be too
    our_client.prepare(fanout=True).cast({}, "echo", value="last-ours")
    oslo_client.prepare(fanout=True).cast({}, "echo", value="last-oslo")
    assert wait_for(lambda: {"cast-to-oslo", "last-ours", "last-oslo"} <= set(oslo_end.values()))
    assert wait_for(lambda: {"cast-to-ours", "last-ours", "last-oslo"} <= set(our_end.values()))
    for end in (oslo_end, our_end):
        fan = [v for v in end.values() if isinstance(v, str) and v.startswith("fan-")]
        assert sorted(fan) == ["fan-oslo", "fan-ours"]  # once each


def test_remote_errors_both_ways(both, unique, rabbit_admin):
    topic = unique("interr")
    ot, our = both(allowed=[__name__])
    ot_plain, our_plain = both()
    start(both, oslo_messaging.get_rpc_server(ot, oslo_messaging.Target(topic=topic, server="o1"),
                                              [Endpoint("oslo")]))
    start(both, rpc.get_rpc_server(our, nt.Target(topic=topic, server="n1"), [Endpoint("ours")]))
    assert rabbit_admin.wait_consumers(f"{topic}.o1", f"{topic}.n1")
    clients = {
        ("ours", "allowed"): rpc.get_rpc_client(our, nt.Target(topic=topic), timeout=10),
        ("ours", "plain"): rpc.get_rpc_client(our_plain, nt.Target(topic=topic), timeout=10),
        ("oslo", "allowed"): oslo_messaging.get_rpc_client(ot, oslo_messaging.Target(topic=topic), timeout=10),
        ("oslo", "plain"): oslo_messaging.get_rpc_client(ot_plain, oslo_messaging.Target(topic=topic), timeout=10),
    }
    for (lib, mode), client in clients.items():
        server = "n1" if lib == "oslo" else "o1"  # always the other library's server
        target = client.prepare(server=server)
        with pytest.raises(ValueError) as builtin:
            target.call({}, "fail_builtin")
        assert "bad value" in str(builtin.value)
        if mode == "allowed":
            with pytest.raises(InteropError) as app:
                target.call({}, "fail")
            assert type(app.value).__name__ == "InteropError_Remote"
        else:
            remote_error = RemoteError if lib == "ours" else oslo_messaging.RemoteError
            with pytest.raises(remote_error) as app:
                target.call({}, "fail")
            assert app.value.exc_type == "InteropError"
            assert app.value.value == "interop failure"


def _capture(rabbit_admin, queue: str, send) -> tuple[pika.BasicProperties, dict]:
    """Send with ``send`` to a queue nobody consumes and read back the raw message."""
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1"))
    try:
        channel = conn.channel()
        channel.exchange_declare("openstack", "topic", durable=False, auto_delete=False)
        channel.queue_declare(queue)
        channel.queue_bind(queue, "openstack", queue)
        rabbit_admin.queues.add(queue)
        sender = threading.Thread(target=send)  # the call waits; its request expires with it
        sender.start()
        got: list[tuple] = []
        try:
            wait_for(lambda: got.append(channel.basic_get(queue, auto_ack=True)) or got[-1][0] is not None,
                     timeout=5)
        finally:
            sender.join()
    finally:
        conn.close()
    method, props, body = got[-1]
    if method is None:
        raise AssertionError("nothing captured")
    return props, json.loads(body)


def test_request_wire_format_matches_oslo(both, unique, rabbit_admin):
    ot, our = both()
    captured = {}
    for lib in ("oslo", "ours"):
        queue = unique("wire")
        if lib == "oslo":
            client = oslo_messaging.get_rpc_client(ot, oslo_messaging.Target(topic=queue), timeout=1)
        else:
            client = rpc.get_rpc_client(our, nt.Target(topic=queue), timeout=1)

        def send(client=client):
            with contextlib.suppress(Exception):  # nobody answers
                client.prepare(version="1.1", namespace="ns").call({"user": "w"}, "do", a=1)

        captured[lib] = _capture(rabbit_admin, queue, send)
    (oprops, obody), (nprops, nbody) = captured["oslo"], captured["ours"]
    for attr in ("content_type", "content_encoding", "delivery_mode", "priority"):
        assert getattr(nprops, attr) == getattr(oprops, attr), attr
    assert int(nprops.expiration) <= int(oprops.expiration) <= 1000
    assert set(nbody) == set(obody) == {"oslo.version", "oslo.message"}
    oinner, ninner = json.loads(obody["oslo.message"]), json.loads(nbody["oslo.message"])
    assert set(ninner) == set(oinner)
    for key in ("method", "args", "version", "namespace", "_context_user", "_timeout"):
        assert ninner[key] == oinner[key], key
    assert ninner["_reply_q"].startswith("reply_") and oinner["_reply_q"].startswith("reply_")


@pytest.mark.parametrize("driver", ["messagingv2", "messaging"])
def test_notifications_both_ways(both, unique, rabbit_admin, driver):
    ot, our = both("notify")
    topic = unique("intnote")
    oslo_pool, our_pool, shared = Notes(), Notes(), Notes()
    oslo_listener = oslo_messaging.get_notification_listener(
        ot, [oslo_messaging.Target(topic=topic)], [oslo_pool],
        pool=f"{topic}_oslo_pool")
    our_listener = nt.get_notification_listener(our, [nt.Target(topic=topic)], [our_pool],
                                                pool=f"{topic}_our_pool")
    # no pool: the topic.priority queues themselves, shared by the two libraries' listeners
    our_shared = nt.get_notification_listener(our, [nt.Target(topic=topic)], [shared])
    rabbit_admin.queues.update({f"{topic}_oslo_pool", f"{topic}_our_pool"})
    for listener in (oslo_listener, our_listener, our_shared):
        start(both, listener)
    # oslo's start() returns before it consumes: ask the broker
    assert rabbit_admin.wait_consumers(f"{topic}_oslo_pool", f"{topic}_our_pool", f"{topic}.info",
                                       f"{topic}.error")

    oslo_notifier = oslo_messaging.Notifier(ot, publisher_id="oslo.host", driver=driver, topics=[topic])
    our_notifier = nt.Notifier(our, publisher_id="ours.host", driver=driver, topics=[topic])
    oslo_notifier.info({}, "compute.instance.create", {"id": 1, "name": "é"})
    our_notifier.info({"user": "u"}, "compute.instance.delete", {"id": 2})
    our_notifier.error({}, "compute.instance.error", {"id": 3})
    our.flush(5)

    expected = {("info", "oslo.host", "compute.instance.create"),
                ("info", "ours.host", "compute.instance.delete"),
                ("error", "ours.host", "compute.instance.error")}
    # a last notification at each priority: each queue keeps order, so once it is in,
    # a second copy of an earlier one would be too
    our_notifier.info({}, "last", {})
    our_notifier.error({}, "last", {})
    our.flush(5)
    for notes in (oslo_pool, our_pool, shared):
        assert wait_for(lambda notes=notes: sum(g[3] == "last" for g in notes.got) == 2, timeout=10)
    for notes in (oslo_pool, our_pool, shared):
        got = [g for g in notes.got if g[3] != "last"]
        assert {(p, pub, ev) for p, _c, pub, ev, _pl, _m in got} == expected
        assert len(got) == 3
    by_event = {ev: (ctxt, payload, meta) for _p, ctxt, _pub, ev, payload, meta in our_pool.got}
    del by_event["last"]
    assert by_event["compute.instance.create"][1] == {"id": 1, "name": "é"}
    assert by_event["compute.instance.delete"][0] == {"user": "u"}
    oslo_seen = {ev: (payload, meta) for _p, _c, _pub, ev, payload, meta in oslo_pool.got if ev != "last"}
    ours_seen = {ev: (payload, meta) for _p, _c, _pub, ev, payload, meta in our_pool.got if ev != "last"}
    assert oslo_seen == ours_seen  # identical payloads and metadata (message_id, timestamp)


def test_notification_sent_before_any_listener_waits_in_queue(both, unique):
    """Like oslo, the sender declares topic.priority, so a later pool-less listener gets it."""
    ot, our = both("notify")
    topic = unique("early")
    nt.Notifier(our, publisher_id="p", driver="messagingv2", topics=[topic]).info({}, "e.early", {"n": 1})
    oslo_messaging.Notifier(ot, publisher_id="o", driver="messagingv2", topics=[topic]).info({}, "e.early2", {})
    our.flush(5)
    notes = Notes()
    start(both, nt.get_notification_listener(our, [nt.Target(topic=topic)], [notes]))
    assert wait_for(lambda: len(notes.got) == 2)
    assert {g[3] for g in notes.got} == {"e.early", "e.early2"}


def test_unique_ids_and_queue_attributes_compatible(both, unique, rabbit_admin):
    """Queues declared by oslo are re-declared by us without PRECONDITION_FAILED, and the reverse."""
    ot, our = both()
    topic = unique("attrs")
    first = start(both, oslo_messaging.get_rpc_server(ot, oslo_messaging.Target(topic=topic, server="x"),
                                                      [Endpoint("oslo")]))
    assert rabbit_admin.wait_consumers(f"{topic}.x")
    start(both, rpc.get_rpc_server(our, nt.Target(topic=topic, server="x"), [Endpoint("ours")]))
    first.stop()
    first.wait()
    client = rpc.get_rpc_client(our, nt.Target(topic=topic), timeout=10)
    assert client.prepare(server="x").call({}, "echo", value=uuid.uuid4().hex)["server"] == "ours"
