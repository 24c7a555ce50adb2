"""Transports and servers as context managers: ``with`` cleans up, also when the block raises."""
import threading

import pytest

import notify_transport as nt
from notify_transport import rpc
from notify_transport.server import MessageHandlingServer
from tests.unit.test_rpc_server import Driver, Endpoint, Request, wait_until
from notify_transport.transport import RPCTransport


class Info:
    def __init__(self):
        self.got = []
        self.release = threading.Event()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self.release.wait(10)
        self.got.append(payload)


class Transport(nt.NotificationTransport):
    """Counts cleanups, so the test sees ``__exit__`` call it once."""

    cleanups = 0

    def cleanup(self):
        type(self).cleanups += 1
        super().cleanup()


def test_transport_with_block_cleans_up_and_returns_itself(conf):
    made = nt.get_notification_transport(conf, "fake:///")
    with Transport(made.driver) as transport:
        assert isinstance(transport, Transport)
        assert transport.url.transport == "fake"
    assert Transport.cleanups == 1


def test_transport_is_cleaned_up_when_the_block_raises(conf):
    made = nt.get_notification_transport(conf, "fake:///")
    Transport.cleanups = 0
    with pytest.raises(RuntimeError, match="in the block"):
        with Transport(made.driver):
            raise RuntimeError("in the block")
    assert Transport.cleanups == 1


def test_notification_listener_with_block_starts_then_stops_and_waits(conf):
    with nt.get_notification_transport(conf, "fake:///") as transport:
        endpoint = Info()
        server = nt.get_notification_listener(transport, [nt.Target(topic="notifications")], [endpoint])
        notifier = nt.Notifier(transport, "svc.host", driver="messagingv2", topics=["notifications"])
        with server as entered:
            assert entered is server
            assert server.listener is not None          # started on entry
            notifier.info({}, "thing.created", {"n": 1})
            assert wait_until(lambda: server.stats.as_dict()["received"] == 1, timeout=10)
            endpoint.release.set()                      # dispatched while __exit__ waits
        # stop() and wait() ran: what was received was dispatched, the listener released
        assert endpoint.got == [{"n": 1}]
        assert server.listener is None


def test_notification_listener_stops_when_the_block_raises(conf):
    with nt.get_notification_transport(conf, "fake:///") as transport:
        endpoint = Info()
        endpoint.release.set()
        server = nt.get_batch_notification_listener(transport, [nt.Target(topic="n")], [endpoint],
                                                    batch_size=2, batch_timeout=0.1)
        with pytest.raises(KeyError):
            with server:
                raise KeyError("boom")
        assert server.listener is None
        server.start()                                  # still usable afterwards
        server.stop()
        assert server.wait(timeout=10)


def test_rpc_server_with_block_drains_requests(conf):
    transport = RPCTransport(Driver(conf))
    endpoint = Endpoint()
    server = rpc.get_rpc_server(transport, nt.Target(topic="t", server="s"), [endpoint])
    listener = transport.driver.listener
    blocked = Request("block")
    with server:
        assert listener.started
        listener.put(blocked)
        assert wait_until(lambda: server._idle == 0 or len(server._workers) > 1, timeout=10)
        threading.Timer(0.2, endpoint.release.set).start()
    assert blocked.replies == [("released", None)]      # __exit__ waited for it
    assert listener.cleaned


def test_every_server_is_a_message_handling_server_context():
    class Mine(MessageHandlingServer):
        calls: list = []

        def start(self):
            self.calls.append("start")

        def stop(self):
            self.calls.append("stop")

        def wait(self):
            self.calls.append("wait")

        def reset(self):
            pass

    with Mine(None, None) as server:
        assert server.calls == ["start"]
    assert server.calls == ["start", "stop", "wait"]
