"""The results table (measures, ratios, PASS/FAIL against targets) and the JSON file.

A run collects, per measure, one result dict per implementation (``ours``,
``oslo``, ``raw``). :data:`MEASURES` says which number of that dict the table
shows and what target applies; :func:`evaluate` turns results into rows,
:func:`format_table` prints them and :func:`write_json` stores everything.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from bench.stats import ratio

IMPLS = ("ours", "oslo", "raw")


@dataclass(frozen=True)
class Target:
    """A goal for one measure.

    ``kind`` is ``vs_oslo_min`` (ours/oslo >= value), ``vs_oslo_max``
    (ours/oslo <= value), ``vs_raw_min`` (ours/raw >= value), ``vs_raw_max``
    (ours/raw <= value) or ``abs_max`` (ours <= value, in the measure's unit).
    """

    kind: str
    value: float

    def describe(self) -> str:
        return {"vs_oslo_min": f"ours/oslo >= {self.value:g}",
                "vs_oslo_max": f"ours/oslo <= {self.value:g}",
                "vs_raw_min": f"ours/raw >= {self.value:g}",
                "vs_raw_max": f"ours/raw <= {self.value:g}",
                "abs_max": f"ours <= {self.value:g}"}[self.kind]

    def check(self, ours: float | None, oslo: float | None, raw: float | None) -> bool | None:
        """True/False, or None when a needed number is missing."""
        if self.kind == "abs_max":
            return None if ours is None else ours <= self.value
        base = oslo if self.kind.startswith("vs_oslo") else raw
        r = ratio(ours, base)
        if r is None:
            return None
        return r >= self.value if self.kind.endswith("_min") else r <= self.value


@dataclass(frozen=True)
class Measure:
    """One row of the table: which result dict and which key of it."""

    key: str            # results[key][impl]
    label: str
    metric: str         # the number inside each impl's result dict
    unit: str
    targets: tuple[Target, ...] = ()
    higher_is_better: bool = True
    #: read the raw column from this number of raw's result instead of ``metric``
    raw_metric: str | None = None
    #: the implementations the row shows (the others' cells stay empty)
    impls: tuple[str, ...] = IMPLS


def _storm_rows(key: str, broker: str) -> tuple[Measure, ...]:
    """The broker restart storm's rows for one broker (the delivery goals as targets); ours only:
    the storm counts through notify-transport's delivery stats, which oslo.messaging lacks."""
    ours = ("ours",)
    return (
        Measure(key, f"Kafka restart storm, {broker} (ours only): sends failed", "failed_pct",
                "% of sent", (Target("abs_max", 1),), False, impls=ours),
        Measure(key, "  longest Notifier.info call", "longest_call", "s",
                (Target("abs_max", 10),), False, impls=ours),
        Measure(key, "  first delivery after the broker answers (worst restart)",
                "first_delivery_worst_s", "s", (), False, impls=ours),
        Measure(key, "  lost silently (not in the topic, not failed)", "lost_silently", "msgs",
                (Target("abs_max", 0),), False, impls=ours),
    )


def _cluster_rows(key: str, fault: str, exact: bool) -> tuple[Measure, ...]:
    """A three-node Apache Kafka fault under the storm's load (the delivery and readiness goals as targets):
    ``exact`` faults (one node at a time) must cost nothing at all."""
    ours = ("ours",)
    return (
        Measure(key, f"Apache Kafka x3, {fault} (ours only): sends failed", "failed_pct",
                "% of sent", (Target("abs_max", 0),) if exact else (), False, impls=ours),
        Measure(key, "  longest Notifier.info call", "longest_call", "s",
                (Target("abs_max", 2),), False, impls=ours),
        Measure(key, "  lost silently (not in the topic, not failed)", "lost_silently", "msgs",
                (Target("abs_max", 0),), False, impls=ours),
        Measure(key, "  at-least-once pool: not dispatched", "alo_missing", "msgs",
                (Target("abs_max", 0),), False, impls=ours),
        Measure(key, "  longest wait for a confirmation", "longest_confirm_gap_s", "s", (), False,
                impls=ours),
    )


def _readiness_rows(key: str, protocol: str) -> tuple[Measure, ...]:
    """The demo's four listeners in two pools, started one after another, under one group
    protocol (the readiness goals as targets)."""
    ours = ("ours",)
    return (
        Measure(key, f"Kafka listeners ready, {protocol} protocol (demo: 4 in 2 pools): slowest start()",
                "longest_s", "s", (Target("abs_max", 1),), False, impls=ours),
        Measure(key, "  all four started", "all_s", "s", (Target("abs_max", 2),), False, impls=ours),
    )


def _rabbit_cluster_rows(key: str, fault: str) -> tuple[Measure, ...]:
    """RPC on a three-node RabbitMQ cluster during a fault (the RPC availability goals as targets), ours and
    oslo.messaging's rabbit driver side by side."""
    both = ("ours", "oslo")
    return (
        Measure(key, f"RabbitMQ x3, {fault}: confirmed casts lost", "lost", "msgs",
                (Target("abs_max", 0),), False, impls=both),
        Measure(key, "  calls timed out", "timeouts", "calls", (), False, impls=both),
        Measure(key, "  longest call (timeout 5 s)", "longest_call", "s", (Target("abs_max", 6.5),), False,
                impls=both),
        Measure(key, "  first call answered after the kill", "first_answer_s", "s", (), False, impls=both),
    )


MEASURES: tuple[Measure, ...] = (
    Measure("kafka_send", "Kafka notify send (delivered)", "rate", "msg/s",
            (Target("vs_oslo_min", 10), Target("vs_raw_min", 0.5))),
    Measure("kafka_send", "  CPU time per notification sent", "cpu_us_per_msg", "us",
            (Target("vs_raw_max", 2),), False),
    Measure("kafka_listen_p1", "Kafka listener dispatch, 1 partition", "rate", "msg/s",
            (Target("vs_oslo_min", 10), Target("vs_raw_min", 0.5))),
    Measure("kafka_listen_p1", "  CPU time per notification dispatched", "cpu_us_per_msg", "us",
            (), False),
    Measure("kafka_listen_p1", "  raw = consume + orjson decode of each record", "rate", "msg/s",
            (), raw_metric="decode_rate", impls=("ours", "raw")),
    Measure("kafka_listen_p6", "Kafka listener dispatch, 6 partitions", "rate", "msg/s",
            (Target("vs_oslo_min", 10), Target("vs_raw_min", 0.5))),
    Measure("kafka_listen_p6", "  raw = consume + orjson decode of each record", "rate", "msg/s",
            (), raw_metric="decode_rate", impls=("ours", "raw")),
    *_readiness_rows("readiness_classic", "classic"),
    *_readiness_rows("readiness_consumer", "consumer (KIP-848)"),
    Measure("serve_w1", "serve dispatch, 1 worker, 4 partitions", "rate", "msg/s", impls=("ours",)),
    Measure("serve_w2", "serve dispatch, 2 workers, 4 partitions", "rate", "msg/s", impls=("ours",)),
    *_storm_rows("storm_apache-kafka", "Apache Kafka (one node)"),
    *_storm_rows("storm_noida", "noida-db"),
    *_storm_rows("storm_tansu", "Tansu"),
    *_cluster_rows("cluster_leader", "partition leader SIGKILLed", exact=True),
    *_cluster_rows("cluster_rolling", "rolling restart (SIGTERM each node)", exact=True),
    *_cluster_rows("cluster_down", "whole cluster down 10 s", exact=False),
    *_cluster_rows("cluster_two_down", "two nodes of three down 90 s", exact=True),
    *_rabbit_cluster_rows("rabbit_cluster_kill", "node of the connections SIGKILLed"),
    *_rabbit_cluster_rows("rabbit_cluster_rolling", "rolling restart (SIGTERM each node)")[:3],
    Measure("kafka_e2e", "Kafka e2e latency p50 @500/s", "p50_ms", "ms", (), False),
    Measure("kafka_e2e", "Kafka e2e latency p99 @500/s", "p99_ms", "ms",
            (Target("abs_max", 10),), False),
    Measure("rpc_call_seq", "RPC call latency p50 (sequential)", "p50_ms", "ms",
            (Target("vs_oslo_max", 0.6),), False),
    Measure("rpc_call_seq", "RPC call latency p99 (sequential)", "p99_ms", "ms", (), False),
    Measure("rpc_call_threads", "RPC call throughput, 8 threads", "rate", "call/s",
            (Target("vs_oslo_min", 3),)),
    Measure("rpc_cast", "RPC cast throughput (confirmed)", "rate", "msg/s",
            (Target("vs_oslo_min", 2),)),
    Measure("rabbit_notify_send", "Rabbit notify send (confirmed)", "rate", "msg/s"),
    Measure("rabbit_notify_recv", "Rabbit notify receive+dispatch", "rate", "msg/s"),
    # oslo.messaging's own API, same service code: ours = ntrabbit://, oslo = rabbit://
    Measure("ntrabbit_call_seq", "oslo API, ntrabbit:// vs rabbit://: call p50", "p50_ms", "ms",
            (Target("vs_oslo_max", 0.6),), False, impls=("ours", "oslo")),
    Measure("ntrabbit_call_threads", "  call throughput, 8 threads", "rate", "call/s",
            (Target("vs_oslo_min", 2.5),), impls=("ours", "oslo")),
    Measure("ntrabbit_cast", "  cast throughput (confirmed)", "rate", "msg/s",
            (Target("vs_oslo_min", 1.8),), impls=("ours", "oslo")),
    Measure("ntrabbit_ev_call_seq", "  eventlet-patched: call p50", "p50_ms", "ms", (), False,
            impls=("ours", "oslo")),
    Measure("ntrabbit_ev_call_threads", "  eventlet-patched: call throughput, 8 green threads", "rate",
            "call/s", impls=("ours", "oslo")),
    Measure("ntrabbit_ev_cast", "  eventlet-patched: cast throughput (confirmed)", "rate", "msg/s",
            impls=("ours", "oslo")),
)


@dataclass
class Row:
    measure: str
    label: str
    unit: str
    values: dict[str, float | None]
    vs_oslo: float | None
    vs_raw: float | None
    targets: list[str] = field(default_factory=list)
    verdict: str = "-"            # PASS, FAIL, N/A (a number missing) or - (no target)
    notes: list[str] = field(default_factory=list)


def _value(results: Mapping[str, Any], key: str, impl: str, metric: str) -> float | None:
    entry = results.get(key, {}).get(impl)
    if not isinstance(entry, Mapping) or entry.get("error"):
        return None
    value = entry.get(metric)
    return float(value) if isinstance(value, (int, float)) else None


def _notes(results: Mapping[str, Any], key: str) -> list[str]:
    notes = []
    for impl in IMPLS:
        entry = results.get(key, {}).get(impl)
        if isinstance(entry, Mapping):
            if entry.get("error"):
                notes.append(f"{impl}: {entry['error']}")
            elif entry.get("note"):
                notes.append(f"{impl}: {entry['note']}")
    return notes


def evaluate(results: Mapping[str, Any], measures: tuple[Measure, ...] = MEASURES) -> list[Row]:
    """One row per measure present in ``results``, with ratios and verdicts.

    A result's notes are attached to the first row of its key only.
    """
    rows = []
    noted: set[str] = set()
    for m in measures:
        if m.key not in results:
            continue
        values = {impl: (_value(results, m.key, impl, m.raw_metric or m.metric if impl == "raw"
                                else m.metric) if impl in m.impls else None) for impl in IMPLS}
        notes = [] if m.key in noted else _notes(results, m.key)
        noted.add(m.key)
        row = Row(m.key, m.label, m.unit, values, ratio(values["ours"], values["oslo"]),
                  ratio(values["ours"], values["raw"]),
                  [t.describe() for t in m.targets], notes=notes)
        if m.targets:
            checks = [t.check(values["ours"], values["oslo"], values["raw"]) for t in m.targets]
            if any(c is False for c in checks):
                row.verdict = "FAIL"
            elif any(c is None for c in checks):
                row.verdict = "N/A"
            else:
                row.verdict = "PASS"
        rows.append(row)
    return rows


def _fmt(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100 or digits == 0 and abs(value) >= 10:
        return f"{value:,.0f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3f}"


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else (f"{value:.1f}x" if value >= 10 else f"{value:.2f}x")


def format_table(rows: list[Row]) -> str:
    """A plain-text table, one line per measure, notes underneath."""
    header = ("measure", "unit", "ours", "oslo", "raw", "ours/oslo", "ours/raw", "target", "result")
    lines = [header]
    for r in rows:
        lines.append((r.label, r.unit, _fmt(r.values["ours"], 2), _fmt(r.values["oslo"], 2),
                      _fmt(r.values["raw"], 2), _fmt_ratio(r.vs_oslo), _fmt_ratio(r.vs_raw),
                      "; ".join(r.targets) or "-", r.verdict))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = []
    for n, line in enumerate(lines):
        cells = [c.ljust(widths[i]) if i in (0, 1, 7, 8) else c.rjust(widths[i])
                 for i, c in enumerate(line)]
        out.append("  ".join(cells).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    notes = [f"  {r.label}: {note}" for r in rows for note in r.notes]
    if notes:
        out.append("")
        out.append("notes:")
        out.extend(notes)
    return "\n".join(out)


def format_markdown(rows: list[Row]) -> str:
    """The same table in Markdown, for the README."""
    out = ["| measure | unit | ours | oslo | raw | ours/oslo | ours/raw | target | result |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        out.append(f"| {r.label} | {r.unit} | {_fmt(r.values['ours'], 2)} | "
                   f"{_fmt(r.values['oslo'], 2)} | {_fmt(r.values['raw'], 2)} | "
                   f"{_fmt_ratio(r.vs_oslo)} | {_fmt_ratio(r.vs_raw)} | "
                   f"{'; '.join(r.targets) or '-'} | {r.verdict} |")
    return "\n".join(out)


def summary_counts(rows: list[Row]) -> dict[str, int]:
    """How many rows passed, failed or could not be judged."""
    counts = {"PASS": 0, "FAIL": 0, "N/A": 0}
    for r in rows:
        if r.verdict in counts:
            counts[r.verdict] += 1
    return counts


def build_document(meta: Mapping[str, Any], results: Mapping[str, Any], rows: list[Row]) -> dict:
    """Everything a run found, as one JSON-serializable dict."""
    return {"meta": dict(meta), "results": dict(results), "rows": [asdict(r) for r in rows],
            "summary": summary_counts(rows)}


def write_json(path: str, document: Mapping[str, Any]) -> str:
    """Write ``document`` to ``path`` (parents created) atomically; return the path."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(document, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")
    os.replace(tmp, path)
    return path
