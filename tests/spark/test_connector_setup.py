"""Spark's Kafka connector set up by the one command the errors name, from an empty jar cache.

A new machine has no connector in its jar cache: ``pipeline run --source kafka``
must fail in one line that names ``notify-transport pipeline setup`` and the
Spark version it wants; that command fetches the connector (Maven, into the
cache named by ``NOTIFY_TRANSPORT_JVM_CACHE``), ``python -m notify_transport.jvm
fetch spark-kafka`` without ``-D`` finds the same cache entry, and the run then
reads with the connector.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from notify_transport.pipeline.connector import pyspark_version  # noqa: E402

CLI = [sys.executable, "-m", "notify_transport.cli.main"]


def run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def test_the_connector_is_set_up_by_the_command_its_error_names(apache_kafka: Any, tmp_path: Path) -> None:
    cache = tmp_path / "jvm-cache"
    env = {**{k: v for k, v in os.environ.items() if k != "NOTIFY_TRANSPORT_URL"},
           "NOTIFY_TRANSPORT_JVM_CACHE": str(cache)}
    url = apache_kafka.url(f"setup{uuid.uuid4().hex[:6]}")
    sent = run([*CLI, "send", "--transport-url", url, "--event-type", "setup.check", "--count", "3"], env,
               tmp_path)
    assert sent.returncode == 0, sent.stderr
    pipeline = [*CLI, "pipeline", "run", "--once", "--transport-url", url, "--source", "kafka"]

    missing = run([*pipeline, "--output", str(tmp_path / "first")], env, tmp_path)
    lines = [line for line in missing.stderr.splitlines() if line.startswith("notify-transport: ")]
    assert missing.returncode == 2, missing.stderr
    assert len(lines) == 1, missing.stderr
    assert "session on" not in missing.stderr  # said before any JVM started
    assert f"for Spark {pyspark_version()} is not set up" in lines[0]
    assert "try: run 'notify-transport pipeline setup'" in lines[0]

    setup = run([*CLI, "pipeline", "setup"], env, tmp_path)
    assert setup.returncode == 0, setup.stderr
    assert f"Spark {pyspark_version()}'s Kafka connector" in setup.stdout and str(cache) in setup.stdout

    # the module's own command, without -D, names the same jars: the installed PySpark's version
    by_hand = run([sys.executable, "-m", "notify_transport.jvm", "classpath", "spark-kafka"], env, tmp_path)
    assert by_hand.returncode == 0, by_hand.stderr
    assert all(Path(jar).is_relative_to(cache) for jar in by_hand.stdout.strip().split(":"))

    done = run([*pipeline, "--output", str(tmp_path / "second")], env, tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout[done.stdout.index("{"):])
    assert summary["notifications"] == 3
