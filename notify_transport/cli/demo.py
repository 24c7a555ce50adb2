"""``notify-transport demo``: the main job.

A notifier and listeners in pools exchange notifications over the configured
transport, or over an embedded Kafka-protocol broker started for the run when
none is configured, and the command prints what flowed. It exits non-zero
unless every pool received every notification exactly once.
"""
from __future__ import annotations

import argparse
import collections
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from notify_transport import (Notifier, Target, get_notification_listener,
                              get_notification_transport)
from notify_transport.cli import contract
from notify_transport.cli.common import EMBEDDED_BROKERS, check_broker, load_conf, url_or_embedded_broker
from notify_transport.cli.ops import args as cli_args
from notify_transport.exceptions import ConfigurationError
from notify_transport.url import TransportURL

PUBLISHERS = 16
EVENTS = (("info", "compute.instance.create.end"), ("info", "compute.instance.delete.end"),
          ("warn", "compute.instance.resize.prep"), ("error", "compute.instance.create.error"),
          ("audit", "identity.authenticate"), ("sample", "metering.cpu"))


DESCRIPTION = """\
A notifier and listeners in pools exchange notifications over the configured
transport, or over a broker started for the run when none is configured
(noida-db from the embedded extra, or Apache Kafka with --broker apache-kafka),
and the command prints what flowed.

exit status: 0 every pool received every notification exactly once, 1 not,
2 bad input or configuration (refused credentials too), 3 broker unreachable"""


