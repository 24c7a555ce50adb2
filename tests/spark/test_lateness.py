"""Per-record lateness in Spark matches a plain reference, whatever the batch split."""
from __future__ import annotations

import datetime

from notify_transport.pipeline import lateness

EPOCH = datetime.datetime(2026, 1, 1)


def _reference(rows, lateness_s):
    newest, late = {}, set()
    for topic, partition, offset, seconds in sorted(rows):
        key = (topic, partition)
        if key in newest and seconds < newest[key] - lateness_s:
            late.add((topic, partition, offset))
        newest[key] = max(seconds, newest.get(key, seconds))
    return late


def _flag(spark, rows, carried, lateness_s):
    frame = spark.createDataFrame(
        [(t, p, o, EPOCH + datetime.timedelta(seconds=s)) for t, p, o, s in rows],
        "topic string, partition int, offset long, timestamp timestamp")
    flagged = lateness.flag_late(frame, carried, lateness_s * 1_000_000)
    return {(r.topic, r.partition, r.offset) for r in flagged.filter("late").collect()}


def test_lateness_is_judged_per_partition_and_does_not_depend_on_the_split(spark):
    rows = [("a", 0, o, s) for o, s in enumerate([0, 100, 50, 200, 189, 150, 300])]
    rows += [("a", 1, o, s) for o, s in enumerate([10, 5, 20, 2])]
    rows += [("b", 0, o, s) for o, s in enumerate([1000, 1001, 900])]
    expected = _reference(rows, 15)
    assert expected == {("a", 0, 2), ("a", 0, 5), ("a", 1, 3), ("b", 0, 2)}
    assert _flag(spark, rows, {}, 15) == expected
    # the same records in two batches: the first batch's progress carried into the second
    first = [r for r in rows if r[2] < 3]
    second = [r for r in rows if r[2] >= 3]
    carried = lateness.merge({}, {(t, p): int(max(s for t2, p2, _, s in first if (t2, p2) == (t, p)) * 1e6
                                                + (EPOCH - datetime.datetime(1970, 1, 1)).total_seconds() * 1e6)
                                   for t, p, _, _ in first})
    assert _flag(spark, first, {}, 15) | _flag(spark, second, carried, 15) == expected
