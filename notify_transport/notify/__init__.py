"""Notifications: the notifier and the listeners (``oslo_messaging.notify``)."""
from notify_transport.notify.counters_log import CountersLog
from notify_transport.notify.dispatcher import NotificationResult
from notify_transport.notify.drivers import Driver
from notify_transport.notify.filter import NotificationFilter
from notify_transport.notify.listener import (BatchNotificationServer, NotificationServer,
                                              NotificationServerBase, get_batch_notification_listener,
                                              get_notification_listener)
from notify_transport.notify.log_handler import LoggingErrorNotificationHandler, PublishErrorsHandler
from notify_transport.notify.logger import LoggingNotificationHandler
from notify_transport.notify.notifier import Notifier
from notify_transport.transport import get_notification_transport

__all__ = ["Notifier", "NotificationFilter", "NotificationResult", "NotificationServer",
           "get_notification_listener", "get_batch_notification_listener",
           "BatchNotificationServer", "NotificationServerBase", "Driver", "LoggingNotificationHandler",
           "LoggingErrorNotificationHandler", "PublishErrorsHandler", "get_notification_transport",
           "CountersLog"]
