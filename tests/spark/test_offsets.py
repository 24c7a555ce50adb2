"""Offset arithmetic of the notify_kafka source: ranges, resolution and the per-trigger cut on broker time."""
import pytest

from notify_transport.exceptions import ConfigurationError
from notify_transport.pipeline import offsets

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def test_json_round_trip_is_sorted_and_stringly_keyed():
    data = offsets.to_json({B0: 3, A1: 7, A0: 5})
    assert list(data) == ["a", "b"] and data["a"] == {"0": 5, "1": 7}
    assert offsets.from_json(data) == {A0: 5, A1: 7, B0: 3}


@pytest.mark.parametrize("bad", [{"a": 5}, {"a": {"x": 1}}, {"a": {"0": "z"}}])
def test_malformed_offsets_are_rejected(bad):
    with pytest.raises(ConfigurationError):
        offsets.from_json(bad)


def test_offsets_option_parsing():
    assert offsets.parse_offsets_option(None, "latest") == "latest"
    assert offsets.parse_offsets_option(" Earliest ", "latest") == "earliest"
    assert offsets.parse_offsets_option('{"a": {"0": 4, "1": -2}}', "latest") == {A0: 4, A1: -2}
    with pytest.raises(ConfigurationError, match="earliest"):
        offsets.parse_offsets_option("yesterday", "latest")


def test_resolve_json_with_earliest_latest_and_unlisted_partitions():
    earliest, latest = {A0: 2, A1: 0, B0: 1}, {A0: 10, A1: 20, B0: 30}
    spec = {A0: offsets.LATEST, A1: 7}
    assert offsets.resolve(spec, earliest, latest) == {A0: 10, A1: 7, B0: 1}
    assert offsets.resolve("earliest", earliest, latest) == earliest
    assert offsets.resolve("latest", earliest, latest) == latest
    assert offsets.resolve({A0: 3}, earliest, latest, unlisted="latest") == {A0: 3, A1: 20, B0: 30}


class BrokerTimes:
    """ListOffsets by time over made-up partitions: broker timestamps (ms) per partition, in offset order."""

    def __init__(self, times: dict) -> None:
        self.times = times
        self.requests = 0

    def __call__(self, millis: int) -> dict:
        self.requests += 1
        return {tp: next((i for i, t in enumerate(ts) if t >= millis), -1) for tp, ts in self.times.items()}

    def latest(self) -> dict:
        return {tp: len(ts) for tp, ts in self.times.items()}


def test_time_cut_without_cap_reads_everything():
    times = BrokerTimes({A0: [1, 2, 3], A1: [1, 5]})
    assert offsets.time_cut({A0: 0, A1: 1}, times.latest(), None, times) == {A0: 3, A1: 2}
    assert offsets.time_cut({A0: 0, A1: 1}, times.latest(), 1000, times) == {A0: 3, A1: 2}
    assert times.requests == 0


def test_time_cut_admits_records_in_broker_time_order_across_partitions():
    # A0 is far behind A1 in broker time: a lag-proportional split would read A1's late records first
    times = BrokerTimes({A0: [10, 11, 12, 13, 14, 15], A1: [1, 2, 30, 31], B0: [3, 40]})
    start = {A0: 0, A1: 0, B0: 0}
    batches = []
    while start != times.latest():
        end = offsets.time_cut(start, times.latest(), 4, times)
        batches.append(sorted(t for tp in end for t in times.times[tp][start[tp]:end[tp]]))
        start = end
    assert batches == [[1, 2, 3, 10], [11, 12, 13, 14], [15, 30, 31, 40]]
    # every batch holds only records older than every record of the batches after it
    assert all(max(a) < min(b) for a, b in zip(batches, batches[1:]))


def test_time_cut_takes_a_whole_millisecond_rather_than_split_a_tie():
    times = BrokerTimes({A0: [7, 7, 7, 8], A1: [7, 9]})
    assert offsets.time_cut({A0: 0, A1: 0}, times.latest(), 2, times) == {A0: 3, A1: 1}


def test_time_cut_stops_at_latest_and_requires_a_start_for_each_partition():
    times = BrokerTimes({A0: [1, 2, 3, 4], A1: [1, 2, 3]})
    # the partitions' latest (the availableNow target) bounds the cut even where later records exist
    assert offsets.time_cut({A0: 0, A1: 0}, {A0: 2, A1: 3}, 4, times) == {A0: 2, A1: 2}
    with pytest.raises(ValueError):
        offsets.time_cut({A0: 0}, {A0: 1, A1: 1}, 10, times)


def test_plan_ranges_new_and_recreated_partitions():
    ranges = offsets.plan({A0: 5, A1: 9, B0: 4}, {A0: 8, A1: 9, B0: 2, ("c", 0): 3})
    assert ranges == [offsets.OffsetRange("a", 0, 5, 8),
                      offsets.OffsetRange("b", 0, 0, 2, True),
                      offsets.OffsetRange("c", 0, 0, 3, True)]
    assert offsets.total(ranges) == 8


def test_cap_at_available_now_target():
    assert offsets.cap({A0: 10, A1: 4, B0: 1}, {A0: 7, A1: 9}) == {A0: 7, A1: 4}


def test_spread_balances_ranges_over_tasks_deterministically():
    ranges = [offsets.OffsetRange("a", p, 0, size) for p, size in enumerate([50, 30, 10, 10, 5])]
    groups = offsets.spread(ranges, 2)
    assert [sum(r.size for r in g) for g in groups] == [55, 50]
    assert sorted(r for g in groups for r in g) == sorted(ranges)
    assert offsets.spread(list(reversed(ranges)), 2) == groups
    assert offsets.spread(ranges[:1], 4) == [ranges[:1]]
