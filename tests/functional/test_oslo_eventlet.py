"""``ntkafka`` in an eventlet-monkey-patched oslo.messaging service, eventlet and threading executors.

Each (broker, executor) runs oslo_eventlet_service.py once in a child process
(monkey-patched first thing, oslo.messaging's public API only) under a
timeout: a hang fails the tests with what the child printed (the stacks of
its green and OS threads last), it never hangs the run. The child reports
every check as a JSON line; the tests below judge them. A green thread
ticking every 10 ms shows whether the hub was blocked: before the fix,
``start()`` never returned (the listener's blocking poll held the hub).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafka_fixtures import KAFKA_BROKERS, SESSION_PREFIX

pytestmark = pytest.mark.functional

pytest.importorskip("oslo_messaging")
pytest.importorskip("eventlet")

SERVICE = Path(__file__).with_name("oslo_eventlet_service.py")
#: The whole child run (five checks, six listeners) must end within this.
RUN_TIMEOUT = 300.0
#: start() must return within this (the listener start timeout is far shorter on a live broker).
START_BOUND = 60.0
#: stop(), wait() and cleanup() of all servers and transports together.
STOP_BOUND = 60.0
#: A blocked hub shows as a tick gap of the whole blocking call; a free one ticks every 10 ms.
#: Generous, for a loaded machine; a poll held on the hub blocks for seconds, or for ever.
MAX_GAP = 1.5
EXECUTORS = ("eventlet", "threading")
BROKERS = KAFKA_BROKERS
#: oslo_eventlet_service.STACKS_SIGNAL (importing that module would monkey-patch this process).
STACKS_SIGNAL = signal.SIGUSR1
#: How long a child that overran gets to print its stacks before it is killed.
STACKS_GRACE = 3.0


def kill_showing_stacks(child: subprocess.Popen) -> None:
    """Kill a child service that ran past its time, its green and OS threads' stacks printed on
    its stderr first: a hang then says where it waits."""
    if child.poll() is None:
        child.send_signal(STACKS_SIGNAL)
        try:
            child.wait(STACKS_GRACE)
        except subprocess.TimeoutExpired:
            pass
    child.kill()


def run_service(bootstrap: str, executor: str, script: Path = SERVICE,
                prefix: str = f"{SESSION_PREFIX}-ev", *more: str) -> dict[str, Any]:
    """Run the child ``script`` (``more``: further arguments); return its reports by check name
    (``"output"``: what it printed)."""
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    child = subprocess.Popen([sys.executable, str(script), bootstrap, executor, prefix, *more],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             cwd=script.parent)
    try:
        out, err = child.communicate(timeout=RUN_TIMEOUT)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_showing_stacks(child)
        out, err = child.communicate()
        timed_out = True
    reports: dict[str, Any] = {}
    for line in out.splitlines():
        if line.startswith("{"):
            report = json.loads(line)
            reports[report.pop("check")] = report
    reports["output"] = f"exit {child.returncode}{' (killed: timeout)' if timed_out else ''}\n" \
                        f"stdout:\n{out[-4000:]}\nstderr:\n{err[-(20000 if timed_out else 6000):]}"
    return reports


@pytest.fixture(scope="module", params=[(b, e) for b in BROKERS for e in EXECUTORS],
                ids=lambda p: f"{p[0]}-{p[1]}")
def service(request: pytest.FixtureRequest) -> dict[str, Any]:
    broker_name, executor = request.param
    broker = request.getfixturevalue(broker_name)
    return run_service(broker.bootstrap, executor)


def check(service: dict[str, Any], name: str) -> dict[str, Any]:
    """One check's report; fails with the child's output when it is missing or failed."""
    assert "done" in service, f"the service did not finish:\n{service['output']}"
    report = service.get(name)
    assert report is not None, f"no report for {name}:\n{service['output']}"
    assert "error" not in report, f"{name}: {report['error']}\n{service['output']}"
    return report


def phases(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {name: value for name, value in report.items() if isinstance(value, dict) and "max_gap" in value}


def test_the_child_is_monkey_patched(service) -> None:
    assert check(service, "patched")["thread"] is True


def test_start_returns_once_subscribed_and_the_hub_keeps_running(service) -> None:
    starts = {f"{c}.{p}": v for c in ("first_notification_and_vhost", "pools", "batch", "logging_handler")
              for p, v in phases(check(service, c)).items() if p.startswith("start")}
    assert len(starts) == 6
    for name, phase in starts.items():
        assert phase["seconds"] < START_BOUND, name
        assert phase["ticks"] >= 3 and phase["max_gap"] < MAX_GAP, (name, phase)


def test_first_notification_after_start_is_kept_and_vhost_respected(service) -> None:
    report = check(service, "first_notification_and_vhost")
    assert [(c["publisher_id"], c["event_type"], c["payload"]) for c in report["received"]] == [
        ("compute.host1", "compute.instance.create.end", {"seq": 0})]
    assert report["other_vhost_received"] == []  # same topic and pool, another vhost


def test_green_thread_runs_while_the_listener_waits(service) -> None:
    """Three idle seconds of listening (two listeners polling): the ticker keeps ticking."""
    idle = check(service, "first_notification_and_vhost")["idle"]
    assert idle["ticks"] >= 30 and idle["max_gap"] < MAX_GAP, idle
    for name in ("first_notification_and_vhost", "pools", "batch", "logging_handler", "start_failure",
                 "stop_everything"):
        for phase_name, phase in phases(check(service, name)).items():
            assert phase["max_gap"] < MAX_GAP, (name, phase_name, phase)


def test_two_pools_each_get_every_notification(service) -> None:
    report = check(service, "pools")
    assert report["audit"] == report["billing"] == list(range(10))


def test_batch_listener(service) -> None:
    batches = check(service, "batch")["batches"]
    assert sorted(seq for batch in batches for seq in batch) == list(range(12))
    assert all(1 <= len(batch) <= 5 for batch in batches)


def test_logging_notification_handler(service) -> None:
    received = sorted(check(service, "logging_handler")["received"], key=lambda c: c["priority"])
    assert received == [
        {"priority": "error", "publisher_id": "svc.host1", "event_type": "logrecord",
         "msg": "disk sda1 is full", "levelname": "ERROR"},
        {"priority": "warn", "publisher_id": "svc.host1", "event_type": "logrecord",
         "msg": "from a native thread", "levelname": "WARNING"}]


def test_start_failure_is_raised_through_tpool(service) -> None:
    report = check(service, "start_failure")
    assert "Cannot reach the Kafka cluster" in report.get("raised", ""), report
    assert report["failed_start"]["seconds"] < START_BOUND
    assert report["failed_start"]["max_gap"] < MAX_GAP, report


def test_stop_wait_cleanup_finish_promptly(service) -> None:
    report = check(service, "stop_everything")
    assert (report["servers"], report["transports"]) == (6, 6)
    total = sum(report[p]["seconds"] for p in ("stop", "wait", "cleanup"))
    assert total < STOP_BOUND, report
