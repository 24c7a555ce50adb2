"""The same outputs whatever the run shape, with duplicates spread over partitions.

Copies of one message id sit in different partitions; some second copies sit
in a lower partition than the first, behind newer notifications there, so
keeping the wrong copy makes it late. A fourth partition holds nothing but
later copies, sent at the very end between new notifications: a cap split
over the partitions by backlog (the connector's own ``maxOffsetsPerTrigger``)
reads one of them in the first capped batch, long before its first copy.
The kept copy must be the first by broker time (ties: topic, partition,
offset) in: one uncapped run; a run followed by an incremental run; a capped
catch-up whose process is killed with SIGKILL twice at random points, then
finished. Archive, errors, late counts and statistics must be identical in
the three, with Spark's Kafka connector on Apache Kafka and on noida, and
with the ``notify_kafka`` source.
"""
from __future__ import annotations

import datetime
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from notify_transport.jvm import artifacts
from notify_transport.pipeline import jobs
from notify_transport.pipeline.kafka_settings import KafkaSettings
from notify_transport.pipeline.reading import Subscription
from notify_transport.pipeline.stats_files import load_partials
from notify_transport.pipeline.report import load_stats
from spark_support import NotificationProducer, utc

CAP = 25
LATENESS = "1 minute"
STEP = datetime.timedelta(seconds=2)  # notification time between two records of the sequence


class Plan:
    """What is sent, in broker-time order, and the copy each id must keep."""

    def __init__(self, producer, base: str) -> None:
        self.producer = producer
        self.info, self.error = f"{base}.info", f"{base}.error"
        producer.create_topics({self.info: 4, self.error: 1})
        self.start_ms = int(time.time() * 1000) - 3_600_000
        self.sequence = 0
        self.first_copy: dict[str, tuple[int, str, int]] = {}  # id -> (broker ms, topic, partition)
        self.now = utc(600)
        self.sent_info: dict[int, dict] = {}  # i -> notification first sent to the info topic

    def send(self, topic: str, partition: int, message: dict, same_ms_as_previous: bool = False) -> None:
        if not same_ms_as_previous:
            self.sequence += 1
        millis = self.start_ms + self.sequence * 10
        self.producer.send(topic, message, 2.0, partition, broker_millis=millis)
        copy = (millis, topic, partition)
        self.first_copy[message["message_id"]] = min(self.first_copy.get(message["message_id"], copy), copy)

    def part(self, first: int, count: int, pending: dict) -> None:
        """Notifications ``first .. first+count-1``; some are sent again 40 records later."""
        for i in range(first, first + count):
            if i in pending:  # a second copy in a lower partition, 80 s behind the records before it
                message, partition = pending.pop(i)
                self.send(self.info, partition, message)
            topic, partition = (self.error, 0) if i % 10 == 9 else (self.info, i % 3)
            message = self.producer.notification(f"event{i % 4}", f"host{i % 3}",
                                                 "ERROR" if topic == self.error else "INFO",
                                                 timestamp=self.now + STEP * i)
            self.send(topic, partition, message)
            if topic == self.info:
                self.sent_info[i] = message
            if first and i >= first + count - 16 and i % 2 and i - 90 in self.sent_info:
                # a later copy in the partition of copies only, between new notifications
                self.send(self.info, 3, self.sent_info[i - 90])
            if topic == self.info and i % 7 == 2 and i < 200:
                pending[i + 40] = (message, max(0, partition - 1) if partition else 2)
            if topic == self.info and i % 23 == 5:  # a copy with the same broker time: lower partition wins
                self.send(self.info, (partition + 1) % 3, message, same_ms_as_previous=True)
        if first == 0:
            late = self.producer.notification("event.late", "host9", "INFO", timestamp=self.now - STEP * 300)
            self.send(self.info, 1, late)
            self.sequence += 1
            self.producer.send_raw(self.info, b"not a notification", 0, self.start_ms + self.sequence * 10)
        self.producer.flush()


def _archive(output: Path) -> list[tuple]:
    rows = ds.dataset(str(output / "archive"), format="parquet", partitioning="hive").to_table().to_pylist()
    return sorted(tuple(sorted((k, str(v)) for k, v in row.items())) for row in rows)


