"""Run the benchmarks: one broker set-up, every measure for ours/oslo/raw, a table and JSON.

Usage (from the repository root)::

    python -m bench                 # full run, about 4-5 minutes
    python -m bench --quick         # smaller counts, about a minute
    python -m bench --only kafka    # or rabbit, or measure names (kafka_send, rpc, ...)

Every implementation runs in its own worker process, one after the other, so
they never compete for the two cores or share global state. Topics, the
RabbitMQ vhost, the broker (when started here) and every worker are removed
at the end, also on Ctrl-C or a failure.
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import logging
import os
import platform
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from bench import brokers, procs, report
from bench.procs import Worker, WorkerError, run_worker

LOG = logging.getLogger("bench")
RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

#: measures on the run's one Kafka broker (--kafka-broker, or --kafka-bootstrap)
SHARED_KAFKA_MEASURES = ("kafka_send", "kafka_listen", "kafka_e2e", "serve_workers", "kafka_readiness")
#: the broker restart storm kills its brokers: it starts its own Apache Kafka, noida-db and
#: Tansu; the cluster faults start a three-node Apache Kafka of their own
KAFKA_MEASURES = SHARED_KAFKA_MEASURES + ("kafka_restart_storm", "kafka_cluster_faults")
#: the brokers the storm runs on, each a row group of its own (results key ``storm_<broker>``)
STORM_BROKERS = ("apache-kafka", "noida", "tansu")
#: the three-node cluster's faults, each a row group (results key ``cluster_<fault>``)
CLUSTER_FAULTS = ("leader", "rolling", "down", "two_down")
#: the group protocols the readiness rows compare (results key ``readiness_<protocol>``)
GROUP_PROTOCOLS = ("classic", "consumer")
RABBIT_MEASURES = ("rpc", "rabbit_notify", "ntrabbit")
#: a three-node RabbitMQ cluster of its own per fault and driver (results key ``rabbit_cluster_<fault>``)
RABBIT_CLUSTER_MEASURES = ("rabbit_cluster_faults",)
ALL_MEASURES = KAFKA_MEASURES + RABBIT_MEASURES + RABBIT_CLUSTER_MEASURES


@dataclass
class Sizes:
    """How much each measure does; ``--quick`` uses the small set."""

    send_count: int = 50_000
    send_warmup: int = 2_000
    send_max_seconds: float = 20.0
    listen_count: int = 20_000
    listen_max_seconds: float = 10.0
    #: a listener that dispatched nothing more for this long is done (oslo loses a message)
    listen_idle_seconds: float = 3.0
    e2e_rate: float = 500.0
    e2e_seconds: float = 10.0
    rpc_warmup: int = 100
    rpc_seq_calls: int = 3_000
    rpc_seq_seconds: float = 5.0
    rpc_threads: int = 8
    rpc_thread_seconds: float = 5.0
    rpc_casts: int = 3_000
    rabbit_notify_count: int = 5_000
    rabbit_notify_warmup: int = 200
    #: interleaved repetitions of the throughput and RPC measures (the median is kept)
    rounds: int = 3
    #: notify-transport serve with 1 and 2 workers: partitions of its topic, longest dispatch
    serve_partitions: int = 4
    serve_count: int = 100_000
    serve_max_seconds: float = 60.0
    #: broker restart storm: SIGKILL + restart cycles per broker, seconds down each
    storm_cycles: int = 3
    storm_down: float = 3.0

    @classmethod
    def quick(cls) -> "Sizes":
        return cls(send_count=10_000, send_warmup=500, send_max_seconds=6.0, listen_count=8_000,
                   listen_max_seconds=5.0, listen_idle_seconds=1.5, e2e_seconds=3.0, rpc_warmup=20, rpc_seq_calls=500,
                   rpc_seq_seconds=1.5, rpc_thread_seconds=2.0, rpc_casts=500,
                   rabbit_notify_count=1_000, rabbit_notify_warmup=50, rounds=1, serve_count=20_000,
                   storm_cycles=1)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The options of ``python -m bench``."""
    parser = parser or argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts: about a minute in all")
    parser.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                        help="stop starting new measures after this long "
                             "(default 300, or 90 with --quick)")
    parser.add_argument("--only", default=",".join(ALL_MEASURES), metavar="LIST",
                        help="comma-separated: kafka, rabbit or any of " + ", ".join(ALL_MEASURES))
    parser.add_argument("--impls", default="ours,oslo,raw", metavar="LIST",
                        help="which implementations to run (default ours,oslo,raw)")
    parser.add_argument("--json", dest="json_path", default=None, metavar="PATH",
                        help="where to write the JSON results (default bench/results/<timestamp>.json)")
    parser.add_argument("--kafka-bootstrap", default=os.environ.get("NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP"),
                        metavar="HOST:PORT",
                        help="use this Kafka cluster instead of starting one "
                             "(default: $NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP)")
    parser.add_argument("--kafka-broker", choices=("apache-kafka", "noida"), default="apache-kafka",
                        help="the broker started for the shared Kafka measures: Apache Kafka "
                             "(one KRaft node, the broker of record) or noida-db; run once with "
                             "each to compare them (default apache-kafka)")
    parser.add_argument("--rabbit-host", default="127.0.0.1")
    parser.add_argument("--rabbit-port", type=int, default=5672)
    parser.add_argument("--rabbit-user", default="guest")
    parser.add_argument("--rabbit-password", default="guest")
    parser.add_argument("--context", choices=("request", "none"), default="request",
                        help="context passed to Notifier.info: an oslo.context RequestContext "
                             "(default) or None")
    parser.add_argument("--send-count", type=int, help="notifications per Kafka send run")
    parser.add_argument("--listen-count", type=int, help="messages pre-filled for the listener runs")
    parser.add_argument("--e2e-seconds", type=float, help="length of the paced latency run")
    parser.add_argument("--e2e-rate", type=float, help="messages per second of the latency run")
    parser.add_argument("--rounds", type=int,
                        help="interleaved repetitions of the Kafka send and listen measures and "
                             "of the RPC ones (rpc, ntrabbit); the median is reported (default 3, "
                             "1 with --quick)")
    parser.add_argument("--ours-kafka-query", default="", metavar="QUERY",
                        help="URL query added to notify-transport's Kafka URL only, to try driver "
                             "options (e.g. producer_batch_timeout=0.001); recorded in the JSON")
    parser.add_argument("--nice", type=int, default=0, metavar="N",
                        help="run the broker and every worker at this niceness (negative, as root, "
                             "gives the measures priority over other load on a shared machine; "
                             "the same for every implementation)")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    return parser


