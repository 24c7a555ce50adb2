"""Argument types and option groups shared by the operator commands.

Every type raises ``argparse.ArgumentTypeError`` with a message that says
what was expected, so that bad input ends with exit status 2 and a clear line
from argparse before anything connects to a broker.
"""
from __future__ import annotations

import argparse
import json
import re
from typing import Any

from notify_transport.cli import contract
from notify_transport.cli.formatting import HelpFormatter
from notify_transport import times
from notify_transport.drivers.naming import PRIORITIES

#: Accepted spellings that are not priority names themselves.
PRIORITY_ALIASES = {"warning": "warn"}

DEFAULT_CONNECT_TIMEOUT = 10.0


def add_command(sub: Any, name: str, summary: str, description: str, examples: str) -> argparse.ArgumentParser:
    """A subcommand parser whose ``--help`` ends with ``examples``."""
    return sub.add_parser(name, help=summary, description=description,
                          epilog="examples:\n" + examples.strip("\n"),
                          formatter_class=HelpFormatter)


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    """--connect-timeout (--config-file, --transport-url, ... are global options)."""
    parser.add_argument("--connect-timeout", type=positive_float, default=DEFAULT_CONNECT_TIMEOUT,
                        metavar="SECONDS",
                        help="how long to wait for the brokers to answer before giving up "
                             "(exit status 3)")


#: Output formats of the commands that print a result, as OpenStack's CLIs (cliff) name them.
OUTPUT_FORMATS = ("table", "json", "value")


#: What each output format prints, for the help.
FORMAT_HELP = {"table": "table: aligned columns for people",
               "json": "json: JSON for scripts",
               "value": "value: the values separated by spaces, no header (for shell loops)"}


def add_output_format(parser: argparse.ArgumentParser, formats: tuple[str, ...] = OUTPUT_FORMATS,
                      described: dict[str, str] | None = None) -> None:
    """``-f/--format`` among ``formats`` (the first is the default) and ``--json`` (the same as ``-f json``)."""
    texts = {**FORMAT_HELP, **(described or {})}
    parser.add_argument("-f", "--format", dest="output_format", choices=formats, default=formats[0],
                        help="; ".join(texts[f] for f in formats))
    parser.add_argument("--json", dest="output_format", action="store_const", const="json",
                        help="the same as -f json")


def add_topic_selection(parser: argparse.ArgumentParser, priorities: bool = True) -> None:
    """``--topic`` (repeatable) and ``--priority`` (repeatable, comma-separated), as every command takes them."""
    parser.add_argument("--topic", action="append", type=topic_name, metavar="TOPIC",
                        help="notification topic, may repeat (default: [oslo_messaging_notifications] "
                             "topics, i.e. notifications)")
    if priorities:
        parser.add_argument("--priority", action="extend", type=priority_list, metavar="PRIORITY[,...]",
                            help="priorities, comma-separated, may repeat (default: all)")


def priority(text: str) -> str:
    """One priority name, case-insensitive; ``warning`` means ``warn``."""
    name = text.strip().lower()
    name = PRIORITY_ALIASES.get(name, name)
    if name not in PRIORITIES:
        raise argparse.ArgumentTypeError(
            f"unknown priority {text!r}; expected one of {', '.join(PRIORITIES)}")
    return name


def priority_list(text: str) -> list[str]:
    """``info,error`` -> ``["info", "error"]`` (used with ``action="extend"``)."""
    names = [part for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected a comma-separated list of priorities")
    return [priority(name) for name in names]


def json_value(text: str) -> Any:
    """JSON text, or ``@path`` to read it from a file."""
    source = "JSON"
    if text.startswith("@"):
        path = text[1:]
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise contract.ArgumentKindError(contract.MISSING_FILE, f"cannot read {path}: {exc.strerror}") from None
        source = f"JSON in {path}"
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid {source}: {exc}") from None


def json_object(text: str) -> dict[str, Any]:
    """Like :func:`json_value`, and the value must be an object (a request context)."""
    value = json_value(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


def regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"invalid regular expression {text!r}: {exc}") from None


def _whole_number(text: str, minimum: int, requirement: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{requirement}, got {value}")
    return value


def positive_int(text: str) -> int:
    return _whole_number(text, 1, "must be at least 1")


def non_negative_int(text: str) -> int:
    return _whole_number(text, 0, "must be 0 or more")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def point_in_time(text: str) -> float:
    """Seconds since the epoch, from ISO 8601 or a relative time."""
    try:
        return times.parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _named(text: str, what: str) -> str:
    """``text`` without surrounding blanks; an empty name is bad input, never "no name"."""
    name = text.strip()
    if not name:
        raise argparse.ArgumentTypeError(f"empty {what}")
    return name


def topic_name(text: str) -> str:
    """A notification topic as the notifier names it (no priority, no vhost)."""
    return _named(text, "topic name")


def pool_name(text: str) -> str:
    """A pool (consumer group): an empty one would read as "no pool" or be sent to the broker."""
    return _named(text, "pool name")


def event_type(text: str) -> str:
    """A notification's event type, which listeners' filters and the pipeline group by."""
    return _named(text, "event type")
