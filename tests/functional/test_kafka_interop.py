"""Wire compatibility with oslo.messaging 18.3.1's Kafka driver, both ways.

oslo.messaging registers some options only on the global ``cfg.CONF``, so it
is driven with that; notify-transport uses a ConfigOpts of its own. oslo's
listener forgets the vhost, so these tests use none. oslo's notifier drops
dict contexts, so it is given an oslo.context RequestContext.
"""
from __future__ import annotations

import threading
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from oslo_config import cfg

pytestmark = pytest.mark.functional

oslo_messaging = pytest.importorskip("oslo_messaging")
oslo_context = pytest.importorskip("oslo_context.context")

PAYLOAD = {"instance_id": "i-1", "nested": {"list": [1, 2, {"x": None}], "unicode": "héllo ✓"},
           "n": 3.5, "flag": True}


class Recorder:
    """An endpoint (same signature on both libraries) that remembers every call."""

    def __init__(self, expected: int) -> None:
        self.calls: list[dict] = []
        self.expected = expected
        self.done = threading.Event()

    def _record(self, priority, ctxt, publisher_id, event_type, payload, metadata):
        self.calls.append({"priority": priority, "ctxt": dict(ctxt), "publisher_id": publisher_id,
                           "event_type": event_type, "payload": payload, "metadata": dict(metadata)})
        if len(self.calls) >= self.expected:
            self.done.set()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self._record("info", ctxt, publisher_id, event_type, payload, metadata)

    def error(self, ctxt, publisher_id, event_type, payload, metadata):
        self._record("error", ctxt, publisher_id, event_type, payload, metadata)


def plain_url(broker) -> str:
    """oslo.messaging does not know our query options: hosts only, no vhost."""
    return f"kafka://{broker.bootstrap}"


def start_from_beginning(broker, group: str, topics: list[str]) -> None:
    """Commit offset 0 for ``group``: oslo's listener otherwise starts wherever "latest" is when
    it happens to join, and would miss what was sent before (the bug our driver fixes)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(t, 1) for t in topics]).values():
        try:
            future.result()
        except Exception:  # noqa: BLE001 - already exists
            pass
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(t, 0, 0) for t in topics], asynchronous=False)
    consumer.close()


@pytest.fixture
def oslo_transport(kafka_broker):
    transport = oslo_messaging.get_notification_transport(cfg.CONF, url=plain_url(kafka_broker))
    yield transport
    transport.cleanup()


def ours(kafka_conf, broker):
    import notify_transport

    return notify_transport.get_notification_transport(kafka_conf, broker.url())


def test_oslo_notifier_to_our_listener(kafka_broker, oslo_transport, kafka_conf, unique_topic):
    """Both libraries' listeners get the same oslo notification with identical arguments."""
    import notify_transport

    topic = unique_topic("from-oslo")
    transport = ours(kafka_conf, kafka_broker)
    recorder, oslo_recorder = Recorder(2), Recorder(2)
    listener = notify_transport.get_notification_listener(
        transport, [notify_transport.Target(topic=topic)], [recorder], pool="ours")
    listener.start()
    start_from_beginning(kafka_broker, "oslo-listener", [f"{topic}.info", f"{topic}.error"])
    oslo_listener = oslo_messaging.get_notification_listener(
        oslo_transport, [oslo_messaging.Target(topic=topic)], [oslo_recorder], executor="threading",
        pool="oslo-listener")
    oslo_listener.start()
    try:
        ctx = oslo_context.RequestContext(user_id="user-1", project_id="proj-1",
                                          auth_token="token-never-sent", request_id="req-1")
        notifier = oslo_messaging.Notifier(oslo_transport, publisher_id="compute.oslo-host",
                                           driver="messagingv2", topics=[topic])
        notifier.info(ctx, "compute.instance.create.end", PAYLOAD)
        notifier.error(ctx, "compute.instance.delete.error", {"reason": "boom"})
        oslo_transport.cleanup()  # oslo flushes its producer here
        assert recorder.done.wait(15), recorder.calls
        assert oslo_recorder.done.wait(20), oslo_recorder.calls
    finally:
        listener.stop()
        listener.wait()
        oslo_listener.stop()
        oslo_listener.wait()
        transport.cleanup()
    by_priority = {c["priority"]: c for c in recorder.calls}
    oslo_by_priority = {c["priority"]: c for c in oslo_recorder.calls}
    assert by_priority == oslo_by_priority  # ctxt, publisher_id, event_type, payload, metadata
    info = by_priority["info"]
    assert info["payload"] == PAYLOAD
    assert info["publisher_id"] == "compute.oslo-host"
    assert info["event_type"] == "compute.instance.create.end"
    assert info["ctxt"] == ctx.redacted_copy().to_dict()
    assert info["ctxt"]["user"] == "user-1" and "token-never-sent" not in str(info["ctxt"])
    assert set(info["metadata"]) == {"message_id", "timestamp"}
    assert len(recorder.calls) == 2


@pytest.mark.parametrize("driver_name", ["messagingv2", "messaging"])
def test_our_notifier_to_oslo_listener(kafka_broker, oslo_transport, kafka_conf, unique_topic, driver_name):
    import notify_transport

    topic = unique_topic("to-oslo")
    group = f"oslo-{uuid.uuid4().hex[:6]}"
    start_from_beginning(kafka_broker, group, [f"{topic}.info", f"{topic}.error"])
    oslo_recorder = Recorder(3)
    oslo_listener = oslo_messaging.get_notification_listener(
        oslo_transport, [oslo_messaging.Target(topic=topic)], [oslo_recorder], executor="threading",
        pool=group)
    oslo_listener.start()
    transport = ours(kafka_conf, kafka_broker)
    try:
        notifier = notify_transport.Notifier(transport, publisher_id="compute.our-host",
                                             driver=driver_name, topics=[topic])
        ctxt = {"user_id": "user-2", "project_id": "proj-2", "request_id": "req-2",
                "roles": ["admin", "member"]}
        notifier.info(ctxt, "compute.instance.update", PAYLOAD)
        notifier.info(ctxt, "compute.instance.update", {"second": 2})
        notifier.error(ctxt, "compute.instance.error", {"third": 3})
        assert transport.flush(10) == 0
        assert oslo_recorder.done.wait(20), oslo_recorder.calls
    finally:
        oslo_listener.stop()
        oslo_listener.wait()
        transport.cleanup()
    calls = oslo_recorder.calls
    assert [c["priority"] for c in calls if c["priority"] == "info"] == ["info", "info"]
    first = next(c for c in calls if c["payload"] == PAYLOAD)
    assert first["ctxt"] == ctxt
    assert first["publisher_id"] == "compute.our-host"
    assert first["event_type"] == "compute.instance.update"
    assert set(first["metadata"]) == {"message_id", "timestamp"}
    assert uuid.UUID(first["metadata"]["message_id"])
    assert {c["event_type"] for c in calls} == {"compute.instance.update", "compute.instance.error"}
