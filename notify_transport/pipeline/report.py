"""The HTML report: charts and tables from the pipeline's Parquet outputs, without Spark.

It reads the small statistics whole and, from the archive and the errors, only
partition columns and coordinates. The page is one file (charts are ``data:`` PNGs)
and covers one period, the statistics' whole; names from notifications are escaped by
Jinja2. Negative delays (a sender's clock ahead of the broker's) count as zero and are
counted apart. Charts carry their series (``data-series``) and table cells their exact
values (``data-value``), so a program can check that the page agrees with itself.
"""
from __future__ import annotations

import base64
import datetime
import io
import json
import logging
import os
from pathlib import Path
from typing import Any

from notify_transport.pipeline import delays
from notify_transport.times import human_duration
from notify_transport.pipeline.report_page import label, render_page
from notify_transport.pipeline.stats_files import load_partials
from notify_transport.drivers.naming import ERROR_PRIORITIES

LOG = logging.getLogger(__name__)

TOP_N = 15
ERROR_SAMPLE = 50
#: the buckets of the per-period chart and table, smallest first: the smallest that gives at most
#: MAX_BUCKETS bars (and is no shorter than a statistics window) is taken
BUCKETS = [(datetime.timedelta(minutes=1), "minute", "min"), (datetime.timedelta(minutes=5), "5 minutes", "5min"),
           (datetime.timedelta(minutes=15), "15 minutes", "15min"), (datetime.timedelta(hours=1), "hour", "h"),
           (datetime.timedelta(hours=6), "6 hours", "6h"), (datetime.timedelta(days=1), "day", "D")]
MAX_BUCKETS = 60
#: how a bucket is named in the per-period table's keys and in the charts' ``data-series``
PERIOD_KEY = "%Y-%m-%d %H:%M"
#: where ``pipeline run`` says what it read, beside the outputs
SOURCE_FILE = "source.json"
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

def period_bucket(first: Any, last: Any, window: Any = None) -> tuple[str, str]:
    """The bucket of the per-period chart and table for a period: (its name, its pandas frequency).

    The smallest of :data:`BUCKETS` that is no shorter than a statistics window
    and cuts the period into at most :data:`MAX_BUCKETS` pieces (a day when none does).
    """
    span = (last - first) if first is not None and last is not None else datetime.timedelta(0)
    for length, name, freq in BUCKETS:
        if window is not None and length < window:
            continue
        if span / length <= MAX_BUCKETS:
            return name, freq
    return BUCKETS[-1][1], BUCKETS[-1][2]


def without_skew(partials):
    """``partials`` with negative delays counted as zero, and how many notifications had one.

    A negative delay is a notification stamped after the broker received it:
    the sender's clock runs ahead of the broker's. It says nothing about how
    long delivery took, so it is counted and shown, and taken as zero.
    """
    if partials.empty or "delay_bucket" not in partials:
        return partials, 0
    negative = partials["delay_bucket"].notna() & (partials["delay_min"] < 0)
    skewed = int(partials.loc[negative & (partials["delay_max"] < 0), "count"].sum())
    fixed = partials.copy()
    below = fixed["delay_bucket"].notna() & (fixed["delay_bucket"] < 0)
    fixed.loc[below, "delay_bucket"] = 0
    fixed.loc[negative, "delay_min"] = 0.0
    fixed.loc[fixed["delay_max"] < 0, "delay_max"] = 0.0
    return fixed, skewed


class ReportData:
    """Every table and chart series of the page, over the whole period of the statistics."""

    def __init__(self, partials, archive, errors, source: dict[str, Any] | None = None) -> None:
        partials, self.skewed = without_skew(partials)
        self.partials = partials
        self.archive = archive
        self.errors = errors
        self.source = source or {}
        on_time = partials[~partials["late"].astype(bool)] if len(partials) else partials
        self.late = int(partials.loc[partials["late"].astype(bool), "count"].sum()) if len(partials) else 0
        self.windows = summarize(partials, ["window_start", "window_end"]).sort_values("window_start")
        starts = self.windows["window_start"]
        self.first = starts.min() if len(starts) else None
        self.last = self.windows["window_end"].max() if len(starts) else None
        window = (self.windows["window_end"] - self.windows["window_start"]).max() if len(starts) else None
        self.unit, floor = period_bucket(self.first, self.last, window)
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

def _series(values) -> list[float | None]:
    """A chart series as the page keeps it in ``data-series``: floats, None where there is no value."""
    return [None if v != v else float(v) for v in values]


