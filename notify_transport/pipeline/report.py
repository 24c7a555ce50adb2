"""The HTML report: charts (PNG) and tables from the pipeline's Parquet outputs.

Built with pyarrow, pandas, matplotlib and Jinja2 (autoescaping: every name
that came from a notification is escaped), so it runs without Spark and
opens in a browser without a server. It reads the statistics (partial
counts, small) whole; from the archive only the partition columns and from
the errors only their coordinates, never the notifications themselves.

Everything on the page covers the same period, the whole of the
statistics: the overview per hour (or per day for long periods), the top
event types and publishers, the delays (p50 and p95, in human units) and the
archive per date. The per-window table is collapsed.

Every number in a table cell carries ``data-table``, ``data-key`` and
``data-metric`` attributes, with the exact value in ``data-value``, so the
page can be checked by a program as well as read.
"""
from __future__ import annotations

import datetime
import logging
import os
from pathlib import Path

from notify_transport.pipeline import delays
from notify_transport.times import human_duration
from notify_transport.pipeline.report_page import render_page
from notify_transport.pipeline.stats_files import load_partials
from notify_transport.drivers.naming import ERROR_PRIORITIES

LOG = logging.getLogger(__name__)

TOP_N = 15
ERROR_SAMPLE = 50
#: periods longer than this are shown per day instead of per hour
HOURLY_UP_TO = datetime.timedelta(days=7)
#: delay axis ticks, in seconds: units people think in
HUMAN_TICKS = [0.001, 0.01, 0.1, 1, 10, 60, 600, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400]
PRIORITY_ORDER = ["AUDIT", "DEBUG", "INFO", "SAMPLE", "WARN", "WARNING", "ERROR", "CRITICAL"]
PRIORITY_COLORS = {"AUDIT": "#8c8c8c", "DEBUG": "#b0b0b0", "INFO": "#4c72b0", "SAMPLE": "#64b5cd",
                   "WARN": "#dd8452", "WARNING": "#dd8452", "ERROR": "#c44e52", "CRITICAL": "#8b0000"}
STATS_COLUMNS = ["level", "window_start", "window_end", "event_type", "publisher_id", "priority", "count",
                 "error_count", "critical_count", "error_rate", "critical_rate", "delay_p50", "delay_p95",
                 "delay_max"]


# -- loading -----------------------------------------------------------------------------------

def _dataset(path: Path, partitioning: str | None = None):
    import pyarrow.dataset as ds

    if not path.is_dir() or not any(path.rglob("*.parquet")):
        return None
    return ds.dataset(str(path), format="parquet", partitioning=partitioning)


def _with_counts(frame):
    # messages spell priorities in upper case, topics in lower case
    frame["error_count"] = frame["count"].where(frame["priority"] == ERROR_PRIORITIES[0].upper(), 0)
    frame["critical_count"] = frame["count"].where(frame["priority"] == ERROR_PRIORITIES[1].upper(), 0)
    return frame


def summarize(partials, keys: list[str]):
    """Counts, error and critical rates and delay percentiles of on-time notifications per ``keys``."""
    import pandas as pd

    rows = _with_counts(partials[~partials["late"].astype(bool)].copy())
    if rows.empty:
        return pd.DataFrame(columns=[*keys, "count", "error_count", "critical_count", "error_rate",
                                     "critical_rate", "delay_p50", "delay_p95", "delay_max"])
    sums = rows.groupby(keys, dropna=False)[["count", "error_count", "critical_count"]].sum()
    sums["error_rate"] = sums["error_count"] / sums["count"]
    sums["critical_rate"] = sums["critical_count"] / sums["count"]
    out = sums.join(delays.percentiles(rows, keys))
    return out.reset_index()


