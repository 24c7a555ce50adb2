"""Statistics after a capped catch-up: exact whatever the batch cap, the restarts and the partition skew.

The backlog covers three days of notification time, unevenly over the
partitions: one partition holds only the last hour, another has most of its
records in the first hours. Capped micro-batches then advance the partitions'
notification time very unevenly, which with one global watermark dropped
on-time notifications of the slower partitions. The run is the
operator's: continuous with a small ``--max-records-per-trigger``, stopped,
restarted, stopped, then finished with ``--once``; the statistics must then
hold every notification of the archive except the one truly late one.
"""
from __future__ import annotations

import datetime

import pyarrow.dataset as ds

from notify_transport.pipeline import jobs
from notify_transport.pipeline.kafka_settings import KafkaSettings
from notify_transport.pipeline.reading import Subscription
from notify_transport.pipeline.report import archive_counts, load_stats
from notify_transport.pipeline.stats_files import load_partials
from spark_support import utc

DAYS = 3
CAP = 40


def _spread(count: int, start: datetime.datetime, end: datetime.datetime) -> list[datetime.datetime]:
    step = (end - start) / count
    return [start + step * i for i in range(count)]


def _millis(stamp: datetime.datetime) -> int:
    return int(stamp.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


def test_capped_catch_up_with_restarts_counts_every_on_time_notification(spark, connector, kafka_bootstrap,
                                                                        producer, tmp_path):
    base = producer.unique_base("catchup")
    info, error = f"{base}.info", f"{base}.error"
    producer.create_topics({info: 3, error: 1})
    now = utc(60)
    begin = now - datetime.timedelta(days=DAYS)
    plan = {
        (info, 0): _spread(300, begin, now),  # even over three days
        # most records in the first two hours, the rest over the other days
        (info, 1): _spread(100, begin, begin + datetime.timedelta(hours=2))
        + _spread(20, begin + datetime.timedelta(hours=2), now),
        (info, 2): _spread(60, begin, now),
        (error, 0): _spread(40, now - datetime.timedelta(hours=1), now),  # only the last hour
    }
    sent = {}
    for (topic, partition), stamps in plan.items():
        priority = "ERROR" if topic == error else "INFO"
        for i, stamp in enumerate(stamps):
            msg = producer.notification(f"{topic.rsplit('.', 1)[1]}.event{i % 3}", f"host{partition}",
                                        priority, timestamp=stamp)
            producer.send(topic, msg, 2.0, partition, broker_millis=_millis(stamp))  # delivered when stamped
            sent[msg["message_id"]] = msg
    # one truly late notification: a day behind the records before it in its own partition
    late = producer.notification("info.late", "host2", "INFO", timestamp=now - datetime.timedelta(days=1))
    arrived = _millis(now)
    producer.send(info, late, 2.0, 2, broker_millis=arrived)
    sent[late["message_id"]] = late
    for i, msg in enumerate(list(sent.values())[:5]):  # duplicates, in another partition
        producer.send(info, msg, 2.0, 1, broker_millis=arrived + 1 + i)
    producer.send_raw(info, b"not a notification", 0, arrived + 10)
    producer.flush()

    settings = KafkaSettings.from_url(f"kafka://{kafka_bootstrap}")
    subscription = Subscription(base_topics=(base,), priorities=("info", "error"))
    config = jobs.PipelineConfig(output=str(tmp_path), source_format=connector, max_per_trigger=CAP,
                                 trigger_interval="1 second", stats_compact_every=4)
    first = jobs.run(spark, settings, subscription, config, once=False, max_batches=3, max_seconds=300)
    second = jobs.run(spark, settings, subscription, config, once=False, max_batches=3, max_seconds=300)
    last = jobs.run(spark, settings, subscription, config, once=True)
    total_records = len(sent) + 5 + 1
    assert first.batches >= 1 and second.batches >= 1
    assert first.notifications + second.notifications < len(sent)  # the catch-up was cut twice
    assert last.batches >= 2  # and finished in capped batches

    ids = ds.dataset(str(tmp_path / "archive"), format="parquet", partitioning="hive").to_table(
        columns=["message_id"]).column("message_id").to_pylist()
    assert len(ids) == len(set(ids)) == len(sent)
    assert first.input_rows + second.input_rows + last.input_rows >= total_records

    partials = load_partials(tmp_path / "stats")
    assert int(partials.loc[partials["late"], "count"].sum()) == 1
    assert first.late + second.late + last.late == 1
    stats = load_stats(tmp_path / "stats")
    windows = stats[stats.level == "window"]
    assert int(windows["count"].sum()) == len(sent) - 1
    detail = stats[stats.level == "detail"]
    by_type = {k: int(v) for k, v in detail.groupby("event_type")["count"].sum().items()}
    archived = archive_counts(tmp_path / "archive").groupby("event_type")["count"].sum()
    assert archived.pop("info.late") == 1
    assert by_type == {k: int(v) for k, v in archived.items()}
    assert int(windows["error_count"].sum()) == 40
    producer.delete_topics([info, error])
