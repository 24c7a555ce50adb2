"""The report as a person sees it: rendered by headless Chromium, every chart drawn and not blank.

The outputs are written here with pyarrow (no Spark needed): statistics over
three days, a small archive, and undecodable records whose texts try to
inject markup, which the autoescaping template must show as text.
"""
from __future__ import annotations

import datetime
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
Image = pytest.importorskip("PIL.Image", reason="Pillow (a matplotlib dependency) is needed to read screenshots")

from notify_transport.pipeline import delays  # noqa: E402
from notify_transport.pipeline.report import build_report  # noqa: E402

INJECTION = '<img src=x id="injected" onerror="document.title=1">'
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium: install it with 'apt-get install chromium' (scripts/setup.sh does, with the "
                "spark extra)")


def _stats_row(when: datetime.datetime, event_type: str, publisher: str, priority: str, count: int,
               delay: float) -> dict:
    """One row of the statistics' partial counts: a one-minute window, one delay bucket."""
    return {"window_start": when, "window_end": when + datetime.timedelta(minutes=1), "event_type": event_type,
            "publisher_id": publisher, "priority": priority, "late": False, "delay_bucket": delays.bucket_of(delay),
            "count": count, "delay_min": delay, "delay_max": delay, "batch_id": 0}


def _write_stats(root: Path, rows: list[dict]):
    """The rows as the pipeline writes its statistics: one Parquet file of batch 0."""
    stats = pd.DataFrame(rows)
    stats["delay_bucket"] = stats["delay_bucket"].astype("int32")
    (root / "stats").mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(stats, preserve_index=False), root / "stats" / "batch-000000000000-a.parquet")
    return stats


def _outputs(root: Path) -> dict:
    start = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)
    rows = []
    for minute in range(0, 3 * 24 * 60, 7):
        when = start + datetime.timedelta(minutes=minute)
        for event_type, priority, count, delay in (("compute.instance.create.end", "INFO", 5, 2.5),
                                                   ("image.upload", "ERROR", minute % 3, 80000.0),
                                                   (INJECTION, "INFO", 1, 0.02)):
            if count:
                rows.append(_stats_row(when, event_type, f"host{minute % 4}", priority, count, delay))
    stats = _write_stats(root, rows)
    for day in ("2026-03-01", "2026-03-02", "2026-03-03"):
        folder = root / "archive" / f"date={day}" / "event_type=image.upload"
        folder.mkdir(parents=True)
        pq.write_table(pa.table({"message_id": [f"{day}-{i}" for i in range(4)]}), folder / "batch-0-x.parquet")
    (root / "errors").mkdir()
    pq.write_table(pa.table({"topic": ["notifications.info"], "partition": [0], "offset": [7],
                             "kafka_timestamp": pa.array([start], pa.timestamp("us", tz="UTC")),
                             "vhost": [None], "error": [f"invalid JSON: {INJECTION}"]},
                            schema=pa.schema([("topic", pa.string()), ("partition", pa.int32()),
                                              ("offset", pa.int64()),
                                              ("kafka_timestamp", pa.timestamp("us", tz="UTC")),
                                              ("vhost", pa.string()), ("error", pa.string())])),
                   root / "errors" / "batch-0-x.parquet")
    return {"total": int(stats["count"].sum())}


_MEASURE = """<script>
window.addEventListener("load", () => {
  const out = [...document.querySelectorAll("figure img")].map(img => {
    const r = img.getBoundingClientRect();
    return {src: img.parentElement.dataset.chart, x: r.x, y: r.y + window.scrollY, w: r.width, h: r.height,
            natural: img.naturalWidth, loaded: img.dataset.loaded || ""};
  });
  document.body.setAttribute("data-measure", JSON.stringify(out));
});
</script></body>"""


