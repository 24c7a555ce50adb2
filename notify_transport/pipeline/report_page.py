"""The report's HTML, from a Jinja2 template with autoescaping.

Event types, publishers, topics and error texts come from the notifications
themselves; autoescaping makes each of them text on the page, never markup.
The page is static and one file: its PNG charts are inside it as ``data:``
URIs, each ``<figure>`` carries the series it draws (``data-series``), and
one small script marks a chart that does not load.
"""
from __future__ import annotations

import datetime
import math
from typing import Any, Mapping, NamedTuple

import jinja2

from notify_transport.times import human_duration


class Formatted(NamedTuple):
    text: str
    raw: str


def fmt(value: Any, kind: str = "count") -> Formatted:
    """A number as shown (``1,234``, ``2.50%``, ``22.2 h``) and as kept in ``data-value``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Formatted("-", "")
    try:
        if value != value:  # pandas NA and NaT
            return Formatted("-", "")
    except (TypeError, ValueError):
        return Formatted("-", "")
    if kind == "rate":
        return Formatted(f"{float(value):.2%}", repr(float(value)))
    if kind == "delay":
        return Formatted(human_duration(float(value)), repr(float(value)))
    return Formatted(f"{int(value):,}", str(int(value)))


def when(value: Any, pattern: str = "%Y-%m-%d %H:%M") -> str:
    if value is None or value != value:
        return "-"
    return value.strftime(pattern)


def label(value: Any) -> str:
    """A table's or chart's name for a value; a missing one (None, NaN: an empty partition) is "(none)"."""
    return "(none)" if value is None or value != value else str(value)


TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1150px;padding:0 1em;color:#222}
h1{margin-bottom:.2em} h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0 1em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f3f3f3}
figure{margin:1em 0} figure img{max-width:100%} figcaption{color:#555;font-size:.9em}
figure.missing img{display:none} figure.missing figcaption::after{content:" (chart file missing)";color:#c44e52}
.meta{color:#666;font-size:.85em}
.cards{display:flex;flex-wrap:wrap;gap:.8em;margin:1em 0}
.card{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;min-width:9em}
.card .big{font-size:1.5em;font-weight:600} .card .small{color:#666;font-size:.85em}
.bad{color:#c44e52}
details{margin:.5em 0 1em} summary{cursor:pointer;color:#335;font-weight:500}
.cols{display:flex;flex-wrap:wrap;gap:2em}
</style></head><body>
{%- macro num(table, key, metric, value, kind="count") -%}
{%- set f = fmt(value, kind) -%}
<td class="num" data-table="{{ table }}" data-key="{{ key }}" data-metric="{{ metric }}"
 data-value="{{ f.raw }}">{{ f.text }}</td>
{%- endmacro -%}
{%- macro codes(values) -%}
{% for v in values %}<code>{{ v }}</code>{% if not loop.last %}, {% endif %}{% endfor %}
{%- endmacro -%}
{%- macro figure(chart) -%}
<figure data-chart="{{ chart.file }}" data-series="{{ chart.series }}"><img src="{{ chart.src }}"
 alt="{{ chart.title }}"><figcaption>{{ chart.title }}</figcaption></figure>
{%- endmacro -%}
{%- macro group_table(name, heading, frame, column) -%}
<table data-table="{{ name }}"><thead><tr><th>{{ heading }}</th><th>notifications</th><th>errors</th>
<th>critical</th><th>error + critical</th><th>delay p50</th><th>delay p95</th></tr></thead><tbody>
{%- for r in frame.itertuples() %}{% set key = label(r[column_index(frame, column)]) %}
<tr><td>{{ key }}</td>{{ num(name, key, "count", r.count) }}{{ num(name, key, "error_count", r.error_count) }}
{{- num(name, key, "critical_count", r.critical_count) }}
{{- num(name, key, "error_critical_rate", r.error_rate + r.critical_rate, "rate") }}
{{- num(name, key, "delay_p50", r.delay_p50, "delay") }}{{ num(name, key, "delay_p95", r.delay_p95, "delay") }}</tr>
{%- endfor %}
</tbody></table>
{%- endmacro %}
<h1>{{ title }}</h1>
<p class="meta">Generated {{ generated }} UTC from
{% for name, path in sources.items() %}{{ name }}: <code>{{ path }}</code>
{%- if not loop.last %}, {% endif %}{% endfor %}.
{% if data.source.get("cluster") or data.source.get("vhosts") or data.source.get("topics") %}<br>Source:
{%- if data.source.get("cluster") %} cluster <code>{{ data.source.cluster }}</code>;{% endif %}
{%- if data.source.get("vhosts") %} vhost(s) {{ codes(data.source.vhosts) }};{% endif %}
{%- if data.source.get("topics") %} topic(s) {{ codes(data.source.topics) }}{% endif %}.{% endif %}
{% if data.first is not none %}<br>Period: <strong>{{ when(data.first) }}</strong>
to <strong>{{ when(data.last) }}</strong> UTC
({{ data.windows|length }} windows); every chart and table covers all of it.{% endif %}</p>

<div class="cards">
<div class="card"><div class="big">{{ fmt(data.total).text }}</div><div class="small">notifications</div></div>
<div class="card"><div class="big{% if rate > 0 %} bad{% endif %}">{{ fmt(rate, "rate").text }}</div>
<div class="small">error + critical</div></div>
<div class="card"><div class="big">{{ fmt(overall_p50, "delay").text }}</div><div class="small">delay p50</div></div>
<div class="card"><div class="big">{{ fmt(overall_p95, "delay").text }}</div><div class="small">delay p95</div></div>
<div class="card"><div class="big">{{ fmt(data.late).text }}</div><div class="small">late, not in windows</div></div>
<div class="card"><div class="big{% if data.errors|length %} bad{% endif %}">{{ fmt(data.errors|length).text }}</div>
<div class="small">undecodable records</div></div>
</div>

<h2>Summary</h2>
<table data-table="summary"><tbody>
{%- for key, text, value, kind in summary %}
<tr><th>{{ text }}</th>{{ num("summary", key, kind if kind != "delay" else "delay", value, kind) }}</tr>
{%- endfor %}
</tbody></table>

{% for chart in charts if chart.file in ("overview.png", "delays.png") %}
{{ figure(chart) }}
{% endfor %}
<details><summary>Per {{ data.unit }} ({{ data.periods|length }} rows)</summary>
<table data-table="period"><thead><tr><th>{{ data.unit }} (UTC)</th><th>notifications</th><th>error + critical</th>
<th>delay p50</th><th>delay p95</th></tr></thead><tbody>
{%- for r in data.periods.itertuples() %}{% set key = when(r.period) %}
<tr><td>{{ key }}</td>{{ num("period", key, "count", r.count) }}
{{- num("period", key, "error_critical_rate", r.error_rate + r.critical_rate, "rate") }}
{{- num("period", key, "delay_p50", r.delay_p50, "delay") }}
{{- num("period", key, "delay_p95", r.delay_p95, "delay") }}</tr>
{%- endfor %}
</tbody></table></details>

<h2>Event types</h2>
{% for chart in charts if chart.file == "event_types.png" %}
{{ figure(chart) }}
{% endfor %}
{{ group_table("event_type", "event type", data.event_types, "event_type") }}

<h2>Publishers</h2>
{% for chart in charts if chart.file == "publishers.png" %}
{{ figure(chart) }}
{% endfor %}
{{ group_table("publisher_id", "publisher", data.publishers, "publisher_id") }}

<h2>Priorities</h2>
{{ group_table("priority", "priority", data.priorities, "priority") }}

<h2>Windows</h2>
<details><summary>All {{ data.windows|length }} windows</summary>
<table data-table="window"><thead><tr><th>start (UTC)</th><th>end</th><th>notifications</th><th>error rate</th>
<th>critical rate</th><th>delay p50</th><th>delay p95</th></tr></thead><tbody>
{%- for r in data.windows.itertuples() %}{% set key = when(r.window_start, "%Y-%m-%d %H:%M:%S") %}
<tr><td>{{ key }}</td><td>{{ when(r.window_end, "%H:%M:%S") }}</td>{{ num("window", key, "count", r.count) }}
{{- num("window", key, "error_rate", r.error_rate, "rate") }}
{{- num("window", key, "critical_rate", r.critical_rate, "rate") }}
{{- num("window", key, "delay_p50", r.delay_p50, "delay") }}
{{- num("window", key, "delay_p95", r.delay_p95, "delay") }}</tr>
{%- endfor %}
</tbody></table></details>

<h2>Archive</h2>
{% for chart in charts if chart.file == "archive.png" %}
{{ figure(chart) }}
{% endfor %}
<table data-table="archive_date"><thead><tr><th>date</th><th>notifications</th></tr></thead><tbody>
{%- if data.archive_dates is not none %}{% for date, count in data.archive_dates.items() %}
<tr><td>{{ date }}</td>{{ num("archive_date", date, "count", count) }}</tr>
{%- endfor %}{% endif %}
</tbody></table>
<details><summary>Per date and event type ({{ data.archive|length }} partitions)</summary>
<table data-table="archive"><thead><tr><th>date</th><th>event type</th><th>notifications</th></tr></thead><tbody>
{%- for r in data.archive.itertuples() %}
<tr><td>{{ r.date }}</td><td>{{ label(r.event_type) }}</td>
{{- num("archive", r.date ~ "/" ~ label(r.event_type), "count", r.count) }}</tr>
{%- endfor %}
</tbody></table></details>

<h2>Undecodable records ({{ fmt(data.errors|length).text }})</h2>
{% if data.errors|length %}
<table data-table="errors"><thead><tr><th>topic</th><th>partition</th><th>offset</th><th>broker time</th>
<th>error</th></tr></thead><tbody>
{%- for r in data.errors.head(error_sample).itertuples() %}
<tr><td>{{ r.topic }}</td><td>{{ r.partition }}</td><td>{{ r.offset }}</td><td>{{ r.kafka_timestamp }}</td>
<td>{{ r.error }}</td></tr>
{%- endfor %}
</tbody></table>
{% if data.errors|length > error_sample %}<p>First {{ error_sample }} shown.</p>{% endif %}
{% else %}<p>None.</p>{% endif %}
<script>
for (const img of document.querySelectorAll("figure img")) {
  const mark = () => { img.dataset.loaded = img.naturalWidth > 0 ? "yes" : "no";
                       if (img.naturalWidth === 0) img.parentElement.classList.add("missing"); };
  if (img.complete) mark(); else { img.addEventListener("load", mark); img.addEventListener("error", mark); }
}
</script>
</body></html>
"""

