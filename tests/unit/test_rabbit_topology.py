"""Exchange and queue layout: names and attributes as oslo.messaging's rabbit driver declares them."""

import pytest
from oslo_config import cfg

from notify_transport.drivers.config import resolve_options
from notify_transport.drivers.rabbit.options import GROUP, all_opts
from notify_transport.drivers.rabbit.topology import Topology, queue_arguments

impl_rabbit = pytest.importorskip("oslo_messaging._drivers.impl_rabbit")


def opts(**query):
    conf = cfg.ConfigOpts()
    conf([])
    return resolve_options(conf, GROUP, all_opts(), {k: str(v) for k, v in query.items()})


def test_rpc_layout_defaults():
    topo = Topology(opts(), "openstack")
    topic_q, server_q, fanout_q = topo.rpc_queues(None, "compute", "host1")
    assert (topic_q.name, server_q.name) == ("compute", "compute.host1")
    assert [(e.name, e.type, e.durable, e.auto_delete, rk) for e, rk in topic_q.bindings] == \
        [("openstack", "topic", False, False, "compute")]
    assert server_q.bindings[0][1] == "compute.host1"
    assert (topic_q.durable, topic_q.auto_delete, topic_q.arguments) == (False, False, {})
    assert fanout_q.name.startswith("compute_fanout_") and len(fanout_q.name) == len("compute_fanout_") + 32
    ex, rk = fanout_q.bindings[0]
    assert (ex.name, ex.type, ex.durable, ex.auto_delete, rk) == ("compute_fanout", "fanout", False, True, "compute")
    assert fanout_q.arguments == {"x-expires": 1800 * 1000} and fanout_q.delete_on_close
    reply = topo.reply_queue()
    assert reply.name.startswith("reply_") and reply.arguments == {"x-expires": 1800000}
    assert reply.bindings == ()  # the default exchange routes by queue name


def test_exchange_from_target_or_control_exchange():
    topo = Topology(opts(), "nova")
    assert topo.rpc_queues("cells", "t", "s")[0].bindings[0][0].name == "cells"
    assert topo.rpc_queues(None, "t", "s")[0].bindings[0][0].name == "nova"


def test_notification_queues_with_and_without_pool():
    topo = Topology(opts(), "openstack")
    keys = [(None, "notifications.info"), (None, "notifications.error"), ("nova", "notifications.info")]
    pooled = topo.notification_queues(keys, "archiver")
    assert [q.name for q in pooled] == ["archiver"]
    assert [(e.name, rk) for e, rk in pooled[0].bindings] == [
        ("openstack", "notifications.info"), ("openstack", "notifications.error"), ("nova", "notifications.info")]
    plain = topo.notification_queues(keys, None)
    assert [q.name for q in plain] == ["notifications.info", "notifications.error"]
    assert [(e.name, rk) for e, rk in plain[0].bindings] == [
        ("openstack", "notifications.info"), ("nova", "notifications.info")]


@pytest.mark.parametrize("settings", [
    {}, {"rabbit_ha_queues": True}, {"rabbit_quorum_queue": True},
    {"rabbit_quorum_queue": True, "rabbit_quorum_delivery_limit": 5,
     "rabbit_quorum_max_memory_length": 10, "rabbit_quorum_max_memory_bytes": 100},
    {"rabbit_transient_queues_ttl": 0}, {"rabbit_transient_queues_ttl": 60},
])
def test_queue_arguments_match_oslo(settings):
    o = opts(**settings)
    quorum_conf = impl_rabbit.QuorumMemConfig(o.rabbit_quorum_delivery_limit,
                                              o.rabbit_quorum_max_memory_length,
                                              o.rabbit_quorum_max_memory_bytes)
    for ttl, quorum in ((0, o.rabbit_quorum_queue), (o.rabbit_transient_queues_ttl, False)):
        assert queue_arguments(o, ttl, quorum) == impl_rabbit._get_queue_arguments(  # noqa: SLF001
            o.rabbit_ha_queues, ttl, quorum, quorum_conf, False)


def test_durability_follows_oslo_options():
    topo = Topology(opts(amqp_durable_queues=True), "openstack")
    q = topo.rpc_queues(None, "t", "s")[0]
    assert q.durable and q.bindings[0][0].durable
    assert not topo.fanout_queue("t").durable  # transient unless rabbit_transient_quorum_queue
    quorum = Topology(opts(rabbit_quorum_queue=True, rabbit_transient_quorum_queue=True), "openstack")
    assert quorum.rpc_queues(None, "t", "s")[0].arguments["x-queue-type"] == "quorum"
    assert quorum.reply_queue().durable and quorum.reply_queue().arguments["x-queue-type"] == "quorum"


def test_cancel_on_failover_consumer_argument():
    topo = Topology(opts(enable_cancel_on_failover=True), "openstack")
    assert topo.reply_queue().consumer_arguments == {"x-cancel-on-ha-failover": True}
    assert Topology(opts(), "openstack").reply_queue().consumer_arguments is None
