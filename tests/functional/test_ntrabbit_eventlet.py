"""``ntrabbit`` in an eventlet-monkey-patched oslo.messaging service, eventlet and threading executors.

Each executor runs oslo_eventlet_rabbit_service.py once in a child process
(monkey-patched first thing, oslo.messaging's public API only) under a timeout
(see test_oslo_eventlet.run_service): RPC between an ``ntrabbit://`` and a
``rabbit://`` server and client in the patched process, fanout, remote errors,
a timeout, notifications and batches, then the broker cutting the process's
``ntrabbit`` connections while casts flow and calls wait, while a green thread
ticking every 10 ms shows the hub was never blocked.
test_ntrabbit_eventlet_tls.py runs the same checks over TLS.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from rabbit_fixtures import SESSION_PREFIX
from test_oslo_eventlet import EXECUTORS, MAX_GAP, check, phases, run_service

pytestmark = pytest.mark.functional

pytest.importorskip("oslo_messaging")
pytest.importorskip("eventlet")

SERVICE = Path(__file__).with_name("oslo_eventlet_rabbit_service.py")


@pytest.fixture(scope="module", params=EXECUTORS)
def service(request: pytest.FixtureRequest, rabbit: str) -> dict[str, Any]:
    return run_service(rabbit, request.param, SERVICE, f"{SESSION_PREFIX}_ev_{uuid.uuid4().hex[:8]}")


def test_the_child_is_monkey_patched(service) -> None:
    assert check(service, "patched")["thread"] is True


def test_calls_both_ways_and_concurrent_calls_from_green_threads(service) -> None:
    report = check(service, "rpc")
    assert report["to_rabbit"] == {"server": "rabbit", "value": 1}
    assert report["from_rabbit"] == {"server": "ntrabbit", "value": 2}
    assert report["concurrent"] == list(range(20))


def test_fanout_reaches_both_schemes_once(service) -> None:
    fanout = check(service, "rpc")["fanout"]
    assert set(fanout) == {"ntrabbit", "rabbit"}
    for values in fanout.values():
        assert len(values) == 2 and len(set(values)) == 2, fanout  # both fanouts, once each


def test_remote_error_class_and_timeout(service) -> None:
    report = check(service, "rpc")
    assert report["remote_error"] == "ServiceError_Remote"
    # the endpoint answers after 3 s: a call that ignored its 1 s timeout would get "late"
    assert "timeout_after" in report, report


def test_notifications_from_both_schemes_and_batches(service) -> None:
    report = check(service, "notifications")
    expected = sorted((scheme, n) for scheme in ("ntrabbit", "rabbit") for n in range(5))
    assert [tuple(r) for r in report["received"]] == expected
    payloads = sorted((p["from"], p["n"]) for batch in report["batches"] for p in batch)
    assert payloads == expected
    assert all(1 <= len(batch) <= 4 for batch in report["batches"])


def test_a_cut_connection_loses_no_confirmed_cast_and_calls_end_on_time(service) -> None:
    report = check(service, "cut")
    assert report["connections_cut"] >= 2, report
    # the call nobody answered ended with its timeout while its endpoint still held it
    assert report["unanswered"] == "timeout" and report["unanswered_still_held"], report
    # the call answered after the cut got its answer: reply queue and replier reconnected
    assert report["answered"] == "answered", report
    assert report["lost"] == [] and report["duplicates"] == 0, report
    assert report["confirmed"] >= 40 and report["after"] == "after", report


def test_the_hub_keeps_running(service) -> None:
    for name in ("rpc", "notifications", "cut", "stop_everything"):
        for phase_name, phase in phases(check(service, name)).items():
            assert phase["max_gap"] < MAX_GAP, (name, phase_name, phase)
    idle = check(service, "notifications")["idle"]
    assert idle["ticks"] >= 20, idle
