"""The pipeline's statistics arithmetic without Spark: durations, delay histograms, stats files, lateness."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from notify_transport.exceptions import ConfigurationError
from notify_transport.pipeline import delays, lateness
from notify_transport.times import human_duration, parse_duration
from notify_transport.pipeline.stats_files import effective_files

pd = pytest.importorskip("pandas", reason="the spark extra is not installed")


@pytest.mark.parametrize("text,seconds", [
    ("10 minutes", 600), ("1 minute", 60), ("1 hour 30 minutes", 5400), ("90s", 90), ("2 days", 172800),
    ("500 milliseconds", 0.5), ("INTERVAL 1 hour", 3600), ("1.5 hours", 5400),
])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "ten minutes", "10 fortnights", "10", "minutes", "1 hour and 2 minutes"])
def test_parse_duration_rejects_what_it_cannot_read(text):
    with pytest.raises(ConfigurationError):
        parse_duration(text)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["seconds", "minutes", "hours", "days"]))
def test_parse_duration_reads_any_count_of_any_unit(count, unit):
    factor = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400}[unit]
    assert parse_duration(f"{count} {unit}") == count * factor


@pytest.mark.parametrize("seconds,text", [
    (80000, "22.2 h"), (5.0123, "5.01 s"), (0.0042, "4.2 ms"), (125, "2.08 min"), (0, "0 s"),
    (-3, "-3 s"), (None, "-"), (float("nan"), "-"), (3 * 86400, "3 d"), (150 * 86400, "150 d"),
])
def test_human_duration(seconds, text):
    assert human_duration(seconds) == text


@settings(max_examples=80, deadline=None)
@given(st.floats(-1e8, 1e8, allow_nan=False))
def test_delay_buckets_are_ordered_and_within_two_percent(delay):
    bucket = delays.bucket_of(delay)
    if abs(delay) < delays.RESOLUTION:
        assert bucket == 0
        return
    magnitude = delays.RESOLUTION * delays.RATIO ** (abs(bucket) - 1)
    assert magnitude <= abs(delay) * (1 + 1e-9) and abs(delay) < magnitude * delays.RATIO * (1 + 1e-9)
    assert math.copysign(1, bucket) == math.copysign(1, delay)
    assert delays.bucket_of(delay * 1.05) * (1 if delay > 0 else -1) >= bucket * (1 if delay > 0 else -1)


def _histogram(groups):
    rows = [{"g": g, "delay_bucket": delays.bucket_of(d), "delay": d} for g, values in groups.items()
            for d in values]
    frame = pd.DataFrame(rows)
    return (frame.groupby(["g", "delay_bucket"]).delay.agg(["count", "min", "max"]).reset_index()
            .rename(columns={"min": "delay_min", "max": "delay_max"}))


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from("abc"), st.lists(st.floats(0, 1e6), min_size=1, max_size=60),
                       min_size=1))
def test_percentiles_from_buckets_are_within_two_percent_of_the_exact_ones(groups):
    result = delays.percentiles(_histogram(groups), ["g"])
    for group, values in groups.items():
        ordered = sorted(values)
        for q, name in ((0.5, "delay_p50"), (0.95, "delay_p95")):
            exact = ordered[int(math.floor(q * (len(ordered) - 1)))]
            upper = ordered[int(math.ceil(q * (len(ordered) - 1)))]
            value = result.loc[group, name]
            assert exact / delays.RATIO - delays.RESOLUTION <= value <= upper * delays.RATIO + delays.RESOLUTION
        assert result.loc[group, "delay_max"] == max(values)


def test_percentiles_of_one_value_are_that_value():
    result = delays.percentiles(_histogram({"a": [5.0123] * 7}), ["g"])
    assert result.loc["a", "delay_p50"] == result.loc["a", "delay_p95"] == 5.0123


def test_effective_files_take_the_newest_compaction_and_later_batches():
    names = [f"/s/batch-{n:012d}-part-0.parquet" for n in range(6)]
    assert effective_files(names) == sorted(names)
    compact = "/s/compact-000000000003-0a1b2c3d-part-0.parquet"
    assert effective_files([*names, compact]) == [names[4], names[5], compact]
    newer = "/s/compact-000000000004-ffffffff-part-0.parquet"
    assert effective_files([*names, compact, newer]) == [names[5], newer]
    assert effective_files(["/s/_SUCCESS", "/s/other.parquet"]) == []


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 30), max_size=20), st.lists(st.tuples(st.integers(0, 30), st.sampled_from(
    ["00000000", "deadbeef"])), max_size=4))
def test_effective_files_never_count_a_batch_twice(batches, compactions):
    names = [f"batch-{n:012d}-x.parquet" for n in set(batches)]
    names += [f"compact-{n:012d}-{t}-x.parquet" for n, t in set(compactions)]
    chosen = effective_files(names)
    compacts = [c for c in chosen if c.startswith("compact-")]
    assert len({c[:30] for c in compacts}) <= 1
    cutoff = int(compacts[0][8:20]) if compacts else -1
    assert all(int(c[6:18]) > cutoff for c in chosen if c.startswith("batch-"))
    assert {int(c[6:18]) for c in chosen if c.startswith("batch-")} == {n for n in batches if n > cutoff}


def test_progress_merge_keeps_the_newest_timestamp_per_partition():
    carried = {"t": {"0": 100, "1": 500}}
    assert lateness.merge(carried, {("t", 0): 50, ("t", 1): 900, ("u", 0): 7}) == {
        "t": {"0": 100, "1": 900}, "u": {"0": 7}}
    assert carried == {"t": {"0": 100, "1": 500}}


@pytest.mark.parametrize("carried,bounds,late", [
    ({}, {("t", 0): (0, 10)}, False),                     # within lateness of its own newest
    ({}, {("t", 0): (0, 11)}, True),
    ({"t": {"0": 100}}, {("t", 0): (95, 96)}, False),      # judged against its own partition...
    ({"t": {"0": 100}}, {("t", 0): (89, 96)}, True),
    ({"t": {"0": 100}, "u": {"0": 10_000}}, {("t", 0): (95, 96)}, False),  # ...not the others
])
def test_may_have_late_looks_at_each_partition_alone(carried, bounds, late):
    assert lateness.may_have_late(carried, bounds, 10) is late
