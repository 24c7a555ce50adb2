"""Cluster mode: the pipeline on a Spark standalone master and two workers gives the counts of a local run.

The master and the worker are pyspark's own classes started through
``spark-class`` on 127.0.0.1 (:mod:`notify_transport.testing.spark_standalone`);
the cluster run is the CLI with ``--master spark://127.0.0.1:PORT`` in its
own process (a driver talking to the cluster), the local run the shared
session of these tests. Kafka is read by the executors through Spark's Kafka
connector, whose jars the driver ships to them (``spark.jars``): the workers'
own classpath is Spark's alone.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from notify_transport.pipeline import jobs
from notify_transport.pipeline.kafka_settings import KafkaSettings
from notify_transport.pipeline.reading import Subscription
from notify_transport.pipeline.report import archive_counts, load_errors, load_stats
from notify_transport.testing.spark_standalone import StandaloneCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2, cores=1, memory="1g") as started:
        yield started


def _counts(output):
    stats = load_stats(output / "stats")
    windows = stats[stats.level == "window"]
    archive = archive_counts(output / "archive")
    return {"archive": {k: int(v) for k, v in archive.groupby("event_type")["count"].sum().items()},
            "stats": int(windows["count"].sum()), "errors": len(load_errors(output / "errors")),
            "error_count": int(windows["error_count"].sum())}


def test_cluster_run_counts_equal_a_local_run(cluster, spark, connector, kafka_bootstrap, producer, tmp_path):
    base = producer.unique_base("cluster")
    topics = {f"{base}.info": 3, f"{base}.error": 1}
    producer.create_topics(topics)
    for i in range(300):
        priority = "ERROR" if i % 10 == 0 else "INFO"
        msg = producer.notification(f"compute.e{i % 4}", f"host{i % 3}", priority)
        producer.send(f"{base}.{priority.lower()}", msg, 2.0, None if priority == "ERROR" else i % 3)
        if i % 25 == 0:
            producer.send(f"{base}.info", msg, 2.0, (i + 1) % 3)  # a duplicate
    producer.send_raw(f"{base}.info", b"{not json", 0)
    producer.flush()

    local = tmp_path / "local"
    jobs.run(spark, KafkaSettings.from_url(f"kafka://{kafka_bootstrap}"), Subscription(base_topics=(base,)),
             jobs.PipelineConfig(output=str(local), source_format=connector), once=True)

    remote = tmp_path / "cluster"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-m", "notify_transport.pipeline", "run", "--once", "--master", cluster.master_url,
         "--transport-url", f"kafka://{kafka_bootstrap}", "--topics", base, "--output", str(remote),
         "--source", connector, "--max-records-per-trigger", "160",
         "--spark-conf", "spark.executor.memory=512m", "--spark-conf", "spark.driver.host=127.0.0.1",
         "--spark-conf", "spark.driver.bindAddress=127.0.0.1"],
        capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout[done.stdout.index("{"):done.stdout.rindex("}") + 1])
    assert summary["notifications"] == 300 and summary["duplicates"] == 12 and summary["undecodable"] == 1
    assert "records/s" in done.stderr and "Run done" in done.stderr  # progress lines, without -v
    expected = _counts(local)
    assert expected["stats"] == 300 and expected["errors"] == 1 and expected["error_count"] == 30
    assert _counts(remote) == expected
    for worker in ("worker-0", "worker-1"):  # an executor on each, each fetched the connector's jars
        apps = list((cluster.work_dir / worker).glob("app-*"))
        assert apps, f"no application ran on {worker}"
        assert list(apps[0].rglob("spark-sql-kafka-0-10_*.jar")), f"the connector was not shipped to {worker}"
    producer.delete_topics(list(topics))
