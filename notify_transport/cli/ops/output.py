"""Results, progress lines and failures of the operator commands.

A listing command's rows go to cliff's formatters (table, json, yaml, csv,
value: :mod:`notify_transport.cli.commands`); progress, warnings and errors
go to stderr so that piping the results stays clean.
"""
from __future__ import annotations

import functools
import json
import sys
import time
from typing import Any, Callable, Sequence, TextIO

from tqdm import tqdm

from notify_transport.cli import contract
from notify_transport.drivers.kafka import ClusterError

EXIT_OK, EXIT_FAILURE = contract.OK_STATUS, contract.FAILED.status


def emit(args: Any, headers: Sequence[str], rows: Sequence[Sequence[Any]], document: Any = None) -> None:
    """A command's result: a cliff Lister's rows (``-f``/``-c``), else ``document`` as JSON with
    ``-f json`` or the rows' values separated by spaces (for shell loops).
    """
    results = getattr(args, "results", None)
    if results is not None:
        results.append((tuple(headers), [tuple(row) for row in rows]))
    elif args.output_format == "json":
        print_json(document)
    else:
        for row in rows:
            print(" ".join("-" if v is None else str(v) for v in row))


def print_json(value: Any, out: TextIO | None = None) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str), file=out or sys.stdout)


def warn(message: str) -> None:
    print(f"notify-transport: warning: {message}", file=sys.stderr)


def status(args: Any, message: str) -> None:
    """A line on stderr about what the command is doing; ``-q`` (``args.quiet``) leaves it out."""
    if not getattr(args, "quiet", False):
        print(message, file=sys.stderr)


def fail(message: str, kind: contract.Kind = contract.FAILED, next_step: str | None = None,
         command: str = "") -> int:
    """Report an error as the contract's one line (:mod:`~notify_transport.cli.contract`) and
    return its exit status (1 for a failure)."""
    return contract.fail(kind, message, next_step, command)


def failures_exit_1(run: Callable[..., int]) -> Callable[..., int]:
    """A broker that refused an operation is a failure (1), not a usage error nor an outage."""

    @functools.wraps(run)
    def wrapper(*args: Any, **kwargs: Any) -> int:
        try:
            return run(*args, **kwargs)
        except ClusterError as exc:
            return fail(str(exc))

    return wrapper


class Progress:
    """Progress of long work on stderr: a live tqdm line on a terminal, else a plain line at most
    every ``interval`` seconds (no carriage returns in logs); nothing with ``quiet`` (``-q``).
    """

    def __init__(self, label: str, total: int | None = None, stream: TextIO | None = None,
                 interval: float | None = None, rate: bool = True, quiet: bool = False) -> None:
        self.label = label
        self.quiet = quiet
        self.rate = rate
        self.total = total
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (0.2 if self.tty else 2.0)
        self.started = time.monotonic()
        self._last = self.started  # nothing shown for work shorter than one interval
        self._bar: tqdm | None = None
        self._done = 0

    def _format(self, done: int, extra: str) -> str:
        """``label done/total (rate/s) extra``: a whole number of items a second, as the
        summary lines count them (tqdm's own meter gives hundredths, 202182.74/s)."""
        text = f"{self.label} {done}" + (f"/{self.total}" if self.total is not None else "")
        if self.rate:
            elapsed = time.monotonic() - self.started
            text += f" ({done / elapsed:.0f}/s)" if elapsed > 0 else " (?/s)"
        return f"{text} {extra}" if extra else text

    def update(self, done: int, extra: str = "", force: bool = False) -> None:
        now = time.monotonic()
        if self.quiet or (not force and now - self._last < self.interval):
            return
        self._last = now
        if self.tty:
            if self._bar is None:
                self._bar = tqdm(total=self.total, desc=self.label, file=self.stream, mininterval=self.interval,
                                 unit="", dynamic_ncols=True, leave=True)
            self._bar.update(done - self._done)
            self._done = done
            if extra:
                self._bar.set_postfix_str(extra, refresh=False)
            self._bar.refresh()
        else:
            self.stream.write(self._format(done, extra) + "\n")
            self.stream.flush()

    def done(self, done: int, extra: str = "") -> None:
        """Show the final count and end the line."""
        self.update(done, extra, force=True)
        if self._bar is not None:
            self._bar.close()
            self._bar = None
