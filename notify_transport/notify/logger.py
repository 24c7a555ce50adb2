"""``LoggingNotificationHandler``: log records sent as notifications (``oslo_messaging.notify.logger``).

In a logging configuration, as with oslo.messaging::

    [handler_notifier]
    class=notify_transport.LoggingNotificationHandler
    level=ERROR
    args=('kafka://kafka1:9092/prod',)
"""
from __future__ import annotations

import logging
import threading
from typing import Any

from oslo_config import cfg

from notify_transport.notify.notifier import Notifier
from notify_transport.transport import get_notification_transport

__all__ = ["LoggingNotificationHandler"]


class LoggingNotificationHandler(logging.Handler):
    """Sends each record as a ``logrecord`` notification at the record's level.

    ``CONF`` is the configuration used (oslo's default, the global one);
    subclass to use another. A record logged while this handler is sending
    (e.g. the notifier reporting a failed send) is not sent again, so a
    broken transport cannot recurse.
    """

    CONF = cfg.CONF

    def __init__(self, url: str, publisher_id: str | None = None, driver: Any = None,
                 topic: str | list[str] | None = None, serializer: Any = None) -> None:
        self.notifier = Notifier(
            get_notification_transport(self.CONF, url), publisher_id, driver,
            serializer() if serializer else None,
            topics=topic if isinstance(topic, list) or topic is None else [topic])
        self._sending = threading.local()
        logging.Handler.__init__(self)

    def emit(self, record: logging.LogRecord) -> None:
        method = getattr(self.notifier, record.levelname.lower(), None)
        if method is None or getattr(self._sending, "active", False):
            return
        self._sending.active = True
        try:
            method(None, "logrecord", {
                "name": record.name,
                "levelno": record.levelno,
                "levelname": record.levelname,
                "exc_info": record.exc_info,
                "pathname": record.pathname,
                "lineno": record.lineno,
                "msg": record.getMessage(),
                "funcName": record.funcName,
                "thread": record.thread,
                "processName": record.processName,
                "process": record.process,
                "extra": getattr(record, "extra", None),
            })
        finally:
            self._sending.active = False

    def close(self) -> None:
        """Close the transport this handler made (``logging.shutdown()`` calls this at exit)."""
        try:
            self.notifier.transport.cleanup()
        finally:
            logging.Handler.close(self)
