"""Every command keeps the one error contract for every kind of error, on both brokers.

One row per (command, kind of error): the command runs in-process against the
session's Apache Kafka and the machine's RabbitMQ, and must end with exactly
one line on stderr, ``notify-transport: error: WHAT; try: NEXT STEP``, and the
exit status :mod:`notify_transport.cli.contract` gives that kind.
"""
from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from notify_transport.cli import common, contract
from notify_transport.cli import main as cli_main

#: What every error line must look like.
ERROR_LINE = re.compile(r"^notify-transport: error: \S.*; try: \S.*$")

#: Addresses where nothing listens (port 1 on loopback).
NO_KAFKA = "kafka://127.0.0.1:1"
NO_RABBIT = "rabbit://guest:guest@127.0.0.1:1/"
BAD_URL = "kafka://127.0.0.1:9092:9093/"
FAST = ("--connect-timeout", "1")


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = cli_main.main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


class Brokers:
    """URLs of the brokers the rows use: the session's Apache Kafka and the machine's RabbitMQ."""

    def __init__(self, kafka: Any, rabbit: str) -> None:
        self.kafka = kafka
        self.rabbit = rabbit

    def kafka_url(self) -> str:
        return self.kafka.url(f"contract{uuid.uuid4().hex[:6]}")

    def kafka_url_with_a_topic(self) -> str:
        """A vhost holding one notification, sent by the CLI itself."""
        url = self.kafka_url()
        assert cli_main.main([*SEND, "--transport-url", url]) == 0
        return url

    def kafka_wrong_password(self) -> str:
        return self.kafka.secure_url("alice", password="not-the-password")

    def rabbit_wrong_password(self) -> str:
        return self.rabbit.replace("guest:guest@", "guest:not-the-password@")


Row = tuple[str, contract.Kind, Callable[[Brokers, Path], list[str]]]

SEND = ["send", "--event-type", "contract.check"]
TAIL = ["tail", "--exit-at-end"]
REPLAY = ["replay", "--pool", "contract", "--to-earliest"]

