"""The dispatchers' common base, as ``oslo_messaging.dispatcher``."""
from __future__ import annotations

import abc
from typing import Any

from notify_transport.notify.dispatcher import NotificationDispatcher
from notify_transport.rpc.dispatcher import RPCDispatcher

__all__ = ["DispatcherBase"]


class DispatcherBase(abc.ABC):
    """Turns an incoming message into an endpoint call.

    The RPC and notification dispatchers are registered as its subclasses.
    """

    @abc.abstractmethod
    def dispatch(self, incoming: Any) -> Any:
        """Call the endpoint method the message names and return its result."""


DispatcherBase.register(RPCDispatcher)
DispatcherBase.register(NotificationDispatcher)
