"""RPC over the real RabbitMQ through the public API: call, cast, fanout, server-targeted,
timeouts, remote errors, version and namespace dispatch, access policies."""
from __future__ import annotations

import logging
import threading
import time

import pytest

import notify_transport as nt
from notify_transport import rpc
from notify_transport.exceptions import (InvalidTarget, MessageUndeliverable, MessagingTimeout,
                                         NoSuchMethod, RemoteError, RPCVersionCapError)
from rabbit_fixtures import wait_for

pytestmark = pytest.mark.functional


class AppError(Exception):
    """An application exception that clients may be allowed to re-raise."""


class Recorder:
    """An endpoint that records what it ran, and where."""

    def __init__(self, name: str = "server") -> None:
        self.name = name
        self.calls: list[tuple[str, object, dict]] = []
        self.lock = threading.Lock()

    def _note(self, method: str, ctxt: object, **kwargs: object) -> None:
        with self.lock:
            self.calls.append((method, ctxt, kwargs))

    def echo(self, ctxt, value):
        self._note("echo", ctxt, value=value)
        return {"server": self.name, "value": value, "ctxt": ctxt}

    def whoami(self, ctxt):
        self._note("whoami", ctxt)
        return self.name

    def fail(self, ctxt, message):
        self._note("fail", ctxt)
        raise AppError(message)

    def fail_builtin(self, ctxt):
        raise KeyError("missing-key")

    def sleep(self, ctxt, seconds):
        self._note("sleep", ctxt, seconds=seconds)
        time.sleep(seconds)  # slow work, as an endpoint's
        return seconds

    def _private(self, ctxt):
        return "secret"

    @rpc.expose
    def exposed(self, ctxt):
        return "exposed"

    @rpc.expected_exceptions(AppError)
    def expected(self, ctxt):
        raise AppError("expected one")

    def values(self):
        with self.lock:
            return [kw.get("value") for m, _c, kw in self.calls if m == "echo"]


def test_call_returns_result_and_passes_context(transports, servers, unique):
    transport = transports()
    topic = unique("call")
    servers(transport, nt.Target(topic=topic, server="s1"), [Recorder("s1")])
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=10)
    result = client.call({"user": "alice", "roles": ["admin"]}, "echo", value=[1, {"a": "é"}])
    assert result == {"server": "s1", "value": [1, {"a": "é"}],
                      "ctxt": {"user": "alice", "roles": ["admin"]}}


def test_cast_is_delivered_once(transports, servers, unique):
    transport = transports()
    topic = unique("cast")
    endpoint = Recorder()
    server = servers(transport, nt.Target(topic=topic, server="s1"), [endpoint])
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic))
    for i in range(20):
        assert client.cast({}, "echo", value=i) is None
    # the queue keeps order: a second copy of a cast would come before this last one, and
    # stopping the server waits for the requests it is running
    client.cast({}, "echo", value="last")
    assert wait_for(lambda: "last" in endpoint.values())
    server.stop()
    server.wait()
    assert sorted(v for v in endpoint.values() if v != "last") == list(range(20))


def test_topic_calls_are_shared_and_server_calls_reach_one_server(transports, servers, unique):
    topic = unique("servers")
    ends = {name: Recorder(name) for name in ("a", "b")}
    for name, endpoint in ends.items():
        servers(transports(), nt.Target(topic=topic, server=name), [endpoint])
    client = rpc.get_rpc_client(transports(), nt.Target(topic=topic), timeout=10)
    answered = {client.call({}, "whoami") for _ in range(20)}
    assert answered == {"a", "b"}  # round-robin over the topic queue
    for name in ("a", "b"):
        before = {n: len(e.calls) for n, e in ends.items()}
        for _ in range(5):
            assert client.prepare(server=name).call({}, "whoami") == name
        other = "b" if name == "a" else "a"
        assert len(ends[name].calls) == before[name] + 5
        assert len(ends[other].calls) == before[other]