#: (command, kind of error, argv for it)
ROWS: list[Row] = [
    # a malformed URL, or a scheme no driver has
    *[(argv[0], contract.BAD_URL, lambda b, t, argv=argv: [*argv, "--transport-url", BAD_URL])
      for argv in (SEND, TAIL, ["lag"], REPLAY, ["topics"], ["demo"], ["serve"],
                   ["pipeline", "run", "--once"])],
    ("send", contract.BAD_URL, lambda b, t: [*SEND, "--transport-url", "nosuch://h:1/"]),
    # no broker answers: Kafka
    *[(argv[0], contract.UNREACHABLE, lambda b, t, argv=argv: [*argv, "--transport-url", NO_KAFKA, *FAST])
      for argv in (SEND, TAIL, ["lag"], REPLAY, ["topics"], ["demo"], ["serve"],
                   ["pipeline", "run", "--once", "--output", "OUT"])],
    # no broker answers: RabbitMQ (the commands that carry notifications over it)
    *[(argv[0], contract.UNREACHABLE, lambda b, t, argv=argv: [*argv, "--transport-url", NO_RABBIT, *FAST])
      for argv in (SEND, ["demo"], ["serve"])],
    # a Kafka-only command given a RabbitMQ URL
    *[(argv[0], contract.BAD_INPUT, lambda b, t, argv=argv: [*argv, "--transport-url", b.rabbit])
      for argv in (TAIL, ["lag"], REPLAY, ["topics"])],
    # refused credentials
    *[(argv[0], contract.REFUSED_CREDENTIALS,
       lambda b, t, argv=argv: [*argv, "--transport-url", b.rabbit_wrong_password(), *FAST])
      for argv in (SEND, ["demo"], ["serve"])],
    *[(argv[0], contract.REFUSED_CREDENTIALS,
       lambda b, t, argv=argv: [*argv, "--transport-url", b.kafka_wrong_password(), "--connect-timeout", "10"])
      for argv in (SEND, TAIL, ["lag"], REPLAY, ["topics"], ["demo"])],
    # a pool, topic or listener that does not exist
    ("tail", contract.NOT_FOUND, lambda b, t: [*TAIL, "--transport-url", b.kafka_url(), "--topic", "nosuch"]),
    ("lag", contract.NOT_FOUND, lambda b, t: ["lag", "--transport-url", b.kafka_url(), "--topic", "nosuch"]),
    ("replay", contract.NOT_FOUND, lambda b, t: [*REPLAY, "--transport-url", b.kafka_url(), "--topic", "nosuch"]),
    ("topics", contract.NOT_FOUND, lambda b, t: ["topics", "--transport-url", b.kafka_url(), "--vhost", "nosuch"]),
    ("serve", contract.NOT_FOUND, lambda b, t: ["serve", "nosuch", "--transport-url", b.kafka_url()]),
    # an option value the command cannot use
    *[(argv[0], contract.BAD_INPUT, lambda b, t, argv=argv: [*argv, "--transport-url", NO_KAFKA,
                                                             "--connect-timeout", "0"])
      for argv in (SEND, TAIL, ["lag"], REPLAY, ["topics"], ["demo"], ["serve"], ["pipeline", "run"])],
    ("topics", contract.BAD_INPUT, lambda b, t: ["topics", "--transport-url", b.kafka_url_with_a_topic(),
                                                 "-c", "BAD COLUMN"]),
    ("pipeline report", contract.BAD_INPUT, lambda b, t: ["pipeline", "report", "--no-such-option"]),
    ("sendd", contract.BAD_INPUT, lambda b, t: ["sendd"]),
    # a malformed payload
    ("send", contract.BAD_INPUT, lambda b, t: [*SEND, "--transport-url", NO_KAFKA, "--payload", "{bad"]),
    ("send", contract.BAD_INPUT, lambda b, t: [*SEND, "--transport-url", NO_KAFKA, "--ctxt", "[1]"]),
    # a file that cannot be read
    *[(argv[0], contract.MISSING_FILE, lambda b, t, argv=argv: [*argv, "--config-file", str(t / "missing.conf")])
      for argv in (SEND, TAIL, ["lag"], REPLAY, ["topics"], ["demo"], ["serve"], ["pipeline", "run"])],
    ("send", contract.MISSING_FILE, lambda b, t: [*SEND, "--transport-url", NO_KAFKA, "--payload",
                                                  f"@{t / 'missing.json'}"]),
    ("pipeline report", contract.MISSING_FILE, lambda b, t: ["pipeline", "report", "--output", str(t / "none")]),
    # no transport URL at all
    *[(argv[0], contract.NOT_CONFIGURED, lambda b, t, argv=argv: list(argv))
      for argv in (SEND, ["lag"], ["serve"], ["pipeline", "run", "--once"])],
]


def row_id(row: Row) -> str:
    command, kind, _ = row
    return f"{command}-{kind.name}"


@pytest.fixture
def brokers(apache_kafka: Any, rabbit: str) -> Brokers:
    return Brokers(apache_kafka, rabbit)


@pytest.fixture
def no_url_anywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No $NOTIFY_TRANSPORT_URL, and the work folder is the test's own (pipeline outputs land there)."""
    monkeypatch.delenv(common.URL_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("row", ROWS, ids=[row_id(r) for r in ROWS])
def test_every_error_is_one_line_with_its_exit_status(row: Row, brokers: Brokers, no_url_anywhere: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    command, kind, make = row
    argv = [str(no_url_anywhere / "out") if a == "OUT" else a for a in make(brokers, no_url_anywhere)]
    code, out, err = run(capsys, argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"{argv}: expected one line on stderr, got:\n{err}"
    assert ERROR_LINE.match(lines[0]), lines[0]
    assert code == kind.status, f"{argv}: {lines[0]}"
    assert "Traceback" not in out + err
    if kind is contract.UNREACHABLE:
        assert "127.0.0.1:1" in lines[0]  # it says where it looked


def test_the_table_covers_every_kind_a_user_can_meet() -> None:
    met = {kind for _, kind, _ in ROWS}
    by_design = {contract.INTERRUPTED, contract.INTERNAL, contract.FAILED, contract.MISSING_EXTRA}
    assert met == set(contract.KINDS) - by_design  # those four: tests/unit/test_cli_contract.py
