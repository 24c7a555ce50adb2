"""The notification API on the fake driver: pools, filters, priorities, batches."""
import threading

import pytest
from waits import wait_until
from oslo_config import cfg

import notify_transport as nt

PRIOS = ["audit", "debug", "info", "warn", "error", "critical", "sample"]


class Recorder:
    def __init__(self, prios=PRIOS, result=None):
        self.got = []
        self.lock = threading.Lock()
        for p in prios:
            setattr(self, p, self._make(p, result))

    def _make(self, prio, result):
        def cb(ctxt, publisher_id, event_type, payload, metadata):
            with self.lock:
                self.got.append((prio, ctxt, publisher_id, event_type, payload, metadata))
            return result
        return cb


def wait_for(pred, timeout=5.0):
    return wait_until(pred, timeout)


def settle(servers):
    """Stop the servers: what they took is dispatched, so what the endpoints got is final."""
    for server in servers:
        server.stop()
        server.wait()
    servers.clear()


@pytest.fixture
def transport(fake_transport):
    return fake_transport


@pytest.fixture
def servers():
    started = []
    yield started
    for s in started:
        s.stop()
        s.wait()


def listen(transport, servers, endpoints, topics=("notifications",), batch=False, **kw):
    targets = [nt.Target(topic=t) for t in topics]
    fn = nt.get_batch_notification_listener if batch else nt.get_notification_listener
    server = fn(transport, targets, endpoints, **kw)
    server.start()
    servers.append(server)
    return server


def test_all_priorities_reach_their_method(transport, servers):
    rec = Recorder()
    listen(transport, servers, [rec])
    notifier = nt.Notifier(transport, "pub", driver="messagingv2")
    methods = ["audit", "debug", "info", "warn", "warning", "error", "critical", "sample"]
    for m in methods:
        getattr(notifier, m)({}, f"ev.{m}", {"m": m})
    assert wait_for(lambda: len(rec.got) == len(methods))
    # each priority is its own topic, so only per-priority order is defined
    assert sorted((g[0], g[3]) for g in rec.got) == sorted(
        ("warn" if m == "warning" else m, f"ev.{m}") for m in methods)
    prio, ctxt, pub, _, payload, md = next(g for g in rec.got if g[0] == "audit")
    assert pub == "pub" and payload == {"m": "audit"} and set(md) == {"message_id", "timestamp"}


def test_endpoint_receives_only_its_priorities(transport, servers):
    rec = Recorder(prios=["error"])
    listen(transport, servers, [rec])
    n = nt.Notifier(transport, "pub", driver="messagingv2")
    n.info({}, "a", {})
    n.error({}, "b", {})
    n.error({}, "last", {})  # once it is in, so is anything sent before it
    assert wait_for(lambda: any(g[3] == "last" for g in rec.got))
    settle(servers)
    assert [g[3] for g in rec.got] == ["b", "last"]


def test_every_pool_gets_every_message_and_a_pool_splits(transport, servers):
    a1, a2, b = Recorder(), Recorder(), Recorder()
    listen(transport, servers, [a1], pool="A")
    listen(transport, servers, [a2], pool="A")
    listen(transport, servers, [b], pool="B")
    n = nt.Notifier(transport, "pub", driver="messagingv2")
    for i in range(50):
        n.info({}, "e", {"i": i})
    n.info({}, "last", {"i": None})  # once a pool has it, it took everything sent before it
    assert wait_for(lambda: any(g[3] == "last" for g in a1.got + a2.got)
                    and any(g[3] == "last" for g in b.got))
    settle(servers)
    for rec in (a1, a2, b):
        rec.got = [g for g in rec.got if g[3] != "last"]
    ids_a = [g[4]["i"] for g in a1.got + a2.got]
    assert sorted(ids_a) == list(range(50))  # no duplicates, none lost
    assert [g[4]["i"] for g in b.got] == list(range(50))


def test_vhost_isolation():
    conf = cfg.ConfigOpts()
    conf([])
    t = nt.get_notification_transport(conf, "fake:///one")
    rec = Recorder()
    s = nt.get_notification_listener(t, [nt.Target(topic="notifications")], [rec])
    s.start()
    # same driver instance, but the listener's topic carries the vhost of the URL
    assert s.listener._topics[0].endswith(".one")
    nt.Notifier(t, "p", driver="messagingv2").info({}, "e", {})
    assert wait_for(lambda: len(rec.got) == 1)
    s.stop()
    s.wait()


