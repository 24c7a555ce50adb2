"""``notify-transport demo`` (the main job) end to end: on the noida fixture and embedded."""
from __future__ import annotations

import re

import pytest

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
    assert re.search(r"broker confirmed 60, failed 0, pending 0", out)


def test_demo_without_a_transport_url_starts_an_embedded_broker(monkeypatch, capsys) -> None:
    monkeypatch.delenv("NOTIFY_TRANSPORT_URL", raising=False)
    code = cli_main.main(["demo", "--count", "30", "--listeners-per-pool", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "started an embedded Kafka-protocol broker (noida-db)" in out
    assert "every pool received every notification exactly once" in out