def test_fanout_cast_reaches_every_server(transports, servers, unique):
    topic = unique("fanout")
    ends = [Recorder(n) for n in ("a", "b", "c")]
    for endpoint in ends:
        servers(transports(), nt.Target(topic=topic, server=endpoint.name), [endpoint])
    client = rpc.get_rpc_client(transports(), nt.Target(topic=topic))
    client.prepare(fanout=True).cast({}, "echo", value="all")
    assert wait_for(lambda: all(e.values() == ["all"] for e in ends))
    with pytest.raises(InvalidTarget):
        client.prepare(fanout=True).call({}, "echo", value=1)


def test_call_without_any_server_times_out_in_time(transports, unique):
    client = rpc.get_rpc_client(transports(), nt.Target(topic=unique("noserver")), timeout=1.0)
    started = time.monotonic()
    with pytest.raises(MessagingTimeout) as err:
        client.call({}, "echo", value=1)
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 2.5
    assert "no server listening" in str(err.value)


def test_call_to_queue_without_consumer_times_out(transports, servers, unique, rabbit_admin):
    """The server's queue outlives it (as with oslo); the request expires unanswered."""
    transport = transports()
    topic = unique("gone")
    server = servers(transport, nt.Target(topic=topic, server="s1"), [Recorder()])
    server.stop()
    server.wait()
    assert rabbit_admin.queue_exists(topic)
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=0.8)
    started = time.monotonic()
    with pytest.raises(MessagingTimeout):
        client.call({}, "echo", value=1)
    assert time.monotonic() - started < 2.5
    # the request carried the call's timeout as its expiration: nothing stays queued
    assert wait_for(lambda: rabbit_admin.queue_info(topic)[0] == 0, timeout=3)


def test_slow_server_times_out_then_next_call_works(transports, servers, unique):
    transport = transports()
    topic = unique("slow")
    servers(transport, nt.Target(topic=topic, server="s1"), [Recorder()])
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=10)
    started = time.monotonic()
    with pytest.raises(MessagingTimeout):
        client.prepare(timeout=0.5).call({}, "sleep", seconds=1.5)
    assert time.monotonic() - started < 1.5
    assert client.call({}, "echo", value="after")["value"] == "after"


def test_call_monitor_keeps_long_call_alive(transports, servers, unique):
    transport = transports()
    topic = unique("monitor")
    servers(transport, nt.Target(topic=topic, server="s1"), [Recorder()])
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=10)
    assert client.prepare(call_monitor_timeout=2).call({}, "sleep", seconds=3) == 3


def test_call_issued_before_the_server_starts_is_served(transports, servers, unique, caplog):
    """A call whose request finds no queue yet retries until a server appears (within its timeout)."""
    caplog.set_level(logging.DEBUG, "notify_transport.drivers.rabbit.rpc")
    transport = transports()
    topic = unique("early")
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=10)
    result: dict = {}
    caller = threading.Thread(target=lambda: result.update(r=client.call({}, "whoami")))
    caller.start()
    assert wait_for(lambda: any("no queue bound yet" in r.getMessage() for r in caplog.records))
    servers(transport, nt.Target(topic=topic, server="late"), [Recorder("late")])
    caller.join(10)
    assert result == {"r": "late"}


