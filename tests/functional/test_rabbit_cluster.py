"""RPC and notifications on a three-node RabbitMQ cluster with quorum queues, nodes failing under load.

The cluster is the tests' own (:mod:`rabbit_cluster_fixtures`). Every queue is
a quorum queue (``rabbit_quorum_queue``, ``rabbit_transient_quorum_queue``),
as operators of a cluster configure it: a message the broker confirmed is on
a majority of the nodes and outlives any one of them. Each fault test kills
the node that holds this process's connections, found from the broker's own
connection listing, and brings it back afterwards.
"""
from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

import notify_transport as nt
from notify_transport import rpc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.rabbit_cluster_faults import CALL_TIMEOUT, Echo, run_fault  # noqa: E402
from children import StreamedChild  # noqa: E402
from endpoints import IdRecorder  # noqa: E402
from rabbit_cluster_fixtures import CLUSTER_QUERY, node_back, nodes_holding_connections  # noqa: E402
from test_oslo_eventlet import MAX_GAP, check, kill_showing_stacks  # noqa: E402
from waits import wait_until  # noqa: E402

pytestmark = pytest.mark.functional

#: How much later than its timeout a call may return: the driver's own bookkeeping, never a hang.
CALL_SLACK = 1.5
THREADS = 8


def _holder(cluster) -> int:
    """The index of the node holding this process's connections (the driver picks one per transport)."""
    holders = set(nodes_holding_connections(cluster))
    assert len(holders) == 1, holders
    return next(i for i, node in enumerate(cluster.nodes) if node.node_name in holders)


def test_the_cluster_is_three_nodes_of_our_own(rabbit_cluster):
    names = {node.node_name for node in rabbit_cluster.nodes}
    assert len(names) == 3 and all(node.port != 5672 for node in rabbit_cluster.nodes)
    assert rabbit_cluster.running_nodes(rabbit_cluster.node(2)) == names


def _assert_nothing_lost_and_no_call_late(result) -> None:
    print("\n" + result.summary())
    assert result.lost == 0 and result.failed_casts == 0, (result.summary(), result.examples)
    assert result.errors == 0, (result.summary(), result.examples)
    assert result.longest_call <= CALL_TIMEOUT + CALL_SLACK, result.summary()
    assert result.calls >= 80 and result.confirmed >= 80, result.summary()


def test_killing_the_node_of_the_connections_under_calls_and_casts_loses_no_confirmed_cast(rabbit_cluster):
    """SIGKILL under 8 threads of calls and confirmed casts; the first call after it answered within seconds."""
    result = run_fault(rabbit_cluster, "ours", "kill", threads=THREADS)
    _assert_nothing_lost_and_no_call_late(result)
    assert result.first_answer_s is not None and result.first_answer_s <= 10, result.summary()


def test_a_rolling_restart_under_calls_and_casts_loses_no_confirmed_cast(rabbit_cluster):
    """Each node SIGTERMed and started again in turn: the server keeps its queues, listeners resume."""
    result = run_fault(rabbit_cluster, "ours", "rolling", threads=THREADS)
    _assert_nothing_lost_and_no_call_late(result)
    assert result.timeouts <= result.calls // 10, result.summary()


def _quorum_leader(cluster, queue: str) -> str:
    via = next(node for node in cluster.nodes if node.running)
    for line in via.ctl("list_queues", "-q", "--no-table-headers", "name", "type", "leader").splitlines():
        name, kind, leader = (line.split("\t") + ["", ""])[:3]
        if name == queue:
            assert kind == "quorum", line
            return leader
    raise AssertionError(f"no queue {queue!r}")


def test_notifications_outlive_the_leader_of_their_quorum_queue(rabbit_cluster, cluster_transports):
    topic = f"cluster_notes_{uuid.uuid4().hex[:8]}"
    query = CLUSTER_QUERY
    recorder = IdRecorder("n")
    got = recorder.ids
    # whichever nodes the transports connect to, the queue's leader node is killed
    listener = nt.get_notification_listener(
        cluster_transports(rabbit_cluster.url() + "?" + query, kind="notify"),
        [nt.Target(topic=topic)], [recorder], pool="pool1")
    listener.start()
    sender = cluster_transports(rabbit_cluster.url() + "?" + query, kind="notify")
    notifier = nt.Notifier(sender, publisher_id="p", driver="messagingv2", topics=[topic])
    try:
        for n in range(200):
            notifier.info({}, "ev", {"n": n})
        assert sender.flush(30) == 0
        leader = _quorum_leader(rabbit_cluster, f"{topic}.info")
        index = next(i for i, node in enumerate(rabbit_cluster.nodes) if node.node_name == leader)
        with node_back(rabbit_cluster, index) as victim:
            victim.kill()
            for n in range(200, 400):
                notifier.info({}, "ev", {"n": n})
            assert sender.flush(60) == 0
            assert wait_until(lambda: set(got) >= set(range(400)), 60), sorted(set(range(400)) - set(got))[:10]
        assert sender.delivery_stats()["failed"] == 0
    finally:
        listener.stop()
        listener.wait()


