"""The command line's one error contract: one kind per error, with its exit status and one line.

Every command ends an error with ``notify-transport: error: WHAT; try: NEXT STEP`` on
stderr and its kind's status (:data:`KINDS`). A body raises :class:`CommandError` or
lets a library exception through for :func:`classify`; :func:`run_command` applies the
contract and :func:`usage_error` covers argparse. ``doc/source/cli.rst`` has the table.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import traceback
from typing import Callable, TextIO

from notify_transport.exceptions import (AccessDenied, BrokerUnreachable, ConfigurationError,
                                         DriverLoadFailure, InvalidTransportURL, MessagingException,
                                         ServerListenError)

PROG = "notify-transport"


@dataclasses.dataclass(frozen=True)
class Kind:
    """One kind of error: its exit status, what it covers, and the step a user tries next."""

    name: str
    status: int
    covers: str
    #: the default next step; ``{command}`` is the command's name
    next_step: str


OK_STATUS = 0
BAD_INPUT = Kind("bad input", 2, "an option value, a payload, a column or a command that cannot be used",
                 "run '{prog} {command} --help'")
BAD_URL = Kind("bad transport URL", 2, "a transport URL that cannot be parsed or names no installed driver",
               "give a URL such as kafka://HOST:9092/VHOST or rabbit://USER:PASSWORD@HOST:5672/")
NOT_CONFIGURED = Kind("not configured", 2, "no transport URL configured, or a configuration the command "
                      "cannot use", "give --transport-url, a --config-file with [oslo_messaging_notifications] "
                      "transport_url, or set NOTIFY_TRANSPORT_URL")
MISSING_FILE = Kind("missing file", 2, "a file or folder named on the command line cannot be read",
                    "check the path and its permissions")
MISSING_EXTRA = Kind("missing extra", 2, "the command needs an optional extra, or a JVM piece, that is not "
                     "installed or set up", "pip install 'notify-transport[EXTRA]'")
REFUSED_CREDENTIALS = Kind("refused credentials", 2, "the broker refused the user, the password or the "
                           "virtual host", "check the user, the password and the virtual host of the "
                           "transport URL")
NOT_FOUND = Kind("not found", 1, "a pool, topic or listener that does not exist",
                 "list what exists with '{prog} topics' or '{prog} lag'")
FAILED = Kind("failed", 1, "the broker or the work refused or failed what was asked (sends not confirmed, "
              "a refused change, a run that failed)", "run again with --debug to see every step")
UNREACHABLE = Kind("broker unreachable", 3, "no broker answered within --connect-timeout",
                   "check that the broker runs at the URL's host and port, or give a longer "
                   "--connect-timeout")
INTERRUPTED = Kind("interrupted", 130, "stopped by Ctrl-C (SIGINT)", "run the command again")
INTERNAL = Kind("internal error", 1, "a defect of notify-transport itself",
                "run again with --debug for the traceback, and report it")

#: The next step when a notification topic is not where a command looked.
TOPICS_HINT = ("'notify-transport topics' lists the notification topics; check --topic, --priority and "
               "the URL's vhost")

#: Every kind, in the order the documentation lists them.
KINDS: tuple[Kind, ...] = (BAD_INPUT, BAD_URL, NOT_CONFIGURED, MISSING_FILE, MISSING_EXTRA,
                           REFUSED_CREDENTIALS, NOT_FOUND, FAILED, UNREACHABLE, INTERRUPTED, INTERNAL)


class CommandError(Exception):
    """An error a command found itself: its kind, what went wrong, and (optionally) a better next step."""

    def __init__(self, kind: Kind, message: str, next_step: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.next_step = next_step


class ArgumentKindError(argparse.ArgumentTypeError):
    """What an argument type refuses when the kind is not "bad input" (a file that cannot be read)."""

    def __init__(self, kind: Kind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def classify(exc: BaseException) -> CommandError:
    """The kind of ``exc`` (a command's own error or a library's) as a :class:`CommandError`."""
    if isinstance(exc, CommandError):
        return exc
    if isinstance(exc, ServerListenError) and isinstance(exc.ex, Exception):
        return classify(exc.ex)  # the listener's own cause says what to do
    if isinstance(exc, KeyboardInterrupt):
        return CommandError(INTERRUPTED, "interrupted")
    if isinstance(exc, (InvalidTransportURL, DriverLoadFailure)):
        return CommandError(BAD_URL, str(exc), getattr(exc, "fix", None))
    if isinstance(exc, AccessDenied):
        return CommandError(REFUSED_CREDENTIALS, str(exc))
    if isinstance(exc, BrokerUnreachable):
        return CommandError(UNREACHABLE, str(exc))
    missing = getattr(exc, "extra", None)
    if isinstance(exc, ConfigurationError) and isinstance(missing, str):
        return CommandError(MISSING_EXTRA, str(exc), f"pip install 'notify-transport[{missing}]'")
    if isinstance(exc, ConfigurationError) and getattr(exc, "next_step", None):  # a piece not set up
        return CommandError(MISSING_EXTRA, str(exc), str(getattr(exc, "next_step")))
    if isinstance(exc, ConfigurationError):
        return CommandError(BAD_INPUT, str(exc))
    if isinstance(exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return CommandError(MISSING_FILE, f"{where}{exc.strerror or exc}")
    if isinstance(exc, MessagingException):
        return CommandError(FAILED, str(exc))
    return CommandError(INTERNAL, f"{type(exc).__name__}: {exc}")


def line(error: CommandError, command: str = "") -> str:
    """The one line of ``error``: what went wrong, then the next step to try."""
    what = " ".join(error.message.split()) or error.kind.name
    # only the kind's own step is a template: a step a command wrote may hold any character
    step = error.next_step if error.next_step else error.kind.next_step.format(prog=PROG,
                                                                                command=command or "COMMAND")
    return f"{PROG}: error: {what}; try: {step}" if step else f"{PROG}: error: {what}"


def report(error: BaseException, command: str = "", out: TextIO | None = None) -> int:
    """Print ``error``'s one line on stderr (or ``out``) and return its exit status."""
    found = classify(error)
    print(line(found, command), file=out or sys.stderr)
    return found.kind.status


def run_command(body: Callable[[], int | None], command: str, debug: bool = False) -> int:
    """Run a command body under the contract: its status, or the error's one line and status.

    With ``debug`` an unexpected exception shows its traceback before its line.
    """
    try:
        return int(body() or OK_STATUS)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - every error ends in the one line
        found = classify(exc)
        if debug and found.kind in (INTERNAL, FAILED):
            traceback.print_exc(file=sys.stderr)
        return report(found, command)


def fail(kind: Kind, message: str, next_step: str | None = None, command: str = "") -> int:
    """Report an error found without an exception; return its exit status."""
    return report(CommandError(kind, message, next_step), command)


def usage_error(command: str, message: str, cause: BaseException | None = None) -> int:
    """What argparse refused (unknown option, bad value, missing argument), as the one line.

    ``cause``: the exception argparse is handling, whose context may be an
    :class:`ArgumentKindError` that gives the kind (bad input otherwise).
    """
    kind = BAD_INPUT
    while cause is not None:
        if isinstance(cause, ArgumentKindError):
            kind = cause.kind
            break
        cause = cause.__context__
    return report(CommandError(kind, message), command)
