"""Broker restart storm: what SIGKILLing and restarting the broker costs the notifier.

Eight threads share one transport and send at about 400 notifications per
second in all while the broker is SIGKILLed, kept down for 3 s and started
again on the same port (and, for noida-db, the same data) three times.
Measured:

* sends failed (raised by ``Notifier.info`` or reported failed later), of sent;
* the longest single ``Notifier.info`` call (the product promises <= 10 s);
* per restart, the time from the broker answering metadata requests again
  to the first notification confirmed after it;
* exact accounting (``delivered + failed + pending == sent``) and, reading
  the topic back, notifications neither in the topic nor reported failed.

noida-db keeps its data, so every notification must be in the topic or
counted failed, except writes the broker acknowledged in the last moment
before the kill and did not store (a loss no client can see). Tansu keeps
everything in memory: a kill wipes the topic (re-created at each start), so
only what was sent since the last kill can be checked in the topic.

Usage: ``python -m bench.kafka_restart_storm [--broker noida|tansu|both] [--json PATH]``;
``python -m bench --only kafka_restart_storm`` runs it (:func:`measure`) as rows of the
benchmark table.
The functional test ``tests/functional/test_faults_kafka_broker_kill.py`` runs
the same storm and asserts on its counts.
"""
from __future__ import annotations

import argparse
import collections
import json
import logging
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable
from notify_transport.reading import read_topic

#: Acknowledged writes a crashed broker may not have stored: sent at most this long before a
#: kill. noida-db loses up to about 1.1 s of writes it acknowledged (measured: every id missing
#: after its SIGKILL had a success delivery report); no client can see or recover that loss.
CRASH_WINDOW = 2.0


@dataclass
class StormResult:
    broker: str
    threads: int
    rate: float
    cycles: int
    down: float
    sent: int = 0
    failed: int = 0
    raised: int = 0
    delivered: int = 0
    pending: int = 0
    longest_call: float = 0.0
    #: the longest time during the storm without a single notification confirmed
    longest_confirm_gap_s: float = 0.0
    #: per restart: seconds from the broker answering to the first confirmed notification
    first_delivery_after_answer: list[float] = field(default_factory=list)
    #: ids that must be in the topic (not lost with a crashed broker's memory / last moment)
    checked: int = 0
    #: checked ids missing from the topic
    missing: int = 0
    #: ids missing, sent just before a kill (or, Tansu, before the last kill): the broker's loss
    broker_lost: int = 0
    duplicated: int = 0
    #: the most notifications the producer held unconfirmed at once (sampled every 10 ms)
    held_max: int = 0
    #: notifications whose send raised (not held) and that are in the topic all the same
    raised_in_topic: int = 0
    seconds: float = 0.0
    #: the first missing ids (not lost by the broker) and when each was sent, relative to each kill
    missing_sample: list[tuple[int, list[float]]] = field(default_factory=list)
    #: per listener pool: mode, dispatched, missing (in the topic, never dispatched), duplicated,
    #: missing_after_last_fault (sent once the last fault was over)
    pools: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def failed_ratio(self) -> float:
        return self.failed / self.sent if self.sent else 0.0

    def summary(self) -> str:
        firsts = ", ".join(f"{s:.2f}" for s in self.first_delivery_after_answer)
        return (f"{self.broker}: {self.cycles} restarts ({self.down:.0f} s down), {self.threads} "
                f"threads at {self.rate:.0f} msg/s: sent {self.sent}, failed {self.failed} "
                f"({100 * self.failed_ratio:.2f}%, raised {self.raised}), delivered "
                f"{self.delivered}, pending {self.pending}; longest Notifier.info "
                f"{self.longest_call:.2f} s; longest wait for a confirmation "
                f"{self.longest_confirm_gap_s:.2f} s; first delivery after the broker answered: "
                f"[{firsts}] s; checked in the topic {self.checked}: missing {self.missing}, "
                f"lost by the broker itself {self.broker_lost}, duplicated {self.duplicated}")


#: Seconds a listener pool may take, after the storm, to dispatch what the topic holds.
POOL_CATCH_UP = 120.0


def notification_id(value: bytes) -> int:
    """The storm's id in a notification (oslo 2.0 envelope)."""
    return json.loads(json.loads(value)["oslo.message"])["payload"]["i"]