def test_a_paused_node_is_noticed_by_heartbeats_and_left(rabbit_cluster, cluster_transports, caplog, capsys):
    """SIGSTOP: the node neither answers nor closes; only heartbeats tell the client it is gone.

    What is measured is the client's side: the connection to the paused node
    declared lost within two ``heartbeat_timeout_threshold`` and opened on
    another node. (The other nodes see a paused peer only after Erlang's
    ``net_ticktime``, so queues led by it wait for that; calls are checked
    once the node runs again.)
    """
    heartbeat = 10
    url = rabbit_cluster.url() + "?" + CLUSTER_QUERY + f"&heartbeat_timeout_threshold={heartbeat}"
    topic = f"cluster_hb_{uuid.uuid4().hex[:8]}"
    transport = cluster_transports(url)
    server = rpc.get_rpc_server(transport, nt.Target(topic=topic, server="s1"), [Echo()])
    server.start()
    client = rpc.get_rpc_client(transport, nt.Target(topic=topic), timeout=CALL_TIMEOUT)
    try:
        assert client.call({}, "echo", value="ready") == "ready"
        index = _holder(rabbit_cluster)
        with node_back(rabbit_cluster, index) as victim, caplog.at_level(logging.INFO, "notify_transport"):
            lost, moved = f"connection to 127.0.0.1:{victim.port} lost", "connected to 127.0.0.1:"
            victim.signal(signal.SIGSTOP)
            paused_at = time.time()
            assert wait_until(lambda: any(lost in r.getMessage() for r in caplog.records), 3 * heartbeat)
            noticed = min(r.created for r in caplog.records if lost in r.getMessage()) - paused_at
            assert wait_until(lambda: any(moved in r.getMessage() and r.created > paused_at
                                          for r in caplog.records), 4 * heartbeat)
            assert all(f":{victim.port} " not in r.getMessage() for r in caplog.records
                       if moved in r.getMessage() and r.created > paused_at)
            victim.signal(signal.SIGCONT)
        assert noticed <= 2 * heartbeat + 1.0, noticed
        with capsys.disabled():
            print(f"\n[cluster pause] a SIGSTOPped node noticed {noticed:.1f} s after the pause "
                  f"(heartbeat_timeout_threshold={heartbeat})")
        assert client.prepare(timeout=30).call({}, "echo", value="again") == "again"
    finally:
        server.stop()
        server.wait()


CLUSTER_SERVICE = Path(__file__).with_name("oslo_eventlet_cluster_service.py")
SERVICE_TIMEOUT = 300.0


def _run_service_killing_its_node(cluster, executor: str, config: Path, killed: Path) -> dict:
    """Run the child service; when it asks, SIGKILL the node holding its connections (bring it back after)."""
    url = cluster.url() + "?rabbit_retry_interval=1&rabbit_retry_backoff=0"
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning", NT_CLUSTER_KILLED=str(killed))
    # stderr in a file: after the kill the child logs a warning per redelivered duplicate, and a pipe
    # read only at the end filled up and blocked the whole (eventlet) child in a write
    streamed = StreamedChild([sys.executable, str(CLUSTER_SERVICE), url, executor,
                              f"cluster_ev_{uuid.uuid4().hex[:8]}", str(config)], env=env,
                             cwd=CLUSTER_SERVICE.parent)
    child = streamed.process
    reports: dict = {}
    lines: list[str] = []
    victim = None
    timer = threading.Timer(SERVICE_TIMEOUT, kill_showing_stacks, (child,))
    timer.start()
    try:
        for line in streamed.lines():
            lines.append(line)
            if not line.startswith("{"):
                continue
            report = json.loads(line)
            name = report.pop("check")
            reports[name] = report
            if name == "kill_now":
                # each transport picks a node (as oslo, the hosts are shuffled): the busiest one goes
                victim = cluster.busiest_for(child.pid)
                cluster.node(victim).kill()
                (killed.parent / "tmp").write_text(repr(time.time()))
                os.replace(killed.parent / "tmp", killed)
        child.wait(30)
        reports["output"] = f"exit {child.returncode}\nstdout:\n{''.join(lines)[-4000:]}\n" \
                            f"stderr:\n{streamed.stderr_tail(20000)}"
    finally:
        timer.cancel()
        streamed.close()
        if victim is not None and not cluster.node(victim).running:
            cluster.restart(victim)
    return reports


