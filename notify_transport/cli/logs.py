"""Logging of the command line: one line per event an operator needs, not one per retry.

pika, py4j, stevedore and librdkafka lines show only with ``--debug`` (the
commands report outcomes themselves), Spark's warnings are left out, the
pipeline's progress is shown, and a line repeated by a logger within
:data:`REPEAT_WINDOW` seconds is dropped.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import Iterator

#: Seconds during which an identical line from the same logger is not repeated.
REPEAT_WINDOW = 60.0
#: Loggers whose lines only ``--debug`` shows.
CHATTY = ("pika", "py4j", "stevedore", "notify_transport.cli.librdkafka",
          "notify_transport.drivers.kafka.librdkafka")
#: Loggers shown at INFO even without -v: progress of long work.
PROGRESS = ("notify_transport.pipeline",)

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class DropRepeats(logging.Filter):
    """Passes the first of identical records (same logger, same message) within ``window`` seconds."""

    def __init__(self, window: float = REPEAT_WINDOW) -> None:
        super().__init__()
        self.window = window
        self._last: dict[tuple[str, str], float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.getMessage())
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.window:
            return False
        self._last[key] = now
        if len(self._last) > 1000:  # bounded: forget the oldest half
            for old in sorted(self._last, key=self._last.__getitem__)[:500]:
                del self._last[old]
        return True


def configure(debug: bool = False, verbose: int = 0, log_file: str | None = None, quiet: bool = False) -> None:
    """Set up the root logger on stderr (and ``log_file``) for one command run (replacing earlier
    CLI handlers); ``quiet`` (``-q``) leaves the progress lines out too."""
    level = logging.DEBUG if debug or verbose > 1 else logging.INFO if verbose else logging.WARNING
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "notify_transport_cli", False):
            root.removeHandler(handler)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        handlers.append(logging.FileHandler(log_file))
    for handler in handlers:
        handler.notify_transport_cli = True  # type: ignore[attr-defined]
        handler.setFormatter(logging.Formatter(FORMAT))
        if not debug:
            handler.addFilter(DropRepeats())
        root.addHandler(handler)
    root.setLevel(level)
    for name in CHATTY:
        logging.getLogger(name).setLevel(logging.DEBUG if debug else logging.CRITICAL + 1)
    for name in PROGRESS:
        logging.getLogger(name).setLevel(level if quiet else min(level, logging.INFO))


@contextlib.contextmanager
def restored() -> Iterator[None]:
    """The logging set-up as it was before, once the block ends.

    ``main()`` is also called in-process (tests, scripts): a handler a command run
    left on the root logger would hold that run's ``sys.stderr`` and write to it
    after it is closed ("Logging error ... I/O operation on closed file").
    """
    root = logging.getLogger()
    names = ("", *CHATTY, *PROGRESS)
    levels = {name: logging.getLogger(name).level for name in names}
    handlers = list(root.handlers)
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


class HeldRecords(logging.Handler):
    """Holds a logger's records while a command runs, so that a failure is reported in one line.

    The command takes :attr:`last` as the cause of its error line, or calls :meth:`show`.
    """

    def __init__(self, name: str) -> None:
        super().__init__(logging.WARNING)
        self.logger = logging.getLogger(name)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) < 20:  # bounded: the first causes, not a history
            self.records.append(record)

    @property
    def first(self) -> str | None:
        """The first problem logged: the cause; what follows is mostly its consequences."""
        return self.records[0].getMessage() if self.records else None

    def __enter__(self) -> "HeldRecords":
        self._propagate = self.logger.propagate
        self.logger.addHandler(self)
        self.logger.propagate = False
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)
        self.logger.propagate = self._propagate

    def show(self) -> None:
        """Show the held records as they would have been shown (once each)."""
        shown = set()
        for record in self.records:
            if record.getMessage() not in shown:
                shown.add(record.getMessage())
                self.logger.handle(record)
        self.records.clear()
