"""Dispatch by namespace and version, access policies and serializers (oslo.messaging's rules)."""
import pytest

import notify_transport as nt
from notify_transport import rpc
from notify_transport.exceptions import NoSuchMethod, UnsupportedVersion
from notify_transport.rpc.versions import version_is_compatible
from notify_transport.serializer import Serializer


class Incoming:
    def __init__(self, message, ctxt=None, client_timeout=None):
        self.message = message
        self.ctxt = ctxt or {}
        self.client_timeout = client_timeout
        self.heartbeats = 0

    def heartbeat(self):
        self.heartbeats += 1


@pytest.mark.parametrize("implemented, requested, ok", [
    ("1.0", "1.0", True), ("1.5", "1.2", True), ("1.2", "1.5", False), ("2.0", "1.0", False),
    ("1.0", "2.0", False), ("1.2.3", "1.2.1", True), ("1.2.1", "1.2.3", False),
    ("1.2", "1.2.1", False), (None, "9.9", True), ("1.0", None, False),
])
def test_version_compatibility(implemented, requested, ok):
    assert version_is_compatible(implemented, requested) is ok


def test_version_compatibility_agrees_with_oslo():
    oslo_utils_ = pytest.importorskip("oslo_messaging._utils")
    versions = ["1.0", "1.1", "1.10", "2.0", "2.3.1", "1.1.1", "3.0"]
    for a in versions:
        for b in versions:
            assert version_is_compatible(a, b) == oslo_utils_.version_is_compatible(a, b)


class Base:
    def __init__(self, tag):
        self.tag = tag

    def hello(self, ctxt, name="x"):
        return f"{self.tag}:{name}"

    def _hidden(self, ctxt):
        return "hidden"

    @rpc.expose
    def shown(self, ctxt):
        return "shown"


def endpoint(tag, **target):
    ep = Base(tag)
    if target:
        ep.target = nt.Target(**target)
    return ep


def test_first_compatible_endpoint_wins():
    d = rpc.RPCDispatcher([endpoint("v1", version="1.3"), endpoint("v2", version="2.4"),
                           endpoint("ns", namespace="admin", version="1.0")])
    assert d.dispatch(Incoming({"method": "hello"})) == "v1:x"
    assert d.dispatch(Incoming({"method": "hello", "version": "2.2", "args": {"name": "n"}})) == "v2:n"
    assert d.dispatch(Incoming({"method": "hello", "namespace": "admin"})) == "ns:x"
    with pytest.raises(UnsupportedVersion) as err:
        d.dispatch(Incoming({"method": "hello", "version": "3.0"}))
    assert err.value.version == "3.0" and err.value.method == "hello"
    with pytest.raises(NoSuchMethod) as err:
        d.dispatch(Incoming({"method": "nope"}))
    assert err.value.method == "nope"


def test_accepted_namespaces():
    ep = Base("multi")
    ep.target = nt.Target(namespace="a", accepted_namespaces=["a", "b"])
    d = rpc.RPCDispatcher([ep])
    assert d.dispatch(Incoming({"method": "hello", "namespace": "b"})) == "multi:x"
    with pytest.raises(UnsupportedVersion):
        d.dispatch(Incoming({"method": "hello"}))


@pytest.mark.parametrize("policy, allowed", [
    (None, {"hello", "shown"}),
    (rpc.DefaultRPCAccessPolicy, {"hello", "shown"}),
    (rpc.ExplicitRPCAccessPolicy, {"shown"}),
    (rpc.LegacyRPCAccessPolicy, {"hello", "shown", "_hidden"}),
])
def test_access_policies(policy, allowed):
    d = rpc.RPCDispatcher([Base("p")], access_policy=policy)
    for method in ("hello", "shown", "_hidden"):
        if method in allowed:
            d.dispatch(Incoming({"method": method}))
        else:
            with pytest.raises(NoSuchMethod):
                d.dispatch(Incoming({"method": method}))


def test_bad_access_policy_and_bad_target_attribute():
    with pytest.raises(TypeError):
        rpc.RPCDispatcher([Base("x")], access_policy=rpc.DefaultRPCAccessPolicy())

    class HasTargetMethod:
        def target(self, ctxt):
            return 1

    with pytest.raises(TypeError, match="reserved"):
        rpc.RPCDispatcher([HasTargetMethod()])


def test_serializer_applies_to_context_args_and_result():
    class Wrap(Serializer):
        def serialize_entity(self, ctxt, entity):
            return {"wrapped": entity}

        def deserialize_entity(self, ctxt, entity):
            return entity["v"]

        def serialize_context(self, ctxt):
            return ctxt

        def deserialize_context(self, ctxt):
            return dict(ctxt, seen=True)

    class Ep:
        def f(self, ctxt, a):
            return (ctxt["seen"], a)

    d = rpc.RPCDispatcher([Ep()], serializer=Wrap())
    assert d.dispatch(Incoming({"method": "f", "args": {"a": {"v": 5}}})) == {"wrapped": (True, 5)}


def test_ping_endpoint_when_enabled():
    d = rpc.RPCDispatcher([Base("x")], ping_enabled=True)
    assert d.dispatch(Incoming({"method": "oslo_rpc_server_ping"})) == "pong"
    with pytest.raises(NoSuchMethod):
        rpc.RPCDispatcher([Base("x")]).dispatch(Incoming({"method": "oslo_rpc_server_ping"}))


def test_call_monitor_heartbeats_long_calls():
    import time

    class Slow:
        def f(self, ctxt):
            time.sleep(1.3)
            return "done"

    incoming = Incoming({"method": "f"}, client_timeout=2)
    assert rpc.RPCDispatcher([Slow()]).dispatch(incoming) == "done"
    assert incoming.heartbeats >= 1  # every client_timeout / 2 seconds


def test_expected_exceptions_decorator_keeps_original():
    class Ep:
        @rpc.expected_exceptions(KeyError)
        def f(self, ctxt):
            raise KeyError("k")

    with pytest.raises(rpc.ExpectedException) as err:
        rpc.RPCDispatcher([Ep()]).dispatch(Incoming({"method": "f"}))
    assert err.value.exc_info[0] is KeyError
