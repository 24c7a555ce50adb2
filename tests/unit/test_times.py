"""The one parser of times and durations (notify_transport.times), property-based."""
from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, strategies as st

from notify_transport.exceptions import ConfigurationError
from notify_transport.times import format_time, parse_duration, parse_time, to_millis

NOW = 1_714_564_800.0  # 2024-05-01T12:00:00Z
SECONDS_PER = {"ms": 0.001, "millisecond": 0.001, "s": 1, "sec": 1, "seconds": 1, "m": 60,
               "min": 60, "minutes": 60, "h": 3600, "hr": 3600, "hours": 3600, "d": 86400,
               "days": 86400, "w": 604800, "weeks": 604800}
parts = st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(sorted(SECONDS_PER))),
                 min_size=1, max_size=4)
spaces = st.sampled_from(["", " ", "  "])


@given(parts, spaces, spaces)
def test_a_duration_is_the_sum_of_its_parts(items: list, inside: str, between: str) -> None:
    text = between.join(f"{count}{inside}{unit}" for count, unit in items)
    if not inside and not between and len(items) > 1:
        text = "".join(f"{count}{unit} " for count, unit in items)  # "1m2s" vs "1ms": keep readable
    expected = sum(count * SECONDS_PER[unit] for count, unit in items)
    assert parse_duration(text) == pytest.approx(expected)
    assert parse_duration(f"INTERVAL {text}") == pytest.approx(expected)


@given(st.lists(st.tuples(st.integers(0, 500), st.sampled_from(sorted(SECONDS_PER))), min_size=1,
                max_size=4))  # at most 38 years: after 1970
def test_a_relative_time_is_that_duration_before_now(items: list) -> None:
    text = "".join(f"{count}{unit} " for count, unit in items).strip()
    assert parse_time(f"-{text}", now=NOW) == pytest.approx(NOW - parse_duration(text))
    assert parse_time(text, now=NOW) == parse_time(f"-{text}", now=NOW)


@given(st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(9999, 12, 30),
                    timezones=st.sampled_from([dt.timezone.utc, dt.timezone(dt.timedelta(hours=2)),
                                               dt.timezone(dt.timedelta(hours=-5, minutes=-30))])))
def test_iso_8601_times_read_back(stamp: dt.datetime) -> None:
    assert parse_time(stamp.isoformat(), now=NOW) == pytest.approx(stamp.timestamp(), abs=1e-6)
    naive = stamp.replace(tzinfo=None)  # no zone: UTC
    assert parse_time(naive.isoformat(sep=" ")) == pytest.approx(
        naive.replace(tzinfo=dt.timezone.utc).timestamp(), abs=1e-6)


@given(st.integers(0, 253402300799999))
def test_printed_times_and_epoch_seconds_read_back(millis: int) -> None:
    epoch = millis / 1000
    assert to_millis(parse_time(format_time(epoch))) == millis
    assert parse_time(repr(epoch)) == epoch


@given(st.text(max_size=30))
def test_any_text_is_a_time_or_a_clear_configuration_error(text: str) -> None:
    try:
        parse_time(text, now=NOW)
    except ConfigurationError as exc:
        assert "expected" in str(exc) or "outside 1970" in str(exc)  # says what is accepted
    try:
        assert parse_duration(text) >= 0
    except ConfigurationError:
        pass


@pytest.mark.parametrize("text", ["1 month", "1y", "10", "ten minutes", "1 hour and 2 minutes", "-1h"])
def test_durations_without_a_fixed_length_or_unit_are_refused(text: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_duration(text)
