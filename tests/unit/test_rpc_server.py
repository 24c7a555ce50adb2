"""The RPC server's life cycle and error handling, with an in-memory listener (no broker)."""
import collections
import threading

import pytest
from oslo_config import cfg
from waits import wait_until

import notify_transport as nt
from notify_transport import rpc
from notify_transport.drivers.base import Listener
from notify_transport.exceptions import ConfigurationError, InvalidTarget, ServerListenError
from notify_transport.transport import RPCTransport


class Request:
    def __init__(self, method, **args):
        self.message = {"method": method, "args": args}
        self.ctxt = {}
        self.client_timeout = None
        self.msg_id = "m"
        self.replies = []

    def reply(self, reply=None, failure=None):
        self.replies.append((reply, failure))


class MemoryListener(Listener):
    def __init__(self):
        super().__init__()
        self.queue = collections.deque()
        self.cond = threading.Condition()
        self.started = self.cleaned = False

    def put(self, request):
        with self.cond:
            self.queue.append(request)
            self.cond.notify()

    def start(self):
        self.started = True

    def poll(self, timeout=None, max_messages=1):
        with self.cond:
            if not self.queue and not self.stopped:
                self.cond.wait(timeout)
            return [self.queue.popleft()] if self.queue else []

    def stop(self):
        super().stop()
        with self.cond:
            self.cond.notify_all()

    def cleanup(self):
        self.cleaned = True


class Driver:
    def __init__(self, conf, fail=None):
        self.conf = conf
        self.url = nt.TransportURL.parse(conf, "fake://")
        self.listener = MemoryListener()
        self.fail = fail

    def listen(self, target, batch_size=1, batch_timeout=None):
        if self.fail:
            raise self.fail
        return self.listener

    def cleanup(self):
        pass


class Endpoint:
    def __init__(self):
        self.release = threading.Event()
        self.blocked = 0
        self._lock = threading.Lock()

    def ok(self, ctxt, x):
        return x * 2

    def boom(self, ctxt):
        raise RuntimeError("boom")

    def block(self, ctxt):
        with self._lock:
            self.blocked += 1
        self.release.wait(5)
        return "released"


@pytest.fixture
def setup():
    conf = cfg.ConfigOpts()
    conf([])
    transport = RPCTransport(Driver(conf))
    endpoint = Endpoint()
    server = rpc.get_rpc_server(transport, nt.Target(topic="t", server="s"), [endpoint])
    yield transport.driver.listener, server, endpoint
    endpoint.release.set()
    server.stop()
    server.wait(timeout=5)
    transport.cleanup()


def test_replies_results_and_failures(setup):
    listener, server, _ = setup
    server.start()
    assert listener.started
    good, bad, missing = Request("ok", x=21), Request("boom"), Request("nope")
    for r in (good, bad, missing):
        listener.put(r)
    assert wait_until(lambda: all(r.replies for r in (good, bad, missing)))
    assert good.replies == [(42, None)]
    assert bad.replies[0][1][0] is RuntimeError
    assert missing.replies[0][1][0] is rpc.NoSuchMethod


def test_workers_grow_under_load_and_stop_drains(setup):
    listener, server, endpoint = setup
    server.start()
    blocked = [Request("block") for _ in range(4)]
    for r in blocked:
        listener.put(r)
    assert wait_until(lambda: len(server._workers) >= 5)  # 4 busy + 1 idle poller
    quick = Request("ok", x=1)
    listener.put(quick)
    assert wait_until(lambda: quick.replies == [(2, None)])  # not stuck behind the blocked ones
    server.stop()
    endpoint.release.set()
    server.wait(timeout=5)
    assert all(r.replies == [("released", None)] for r in blocked)
    assert listener.cleaned


def test_pool_size_is_bounded(setup):
    listener, server, endpoint = setup
    server.start(override_pool_size=2)
    for _ in range(5):
        listener.put(Request("block"))
    # a worker adds the next one before it handles its request: once two are
    # handling theirs, a third would already exist if the pool were not bounded
    assert wait_until(lambda: endpoint.blocked >= 2)
    assert len(server._workers) == 2
    assert len(listener.queue) == 3 and endpoint.blocked == 2


def test_start_twice_and_restart_after_stop(setup):
    listener, server, _ = setup
    server.start()
    server.start()  # warns, no second listener
    server.stop()
    server.wait()
    server.start()
    r = Request("ok", x=2)
    listener.put(r)
    assert wait_until(lambda: r.replies == [(4, None)])


def test_bad_arguments():
    conf = cfg.ConfigOpts()
    conf([])
    transport = RPCTransport(Driver(conf))
    with pytest.raises(InvalidTarget):
        rpc.get_rpc_server(transport, nt.Target(topic="t"), [Endpoint()])
    with pytest.raises(ConfigurationError, match="eventlet"):
        rpc.get_rpc_server(transport, nt.Target(topic="t", server="s"), [Endpoint()], executor="eventlet")
    failing = RPCTransport(Driver(conf, fail=OSError("no broker")))
    server = rpc.get_rpc_server(failing, nt.Target(topic="t", server="s"), [Endpoint()])
    with pytest.raises(ServerListenError, match="no broker"):
        server.start()
    transport.cleanup()
    failing.cleanup()


# -- the lifecycle shared with notification listeners (notify_transport.server) ----------------

def test_rpc_servers_and_listeners_share_one_lifecycle():
    from notify_transport.server import MessageHandlingServer

    for cls in (rpc.RPCServer, nt.notify.NotificationServer, nt.notify.BatchNotificationServer):
        assert MessageHandlingServer in cls.__mro__
        for name in ("start", "stop", "wait", "__enter__", "__exit__"):
            assert getattr(cls, name) is getattr(MessageHandlingServer, name), (cls, name)


def test_bounded_graceful_stop_lets_the_request_in_flight_finish(setup):
    listener, server, endpoint = setup
    server.start()
    blocked = Request("block")
    listener.put(blocked)
    assert wait_until(lambda: not listener.queue)  # a worker took it
    endpoint.release.set()
    assert server.stop(timeout=5) is True
    assert blocked.replies == [("released", None)] and listener.cleaned


def test_bounded_abrupt_stop_abandons_a_request_that_does_not_finish(setup):
    listener, server, endpoint = setup
    server.start()
    blocked, dropped = Request("block"), Request("ok", x=1)
    listener.put(blocked)
    assert wait_until(lambda: not listener.queue and server._idle == 0 or len(server._workers) > 1)
    assert server.stop(graceful=False, timeout=0.05) is False  # the call is still running
    listener.put(dropped)
    endpoint.release.set()
    assert server.wait(timeout=5) is True
    assert dropped.replies == []  # not started after the abrupt stop


class FlakyListener(MemoryListener):
    """Polls fail a few times (a broker restarting), then work."""

    def __init__(self, failures):
        super().__init__()
        self.failures = failures

    def poll(self, timeout=None, max_messages=1):
        if self.failures:
            self.failures -= 1
            raise ConnectionError("broker away")
        return super().poll(timeout, max_messages)


def test_poll_failures_are_retried_with_the_backoff_policy(caplog):
    conf = cfg.ConfigOpts()
    conf([])
    driver = Driver(conf)
    driver.listener = FlakyListener(failures=2)
    transport = RPCTransport(driver)
    server = rpc.get_rpc_server(transport, nt.Target(topic="t", server="s"), [Endpoint()])
    request = Request("ok", x=4)
    with server:
        driver.listener.put(request)
        assert wait_until(lambda: request.replies == [(8, None)])
    transport.cleanup()
    assert sum("polling failed" in r.getMessage() for r in caplog.records) == 2