def _errors(output: Path) -> list[tuple]:
    rows = ds.dataset(str(output / "errors"), format="parquet").to_table(
        columns=["topic", "partition", "offset", "error"]).to_pylist()
    return sorted(tuple(row.values()) for row in rows)


def _partials(output: Path):
    partials = load_partials(output / "stats")
    return partials.sort_values(list(partials.columns), ignore_index=True)


def _commits(checkpoint: Path) -> int:
    folder = checkpoint / "pipeline" / "commits"
    return len([p for p in folder.iterdir() if p.name.isdigit()]) if folder.is_dir() else 0


def _run_killed(command: list[str], checkpoint: Path, more_commits: int, then: float = 0.0,
                timeout: float = 240.0) -> None:
    """Run ``command`` until the query committed ``more_commits`` more batches, then, ``then`` seconds
    later (most likely in the middle of the next batch), SIGKILL it."""
    before = _commits(checkpoint)
    # a class cache of its own; the jars stay where the set-up put them
    env = {**os.environ, "XDG_CACHE_HOME": str(checkpoint.parent / "cache"),
           artifacts.CACHE_ENV: str(artifacts.cache_root())}
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while _commits(checkpoint) < before + more_commits:
            assert process.poll() is None, f"the pipeline exited with {process.returncode}"
            assert time.monotonic() < deadline, "the capped run made no progress"
            time.sleep(0.1)  # polling the checkpoint folder, not waiting for a time
        time.sleep(then)
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the run, its JVM and Python workers: a crash
        process.wait(30)


@pytest.fixture
def reading(request, kafka_bootstrap, producer, spark):
    """``(source, bootstrap, producer)`` of a parametrized ``(source, broker)``; broker ``record`` is
    the session's broker of record (Apache Kafka), ``noida`` the embedded default."""
    source, broker = request.param
    if source == "kafka":
        request.getfixturevalue("connector")
    if broker == "record":
        yield source, kafka_bootstrap, producer
        return
    bootstrap = request.getfixturevalue(broker).bootstrap
    own = NotificationProducer(bootstrap)
    try:
        yield source, bootstrap, own
    finally:
        own.close()


@pytest.mark.parametrize("reading", [("kafka", "record"), ("notify_kafka", "record"), ("kafka", "noida")],
                         ids=["connector-apache_kafka", "notify_kafka-apache_kafka", "connector-noida"],
                         indirect=True)
def test_kept_copies_and_outputs_are_identical_in_every_run_shape(spark, reading, tmp_path):
    source, kafka_bootstrap, producer = reading
    plan = Plan(producer, producer.unique_base("shapes"))
    settings = KafkaSettings.from_url(f"kafka://{kafka_bootstrap}")
    subscription = Subscription(base_topics=(plan.info.rsplit(".", 1)[0],), priorities=("info", "error"))
    uncapped, incremental, capped = tmp_path / "uncapped", tmp_path / "incremental", tmp_path / "capped"

    def config(output: Path, cap: int | None = None) -> jobs.PipelineConfig:
        return jobs.PipelineConfig(output=str(output), source_format=source, lateness=LATENESS,
                                   max_per_trigger=cap, trigger_interval="1 second", stats_compact_every=3)

    pending: dict = {}
    plan.part(0, 120, pending)
    first = jobs.run(spark, settings, subscription, config(incremental), once=True)
    plan.part(120, 120, pending)
    assert not pending
    whole = jobs.run(spark, settings, subscription, config(uncapped), once=True)
    second = jobs.run(spark, settings, subscription, config(incremental), once=True)

    command = [sys.executable, "-m", "notify_transport.pipeline", "run", "--transport-url",
               f"kafka://{kafka_bootstrap}", "--topics", subscription.base_topics[0], "--priorities", "info,error",
               "--output", str(capped), "--source", source, "--lateness", LATENESS,
               "--max-records-per-trigger", str(CAP), "--trigger-interval", "1 second", "--continuous"]
    checkpoint = capped / "_checkpoints"
    seed = random.randrange(1 << 30)
    kill_points = random.Random(seed)
    for _ in range(2):
        _run_killed(command, checkpoint, kill_points.randint(1, 3), then=kill_points.uniform(0.0, 1.0))
    rest = jobs.run(spark, settings, subscription, config(capped, CAP), once=True)
    shape = f"kill points of seed {seed}"
    assert rest.batches >= 2 and _commits(checkpoint) >= 4, shape  # cut twice, finished in capped batches

    archived = {row["message_id"]: (row["topic"], row["partition"]) for row in ds.dataset(
        str(uncapped / "archive"), format="parquet", partitioning="hive").to_table(
        columns=["message_id", "topic", "partition"]).to_pylist()}
    assert archived == {mid: (topic, partition) for mid, (_, topic, partition) in plan.first_copy.items()}
    assert whole.late == first.late + second.late == 1
    assert whole.earlier_duplicates == first.earlier_duplicates + second.earlier_duplicates == 0
    assert rest.earlier_duplicates == 0, shape

    for output in (incremental, capped):
        assert _archive(output) == _archive(uncapped), (output.name, shape)
        assert _errors(output) == _errors(uncapped), (output.name, shape)
        assert _partials(output).equals(_partials(uncapped)), (output.name, shape)
        assert load_stats(output / "stats").equals(load_stats(uncapped / "stats")), (output.name, shape)
    producer.delete_topics([plan.info, plan.error])


