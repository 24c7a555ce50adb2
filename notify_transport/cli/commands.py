"""The ``notify-transport`` commands as cliff commands, around the command modules' bodies.

Each command module keeps ``add_parser(sub)`` and ``run(args)``; the classes
here put them on cliff. Listing commands are cliff ``Lister``s whose body hands
its rows to :func:`notify_transport.cli.ops.output.emit`. The commands are the
``notify_transport.cli`` entry point group (setup.cfg): other packages add theirs.
"""
from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any, Callable, Iterable, NoReturn, Sequence

from cliff.command import Command
from cliff.lister import Lister

from notify_transport.cli import contract
from notify_transport.cli.formatting import HelpFormatter

#: exit statuses a command body returns itself: done; the rest come from the contract's kinds
EXIT_OK = contract.OK_STATUS

#: Global options of the application a command body reads from its arguments.
GLOBAL_DESTS = ("config_file", "config_dir", "transport_url", "debug")


class _Into:
    """Stands for argparse's subparsers: ``module.add_parser(_Into(parser))`` fills ``parser``;
    descriptions and examples stay literal blocks (cliff's Sphinx extension reads them).
    """

    def __init__(self, parser: argparse.ArgumentParser, literal: bool = False) -> None:
        self.parser = parser
        self.literal = literal
        self.summary = ""

    def add_parser(self, name: str, help: str = "", description: str | None = None,  # noqa: A002
                   epilog: str | None = None, **_ignored: Any) -> argparse.ArgumentParser:
        self.summary = help or (description or "").split("\n", 1)[0]
        if description:
            self.parser.description = self._text(description)
        if epilog:
            self.parser.epilog = self._text(epilog)
        self.parser.formatter_class = HelpFormatter
        return self.parser

    def _text(self, text: str) -> str:
        return "::\n\n" + textwrap.indent(text, "   ") if self.literal else text


def _summary(module: Any) -> str:
    into = _Into(argparse.ArgumentParser(add_help=False, conflict_handler="resolve"))
    module.add_parser(into)
    return into.summary


def global_values(app_args: argparse.Namespace | None, parsed_args: argparse.Namespace) -> argparse.Namespace:
    """Copy the application's global options onto a command's arguments (the bodies read them there)."""
    for dest in GLOBAL_DESTS:
        setattr(parsed_args, dest, getattr(app_args, dest, None) if app_args is not None else None)
    parsed_args.config_file = list(parsed_args.config_file or [])
    parsed_args.config_dir = list(parsed_args.config_dir or [])
    parsed_args.debug = bool(parsed_args.debug)
    level = getattr(app_args, "verbose_level", 1) if app_args is not None else 1
    parsed_args.verbose = max(0, level - 1)  # cliff counts from 1 (warnings); -v is info
    parsed_args.quiet = level == 0  # -q: no progress or status lines
    return parsed_args


def one_line_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """``parser`` reporting what it refuses as the contract's one line (exit status 2), not a usage block."""

    def error(message: str) -> NoReturn:
        # argparse calls this while handling the error: its context says the kind
        sys.exit(contract.usage_error(command, f"{command}: {message}" if command else message,
                                      sys.exc_info()[1]))

    parser.error = error  # type: ignore[method-assign]
    return parser


class _FromModule:
    """Description, examples and arguments from a command module (``add_parser``)."""

    #: the command module (or any object with its ``add_parser(sub)``)
    module: Any
    app: Any

    def get_description(self) -> str:
        return _summary(self.module)

    def get_epilog(self) -> str:
        return ""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)  # type: ignore[misc]
        self.module.add_parser(_Into(parser, literal=self.app is None))
        return one_line_parser(parser, prog_name.removeprefix("notify-transport").strip())


class ModuleCommand(_FromModule, Command):
    """A command whose arguments and body come from a command module (``add_parser``, ``run``)."""

    def run(self, parsed_args: argparse.Namespace) -> int:
        global_values(self.app_args, parsed_args)
        return contract.run_command(lambda: super(ModuleCommand, self).run(parsed_args), self.cmd_name or "",
                                    parsed_args.debug)

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        return int(parsed_args.func(parsed_args) or EXIT_OK)


