"""Benchmark: notifications per second through the Spark pipeline vs raw confluent-kafka consume.

One run, one broker, one topic of N oslo ``messagingv2`` notifications
(about 1.3 KB each). Measured, each over the whole topic:

- ``raw consume``: a confluent-kafka consumer assigned to every partition,
  reading until it has all N records (the limit for any reader);
- ``raw consume + decode``: the same plus ``envelope.decode_notification``
  per record in this one Python thread;
- ``raw Java consume`` (phase ``raw_java``): the Java client Spark's
  connector reads with (its jars), in a JVM of its own without Spark, at the
  client's default fetch size and at the 16 MiB the pipeline gives the
  connector (:func:`raw_java_consume`): the limit for the connector;
- ``spark source``: a streaming read into Spark's ``noop`` sink (availableNow);
- ``spark source + decode``: the same through the pipeline's decoding;
- ``spark source + decode in the JVM`` (phase ``source_decode_jvm``, not
  run by default; the connector only): the same through
  ``decode.decode(..., in_jvm=True)``;
- ``archive job``, ``stats job`` and ``pipeline (both jobs)``: the pipeline
  as ``pipeline run --once`` runs it (``--jobs archive``, ``stats``, both),
  each from an empty checkpoint;

  each of these once per ``--sources`` reader, side by side in the same run:
  ``kafka`` (Spark's own connector, the reader of record) and ``notify_kafka``
  (the Python data source, which decodes where it reads), labelled ``[kafka]``
  and ``[notify_kafka]``;
- ``run with nothing new`` and ``run with N new`` (``--incremental``, default
  5000): two more runs on the checkpoint of ``pipeline (both jobs)``, the
  fixed cost of a scheduled run and an incremental one, in the same process;
- ``cli ...`` (phase ``cli``): what a user waits for, the wall time of the
  ``notify-transport pipeline run --once`` command (Python and JVM start
  included) on ``--cli-topics`` topics of ``--cli-partitions`` partitions:
  the first run over ``--cli-messages`` notifications, a run with nothing
  new, and a run with ``--incremental`` new notifications, per ``--sources``
  reader (``--source`` of the command, topics of its own); each starts once
  the machine is quiet (:func:`wait_quiet`, the wait recorded in the JSON).
  Right before each incremental run, ``cli Spark floor`` times what Spark
  alone costs such a run now (``bench/spark_floor.py``: the pipeline's
  session, one job, exit), and the table reads the run as that floor plus
  the pipeline's own share: this machine's speed changes from hour to hour.

The broker is Apache Kafka (one KRaft node) unless ``--kafka-broker noida``,
``--bootstrap`` or ``$NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP`` names another.
Spark phases run after a warm-up on a small topic (JVM and Python worker
start-up, reported as ``cold start``), each ``--rounds`` times per reader in
turn, the fastest round kept (a first run over the big topic also compiles
the JVM's code for it). Prints a table with each rate and its
ratio to the raw consume rate and writes JSON. Bounded by ``--max-seconds``;
topics, outputs and the broker it started are removed at the end.

    python bench/bench_pipeline.py --messages 200000 --partitions 5 --phases raw,source,pipeline
    NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP=host:9092 python -m bench.bench_pipeline
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterator

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from notify_transport.drivers import envelope
from notify_transport.pipeline.kafka_settings import CONNECTOR_PARTITION_FETCH_BYTES

LOG = logging.getLogger("bench_pipeline")
DEFAULT_JSON = Path(__file__).parent / "results" / "pipeline.json"
ENVELOPE_BYTES = 1300
MAX_PER_PARTITION = 40000
#: Readers' settings, the same for the raw consumer and the pipeline: noida-db answers a fetch
#: with everything it has, which may exceed librdkafka's default 100 MB response limit.
CLIENT_CONFIG = {"receive.message.max.bytes": "1000000000"}
SMALL_TOPIC = 2000
#: the Java client's default max.partition.fetch.bytes
DEFAULT_JAVA_FETCH_BYTES = 1024 * 1024


class Budget:
    """The run's time limit: phases ask for time and are skipped when it is spent."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()


