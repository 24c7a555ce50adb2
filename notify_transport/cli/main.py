"""``notify-transport``: a thin command line over the public API.

Each subcommand lives in its own module exposing ``add_parser(subparsers)``
and ``run(args) -> int``; this module only wires them together, sets up
logging and turns library errors into one line and an exit status.

Adding a command is one line in :data:`COMMANDS`. A command module imports
only what its help needs; a command whose optional extra is not installed
stays in the help and answers with how to install it
(:func:`notify_transport.cli.common.require_extra`).
"""
from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
from typing import Any, Sequence

from notify_transport.cli import global_options, logs
from notify_transport.exceptions import ConfigurationError, MessagingException

#: subcommand modules, in help order.
COMMANDS = (
    "notify_transport.cli.demo",
    "notify_transport.cli.ops",
    "notify_transport.cli.serve",
    "notify_transport.cli.pipeline_cmd",
)

#: exit statuses: done, failed, bad input or configuration, service unreachable, interrupted
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def build_parser() -> argparse.ArgumentParser:
    return _build()[0]


def reference_parser() -> argparse.ArgumentParser:
    """The parser for the docs' CLI reference (sphinx-argparse reads descriptions as reStructuredText).

    The commands' descriptions and examples are plain text laid out for a
    terminal; here each becomes a literal block, so the reference shows them
    exactly as ``--help`` does.
    """
    parser, sub = _build()
    for command in sub.choices.values():
        command.description = _literal(command.description)
        command.epilog = _literal(command.epilog)
    return parser


def _literal(text: str | None) -> str | None:
    if not text:
        return text
    return "::\n\n" + textwrap.indent(text, "   ")


def _build() -> tuple[argparse.ArgumentParser, Any]:
    parser = global_options.MainParser(
        prog="notify-transport",
        description="OpenStack-style notifications over Kafka and RPC over RabbitMQ: run the demo,\n"
                    "operate a notification bus (send, tail, lag, replay, topics), run the pipeline.",
        epilog="Global options go before or after the command. Run 'notify-transport COMMAND --help' "
               "for a command's options.\n\nexit status: 0 done, 1 failed, 2 bad input or "
               "configuration (missing file, unknown option, missing extra), 3 broker unreachable, "
               "130 interrupted",
        formatter_class=global_options.HelpFormatter)
    global_options.add_global_options(parser, in_subcommand=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                parser_class=global_options.CommandParser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:  # a command module that needs what is not installed
            _add_unavailable(sub, name, exc)
            continue
        module.add_parser(sub)
    return parser, sub


def _add_unavailable(sub: Any, module: str, exc: ImportError) -> None:
    """A command whose module cannot be imported: listed, and answering in one line why."""
    command = module.rsplit(".", 1)[-1].removesuffix("_cmd")
    reason = f"cannot import {exc.name or exc}: install the extra it needs"
    parser = sub.add_parser(command, help=f"(unavailable: {reason})", description=reason)

    def unavailable(_args: argparse.Namespace) -> int:
        raise ConfigurationError(f"'{command}' is unavailable: {reason}")

    parser.set_defaults(func=unavailable)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    with logs.for_command(debug=args.debug, verbose=args.verbose):
        try:
            return int(args.func(args) or EXIT_OK)
        except ConfigurationError as exc:
            print(f"notify-transport: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except MessagingException as exc:
            print(f"notify-transport: {type(exc).__name__}: {exc}", file=sys.stderr)
            return EXIT_UNAVAILABLE
        except KeyboardInterrupt:
            print("notify-transport: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