def test_remote_errors(transports, servers, unique):
    topic = unique("errors")
    servers(transports(), nt.Target(topic=topic, server="s1"), [Recorder()])
    plain = rpc.get_rpc_client(transports(), nt.Target(topic=topic), timeout=10)
    allowed = rpc.get_rpc_client(transports(allowed_remote_exmods=[__name__]),
                                 nt.Target(topic=topic), timeout=10)

    with pytest.raises(RemoteError) as err:
        plain.call({}, "fail", message="boom")
    assert err.value.exc_type == "AppError"
    assert err.value.value == "boom"
    assert any("AppError: boom" in line for line in err.value.traceback)

    with pytest.raises(AppError) as app_err:
        allowed.call({}, "fail", message="boom")
    assert type(app_err.value).__name__ == "AppError_Remote"
    assert str(app_err.value).startswith("boom")

    with pytest.raises(KeyError):  # builtins are always re-raised
        plain.call({}, "fail_builtin")

    with pytest.raises(AppError):  # expected exceptions reach the client as themselves
        allowed.call({}, "expected")

    with pytest.raises(RemoteError) as missing:
        plain.call({}, "no_such_method")
    assert missing.value.exc_type == "NoSuchMethod"

    allowed_ours = rpc.get_rpc_client(
        transports(allowed_remote_exmods=["notify_transport.exceptions"]), nt.Target(topic=topic),
        timeout=10)
    with pytest.raises(NoSuchMethod):
        allowed_ours.call({}, "no_such_method")


def test_version_and_namespace_dispatch(transports, servers, unique):
    class V1:
        target = nt.Target(version="1.3")

        def hello(self, ctxt):
            return "v1.3"

    class V2:
        target = nt.Target(version="2.1")

        def hello(self, ctxt):
            return "v2.1"

    class Admin:
        target = nt.Target(namespace="admin", version="1.0")

        def hello(self, ctxt):
            return "admin"

    topic = unique("versions")
    transport = transports()
    servers(transport, nt.Target(topic=topic, server="s1"), [V1(), V2(), Admin()])
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=10)
    assert client.call({}, "hello") == "v1.3"  # no version means 1.0
    assert client.prepare(version="1.2").call({}, "hello") == "v1.3"
    assert client.prepare(version="2.0").call({}, "hello") == "v2.1"
    assert client.prepare(namespace="admin").call({}, "hello") == "admin"
    with pytest.raises(RemoteError) as err:
        client.prepare(version="1.4").call({}, "hello")
    assert err.value.exc_type == "UnsupportedVersion"
    with pytest.raises(RemoteError) as err:
        client.prepare(namespace="admin", version="1.1").call({}, "hello")
    assert err.value.exc_type == "UnsupportedVersion"
    with pytest.raises(RemoteError) as err:
        client.prepare(namespace="other").call({}, "hello")
    assert err.value.exc_type == "UnsupportedVersion"

    capped = rpc.get_rpc_client(transport, nt.Target(topic=topic), version_cap="1.5", timeout=10)
    assert capped.can_send_version("1.4") and not capped.can_send_version("2.0")
    with pytest.raises(RPCVersionCapError):
        capped.prepare(version="2.0").call({}, "hello")


@pytest.mark.parametrize("policy, allowed, denied", [
    (None, ["echo", "exposed"], ["_private"]),
    (rpc.ExplicitRPCAccessPolicy, ["exposed"], ["echo", "_private"]),
])
def test_access_policy(transports, servers, unique, policy, allowed, denied):
    topic = unique("policy")
    transport = transports()
    servers(transport, nt.Target(topic=topic, server="s1"), [Recorder()], access_policy=policy)
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=10)
    for method in allowed:
        kwargs = {"value": 1} if method == "echo" else {}
        client.call({}, method, **kwargs)
    for method in denied:
        kwargs = {"value": 1} if method == "echo" else {}
        with pytest.raises(RemoteError) as err:
            client.call({}, method, **kwargs)
        assert err.value.exc_type == "NoSuchMethod"


