"""Consumer groups on Apache Kafka's own coordinator, under both group protocols.

``group_protocol=classic`` (the client-side rebalance every broker speaks) and
``consumer`` (Kafka 4's KIP-848: the broker assigns, partitions move one at a
time). A pool's listeners split its partitions, every pool gets everything, a
listener joining a pool whose partitions are all held is started (KIP-848 calls
no rebalance callback for an empty assignment), and a member that died without
leaving is evicted by the broker so that its replacement takes over. Static
members (``group.instance.id``, as ``serve`` gives its workers) that stop
together keep every final commit, on Apache Kafka and on noida.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import uuid
from typing import Any

import pytest

import notify_transport as nt
from endpoints import IdRecorder
from kafka_fixtures import committed_total
from waits import wait_until

pytestmark = pytest.mark.functional

PROTOCOLS = ["classic", "consumer"]


def send(transport: Any, topic: str, ids: range) -> None:
    """Notifications from 16 publishers: the key is the publisher, so they spread over partitions."""
    notifier = nt.Notifier(transport, publisher_id="groups.test", driver="messagingv2", topics=[topic])
    publishers = [notifier.prepare(publisher_id=f"groups.host{n}") for n in range(16)]
    for i in ids:
        publishers[i % 16].info({}, "groups.test", {"i": i})
    assert notifier.flush(30) == 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_two_pools_of_two_split_the_partitions_and_each_pool_gets_everything(
        apache_kafka, kafka_conf, unique_topic, protocol) -> None:
    transport = nt.get_notification_transport(
        kafka_conf, apache_kafka.url(topic_partitions=2, group_protocol=protocol))
    topic = unique_topic("pools")
    suffix = uuid.uuid4().hex[:6]
    endpoints = [IdRecorder() for _ in range(4)]
    listeners = []
    try:
        for index, endpoint in enumerate(endpoints):  # one after another, as services start
            listener = nt.get_notification_listener(transport, [nt.Target(topic=topic)], [endpoint],
                                                    pool=f"pool{index % 2}-{suffix}", executor="threading")
            listener.start()
            listeners.append(listener)
        send(transport, topic, range(200))
        for pool in (0, 1):
            members = endpoints[pool::2]
            assert wait_until(lambda: sum(len(e.ids) for e in members) >= 200, 30)
        time.sleep(0.5)  # anything delivered twice would show up by now
        for pool in (0, 1):
            members = endpoints[pool::2]
            assert sorted(i for e in members for i in e.ids) == list(range(200))
            # two partitions, two members: each member reads one of them
            assert all(e.ids for e in members), [len(e.ids) for e in members]
    finally:
        for listener in listeners:
            listener.stop()
        for listener in listeners:
            listener.wait()
        transport.cleanup()


LISTENER_PROCESS = textwrap.dedent("""
    import sys, time
    from oslo_config import cfg
    import notify_transport as nt

    class Endpoint:
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            print("got", payload["i"], flush=True)

    conf = cfg.ConfigOpts(); conf([])
    transport = nt.get_notification_transport(conf, sys.argv[1])
    listener = nt.get_notification_listener(transport, [nt.Target(topic=sys.argv[2])], [Endpoint()],
                                            pool=sys.argv[3], executor="threading")
    listener.start()
    print("ready", flush=True)
    time.sleep(600)
""")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_member_that_died_is_evicted_and_its_replacement_gets_everything(
        apache_kafka, kafka_conf, unique_topic, tmp_path, protocol) -> None:
    """On noida the replacement could never start; Kafka evicts the dead member after its session.

    classic: the client's session_timeout (6 s here, the broker's minimum); consumer:
    the broker's group.consumer.session.timeout.ms (10 s in the test launcher).
    """
    options: dict[str, Any] = {"group_protocol": protocol, "delivery_mode": "at_least_once"}
    if protocol == "classic":
        options.update(session_timeout=6, heartbeat_interval=1)
    url = apache_kafka.url(**options)
    topic = unique_topic("evict")
    pool = f"evict-{uuid.uuid4().hex[:6]}"
    joined_and_killed(tmp_path, url, topic, pool)  # no LeaveGroup: the broker must find out by itself
    transport = nt.get_notification_transport(kafka_conf, url)
    endpoint = IdRecorder()
    replacement = nt.get_notification_listener(transport, [nt.Target(topic=topic)], [endpoint],
                                               pool=pool, executor="threading")
    replacement.start()  # returns once the dead member was evicted and the partition is ours
    try:
        send(transport, topic, range(50))
        assert wait_until(lambda: len(endpoint.ids) >= 50, 30)
        assert sorted(endpoint.ids) == list(range(50))
    finally:
        replacement.stop()
        replacement.wait()
        transport.cleanup()


def joined_and_killed(tmp_path: Any, url: str, topic: str, pool: str) -> None:
    """A listener process of ``pool`` that joins the group and dies by SIGKILL, without leaving it."""
    script = tmp_path / "listener.py"
    script.write_text(LISTENER_PROCESS)
    child = subprocess.Popen([sys.executable, str(script), url, topic, pool], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    finally:
        child.kill()
        child.wait(10)


def test_static_members_stopping_together_keep_their_final_commits(
        kafka_broker, kafka_conf, unique_topic, tmp_path) -> None:
    """A service's workers are static members and stop at the same moment.

    Each used to leave the group on its close (librdkafka sends a LeaveGroup on unsubscribe,
    static member or not), moving the group on while the others were still making their final
    commits. noida then refused those commits (ILLEGAL_GENERATION) once the leaving member was
    the replacement of one that had died, and what they covered would have been delivered again
    after a restart. A static member now keeps its place when it stops (KIP-345).
    """
    topic = unique_topic("static")
    pool = f"static-{uuid.uuid4().hex[:6]}"
    # only the final commits commit: the periodic ones would hide a refused final commit
    options: dict[str, Any] = {"topic_partitions": 4, "delivery_mode": "at_least_once", "commit_interval": 3600}
    url_a = kafka_broker.url(consumer_config="group.instance.id:static-a", **options)
    url_b = kafka_broker.url(consumer_config="group.instance.id:static-b", **options)
    # b's first process dies without leaving: its replacement takes its place and partitions at once
    joined_and_killed(tmp_path, url_b, topic, pool)
    transports = [nt.get_notification_transport(kafka_conf, url) for url in (url_b, url_a)]
    endpoints = [IdRecorder(), IdRecorder()]
    listeners = [nt.get_notification_listener(transport, [nt.Target(topic=topic)], [endpoint], pool=pool,
                                              executor="threading")
                 for transport, endpoint in zip(transports, endpoints)]
    try:
        for listener in listeners:  # b (the replacement) first: a's join needs b's place taken
            listener.start()
        send(transports[0], topic, range(200))
        assert wait_until(lambda: len({i for e in endpoints for i in e.ids}) >= 200, 60)
    finally:
        for listener in listeners:  # b stops (final commit, close), then a makes its final commit
            listener.stop()
            listener.wait()
        for transport in transports:
            transport.cleanup()
    assert committed_total(kafka_broker.bootstrap, pool, topic) == 200
