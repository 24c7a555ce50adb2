"""The servers' common base, as ``oslo_messaging.server``: code that type-checks or catches
server errors keeps working after the import change."""
from __future__ import annotations

import abc
from typing import Any

from notify_transport.exceptions import ExecutorLoadFailure, MessagingServerError, ServerListenError
from notify_transport.lifecycle import ServerContext
from notify_transport.notify.listener import NotificationServer
from notify_transport.rpc.server import RPCServer

__all__ = ["ExecutorLoadFailure", "MessageHandlingServer", "MessagingServerError", "ServerListenError"]


class MessageHandlingServer(ServerContext, abc.ABC):
    """What every server offers: ``start()``, ``stop()``, ``wait()``, ``reset()``.

    :class:`~notify_transport.rpc.RPCServer` and
    :class:`~notify_transport.notify.NotificationServer` are registered as
    its subclasses, so ``isinstance(server, MessageHandlingServer)`` holds. A
    subclass written for oslo.messaging gets the same constructor, and every
    server is a context manager (``with server:`` starts, then stops and waits).
    """

    def __init__(self, transport: Any, dispatcher: Any, executor: str | None = "threading") -> None:
        if executor not in (None, "threading"):
            raise ExecutorLoadFailure(executor, "only the 'threading' executor is supported")
        self.transport = transport
        self.dispatcher = dispatcher
        self.executor_type = executor or "threading"

    @abc.abstractmethod
    def start(self) -> None:
        """Start receiving and dispatching."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop receiving; messages already taken are still dispatched."""

    @abc.abstractmethod
    def wait(self) -> None:
        """Wait until everything taken before ``stop()`` is dispatched."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Kept for oslo.messaging compatibility."""


MessageHandlingServer.register(RPCServer)
MessageHandlingServer.register(NotificationServer)
