"""Our Kafka driver used through oslo.messaging's own public API (scheme ``ntkafka``), on noida
(and on the cluster of $NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP when set).

oslo.messaging registers some options only on the global ``cfg.CONF``, so it is
driven with that. Every test uses topics of its own and a vhost of its own.
"""
from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Iterator

import pytest
from waits import wait_until
from confluent_kafka.admin import AdminClient
from oslo_config import cfg

import notify_transport as nt
from kafka_fixtures import group_offsets

pytestmark = pytest.mark.functional

oslo_messaging = pytest.importorskip("oslo_messaging")
oslo_context = pytest.importorskip("oslo_context.context")

PAYLOAD = {"instance_id": "i-1", "nested": {"list": [1, {"x": None}], "unicode": "héllo ✓"}, "n": 3.5}


class Recorder:
    """An endpoint (same signature on both libraries) that remembers every call."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self._cond = threading.Condition()

    def _record(self, priority, ctxt, publisher_id, event_type, payload, metadata) -> None:
        with self._cond:
            self.calls.append({"priority": priority, "ctxt": dict(ctxt), "publisher_id": publisher_id,
                               "event_type": event_type, "payload": payload, "metadata": dict(metadata)})
            self._cond.notify_all()

    def info(self, ctxt, publisher_id, event_type, payload, metadata) -> None:
        self._record("info", ctxt, publisher_id, event_type, payload, metadata)

    def error(self, ctxt, publisher_id, event_type, payload, metadata) -> None:
        self._record("error", ctxt, publisher_id, event_type, payload, metadata)

    def wait_for(self, count: int, timeout: float = 20.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.calls) < count and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            return list(self.calls)


class BatchRecorder:
    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def info(self, messages: list[dict]) -> None:
        self.batches.append([m["payload"]["seq"] for m in messages])


def vhost() -> str:
    return f"v{uuid.uuid4().hex[:8]}"


def ntkafka(broker: Any, vhost_name: str | None = None, query: str = "") -> str:
    url = f"ntkafka://{broker.bootstrap}"
    if vhost_name is not None:
        url += f"/{vhost_name}"
    return url + (f"?{query}" if query else "")


@pytest.fixture
def oslo_transports() -> Iterator[Any]:
    """``oslo_transports(url)`` -> an oslo.messaging notification transport, cleaned up after."""
    made: list[Any] = []

    def make(url: str) -> Any:
        transport = oslo_messaging.get_notification_transport(cfg.CONF, url=url)
        made.append(transport)
        return transport

    yield make
    for transport in made:
        transport.cleanup()


@pytest.fixture
def servers() -> Iterator[Any]:
    """``servers(listener_server)`` -> started; every one is stopped and waited for after the test."""
    started: list[Any] = []

    def start(server: Any) -> Any:
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
    for server in started:
        server.wait()


def oslo_listener(transport: Any, topic: str, endpoint: Any, pool: str) -> Any:
    return oslo_messaging.get_notification_listener(
        transport, [oslo_messaging.Target(topic=topic)], [endpoint], executor="threading", pool=pool)


def context() -> Any:
    # oslo's notifier sends only contexts with redacted_copy(), as services use
    return oslo_context.RequestContext(user_id="user-1", project_id="proj-1", auth_token="never-sent",
                                       request_id="req-1")


def test_transport_is_ours(oslo_transports, broker) -> None:
    transport = oslo_transports(ntkafka(broker, "prod"))
    from notify_transport.integrations.oslo_messaging import NtKafkaDriver

    assert isinstance(transport, oslo_messaging.transport.NotificationTransport)
    assert isinstance(transport._driver, NtKafkaDriver)
    assert transport._driver.driver.vhost == "prod"


def test_first_message_after_start_and_vhost_on_both_sides(broker, unique_topic, oslo_transports,
                                                           servers) -> None:
    topic, here, elsewhere = unique_topic("oslo"), vhost(), vhost()
    transport = oslo_transports(ntkafka(broker, here))
    elsewhere_transport = oslo_transports(ntkafka(broker, elsewhere))
    recorder, other = Recorder(), Recorder()
    servers(oslo_listener(transport, topic, recorder, pool="p1"))
    servers(oslo_listener(elsewhere_transport, topic, other, pool="p1"))
    # sent right after start() returned: oslo's own Kafka driver may miss this one
    notifier = oslo_messaging.Notifier(transport, publisher_id="compute.host1", driver="messagingv2",
                                       topics=[topic])
    ctxt = context()
    notifier.info(ctxt, "compute.instance.create.end", PAYLOAD)
    notifier.error(ctxt, "compute.instance.create.error", {"reason": "boom"})
    driver = transport._driver
    assert driver.flush(10) == 0
    assert driver.delivery_stats() == {"sent": 2, "delivered": 2, "failed": 0, "pending": 0}

    calls = recorder.wait_for(2)
    assert sorted(c["priority"] for c in calls) == ["error", "info"]
    info = next(c for c in calls if c["priority"] == "info")
    assert info["payload"] == PAYLOAD
    assert (info["publisher_id"], info["event_type"]) == ("compute.host1", "compute.instance.create.end")
    assert info["ctxt"] == ctxt.redacted_copy().to_dict() and "never-sent" not in str(info["ctxt"])
    assert set(info["metadata"]) == {"message_id", "timestamp"}
    # a last one on each side (each priority is one partition, which keeps order): once
    # it is in, so is anything sent before it
    for side in (transport, elsewhere_transport):
        oslo_messaging.Notifier(side, publisher_id="last", driver="messagingv2", topics=[topic]).error(
            ctxt, "last", {})
        assert side._driver.flush(10) == 0
    assert [c["event_type"] for c in recorder.wait_for(3)][2:] == ["last"]
    assert [c["event_type"] for c in other.wait_for(1)] == ["last"]  # nothing from the other vhost

    topics = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
    assert f"{topic}.info.{here}" in topics and f"{topic}.error.{here}" in topics
    assert f"{topic}.info" not in topics  # the vhost is in the name on the sending side too


def test_pools_fan_out(broker, unique_topic, oslo_transports, servers) -> None:
    topic, vh = unique_topic("pools"), vhost()
    transport = oslo_transports(ntkafka(broker, vh, "topic_partitions=2"))
    audit, billing = Recorder(), Recorder()
    servers(oslo_listener(transport, topic, audit, pool="audit"))
    servers(oslo_listener(transport, topic, billing, pool="billing"))
    notifier = oslo_messaging.Notifier(transport, driver="messagingv2", topics=[topic])
    for seq in range(20):
        notifier.prepare(publisher_id=f"compute.host{seq % 4}").info(context(), "e", {"seq": seq})
    # a last one per publisher (the key picks the partition, which keeps order): once they
    # are in, so is anything sent before them
    for host in range(4):
        notifier.prepare(publisher_id=f"compute.host{host}").info(context(), "last", {"seq": None})
    assert transport._driver.flush(10) == 0
    for recorder in (audit, billing):
        calls = recorder.wait_for(24)
        assert sum(c["event_type"] == "last" for c in calls) == 4
        assert sorted(c["payload"]["seq"] for c in calls if c["event_type"] != "last") == list(range(20))


def test_batch_listener(broker, unique_topic, oslo_transports, servers) -> None:
    topic = unique_topic("batch")
    transport = oslo_transports(ntkafka(broker, vhost()))
    recorder = BatchRecorder()
    servers(oslo_messaging.get_batch_notification_listener(
        transport, [oslo_messaging.Target(topic=topic)], [recorder], executor="threading",
        pool="batch", batch_size=5, batch_timeout=0.5))
    notifier = oslo_messaging.Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
    for seq in range(12):
        notifier.info(context(), "e", {"seq": seq})
    assert transport._driver.flush(10) == 0
    wait_until(lambda: sum(map(len, recorder.batches)) >= 12, 20)
    assert sorted(seq for batch in recorder.batches for seq in batch) == list(range(12))
    assert all(1 <= len(batch) <= 5 for batch in recorder.batches)
    assert max(map(len, recorder.batches)) == 5


def test_interoperates_with_our_kafka_scheme(broker, unique_topic, oslo_transports, kafka_conf,
                                             servers) -> None:
    topic, vh = unique_topic("interop"), vhost()
    oslo_transport = oslo_transports(ntkafka(broker, vh))
    ours = nt.get_notification_transport(kafka_conf, broker.url(vh))
    try:
        from_ours, from_oslo = Recorder(), Recorder()
        servers(oslo_listener(oslo_transport, topic, from_ours, pool="oslo-side"))
        servers(nt.get_notification_listener(ours, [nt.Target(topic=topic)], [from_oslo], pool="our-side"))

        our_ctxt = {"user_id": "u2", "request_id": "req-2", "roles": ["admin"]}
        nt.Notifier(ours, publisher_id="our.host", driver="messagingv2", topics=[topic]).info(
            our_ctxt, "from.ours", {"seq": 1})
        assert ours.flush(10) == 0
        oslo_messaging.Notifier(oslo_transport, publisher_id="oslo.host", driver="messagingv2",
                                topics=[topic]).error(context(), "from.oslo", {"seq": 2})
        assert oslo_transport._driver.flush(10) == 0

        # each side's listener receives both: same topic names, same vhost handling, same wire format
        got_oslo_side = {c["event_type"]: c for c in from_ours.wait_for(2)}
        got_our_side = {c["event_type"]: c for c in from_oslo.wait_for(2)}
        assert set(got_oslo_side) == set(got_our_side) == {"from.ours", "from.oslo"}
        assert got_oslo_side["from.ours"]["ctxt"] == our_ctxt
        assert got_oslo_side["from.ours"]["publisher_id"] == "our.host"
        assert got_our_side["from.oslo"]["priority"] == "error"
        assert got_our_side["from.oslo"]["payload"] == {"seq": 2}
        for event in ("from.ours", "from.oslo"):
            assert got_oslo_side[event]["metadata"] == got_our_side[event]["metadata"]
    finally:
        ours.cleanup()


def test_rpc_through_oslo_is_refused_clearly(broker) -> None:
    transport = oslo_messaging.get_rpc_transport(cfg.CONF, url=ntkafka(broker))
    try:
        client = oslo_messaging.get_rpc_client(transport, oslo_messaging.Target(topic="t"))
        with pytest.raises(NotImplementedError, match="notifications only; use a rabbit://"):
            client.cast({}, "method")
    finally:
        transport.cleanup()


def test_delivery_mode_from_the_url_gets_oslos_acknowledgements(broker, unique_topic, oslo_transports,
                                                                servers) -> None:
    """at_least_once commits only what oslo's server acknowledged: the acks must reach our driver."""
    topic, vh = unique_topic("alo"), vhost()
    transport = oslo_transports(ntkafka(broker, vh, "delivery_mode=at_least_once&commit_interval=0"))
    recorder = Recorder()
    server = servers(oslo_listener(transport, topic, recorder, pool="alo"))
    notifier = oslo_messaging.Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
    for seq in range(5):
        notifier.info(context(), "e", {"seq": seq})
    assert transport._driver.flush(10) == 0
    assert sorted(c["payload"]["seq"] for c in recorder.wait_for(5)) == list(range(5))
    server.stop()
    server.wait()
    assert group_offsets(broker.bootstrap, "alo", f"{topic}.info.{vh}") == {0: 5}
