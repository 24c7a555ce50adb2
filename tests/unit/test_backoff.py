"""The one retry/backoff policy (notify_transport.backoff)."""
from __future__ import annotations

import threading

import pytest
from hypothesis import given, strategies as st

from notify_transport.backoff import Backoff

delays = st.floats(min_value=0, max_value=100, allow_nan=False)
policies = st.builds(Backoff, initial=delays, factor=st.floats(min_value=1, max_value=10),
                     step=delays, maximum=delays)


@given(policies, st.integers(min_value=1, max_value=10_000))
def test_delays_never_shrink_and_stay_under_the_cap(policy: Backoff, failures: int) -> None:
    assert 0 <= policy.delay(failures) <= policy.delay(failures + 1) <= policy.maximum


@given(policies, st.integers(max_value=0))
def test_no_failure_means_no_wait(policy: Backoff, failures: int) -> None:
    assert policy.delay(failures) == 0


@given(policies, st.floats(min_value=0.001, max_value=10), st.integers(min_value=1, max_value=100))
def test_jitter_only_adds_up_to_its_bound(policy: Backoff, jitter: float, failures: int) -> None:
    jittered = Backoff(policy.initial, policy.factor, policy.step, policy.maximum, jitter)
    assert policy.delay(failures) <= jittered.delay(failures) <= policy.delay(failures) + jitter


def test_exponential_and_linear_spacing() -> None:
    assert [Backoff(0.1, 2, maximum=1).delay(n) for n in range(1, 6)] == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.0])
    # kombu's ensure_connection: interval_start + n * interval_step, up to interval_max
    assert [Backoff(1, 1, step=2, maximum=6).delay(n) for n in range(1, 6)] == pytest.approx(
        [1, 3, 5, 6, 6])


@pytest.mark.parametrize("bad", [dict(initial=-1), dict(step=-1), dict(maximum=-1), dict(jitter=-1),
                                 dict(factor=0.5)])
def test_bad_policy_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        Backoff(**bad)


def test_wait_returns_at_once_when_stopped() -> None:
    stop = threading.Event()
    stop.set()
    assert Backoff(initial=3600, maximum=3600).wait(1, stop=stop) is True


def test_wait_ends_at_the_deadline() -> None:
    # a deadline already passed: no waiting at all, and not reported as stopped
    assert Backoff(initial=3600, maximum=3600).wait(5, stop=threading.Event(), deadline=0.0) is False
