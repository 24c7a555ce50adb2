"""The HTML report: charts (PNG) and tables from the jobs' Parquet outputs.

Built with pyarrow, pandas and matplotlib only, so it runs without Spark and
opens in a browser without a server. It reads the small statistics table
whole; from the archive only partition row counts (Parquet metadata) and from
the errors only their coordinates, never the notifications themselves.

Every number in a table cell carries ``data-table``, ``data-key`` and
``data-metric`` attributes, with the exact value in ``data-value``, so the
page can be checked by a program as well as read.
"""
from __future__ import annotations

import datetime
import html
import logging
import os
from pathlib import Path
from typing import Iterable, Sequence

LOG = logging.getLogger(__name__)

STATS_KEY = ["level", "window_start", "window_end", "event_type", "publisher_id", "priority"]
TOP_N = 15
#: charts and the windows table show the most recent windows only; totals cover all of them
RECENT_WINDOWS = 240
ERROR_SAMPLE = 50
PRIORITY_ORDER = ["AUDIT", "DEBUG", "INFO", "SAMPLE", "WARN", "WARNING", "ERROR", "CRITICAL"]


# -- loading -----------------------------------------------------------------------------------

def _dataset(path: Path, partitioning: str | None = None):
    import pyarrow.dataset as ds

    if not path.is_dir() or not any(path.rglob("*.parquet")):
        return None
    return ds.dataset(str(path), format="parquet", partitioning=partitioning)


def load_stats(path: str | os.PathLike):
    """The statistics table: for each window and group, its row from the latest micro-batch."""
    import pandas as pd

    dataset = _dataset(Path(path))
    if dataset is None:
        return pd.DataFrame(columns=[*STATS_KEY, "count", "error_count", "critical_count", "error_rate",
                                     "critical_rate", "delay_p50", "delay_p95", "delay_max", "batch_id"])
    frame = dataset.to_table().to_pandas()
    frame = frame.sort_values("batch_id").drop_duplicates(STATS_KEY, keep="last", ignore_index=True)
    return frame.sort_values(["window_start", "level"], ignore_index=True)


def archive_counts(path: str | os.PathLike):
    """Archived notifications per date and event type, from Parquet metadata only."""
    import pandas as pd

    dataset = _dataset(Path(path), "hive")
    if dataset is None:
        return pd.DataFrame(columns=["date", "event_type", "count"])
    table = dataset.to_table(columns=["date", "event_type"])
    counts = table.group_by(["date", "event_type"]).aggregate([([], "count_all")]).to_pandas()
    counts = counts.rename(columns={"count_all": "count"})
    counts["date"] = counts["date"].astype(str)
    return counts.sort_values(["date", "event_type"], ignore_index=True)


def load_errors(path: str | os.PathLike):
    """Coordinates and error text of the undecodable records (not their bytes)."""
    import pandas as pd

    dataset = _dataset(Path(path))
    columns = ["topic", "partition", "offset", "kafka_timestamp", "vhost", "error"]
    if dataset is None:
        return pd.DataFrame(columns=columns)
    return dataset.to_table(columns=columns).to_pandas().sort_values(
        ["topic", "partition", "offset"], ignore_index=True)


# -- charts ------------------------------------------------------------------------------------

