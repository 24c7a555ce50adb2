"""Offset arithmetic of the notify_kafka source: ranges, resolution and the per-trigger limit."""
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


def test_limit_without_cap_reads_everything():
    start, latest = {A0: 0, A1: 5, B0: 0}, {A0: 50, A1: 35, B0: 10}
    assert offsets.limit(start, latest, None) == latest
    assert offsets.limit(start, latest, 1000) == latest


def test_limit_splits_in_proportion_to_lag_and_adds_up_exactly():
    start, latest = {A0: 0, A1: 0, B0: 0}, {A0: 50, A1: 30, B0: 10}
    end = offsets.limit(start, latest, 40)
    # shares 22.2, 13.3, 4.4 -> floors 22, 13, 4, the one left goes to the largest remainder
    assert end == {A0: 22, A1: 13, B0: 5}
    assert sum(end[tp] - start[tp] for tp in end) == 40


def test_limit_progresses_through_the_backlog_to_the_end():
    start, latest = {A0: 0, A1: 0, B0: 0}, {A0: 50, A1: 30, B0: 10}
    sizes = []
    while start != latest:
        end = offsets.limit(start, latest, 40)
        assert all(latest[tp] >= end[tp] >= start[tp] for tp in end)
        sizes.append(sum(end[tp] - start[tp] for tp in end))
        start = end
    assert sizes == [40, 40, 10]


def test_limit_smaller_than_partition_count_still_moves_and_is_deterministic():
    start, latest = {A0: 0, A1: 0, B0: 0}, {A0: 5, A1: 5, B0: 5}
    end = offsets.limit(start, latest, 1)
    assert end == {A0: 1, A1: 0, B0: 0}
    assert offsets.limit(start, latest, 1) == end


def test_limit_keeps_partitions_without_news_and_requires_a_start_for_each():
    assert offsets.limit({A0: 3, B0: 9}, {A0: 3}, 10) == {A0: 3, B0: 9}
    with pytest.raises(ValueError):
        offsets.limit({A0: 0}, {A0: 1, A1: 1}, 10)


def test_plan_ranges_new_and_recreated_partitions():
    ranges = offsets.plan({A0: 5, A1: 9, B0: 4}, {A0: 8, A1: 9, B0: 2, ("c", 0): 3})
    assert ranges == [offsets.OffsetRange("a", 0, 5, 8),
                      offsets.OffsetRange("b", 0, 0, 2, True),
                      offsets.OffsetRange("c", 0, 0, 3, True)]
    assert offsets.total(ranges) == 8


def test_cap_at_available_now_target():
    assert offsets.cap({A0: 10, A1: 4, B0: 1}, {A0: 7, A1: 9}) == {A0: 7, A1: 4}