@contextlib.contextmanager
def broker(bootstrap: str | None, kind: str = "apache-kafka") -> Iterator[str]:
    """The given cluster, ``$NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP``, or a broker of ``kind`` started for the run."""
    from notify_transport.testing.apache_kafka import ApacheKafka
    from notify_transport.testing.brokers import NoidaBroker, external_kafka

    if bootstrap:
        yield bootstrap
        return
    external = external_kafka()
    if external is not None:
        yield external.bootstrap
        return
    with (ApacheKafka() if kind == "apache-kafka" else NoidaBroker()) as started:
        yield started.bootstrap


def notification(i: int, event_types: int = 5, publishers: int = 4) -> bytes:
    """An oslo messagingv2 notification padded to about :data:`ENVELOPE_BYTES`."""
    message = {
        "message_id": str(uuid.uuid4()), "publisher_id": f"compute.bench-{i % publishers:02d}",
        "event_type": f"compute.instance.event{i % event_types}", "priority": "ERROR" if i % 50 == 0 else "INFO",
        "payload": {"instance_id": str(uuid.uuid4()), "state": "active", "pad": ""},
        "timestamp": str(datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)),
    }
    ctxt = {"request_id": f"req-{uuid.uuid4()}", "user_id": "u" * 32, "project_id": "p" * 32}
    size = len(envelope.encode(message, ctxt, 2.0))
    message["payload"]["pad"] = "x" * max(0, ENVELOPE_BYTES - size)
    return envelope.encode(message, ctxt, 2.0)


def produce(bootstrap: str, topic: str, partitions: int, count: int) -> float:
    """Create ``topic`` and fill it with ``count`` notifications; return the send rate."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                                replication_factor=1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.messages": 200000})
    failures = []
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, notification(i), partition=i % partitions,
                                 on_delivery=lambda err, _msg: err and failures.append(err))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(60) or failures:
        raise RuntimeError(f"produce failed: {failures[:3]}")
    return count / (time.perf_counter() - started)


def produce_more(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    """Append ``count`` notifications to an existing topic."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    for i in range(count):
        producer.produce(topic, notification(i), partition=i % partitions)
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("produce failed")