def _charts(stats, out: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    charts: dict[str, str] = {}
    windows = stats[stats["level"] == "window"].sort_values("window_start").tail(RECENT_WINDOWS)
    detail = stats[(stats["level"] == "detail") & stats["window_start"].isin(windows["window_start"])]
    if detail.empty:
        return charts

    def save(fig, name: str, title: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        charts[name] = title

    volume = detail.pivot_table(index="window_start", columns="priority", values="count",
                                aggfunc="sum", fill_value=0)
    volume = volume[[p for p in PRIORITY_ORDER if p in volume] + [p for p in volume if p not in PRIORITY_ORDER]]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    bottom = None
    positions = range(len(volume.index))
    for priority in volume.columns:
        ax.bar(positions, volume[priority].to_numpy(), bottom=bottom, label=priority)
        bottom = volume[priority].to_numpy() if bottom is None else bottom + volume[priority].to_numpy()
    step = max(1, len(volume.index) // 16)
    ax.set_xticks(list(positions)[::step], [ts.strftime("%m-%d %H:%M") for ts in volume.index][::step])
    ax.set_ylabel("notifications")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    save(fig, "volume.png", f"Notifications per window, by priority (last {RECENT_WINDOWS} windows at most)")

    for column, name, title in (("event_type", "event_types.png", "Top event types (recent windows)"),
                                ("publisher_id", "publishers.png", "Top publishers (recent windows)")):
        top = detail.groupby(column, dropna=False)["count"].sum().sort_values().tail(TOP_N)
        fig, ax = plt.subplots(figsize=(9, 0.35 * len(top) + 1.2))
        ax.barh([str(k) for k in top.index], top.values, color="#4c72b0")
        ax.set_xlabel("notifications")
        save(fig, name, title)

    fig, ax = plt.subplots(figsize=(9, 3.2))
    x = windows["window_start"]
    ax.plot(x, windows["error_rate"] * 100, marker="o", label="error %")
    ax.plot(x, windows["critical_rate"] * 100, marker="o", label="critical %")
    ax.set_ylabel("% of notifications")
    ax.legend(fontsize=8)
    fig.autofmt_xdate()
    save(fig, "error_rates.png", "Error and critical rates per window")

    fig, ax = plt.subplots(figsize=(9, 3.2))
    ax.plot(x, windows["delay_p50"], marker="o", label="p50")
    ax.plot(x, windows["delay_p95"], marker="o", label="p95")
    ax.set_ylabel("seconds")
    ax.legend(fontsize=8)
    fig.autofmt_xdate()
    save(fig, "delay.png", "Delay from notification timestamp to broker timestamp")
    return charts


# -- HTML --------------------------------------------------------------------------------------

def _cell(table: str, key: str, metric: str, value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return (f'<td class="num" data-table="{html.escape(table)}" data-key="{html.escape(key)}" '
                f'data-metric="{metric}" data-value="">-</td>')
    if isinstance(value, float):
        text = f"{value:.2%}" if metric.endswith("rate") else f"{value:.3f}"
        raw = repr(float(value))
    else:
        text, raw = f"{int(value):,}", str(int(value))
    return (f'<td class="num" data-table="{html.escape(table)}" data-key="{html.escape(key)}" '
            f'data-metric="{metric}" data-value="{raw}">{text}</td>')


def _table(name: str, headers: Sequence[str], rows: Iterable[tuple[str, list[str], list]],
           metrics: Sequence[str]) -> str:
    """``rows`` are (key, label cells, metric values); metric cells get data attributes."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = []
    for key, labels, values in rows:
        cells = "".join(f"<td>{html.escape(str(v))}</td>" for v in labels)
        cells += "".join(_cell(name, key, m, v) for m, v in zip(metrics, values))
        body.append(f"<tr>{cells}</tr>")
    return (f'<table data-table="{html.escape(name)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _by(detail, column: str):
    grouped = detail.groupby(column, dropna=False)[["count", "error_count", "critical_count"]].sum()
    grouped = grouped.sort_values("count", ascending=False)
    for key, row in grouped.iterrows():
        label = "(none)" if key is None or key != key else str(key)
        yield label, [label], [int(row["count"]), int(row["error_count"]), int(row["critical_count"])]


def render_html(stats, archive, errors, charts: dict[str, str], title: str, sources: dict[str, str]) -> str:
    """The report page as a string."""
    detail = stats[stats["level"] == "detail"]
    windows = stats[stats["level"] == "window"].sort_values("window_start")
    total = int(windows["count"].sum()) if not windows.empty else 0
    errors_total = int(windows["error_count"].sum()) if not windows.empty else 0
    critical_total = int(windows["critical_count"].sum()) if not windows.empty else 0
    summary_rows = [
        ("notifications", "Notifications in the statistics", "count", total),
        ("error", "ERROR notifications", "count", errors_total),
        ("critical", "CRITICAL notifications", "count", critical_total),
        ("error_critical", "Error + critical rate", "rate",
         (errors_total + critical_total) / total if total else None),
        ("windows", "Windows", "count", len(windows)),
        ("archived", "Notifications in the archive", "count",
         int(archive["count"].sum()) if len(archive) else 0),
        ("undecodable", "Undecodable records", "count", len(errors)),
    ]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>", f"<style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">Generated {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC from '
        + ", ".join(f"{html.escape(k)}: <code>{html.escape(v)}</code>" for k, v in sources.items()) + "</p>",
        "<h2>Summary</h2>",
        '<table data-table="summary"><tbody>' + "".join(
            f"<tr><th>{html.escape(label)}</th>{_cell('summary', key, metric, value)}</tr>"
            for key, label, metric, value in summary_rows) + "</tbody></table>",
    ]
    for name, chart_title in charts.items():
        parts.append(f'<figure><img src="{html.escape(name)}" alt="{html.escape(chart_title)}">'
                     f"<figcaption>{html.escape(chart_title)}</figcaption></figure>")
    metrics = ["count", "error_count", "critical_count"]
    for column, heading in (("event_type", "Event types"), ("publisher_id", "Publishers"),
                            ("priority", "Priorities")):
        parts.append(f"<h2>{heading}</h2>")
        parts.append(_table(column, [heading.rstrip("s"), "notifications", "errors", "critical"],
                            _by(detail, column), metrics))
    parts.append(f"<h2>Windows</h2><p>The {min(len(windows), RECENT_WINDOWS)} most recent of "
                 f"{len(windows)}.</p>")
    windows = windows.tail(RECENT_WINDOWS)
    parts.append(_table(
        "window", ["start", "end", "notifications", "error rate", "critical rate", "delay p50 (s)",
                   "delay p95 (s)"],
        ((f"{r.window_start:%Y-%m-%d %H:%M:%S}", [f"{r.window_start:%Y-%m-%d %H:%M:%S}",
                                                  f"{r.window_end:%H:%M:%S}"],
          [int(r.count), float(r.error_rate), float(r.critical_rate), r.delay_p50, r.delay_p95])
         for r in windows.itertuples()),
        ["count", "error_rate", "critical_rate", "delay_p50", "delay_p95"]))
    parts.append("<h2>Archive</h2>")
    parts.append(_table("archive", ["date", "event type", "notifications"],
                        ((f"{r.date}/{r.event_type}", [r.date, r.event_type], [int(r.count)])
                         for r in archive.itertuples()), ["count"]))
    parts.append(f"<h2>Undecodable records ({len(errors):,})</h2>")
    if len(errors):
        sample = errors.head(ERROR_SAMPLE)
        rows = "".join(
            f"<tr><td>{html.escape(str(r.topic))}</td><td>{int(r.partition)}</td><td>{int(r.offset)}</td>"
            f"<td>{html.escape(str(r.kafka_timestamp))}</td><td>{html.escape(str(r.error))}</td></tr>"
            for r in sample.itertuples())
        parts.append('<table data-table="errors"><thead><tr><th>topic</th><th>partition</th>'
                     f"<th>offset</th><th>broker time</th><th>error</th></tr></thead><tbody>{rows}"
                     "</tbody></table>")
        if len(errors) > ERROR_SAMPLE:
            parts.append(f"<p>First {ERROR_SAMPLE} shown.</p>")
    else:
        parts.append("<p>None.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def build_report(output: str | os.PathLike, report_dir: str | os.PathLike | None = None,
                 title: str = "Notification bus report") -> Path:
    """Write ``index.html`` and its PNG charts; return the page's path.

    ``output`` is the pipeline's output folder (``archive/``, ``errors/``,
    ``stats/``); the report goes to ``output/report`` unless ``report_dir``
    says otherwise.
    """
    output = Path(output)
    out = Path(report_dir) if report_dir else output / "report"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()
    stats = load_stats(output / "stats")
    archive = archive_counts(output / "archive")
    errors = load_errors(output / "errors")
    charts = _charts(stats, out)
    page = render_html(stats, archive, errors, charts, title,
                       {"statistics": str(output / "stats"), "archive": str(output / "archive")})
    index = out / "index.html"
    tmp = out / ".index.html.tmp"
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(index)
    LOG.info("Report written to %s (%d charts)", index, len(charts))
    return index


_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f3f3f3}
figure{margin:1em 0}
figcaption{color:#555;font-size:.9em}
.meta{color:#666;font-size:.85em}
"""
