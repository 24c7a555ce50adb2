"""``ntrabbit://`` and oslo's ``rabbit://`` in one deployment, both ways, through oslo.messaging's API.

Every test runs once per direction: a server (or listener) on one scheme and
a client (or notifier) on the other, plus servers on both schemes behind one
topic where it matters (topic calls, fanout). This is a rolling upgrade seen
from the services: only the scheme of their transport_url differs.

oslo.messaging registers some options only on the global ``cfg.CONF``, so the
tests use it, as services do.
"""
from __future__ import annotations

import contextlib
import threading
import time
import uuid
from typing import Any, Callable, Iterator

import pytest
from oslo_config import cfg

oslo_messaging = pytest.importorskip("oslo_messaging")

from rabbit_fixtures import rabbit_url  # noqa: E402
from waits import wait_until  # noqa: E402

pytestmark = pytest.mark.functional

#: (scheme of the servers/listeners, scheme of the clients/notifiers)
DIRECTIONS = [("rabbit", "ntrabbit"), ("ntrabbit", "rabbit")]


class ServiceError(Exception):
    """An endpoint's own exception class, re-raised by callers that allow this module."""


class Endpoint:
    def __init__(self, name: str) -> None:
        self.name = name
        self.got: list[Any] = []
        self._lock = threading.Lock()

    def echo(self, ctxt: dict, value: Any) -> dict:
        with self._lock:
            self.got.append(value)
        return {"server": self.name, "value": value, "user": ctxt.get("user")}

    def fail(self, ctxt: dict, text: str) -> None:
        raise ServiceError(text)

    def fail_builtin(self, ctxt: dict) -> None:
        raise KeyError("missing")

    def slow(self, ctxt: dict, seconds: float) -> str:
        time.sleep(seconds)
        return "late"

    def values(self) -> list[Any]:
        with self._lock:
            return list(self.got)

    def texts(self) -> set[str]:
        return {v for v in self.values() if isinstance(v, str)}


class Notes:
    def __init__(self) -> None:
        self.got: list[tuple[str, str, Any]] = []
        self.batches: list[int] = []

    def info(self, ctxt: dict, publisher_id: str, event_type: str, payload: Any, metadata: dict) -> None:
        self.got.append(("info", event_type, payload))

    def error(self, ctxt: dict, publisher_id: str, event_type: str, payload: Any, metadata: dict) -> None:
        self.got.append(("error", event_type, payload))


class BatchNotes:
    def __init__(self) -> None:
        self.batches: list[list[Any]] = []

    def info(self, messages: list[dict]) -> None:
        self.batches.append([m["payload"] for m in messages])

    def received(self) -> list[Any]:
        return [p for batch in self.batches for p in batch]


@pytest.fixture
def deployment(oslo_conf: cfg.ConfigOpts, rabbit: str, rabbit_admin: Any) -> Iterator[Callable[..., Any]]:
    """``deployment(scheme, kind)`` -> a transport of that scheme; all stopped and cleaned up after."""
    transports: list[Any] = []
    servers: list[Any] = []

    def make(scheme: str, kind: str = "rpc") -> Any:
        url = rabbit_url().replace("rabbit://", f"{scheme}://", 1)
        if kind == "rpc":
            transport = oslo_messaging.get_rpc_transport(oslo_conf, url, allowed_remote_exmods=[__name__])
        else:
            transport = oslo_messaging.get_notification_transport(oslo_conf, url)
        transports.append(transport)
        return transport

    def started(server: Any) -> Any:
        server.start()
        servers.append(server)
        return server

    make.started = started  # type: ignore[attr-defined]
    yield make
    for server in servers:
        with contextlib.suppress(Exception):
            server.stop()
            server.wait()
    for transport in transports:
        with contextlib.suppress(Exception):
            transport.cleanup()


def rpc_server(deployment: Any, transport: Any, topic: str, server: str, endpoint: Any) -> Any:
    return deployment.started(oslo_messaging.get_rpc_server(
        transport, oslo_messaging.Target(topic=topic, server=server), [endpoint]))


def wait_serving(client: Any, servers: dict[str, Endpoint]) -> None:
    """Until each server answers a call to it and has received a fanout cast (its three queues live).

    oslo's own server returns from ``start()`` before its consumers are declared.
    """
    for name in servers:
        assert wait_until(lambda name=name: _answers(client.prepare(server=name, timeout=1))), name
    probe = f"probe-{uuid.uuid4().hex[:6]}"
    fanout = client.prepare(fanout=True)

    def all_probed() -> bool:
        fanout.cast({}, "echo", value=probe)
        return all(wait_until(lambda e=e: probe in e.values(), timeout=0.3) for e in servers.values())

    assert wait_until(all_probed, timeout=20)


def _answers(client: Any) -> bool:
    with contextlib.suppress(oslo_messaging.MessagingTimeout):
        client.call({}, "echo", value="ping")
        return True
    return False


