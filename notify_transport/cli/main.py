"""``notify-transport``: a thin command line over the public API, on cliff.

The application: global options (before or after the command), logging and
exit statuses; the commands are the ``notify_transport.cli`` entry point group.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import logging
import sys
from typing import Any, Sequence

from cliff.app import App
from cliff.commandmanager import CommandManager

from notify_transport.cli import contract, logs
from notify_transport.cli.commands import global_values, one_line_parser
from notify_transport.cli.contract import PROG
from notify_transport.cli.common import URL_ENV

#: Entry point group of the commands.
NAMESPACE = "notify_transport.cli"
#: Distribution name whose metadata gives ``--version``.
DISTRIBUTION = "notify-transport"
#: Options whose value may start with "-" (``--to-time -1h``, ``--from -10``).
DASH_VALUE_OPTIONS = frozenset({"--to-time", "--from"})

DESCRIPTION = """\
OpenStack-style notifications over Kafka and RPC over RabbitMQ: run the demo,
operate a notification bus (send, tail, lag, replay, topics), serve the
listeners registered by packages, run the pipeline.

Global options go before or after the command. Run 'notify-transport help
COMMAND' or 'notify-transport COMMAND --help' for a command's options.

exit status: 0 done, 1 failed, 2 bad input or configuration (missing file,
unknown option, missing extra), 3 broker unreachable, 130 interrupted"""


def version() -> str:
    """The installed distribution's version (package metadata, not a copy in the code)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from an unbuilt tree
        return "unknown (not installed)"


def join_dash_values(argv: Sequence[str]) -> list[str]:
    """``["--from", "-1h"]`` -> ``["--from=-1h"]``.

    argparse takes a value starting with "-" that is not a plain negative
    number for an unknown option; joining it to its option with "=" is the
    public way to pass it.
    """
    out: list[str] = []
    items = list(argv)
    index = 0
    while index < len(items):
        item = items[index]
        if item in DASH_VALUE_OPTIONS and index + 1 < len(items) and items[index + 1].startswith("-") \
                and items[index + 1] != "--" and not items[index + 1].startswith("--"):
            out.append(f"{item}={items[index + 1]}")
            index += 2
            continue
        out.append(item)
        index += 1
    return out