@pytest.mark.parametrize("executor", ["eventlet", "threading"])
def test_an_eventlet_oslo_service_on_ntrabbit_survives_the_node_of_its_connections(
        rabbit_cluster, executor, tmp_path, capsys):
    pytest.importorskip("oslo_messaging")
    pytest.importorskip("eventlet")
    config = tmp_path / "service.conf"
    config.write_text("[oslo_messaging_rabbit]\nrabbit_quorum_queue = true\n"
                      "rabbit_transient_quorum_queue = true\n")
    service = _run_service_killing_its_node(rabbit_cluster, executor, config, tmp_path / "killed")
    report = check(service, "failover")
    assert report["ready"] == "ready"
    assert report["answered_again"], service["output"]
    assert report["stuck_workers"] == [], "\n".join(report["stuck_workers"])
    assert report["lost"] == [] and report["failed_casts"] == [], report
    assert report["notifications_missing"] == [], report
    assert set(report["outcomes"]) <= {"answered", "timeout"}, report
    assert report["longest_call"] <= 5 + CALL_SLACK, report
    assert report["failover"]["max_gap"] < MAX_GAP, report["failover"]
    check(service, "stop_everything")
    with capsys.disabled():
        print(f"\n[cluster kill, oslo {executor}] {report['confirmed']} confirmed casts, 0 lost; "
              f"{report['calls']} calls, longest {report['longest_call']:.2f} s; first answer "
              f"{report['first_answer_after_kill']:.2f} s after the kill; "
              f"hub gap {report['failover']['max_gap']:.2f} s")


def _queue_types(cluster, prefix: str) -> dict[str, str]:
    via = next(node for node in cluster.nodes if node.running)
    lines = via.ctl("list_queues", "-q", "--no-table-headers", "name", "type").splitlines()
    return {name: kind for name, kind in (line.split("\t")[:2] for line in lines if "\t" in line)
            if name.startswith(prefix)}


def test_oslo_rabbit_and_ntrabbit_share_the_clusters_quorum_queues(rabbit_cluster, oslo_conf):
    """A mixed deployment on the cluster, same options: oslo.messaging's ``rabbit://`` and our
    ``ntrabbit://`` declare the same quorum queues, serve one topic together and exchange
    notifications both ways."""
    import oslo_messaging

    topic = f"cluster_mixed_{uuid.uuid4().hex[:8]}"
    transports, servers = {}, []

    class Server:
        def __init__(self, name: str) -> None:
            self.name, self.casts = name, []

        def echo(self, ctxt, value):
            return self.name

        def note(self, ctxt, value):
            self.casts.append(value)

    try:
        for scheme in ("rabbit", "ntrabbit"):
            url = f"{rabbit_cluster.url(scheme=scheme)}?{CLUSTER_QUERY}"
            transports[scheme] = (oslo_messaging.get_rpc_transport(oslo_conf, url),
                                  oslo_messaging.get_notification_transport(oslo_conf, url))
        endpoints = {scheme: Server(scheme) for scheme in transports}
        for scheme, endpoint in endpoints.items():
            server = oslo_messaging.get_rpc_server(
                transports[scheme][0], oslo_messaging.Target(topic=topic, server=scheme), [endpoint],
                executor="threading")
            server.start()
            servers.append(server)
        notes = {scheme: IdRecorder("n") for scheme in transports}
        for scheme, endpoint in notes.items():  # each listens in a pool of its own
            listener = oslo_messaging.get_notification_listener(
                transports[scheme][1], [oslo_messaging.Target(topic=topic)], [endpoint], executor="threading",
                pool=f"{topic}_{scheme}")
            listener.start()
            servers.append(listener)
        for scheme in transports:
            client = oslo_messaging.get_rpc_client(transports[scheme][0], oslo_messaging.Target(topic=topic),
                                                   timeout=10)
            for other in transports:  # each server answers each scheme's client (its queues live)
                assert wait_until(lambda c=client, o=other: _answers(c.prepare(server=o, timeout=2), o), 60)
            assert {client.call({}, "echo", value=i) for i in range(16)} == set(transports)
            client.prepare(server="ntrabbit" if scheme == "rabbit" else "rabbit").cast({}, "note", value=scheme)
        assert wait_until(lambda: endpoints["ntrabbit"].casts == ["rabbit"]
                          and endpoints["rabbit"].casts == ["ntrabbit"], 30)

        for n, scheme in enumerate(transports):  # each scheme's notifier reaches both pools
            notifier = oslo_messaging.Notifier(transports[scheme][1], publisher_id="p", driver="messagingv2",
                                               topics=[topic])
            notifier.info({}, "ev", {"n": n})
        assert wait_until(lambda: all(sorted(e.ids) == [0, 1] for e in notes.values()), 30), \
            {s: e.ids for s, e in notes.items()}
        types = _queue_types(rabbit_cluster, topic)
        assert types and set(types.values()) == {"quorum"}, types
        assert {f"{topic}.rabbit", f"{topic}.ntrabbit"} <= set(types)
    finally:
        for server in servers:
            server.stop()
            server.wait()
        for rpc_transport, notify_transport in transports.values():
            rpc_transport.cleanup()
            notify_transport.cleanup()


