"""The pipeline benchmark's raw Java read (bench/RawJavaConsume.java) reads every record, on the connector's jars.

It runs with the Spark tests because it needs what they need: the connector
fetched by the set-up, a JDK and a broker.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.path.join(ROOT, "bench") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "bench"))

import bench_pipeline  # noqa: E402


def test_raw_java_read_counts_every_record_of_every_partition(kafka_bootstrap, producer, connector):
    topic = producer.unique_base("rawjava") + ".info"
    producer.create_topics({topic: 3})
    try:
        for i in range(301):  # 101, 100 and 100 records: every partition must be read to its end
            producer.send_raw(topic, f"record {i}".encode(), partition=i % 3)
        producer.flush()
        for fetch_bytes in (None, 4096):  # the client's default, and fetches of a few records each
            records, seconds = bench_pipeline.raw_java_consume(kafka_bootstrap, topic, 3, 301, fetch_bytes)
            assert records == 301
            assert seconds > 0
    finally:
        producer.delete_topics([topic])