def _selected(only: str) -> set[str]:
    chosen: set[str] = set()
    for item in filter(None, (s.strip() for s in only.split(","))):
        if item == "kafka":
            chosen.update(KAFKA_MEASURES)
        elif item == "rabbit":
            chosen.update(RABBIT_MEASURES + RABBIT_CLUSTER_MEASURES)
        elif item in ALL_MEASURES:
            chosen.add(item)
        else:
            raise SystemExit(f"--only: unknown measure {item!r}; choose from kafka, rabbit, "
                             + ", ".join(ALL_MEASURES))
    return chosen


def median_result(results: list[dict], metric: str) -> dict:
    """The result with the median ``metric`` among those without error, plus every round's value.

    With an even number of good rounds the lower median is taken (a real
    run, not an average of two). All rounds failing gives the first error.
    """
    good = [r for r in results if "error" not in r and isinstance(r.get(metric), (int, float))]
    if not good:
        return dict(results[0]) if results else {"error": "no result"}
    ordered = sorted(good, key=lambda r: r[metric])
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["rounds"] = [r.get(metric) if "error" not in r else None for r in results]
    failed = [r["error"] for r in results if "error" in r]
    if failed:
        chosen["note"] = f"{len(failed)} of {len(results)} rounds failed: {failed[0]}"
    return chosen