def read_ids(driver: Any, topic: str, expected: set[int], idle: float = 5.0,
             decode: Callable[[bytes], int] = notification_id) -> list[int]:
    """The ids in ``topic``, read until each of ``expected`` was seen or nothing came for ``idle`` s.

    Not bounded by the high watermark: Tansu's can be short of the last records.
    """
    reader = read_topic(driver, topic, "earliest", until_end=False)
    ids: list[int] = []
    left = set(expected)
    try:
        while left:
            record = reader.next(timeout=idle)
            if record is None:
                break
            i = decode(record.value)
            ids.append(i)
            left.discard(i)
    except StopIteration:
        pass
    finally:
        reader.close()
    return ids


def in_crash_window(sent: float, kills: list[float]) -> bool:
    """Whether a write sent at ``sent`` may have been acknowledged and lost by a crash in ``kills``."""
    return any(k - CRASH_WINDOW <= sent < k for k in kills)


def _first_delivery(transport: Any, since: float, timeout: float) -> float:
    """Seconds from ``since`` until a notification is confirmed (-1: none within ``timeout``).

    ``delivered`` (sent - failed - pending) only rises when the broker confirms something.
    """
    baseline = transport.delivery_stats()["delivered"]
    deadline = since + timeout
    while time.monotonic() < deadline:
        if transport.delivery_stats()["delivered"] > baseline:
            return time.monotonic() - since
        time.sleep(0.005)
    return -1.0


class BrokerCrash:
    """The storm's fault on one broker, or on every node of an Apache Kafka cluster at once:
    SIGKILL it, keep it down ``down`` s, start it again."""

    def __init__(self, broker: Any, down: float) -> None:
        self.broker, self.down = broker, down

    def strike(self, stop: threading.Event) -> tuple[float, float]:
        """Do the fault once; (when it began, when the broker answered again)."""
        self.broker.kill()
        began = time.monotonic()
        stop.wait(self.down)
        self.broker.start()  # returns once the broker answers metadata requests
        return began, time.monotonic()


class LeaderCrash:
    """Three-node Apache Kafka: SIGKILL the node leading ``topic``'s partition 0, restart it after
    ``down`` s and wait until its replicas are in sync again."""

    def __init__(self, cluster: Any, topic: str, down: float) -> None:
        self.cluster, self.topic, self.down = cluster, topic, down

    def strike(self, stop: threading.Event) -> tuple[float, float]:
        node = self.cluster.leader_of(self.topic)
        node.kill()
        began = time.monotonic()
        stop.wait(self.down)
        node.start()  # returns once the node is registered again
        answered = time.monotonic()
        self.cluster.wait_in_sync(self.topic)
        return began, answered


class RollingRestart:
    """Three-node Apache Kafka: SIGTERM each node in turn (a controlled shutdown), start it again and
    wait until every replica of ``topic`` is in sync before the next."""

    def __init__(self, cluster: Any, topic: str) -> None:
        self.cluster, self.topic = cluster, topic

    def strike(self, stop: threading.Event) -> tuple[float, float]:
        began = time.monotonic()
        for node in self.cluster.nodes:
            node.stop()
            node.start()
            self.cluster.wait_in_sync(self.topic)
        return began, time.monotonic()


class TwoNodesDown:
    """Three-node Apache Kafka: stop (SIGTERM) the two nodes that do not lead ``topic``'s partition 0,
    keep them down ``down`` s, start them again and wait until the replicas are in sync.

    The partition keeps its leader, but its in-sync replicas fall below
    ``min.insync.replicas`` (2): ``acks=all`` writes wait for the whole outage.
    """

    def __init__(self, cluster: Any, topic: str, down: float) -> None:
        self.cluster, self.topic, self.down = cluster, topic, down

    def strike(self, stop: threading.Event) -> tuple[float, float]:
        leader = self.cluster.leader_of(self.topic)
        others = [node for node in self.cluster.nodes if node is not leader]
        for node in others:
            node.stop()
        began = time.monotonic()
        stop.wait(self.down)
        for node in others:
            node.start()
        answered = time.monotonic()
        self.cluster.wait_in_sync(self.topic, timeout=120.0)
        return began, answered


