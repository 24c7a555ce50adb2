"""The error contract's table: kinds, exit statuses, the one line, and the docs that show it."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from notify_transport.cli import contract
from notify_transport.cli.common import MissingExtra
from notify_transport.exceptions import (AccessDenied, BrokerUnreachable, ConfigurationError, DriverLoadFailure,
                                         InvalidTransportURL, MessageDeliveryFailure, ServerListenError)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("exc, kind", [
    (contract.CommandError(contract.NOT_FOUND, "no such pool"), contract.NOT_FOUND),
    (InvalidTransportURL("kafka://x:1:2", "bad"), contract.BAD_URL),
    (DriverLoadFailure("nosuch", "no driver"), contract.BAD_URL),
    (AccessDenied("refused"), contract.REFUSED_CREDENTIALS),
    (BrokerUnreachable("nobody answered"), contract.UNREACHABLE),
    (ServerListenError("target", BrokerUnreachable("nobody answered")), contract.UNREACHABLE),
    (MissingExtra("spark", "needs the spark extra"), contract.MISSING_EXTRA),
    (ConfigurationError("--pools needs a name"), contract.BAD_INPUT),
    (FileNotFoundError(2, "No such file or directory", "/x.json"), contract.MISSING_FILE),
    (MessageDeliveryFailure("not confirmed"), contract.FAILED),
    (KeyboardInterrupt(), contract.INTERRUPTED),
    (TypeError("a bug"), contract.INTERNAL),
], ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else v.name)
def test_each_exception_has_its_kind(exc: BaseException, kind: contract.Kind) -> None:
    assert contract.classify(exc).kind is kind


@pytest.mark.parametrize("kind", contract.KINDS, ids=lambda k: k.name)
def test_every_kind_prints_one_line_with_a_next_step(kind: contract.Kind) -> None:
    out = io.StringIO()
    status = contract.report(contract.CommandError(kind, "what\nwent   wrong"), "send", out)
    assert status == kind.status
    line = out.getvalue()
    assert line.count("\n") == 1
    assert re.fullmatch(r"notify-transport: error: what went wrong; try: \S.*\n", line), line
    assert "{" not in line  # the placeholders are filled


def test_a_missing_extra_names_its_install_command() -> None:
    out = io.StringIO()
    assert contract.report(MissingExtra("spark", "'pipeline run' needs the 'spark' extra"), "pipeline run",
                           out) == 2
    assert out.getvalue().endswith("; try: pip install 'notify-transport[spark]'\n")


def test_a_body_that_raises_ends_in_its_line_and_status(capsys: pytest.CaptureFixture[str]) -> None:
    def body() -> int:
        raise BrokerUnreachable("Cannot reach RabbitMQ at 127.0.0.1:1 within 1s")

    assert contract.run_command(body, "send") == 3
    assert capsys.readouterr().err.startswith("notify-transport: error: Cannot reach RabbitMQ at 127.0.0.1:1")
    assert contract.run_command(lambda: 0, "send") == 0


def test_the_docs_table_is_the_code_table() -> None:
    """doc/source/cli.rst lists every kind with its exit status, what it covers and its next
    step, as the code says them, in the code's order."""
    text = (ROOT / "doc" / "source" / "cli.rst").read_text()
    section = text[text.index(".. _error-contract:"):]
    rows = re.findall(r"^   \* - (.+)\n     - (\d+)\n     - (.+)\n     - (.+)\n", section, re.MULTILINE)
    assert [(name, int(status), covers, step) for name, status, covers, step in rows] == [
        (k.name, k.status, k.covers, k.next_step.format(prog=contract.PROG, command="COMMAND"))
        for k in contract.KINDS]


def test_a_next_step_a_command_wrote_is_printed_as_written() -> None:
    """Only a kind's own next step is a template: braces in a command's step are text."""
    error = contract.CommandError(contract.BAD_INPUT, "no column 'x'", "choose among {a} and {b}")
    assert contract.line(error, "topics").endswith("; try: choose among {a} and {b}")
