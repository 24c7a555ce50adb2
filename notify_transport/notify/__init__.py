"""Notifications: the notifier and the listeners."""
from notify_transport.notify.dispatcher import NotificationResult
from notify_transport.notify.filter import NotificationFilter
from notify_transport.notify.listener import (NotificationServer, get_batch_notification_listener,
                                              get_notification_listener)
from notify_transport.notify.notifier import Notifier

__all__ = ["Notifier", "NotificationFilter", "NotificationResult", "NotificationServer",
           "get_notification_listener", "get_batch_notification_listener"]