class ModuleLister(_FromModule, Lister):
    """A listing command: the module's body hands its rows to ``output.emit``; cliff formats them.

    The body's exit status is the command's; a body that ends before listing
    (an error line) prints no table.
    """

    def run(self, parsed_args: argparse.Namespace) -> int:
        global_values(self.app_args, parsed_args)
        parsed_args.output_format = parsed_args.formatter
        parsed_args.results = []
        self._status = EXIT_OK
        return contract.run_command(lambda: super(ModuleLister, self).run(parsed_args) or self._status,
                                    self.cmd_name or "", parsed_args.debug)

    def take_action(self, parsed_args: argparse.Namespace) -> tuple[Sequence[str], Iterable[Any]]:
        self._status = int(parsed_args.func(parsed_args) or EXIT_OK)
        if not parsed_args.results:
            return (), []
        headers, rows = parsed_args.results[-1]
        return headers, [tuple("-" if v is None else v for v in row) for row in rows] \
            if parsed_args.formatter in ("table", "value") else rows

    def produce_output(self, parsed_args: argparse.Namespace, column_names: Sequence[str],
                       data: Iterable[Sequence[Any]]) -> int:
        if not parsed_args.results:  # nothing listed (the body reported why)
            return EXIT_OK
        try:
            return super().produce_output(parsed_args, column_names, data)
        except ValueError:  # cliff refuses a -c or --sort-column that names no column
            asked = [*(getattr(parsed_args, "columns", None) or []),
                     *(getattr(parsed_args, "sort_columns", None) or [])]
            unknown = [c for c in asked if c not in column_names] or asked
            raise contract.CommandError(contract.BAD_INPUT, f"no column {', '.join(map(repr, unknown))}",
                                        f"choose among the columns {', '.join(column_names)}") from None


from notify_transport.cli import demo, pipeline_cmd, serve  # noqa: E402 - the bodies, after the wrappers
from notify_transport.cli.ops import lag, replay, send, tail, topics  # noqa: E402


def _command(name: str, base: type, module: Any, summary: str) -> type:
    """A command class of the entry point group; ``summary`` is its line in ``notify-transport help``."""
    return type(name, (base,), {"module": module, "__doc__": summary})


def _add_parser_only(add_parser: Callable[[Any], Any]) -> Any:
    """Stands for a command module whose ``add_parser`` sets the body (``func``) itself."""
    return type("module", (), {"add_parser": staticmethod(add_parser)})


Demo = _command("Demo", ModuleCommand, demo, "run notifier and listener pools and show what flows (main job)")
Send = _command("Send", ModuleCommand, send, "send notifications")
Tail = _command("Tail", ModuleCommand, tail,
                "follow topics and print notifications as they come (streams; -f value|json)")
Lag = _command("Lag", ModuleLister, lag, "show each pool's committed offset, end offset and lag")
Replay = _command("Replay", ModuleLister, replay,
                  "reset a pool's offsets to a time or offset to receive again (the plan is a list)")
Topics = _command("Topics", ModuleLister, topics, "list notification topics per vhost with their sizes")
Serve = _command("Serve", ModuleLister, serve, "run the listeners registered through entry points (--list: a list)")
PipelineRun = _command("PipelineRun", ModuleCommand, _add_parser_only(pipeline_cmd.add_run_parser),
                       "Spark pipeline: run the archive and statistics jobs")
PipelineReport = _command("PipelineReport", ModuleCommand, _add_parser_only(pipeline_cmd.add_report_parser),
                          "Spark pipeline: build the HTML report from the job outputs")
PipelineSetup = _command("PipelineSetup", ModuleCommand, _add_parser_only(pipeline_cmd.add_setup_parser),
                         "Spark pipeline: fetch Spark's Kafka connector and build the JVM decoder")
