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


def _outputs(root: Path) -> dict:
    start = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)
    rows = []
    for minute in range(0, 3 * 24 * 60, 7):
        when = start + datetime.timedelta(minutes=minute)
        for event_type, priority, count, delay in (("compute.instance.create.end", "INFO", 5, 2.5),
                                                   ("image.upload", "ERROR", minute % 3, 80000.0),
                                                   (INJECTION, "INFO", 1, 0.02)):
            if count:
                rows.append({"window_start": when, "window_end": when + datetime.timedelta(minutes=1),
                             "event_type": event_type, "publisher_id": f"host{minute % 4}", "priority": priority,
                             "late": False, "delay_bucket": delays.bucket_of(delay), "count": count,
                             "delay_min": delay, "delay_max": delay, "batch_id": 0})
    stats = pd.DataFrame(rows)
    stats["delay_bucket"] = stats["delay_bucket"].astype("int32")
    (root / "stats").mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(stats, preserve_index=False), root / "stats" / "batch-000000000000-a.parquet")
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
    return {src: img.getAttribute("src"), x: r.x, y: r.y + window.scrollY, w: r.width, h: r.height,
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
    browser = _browser()
    measured = index.parent / "measure.html"
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
