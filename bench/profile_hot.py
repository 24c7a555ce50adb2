"""Profile one hot path in this process: CPU per message, and where it goes.

    python -m bench.profile_hot send   [--impl ours|oslo|raw] [--count N]
    python -m bench.profile_hot listen [--impl ours|oslo|raw] [--count N]
    python -m bench.profile_hot rpc    [--impl ours|oslo|raw] [--count N]
    python -m bench.profile_hot build  [--count N]
    ... --py-spy               # sample every thread with py-spy, print the top frames

``send`` times Notifier.info (or raw produce) plus the final flush; ``listen``
dispatches a pre-filled topic through the listener API; ``rpc`` makes
sequential calls to a server running in a worker process; ``build`` times
Notifier.info on the ``noop`` driver (no broker) with the notifier's id pool
and cached clock, then with a UUID and a datetime made per notification. Each prints the
rate, the CPU time per message (the sending thread's for ``send`` and
``rpc``, the whole process's for ``listen``) and, with ``--py-spy``, the
functions where samples fell (inclusive and self), restricted to the threads
doing the work. Brokers: one Apache Kafka node started here (``--broker noida`` for noida-db),
RabbitMQ on 127.0.0.1:5672.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid


#: Which Kafka broker ``send`` and ``listen`` start (``--broker``).
BROKER_ENV = "BENCH_PROFILE_BROKER"


def _kafka_broker():
    """A one-node broker of the kind ``--broker`` names: Apache Kafka (the broker of record) or noida-db."""
    if os.environ.get(BROKER_ENV, "apache-kafka") == "noida":
        from notify_transport.testing.brokers import NoidaBroker
        return NoidaBroker()
    from notify_transport.testing.apache_kafka import ApacheKafka
    return ApacheKafka()


def _send(impl: str, count: int) -> dict:
    from bench import brokers
    from bench.kafka_impls import make_sender
    from bench.payload import make_context, make_payload

    with _kafka_broker() as broker:
        brokers.create_topics(broker.bootstrap, ["profile.info"], 1)
        ctxt = make_context()
        payload = make_payload(ctxt)
        sender = make_sender(impl, broker.bootstrap, "profile", ctxt)
        for _ in range(1000):
            sender.send(payload)
        sender.flush()
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        for _ in range(count):
            sender.send(payload)
        sender.flush()
        cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
        sender.close()
    return {"rate": count / wall, "cpu_us_per_msg": cpu / count * 1e6}


def _listen(impl: str, count: int) -> dict:
    from bench import brokers
    from bench.kafka_impls import make_receiver
    from bench.payload import context_dict, encode_envelope, make_context, make_payload
    from confluent_kafka import Producer

    with _kafka_broker() as broker:
        bootstrap = broker.bootstrap
        brokers.create_topics(bootstrap, ["profile.info"], 1)
        ctxt = make_context()
        value = encode_envelope(make_payload(ctxt), context_dict(ctxt))
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for _ in range(count):
            while True:
                try:
                    producer.produce("profile.info", value)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush(60)
        brokers.commit_start_offsets(bootstrap, "profile", "profile.info")
        state = {"n": 0, "first": 0.0, "last": 0.0, "cpu0": 0.0}
        done = threading.Event()

        def on_message(_payload: dict, now: float) -> None:
            state["n"] += 1
            if state["n"] == 1:
                state["first"], state["cpu0"] = now, time.process_time()
            state["last"] = now
            if state["n"] >= count:
                done.set()

        def on_count(n: int, now: float) -> None:
            for _ in range(n):
                on_message({}, now)

        options = {"decode": False, "on_count": on_count} if impl == "raw" else {}
        with _commit_timing() as commits:
            receiver = make_receiver(impl, bootstrap, "profile", "profile", on_message, **options)
            wall0 = time.perf_counter()
            receiver.start()
            done.wait(120)
            wall = time.perf_counter() - wall0
            cpu = time.process_time() - state["cpu0"]
            receiver.stop()
    n = state["n"]
    out = {"rate": (n - 1) / max(1e-9, state["last"] - state["first"]), "dispatched": n,
           "process_cpu_us_per_msg": cpu / max(1, n) * 1e6}
    if impl == "ours":
        out.update(wall_seconds=round(wall, 3), commits=commits["count"],
                   commit_ms_mean=round(commits["seconds"] / max(1, commits["count"]) * 1e3, 2),
                   waited_for_commits_seconds=round(commits["waited"], 3))
    return out


@contextlib.contextmanager
def _commit_timing():
    """Count notify-transport's synchronous commits and time them, and the polling thread's waits
    for them (commit-before-dispatch mode), by wrapping the two functions for this run."""
    from notify_transport.drivers.kafka.delivery import commit

    totals = {"count": 0, "seconds": 0.0, "waited": 0.0}
    real_commit, real_wait = commit.commit_sync, commit._CommitJob.__call__

    def timed_commit(consumer, offsets):
        started = time.perf_counter()
        try:
            return real_commit(consumer, offsets)
        finally:
            totals["count"] += 1
            totals["seconds"] += time.perf_counter() - started

    def timed_wait(job):
        started = time.perf_counter()
        try:
            return real_wait(job)
        finally:
            totals["waited"] += time.perf_counter() - started

    commit.commit_sync, commit._CommitJob.__call__ = timed_commit, timed_wait
    try:
        yield totals
    finally:
        commit.commit_sync, commit._CommitJob.__call__ = real_commit, real_wait


def _rpc(impl: str, count: int) -> dict:
    from bench.brokers import RabbitVhost
    from bench.procs import Worker
    from bench.rabbit_impls import make_rpc_client

    with RabbitVhost("profile-" + uuid.uuid4().hex[:6]) as vhost:
        rabbit = {"host": vhost.host, "port": vhost.port, "vhost": vhost.name,
                  "user": vhost.user, "password": vhost.password}
        server = Worker("bench.rabbit_rpc:serve", dict(impl=impl, url=vhost.url(), rabbit=rabbit,
                                                      topic="profile", server="s1"))
        try:
            server.wait_signal("ready", 60)
            client = make_rpc_client(impl, vhost.url(), rabbit, "profile", 30)
            value = {"x": "y" * 200}
            for _ in range(100):
                client.call("echo", value=value)
            cpu0, wall0 = time.thread_time(), time.perf_counter()
            for _ in range(count):
                client.call("echo", value=value)
            cpu, wall = time.thread_time() - cpu0, time.perf_counter() - wall0
            client.close()
            server.send("stop")
            server.result(30)
        finally:
            server.kill()
    return {"rate": count / wall, "mean_ms": wall / count * 1e3,
            "client_thread_cpu_us_per_call": cpu / count * 1e6}


def _build(impl: str, count: int) -> dict:
    """Notifier.info on the ``noop`` driver: what building a notification costs, no broker.

    Measures the notifier's process-wide message id pool and cached clock against
    the same notifier making ``str(uuid.uuid4())`` and ``str(datetime.utcnow())``
    per notification (as oslo.messaging does): the row that justifies keeping
    them as module state (see notify_transport/notify/notifier.py). ``--impl``
    is ignored: both variants are ours.
    """
    import datetime

    from oslo_config import cfg

    import notify_transport as nt
    from notify_transport.notify import notifier as notifier_module

    from bench.payload import EVENT_TYPE, PUBLISHER_ID, context_dict, make_context, make_payload

    conf = cfg.ConfigOpts()
    conf([])

    def per_call_id() -> str:
        return str(uuid.uuid4())

    def per_call_clock() -> str:
        return str(datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None))

    def measure(per_call: bool) -> float:
        with nt.get_notification_transport(conf, "fake:///") as transport:
            notifier = nt.Notifier(transport, PUBLISHER_ID, driver="noop", topics=["profile"])
            if per_call:
                notifier._clock = per_call_clock
            ctxt = context_dict(make_context())
            payload = make_payload(make_context())
            for _ in range(1000):
                notifier.info(ctxt, EVENT_TYPE, payload)
            best = float("inf")
            for _ in range(5):
                cpu0 = time.thread_time()
                for _ in range(count):
                    notifier.info(ctxt, EVENT_TYPE, payload)
                best = min(best, (time.thread_time() - cpu0) / count)
        return best * 1e9

    pooled = measure(per_call=False)
    saved = notifier_module.new_message_id
    notifier_module.new_message_id = per_call_id
    try:
        per_call = measure(per_call=True)
    finally:
        notifier_module.new_message_id = saved
    return {"pooled_ids_cached_clock_ns_per_msg": round(pooled),
            "uuid4_and_datetime_per_call_ns_per_msg": round(per_call),
            "saved_ns_per_msg": round(per_call - pooled)}


PATHS = {"send": (_send, 30_000), "listen": (_listen, 30_000), "rpc": (_rpc, 2_000),
         "build": (_build, 100_000)}


def summarize_folded(path: str, must_contain: str = "", top: int = 25) -> str:
    """Inclusive and self sample shares per frame from py-spy's raw (folded) output."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            stack, _, count = line.rstrip().rpartition(" ")
            if not stack or (must_contain and must_contain not in stack):
                continue
            frames = stack.split(";")
            n = int(count)
            total += n
            own[frames[-1]] += n
            for frame in set(frames):
                inclusive[frame] += n
    if not total:
        return "no samples matched"
    lines = [f"{total} samples"]
    lines += [f"{n / total * 100:5.1f}% incl  {f}" for f, n in inclusive.most_common(top)]
    lines.append("")
    lines += [f"{n / total * 100:5.1f}% self  {f}" for f, n in own.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_hot", description=__doc__.split("\n")[0])
    parser.add_argument("path", choices=sorted(PATHS))
    parser.add_argument("--impl", default="ours", choices=("ours", "oslo", "raw"))
    parser.add_argument("--count", type=int)
    parser.add_argument("--py-spy", dest="py_spy", action="store_true",
                        help="run under py-spy (every thread) and print the top frames")
    parser.add_argument("--broker", default="apache-kafka", choices=("apache-kafka", "noida"),
                        help="the Kafka broker send and listen start (default: Apache Kafka, one node)")
    parser.add_argument("--filter", default=None,
                        help="only samples whose stack contains this text (default: the work's "
                             "entry point for the path)")
    args = parser.parse_args(argv)
    os.environ[BROKER_ENV] = args.broker  # read by _kafka_broker, here or in the py-spy child
    func, default_count = PATHS[args.path]
    count = args.count or default_count
    if args.py_spy and not os.environ.get("BENCH_UNDER_PY_SPY"):
        spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
        out = os.path.join(tempfile.mkdtemp(prefix="bench-pyspy-"), "profile.folded")
        env = dict(os.environ, BENCH_UNDER_PY_SPY="1")
        cmd = [spy, "record", "-r", "1000", "-f", "raw", "-o", out, "--", sys.executable, "-m",
               "bench.profile_hot", args.path, "--impl", args.impl, "--count", str(count)]
        subprocess.run(cmd, env=env, check=True)
        default_filter = {"send": "Sender.send (bench/kafka_impls.py", "rpc": "RpcClient.call (bench/",
                          "build": "measure (bench/profile_hot.py",
                          "listen": "Thread._bootstrap"}[args.path]
        print(summarize_folded(out, args.filter if args.filter is not None else default_filter))
        return 0
    print(args.path, args.impl, func(args.impl, count), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