class NotifyTransportApp(App):
    """The ``notify-transport`` application: cliff's, plus the configuration options."""

    NAME = "notify-transport"
    LOG = logging.getLogger("notify_transport.cli")

    def __init__(self) -> None:
        super().__init__(description=DESCRIPTION, version=version(),
                         command_manager=CommandManager(NAMESPACE), deferred_help=True)
        self.no_command = False

    def _global_parser(self, description: str | None, version: str | None,
                       argparse_kwargs: dict[str, Any] | None = None) -> argparse.ArgumentParser:
        # no abbreviations: a command's own option is never taken for a global one; "resolve":
        # --version and --debug below replace cliff's (the program's name, what --debug does)
        parser = super().build_option_parser(
            description, version, {"allow_abbrev": False, "prog": "notify-transport",
                                   "formatter_class": argparse.RawDescriptionHelpFormatter,
                                   "conflict_handler": "resolve", **(argparse_kwargs or {})})
        parser.add_argument("--version", action="version", version=f"notify-transport {version}",
                            help="print the version and exit")
        # cliff's verbosity, log file and help options, said in our words ("resolve" replaces them)
        verbosity = parser.add_mutually_exclusive_group()
        verbosity.add_argument("-v", "--verbose", action="count", dest="verbose_level",
                               default=self.DEFAULT_VERBOSE_LEVEL,
                               help="more log lines: -v adds the info lines, -vv the debug lines (the "
                                    "client libraries' own lines still need --debug)")
        verbosity.add_argument("-q", "--quiet", action="store_const", dest="verbose_level", const=0,
                               help="no progress or status lines on stderr: only the results, warnings "
                                    "and errors")
        parser.add_argument("--log-file", default=None, metavar="PATH",
                            help="write the log lines to PATH as well as to stderr")
        parser.add_argument("-h", "--help", dest="deferred_help", action="store_true",
                            help="print this help and exit")
        parser.add_argument("--debug", action="store_true", default=False,
                            help="log everything, the client libraries' own lines included, and "
                                 "show tracebacks on errors")
        parser.add_argument("--config-file", action="append", default=[], metavar="PATH",
                            help="oslo.config file to read, may repeat (later files win)")
        parser.add_argument("--config-dir", action="append", default=[], metavar="DIR",
                            help="directory whose .conf files are read after --config-file, may repeat")
        parser.add_argument("--transport-url", metavar="URL", default=None,
                            help="e.g. kafka://host:9092/vhost or rabbit://user:pass@host:5672/; default: "
                                 "[oslo_messaging_notifications] transport_url of the config files, "
                                 f"then [DEFAULT] transport_url, then ${URL_ENV}")
        return parser

    def configure_logging(self) -> None:
        logs.configure(debug=self.options.debug, verbose=max(0, self.options.verbose_level - 1),
                       log_file=self.options.log_file, quiet=self.options.verbose_level == 0)

    def interact(self) -> None:
        """No command given: the help, and exit status 2 (no interactive shell)."""
        self.no_command = True
        self.run_subcommand(["help"])

    def build_option_parser(self, description: str | None, version: str | None,
                            argparse_kwargs: dict[str, Any] | None = None) -> argparse.ArgumentParser:
        return one_line_parser(self._global_parser(description, version, argparse_kwargs), "")

    def run_subcommand(self, argv: list[str]) -> int:
        try:
            self.command_manager.find_command(argv)
        except ValueError:
            return self._unknown(argv)
        except ImportError as exc:
            return self._unavailable(argv, exc)
        try:
            return super().run_subcommand(argv)
        except ImportError as exc:
            return self._unavailable(argv, exc)
        except Exception as exc:  # noqa: BLE001 - what escapes a command still ends in one line
            if self.options.debug:
                raise
            return contract.report(exc, argv[0])

    def _unknown(self, argv: list[str]) -> int:
        if argv[0].startswith("-"):
            return contract.fail(contract.BAD_INPUT, f"unknown option {argv[0]!r}",
                                 f"'{PROG} --help' lists the global options, '{PROG} COMMAND --help' a command's")
        guesses = self.get_fuzzy_matches(argv[0])
        return contract.fail(contract.BAD_INPUT, f"unknown command {' '.join(argv)!r}",
                             f"'{PROG} help' lists the commands"
                             + (f" (did you mean {' or '.join(guesses[:3])}?)" if guesses else ""))

    @staticmethod
    def _unavailable(argv: list[str], exc: ImportError) -> int:
        """A command whose module needs what is not installed."""
        return contract.fail(contract.MISSING_EXTRA, f"'{argv[0]}' is unavailable: cannot import {exc.name or exc}",
                             "install the extra it needs: pip install 'notify-transport[spark]' for the "
                             "pipeline commands, 'notify-transport[embedded]' for the demo's broker")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The arguments a command's body gets for ``argv`` (global options included), without running it.

    For tests and tools: ``parse_args(["tail", "--from", "-10"]).start``.
    """
    app = NotifyTransportApp()
    options, remainder = app.parser.parse_known_args(join_dash_values(argv))
    factory, name, sub_argv = app.command_manager.find_command(remainder)
    command = factory(app, options)
    parsed = command.get_parser(f"notify-transport {name}").parse_args(sub_argv)
    return global_values(options, parsed)


def main(argv: Sequence[str] | None = None) -> int:
    app = NotifyTransportApp()
    with logs.restored():  # the app's handlers go with the run (main() is also called in-process)
        code = app.run(join_dash_values(sys.argv[1:] if argv is None else argv))
    return contract.BAD_INPUT.status if app.no_command else code


if __name__ == "__main__":  # pragma: no cover
    # the application from its module, not from __main__ (cliff names the commands' distribution
    # in the help when it differs from the application's)
    from notify_transport.cli.main import main as _main

    sys.exit(_main())
