"""The report names a missing value "(none)" in every table: Spark writes a notification with an
empty event type to the archive partition ``event_type=__HIVE_DEFAULT_PARTITION__``, read back as null."""
from __future__ import annotations

import datetime
import re
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas", reason="the spark extra is not installed")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from notify_transport.pipeline import delays  # noqa: E402
from notify_transport.pipeline.report import build_report  # noqa: E402


def _outputs(root: Path) -> None:
    when = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)
    stats = pd.DataFrame([{"window_start": when, "window_end": when + datetime.timedelta(minutes=1),
                           "event_type": event_type, "publisher_id": "host1", "priority": "INFO", "late": False,
                           "delay_bucket": delays.bucket_of(1.0), "count": 2, "delay_min": 1.0,
                           "delay_max": 1.0, "batch_id": 0} for event_type in ("image.upload", None)])
    stats["delay_bucket"] = stats["delay_bucket"].astype("int32")
    (root / "stats").mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(stats, preserve_index=False), root / "stats" / "batch-000000000000-a.parquet")
    for partition in ("image.upload", "__HIVE_DEFAULT_PARTITION__"):
        folder = root / "archive" / "date=2026-03-01" / f"event_type={partition}"
        folder.mkdir(parents=True)
        pq.write_table(pa.table({"message_id": ["m1", "m2"]}), folder / "batch-0-x.parquet")


def test_an_empty_event_type_is_none_in_the_archive_table_too(tmp_path: Path) -> None:
    _outputs(tmp_path)
    page = Path(build_report(tmp_path, tmp_path / "report")).read_text(encoding="utf-8")
    archive = page.split('data-table="archive"', 1)[1].split("</table>", 1)[0]
    assert re.findall(r"<td>2026-03-01</td><td>([^<]*)</td>", archive) == ["image.upload", "(none)"]
    assert "None" not in archive
    events = page.split("Top event types", 1)[1].split("</table>", 1)[0]
    assert "(none)" in events
