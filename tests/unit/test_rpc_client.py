"""The RPC client's messages, prepare() and version caps, against a recording transport."""
import pytest
from oslo_config import cfg

import notify_transport as nt
from notify_transport import rpc
from notify_transport.exceptions import InvalidTarget, MessagingException, RPCVersionCapError
from notify_transport.serializer import Serializer
from notify_transport.transport import RPCTransport


class RecordingDriver:
    def __init__(self, conf):
        self.conf = conf
        self.url = nt.TransportURL.parse(conf, "fake://")
        self.sent = []
        self.reply = "result"

    def send(self, target, ctxt, message, wait_for_reply=False, timeout=None, retry=None,
             transport_options=None, **kwargs):
        self.sent.append(dict(target=target, ctxt=ctxt, message=message, wait=wait_for_reply,
                              timeout=timeout, retry=retry, options=transport_options, **kwargs))
        return self.reply if wait_for_reply else None

    def cleanup(self):
        pass


@pytest.fixture
def transport():
    conf = cfg.ConfigOpts()
    conf([])
    transport = RPCTransport(RecordingDriver(conf))
    yield transport
    transport.cleanup()


def test_call_message_and_default_timeout(transport):
    client = rpc.get_rpc_client(transport, nt.Target(topic="t", namespace="ns", version="1.2"))
    assert client.call({"u": 1}, "do", a=1, b=[2]) == "result"
    (sent,) = transport.driver.sent
    assert sent["message"] == {"method": "do", "args": {"a": 1, "b": [2]}, "namespace": "ns",
                               "version": "1.2"}
    assert sent["ctxt"] == {"u": 1} and sent["wait"] is True
    assert sent["timeout"] == 60  # [DEFAULT] rpc_response_timeout
    transport.conf.set_override("rpc_response_timeout", 7)
    client.call({}, "do")
    assert transport.driver.sent[-1]["timeout"] == 7


def test_cast_and_prepare_overrides(transport):
    client = rpc.get_rpc_client(transport, nt.Target(topic="t"), timeout=3, retry=2)
    assert client.cast({}, "do") is None
    assert transport.driver.sent[-1]["wait"] is False and transport.driver.sent[-1]["retry"] == 2
    prepared = client.prepare(server="s1", timeout=9, retry=0, topic="t2", exchange="ex")
    prepared.call({}, "do")
    sent = transport.driver.sent[-1]
    assert (sent["target"].topic, sent["target"].server, sent["target"].exchange) == ("t2", "s1", "ex")
    assert (sent["timeout"], sent["retry"]) == (9, 0)
    assert client.target.server is None  # the client itself is unchanged
    client.prepare(fanout=True).cast({}, "do")
    assert transport.driver.sent[-1]["target"].fanout is True
    with pytest.raises(InvalidTarget):
        client.prepare(fanout=True).call({}, "do")


def test_call_monitor_timeout_reaches_the_driver(transport):
    client = rpc.get_rpc_client(transport, nt.Target(topic="t"), call_monitor_timeout=5)
    client.call({}, "do")
    assert transport.driver.sent[-1]["call_monitor_timeout"] == 5


def test_version_cap(transport):
    client = rpc.get_rpc_client(transport, nt.Target(topic="t", version="1.0"), version_cap="1.4")
    assert client.can_send_version() and client.can_send_version("1.4")
    assert not client.can_send_version("1.5") and not client.can_send_version("2.0")
    assert client.prepare(version="1.3").can_send_version()
    with pytest.raises(RPCVersionCapError) as err:
        client.prepare(version="1.5").call({}, "do")
    assert (err.value.version, err.value.version_cap) == ("1.5", "1.4")
    with pytest.raises(RPCVersionCapError):
        client.prepare(version="2.0").cast({}, "do")
    assert transport.driver.sent == []
    with pytest.raises(MessagingException, match="major and minor"):
        client.prepare(version="1")


def test_serializer(transport):
    class Tag(Serializer):
        def serialize_entity(self, ctxt, entity):
            return ["ser", entity]

        def deserialize_entity(self, ctxt, entity):
            return ("de", entity)

        def serialize_context(self, ctxt):
            return {"ctx": ctxt}

        def deserialize_context(self, ctxt):
            return ctxt

    client = rpc.get_rpc_client(transport, nt.Target(topic="t"), serializer=Tag())
    assert client.call("c", "do", a=1) == ("de", "result")
    sent = transport.driver.sent[-1]
    assert sent["message"]["args"] == {"a": ["ser", 1]} and sent["ctxt"] == {"ctx": "c"}


def test_rpc_over_a_notifications_only_driver_is_refused():
    conf = cfg.ConfigOpts()
    conf([])
    with pytest.raises(nt.NotSupported, match="rabbit"):
        rpc.get_rpc_transport(conf, "kafka://127.0.0.1:9092")
