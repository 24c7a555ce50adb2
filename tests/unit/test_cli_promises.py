"""What the docs and the help promise about the commands holds: exit statuses, examples, formats.

cli.rst promises that every command's help gives its exit statuses and
examples; each example must parse with the command's own options, each exit
status named must be one of the contract's (or 128+N after a signal), and the
time format cli.rst shows must be what ``tail`` prints.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from notify_transport.cli import contract
from notify_transport.cli import main as cli_main
from notify_transport.cli.ops import tail
from notify_transport.times import parse_time

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ["send", "tail", "lag", "replay", "topics", "serve", "demo", "pipeline run", "pipeline report"]
STATUSES = {contract.OK_STATUS} | {kind.status for kind in contract.KINDS}


def help_of(command: str) -> str:
    """``notify-transport COMMAND --help`` as a user reads it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            cli_main.main([*command.split(), "--help"])
        except SystemExit as exc:
            assert not exc.code, f"{command} --help exited {exc.code}"
    return out.getvalue()


def examples(text: str) -> list[str]:
    """The example command lines after 'examples:', continuation lines joined."""
    block = text.split("\nexamples:\n", 1)[1]
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line.strip() for line in joined.splitlines() if line.strip().startswith("notify-transport ")]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_gives_its_exit_statuses_and_examples(command: str) -> None:
    text = help_of(command)
    assert "exit status:" in text, f"{command} --help names no exit status"
    assert "\nexamples:\n" in text and examples(text), f"{command} --help has no example"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_exit_status_a_help_names_is_the_contracts(command: str) -> None:
    text = " ".join(help_of(command).split("exit status:", 1)[1].split("\n\n", 1)[0].split())
    named = {int(n) for n in re.findall(r"(?:^|, )(\d+) ", text)}
    assert named and named <= STATUSES, (command, named)
    assert contract.OK_STATUS in named


@pytest.mark.parametrize("command", COMMANDS)
def test_every_example_parses_with_the_commands_own_options(command: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "payload.json").write_text('{"instance_id": "i-1"}')  # the file an example names
    for example in examples(help_of(command)):
        argv = shlex.split(example)[1:]
        assert " ".join(argv[:len(command.split())]) == command, example
        cli_main.parse_args(argv)  # an unknown option or a bad value exits 2


def test_printed_times_look_as_the_docs_say() -> None:
    text = (ROOT / "doc" / "source" / "cli.rst").read_text()
    shown = re.search(r"Printed times look like ``([^`]+)``", text).group(1)
    message = {"timestamp": "2024-05-01 12:00:00.250123", "priority": "INFO", "publisher_id": "p",
               "event_type": "e", "payload": {}}
    line = tail.format_line(tail.Received({}, message, "t", 0, 0, parse_time(shown)))
    assert line.split()[0] == shown