def _run(browser: str, args: list[str], cwd: Path) -> str:
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--force-device-scale-factor=1", "--window-size=1200,7000",
                           "--virtual-time-budget=5000", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_report_renders_in_chromium_with_non_empty_charts(tmp_path):
    expected = _outputs(tmp_path / "out")
    index = build_report(tmp_path / "out", tmp_path / "report")
    page = index.read_text()
    assert INJECTION not in page and "&lt;img src=x" in page  # escaped, everywhere it appears
    assert list(index.parent.iterdir()) == [index]  # one file: the charts are inside the page
    browser = _browser()
    alone = tmp_path / "mailed"  # the page alone, as a mail attachment carries it
    alone.mkdir()
    measured = alone / "measure.html"
    measured.write_text(page.replace("</body>", _MEASURE))

    dom = _run(browser, ["--dump-dom", measured.as_uri()], tmp_path)
    assert not re.search(r'<img[^>]*id="injected"', dom)  # shown as text, never an element
    assert "&lt;img src=x" in dom
    found = re.search(r'data-measure="([^"]*)"', dom)
    assert found, "the page did not finish loading"
    figures = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert sorted(f["src"] for f in figures) == ["archive.png", "delays.png", "event_types.png", "overview.png",
                                                "publishers.png"]
    for figure in figures:
        assert figure["natural"] > 0 and figure["loaded"] == "yes", figure
        assert figure["w"] > 300 and figure["h"] > 100, figure

    shot = tmp_path / "shot.png"
    _run(browser, [f"--screenshot={shot}", measured.as_uri()], tmp_path)
    image = Image.open(shot).convert("RGB")
    for figure in figures:
        box = (int(figure["x"]), int(figure["y"]), int(figure["x"] + figure["w"]), int(figure["y"] + figure["h"]))
        assert box[3] <= image.height, f"{figure['src']} is below the screenshot"
        region = np.asarray(image.crop(box), dtype="int16")
        colored = (region.max(axis=2) - region.min(axis=2) > 60).mean()
        assert colored > 0.01, f"{figure['src']}: no colored marks ({colored:.2%} of the pixels)"
        variance = region.mean(axis=2).var()
        assert variance > 100, f"{figure['src']}: a flat region (variance {variance:.0f})"
    assert f">{expected['total']:,}<" in page


def _cells(page: str, table: str, metric: str) -> dict[str, float]:
    """The exact values of one column of a table, by row key (the page's data-* attributes)."""
    pattern = rf'data-table="{table}" data-key="([^"]*)" data-metric="{metric}"\s+data-value="([^"]*)"'
    return {key: float(value) for key, value in re.findall(pattern, page) if value}


def _series(page: str, chart: str) -> dict:
    found = re.search(rf'data-chart="{re.escape(chart)}" data-series="([^"]*)"', page)
    assert found, f"no {chart} on the page"
    return json.loads(found.group(1).replace("&#34;", '"').replace("&quot;", '"').replace("&amp;", "&"))


def _short_period_outputs(root: Path) -> None:
    """Four minutes of statistics whose senders' clocks run ahead of the broker's now and then."""
    start = datetime.datetime(2026, 3, 1, 12, 0, tzinfo=datetime.timezone.utc)
    rows = []
    for minute in range(4):
        when = start + datetime.timedelta(minutes=minute)
        for delay, count in ((-0.00002, 3), (-0.5, 2), (0.0009, 4), (0.004, 1)):
            rows.append(_stats_row(when, "compute.instance.create.end", "host1", "INFO", count, delay))
    _write_stats(root, rows)
    folder = root / "archive" / "date=2026-03-01" / "event_type=compute.instance.create.end"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"message_id": ["m1", "m2"], "topic": ["notifications.info.prod"] * 2,
                             "vhost": ["prod", "prod"]}), folder / "batch-0-x.parquet")


def test_a_short_period_with_clock_skew_reads_true(tmp_path):
    from notify_transport.pipeline.report import write_source

    _short_period_outputs(tmp_path / "out")
    write_source(tmp_path / "out", "kafka://kafka1:9092/prod", {"topics": ["notifications"]})
    page = build_report(tmp_path / "out").read_text()
    # buckets fit the period: four minutes are four rows, not one hour
    periods = _cells(page, "period", "count")
    assert len(periods) == 4 and "Per minute (4 rows)" in page
    # no negative delay anywhere; the skewed notifications are counted (2 a minute: the -0.5 s ones)
    delays_shown = {**_cells(page, "period", "delay_p50"), **_cells(page, "period", "delay_p95")}
    assert delays_shown and min(delays_shown.values()) >= 0
    assert _cells(page, "summary", "count")["skewed"] == 8
    assert min(_cells(page, "summary", "delay").values()) >= 0
    # the delay chart draws the table's numbers
    series = _series(page, "delays.png")
    p50, p95 = _cells(page, "period", "delay_p50"), _cells(page, "period", "delay_p95")
    assert dict(zip(series["period"], series["delay_p50"])) == p50
    assert dict(zip(series["period"], series["delay_p95"])) == p95
    assert dict(zip(_series(page, "overview.png")["period"], _series(page, "overview.png")["count"])) == periods
    # the page names its source
    assert "<code>kafka://kafka1:9092/prod</code>" in page
    assert "<code>prod</code>" in page and "<code>notifications.info.prod</code>" in page
