"""notify-transport's RabbitMQ driver inside oslo.messaging, under the scheme ``ntrabbit``.

Only the URL's scheme changes: exchanges, queues, envelopes and serialised exceptions
stay those of oslo's ``rabbit`` driver, so services on either scheme talk to each
other during a rolling upgrade. Options come from ``[oslo_messaging_rabbit]`` with the
URL query over them; our exceptions become oslo's. Under eventlet the driver stays
green, as oslo's kombu driver does: pika is pure Python, and its timer and loop lock
are green in a patched process (:mod:`notify_transport.integrations.eventlet_support`).
Only this module imports oslo.messaging; ``doc/source/migration.rst`` is the guide.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

import oslo_messaging
from oslo_messaging._drivers import base as oslo_base

from notify_transport import exceptions as nt_exceptions
from notify_transport.drivers.base import IncomingMessage
from notify_transport.drivers.rabbit import RabbitDriver
from notify_transport.integrations.eventlet_support import Offload
from notify_transport.integrations.oslo_messaging import (OffloadingDriver, oslo_error, our_url,
                                                          redacted_url)
from notify_transport.target import Target

LOG = logging.getLogger(__name__)

#: The scheme this driver is registered under in ``oslo.messaging.drivers``.
SCHEME = "ntrabbit"


def our_target(target: Any) -> Target:
    """oslo's Target -> ours (the fields the driver interface reads)."""
    return Target(exchange=target.exchange, topic=target.topic, server=target.server,
                  fanout=bool(target.fanout))


def rpc_error(exc: BaseException, target: Any = None) -> BaseException:
    """The exception an oslo caller expects for one of ours; a rebuilt remote exception as is.

    An endpoint's exception rebuilt from the reply (``<Class>_Remote``, a
    subclass of the original) is what oslo's own driver raises too, so it
    passes unchanged; our RemoteError becomes oslo's, with the same fields.
    """
    if isinstance(exc, nt_exceptions.RemoteError):
        return oslo_messaging.RemoteError(exc.exc_type, exc.value, exc.traceback)
    if isinstance(exc, nt_exceptions.MessageUndeliverable):
        return oslo_messaging.MessageUndeliverable(exc.exception, exc.exchange, exc.routing_key,
                                                   exc.message)
    if isinstance(exc, nt_exceptions.MessagingException):
        return oslo_error(exc, target)
    return exc


class OsloRpcMessage(oslo_base.RpcIncomingMessage):
    """One RPC request received by our driver, as oslo's RPC server handles it.

    Replies and heartbeats publish (may wait for the connection), through the
    driver's ``offload``. As oslo's own: never raises, logs why.
    """

    def __init__(self, incoming: IncomingMessage, offload: Offload) -> None:
        # oslo's server logs a request under msg_id. A call has the caller's; for a
        # cast oslo's base class would draw a fresh uuid4 (an urandom read per cast):
        # the sender's _unique_id is as unique and names the message on both sides.
        msg_id = getattr(incoming, "msg_id", None) or getattr(incoming, "unique_id", None)
        super().__init__(incoming.ctxt, incoming.message, msg_id=msg_id)
        #: the caller's call-monitor timeout: oslo's dispatcher sends heartbeats at half of it
        self.client_timeout = getattr(incoming, "client_timeout", None)
        self.incoming = incoming
        self._offload = offload

    def __repr__(self) -> str:
        return f"<OsloRpcMessage {self.incoming!r}>"

    def acknowledge(self) -> None:
        self._settle(self.incoming.acknowledge, "acknowledge")

    def requeue(self) -> None:
        self._settle(self.incoming.requeue, "requeue")

    def reply(self, reply: Any = None, failure: Any = None) -> None:
        self._settle(lambda: self.incoming.reply(reply, failure), "reply to")  # type: ignore[attr-defined]

    def heartbeat(self) -> None:
        self._settle(self.incoming.heartbeat, "send a heartbeat for")  # type: ignore[attr-defined]

    def _settle(self, action: Callable[[], None], what: str) -> None:
        try:
            self._offload(action)
        except Exception:  # noqa: BLE001 - oslo: "does not raise", log the reason
            LOG.exception("Could not %s %r", what, self.incoming)


class NtRabbitDriver(OffloadingDriver):
    """oslo.messaging driver ``ntrabbit://``: RPC and notifications through notify-transport's
    RabbitMQ driver, wire-compatible with oslo's ``rabbit://``; see the module docstring."""

    driver: RabbitDriver
    native_under_eventlet = False

    def __init__(self, conf: Any, url: Any, default_exchange: str | None = None,
                 allowed_remote_exmods: Iterable[str] | None = None) -> None:
        super().__init__(conf, url, default_exchange, allowed_remote_exmods)
        try:
            self.driver = RabbitDriver(conf, our_url(url, "rabbit"), default_exchange,
                                       allowed_remote_exmods)
        except nt_exceptions.InvalidTransportURL as exc:
            raise oslo_messaging.InvalidTransportURL(redacted_url(url), str(exc)) from exc

    def require_features(self, requeue: bool = False) -> None:
        """Requeue is supported: a requeued notification goes back to its queue."""

    def oslo_error(self, exc: BaseException, target: Any = None) -> BaseException:
        return rpc_error(exc, target)

    # -- RPC ---------------------------------------------------------------------------------
    def send(self, target: Any, ctxt: Any, message: Any, wait_for_reply: Any = None,
             timeout: Any = None, call_monitor_timeout: Any = None, retry: Any = None,
             transport_options: Any = None) -> Any:
        return self.offloaded(self.driver.send, our_target(target), ctxt, message,
                              wait_for_reply=bool(wait_for_reply), timeout=timeout, retry=retry,
                              transport_options=transport_options,
                              call_monitor_timeout=call_monitor_timeout, target=target)

    def listen(self, target: Any, batch_size: int, batch_timeout: float | None) -> oslo_base.Listener:
        """Consume the server's queues now, so that oslo's ``server.start()`` returns with them live."""
        listener = self.offloaded(self.started, lambda: self.driver.listen(our_target(target)),
                                  target=target)
        return self.oslo_listener(listener, batch_size, batch_timeout, wrap=OsloRpcMessage)

    # -- notifications --------------------------------------------------------------------
    def send_notification(self, target: Any, ctxt: Any, message: dict, version: float,
                          retry: int | None = None) -> None:
        self.offloaded(self.driver.send_notification, our_target(target), ctxt, message, version,
                       retry=retry, target=target)

    def listen_for_notifications(self, targets_and_priorities: Iterable[tuple[Any, str]],
                                 pool: str | None, batch_size: int,
                                 batch_timeout: float | None) -> oslo_base.Listener:
        """Subscribe now, so that oslo's ``server.start()`` returns with the queues consumed."""
        pairs = [(our_target(t), priority) for t, priority in targets_and_priorities]
        listener = self.offloaded(self.started, lambda: self.driver.listen_for_notifications(
            pairs, pool, batch_size, batch_timeout))
        return self.oslo_listener(listener, batch_size, batch_timeout)