def test_a_copy_read_after_its_archived_copy_is_a_duplicate_even_with_an_earlier_broker_time(
        spark, connector, kafka_bootstrap, producer, tmp_path):
    base = producer.unique_base("earlier")
    topic = f"{base}.info"
    producer.create_topics({topic: 2})
    start_ms = int(time.time() * 1000) - 60_000
    message = producer.notification("event.copied", "host1", "INFO")
    producer.send(topic, message, 2.0, 1, broker_millis=start_ms + 100)
    producer.flush()
    settings = KafkaSettings.from_url(f"kafka://{kafka_bootstrap}")
    config = jobs.PipelineConfig(output=str(tmp_path), source_format=connector)
    first = jobs.run(spark, settings, Subscription(base_topics=(base,)), config, once=True)
    # a copy created before the archived one (a producer's clock), appended after the first run
    producer.send(topic, message, 2.0, 0, broker_millis=start_ms + 50)
    producer.flush()
    second = jobs.run(spark, settings, Subscription(base_topics=(base,)), config, once=True)
    assert (first.notifications, second.notifications, second.duplicates) == (1, 0, 1)
    assert second.earlier_duplicates == 1
    kept = ds.dataset(str(tmp_path / "archive"), format="parquet", partitioning="hive").to_table(
        columns=["message_id", "partition"]).to_pylist()
    assert kept == [{"message_id": message["message_id"], "partition": 1}]
    producer.delete_topics([topic])


def test_runs_of_either_reader_continue_one_checkpoint(spark, connector, kafka_bootstrap, producer, tmp_path):
    """``--source auto`` reads a small run with ``notify_kafka`` and a large one with the connector, so
    one output's runs alternate readers: together they write what one run writes."""
    plan = Plan(producer, producer.unique_base("alternate"))
    settings = KafkaSettings.from_url(f"kafka://{kafka_bootstrap}")
    subscription = Subscription(base_topics=(plan.info.rsplit(".", 1)[0],), priorities=("info", "error"))
    alternating, whole = tmp_path / "alternating", tmp_path / "whole"

    def run(output: Path, source: str) -> jobs.RunSummary:
        config = jobs.PipelineConfig(output=str(output), source_format=source, lateness=LATENESS,
                                     trigger_interval="1 second", stats_compact_every=3)
        return jobs.run(spark, settings, subscription, config, once=True)

    pending: dict = {}
    plan.part(0, 120, pending)
    runs = [run(alternating, connector)]
    plan.part(120, 120, pending)
    runs.append(run(alternating, "notify_kafka"))
    plan.part(240, 60, pending)
    runs.append(run(alternating, connector))
    assert not pending
    one = run(whole, "notify_kafka")

    assert all(r.notifications for r in runs)
    assert sum(r.notifications for r in runs) == one.notifications
    assert sum(r.duplicates for r in runs) == one.duplicates > 0
    assert sum(r.late for r in runs) == one.late == 1
    assert _archive(alternating) == _archive(whole)
    assert _errors(alternating) == _errors(whole)
    assert _partials(alternating).equals(_partials(whole))
    assert load_stats(alternating / "stats").equals(load_stats(whole / "stats"))
    producer.delete_topics([plan.info, plan.error])