#: Seconds two nodes of three stay down in the ``two_down`` fault: well past a minute.
TWO_NODES_DOWN = 90.0


class PoolRecorder:
    """The ids a listener pool dispatched during the storm (each copy counted)."""

    def __init__(self) -> None:
        self.ids: collections.Counter[int] = collections.Counter()
        self._lock = threading.Lock()

    def info(self, ctxt: Any, publisher_id: str, event_type: str, payload: Any, metadata: Any) -> None:
        with self._lock:
            self.ids[payload["i"]] += 1


def run_storm(broker: Any, conf: Any, topic: str, *, threads: int = 8, rate: float = 400.0,
              cycles: int = 3, down: float = 3.0, up: float = 4.0, before: float = 2.0,
              keeps_data: bool = True, fault: Any = None, crash_window: bool = True,
              pools: dict[str, str] | None = None, topic_partitions: int = 1,
              **query: Any) -> StormResult:
    """Run the storm against ``broker`` (a started :class:`~notify_transport.testing.brokers.BrokerProcess`).

    ``keeps_data``: the broker keeps its data across a kill (noida-db); else
    (Tansu) the topic is created again after each start. ``fault``: what each
    cycle does (default :class:`BrokerCrash` of ``broker``); ``crash_window``:
    whether writes acknowledged just before a fault may be lost by the broker
    (a single node without replicas), else every confirmed one is checked.
    ``pools``: listener pools started before the storm, ``{pool: delivery_mode}``;
    what each received is in ``result.pools``. ``query``: transport URL options.
    """
    import notify_transport
    from notify_transport import Notifier
    from notify_transport.exceptions import MessageDeliveryFailure

    result = StormResult(broker.name, threads, rate, cycles, down)
    fault = fault or BrokerCrash(broker, down)
    transport = notify_transport.get_notification_transport(
        conf, broker.url(topic_partitions=topic_partitions, **query))
    driver: Any = transport.driver  # the Kafka driver: its admin client creates the topic
    kafka_topic = f"{topic}.info"
    driver._admin.ensure_topics([kafka_topic])
    recorders: dict[str, PoolRecorder] = {}
    listeners = []
    for pool, mode in (pools or {}).items():
        recorders[pool] = PoolRecorder()
        listener = notify_transport.get_notification_listener(
            transport, [notify_transport.Target(topic=topic)], [recorders[pool]], pool=pool,
            executor="threading", delivery_mode=mode)
        listener.start()
        listeners.append(listener)
    notifier = Notifier(transport, driver="messagingv2", topics=[topic], publisher_id="storm")
    ids = iter(range(10 ** 9))
    ids_lock = threading.Lock()
    sent_at: dict[int, float] = {}
    raised: list[int] = []
    longest = [0.0] * threads
    stop = threading.Event()

    def send(n: int) -> None:
        interval = threads / rate
        next_at = time.monotonic()
        while not stop.is_set():
            with ids_lock:
                i = next(ids)
                started = sent_at[i] = time.monotonic()
            try:
                notifier.info({}, "storm", {"i": i, "thread": n})
            except MessageDeliveryFailure:
                raised.append(i)
            longest[n] = max(longest[n], time.monotonic() - started)
            next_at += interval
            stop.wait(max(0.0, next_at - time.monotonic()))

    def watch_confirmations() -> None:
        last, last_at = transport.delivery_stats()["delivered"], time.monotonic()
        while not stop.wait(0.01):
            stats = transport.delivery_stats()
            result.held_max = max(result.held_max, stats["pending"])
            now = stats["delivered"]
            if now != last:
                result.longest_confirm_gap_s = max(result.longest_confirm_gap_s,
                                                   time.monotonic() - last_at)
                last, last_at = now, time.monotonic()

    senders = [threading.Thread(target=send, args=(n,), name=f"storm-{n}", daemon=True)
               for n in range(threads)]
    senders.append(threading.Thread(target=watch_confirmations, name="storm-watch", daemon=True))
    started = time.monotonic()
    kills: list[float] = []
    answers: list[float] = []
    for thread in senders:
        thread.start()
    try:
        stop.wait(before)
        for _ in range(cycles):
            began, answered = fault.strike(stop)
            kills.append(began)
            answers.append(answered)
            if not keeps_data:
                driver._admin.ensure_topics([kafka_topic])
            result.first_delivery_after_answer.append(_first_delivery(transport, answered, up + 30))
            stop.wait(max(0.0, answered + up - time.monotonic()))
    finally:
        stop.set()
        for thread in senders:
            thread.join(60)
    assert not any(t.is_alive() for t in senders), "a sender is still blocked 60 s after the storm"
    transport.flush(60)
    stats = transport.delivery_stats()
    result.seconds = time.monotonic() - started
    result.sent, result.failed, result.delivered, result.pending = (
        stats["sent"], stats["failed"], stats["delivered"], stats["pending"])
    result.raised = len(raised)
    result.longest_call = max(longest)
    assert result.sent == len(sent_at), (result.sent, len(sent_at))

    raised_set = set(raised)
    checked = [i for i, t in sent_at.items() if i not in raised_set
               and (keeps_data or t >= kills[-1])]
    counts = collections.Counter(read_ids(driver, kafka_topic, set(checked)))
    result.duplicated = sum(n - 1 for n in counts.values() if n > 1)
    result.raised_in_topic = len(raised_set & set(counts))
    result.checked = len(checked)
    missing = [i for i in checked if i not in counts]
    lost_by_broker = [i for i in missing if crash_window and in_crash_window(sent_at[i], kills)]
    result.broker_lost = len(lost_by_broker)
    result.missing = len(missing) - len(lost_by_broker)
    lost_by_us = sorted(set(missing) - set(lost_by_broker))
    result.missing_sample = [(i, [round(sent_at[i] - k, 3) for k in kills]) for i in lost_by_us[:20]]
    in_topic = set(counts)
    for pool, recorder in recorders.items():
        # wait until the pool has dispatched everything in the topic (a pool that rejoins after
        # the whole cluster crashed may stay idle for a while first)
        deadline = time.monotonic() + POOL_CATCH_UP
        while time.monotonic() < deadline and not in_topic <= set(recorder.ids):
            time.sleep(0.5)
        got = set(recorder.ids)
        result.pools[pool] = {"mode": (pools or {})[pool], "dispatched": sum(recorder.ids.values()),
                              "missing": len(in_topic - got),
                              "duplicated": sum(n - 1 for n in recorder.ids.values() if n > 1),
                              "missing_after_last_fault": len(
                                  {i for i in in_topic if sent_at[i] >= answers[-1] + up} - got)
                              if answers else 0}
    for listener in listeners:
        listener.stop()
    for listener in listeners:
        listener.wait()
    transport.cleanup()
    return result


