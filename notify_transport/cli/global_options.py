"""Options every ``notify-transport`` command takes, before or after its name.

``notify-transport --config-file x lag`` and ``notify-transport lag
--config-file x`` mean the same: the top-level parser holds the options with
their defaults, and every subcommand parser (a :class:`CommandParser`, nested
ones included) holds them again with ``argparse.SUPPRESS`` defaults so that a
value given before the subcommand is not overwritten by the subcommand's
default. The repeatable ones (``--config-file``, ``--config-dir``) given after
the subcommand land in a ``*_after`` attribute and :func:`merge` appends them
to those given before, in command-line order.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import sys
from typing import Any, Sequence

#: Environment variable naming a transport URL when none is given otherwise.
URL_ENV = "NOTIFY_TRANSPORT_URL"
#: Distribution name whose metadata gives ``--version``.
DISTRIBUTION = "notify-transport"

#: Option strings of the global options (a subcommand adding one of them again is ignored).
GLOBAL_OPTION_STRINGS = frozenset({"--config-file", "--config-dir", "--transport-url", "--debug",
                                   "-v", "--verbose", "--version"})
#: Repeatable options: ``dest`` before the subcommand -> ``dest`` after it.
_REPEATABLE = {"config_file": "config_file_after", "config_dir": "config_dir_after"}


def version() -> str:
    """The installed distribution's version (package metadata, not a copy in the code)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from an unbuilt tree
        return "unknown (not installed)"


def add_global_options(parser: argparse.ArgumentParser, in_subcommand: bool) -> None:
    """The global options, in a group of their own; defaults only on the top-level parser."""
    group = parser.add_argument_group("global options (before or after the command)")

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if in_subcommand else value

    suffix = "_after" if in_subcommand else ""
    group.add_argument("--config-file", action="append", dest="config_file" + suffix, default=default([]),
                       metavar="PATH",
                       help="oslo.config file to read, may repeat (later files win)")
    group.add_argument("--config-dir", action="append", dest="config_dir" + suffix, default=default([]),
                       metavar="DIR",
                       help="directory whose .conf files are read after --config-file, may repeat")
    group.add_argument("--transport-url", metavar="URL", default=default(None),
                       help="e.g. kafka://host:9092/vhost or rabbit://user:pass@host:5672/; default: "
                            "[oslo_messaging_notifications] transport_url of the config files, "
                            f"then [DEFAULT] transport_url, then ${URL_ENV}")
    group.add_argument("--debug", action="store_true", default=default(False),
                       help="log everything, the client libraries' own lines included")
    group.add_argument("-v", "--verbose", action="count", default=default(0),
                       help="more logging (-v: info, -vv: debug)")
    group.add_argument("--version", action="version", version=f"%(prog)s {version()}",
                       help="print the version and exit")


#: Options whose value may start with "-" (``--to-time -1h``, ``--from -10``).
DASH_VALUE_OPTIONS = frozenset({"--to-time", "--from"})


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


def merge(args: argparse.Namespace) -> argparse.Namespace:
    """Append the repeatable options given after the subcommand to those given before it."""
    for before, after in _REPEATABLE.items():
        extra = getattr(args, after, None) or []
        setattr(args, before, list(getattr(args, before, None) or []) + list(extra))
        if hasattr(args, after):
            delattr(args, after)
    return args


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps descriptions and examples as written; shows a default when there is one to show."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or default in (None, False, [], {}, argparse.SUPPRESS)
                or not action.option_strings or "%(default)" in text):
            return text
        return f"{text} (default: %(default)s)"


class MainParser(argparse.ArgumentParser):
    """The top-level parser: joins dash values (:func:`join_dash_values`) and merges repeated options."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        argv = sys.argv[1:] if args is None else list(args)
        parsed, rest = super().parse_known_args(join_dash_values(argv), namespace)
        return merge(parsed), rest


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: it takes the global options too, so they work after the command name.

    Subparsers of a CommandParser are CommandParsers (argparse makes them of
    the parent's class), so ``pipeline run --config-file x`` works as well. A
    command that adds a global option itself (``--transport-url``, ...) gets
    the global one: the option keeps a single meaning across commands.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        add_global_options(self, in_subcommand=True)

    def add_argument(self, *names: Any, **kwargs: Any) -> Any:
        if names and GLOBAL_OPTION_STRINGS.intersection(names):
            return None
        return super().add_argument(*names, **kwargs)