def load_stats(path: str | os.PathLike):
    """The statistics per window: ``level`` ``window`` (all groups) and ``detail`` (per event type,
    publisher and priority), with counts, rates and delay percentiles of on-time notifications."""
    import pandas as pd

    partials = load_partials(path)
    if partials.empty:
        return pd.DataFrame(columns=STATS_COLUMNS)
    detail = summarize(partials, ["window_start", "window_end", "event_type", "publisher_id", "priority"])
    windows = summarize(partials, ["window_start", "window_end"])
    detail["level"], windows["level"] = "detail", "window"
    frame = pd.concat([detail, windows], ignore_index=True)
    return frame[STATS_COLUMNS].sort_values(["window_start", "level"], ignore_index=True)


def archive_counts(path: str | os.PathLike):
    """Archived notifications per date and event type, from the partition columns only."""
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


# -- the report's numbers ----------------------------------------------------------------------

class ReportData:
    """Every table and chart series of the page, over the whole period of the statistics."""

    def __init__(self, partials, archive, errors) -> None:
        self.partials = partials
        self.archive = archive
        self.errors = errors
        on_time = partials[~partials["late"].astype(bool)] if len(partials) else partials
        self.late = int(partials.loc[partials["late"].astype(bool), "count"].sum()) if len(partials) else 0
        self.windows = summarize(partials, ["window_start", "window_end"]).sort_values("window_start")
        starts = self.windows["window_start"]
        self.first = starts.min() if len(starts) else None
        self.last = self.windows["window_end"].max() if len(starts) else None
        self.unit = "hour" if self.first is None or self.last - self.first <= HOURLY_UP_TO else "day"
        floor = "h" if self.unit == "hour" else "D"
        periods = on_time.assign(period=on_time["window_start"].dt.floor(floor) if len(on_time) else [])
        self.periods = summarize(periods, ["period"]).sort_values("period")
        self.by_priority_period = (periods.pivot_table(index="period", columns="priority", values="count",
                                                       aggfunc="sum", fill_value=0) if len(periods) else None)
        self.event_types = summarize(partials, ["event_type"]).sort_values("count", ascending=False)
        self.publishers = summarize(partials, ["publisher_id"]).sort_values("count", ascending=False)
        self.priorities = summarize(partials, ["priority"])
        self.priorities = self.priorities.assign(
            order=self.priorities["priority"].map(lambda p: PRIORITY_ORDER.index(p) if p in PRIORITY_ORDER else 99)
        ).sort_values(["order", "priority"]).drop(columns="order")
        overall = summarize(partials.assign(all="all"), ["all"]) if len(partials) else None
        self.overall = overall.iloc[0] if overall is not None and len(overall) else None
        self.archive_dates = (archive.groupby("date")["count"].sum().sort_index()
                              if len(archive) else None)

    @property
    def total(self) -> int:
        return int(self.windows["count"].sum()) if len(self.windows) else 0


# -- charts ------------------------------------------------------------------------------------