EXAMPLES = """\
examples:
  notify-transport demo
  notify-transport demo --broker apache-kafka --count 1000
  notify-transport demo --transport-url rabbit://guest:guest@127.0.0.1:5672/ --pools audit,billing,metering"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="run notifier and listener pools and show what flows (main job)",
                       description=DESCRIPTION, epilog=EXAMPLES)
    p.add_argument("--count", type=cli_args.positive_int, default=300, help="notifications to send")
    p.add_argument("--pools", default="audit,billing",
                   help="comma-separated listener pools")
    p.add_argument("--listeners-per-pool", type=cli_args.positive_int, default=2,
                   help="listeners sharing each pool")
    p.add_argument("--timeout", type=cli_args.positive_float, default=60.0, metavar="SECONDS",
                   help="seconds to wait for delivery")
    cli_args.add_connection_args(p)
    p.add_argument("--broker", choices=EMBEDDED_BROKERS, default="noida",
                   help="broker started for the run when no transport URL is configured: noida "
                        "(noida-db, the embedded default) or apache-kafka (Apache Kafka, one KRaft "
                        "node; needs Java 17 and fetches its jars with Maven the first time)")
    p.set_defaults(func=run)


class _PoolMember:
    """Endpoint of one listener: records what it received, per priority."""

    def __init__(self, tally: "_Tally", pool: str, index: int) -> None:
        self._tally, self._pool, self._index = tally, pool, index
        for prio in ("audit", "info", "warn", "error", "sample"):
            setattr(self, prio, self._record)

    def _record(self, ctxt: dict, publisher_id: str, event_type: str, payload: dict,
                metadata: dict) -> None:
        self._tally.add(self._pool, self._index, event_type, payload["seq"])


class _Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seqs: dict[str, list[int]] = collections.defaultdict(list)
        self.per_listener: collections.Counter[tuple[str, int]] = collections.Counter()
        self.per_event: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)

    def add(self, pool: str, index: int, event_type: str, seq: int) -> None:
        with self.lock:
            self.seqs[pool].append(seq)
            self.per_listener[(pool, index)] += 1
            self.per_event[pool][event_type] += 1

    def done(self, pools: list[str], count: int) -> bool:
        with self.lock:
            return all(len(self.seqs[p]) >= count for p in pools)


@dataclass
class Outcome:
    """What one exchange found: whether every pool got every notification exactly once, and how
    long each listener's ``start()`` took, in the order they were started (the benchmark's
    readiness rows read it)."""

    ok: bool = False
    ready_s: list[float] = field(default_factory=list)
    #: from the first listener's creation to the last one's return from start()
    all_started_s: float = 0.0
    elapsed_s: float = 0.0


def with_demo_defaults(url: str) -> TransportURL:
    """``url`` with the demo's own defaults where it sets none (two partitions on Kafka).

    A :class:`TransportURL`, not its text: the text masks the password, which the
    transport needs to log in.
    """
    parsed = TransportURL.parse(None, url)
    if parsed.transport == "kafka" and "topic_partitions" not in parsed.query:
        parsed.query["topic_partitions"] = "2"  # so the listeners of a pool split the stream
    return parsed


def run(args: argparse.Namespace) -> int:
    pools = [p for p in args.pools.split(",") if p]
    if not pools:
        raise ConfigurationError("--pools needs at least one pool name")
    conf = load_conf(args)
    with url_or_embedded_broker(args, conf) as url:
        transport = get_notification_transport(conf, with_demo_defaults(url))
        try:
            # an unreachable broker or a refused login is the contract's one line, said before
            # any listener starts (each connection attempt is in the log with --debug)
            check_broker(transport, args.connect_timeout, args.debug)
            print(f"transport: {transport.url.redacted()}")
            if exchange(transport, pools, args).ok:
                return contract.OK_STATUS
            return contract.fail(contract.FAILED, "a pool missed or repeated notifications (see the table)",
                                 "run again with a longer --timeout, or with --debug to see every step")
        finally:
            transport.cleanup()


def exchange(transport: Any, pools: list[str], args: argparse.Namespace, topic: str | None = None) -> Outcome:
    """Start ``args.listeners_per_pool`` listeners per pool one after another on a new topic, send
    ``args.count`` notifications, wait for them (``args.timeout``) and print what flowed."""
    topic = topic or f"demo-{uuid.uuid4().hex[:8]}"
    tally = _Tally()
    servers = []
    started = time.monotonic()
    outcome = Outcome()
    took = outcome.ready_s
    try:
        for pool in pools:
            for i in range(args.listeners_per_pool):
                server = get_notification_listener(transport, [Target(topic=topic)],
                                                   [_PoolMember(tally, pool, i)], pool=f"{topic}-{pool}")
                began = time.monotonic()
                server.start()
                took.append(time.monotonic() - began)
                servers.append(server)
        outcome.all_started_s = time.monotonic() - started
        print(f"started {len(servers)} listeners on topic {topic!r} in pools {', '.join(pools)} "
              f"({outcome.all_started_s:.1f}s; each ready in "
              f"{', '.join(f'{t:.2f}' for t in took)}s)")
        base = Notifier(transport, driver="messagingv2", topics=[topic])
        # several publishers: Kafka keys by publisher_id, so they spread over partitions
        host = socket.gethostname()
        notifiers = [base.prepare(publisher_id=f"compute.{host}-{n}") for n in range(PUBLISHERS)]
        t0 = time.monotonic()
        for seq in range(args.count):
            priority, event_type = EVENTS[seq % len(EVENTS)]
            notifier = notifiers[seq % PUBLISHERS]
            getattr(notifier, priority)({"request_id": f"req-{seq}"}, event_type, {"seq": seq})
        queued_s = time.monotonic() - t0
        pending = base.flush(args.timeout)
        stats = transport.delivery_stats()
        # sending only queues; the confirmations include the first send's connection (and
        # a Kafka producer's id), which take longer than the sends themselves
        print(f"sent {args.count} notification{'' if args.count == 1 else 's'} in {queued_s:.2f}s; "
              f"broker confirmed {stats.get('delivered', '?')}, failed {stats.get('failed', 0)}, "
              f"pending {pending} within {time.monotonic() - t0:.2f}s (the first send connects)")
        deadline = time.monotonic() + args.timeout
        while not tally.done(pools, args.count) and time.monotonic() < deadline:
            time.sleep(0.05)
        outcome.elapsed_s = time.monotonic() - t0
    finally:
        for server in servers:
            server.stop()
        for server in servers:
            server.wait()
    outcome.ok = _report(tally, pools, args, outcome.elapsed_s)
    return outcome


def _report(tally: _Tally, pools: list[str], args: argparse.Namespace, elapsed: float) -> bool:
    ok = True
    print(f"\n{'pool':<12} {'listener':>8} {'received':>9}")
    for pool in pools:
        for i in range(args.listeners_per_pool):
            print(f"{pool:<12} {i:>8} {tally.per_listener[(pool, i)]:>9}")
    print()
    for pool in pools:
        seqs = tally.seqs[pool]
        missing = args.count - len(set(seqs))
        dupes = len(seqs) - len(set(seqs))
        verdict = "OK" if not missing and not dupes else "FAILED"
        ok &= verdict == "OK"
        events = ", ".join(f"{e}={n}" for e, n in sorted(tally.per_event[pool].items()))
        print(f"pool {pool}: {len(set(seqs))}/{args.count} received, {missing} missing, "
              f"{dupes} duplicates -> {verdict}\n  by event type: {events}")
    print(f"\n{len(pools) * args.count} deliveries in {elapsed:.2f}s: "
          f"{'every pool received every notification exactly once' if ok else 'DELIVERY INCOMPLETE'}")
    return ok