def test_concurrent_calls_from_many_threads(transports, servers, unique):
    transport = transports()
    topic = unique("threads")
    servers(transport, nt.Target(topic=topic, server="s1"), [Recorder()])
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=20)
    results: dict[int, object] = {}

    def worker(base: int) -> None:
        for i in range(25):
            results[base + i] = client.call({}, "echo", value=base + i)["value"]

    threads = [threading.Thread(target=worker, args=(k * 100,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 200 and all(k == v for k, v in results.items())


def test_server_handles_calls_concurrently(transports, servers, unique):
    transport = transports()
    topic = unique("parallel")
    servers(transport, nt.Target(topic=topic, server="s1"), [Recorder()])
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=10)
    started = time.monotonic()
    threads = [threading.Thread(target=client.call, args=({}, "sleep"), kwargs={"seconds": 1})
               for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert time.monotonic() - started < 3  # not 5 s: workers run in parallel


def test_stop_finishes_requests_in_progress(transports, servers, unique):
    transport = transports()
    topic = unique("stop")
    endpoint = Recorder()
    server = servers(transport, nt.Target(topic=topic, server="s1"), [endpoint])
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=10)
    result: dict = {}
    caller = threading.Thread(target=lambda: result.update(r=client.call({}, "sleep", seconds=1)))
    caller.start()
    assert wait_for(lambda: [c[0] for c in endpoint.calls] == ["sleep"])  # in progress
    server.stop()
    server.wait()
    caller.join(5)
    assert result == {"r": 1}


class Holder:
    """An endpoint whose ``hold`` casts wait for ``release``; counts what it ran."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.count = 0
        self.lock = threading.Lock()

    def hold(self, ctxt, n):
        with self.lock:
            self.count += 1
        self.release.wait(30)


def test_servers_of_a_topic_share_its_backlog(transports, unique, fresh_conf):
    # With rabbit_qos_prefetch_count at 0 (oslo's "no limit") the broker used to push
    # a whole backlog to the first server consuming it: a second server of the topic
    # then got nothing while the first was busy. The RPC server now holds at most
    # rpc_prefetch_count requests unacknowledged.
    transport = transports()
    topic = unique("share")
    first, second = Holder(), Holder()
    second.release.set()
    servers = [rpc.get_rpc_server(transport, nt.Target(topic=topic, server=name), [endpoint])
               for name, endpoint in (("s1", first), ("s2", second))]
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=10)
    try:
        servers[0].start(override_pool_size=1)  # one worker: busy with the first request
        for n in range(300):
            client.cast({}, "hold", n=n)
        assert wait_for(lambda: first.count == 1)
        prefetch = fresh_conf.oslo_messaging_rabbit.rpc_prefetch_count
        servers[1].start()
        # s1 holds the one in progress and `prefetch` unacknowledged (one fewer if s2 took
        # the request the broker would have sent s1 after its first acknowledgement);
        # s2 gets the rest, and no more: s1 keeps what it holds
        assert wait_for(lambda: second.count >= 300 - 1 - prefetch, timeout=20), second.count
        assert second.count <= 300 - prefetch
        first.release.set()
        assert wait_for(lambda: first.count + second.count == 300, timeout=20)
    finally:
        first.release.set()
        for server in servers:
            server.stop()
            server.wait()


def test_unroutable_cast_is_reported(transports, unique, caplog):
    client = rpc.get_rpc_client(transports(), nt.Target(topic=unique("nobody")))
    client.cast({}, "echo", value=1)  # oslo semantics: not an error, but not silent either
    assert "was not delivered: no server listens" in caplog.text
    with pytest.raises(MessageUndeliverable):
        client.prepare(transport_options={"at_least_once": True}).cast({}, "echo", value=1)


def test_large_payload_round_trip(transports, servers, unique):
    transport = transports()
    topic = unique("large")
    servers(transport, nt.Target(topic=topic, server="s1"), [Recorder()])
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=20)
    blob = "x" * (2 * 1024 * 1024)
    assert client.call({}, "echo", value=blob)["value"] == blob


def test_compression_round_trip(transports, servers, unique, rabbit):
    transport = transports(url=f"{rabbit}?kombu_compression=gzip")
    topic = unique("gzip")
    servers(transport, nt.Target(topic=topic, server="s1"), [Recorder()])
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=10)
    assert client.call({}, "echo", value="z" * 1000)["value"] == "z" * 1000