def _charts(data: ReportData) -> list[dict]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    charts: list[dict] = []
    if data.by_priority_period is None or data.by_priority_period.empty:
        return charts

    def save(fig, name: str, title: str, series: dict[str, Any] | None = None) -> None:
        fig.tight_layout()
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=90)
        plt.close(fig)
        charts.append({"file": name, "title": title,
                       "src": "data:image/png;base64," + base64.b64encode(png.getvalue()).decode("ascii"),
                       "series": json.dumps(series or {}, sort_keys=True)})

    def period_label(ts) -> str:
        return ts.strftime("%Y-%m-%d" if data.unit == "day" else "%m-%d %H:%M")

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
    save(fig, "overview.png", f"Notifications per {data.unit} by priority, and the error rate",
         {"period": [ts.strftime(PERIOD_KEY) for ts in volume.index],
          "count": _series(volume.sum(axis=1).to_numpy())})

    delays_frame = data.periods.dropna(subset=["delay_p50"])
    if len(delays_frame):
        fig, ax = plt.subplots(figsize=(10, 3.4))
        index = {ts: i for i, ts in enumerate(volume.index)}
        x = [index.get(ts, 0) for ts in delays_frame["period"]]
        # the table's values as they are: no floor; below a millisecond the scale is linear (zero shows
        # as zero), above it logarithmic, so that a p95 of hours and a p50 of seconds both stay readable
        p50, p95 = delays_frame["delay_p50"].to_numpy(), delays_frame["delay_p95"].to_numpy()
        ax.plot(x, p95, marker="o", markersize=3, label="p95", color="#c44e52")
        ax.plot(x, p50, marker="o", markersize=3, label="p50", color="#4c72b0")
        ax.set_yscale("symlog", linthresh=HUMAN_TICKS[0])
        top = max(float(max(p95.max(), p50.max())), HUMAN_TICKS[0])
        ax.set_ylim(bottom=0, top=top * 1.5)
        ax.yaxis.set_major_locator(FixedLocator([0.0] + [t for t in HUMAN_TICKS if t <= top * 1.5]))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: human_duration(v)))
        ax.set_ylabel("delay (log scale above 1 ms)")
        ax.set_xticks(*ticks)
        ax.tick_params(axis="x", labelrotation=45, labelsize=7)
        ax.legend(fontsize=8)
        ax.grid(True, which="major", alpha=0.3)
        save(fig, "delays.png", f"Delay from notification to broker per {data.unit}: p50 and p95",
             {"period": [ts.strftime(PERIOD_KEY) for ts in delays_frame["period"]], "delay_p50": _series(p50),
              "delay_p95": _series(p95)})

    for frame, column, name, title in (
            (data.event_types, "event_type", "event_types.png", "Top event types, whole period"),
            (data.publishers, "publisher_id", "publishers.png", "Top publishers, whole period")):
        top = frame.head(TOP_N).iloc[::-1]
        fig, ax = plt.subplots(figsize=(10, 0.32 * len(top) + 1.3))
        ax.barh([label(k) for k in top[column]], top["count"], color="#4c72b0", label="all")
        ax.barh([label(k) for k in top[column]], top["error_count"] + top["critical_count"], color="#c44e52",
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


# -- page --------------------------------------------------------------------------------------

def archive_origins(path: str | os.PathLike) -> dict[str, list[str]]:
    """The vhosts and Kafka topics the archive's notifications came from (two columns, distinct)."""
    dataset = _dataset(Path(path), "hive")
    found: dict[str, list[str]] = {"vhosts": [], "topics": []}
    if dataset is None:
        return found
    for column, key in (("vhost", "vhosts"), ("topic", "topics")):
        if column in dataset.schema.names:
            values = dataset.to_table(columns=[column]).column(column).unique().to_pylist()
            found[key] = sorted(v for v in values if v)
    return found


def load_source(output: Path) -> dict[str, Any]:
    """What the runs read (``source.json``: cluster, subscription) and what the archive holds."""
    source: dict[str, Any] = {}
    try:
        source.update(json.loads((output / SOURCE_FILE).read_text(encoding="utf-8")))
    except FileNotFoundError:
        pass
    except ValueError:
        LOG.warning("%s is not JSON: the report does not name the cluster", output / SOURCE_FILE)
    source.update(archive_origins(output / "archive"))
    return source


def write_source(output: str | os.PathLike, cluster: str, subscription: dict[str, Any]) -> None:
    """Say, beside a local run's outputs, which cluster and topics it read (the report names them).

    ``cluster`` must be safe to show: a URL without its password.
    """
    path = Path(output) / SOURCE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{SOURCE_FILE}.tmp")
    tmp.write_text(json.dumps({"cluster": cluster, "subscription": subscription}, sort_keys=True, indent=1),
                   encoding="utf-8")
    tmp.replace(path)


def build_report(output: str | os.PathLike, report_dir: str | os.PathLike | None = None,
                 title: str = "Notification bus report") -> Path:
    """Write ``index.html``, one file with its charts inside; return the page's path.

    ``output`` is the pipeline's output folder (``archive/``, ``errors/``,
    ``stats/``); the report goes to ``output/report`` unless ``report_dir``
    says otherwise.
    """
    output = Path(output)
    out = Path(report_dir) if report_dir else output / "report"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):  # the chart files of earlier versions: the page holds its charts now
        old.unlink()
    data = ReportData(load_partials(output / "stats"), archive_counts(output / "archive"),
                      load_errors(output / "errors"), load_source(output))
    charts = _charts(data)
    page = render_page(data, charts, title, {"statistics": str(output / "stats"),
                                             "archive": str(output / "archive")}, ERROR_SAMPLE)
    index = out / "index.html"
    tmp = out / ".index.html.tmp"
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(index)
    LOG.info("Report written to %s (%d charts)", index, len(charts))
    return index
