"""The notify_kafka data source against a real broker: batch, streaming, limits, restarts, vhosts."""
import time
import uuid

import pytest
from pyspark.sql import functions as F

from notify_transport.pipeline.kafka_settings import KafkaSettings
from notify_transport.pipeline.reading import Subscription, read_decoded, read_kafka
from notify_transport.pipeline.source import KAFKA_SCHEMA

SIZES = {0: 50, 1: 30, 2: 10}


@pytest.fixture(scope="module")
def topic(producer):
    """One topic with 50, 30 and 10 records in partitions 0, 1 and 2 (values name partition and index).

    Record ``i`` of partition ``p`` has broker time ``base + 10 i + p`` ms: the partitions interleave.
    """
    name = producer.unique_base("src") + ".info"
    producer.create_topics({name: 3})
    base = int(time.time() * 1000) - 3_600_000
    for partition, size in SIZES.items():
        for i in range(size):
            producer.send_raw(name, f"p{partition}-{i}".encode(), partition, base + 10 * i + partition)
    producer.flush()
    yield name
    producer.delete_topics([name])


def _settings(bootstrap, vhost=None):
    return KafkaSettings.from_url(f"kafka://{bootstrap}/{vhost or ''}")


def _stream(spark, bootstrap, topic, tmp_path, name, **kwargs):
    """Run an availableNow query into a list of per-batch (partition, offset, value) rows."""
    batches = []

    def collect(df, batch_id):
        batches.append((batch_id, [tuple(r) for r in df.select("partition", "offset", "value").collect()]))

    df = read_kafka(spark, _settings(bootstrap), Subscription(kafka_topics=(topic,)), streaming=True,
                    fmt="notify_kafka", **kwargs)
    query = (df.writeStream.queryName(name).foreachBatch(collect)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert not query.isActive and query.exception() is None
    return batches


def test_batch_read_is_exact_and_has_kafka_columns(spark, kafka_bootstrap, topic):
    df = read_kafka(spark, _settings(kafka_bootstrap), Subscription(kafka_topics=(topic,)),
                    streaming=False, fmt="notify_kafka")
    assert df.schema == KAFKA_SCHEMA
    rows = df.collect()
    assert len(rows) == sum(SIZES.values())
    by_partition = {}
    for row in rows:
        by_partition.setdefault(row.partition, []).append(row)
        assert row.topic == topic and row.timestamp is not None and row.timestampType == 0
        assert row.value == f"p{row.partition}-{row.offset}".encode()
    assert {p: sorted(r.offset for r in rs) for p, rs in by_partition.items()} == {
        p: list(range(n)) for p, n in SIZES.items()}
    # one read task per core (local[2]), each reading several Kafka partitions with one client
    assert df.rdd.getNumPartitions() == spark.sparkContext.defaultParallelism == 2


def test_the_connectors_partitions_are_decoded_in_one_task_per_core(spark, kafka_bootstrap, topic, connector):
    # the connector makes a task of every Kafka partition, each a trip through the decoder's
    # Python worker; read_decoded coalesces them to one per core and keeps every record
    df = read_decoded(spark, _settings(kafka_bootstrap), Subscription(kafka_topics=(topic,)),
                      streaming=False, fmt=connector)
    assert df.rdd.getNumPartitions() == spark.sparkContext.defaultParallelism == 2
    rows = df.select("partition", "offset", "error").collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        (p, o) for p, n in SIZES.items() for o in range(n))
    assert all(r.error for r in rows)  # the values are not notifications: each is set aside, none lost


def test_batch_read_between_explicit_offsets(spark, kafka_bootstrap, topic):
    df = read_kafka(spark, _settings(kafka_bootstrap), Subscription(kafka_topics=(topic,)),
                    streaming=False, fmt="notify_kafka",
                    starting_offsets=f'{{"{topic}": {{"0": 40, "1": -2, "2": -1}}}}',
                    ending_offsets=f'{{"{topic}": {{"0": 45, "1": 3, "2": -1}}}}')
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(40, 45)] + [(1, o) for o in range(3)]


def test_stream_limit_cuts_on_broker_time_and_restart_does_not_double_count(
        spark, kafka_bootstrap, producer, topic, tmp_path):
    first = _stream(spark, kafka_bootstrap, topic, tmp_path, "limit_run1", max_per_trigger=40)
    sizes = [len(rows) for _, rows in first if rows]
    assert sizes == [40, 40, 10]
    # the 40 oldest by broker time: records 0-9 of every partition, then 10-14 of partitions 0 and 1
    per_partition = [{p: sum(1 for r in rows if r[0] == p) for p in SIZES} for _, rows in first if rows]
    assert per_partition == [{0: 15, 1: 15, 2: 10}, {0: 25, 1: 15, 2: 0}, {0: 10, 1: 0, 2: 0}]

    for i in range(SIZES[2], SIZES[2] + 7):
        producer.send_raw(topic, f"p2-{i}".encode(), 2)
    producer.flush()
    second = _stream(spark, kafka_bootstrap, topic, tmp_path, "limit_run2", max_per_trigger=40)
    assert min(b for b, _ in second) > max(b for b, _ in first)  # resumed from the checkpoint
    new_rows = [r for _, rows in second for r in rows]
    assert sorted(new_rows) == [(2, i, f"p2-{i}".encode()) for i in range(10, 17)]
    all_rows = [r for _, rows in first + second for r in rows]
    assert len(all_rows) == len(set(all_rows)) == sum(SIZES.values()) + 7
    SIZES[2] += 7