#: Upper bound of one cluster fault's run: three JVMs started, the storm, the read-back.
CLUSTER_SECONDS = 300.0
#: Bound of one driver's run of one RabbitMQ cluster fault (the cluster's start included).
RABBIT_CLUSTER_SECONDS = 240.0


def storm_seconds(sizes: Sizes) -> float:
    """About how long one broker's restart storm takes: start, 2 s before the first kill, per
    cycle the time down, a restart and 4 s up, then the final flush and the read-back."""
    return 15 + sizes.storm_cycles * (sizes.storm_down + 8)


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for dist in ("notify-transport", "oslo.messaging", "confluent-kafka", "pika", "orjson", "noida-db"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    try:
        import confluent_kafka

        out["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    try:
        out["git"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, cwd=procs.REPO_ROOT, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return out


class Run:
    """One benchmark run: brokers, sizes, the results collected so far."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sizes = Sizes.quick() if args.quick else Sizes()
        for attr, arg in (("send_count", "send_count"), ("listen_count", "listen_count"),
                          ("e2e_seconds", "e2e_seconds"), ("e2e_rate", "e2e_rate"),
                          ("rounds", "rounds")):
            if getattr(args, arg, None):
                setattr(self.sizes, attr, getattr(args, arg))
        self.budget = args.budget or (90.0 if args.quick else 300.0)
        self.impls = [i.strip() for i in args.impls.split(",") if i.strip()]
        for impl in self.impls:
            if impl not in report.IMPLS:
                raise SystemExit(f"--impls: unknown implementation {impl!r}")
        self.measures = _selected(args.only)
        from bench.kafka_impls import OURS_QUERY_ENV

        os.environ[OURS_QUERY_ENV] = args.ours_kafka_query or ""  # inherited by the workers
        self.run_id = datetime.datetime.now().strftime("%Y%m%d%H%M%S") + "-" + uuid.uuid4().hex[:6]
        self.prefix = f"bench-{self.run_id}"
        self.results: dict[str, dict[str, Any]] = {}
        self.started = time.monotonic()
        self.bootstrap = ""
        self.skipped: list[str] = []
        self.phase_seconds: dict[str, float] = {}

    # -- helpers -----------------------------------------------------------------
    def left(self) -> float:
        return self.budget - (time.monotonic() - self.started)

    def record(self, key: str, impl: str, result: dict) -> None:
        """Keep ``result`` as the value of ``key`` for ``impl`` and print it."""
        self.results.setdefault(key, {})[impl] = result
        self.progress(key, impl, result)

    def progress(self, key: str, impl: str, result: dict, round_no: int | None = None) -> None:
        summary = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in result.items()
                   if k in ("rate", "p50_ms", "p99_ms", "error", "note", "sent", "dispatched",
                            "rounds", "ready_s", "all_s")}
        label = f"{key} #{round_no + 1}" if round_no is not None else key
        LOG.info("%-22s %-5s %s", label, impl, summary)
        print(f"  {label:<22} {impl:<5} {json.dumps(summary)}", flush=True)

    def guarded(self, name: str, fn: Callable[[], None], needs: float) -> None:
        """Run one measure unless the budget is spent; a failure is recorded, not raised."""
        if self.left() < needs:
            self.skipped.append(name)
            print(f"- {name}: skipped, {self.left():.0f}s of the budget left (needs ~{needs:.0f}s)",
                  flush=True)
            return
        print(f"- {name}", flush=True)
        started = time.monotonic()
        try:
            fn()
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            LOG.exception("%s failed", name)
            for impl in self.impls:
                self.results.setdefault(name, {}).setdefault(impl, {"error": f"{type(exc).__name__}: {exc}"})
        finally:
            self.phase_seconds[name] = round(time.monotonic() - started, 1)

    def interleaved(self, columns: Iterable[str], measure: Callable[[str, int], dict[str, dict]],
                    metrics: dict[str, str]) -> None:
        """``sizes.rounds`` rounds of ``measure(column, round_no)`` (key -> result) for each
        column in turn, then each key's median round, ranked by ``metrics[key]``, recorded.

        Interleaved (ours, oslo, raw, ours, ...): a change of the machine's load
        hits every column alike, and one slow round does not make a ratio.
        """
        columns = list(columns)
        results: dict[str, dict[str, list[dict]]] = {
            column: {key: [] for key in metrics} for column in columns}
        for n in range(self.sizes.rounds):
            for column in columns:
                for key, result in measure(column, n).items():
                    results[column][key].append(result)
                    self.progress(key, column, result, n)
        for column, by_key in results.items():
            for key, metric in metrics.items():
                self.record(key, column, median_result(by_key[key], metric))

    # -- Kafka -------------------------------------------------------------------
    def kafka_send(self) -> None:
        self.interleaved(self.impls, self._send_round, {"kafka_send": "rate"})

    def _send_round(self, impl: str, n: int) -> dict[str, dict]:
        s = self.sizes
        base = f"{self.prefix}-send-{impl}-{n}"
        brokers.create_topics(self.bootstrap, [f"{base}.info"], 1)
        result = run_worker("bench.kafka_send:run", dict(
            impl=impl, bootstrap=self.bootstrap, topic_base=base, count=s.send_count,
            warmup=s.send_warmup, context=self.args.context, max_seconds=s.send_max_seconds),
            timeout=s.send_max_seconds + 90, name=f"kafka_send/{impl}")
        if "error" not in result:
            on_broker = brokers.end_offsets(self.bootstrap, f"{base}.info")
            result["on_broker"] = on_broker
            if on_broker < result["expected_on_broker"]:
                result["error"] = (f"only {on_broker} of {result['expected_on_broker']} "
                                   "messages reached the broker")
        return {"kafka_send": result}

    def _prefill(self, topic: str, count: int) -> None:
        from confluent_kafka import Producer

        from bench.payload import context_dict, encode_envelope, make_context, make_payload

        ctxt = make_context(self.args.context)
        value = encode_envelope(make_payload(ctxt), context_dict(ctxt))
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        for _ in range(count):
            while True:
                try:
                    producer.produce(topic, value)
                    break
                except BufferError:
                    producer.poll(0.01)
        if producer.flush(60):
            raise RuntimeError(f"pre-fill of {topic} did not complete")

    def kafka_listen(self) -> None:
        s = self.sizes
        for partitions in (1, 6):
            key = f"kafka_listen_p{partitions}"
            base = f"{self.prefix}-listen-p{partitions}"
            topic = f"{base}.info"
            brokers.create_topics(self.bootstrap, [topic], partitions)
            self._prefill(topic, s.listen_count)
            self.interleaved(self.impls, functools.partial(self._listen_round, key, base, topic),
                             {key: "rate"})

    def _listen_round(self, key: str, base: str, topic: str, impl: str, n: int) -> dict[str, dict]:
        s = self.sizes
        group = f"{self.prefix}-pool-{impl}-{key.removeprefix('kafka_listen_')}-{n}"
        brokers.commit_start_offsets(self.bootstrap, group, topic)
        extra = {}
        if impl == "raw":  # and the decoding floor: consume + decode every record
            extra["decode_group"] = f"{group}-decode"
            brokers.commit_start_offsets(self.bootstrap, extra["decode_group"], topic)
        return {key: run_worker("bench.kafka_listen:run", dict(
            impl=impl, bootstrap=self.bootstrap, topic_base=base, group=group,
            expected=s.listen_count, max_seconds=s.listen_max_seconds,
            idle_seconds=s.listen_idle_seconds, **extra),
            timeout=s.listen_max_seconds + 90, name=f"{key}/{impl}")}

    def serve_workers(self) -> None:
        """``notify-transport serve`` with 1 and 2 worker processes, one pool, one topic of
        several partitions (ours only: the service has no oslo.messaging counterpart)."""
        from bench.serve_workers import measure

        if "ours" not in self.impls:
            return
        s = self.sizes
        for workers in (1, 2):
            key = f"serve_w{workers}"
            base = f"{self.prefix}-serve-w{workers}"
            topic = f"{base}.info"
            brokers.create_topics(self.bootstrap, [topic], s.serve_partitions)
            group = f"{self.prefix}-serve-pool-w{workers}"
            brokers.commit_start_offsets(self.bootstrap, group, topic)
            result = measure(self.bootstrap, base, group, s.serve_count, workers,
                             fill=functools.partial(self._prefill, topic, s.serve_count),
                             max_seconds=s.serve_max_seconds)
            result["partitions"] = s.serve_partitions
            self.record(key, "ours", result)

    def kafka_readiness(self) -> None:
        """The demo's four listeners in two pools started one after another, under each group
        protocol in turn, ``sizes.rounds`` times (ours only); the round with the median time for
        all four is kept. noida-db does not speak Kafka 4's ``consumer`` protocol: there only
        ``classic`` runs (``bench/kafka_readiness.py``)."""
        if "ours" not in self.impls:
            return
        protocols = [p for p in GROUP_PROTOCOLS
                     if p == "classic" or self.args.kafka_bootstrap or self.args.kafka_broker == "apache-kafka"]

        def measure(impl: str, n: int) -> dict[str, dict]:
            return {f"readiness_{protocol}": run_worker("bench.kafka_readiness:measure", dict(
                bootstrap=self.bootstrap, protocol=protocol, topic=f"{self.prefix}-ready-{protocol}-{n}"),
                timeout=240, name=f"kafka_readiness/{protocol}") for protocol in protocols}

        self.interleaved(["ours"], measure, {f"readiness_{protocol}": "all_s" for protocol in protocols})

    def kafka_cluster_faults(self) -> None:
        """A three-node Apache Kafka's faults under the storm's load (ours only), each a row group:
        the partition leader SIGKILLed, a rolling restart, the whole cluster down for 10 s, two
        nodes of three down for 90 s."""
        if "ours" not in self.impls:
            return
        for fault in CLUSTER_FAULTS:
            result = run_worker("bench.kafka_restart_storm:measure_cluster", dict(fault=fault),
                                timeout=CLUSTER_SECONDS, name=f"kafka_cluster_faults/{fault}")
            self.record(f"cluster_{fault}", "ours", result)

    def rabbit_cluster_faults(self) -> None:
        """RPC on a three-node RabbitMQ cluster while a node is killed, then in a rolling restart,
        ours against oslo.messaging's rabbit driver (``bench/rabbit_cluster_faults.py``)."""
        from bench.rabbit_cluster_faults import FAULTS, IMPLS

        for fault in FAULTS:
            for impl in (i for i in IMPLS if i in self.impls):
                result = run_worker("bench.rabbit_cluster_faults:measure", dict(fault=fault, impl=impl),
                                    timeout=RABBIT_CLUSTER_SECONDS, name=f"rabbit_cluster_faults/{fault}/{impl}")
                self.record(f"rabbit_cluster_{fault}", impl, result)

    def kafka_restart_storm(self) -> None:
        """The broker restart storm of ``bench/kafka_restart_storm.py`` on Apache Kafka (one node),
        noida-db and Tansu, each started for it (ours only: the storm counts through
        notify-transport's delivery stats)."""
        if "ours" not in self.impls:
            return
        s = self.sizes
        for name in STORM_BROKERS:
            result = run_worker("bench.kafka_restart_storm:measure", dict(
                broker=name, cycles=s.storm_cycles, down=s.storm_down),
                timeout=storm_seconds(s) * 3 + 120, name=f"kafka_restart_storm/{name}")
            self.record(f"storm_{name}", "ours", result)

    def kafka_e2e(self) -> None:
        s = self.sizes
        for impl in self.impls:
            base = f"{self.prefix}-e2e-{impl}"
            brokers.create_topics(self.bootstrap, [f"{base}.info"], 1)
            limit = s.e2e_seconds + 90
            listener = Worker("bench.kafka_latency:listen", dict(
                impl=impl, bootstrap=self.bootstrap, topic_base=base,
                group=f"{self.prefix}-e2e-pool-{impl}", max_seconds=limit), name=f"e2e-listen/{impl}")
            # started together: the sender only sends warm-up messages until told "go",
            # which happens once the listener has received one of them
            sender = Worker("bench.kafka_latency:send", dict(
                impl=impl, bootstrap=self.bootstrap, topic_base=base, rate=s.e2e_rate,
                seconds=s.e2e_seconds, context=self.args.context), name=f"e2e-send/{impl}")
            try:
                listener.wait_signal("ready", 90)
                sender.wait_signal("warming", 60)
                listener.wait_signal("warm", 60)
                sender.send("go")
                sent = sender.result(s.e2e_seconds + 60)
                result = listener.result(60)
                if "error" in sent:
                    result = {"error": f"sender: {sent['error']}"}
                else:
                    result["sender"] = sent
                    if result.get("received", 0) < sent["sent"]:
                        result.setdefault("note", f"received {result.get('received', 0)} of {sent['sent']}")
            except WorkerError as exc:
                result = {"error": str(exc).splitlines()[0], "detail": str(exc)}
            finally:
                listener.kill()
                sender.kill()
            self.record("kafka_e2e", impl, result)

    # -- RabbitMQ ----------------------------------------------------------------
    def _rabbit(self, vhost: brokers.RabbitVhost) -> dict:
        return {"host": vhost.host, "port": vhost.port, "vhost": vhost.name, "user": vhost.user,
                "password": vhost.password}

    #: what each RPC result is ranked by when the median of the rounds is taken
    RPC_METRICS = {"rpc_call_seq": "p50_ms", "rpc_call_threads": "rate", "rpc_cast": "rate"}

    def _rpc_round(self, vhost: brokers.RabbitVhost, module: str, name: str, **common: Any) -> dict:
        """One server worker and one client worker of ``module`` (``serve``/``client``); the
        client's ``rpc_*`` results, or an error for each.

        One home for the rounds of ``rpc`` and ``ntrabbit`` so that both measure alike
        (sizes, timeouts, the server's stop) and a failure of either worker is recorded.
        """
        s = self.sizes
        vhost.remember_queue(common["topic"])
        vhost.remember_queue(f"{common['topic']}.bench-server")
        common.update(url=vhost.url(), rabbit=self._rabbit(vhost))
        kind, _, tag = name.partition("/")
        server = Worker(f"{module}:serve", dict(common, server="bench-server"), name=f"{kind}-server/{tag}")
        try:
            server.wait_signal("ready", 60)
            out = run_worker(f"{module}:client", dict(
                common, warmup=s.rpc_warmup, seq_calls=s.rpc_seq_calls, seq_seconds=s.rpc_seq_seconds,
                threads=s.rpc_threads, thread_seconds=s.rpc_thread_seconds, casts=s.rpc_casts),
                timeout=s.rpc_seq_seconds + s.rpc_thread_seconds + 180, name=f"{kind}-client/{tag}")
            server.send("stop")
            server.result(30)
        except WorkerError as exc:
            out = {"error": str(exc).splitlines()[0], "detail": str(exc)}
        finally:
            server.kill()
        return {key: out.get(key, {"error": out.get("error", "no result")}) for key in self.RPC_METRICS}

    def _rpc_rounds(self, vhost: brokers.RabbitVhost, module: str, key_prefix: str,
                    runs: dict[str, dict[str, Any]]) -> None:
        """:meth:`interleaved` rounds of every run (column -> worker arguments, with ``name``
        and ``topic``), the ``rpc_*`` keys recorded under ``key_prefix``."""
        def renamed(key: str) -> str:
            return key_prefix + key[len("rpc_"):]

        def measure(column: str, n: int) -> dict[str, dict]:
            args = dict(runs[column])
            name = args.pop("name")
            return {renamed(key): result
                    for key, result in self._rpc_round(vhost, module, name, **args).items()}

        self.interleaved(runs, measure,
                         {renamed(key): metric for key, metric in self.RPC_METRICS.items()})

    def rpc(self, vhost: brokers.RabbitVhost) -> None:
        runs = {}
        for impl in self.impls:
            topic = f"{self.prefix}-rpc-{impl}"
            vhost.remember_queue(f"{topic}.raw")
            runs[impl] = {"name": f"rpc/{impl}", "impl": impl, "topic": topic}
        self._rpc_rounds(vhost, "bench.rabbit_rpc", "rpc_", runs)

    def ntrabbit(self, vhost: brokers.RabbitVhost) -> None:
        """oslo.messaging's API on ``ntrabbit://`` vs ``rabbit://``, with threads then under eventlet.

        The result keys are the ``rpc_*`` ones prefixed ``ntrabbit_`` (``ntrabbit_ev_``
        under eventlet); ``ntrabbit://`` fills the "ours" column, ``rabbit://`` the "oslo" one.
        """
        from bench.ntrabbit_rpc import IMPLS

        for mode, prefix in (("threads", "ntrabbit_"), ("eventlet", "ntrabbit_ev_")):
            self._rpc_rounds(vhost, "bench.ntrabbit_rpc", prefix, {
                "ours" if impl == "ntrabbit" else "oslo": {
                    "name": f"ntrabbit/{mode}/{impl}", "impl": impl,
                    "topic": f"{self.prefix}-ntr-{mode}-{impl}", "eventlet": mode == "eventlet"}
                for impl in IMPLS})

    def rabbit_notify(self, vhost: brokers.RabbitVhost) -> None:
        s = self.sizes
        for impl in self.impls:
            base = f"{self.prefix}-rnotify-{impl}"
            vhost.remember_queue(f"{base}.info")
            out = run_worker("bench.rabbit_notify:run", dict(
                impl=impl, url=vhost.url(), rabbit=self._rabbit(vhost), topic_base=base,
                count=s.rabbit_notify_count, warmup=s.rabbit_notify_warmup,
                context=self.args.context), timeout=180, name=f"rabbit_notify/{impl}")
            for key in ("rabbit_notify_send", "rabbit_notify_recv"):
                self.record(key, impl, out.get(key, {"error": out.get("error", "no result")}))

    # -- the whole run -------------------------------------------------------------
    def execute(self) -> dict:
        meta: dict[str, Any] = {
            "run_id": self.run_id, "started": datetime.datetime.now().isoformat(timespec="seconds"),
            "quick": self.args.quick, "budget_s": self.budget, "impls": self.impls,
            "measures": sorted(self.measures), "context": self.args.context,
            "ours_kafka_query": self.args.ours_kafka_query, "nice": self.args.nice,
            "sizes": vars(self.sizes), "versions": _versions(), "cpus": os.cpu_count(),
            "load_before": os.getloadavg(),
        }
        print(f"bench run {self.run_id}: {', '.join(sorted(self.measures))} for "
              f"{', '.join(self.impls)} (budget {self.budget:.0f}s)", flush=True)
        try:
            if self.measures & set(SHARED_KAFKA_MEASURES):
                with brokers.kafka_broker(self.args.kafka_bootstrap,
                                          self.args.kafka_broker) as (bootstrap, described):
                    self.bootstrap = bootstrap
                    meta["kafka"] = described
                    print(f"kafka: {described}", flush=True)
                    try:
                        s = self.sizes
                        # latency first, on a fresh broker: after the throughput measures
                        # it holds hundreds of MB and dozens of groups, and noida-db's
                        # pauses then show in every client's tail (raw's too)
                        if "kafka_e2e" in self.measures:
                            self.guarded("kafka_e2e", self.kafka_e2e, s.e2e_seconds * 3 + 10)
                        if "kafka_send" in self.measures:
                            self.guarded("kafka_send", self.kafka_send, 10)
                        if "kafka_listen" in self.measures:
                            self.guarded("kafka_listen", self.kafka_listen, 20)
                        if "serve_workers" in self.measures:
                            self.guarded("serve_workers", self.serve_workers, 30)
                        if "kafka_readiness" in self.measures:
                            self.guarded("kafka_readiness", self.kafka_readiness, 15 * self.sizes.rounds)
                    finally:
                        procs.kill_all()
                        deleted = brokers.delete_topics(bootstrap, self.prefix)
                        meta["kafka_topics_deleted"] = len(deleted)
            if "kafka_restart_storm" in self.measures:  # after: noida-db busy-polls when idle
                self.guarded("kafka_restart_storm", self.kafka_restart_storm,
                             storm_seconds(self.sizes) * len(STORM_BROKERS))
            if "kafka_cluster_faults" in self.measures:
                self.guarded("kafka_cluster_faults", self.kafka_cluster_faults, CLUSTER_SECONDS)
            if "rabbit_cluster_faults" in self.measures:
                self.guarded("rabbit_cluster_faults", self.rabbit_cluster_faults, RABBIT_CLUSTER_SECONDS)
            if self.measures & set(RABBIT_MEASURES):
                with brokers.RabbitVhost(self.run_id, self.args.rabbit_host, self.args.rabbit_port,
                                         self.args.rabbit_user, self.args.rabbit_password) as vhost:
                    meta["rabbit"] = f"{vhost.host}:{vhost.port} vhost {vhost.name!r}"
                    print(f"rabbit: {meta['rabbit']}", flush=True)
                    try:
                        if "rpc" in self.measures:
                            self.guarded("rpc", lambda: self.rpc(vhost), 15 * self.sizes.rounds)
                        if "rabbit_notify" in self.measures:
                            self.guarded("rabbit_notify", lambda: self.rabbit_notify(vhost), 10)
                        if "ntrabbit" in self.measures:
                            self.guarded("ntrabbit", lambda: self.ntrabbit(vhost), 30 * self.sizes.rounds)
                    finally:
                        procs.kill_all()
        finally:
            procs.kill_all()
        meta["duration_s"] = round(time.monotonic() - self.started, 1)
        meta["load_after"] = os.getloadavg()
        meta["skipped"] = self.skipped
        meta["phase_seconds"] = self.phase_seconds
        return meta


def _raise_on_term(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None, args: argparse.Namespace | None = None) -> int:
    if args is None:
        args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.nice:
        try:  # inherited by the broker and the workers started from here
            os.setpriority(os.PRIO_PROCESS, 0, args.nice)
        except OSError as exc:
            raise SystemExit(f"--nice {args.nice}: {exc}") from None
    previous = signal.signal(signal.SIGTERM, _raise_on_term)
    try:
        run = Run(args)
        meta = run.execute()
    finally:
        signal.signal(signal.SIGTERM, previous)
    rows = report.evaluate(run.results)
    print()
    print(report.format_table(rows))
    if args.markdown:
        print()
        print(report.format_markdown(rows))
    path = args.json_path or os.path.join(
        RESULTS_DIR, datetime.datetime.now().strftime("%Y%m%d-%H%M%S") + ".json")
    report.write_json(path, report.build_document(meta, run.results, rows))
    counts = report.summary_counts(rows)
    print(f"\ntargets: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['N/A']} not measured; "
          f"{meta['duration_s']}s; results in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