def _broker(name: str, workdir: Path) -> Any:
    from notify_transport.testing.apache_kafka import ApacheKafka
    from notify_transport.testing.brokers import NoidaBroker, TansuBroker

    if name == "apache-kafka":
        return ApacheKafka(base_dir=workdir / "kafka")
    return NoidaBroker(data_dir=workdir / "data") if name == "noida" else TansuBroker()


#: Brokers whose acknowledged writes survive the broker process's SIGKILL: Apache Kafka has
#: written them to its log (the page cache outlives the process), so none is exempt.
NO_CRASH_WINDOW = ("apache-kafka",)


def storm(name: str, *, threads: int = 8, rate: float = 400.0, cycles: int = 3,
          down: float = 3.0) -> StormResult:
    """Start broker ``name`` (``apache-kafka``, ``noida`` or ``tansu``) for one storm, run it,
    close the broker."""
    from oslo_config import cfg

    with tempfile.TemporaryDirectory(prefix="nt-storm-") as tmp:
        broker = _broker(name, Path(tmp))
        broker.start()
        try:
            conf = cfg.ConfigOpts()
            conf([])
            return run_storm(broker, conf, f"storm-{uuid.uuid4().hex[:8]}", threads=threads,
                             rate=rate, cycles=cycles, down=down, keeps_data=name != "tansu",
                             crash_window=name not in NO_CRASH_WINDOW)
        finally:
            broker.close()