def test_filters(transport, servers):
    rec = Recorder()
    rec.filter_rule = nt.NotificationFilter(publisher_id="^compute.*", event_type="instance\\.create",
                                            context={"project": "p1"}, payload={"state": "act"})
    listen(transport, servers, [rec])
    n = nt.Notifier(transport, "compute.host1", driver="messagingv2")
    n.info({"project": "p1"}, "instance.create.end", {"state": "active"})
    n.info({"project": "p2"}, "instance.create.end", {"state": "active"})
    n.info({"project": "p1"}, "instance.delete", {"state": "active"})
    n.info({"project": "p1"}, "instance.create.end", {"state": 5})
    n.prepare(publisher_id="network.h").info({"project": "p1"}, "instance.create.end", {"state": "active"})
    n.info({"project": "p1"}, "instance.create.end", {"state": "active", "n": 2})
    n.info({"project": "p1"}, "instance.create.end", {"state": "active", "n": 3})  # the last
    assert wait_for(lambda: len(rec.got) >= 3)
    settle(servers)
    assert [g[4] for g in rec.got] == [{"state": "active"}, {"state": "active", "n": 2},
                                       {"state": "active", "n": 3}]


def test_several_topics_per_listener(transport, servers):
    rec = Recorder()
    listen(transport, servers, [rec], topics=("t1", "t2"))
    nt.Notifier(transport, "p", driver="messagingv2", topics=["t1"]).info({}, "one", {})
    nt.Notifier(transport, "p", driver="messagingv2", topics=["t2", "t3"]).info({}, "two", {})
    assert wait_for(lambda: len(rec.got) == 2)
    assert sorted(g[3] for g in rec.got) == ["one", "two"]


def test_batch_size_and_timeout(transport, servers):
    batches = []

    class Batch:
        def info(self, messages):
            batches.append([m["payload"]["i"] for m in messages])

    listen(transport, servers, [Batch()], batch=True, batch_size=4, batch_timeout=0.3)
    n = nt.Notifier(transport, "p", driver="messagingv2")
    for i in range(10):
        n.info({}, "e", {"i": i})
    assert wait_for(lambda: sum(map(len, batches)) == 10)
    assert [len(b) for b in batches] == [4, 4, 2]
    assert [i for b in batches for i in b] == list(range(10))


def test_requeue_redelivers_when_allowed(transport, servers):
    attempts = []

    class Flaky:
        def info(self, ctxt, pub, et, payload, md):
            attempts.append(payload["i"])
            return nt.NotificationResult.REQUEUE if len(attempts) == 1 else None

    server = listen(transport, servers, [Flaky()], allow_requeue=True)
    nt.Notifier(transport, "p", driver="messagingv2").info({}, "e", {"i": 1})
    assert wait_for(lambda: len(attempts) == 2)
    assert attempts == [1, 1] and server.stats.requeued == 1 and server.stats.dispatched == 1


def test_endpoint_exception_does_not_stop_listener(transport, servers):
    seen = []

    class Boom:
        def info(self, ctxt, pub, et, payload, md):
            seen.append(payload["i"])
            if payload["i"] == 0:
                raise RuntimeError("boom")

    server = listen(transport, servers, [Boom()])
    n = nt.Notifier(transport, "p", driver="messagingv2")
    n.info({}, "e", {"i": 0})
    n.info({}, "e", {"i": 1})
    assert wait_for(lambda: seen == [0, 1])
    assert server.stats.failed == 1 and server.stats.dispatched == 1


def test_context_secrets_removed(transport, servers):
    rec = Recorder()
    listen(transport, servers, [rec])
    nt.Notifier(transport, "p", driver="messagingv2").info(
        {"user": "u", "auth_token": "tok", "password": "pw"}, "e", {})
    assert wait_for(lambda: len(rec.got) == 1)
    assert rec.got[0][1] == {"user": "u"}


def test_notifier_disabled_without_driver(transport, caplog):
    n = nt.Notifier(transport, "p")
    assert not n.is_enabled()
    assert "disabled" in caplog.text


def test_notifier_driver_from_config_and_test_driver(transport):
    transport.conf.set_override("driver", ["test"], group="oslo_messaging_notifications")
    n = nt.Notifier(transport, "p")
    n.error({}, "e", {"x": 1})
    assert n.sent[0][1]["priority"] == "ERROR" and n.sent[0][1]["payload"] == {"x": 1}


def test_unknown_notifier_driver(transport):
    with pytest.raises(nt.ConfigurationError, match="'nosuch'.*installed: .*messagingv2.*routing"):
        nt.Notifier(transport, "p", driver="nosuch")


def test_listener_without_priorities_refused(transport):
    server = nt.get_notification_listener(transport, [nt.Target(topic="x")], [object()])
    with pytest.raises(nt.ConfigurationError, match="priority"):
        server.start()


def test_unsupported_executor(transport):
    with pytest.raises(nt.ConfigurationError, match="eventlet"):
        nt.get_notification_listener(transport, [nt.Target(topic="x")], [Recorder()], executor="eventlet")


def test_send_failure_logged_not_raised(transport, caplog):
    class Unserializable:
        def __repr__(self):
            raise RuntimeError("no")
    n = nt.Notifier(transport, "p", driver="messagingv2")
    transport._driver.send_notification = lambda *a, **k: (_ for _ in ()).throw(
        nt.MessageDeliveryFailure("queue full"))
    n.info({}, "evt", {})
    assert "queue full" in caplog.text and "evt" in caplog.text