@pytest.mark.parametrize("server_scheme,client_scheme", DIRECTIONS)
def test_call_cast_fanout_and_replies_across_schemes(deployment, unique, server_scheme, client_scheme):
    topic = unique("ntr")
    here, there = Endpoint(server_scheme), Endpoint(client_scheme)
    rpc_server(deployment, deployment(server_scheme), topic, "a", here)
    rpc_server(deployment, deployment(client_scheme), topic, "b", there)
    client = oslo_messaging.get_rpc_client(deployment(client_scheme), oslo_messaging.Target(topic=topic),
                                           timeout=10)
    wait_serving(client, {"a": here, "b": there})

    # a server-targeted call and its reply cross the schemes, context included
    assert client.prepare(server="a").call({"user": "u1"}, "echo", value=[1, "two"]) == \
        {"server": server_scheme, "value": [1, "two"], "user": "u1"}
    # topic calls are shared by the servers of both schemes
    assert {client.call({}, "echo", value=i)["server"] for i in range(16)} == {server_scheme, client_scheme}
    # a cast to the other scheme's server, and a fanout reaching both servers once each
    fan = f"fan-{uuid.uuid4().hex[:6]}"
    client.prepare(server="a").cast({}, "echo", value="cast")
    client.prepare(fanout=True).cast({}, "echo", value=fan)
    assert wait_until(lambda: {"cast", fan} <= here.texts())
    assert wait_until(lambda: fan in there.values())
    # the next fanout marks the end of the first one's delivery: no duplicate before it
    last = f"fan-last-{uuid.uuid4().hex[:6]}"
    client.prepare(fanout=True).cast({}, "echo", value=last)
    for end in (here, there):
        assert wait_until(lambda end=end: last in end.values())
        assert end.values().count(fan) == 1


@pytest.mark.parametrize("server_scheme,client_scheme", DIRECTIONS)
def test_remote_exceptions_are_oslo_classes_across_schemes(deployment, unique, server_scheme, client_scheme):
    topic = unique("ntrerr")
    endpoint = Endpoint(server_scheme)
    rpc_server(deployment, deployment(server_scheme), topic, "a", endpoint)
    allowed = oslo_messaging.get_rpc_client(deployment(client_scheme), oslo_messaging.Target(topic=topic),
                                            timeout=10)
    plain_transport = oslo_messaging.get_rpc_transport(
        cfg.CONF, rabbit_url().replace("rabbit://", f"{client_scheme}://", 1))
    try:
        plain = oslo_messaging.get_rpc_client(plain_transport, oslo_messaging.Target(topic=topic), timeout=10)
        wait_serving(allowed, {"a": endpoint})
        with pytest.raises(ServiceError) as raised:
            allowed.call({}, "fail", text="no such flavor")
        assert type(raised.value).__name__ == "ServiceError_Remote"
        assert str(raised.value).startswith("no such flavor")
        with pytest.raises(KeyError):
            allowed.call({}, "fail_builtin")
        with pytest.raises(oslo_messaging.RemoteError) as remote:
            plain.call({}, "fail", text="hidden class")
        assert remote.value.exc_type == "ServiceError"
        assert remote.value.value == "hidden class"
        with pytest.raises(oslo_messaging.RemoteError) as no_method:
            plain.call({}, "no_such_method")
        assert no_method.value.exc_type == "NoSuchMethod"
    finally:
        plain_transport.cleanup()


@pytest.mark.parametrize("scheme", ["ntrabbit"])
def test_call_times_out_on_time_and_mandatory_call_fails_fast(deployment, unique, scheme):
    topic = unique("ntrto")
    endpoint = Endpoint(scheme)
    transport = deployment(scheme)
    rpc_server(deployment, transport, topic, "a", endpoint)
    client = oslo_messaging.get_rpc_client(transport, oslo_messaging.Target(topic=topic), timeout=10)
    wait_serving(client, {"a": endpoint})
    with pytest.raises(oslo_messaging.MessagingTimeout):  # the endpoint would answer "late" after 3 s
        client.prepare(timeout=1).call({}, "slow", seconds=3)
    nobody = oslo_messaging.get_rpc_client(transport, oslo_messaging.Target(topic=unique("ntrnone")),
                                           timeout=30, transport_options=oslo_messaging.TransportOptions(
                                               at_least_once=True))
    with pytest.raises(oslo_messaging.MessageUndeliverable):
        nobody.call({}, "echo", value=1)


@pytest.mark.parametrize("listener_scheme,notifier_scheme", DIRECTIONS)
def test_notifications_and_batches_across_schemes(deployment, unique, rabbit_admin, listener_scheme,
                                                  notifier_scheme):
    topic = unique("ntrn")
    notes, batch = Notes(), BatchNotes()
    listening = deployment(listener_scheme, "notifications")
    deployment.started(oslo_messaging.get_notification_listener(
        listening, [oslo_messaging.Target(topic=topic)], [notes]))
    deployment.started(oslo_messaging.get_batch_notification_listener(
        listening, [oslo_messaging.Target(topic=topic)], [batch], pool=f"{topic}_pool",
        batch_size=5, batch_timeout=1))
    rabbit_admin.queues.add(f"{topic}_pool")
    assert wait_until(lambda: rabbit_admin.queue_exists(f"{topic}_pool")
                      and rabbit_admin.queue_info(f"{topic}_pool")[1] >= 1
                      and rabbit_admin.queue_info(f"{topic}.info")[1] >= 1)
    notifier = oslo_messaging.Notifier(deployment(notifier_scheme, "notifications"), publisher_id="svc",
                                       driver="messagingv2", topics=[topic])
    for i in range(7):
        notifier.info({}, "compute.instance.create", {"n": i})
    notifier.error({}, "compute.instance.fail", {"why": "x"})
    assert wait_until(lambda: len(notes.got) == 8)
    assert sorted(p["n"] for kind, _, p in notes.got if kind == "info") == list(range(7))
    assert ("error", "compute.instance.fail", {"why": "x"}) in notes.got
    # the pool's batch listener got the info ones, in batches of at most five
    assert wait_until(lambda: sorted(p["n"] for p in batch.received()) == list(range(7)))
    assert max(len(b) for b in batch.batches) <= 5
