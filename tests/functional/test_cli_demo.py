"""``notify-transport demo`` (the main job) end to end: on the noida fixture and embedded."""
from __future__ import annotations

import argparse
import re

import pytest
from oslo_config import cfg

from notify_transport import get_notification_transport
from notify_transport.cli import demo
from notify_transport.cli import main as cli_main

pytestmark = pytest.mark.functional


def test_demo_on_a_configured_broker(kafka_broker, capsys) -> None:
    code = cli_main.main(["demo", "--transport-url", kafka_broker.url(), "--count", "60"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "every pool received every notification exactly once" in out
    assert "started an embedded" not in out
    for pool in ("audit", "billing"):
        assert f"pool {pool}: 60/60 received, 0 missing, 0 duplicates -> OK" in out
    assert re.search(r"sent 60 notifications in [0-9.]+s; broker confirmed 60, failed 0, pending 0 within", out)


def test_the_demo_says_one_notification_in_the_singular(kafka_broker, capsys) -> None:
    code = cli_main.main(["demo", "--transport-url", kafka_broker.url(), "--count", "1",
                          "--listeners-per-pool", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "sent 1 notification in " in out


def test_demo_without_a_transport_url_starts_an_embedded_broker(monkeypatch, capsys) -> None:
    monkeypatch.delenv("NOTIFY_TRANSPORT_URL", raising=False)
    code = cli_main.main(["demo", "--count", "30", "--listeners-per-pool", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "started an embedded Kafka-protocol broker (noida-db)" in out
    assert "every pool received every notification exactly once" in out


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_demo_exchange_times_each_listeners_start_under_both_protocols(apache_kafka, protocol, capsys) -> None:
    # the benchmark's readiness rows read these times: one per listener, in start order, and an
    # outcome that is ok only when every pool got every notification once
    conf = cfg.ConfigOpts()
    conf([])
    transport = get_notification_transport(conf, demo.with_demo_defaults(apache_kafka.url(group_protocol=protocol)))
    try:
        outcome = demo.exchange(transport, ["audit", "billing"],
                                argparse.Namespace(count=40, listeners_per_pool=2, timeout=60))
    finally:
        transport.cleanup()
    out = capsys.readouterr().out
    assert outcome.ok, out
    assert len(outcome.ready_s) == 4 and all(t > 0 for t in outcome.ready_s)
    assert outcome.all_started_s >= sum(outcome.ready_s)
    for pool in ("audit", "billing"):
        assert f"pool {pool}: 40/40 received, 0 missing, 0 duplicates -> OK" in out