def _messages(cluster, queue: str) -> int:
    via = next(node for node in cluster.nodes if node.running)
    for line in via.ctl("list_queues", "-q", "--no-table-headers", "name", "messages").splitlines():
        name, count = (line.split("\t") + [""])[:2]
        if name == queue:
            return int(count)
    raise AssertionError(f"no queue {queue!r}")


def _answers(client, server: str) -> bool:
    import oslo_messaging

    try:
        return client.call({}, "echo", value=0) == server
    except oslo_messaging.MessagingTimeout:
        return False


def test_a_notification_requeued_past_the_delivery_limit_is_dead_lettered(rabbit_cluster, cluster_transports):
    """``rabbit_quorum_delivery_limit``: the quorum queue hands a requeued notification out at most
    limit + 1 times, then dead-letters it through the exchange an operator's policy names; it is
    neither lost nor redelivered forever."""
    import pika

    limit = 2
    topic = f"cluster_limit_{uuid.uuid4().hex[:8]}"
    queue, dlx, dlq = f"{topic}.info", f"{topic}.dlx", f"{topic}.dead"
    node = next(n for n in rabbit_cluster.nodes if n.running)
    node.ctl("set_policy", "--apply-to", "queues", f"{topic}-dl", f"^{re.escape(queue)}$",
             json.dumps({"dead-letter-exchange": dlx}))
    admin = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.port))
    channel = admin.channel()
    channel.exchange_declare(dlx, "fanout", durable=True)
    channel.queue_declare(dlq, durable=True, arguments={"x-queue-type": "quorum"})
    channel.queue_bind(dlq, dlx)
    seen: list[int] = []

    class Refusing:
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            seen.append(payload["n"])
            return nt.NotificationResult.REQUEUE

    url = f"{rabbit_cluster.url()}?{CLUSTER_QUERY}&rabbit_quorum_delivery_limit={limit}"
    listener = nt.get_notification_listener(cluster_transports(url, kind="notify"), [nt.Target(topic=topic)],
                                            [Refusing()], allow_requeue=True)
    listener.start()
    try:
        sender = cluster_transports(url, kind="notify")
        nt.Notifier(sender, publisher_id="p", driver="messagingv2", topics=[topic]).info({}, "ev", {"n": 7})
        assert sender.flush(30) == 0
        dead: list[bytes] = []

        def dead_lettered() -> bool:
            method, _props, body = channel.basic_get(dlq, auto_ack=True)
            if method is not None:
                dead.append(body)
            return bool(dead)

        assert wait_until(dead_lettered, 60), seen
        assert json.loads(json.loads(dead[0])["oslo.message"])["payload"] == {"n": 7}
        assert 1 <= len(seen) <= limit + 1 and set(seen) == {7}
        # gone from its queue (neither ready nor handed out): it will not come back
        assert wait_until(lambda: _messages(rabbit_cluster, queue) == 0, 30)
        assert len(seen) <= limit + 1
    finally:
        listener.stop()
        listener.wait()
        channel.queue_delete(dlq)
        channel.exchange_delete(dlx)
        admin.close()
        node.ctl("clear_policy", f"{topic}-dl")