_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=False)
_ENV.globals.update(fmt=fmt, when=when, label=label,
                    column_index=lambda frame, column: list(frame.columns).index(column) + 1)
_TEMPLATE = _ENV.from_string(TEMPLATE)


def render_page(data, charts: list[dict], title: str, sources: Mapping[str, str], error_sample: int) -> str:
    """The report page for :class:`~notify_transport.pipeline.report.ReportData` and its charts."""
    total = data.total
    errors = int(data.windows["error_count"].sum()) if total else 0
    critical = int(data.windows["critical_count"].sum()) if total else 0
    overall = data.overall
    p50 = None if overall is None else overall["delay_p50"]
    p95 = None if overall is None else overall["delay_p95"]
    rate = (errors + critical) / total if total else None
    summary = [
        ("notifications", "Notifications in the statistics", total, "count"),
        ("error", "ERROR notifications", errors, "count"),
        ("critical", "CRITICAL notifications", critical, "count"),
        ("error_critical", "Error + critical rate", rate, "rate"),
        ("delay_p50", "Delay p50 (notification to broker)", p50, "delay"),
        ("delay_p95", "Delay p95", p95, "delay"),
        ("late", "Late notifications (archived, not in the windows)", data.late, "count"),
        ("skewed", "Stamped after their broker time (clock skew; counted as no delay)", data.skewed, "count"),
        ("windows", "Windows", len(data.windows), "count"),
        ("archived", "Notifications in the archive", int(data.archive["count"].sum()) if len(data.archive) else 0,
         "count"),
        ("undecodable", "Undecodable records", len(data.errors), "count"),
    ]
    return _TEMPLATE.render(
        data=data, charts=charts, title=title, sources=dict(sources), summary=summary, rate=rate or 0,
        overall_p50=p50, overall_p95=p95, error_sample=error_sample,
        generated=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"))
