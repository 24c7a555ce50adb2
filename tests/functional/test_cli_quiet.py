"""Without ``--debug`` a command prints its own lines only: no JVM, Spark, log4j, librdkafka or pika lines.

Each command's happy path runs as a user runs it (a subprocess, so that what
native code writes to the process's stderr is seen too) against the session's
Apache Kafka, and every line it writes to stderr must be one of the project's:
the error contract's ``notify-transport:`` lines, the project's log lines
(``notify_transport.*`` loggers) or the commands' own progress and status lines.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

CLI = [sys.executable, "-m", "notify_transport.cli.main"]

#: The lines a command may write to stderr on its happy path.
OWN_LINES = [
    re.compile(r"^notify-transport: (warning|error): "),
    re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR) notify_transport[\w.]*: "),
    # the commands' progress and status lines (cli/ops/*.py)
    re.compile(r"^sent \d+/\d+ "),
    re.compile(r"^following \d+ partition\(s\) of "),
    re.compile(r"^\d+ notification\(s\) shown, "),
    re.compile(r"^replay \S+: resolved the offsets of "),
    re.compile(r"^plan only, nothing changed"),
]


def foreign(stderr: str) -> list[str]:
    """The stderr lines that are not the project's own."""
    return [line for line in stderr.splitlines()
            if line.strip() and not any(p.match(line) for p in OWN_LINES)]


def run_cli(*argv: Any, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_TRANSPORT_URL"}
    return subprocess.run(CLI + [str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd, check=False)


def test_the_filter_sees_library_lines() -> None:
    library = ["WARNING: Using incubator modules: jdk.incubator.vector",
               "26/12/06 03:41:54 WARN NativeCodeLoader: Unable to load native-hadoop library",
               "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
               "%3|1700000000.000|FAIL|rdkafka#producer-1| [thrd:bootstrap]: Connection refused",
               "FAIL [rdkafka#producer-1] [thrd:127.0.0.1:1/bootstrap]: Connect failed",
               "2026-12-06 05:00:00,000 WARNING pika.adapters.utils: Socket closed"]
    assert foreign("\n".join(library)) == library


@pytest.fixture
def vhost_url(apache_kafka: Any, tmp_path: Path) -> str:
    url = apache_kafka.url(f"quiet{uuid.uuid4().hex[:6]}")
    sent = run_cli("send", "--transport-url", url, "--event-type", "quiet.check", "--count", "5", cwd=tmp_path)
    assert sent.returncode == 0, sent.stderr
    assert foreign(sent.stderr) == []
    return url


@pytest.mark.parametrize("argv", [
    ["tail", "--from", "earliest", "--exit-at-end"],
    ["topics"],
    ["lag", "--pool", "quiet", "-f", "json"],
    ["replay", "--pool", "quiet", "--to-earliest", "--new-pool"],
    ["serve", "--list"],
], ids=lambda argv: argv[0])
def test_operator_commands_print_their_own_lines_only(argv: list[str], vhost_url: str, tmp_path: Path) -> None:
    if argv[0] == "lag":  # a pool that committed, so that lag has something to say
        assert run_cli("replay", "--transport-url", vhost_url, "--pool", "quiet", "--to-earliest",
                       "--new-pool", "--execute", cwd=tmp_path).returncode == 0
    done = run_cli(*argv, "--transport-url", vhost_url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert foreign(done.stderr) == []


@pytest.mark.parametrize("broker", ["noida", "apache-kafka"])
def test_the_demo_prints_its_own_lines_only(broker: str, tmp_path: Path) -> None:
    done = run_cli("demo", "--broker", broker, "--count", "60", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert foreign(done.stderr) == []
    assert "every pool received every notification exactly once" in done.stdout


@pytest.mark.skipif(importlib.util.find_spec("pyspark") is None, reason="needs the spark extra")
def test_a_pipeline_run_and_its_report_print_their_own_lines_only(vhost_url: str, tmp_path: Path) -> None:
    output = tmp_path / "pipeline"
    done = run_cli("pipeline", "run", "--once", "--transport-url", vhost_url, "--output", output, "--report",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert foreign(done.stderr) == []
    report = run_cli("pipeline", "report", "--output", output, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert foreign(report.stderr) == []


@pytest.mark.parametrize("argv", [
    ["send", "--event-type", "quiet.check", "--count", "2000"],
    ["tail", "--from", "earliest", "--exit-at-end"],
    ["replay", "--pool", "quieter", "--to-earliest", "--new-pool", "--execute"],
], ids=lambda argv: argv[0])
def test_q_leaves_the_progress_and_status_lines_out(argv: list[str], vhost_url: str, tmp_path: Path) -> None:
    # before: -q was accepted and changed nothing
    loud = run_cli(*argv, "--transport-url", vhost_url, cwd=tmp_path)
    assert loud.returncode == 0, loud.stderr
    assert loud.stderr.strip(), "the command said nothing on stderr to leave out"
    quiet = run_cli("-q", *argv, "--transport-url", vhost_url, cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    assert quiet.stdout.count("\n") == loud.stdout.count("\n")  # the results stay
