"""``PublishErrorsHandler``: errors logged become ``error_notification`` notifications
(``oslo_messaging.notify.log_handler``)."""
from __future__ import annotations

import logging
from typing import Any

from oslo_config import cfg

from notify_transport import options
from notify_transport.notify.notifier import Notifier
from notify_transport.transport import get_notification_transport

__all__ = ["LoggingErrorNotificationHandler", "PublishErrorsHandler"]


class LoggingErrorNotificationHandler(logging.Handler):
    """Sends each record's message as ``error_notification`` from ``error.publisher``.

    Uses the global ``cfg.CONF``, as oslo.messaging does. When the ``log``
    notifier driver is configured it sends nothing: that driver would log the
    notification, which would be sent again, forever.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        logging.Handler.__init__(self, *args, **kwargs)
        self._transport = get_notification_transport(cfg.CONF)
        self._notifier = Notifier(self._transport, publisher_id="error.publisher")

    def emit(self, record: logging.LogRecord) -> None:
        if "log" in self._transport.conf[options.NOTIFICATIONS_GROUP].driver:
            return
        self._notifier.error({}, "error_notification", dict(error=record.msg))


PublishErrorsHandler = LoggingErrorNotificationHandler