def measure(broker: str, threads: int = 8, rate: float = 400.0, cycles: int = 3,
            down: float = 3.0) -> dict[str, Any]:
    """One storm as a ``python -m bench`` result (run in a bench worker, see ``bench/run.py``).

    Adds the numbers the table shows: ``failed_pct`` (of sent),
    ``first_delivery_worst_s`` (the slowest restart; absent, with a note, when
    some restart saw no delivery at all) and ``lost_silently``.
    """
    result = storm(broker, threads=threads, rate=rate, cycles=cycles, down=down)
    out: dict[str, Any] = asdict(result)
    out["failed_pct"] = 100 * result.failed_ratio
    out["lost_silently"] = result.missing
    firsts = result.first_delivery_after_answer
    notes = []
    if firsts and min(firsts) >= 0:
        out["first_delivery_worst_s"] = max(firsts)
    else:
        notes.append(f"{sum(f < 0 for f in firsts)} of {len(firsts)} restarts saw no delivery")
    if result.pending:
        notes.append(f"{result.pending} still pending after the final flush")
    notes.append(result.summary())
    out["note"] = "; ".join(notes)
    return out


def cluster_fault(fault: str, *, threads: int = 8, rate: float = 400.0) -> StormResult:
    """One fault of a three-node Apache Kafka started for it: ``leader`` (the partition leader
    SIGKILLed, back after 3 s), ``rolling`` (each node SIGTERMed and back in turn), ``down``
    (every node SIGKILLed, all back after 10 s) or ``two_down`` (the two nodes that do not lead
    stopped for 90 s: no write can be acknowledged meanwhile), under the storm's load with two
    listener pools."""
    from oslo_config import cfg

    from notify_transport.testing.apache_kafka import ApacheKafka

    topic = f"cluster-{fault}-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="nt-cluster-") as tmp:
        with ApacheKafka(nodes=3, base_dir=Path(tmp) / "kafka") as cluster:
            conf = cfg.ConfigOpts()
            conf([])
            down = {"leader": 3.0, "rolling": 0.0, "down": 10.0, "two_down": TWO_NODES_DOWN}[fault]
            faults = {"leader": lambda: LeaderCrash(cluster, f"{topic}.info", down),
                      "rolling": lambda: RollingRestart(cluster, f"{topic}.info"),
                      "down": lambda: BrokerCrash(cluster, down),
                      "two_down": lambda: TwoNodesDown(cluster, f"{topic}.info", down)}
            suffix = uuid.uuid4().hex[:6]
            return run_storm(cluster, conf, topic, threads=threads, rate=rate, cycles=1, down=down,
                             fault=faults[fault](), crash_window=False, topic_partitions=3, up=3.0,
                             pools={f"alo-{suffix}": "at_least_once",
                                    f"cbd-{suffix}": "commit_before_dispatch"})


def measure_cluster(fault: str) -> dict[str, Any]:
    """One cluster fault as a ``python -m bench`` result (see :func:`cluster_fault`)."""
    result = cluster_fault(fault)
    out: dict[str, Any] = asdict(result)
    out["failed_pct"] = 100 * result.failed_ratio
    out["lost_silently"] = result.missing if fault != "down" else max(0, result.missing - result.failed)
    out["alo_missing"] = sum(p["missing"] for p in result.pools.values() if p["mode"] == "at_least_once")
    out["note"] = f"{result.summary()}; pools {result.pools}"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_restart_storm",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--broker", choices=("apache-kafka", "noida", "tansu", "all"), default="all")
    parser.add_argument("--cluster", choices=("leader", "rolling", "down", "two_down"), default=None,
                        help="instead: one fault of a three-node Apache Kafka")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rate", type=float, default=400.0)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--down", type=float, default=3.0)
    parser.add_argument("--json", dest="json_path", default=None, metavar="PATH")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    results = []
    if args.cluster:
        result = cluster_fault(args.cluster, threads=args.threads, rate=args.rate)
        print(result.summary(), result.pools, flush=True)
        results.append(result)
    names = () if args.cluster else (
        ("apache-kafka", "noida", "tansu") if args.broker == "all" else (args.broker,))
    for name in names:
        result = storm(name, threads=args.threads, rate=args.rate, cycles=args.cycles, down=args.down)
        print(result.summary(), flush=True)
        results.append(result)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
