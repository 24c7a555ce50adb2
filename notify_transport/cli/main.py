"""``notify-transport``: a thin command line over the public API.

Each subcommand lives in its own module exposing ``add_parser(subparsers)``
and ``run(args) -> int``; this module only wires them together, sets up
logging and turns library errors into exit codes.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Sequence

from notify_transport.exceptions import ConfigurationError, MessagingException

#: subcommand modules, in help order; a module that fails to import (an
#: optional extra not installed) is left out of the help with a debug log.
COMMANDS = (
    "notify_transport.cli.demo",
    "notify_transport.cli.ops",
    "notify_transport.cli.serve",
    "notify_transport.cli.pipeline_cmd",
    "notify_transport.cli.bench_cmd",
)

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="notify-transport",
        description="OpenStack-style notifications over Kafka and RPC over RabbitMQ.",
        epilog="Run 'notify-transport COMMAND --help' for a command's options.")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more logging (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            logging.getLogger(__name__).debug("command module %s unavailable: %s", name, exc)
            continue
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or EXIT_OK)
    except ConfigurationError as exc:
        print(f"notify-transport: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MessagingException as exc:
        print(f"notify-transport: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
