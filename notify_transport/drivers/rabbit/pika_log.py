"""pika's own error lines about our connections' attempts, at debug.

For each connection attempt that fails, pika writes seven error lines (the socket, the
connector, the workflow, the stack) and two at info where :class:`~.connection.RabbitConnection`
writes one with the host and the cause, and tries again after a backoff. pika writes
them on the connection's I/O thread: the filter here lowers to debug what pika logs on
a thread that :func:`mark_io_thread` marked, and leaves pika's other users alone.
"""
from __future__ import annotations

import logging
import threading

#: The pika loggers that report a connection attempt, its failure and a lost connection.
PIKA_CONNECTION_LOGGERS = ("pika.connection", "pika.adapters.utils.connection_workflow",
                           "pika.adapters.base_connection", "pika.adapters.utils.io_services_utils",
                           "pika.adapters.select_connection")

_marks = threading.local()


def mark_io_thread() -> None:
    """Say that the calling thread runs a connection of ours (its pika lines go to debug)."""
    _marks.io_thread = True


class _OurConnectionsAtDebug(logging.Filter):
    """Lowers a record made on a marked thread to debug; drops it unless debug is on."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG or not getattr(_marks, "io_thread", False):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_FILTER = _OurConnectionsAtDebug()


def install() -> None:
    """Put the filter on pika's connection loggers (once; later calls change nothing)."""
    for name in PIKA_CONNECTION_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