def _charts(data: ReportData, out: Path) -> list[dict]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    charts: list[dict] = []
    if data.by_priority_period is None or data.by_priority_period.empty:
        return charts

    def save(fig, name: str, title: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=90)
        plt.close(fig)
        charts.append({"file": name, "title": title})

    def period_label(ts) -> str:
        return ts.strftime("%m-%d %H:%M" if data.unit == "hour" else "%Y-%m-%d")

    volume = data.by_priority_period
    volume = volume[[p for p in PRIORITY_ORDER if p in volume] + [p for p in volume if p not in PRIORITY_ORDER]]
    positions = list(range(len(volume.index)))
    step = max(1, len(positions) // 24)
    ticks = positions[::step], [period_label(ts) for ts in volume.index][::step]
    fig, ax = plt.subplots(figsize=(10, 3.8))
    bottom = None
    for priority in volume.columns:
        values = volume[priority].to_numpy()
        ax.bar(positions, values, bottom=bottom, label=priority, width=0.9,
               color=PRIORITY_COLORS.get(priority))
        bottom = values if bottom is None else bottom + values
    ax.set_ylabel(f"notifications per {data.unit}")
    ax.set_xticks(*ticks)
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    rates = data.periods.set_index("period").reindex(volume.index)
    twin = ax.twinx()
    twin.plot(positions, (rates["error_rate"] + rates["critical_rate"]).to_numpy() * 100, color="black",
              marker=".", linewidth=1.2, label="error + critical %")
    twin.set_ylabel("error + critical %")
    twin.set_ylim(bottom=0)
    handles, labels = ax.get_legend_handles_labels()
    handles2, labels2 = twin.get_legend_handles_labels()
    ax.legend(handles + handles2, labels + labels2, fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.0),
              ncol=len(labels) + 1, frameon=False)
    save(fig, "overview.png", f"Notifications per {data.unit} by priority, and the error rate")

    delays_frame = data.periods.dropna(subset=["delay_p50"])
    if len(delays_frame):
        fig, ax = plt.subplots(figsize=(10, 3.4))
        index = {ts: i for i, ts in enumerate(volume.index)}
        x = [index.get(ts, 0) for ts in delays_frame["period"]]
        ax.plot(x, delays_frame["delay_p95"].clip(lower=0.001), marker="o", markersize=3, label="p95",
                color="#c44e52")
        ax.plot(x, delays_frame["delay_p50"].clip(lower=0.001), marker="o", markersize=3, label="p50",
                color="#4c72b0")
        ax.set_yscale("log")  # p95 may be hours while p50 is seconds: both stay readable
        ax.yaxis.set_major_locator(FixedLocator(HUMAN_TICKS))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: human_duration(v)))
        ax.set_ylabel("delay (log scale)")
        ax.set_xticks(*ticks)
        ax.tick_params(axis="x", labelrotation=45, labelsize=7)
        ax.legend(fontsize=8)
        ax.grid(True, which="major", alpha=0.3)
        save(fig, "delays.png", f"Delay from notification to broker per {data.unit}: p50 and p95")

    for frame, column, name, title in (
            (data.event_types, "event_type", "event_types.png", "Top event types, whole period"),
            (data.publishers, "publisher_id", "publishers.png", "Top publishers, whole period")):
        top = frame.head(TOP_N).iloc[::-1]
        fig, ax = plt.subplots(figsize=(10, 0.32 * len(top) + 1.3))
        ax.barh([_label(k) for k in top[column]], top["count"], color="#4c72b0", label="all")
        ax.barh([_label(k) for k in top[column]], top["error_count"] + top["critical_count"], color="#c44e52",
                label="error + critical")
        ax.set_xlabel("notifications")
        ax.legend(fontsize=8, loc="lower right")
        save(fig, name, title + (f" (top {TOP_N} of {len(frame)})" if len(frame) > TOP_N else ""))

    if data.archive_dates is not None and len(data.archive_dates):
        fig, ax = plt.subplots(figsize=(10, 3.0))
        dates = list(data.archive_dates.index)
        ax.bar(range(len(dates)), data.archive_dates.to_numpy(), color="#55a868")
        date_step = max(1, len(dates) // 24)
        ax.set_xticks(list(range(len(dates)))[::date_step], dates[::date_step])
        ax.tick_params(axis="x", labelrotation=45, labelsize=7)
        ax.set_ylabel("notifications")
        save(fig, "archive.png", "Archived notifications per date")
    return charts


def _label(value) -> str:
    return "(none)" if value is None or value != value else str(value)


# -- page --------------------------------------------------------------------------------------

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
    data = ReportData(load_partials(output / "stats"), archive_counts(output / "archive"),
                      load_errors(output / "errors"))
    charts = _charts(data, out)
    page = render_page(data, charts, title, {"statistics": str(output / "stats"),
                                             "archive": str(output / "archive")}, ERROR_SAMPLE)
    index = out / "index.html"
    tmp = out / ".index.html.tmp"
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(index)
    LOG.info("Report written to %s (%d charts)", index, len(charts))
    return index
