"""The archive and statistics jobs end to end, with duplicates, poison, late data and restarts.

Run 1 reads a mix of notifications, duplicates and poison records; run 2
restarts from the checkpoint with a late notification, a duplicate of a
run-1 notification, new ones, and a topic created since run 1 (a new
priority, read from its first record). Every count below is exact.

The scenario runs twice: on the machine's clock, and on a clock injected at
00:00:30 UTC (notification timestamps and the records' broker times both come
from it), where the two-hour-late notification falls on the previous date.
No count may depend on the time of day.
"""
from __future__ import annotations

import base64
import dataclasses
import datetime
import html.parser
import json
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from notify_transport.drivers import envelope
from notify_transport.pipeline import caught_up, jobs
from notify_transport.pipeline.kafka_settings import KafkaSettings
from notify_transport.pipeline.reading import Subscription
from notify_transport.pipeline.report import archive_counts, build_report, load_stats
from spark_support import utc

VHOST = "vh1"


class Clock:
    """Time for the scenario: from ``start`` (naive UTC; None: the machine's clock), going on as
    the machine's does, so that records sent later carry later broker times."""

    def __init__(self, start: datetime.datetime | None) -> None:
        self._offset = datetime.timedelta(0) if start is None else start - utc()

    def now(self, seconds_ago: float = 0.0) -> datetime.datetime:
        return utc(seconds_ago) + self._offset

    def millis(self) -> int:
        return int(self.now().replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


def _just_after_midnight() -> datetime.datetime:
    today = utc().replace(hour=0, minute=0, second=30, microsecond=0)
    return today + datetime.timedelta(seconds=DELAY)


#: the machine's clock, and 00:00:30 UTC today (where "two hours ago" is yesterday)
CLOCKS = {"machine-clock": lambda: None, "after-midnight": _just_after_midnight}
DELAY = 5.0  # seconds between a notification's timestamp and its send (broker time is in ms)


@dataclasses.dataclass
class Scenario:
    base: str
    output: Path
    settings: KafkaSettings
    subscription: Subscription
    summary1: jobs.RunSummary
    summary2: jobs.RunSummary
    archive_after_run1: int
    errors_at: set
    late_id: str
    ids: set
    clock: Clock


def _archive_ids(path: Path) -> list[str]:
    return ds.dataset(str(path), format="parquet", partitioning="hive").to_table(
        columns=["message_id"]).column("message_id").to_pylist()


@pytest.fixture(scope="module", params=sorted(CLOCKS))
def scenario(request, spark, connector, kafka_bootstrap, producer, tmp_path_factory):
    clock = Clock(CLOCKS[request.param]())
    base = producer.unique_base("pipe")
    info, error, critical = (f"{base}.{p}.{VHOST}" for p in ("info", "error", "critical"))
    producer.create_topics({info: 2, error: 1, critical: 1, f"{base}.info": 1})
    output = tmp_path_factory.mktemp("pipeline")
    ids = set()

    def send(topic, partition, event_type, publisher, priority, version=2.0, seconds_ago=DELAY, **kw):
        msg = producer.notification(event_type, publisher, priority, timestamp=clock.now(seconds_ago))
        producer.send(topic, msg, version, partition, broker_millis=clock.millis(), **kw)
        ids.add(msg["message_id"])
        return msg

    def resend(topic, msg, partition):
        producer.send(topic, msg, 2.0, partition, broker_millis=clock.millis())

    # poison first, so their coordinates are known: offset 0 of info[1] and of error[0]
    producer.send_raw(info, b"garbage", 1, broker_millis=clock.millis())
    producer.send_raw(error, envelope.encode({"message_id": "x", "priority": "ERROR"}, {}, 2.0), 0,
                      broker_millis=clock.millis())
    created = [send(info, 0, "compute.instance.create.end", "compute.host1", "INFO") for _ in range(20)]
    for _ in range(10):
        send(info, 1, "compute.instance.delete.end", "compute.host2", "INFO", 1.0,
             context_style=envelope.CONTEXT_PREFIXED)
    for _ in range(4):
        send(error, 0, "image.upload", "image.host1", "ERROR")
    for _ in range(2):
        send(critical, 0, "volume.attach", "volume.host1", "CRITICAL")
    for msg in created[:3]:  # re-sent, to the other partition
        resend(info, msg, 1)
    for _ in range(5):  # another vhost's topic: never read
        resend(f"{base}.info", producer.notification(timestamp=clock.now()), 0)
    producer.flush()

    settings = KafkaSettings.from_url(f"kafka://{kafka_bootstrap}/{VHOST}")
    subscription = Subscription(base_topics=(base,), vhost=settings.vhost)
    config = jobs.PipelineConfig(output=str(output), source_format=connector)
    summary1 = jobs.run(spark, settings, subscription, config, once=True)
    archived = len(_archive_ids(output / "archive"))

    late = send(info, 0, "compute.instance.create.end", "compute.host1", "INFO", seconds_ago=7200)
    resend(info, created[5], 1)
    for _ in range(5):
        send(info, 1, "compute.instance.create.end", "compute.host3", "INFO")
    warn = f"{base}.warn.{VHOST}"
    producer.create_topics({warn: 1})
    for _ in range(2):
        send(warn, 0, "compute.instance.resize", "compute.host4", "WARN")
    producer.flush()
    summary2 = jobs.run(spark, settings, subscription, config, once=True)
    yield Scenario(base, output, settings, subscription, summary1, summary2, archived,
                   {(info, 1, 0), (error, 0, 0)}, late["message_id"], ids, clock)
    producer.delete_topics([info, error, critical, warn, f"{base}.info"])


def test_first_run_archives_each_notification_once(scenario):
    summary = scenario.summary1
    assert (summary.input_rows, summary.notifications, summary.undecodable, summary.duplicates) == (41, 36, 2, 3)
    assert scenario.archive_after_run1 == 36


def test_restart_reads_only_new_records_and_archive_is_exact(scenario):
    summary = scenario.summary2
    assert (summary.input_rows, summary.notifications, summary.duplicates, summary.late) == (9, 8, 1, 1)
    ids = _archive_ids(scenario.output / "archive")
    assert len(ids) == len(set(ids)) == 44
    assert set(ids) == scenario.ids
    counts = archive_counts(scenario.output / "archive")
    assert _per_event_type(counts) == {
        "compute.instance.create.end": 26, "compute.instance.delete.end": 10,
        "image.upload": 4, "volume.attach": 2, "compute.instance.resize": 2}
    dates = {p.name for p in (scenario.output / "archive").iterdir() if p.name.startswith("date=")}
    assert dates == {f"date={d}" for d in counts.date}
    assert (scenario.output / "archive" / f"date={scenario.clock.now(DELAY):%Y-%m-%d}" /
            "event_type=image.upload").is_dir()
    late_date = f"{scenario.clock.now(7200):%Y-%m-%d}"  # the previous date just after midnight
    assert f"date={late_date}" in dates


def _per_event_type(counts) -> dict[str, int]:
    """``archive_counts`` (per date and event type) summed over the dates."""
    return {k: int(v) for k, v in counts.groupby("event_type")["count"].sum().items()}


def test_archive_rows_are_typed_and_vhost_aware(spark, scenario):
    rows = spark.read.parquet(str(scenario.output / "archive")).filter(
        "event_type = 'compute.instance.delete.end'").collect()
    assert len(rows) == 10
    for row in rows:
        assert (row.vhost, row.base_topic, row.priority, row.envelope) == (VHOST, scenario.base, "INFO", "1.0")
        assert row.request_id.startswith("req-") and json.loads(row.payload) == {"n": 1}
        assert DELAY - 0.001 <= (row.kafka_timestamp - row.timestamp).total_seconds() < DELAY + 5


def test_poison_records_are_in_errors_with_coordinates(scenario):
    table = ds.dataset(str(scenario.output / "errors"), format="parquet").to_table().to_pylist()
    assert {(r["topic"], r["partition"], r["offset"]) for r in table} == scenario.errors_at
    by_offset = {(r["topic"].split(".")[1]): r for r in table}
    assert by_offset["info"]["value"] == b"garbage" and "JSON" in by_offset["info"]["error"]
    assert "event_type" in by_offset["error"]["error"]


def _stats_totals(stats, column):
    detail = stats[stats.level == "detail"]
    return {k: int(v) for k, v in detail.groupby(column)["count"].sum().items()}


def test_statistics_are_exact_without_late_data_or_duplicates(scenario):
    stats = load_stats(scenario.output / "stats")
    assert _stats_totals(stats, "event_type") == {
        "compute.instance.create.end": 25, "compute.instance.delete.end": 10,
        "image.upload": 4, "volume.attach": 2, "compute.instance.resize": 2}
    assert _stats_totals(stats, "publisher_id") == {
        "compute.host1": 20, "compute.host2": 10, "compute.host3": 5, "compute.host4": 2,
        "image.host1": 4, "volume.host1": 2}
    assert _stats_totals(stats, "priority") == {"INFO": 35, "WARN": 2, "ERROR": 4, "CRITICAL": 2}
    windows = stats[stats.level == "window"]
    assert int(windows["count"].sum()) == 43
    assert (int(windows.error_count.sum()), int(windows.critical_count.sum())) == (4, 2)
    for row in windows.itertuples():
        assert row.error_rate == pytest.approx(row.error_count / row.count)
        assert row.critical_rate == pytest.approx(row.critical_count / row.count)
        assert DELAY - 0.001 <= row.delay_p50 <= row.delay_p95 < DELAY + 5


def test_late_notification_is_archived_but_left_out_of_the_windows(scenario):
    assert scenario.late_id in _archive_ids(scenario.output / "archive")
    assert scenario.summary2.late == 1
    stats = load_stats(scenario.output / "stats")
    assert stats.window_start.min() > pd.Timestamp(scenario.clock.now(3600), tz="UTC")


def test_archive_timestamps_are_timezone_aware(scenario):
    schema = ds.dataset(str(scenario.output / "archive"), format="parquet", partitioning="hive").schema
    for name in ("timestamp", "kafka_timestamp"):
        assert schema.field(name).type == pa.timestamp("us", tz="UTC")
    (first,) = list((scenario.output / "archive").rglob("*.parquet"))[:1]
    physical = pq.ParquetFile(first).schema.column(pq.ParquetFile(first).schema_arrow.get_field_index("timestamp"))
    assert physical.physical_type == "INT64"  # not INT96


class _Cells(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.cells, self.images, self.sources = {}, [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "td" and "data-metric" in attrs:
            self.cells[(attrs["data-table"], attrs["data-key"], attrs["data-metric"])] = attrs["data-value"]
        if tag == "figure":
            self.images.append(attrs["data-chart"])
        if tag == "img":
            self.sources.append(attrs["src"])


def test_report_shows_the_numbers_of_the_data(scenario, tmp_path):
    index = build_report(scenario.output, tmp_path / "report")
    parser = _Cells()
    parser.feed(index.read_text())
    cells = parser.cells
    assert cells[("summary", "notifications", "count")] == "43"
    assert cells[("summary", "archived", "count")] == "44"
    assert cells[("summary", "undecodable", "count")] == "2"
    assert cells[("summary", "error", "count")] == "4"
    assert cells[("summary", "critical", "count")] == "2"
    assert cells[("summary", "late", "count")] == "1"
    assert DELAY - 0.001 <= float(cells[("summary", "delay_p50", "delay")]) < DELAY + 5
    assert float(cells[("summary", "error_critical", "rate")]) == pytest.approx(6 / 43)
    assert cells[("event_type", "compute.instance.create.end", "count")] == "25"
    assert cells[("publisher_id", "compute.host2", "count")] == "10"
    assert cells[("priority", "ERROR", "error_count")] == "4"
    assert cells[("priority", "CRITICAL", "critical_count")] == "2"
    window_total = sum(int(v) for (t, _, m), v in cells.items() if t == "window" and m == "count")
    assert window_total == 43
    per_date = archive_counts(scenario.output / "archive").groupby("date")["count"].sum()
    assert {d: int(n) for d, n in per_date.items()} == {
        k: int(v) for (t, k, m), v in cells.items() if t == "archive_date"}
    assert sorted(parser.images) == sorted(["overview.png", "delays.png", "event_types.png", "publishers.png",
                                            "archive.png"])
    for source in parser.sources:  # each chart is a PNG inside the page
        assert source.startswith("data:image/png;base64,")
        assert base64.b64decode(source.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"


def test_batch_statistics_match_the_archive(spark, connector, scenario):
    from notify_transport.pipeline import decode
    from notify_transport.pipeline.reading import read_kafka

    kafka_df = read_kafka(spark, scenario.settings, scenario.subscription, streaming=False,
                          fmt=connector)
    notifications = decode.notifications(decode.decode(kafka_df, scenario.subscription.base_topics))
    stats = jobs.window_stats(notifications, "1 minute")
    totals = {r.event_type: r.total for r in stats.groupBy("event_type").agg(
        {"count": "sum"}).withColumnRenamed("sum(count)", "total").collect()}
    counts = archive_counts(scenario.output / "archive")
    assert totals == _per_event_type(counts)


class _CrashAfterWrite:
    """Lets the archive write batch 0, then fails the query as a crash would."""

    def __init__(self, inner):
        self.inner, self.crashed = inner, False

    def __call__(self, df, batch_id):
        self.inner(df, batch_id)
        if not self.crashed:
            self.crashed = True
            raise RuntimeError("injected crash after the batch was written")


def test_crash_after_write_replays_the_batch_exactly_once(spark, connector, kafka_bootstrap, producer, tmp_path):
    base = producer.unique_base("crash")
    topic = f"{base}.info"
    producer.create_topics({topic: 2})
    for i in range(30):
        producer.send(topic, producer.notification(event_type=f"e{i % 3}"), 2.0, i % 2)
    producer.flush()
    settings = KafkaSettings.from_url(f"kafka://{kafka_bootstrap}")
    subscription = Subscription(base_topics=(base,))
    config = jobs.PipelineConfig(output=str(tmp_path), jobs=("archive",), source_format=connector)
    crash = _CrashAfterWrite(jobs.PipelineBatch(config))
    with pytest.raises(Exception, match="injected crash"):
        jobs.run(spark, settings, subscription, config, once=True, batch_fn=crash)
    assert len(_archive_ids(tmp_path / "archive")) == 30  # written, but the batch never committed
    summary = jobs.run(spark, settings, subscription, config, once=True)
    assert summary.input_rows == 30  # batch 0 replayed from its checkpointed offsets
    ids = _archive_ids(tmp_path / "archive")
    assert len(ids) == len(set(ids)) == 30
    files = [p.name for p in (tmp_path / "archive").rglob("*.parquet")]
    # one file per event type and task (spark.sql.shuffle.partitions is 2), all of batch 0
    assert 3 <= len(files) <= 6 and all(f.startswith("batch-000000000000-") for f in files)
    producer.delete_topics([topic])


def test_cli_runs_once_and_builds_the_report(connector, kafka_bootstrap, producer, tmp_path, capsys, monkeypatch):
    from notify_transport.pipeline import session
    from notify_transport.pipeline.__main__ import main

    quick_starts = []
    build_session = session.build_session

    def spy(*args, **kwargs):
        quick_starts.append(kwargs.get("quick_start"))
        return build_session(*args, **kwargs)

    monkeypatch.setattr(session, "build_session", spy)

    base = producer.unique_base("cli")
    producer.create_topics({f"{base}.info.cli": 1, f"{base}.warn.cli": 1})
    for i in range(12):
        prio = "WARN" if i % 4 == 0 else "INFO"
        producer.send(f"{base}.{prio.lower()}.cli", producer.notification(
            event_type="network.port.update", priority=prio), 2.0)
    producer.flush()
    run = ["run", "--once", "--transport-url", f"kafka://{kafka_bootstrap}/cli", "--topics", base,
           "--output", str(tmp_path / "out"), "--source", connector, "--max-records-per-trigger", "5"]
    assert main([*run, "--report"]) == 0
    printed = capsys.readouterr().out
    assert '"input_rows": 12' in printed and '"notifications": 12' in printed and "Report:" in printed
    # a first run has no last run to measure from: what the topics hold bounds it, so it is small
    assert quick_starts == [True]
    subscription = Subscription(base_topics=(base,), vhost="cli")
    assert caught_up.held({"bootstrap.servers": kafka_bootstrap}, subscription) == 12
    # nothing past the first run's end offsets: the second run answers from them, without a batch
    assert main(run) == 0
    assert '"input_rows": 0' in capsys.readouterr().out
    counts = archive_counts(tmp_path / "out" / "archive")
    assert counts["count"].sum() == 12
    assert main(["report", "--output", str(tmp_path / "out"), "--report-dir", str(tmp_path / "r")]) == 0
    parser = _Cells()
    parser.feed((tmp_path / "r" / "index.html").read_text())
    assert parser.cells[("priority", "WARN", "count")] == "3"
    assert parser.cells[("priority", "INFO", "count")] == "9"
    assert main(["run", "--once", "--transport-url", "rabbit://h/", "--output", str(tmp_path)]) == 2
    producer.delete_topics([f"{base}.info.cli", f"{base}.warn.cli"])


def test_cli_auto_reads_a_small_run_with_notify_kafka_where_the_connector_is_set_up(
        connector, kafka_bootstrap, producer, tmp_path, monkeypatch):
    from notify_transport.pipeline.__main__ import main

    readers = []
    run = jobs.run

    def spy(spark, settings, subscription, config, **kwargs):
        readers.append(str(config.source_format))
        return run(spark, settings, subscription, config, **kwargs)

    monkeypatch.setattr(jobs, "run", spy)
    base = producer.unique_base("auto")
    producer.create_topics({f"{base}.info": 1})
    for _ in range(3):
        producer.send(f"{base}.info", producer.notification(event_type="network.port.update"), 2.0)
    producer.flush()
    command = ["run", "--once", "--transport-url", f"kafka://{kafka_bootstrap}", "--topics", base,
               "--priorities", "info", "--output", str(tmp_path / "out")]
    assert main(command) == 0
    producer.send(f"{base}.info", producer.notification(event_type="network.port.update"), 2.0)
    producer.flush()
    assert main([*command, "--source", connector]) == 0  # asked by name: the connector, small or not
    assert readers == ["notify_kafka", "kafka"]
    assert archive_counts(tmp_path / "out" / "archive")["count"].sum() == 4
    producer.delete_topics([f"{base}.info"])


def test_statistics_files_are_compacted_without_changing_the_numbers(spark, connector, kafka_bootstrap, producer,
                                                                    tmp_path):
    base = producer.unique_base("compact")
    topic = f"{base}.info"
    producer.create_topics({topic: 2})
    base_ms = int(time.time() * 1000) - 60_000
    for i in range(30):  # one broker millisecond each: capped batches are cut between them
        producer.send(topic, producer.notification(event_type=f"e{i % 3}"), 2.0, i % 2, broker_millis=base_ms + i)
    producer.flush()
    config = jobs.PipelineConfig(output=str(tmp_path), jobs=("stats",), source_format=connector,
                                 max_per_trigger=10, stats_compact_every=2)
    summary = jobs.run(spark, KafkaSettings.from_url(f"kafka://{kafka_bootstrap}"),
                       Subscription(base_topics=(base,)), config, once=True)
    assert summary.batches == 3  # 10 each; files merged after batch 2
    files = sorted(p.name for p in (tmp_path / "stats").glob("*.parquet"))
    assert any(f.startswith("compact-") for f in files) and len(files) <= 2
    assert _stats_totals(load_stats(tmp_path / "stats"), "event_type") == {"e0": 10, "e1": 10, "e2": 10}
    # without the archive the statistics read scratch rows of each batch, removed once it is done
    scratch = tmp_path / "_checkpoints" / "batch_rows"
    assert scratch.is_dir() and not list(scratch.rglob("*.parquet"))
    producer.delete_topics([topic])