def raw_consume(bootstrap: str, topic: str, partitions: int, count: int, timeout: float,
                decode: bool = False) -> tuple[int, float]:
    """Records read (and decoded) from offset 0 of every partition, and the seconds it took."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", **CLIENT_CONFIG})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    started = time.perf_counter()
    deadline = time.monotonic() + timeout
    try:
        while got < count and time.monotonic() < deadline:
            for msg in consumer.consume(10000, timeout=1.0):
                if msg.error() is None:
                    got += 1
                    if decode:
                        envelope.decode_notification(msg.value())
        return got, time.perf_counter() - started
    finally:
        consumer.close()


#: rounds of the raw Java read in one JVM: the first is a cold client, the best later one is recorded
JAVA_ROUNDS = 4


def raw_java_consume(bootstrap: str, topic: str, partitions: int, count: int,
                     fetch_bytes: int | None = None) -> tuple[int, float] | None:
    """Records read and seconds of the fastest warm round of ``RawJavaConsume.java`` (None: no
    connector jars or no JDK); ``fetch_bytes``: ``max.partition.fetch.bytes`` (default: the client's).

    The connector's read tasks run the same client inside Spark: this is what
    they could reach with Spark's own per-record work left out.
    """
    from notify_transport.pipeline.connector import connector_jars, spark_jars_dir
    from notify_transport.testing.apache_kafka import java_binary
    from notify_transport.testing.brokers import BrokerStartError

    jars = connector_jars()
    if not jars:
        LOG.warning("raw Java consume skipped: the connector was not fetched")
        return None
    try:
        java = java_binary()
    except BrokerStartError:
        LOG.warning("raw Java consume skipped: no Java")
        return None
    classpath = os.pathsep.join([str(jar) for jar in jars] + [str(spark_jars_dir() / "*")])
    done = subprocess.run(
        [java, "-cp", classpath, str(Path(__file__).with_name("RawJavaConsume.java")), bootstrap, topic,
         str(partitions), str(count), str(JAVA_ROUNDS), str(fetch_bytes or DEFAULT_JAVA_FETCH_BYTES)],
        capture_output=True, text=True, timeout=600)
    rounds = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(rounds) != JAVA_ROUNDS:
        raise RuntimeError(f"raw Java consume failed ({done.returncode}): {done.stderr[-2000:]}")
    LOG.info("raw Java consume (fetch %s B): rounds %s s", fetch_bytes or DEFAULT_JAVA_FETCH_BYTES,
             ", ".join(f"{r['seconds']:.2f}" for r in rounds))
    best = min(rounds[1:], key=lambda r: r["seconds"])
    return int(best["records"]), float(best["seconds"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=50000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--bootstrap", help="host:port of a Kafka cluster (default: env, else --kafka-broker)")
    parser.add_argument("--kafka-broker", choices=("apache-kafka", "noida"), default="apache-kafka",
                        help="the broker started for the run when no cluster is named (default: apache-kafka)")
    parser.add_argument("--sources", default="kafka,notify_kafka",
                        help="readers of the Spark phases, each measured in turn (default: kafka,notify_kafka)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="bound of the whole run")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--phases",
                        default="cli,raw,raw_decode,raw_java,source,source_decode,archive,stats,pipeline,incremental")
    parser.add_argument("--cli-topics", type=int, default=14, help="topics of the cli phase")
    parser.add_argument("--cli-partitions", type=int, default=3, help="partitions per topic of the cli phase")
    parser.add_argument("--cli-messages", type=int, default=35000, help="backlog of the cli phase's first run")
    parser.add_argument("--rounds", type=int, default=2,
                        help="runs of each Spark phase per reader, the fastest kept (default: 2)")
    parser.add_argument("--incremental", type=int, default=5000,
                        help="new records for the incremental run (after the pipeline phase)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    if args.kafka_broker == "noida":
        # noida-db ignores fetch size limits: a fetch returns a whole partition, and one larger than
        # librdkafka's receive limit (100 MB) is never read. Spread big runs over more partitions.
        args.partitions = max(args.partitions, -(-args.messages // MAX_PER_PARTITION))
    args.sources = [s for s in args.sources.split(",") if s]
    budget = Budget(args.max_seconds)
    phases = set(args.phases.split(","))
    work = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    run_id = uuid.uuid4().hex[:8]
    base, warm_base = f"bench-{run_id}", f"benchwarm-{run_id}"
    topic, warm_topic = f"{base}.info", f"{warm_base}.info"
    results: dict = {"messages": args.messages, "partitions": args.partitions, "envelope_bytes": ENVELOPE_BYTES,
                     "master": args.master, "python": platform.python_version(), "cpus": os.cpu_count(),
                     "load_average_start": os.getloadavg()[0], "phases": {}}
    spark = None
    try:
        with broker(args.bootstrap, args.kafka_broker) as bootstrap:
            results["broker"] = bootstrap
            results["broker_kind"] = args.bootstrap or args.kafka_broker
            results["sources"] = args.sources
            try:
                LOG.info("Producing %d notifications to %s", args.messages, topic)
                results["produce_rate"] = produce(bootstrap, topic, args.partitions, args.messages)
                produce(bootstrap, warm_topic, args.partitions, SMALL_TOPIC)

                def record(name: str, rows: int, seconds: float, fixed: tuple[int, float] | None = None) -> None:
                    rate = rows / seconds if seconds > 0 else 0.0
                    complete = rows == args.messages
                    phase = {"rows": rows, "seconds": round(seconds, 3), "rate": round(rate, 1),
                             "complete": complete}
                    if fixed is not None:
                        fixed_rows, fixed_seconds = fixed
                        phase["fixed_seconds"] = round(fixed_seconds, 3)
                        # only when the difference is well above run-to-run noise
                        if fixed_rows == SMALL_TOPIC and seconds - fixed_seconds > max(1.0, 0.25 * seconds):
                            phase["marginal_rate"] = round((rows - fixed_rows) / (seconds - fixed_seconds), 1)
                    results["phases"][name] = phase
                    LOG.info("%-26s %8d rows %8.2f s %10.0f /s%s", name, rows, seconds, rate,
                             "" if complete else "  (INCOMPLETE)")

                if "cli" in phases:
                    _cli_phases(args, bootstrap, run_id, work, budget, results)
                if "raw" in phases:
                    record("raw consume", *raw_consume(bootstrap, topic, args.partitions, args.messages,
                                                       min(120, budget.left())))
                if "raw_decode" in phases:
                    record("raw consume + decode", *raw_consume(
                        bootstrap, topic, args.partitions, args.messages, min(120, budget.left()), decode=True))
                if "raw_java" in phases:
                    for label, fetch_bytes in (("", None), (", 16 MiB fetches", CONNECTOR_PARTITION_FETCH_BYTES)):
                        measured = raw_java_consume(bootstrap, topic, args.partitions, args.messages, fetch_bytes)
                        if measured is not None:
                            record(f"raw Java consume{label}", *measured)
                spark = _spark_phases(args, bootstrap, base, warm_base, work, budget, record, results)
            finally:
                # Before the broker goes: Spark's readers and the admin client still talk to it.
                if spark is not None:
                    spark.stop()
                with contextlib.suppress(Exception):
                    admin = AdminClient({"bootstrap.servers": bootstrap})
                    for future in admin.delete_topics([topic, warm_topic]).values():
                        future.result(30)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    results["load_average_end"] = os.getloadavg()[0]
    _print_table(results)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))
    print(f"\nJSON: {args.json}")
    return 0


def _spark_phases(args, bootstrap: str, base: str, warm_base: str, work: Path, budget: Budget,
                  record, results: dict):
    """Each Spark phase twice: on the small warm-up topic (its fixed cost) and on the big one."""
    from pyspark.sql import functions as F

    from notify_transport.pipeline import decode, jobs
    from notify_transport.pipeline.kafka_settings import KafkaSettings
    from notify_transport.pipeline.reading import Subscription, read_kafka
    from notify_transport.pipeline.report import archive_counts, load_stats
    from notify_transport.pipeline.session import build_session

    wanted = set(args.phases.split(","))
    if not wanted & {"source", "source_decode", "source_decode_jvm", "archive", "stats", "pipeline"}:
        return None
    started = time.perf_counter()
    spark = build_session(args.master, app_name="notify-transport-bench", log_level="ERROR")
    results["spark_session_seconds"] = round(time.perf_counter() - started, 2)
    settings = KafkaSettings.from_url(f"kafka://{bootstrap}?librdkafka_config="
                                      + ",".join(f"{k}:{v}" for k, v in CLIENT_CONFIG.items()))
    big = Subscription(base_topics=(base,), priorities=("info",))
    small = Subscription(base_topics=(warm_base,), priorities=("info",))

    def pipeline(name: str, job_names: tuple[str, ...], sub: Subscription,
                 source: str = args.sources[0], attempt: int = 0) -> tuple[int, float]:
        out = work / f"{name}-{source}-{sub.base_topics[0]}-{attempt}"
        config = jobs.PipelineConfig(output=str(out), jobs=job_names, source_format=source)
        summary = jobs.run(spark, settings, sub, config, once=True, max_seconds=max(1.0, budget.left() - 15))
        if "archive" in job_names:
            return int(archive_counts(out / "archive")["count"].sum()), summary.seconds
        stats = load_stats(out / "stats")
        return int(stats[stats.level == "window"]["count"].sum()), summary.seconds

    def noop(name: str, transform, sub: Subscription, source: str, attempt: int) -> tuple[int, float]:
        df = transform(read_kafka(spark, settings, sub, streaming=True, fmt=source), sub)
        started = time.perf_counter()
        where = f"{name}-{source}-{sub.base_topics[0]}-{attempt}"
        query = (df.writeStream.format("noop")
                 .queryName(where.replace("-", "_"))
                 .trigger(availableNow=True)
                 .option("checkpointLocation", str(work / where)).start())
        if not query.awaitTermination(max(1.0, budget.left() - 15)):
            query.stop()
        seconds = time.perf_counter() - started
        return sum(p.numInputRows for p in query.recentProgress), seconds

    started = time.perf_counter()
    for source in args.sources:
        pipeline("warmup", jobs.JOBS, small, source)
    results["cold_start_seconds"] = round(time.perf_counter() - started, 2)

    def phases(source: str) -> list:
        return [
            ("source", "spark source", lambda sub, n: noop("source", lambda df, _s: df, sub, source, n)),
            ("source_decode", "spark source + decode", lambda sub, n: noop(
                "source_decode",
                # the pipeline's decoding of the connector's records (the Arrow UDF; see reading.py)
                lambda df, s: decode.decode(df, s.base_topics).filter(
                    F.col("error").isNull()), sub, source, n)),
            ("source_decode_jvm", "spark source + decode in the JVM", lambda sub, n: noop(
                "source_decode_jvm",
                lambda df, s: decode.decode(df, s.base_topics, in_jvm=True).filter(
                    F.col("error").isNull()), sub, source, n)),
            ("archive", "archive job", lambda sub, n: pipeline("archive", ("archive",), sub, source, n)),
            ("stats", "stats job", lambda sub, n: pipeline("stats", ("stats",), sub, source, n)),
            ("pipeline", "pipeline (both jobs)", lambda sub, n: pipeline("pipeline", jobs.JOBS, sub, source, n)),
        ]
    # Phase by phase, the sources in turn, each --rounds times, the fastest round kept. One round is
    # not fair: the small warm-up run leaves the JVM's code for large batches uncompiled, and
    # whichever source reads the big topic first compiles the code both share (Parquet, the
    # deduplication), so the first round favours the second source (2026-12-02: the connector's
    # pipeline took 18.3 s in a first round, 9.8 s in a second, notify_kafka's 10.9 and 10.8 s).
    for index in range(len(phases(args.sources[0]))):
        best: dict[str, tuple[tuple[int, float], tuple[int, float]]] = {}
        for attempt in range(args.rounds):
            for source in args.sources:
                key, label, run = phases(source)[index]
                if key not in wanted or budget.left() < 45:
                    continue
                if key == "source_decode_jvm" and source != "kafka":
                    continue  # notify_kafka decodes where it reads
                fixed, whole = run(small, attempt), run(big, attempt)
                LOG.info("%s [%s] round %d: %.2f s (%d rows), fixed %.2f s", label, source, attempt + 1,
                         whole[1], whole[0], fixed[1])
                kept = best.get(source)
                best[source] = (fixed, whole) if kept is None else (
                    _faster(kept[0], fixed, SMALL_TOPIC), _faster(kept[1], whole, args.messages))
        for source, (fixed, whole) in best.items():
            record(f"{phases(source)[index][1]} [{source}]", *whole, fixed=fixed)
    if "incremental" in wanted and "pipeline" in wanted and budget.left() >= 45:
        _incremental_phases(args, bootstrap, base, budget, results, pipeline, big)
    return spark


def _faster(one: tuple[int, float], other: tuple[int, float], rows: int) -> tuple[int, float]:
    """Of two ``(rows, seconds)`` rounds, the faster one that read all ``rows``; a short round
    (its time bound ran out) only when neither is complete."""
    return min(one, other, key=lambda measured: (measured[0] != rows, measured[1]))


def _incremental_phases(args, bootstrap: str, base: str, budget: Budget, results: dict, pipeline, big) -> None:
    """Runs after the full pipeline run, on its checkpoint: one with nothing new, one with new records."""
    started = time.perf_counter()
    rows, _ = pipeline("pipeline", ("archive", "stats"), big)
    seconds = time.perf_counter() - started
    results["phases"]["run with nothing new"] = {"rows": 0, "seconds": round(seconds, 3), "rate": 0.0,
                                                 "complete": rows == args.messages}
    LOG.info("%-26s %8d rows %8.2f s", "run with nothing new", 0, seconds)
    produce_more(bootstrap, f"{base}.info", args.partitions, args.incremental)
    started = time.perf_counter()
    rows, _ = pipeline("pipeline", ("archive", "stats"), big)
    seconds = time.perf_counter() - started
    complete = rows == args.messages + args.incremental
    results["phases"][f"run with {args.incremental} new"] = {
        "rows": args.incremental, "seconds": round(seconds, 3), "rate": round(args.incremental / seconds, 1),
        "complete": complete}
    LOG.info("%-26s %8d rows %8.2f s%s", f"run with {args.incremental} new", args.incremental, seconds,
             "" if complete else "  (INCOMPLETE)")


def _cli_phases(args, bootstrap: str, run_id: str, work: Path, budget: Budget, results: dict) -> None:
    """Wall time of ``notify-transport pipeline run --once`` per reader: first run, nothing new,
    incremental run (each reader on topics and an output of its own)."""
    for source in args.sources:
        topics = [f"benchcli-{run_id}-{source}-{k:02d}.info" for k in range(args.cli_topics)]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        try:
            spread(bootstrap, topics, args.cli_partitions, args.cli_messages, create=True)
            command = _cli_command() + ["pipeline", "run", "--once", "--transport-url", f"kafka://{bootstrap}",
                                        "--kafka-topics", ",".join(topics), "--source", source,
                                        "--output", str(work / f"cli-{source}")]
            shape = f"{args.cli_topics}x{args.cli_partitions}"
            for label, new in ((f"cli first run, {shape}", args.cli_messages), (f"cli nothing new, {shape}", 0),
                               (f"cli {args.incremental} new, {shape}", args.incremental)):
                if budget.left() < 60:
                    return
                name = f"{label} [{source}]"
                if new and not label.startswith("cli first run"):
                    spread(bootstrap, topics, args.cli_partitions, new)
                    # Spark's own share, timed next to the run it is read against (see spark_floor.py)
                    results["phases"][f"{FLOOR_LABEL} [{source}]"] = spark_floor(budget, source)
                quiet_after, seconds, done, summary = _timed_command(command, budget)
                rows = int(summary.get("notifications", -1))
                results["phases"][name] = {"rows": rows, "seconds": round(seconds, 3), "rate": round(
                    rows / seconds, 1) if rows > 0 else 0.0, "complete": rows == new, "wall": True,
                    "waited_for_quiet_seconds": quiet_after}
                LOG.info("%-40s %8d rows %8.2f s wall%s", name, rows, seconds,
                         "" if rows == new else f"  (INCOMPLETE: {done.stderr[-500:]})")
        finally:
            with contextlib.suppress(Exception):
                for future in admin.delete_topics(topics).values():
                    future.result(30)


#: the row of :func:`spark_floor`, one per reader
FLOOR_LABEL = "cli Spark floor"


def _timed_command(command: list[str], budget: Budget) -> tuple[float | None, float, subprocess.CompletedProcess,
                                                                   dict]:
    """Run ``command`` once the machine is quiet: the wait (:func:`wait_quiet`), the wall seconds, the
    finished process and the last JSON object it printed (empty when it failed)."""
    quiet_after = wait_quiet()
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=max(60.0, budget.left() - 30))
    seconds = time.perf_counter() - started
    return quiet_after, seconds, done, _last_json(done.stdout) if done.returncode == 0 else {}


def spark_floor(budget: Budget, reader: str = "kafka") -> dict:
    """Wall time of ``bench/spark_floor.py`` (the session of a run with ``reader``, one job, stop), from a
    quiet machine."""
    quiet_after, seconds, done, parts = _timed_command(
        [sys.executable, str(Path(__file__).with_name("spark_floor.py")), reader], budget)
    LOG.info("%-40s %8s      %8.2f s wall%s", FLOOR_LABEL, "", seconds,
             "" if parts else f"  (FAILED: {done.stderr[-500:]})")
    return {"rows": 0, "seconds": round(seconds, 3), "rate": 0.0, "complete": bool(parts), "wall": True,
            "waited_for_quiet_seconds": quiet_after, **parts}


def over_floor(phases: dict) -> list[str]:
    """Each reader's incremental CLI run read as Spark's floor (:func:`spark_floor`) plus the pipeline's share."""
    lines = []
    for name, phase in phases.items():
        if not name.startswith("cli ") or " new, " not in name or "nothing new" in name or "[" not in name:
            continue
        reader = name[name.rindex("["):]
        floor = phases.get(f"{FLOOR_LABEL} {reader}")
        if not floor or not floor.get("complete") or not phase.get("complete"):
            continue
        lines.append(f"{name}: {phase['seconds']:.2f} s = Spark's floor {floor['seconds']:.2f} s (session, one "
                     f"job, exit) + {phase['seconds'] - floor['seconds']:.2f} s of the pipeline's own")
    return lines


#: the machine counts as quiet below this share of its CPU time busy (all cores), over QUIET_WINDOW seconds
QUIET_BUSY = 0.25
QUIET_WINDOW = 0.5


def _busy_and_total() -> tuple[int, int]:
    with open("/proc/stat", encoding="ascii") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def wait_quiet(limit: float = 15.0) -> float | None:
    """Wait until the machine is quiet; return the seconds waited (None: not quiet within ``limit``,
    or no ``/proc/stat``).

    A timed CLI run follows a burst of writes. noida-db, the embedded test
    broker, keeps a core busy for seconds after one, on the same two cores as
    the run; a Kafka cluster on other machines does not. The run is timed from
    a quiet machine, and the wait is recorded beside it.
    """
    started = time.monotonic()
    try:
        busy, total = _busy_and_total()
    except OSError:
        return None
    while time.monotonic() - started < limit:
        time.sleep(QUIET_WINDOW)
        now_busy, now_total = _busy_and_total()
        share = (now_busy - busy) / max(1, now_total - total)
        busy, total = now_busy, now_total
        if share < QUIET_BUSY:
            return round(time.monotonic() - started, 2)
    LOG.warning("The machine did not get quiet within %.0f s: the next CLI run is timed anyway", limit)
    return None


def spread(bootstrap: str, topics: list[str], partitions: int, count: int, create: bool = False) -> None:
    """``count`` notifications round-robin over every partition of ``topics`` (created first if asked)."""
    if create:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(t, num_partitions=partitions, replication_factor=1)
                                           for t in topics]).values():
            future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.messages": 200000})
    for i in range(count):
        slot = i % (len(topics) * partitions)
        while True:
            try:
                producer.produce(topics[slot // partitions], notification(i), partition=slot % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("produce failed")


def _cli_command() -> list[str]:
    """The installed ``notify-transport`` script when it is beside this interpreter, else ``-m``."""
    script = Path(sys.executable).parent / "notify-transport"
    return [str(script)] if script.exists() else [sys.executable, "-m", "notify_transport.cli.main"]


def _last_json(text: str) -> dict:
    start = text.find("{")
    try:
        return json.loads(text[start:text.rfind("}") + 1]) if start >= 0 else {}
    except ValueError:
        return {}


def _print_table(results: dict) -> None:
    phases = results["phases"]
    raw = phases.get("raw consume", {}).get("rate")
    print(f"\nPipeline benchmark: {results['messages']} notifications of ~{results['envelope_bytes']} B, "
          f"{results['partitions']} partitions, {results['master']}, {results['cpus']} CPUs; "
          f"produced at {results.get('produce_rate', 0):.0f}/s; load average "
          f"{results['load_average_start']:.1f} -> {results.get('load_average_end', 0):.1f}")
    if "cold_start_seconds" in results:
        print(f"Spark session {results['spark_session_seconds']} s; cold start (first run, "
              f"{SMALL_TOPIC} notifications) {results['cold_start_seconds']} s, excluded below")
    print("'fixed s': the same phase on a topic of "
          f"{SMALL_TOPIC} notifications (query start, planning, commit, no-data batch); "
          "'marginal/s': extra notifications per extra second between the two runs")
    print(f"{'phase':<38} {'rows':>7} {'seconds':>8} {'notif/s':>9} {'vs raw':>7} {'fixed s':>8} "
          f"{'marginal/s':>11} {'vs raw':>7}")
    for name, phase in phases.items():
        ratio = f"{phase['rate'] / raw:.1%}" if raw else "-"
        fixed = f"{phase['fixed_seconds']:.2f}" if "fixed_seconds" in phase else "-"
        marginal = phase.get("marginal_rate")
        marginal_text = f"{marginal:.0f}" if marginal else "-"
        marginal_ratio = f"{marginal / raw:.1%}" if marginal and raw else "-"
        flag = ("" if phase["complete"] else "  INCOMPLETE") + ("  (wall, whole command)" if phase.get("wall") else "")
        print(f"{name:<38} {phase['rows']:>7} {phase['seconds']:>8.2f} {phase['rate']:>9.0f} {ratio:>7} "
              f"{fixed:>8} {marginal_text:>11} {marginal_ratio:>7}{flag}")
    for line in source_ratios(phases) + over_floor(phases):
        print(line)


def source_ratios(phases: dict) -> list[str]:
    """Per phase measured with both readers: the connector's steady rate over notify_kafka's."""
    lines = []
    for name, phase in phases.items():
        if not name.endswith(" [kafka]"):
            continue
        other = phases.get(name[:-len("[kafka]")] + "[notify_kafka]")
        ours, theirs = phase.get("marginal_rate"), (other or {}).get("marginal_rate")
        if ours and theirs:
            lines.append(f"{name[:-len(' [kafka]')]}: connector {ours:.0f}/s steady, "
                         f"{ours / theirs:.2f}x notify_kafka's {theirs:.0f}/s")
    return lines


if __name__ == "__main__":
    sys.exit(main())
