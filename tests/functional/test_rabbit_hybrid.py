"""The hybrid deployment of the reference driver guide, in one process: RPC on RabbitMQ
(``[DEFAULT] transport_url``) and notifications on Kafka
(``[oslo_messaging_notifications] transport_url``), from one configuration."""
from __future__ import annotations

import threading

import pytest
from oslo_config import cfg

import notify_transport as nt
from notify_transport import options
from notify_transport import rpc
from rabbit_fixtures import wait_for

pytestmark = pytest.mark.functional


class Notes:
    def __init__(self):
        self.got = []
        self.lock = threading.Lock()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        with self.lock:
            self.got.append((publisher_id, event_type, payload))


def test_rpc_on_rabbit_notifications_on_kafka(rabbit, kafka_broker, unique, unique_topic, servers):
    conf = cfg.ConfigOpts()
    conf([])
    options.register_transport_opts(conf)
    options.register_notifier_opts(conf)
    conf.set_override("transport_url", rabbit)
    conf.set_override("transport_url", kafka_broker.url(), group="oslo_messaging_notifications")

    rpc_transport = rpc.get_rpc_transport(conf)
    notify_transport = nt.get_notification_transport(conf)
    try:
        assert rpc_transport.driver.name == "rabbit"
        assert notify_transport.driver.name == "kafka"
        topic = unique("hybrid")
        notify_topic = unique_topic("hybrid")
        notifier = nt.Notifier(notify_transport, publisher_id="compute.host1",
                               driver="messagingv2", topics=[notify_topic])

        class Compute:
            def boot(self, ctxt, name):
                notifier.info(ctxt, "compute.instance.create.end", {"name": name})
                return f"booted {name}"

        notes = Notes()
        listener = nt.get_notification_listener(notify_transport, [nt.Target(topic=notify_topic)],
                                                [notes], pool="hybrid-audit")
        listener.start()
        try:
            servers(rpc_transport, nt.Target(topic=topic, server="host1"), [Compute()])
            client = rpc.get_rpc_client(rpc_transport, nt.Target(topic=topic), timeout=10)
            assert client.call({"user": "u"}, "boot", name="vm1") == "booted vm1"
            client.cast({"user": "u"}, "boot", name="vm2")
            notify_transport.flush(10)
            assert wait_for(lambda: len(notes.got) == 2, timeout=20)
            assert sorted(p["name"] for _pub, _ev, p in notes.got) == ["vm1", "vm2"]
            assert {ev for _pub, ev, _p in notes.got} == {"compute.instance.create.end"}
        finally:
            listener.stop()
            listener.wait()
    finally:
        rpc_transport.cleanup()
        notify_transport.cleanup()