def test_stream_from_latest_reads_only_new_records(spark, kafka_bootstrap, producer, tmp_path):
    name = producer.unique_base("latest") + ".info"
    producer.create_topics({name: 1})
    producer.send_raw(name, b"old")
    producer.flush()
    first = _stream(spark, kafka_bootstrap, name, tmp_path, "latest_1", starting_offsets="latest")
    assert [r for _, rows in first for r in rows] == []
    producer.send_raw(name, b"new")
    producer.flush()
    rows = [r for _, rs in _stream(spark, kafka_bootstrap, name, tmp_path, "latest_2") for r in rs]
    assert rows == [(0, 1, b"new")]
    producer.delete_topics([name])


def test_vhost_of_the_url_selects_the_topics(spark, kafka_bootstrap, producer):
    base = producer.unique_base("vh")
    vhost = "tenant-" + uuid.uuid4().hex[:4]
    topics = {f"{base}.info.{vhost}": b"mine", f"{base}.error.{vhost}": b"mine too",
              f"{base}.info": b"no vhost", f"{base}.info.other": b"other vhost"}
    producer.create_topics({t: 1 for t in topics})
    for name, value in topics.items():
        producer.send_raw(name, value)
    producer.flush()
    settings = KafkaSettings.from_url(f"kafka://{kafka_bootstrap}/{vhost}")
    sub = Subscription(base_topics=(base,), vhost=settings.vhost)
    rows = read_kafka(spark, settings, sub, streaming=False, fmt="notify_kafka").select(
        "topic", F.col("value").cast("string").alias("v")).collect()
    assert sorted((r.topic, r.v) for r in rows) == [(f"{base}.error.{vhost}", "mine too"),
                                                  (f"{base}.info.{vhost}", "mine")]
    everything = read_kafka(spark, settings, Subscription(base_topics=(base,), all_vhosts=True),
                            streaming=False, fmt="notify_kafka").count()
    assert everything == 4
    producer.delete_topics(list(topics))


def test_transport_url_option_and_format_choice(spark, kafka_bootstrap, topic, monkeypatch):
    from notify_transport.exceptions import ConfigurationError
    from notify_transport.pipeline import reading

    df = (spark.read.format("notify_kafka").option("transport_url", f"kafka://{kafka_bootstrap}/")
          .option("subscribe", topic).load())
    assert df.count() == sum(SIZES.values())
    # the set-up put Spark's connector on the session's classpath: auto takes it, notify_kafka stays asked for
    assert reading.choose_format(spark, "auto") == "kafka"
    assert reading.choose_format(spark, "notify_kafka") == "notify_kafka"
    with pytest.raises(ConfigurationError, match="Unknown source format"):
        reading.choose_format(spark, "jdbc")
    # without the connector's jars: auto falls back, an explicit ask is an error
    monkeypatch.setattr(reading, "kafka_format_available", lambda _spark: False)
    assert reading.choose_format(spark, "auto") == "notify_kafka"
    with pytest.raises(ConfigurationError, match="is not set up"):
        reading.choose_format(spark, "kafka")
    with pytest.raises(Exception, match="subscribe"):
        spark.read.format("notify_kafka").option("kafka.bootstrap.servers", kafka_bootstrap).load().count()


def test_available_now_stops_at_what_existed_when_it_started(spark, kafka_bootstrap, producer, tmp_path):
    name = producer.unique_base("avnow") + ".info"
    producer.create_topics({name: 2})
    for i in range(40):
        producer.send_raw(name, f"before-{i}".encode(), i % 2)
    producer.flush()
    seen = []

    def collect_and_produce_more(df, batch_id):
        seen.extend(r.value for r in df.select("value").collect())
        if batch_id == 0:  # records arriving while the run is under way belong to the next run
            for i in range(15):
                producer.send_raw(name, f"during-{i}".encode(), i % 2)
            producer.flush()

    def run_once(query_name):
        df = read_kafka(spark, _settings(kafka_bootstrap), Subscription(kafka_topics=(name,)),
                        streaming=True, fmt="notify_kafka", max_per_trigger=25)
        query = (df.writeStream.queryName(query_name).foreachBatch(collect_and_produce_more)
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert not query.isActive and query.exception() is None

    run_once("avnow_1")
    assert sorted(seen) == sorted(f"before-{i}".encode() for i in range(40))
    seen.clear()
    run_once("avnow_2")
    assert sorted(seen) == sorted(f"during-{i}".encode() for i in range(15))
    producer.delete_topics([name])
