"""The small interface every driver implements.

The public API (``notify_transport.transport``, ``.notify``, ``.rpc``) talks to
brokers only through :class:`BaseDriver` and the listener and message types
here. Drivers import this module, never the API layer.
"""
from __future__ import annotations

import abc
import logging
import threading
from typing import Any, Callable, Iterable, Protocol, Sequence

from notify_transport.drivers.naming import PRIORITIES
from notify_transport.exceptions import NotSupported
from notify_transport.target import Target

#: Kept importable from here for drivers written against it; defined in :mod:`.naming`.
__all__ = ["PRIORITIES", "BaseDriver", "Executor", "IncomingMessage", "Listener", "NotificationSender",
           "close_listeners"]

LOG = logging.getLogger(__name__)

#: ``send(ctxt, message, retry)``: one target's notifications (:meth:`BaseDriver.notification_sender`)
NotificationSender = Callable[[dict, dict, "int | None"], None]


class IncomingMessage:
    """One received message: its context, its decoded body and where it came from.

    ``acknowledge()`` says processing ended; ``requeue()`` asks the driver to
    deliver it again later. What these do depends on the driver and its
    delivery mode (with Kafka's default mode the offset was already committed
    before dispatch, so both are no-ops).
    """

    __slots__ = ("ctxt", "message", "topic", "partition", "offset", "key",
                 "timestamp", "headers", "raw", "_on_ack", "_on_requeue", "_settled", "error")

    def __init__(self, ctxt: dict, message: dict, *, topic: str | None = None,
                 partition: int | None = None, offset: int | None = None,
                 key: bytes | None = None, timestamp: float | None = None,
                 headers: Sequence[tuple[str, bytes]] | None = None, raw: bytes | None = None,
                 on_ack: Callable[["IncomingMessage"], None] | None = None,
                 on_requeue: Callable[["IncomingMessage"], None] | None = None) -> None:
        self.ctxt = ctxt
        self.message = message
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.timestamp = timestamp
        self.headers = headers
        self.raw = raw
        self._on_ack = on_ack
        self._on_requeue = on_requeue
        self._settled = False
        #: The exception an endpoint raised on this message, if one did (set by the
        #: dispatcher; read with ``getattr(message, "error", None)``). Drivers use it
        #: to tell a failure from a requested requeue (dead-letter headers, hooks).
        self.error: BaseException | None = None

    @property
    def coordinates(self) -> str:
        """``topic[partition]@offset``, for log lines."""
        return f"{self.topic}[{self.partition}]@{self.offset}"

    def acknowledge(self) -> None:
        """Processing ended (successfully or not, and not to be retried)."""
        if not self._settled:
            self._settled = True
            if self._on_ack is not None:
                self._on_ack(self)

    def requeue(self) -> None:
        """Processing asked for the message to come back later."""
        if not self._settled:
            self._settled = True
            if self._on_requeue is not None:
                self._on_requeue(self)

    def __repr__(self) -> str:
        return (f"<IncomingMessage {self.coordinates} "
                f"event_type={self.message.get('event_type')!r}>")


class Executor(Protocol):
    """Runs dispatches for a listener (see :meth:`Listener.executor`)."""

    def submit(self, message: IncomingMessage, work: Callable[[IncomingMessage], Any]) -> None:
        """Run ``work(message)`` (dispatch, then acknowledge or requeue), now or on a worker."""


class Listener(abc.ABC):
    """A driver's subscription, polled by a listener thread of the API layer.

    The API layer calls :meth:`start`, :meth:`poll`, the messages'
    ``acknowledge()``/``requeue()``, :meth:`stop` (or :meth:`abort`),
    :meth:`drain`, :meth:`commit` and :meth:`cleanup`, plus one optional
    capability, :meth:`executor`. How a driver takes, commits and hands out
    messages (Kafka's chunks, delivery modes, workers) stays behind these.
    Batching (``batch_size``/``batch_timeout``) is the API layer's job: a
    driver returns what it has as soon as it has anything.
    """

    #: Most messages the driver takes from its broker in one go when the caller lets it
    #: (Kafka's ``max_poll_records``: one take, one commit); None when it has no such bound.
    #: A caller that dispatches one by one asks for at least this many, so that its own
    #: poll size never caps what the driver's option says.
    take_size: int | None = None

    def __init__(self, stopped: threading.Event | None = None) -> None:
        #: set by stop(); a driver whose own threads wait on it passes a native event
        #: (drivers/threads.py), the others get the standard module's, green under eventlet
        self._stopped = stopped if stopped is not None else threading.Event()

    @abc.abstractmethod
    def poll(self, timeout: float | None = None, max_messages: int = 1) -> list[IncomingMessage]:
        """Return 1 to ``max_messages`` messages, or ``[]`` once ``timeout``
        seconds passed or :meth:`stop` was called.

        After :meth:`stop`, a poll returns (without waiting) what the driver had
        already received for this listener and not handed out yet, then ``[]``:
        a caller stopping gracefully polls until it gets ``[]`` before
        :meth:`cleanup`, so nothing the driver already took (or committed) is lost.
        """

    def start(self) -> None:
        """Begin receiving. Returns once messages sent from now on will be received."""

    def stop(self) -> None:
        """Stop receiving; a poll in progress returns soon."""
        self._stopped.set()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def commit(self) -> None:
        """Commit the progress of settled messages, where the driver tracks it."""

    def cleanup(self) -> None:
        """Release connections. Called once, after :meth:`stop`."""

    # -- the one optional capability: the driver runs each dispatch itself ----------
    def executor(self, batch: bool) -> Executor | None:
        """Who runs the dispatches of this listener's messages, or None for the caller, inline.

        A driver returns an :class:`Executor` when it runs dispatches itself
        (worker threads, lifecycle hooks, completion tracking); the caller then
        hands it every message instead of dispatching it. ``batch`` says the
        caller dispatches whole batches: a driver that cannot run those raises
        :class:`~notify_transport.exceptions.ConfigurationError`, one that
        leaves them to the caller returns None. Called once, before :meth:`start`.
        """
        return None

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until the driver's own work for settled messages (its executor's dispatches,
        copies it still sends) finished; False if ``timeout`` ran out."""
        return True

    def abort(self) -> None:
        """Abrupt stop: stop receiving and drop work not started (it is not acknowledged)."""
        self.stop()

    def metrics(self) -> dict[str, Any]:
        """The driver's own counters for this listener (none by default)."""
        return {}


class _Closable(Protocol):
    def stop(self) -> None: ...

    def cleanup(self) -> None: ...


def close_listeners(listeners: Iterable[_Closable]) -> None:
    """Stop and clean up each listener; one that fails is logged and the others are closed anyway.

    For a transport's cleanup, which must release every listener its user did
    not close (our listeners in a driver, oslo's over ours in the integration).
    """
    for listener in listeners:
        try:
            listener.stop()
            listener.cleanup()
        except Exception:  # noqa: BLE001 - close the others anyway
            LOG.exception("Closing %r failed", listener)


class BaseDriver(abc.ABC):
    """What the public API needs of a broker.

    ``conf`` is an ``oslo_config.cfg.ConfigOpts``; ``url`` a
    :class:`notify_transport.url.TransportURL` whose query overrides options.
    """

    #: The transport URL scheme this driver is registered under.
    name = "base"
    #: Whether :meth:`send` and :meth:`listen` (RPC) are implemented.
    supports_rpc = False
    #: Default notification format version used by the messagingv2 driver.
    default_notification_version = 2.0

    def __init__(self, conf: Any, url: Any, default_exchange: str | None = None,
                 allowed_remote_exmods: Iterable[str] | None = None) -> None:
        self.conf = conf
        self.url = url
        self.default_exchange = default_exchange
        self.allowed_remote_exmods = list(allowed_remote_exmods or [])

    # -- what a listener may be given ----------------------------------------
    @classmethod
    def listener_options(cls) -> list[Any]:
        """The options a listener of this driver accepts as keywords of
        ``listen_for_notifications``: oslo.config ``Opt`` objects named as the keywords.

        The API layer offers them in ``serve``'s ``[listener:NAME]`` sections
        without knowing the driver. None by default.
        """
        return []

    @classmethod
    def listener_keywords(cls) -> tuple[str, ...]:
        """Listener keywords that are objects rather than options (none by default)."""
        return ()

    # -- notifications -------------------------------------------------------
    @abc.abstractmethod
    def send_notification(self, target: Target, ctxt: dict, message: dict,
                          version: float, retry: int | None = None) -> None:
        """Publish one notification to ``target.topic`` (already ``topic.priority``).

        May return before the broker confirmed it; failures found later are
        reported through logging and :meth:`delivery_stats`, and :meth:`flush`
        waits for confirmation. Raises MessageDeliveryFailure when the message
        cannot even be queued.
        """

    def notification_sender(self, target: Target, version: float) -> NotificationSender:
        """``send(ctxt, message, retry)`` for notifications to ``target`` in envelope ``version``:
        what :meth:`send_notification` does, with what depends only on the target worked out
        once (a driver overrides it to keep that off each notification's path)."""
        send = self.send_notification

        def sender(ctxt: dict, message: dict, retry: int | None = None) -> None:
            send(target, ctxt, message, version, retry=retry)
        return sender

    @abc.abstractmethod
    def listen_for_notifications(self, targets_and_priorities: list[tuple[Target, str]],
                                 pool: str | None, batch_size: int,
                                 batch_timeout: float | None, **options: Any) -> Listener:
        """Subscribe to ``topic.priority`` for each pair; ``pool`` groups competing listeners."""

    def flush(self, timeout: float | None = None) -> int:
        """Wait for queued notifications to be confirmed; return how many are still pending."""
        return 0

    def delivery_stats(self) -> dict[str, int]:
        """Counters of sent, delivered and failed notifications."""
        return {}

    def check_connection(self, timeout: float) -> None:
        """Return once a broker of the URL answers.

        Raises ``BrokerUnreachable`` when none answers within ``timeout`` seconds and
        ``AccessDenied`` (both in ``notify_transport.exceptions``) when one refuses
        the credentials, so that a caller can tell an outage from a wrong URL before it
        sends anything. A driver without a broker returns at once.
        """

    # -- RPC -----------------------------------------------------------------
    def send(self, target: Target, ctxt: dict, message: dict, wait_for_reply: bool = False,
             timeout: float | None = None, retry: int | None = None,
             transport_options: Any = None) -> Any:
        """Send an RPC request; return the reply when ``wait_for_reply``."""
        raise NotSupported(f"The {self.name} driver carries notifications only; "
                           "use a rabbit:// transport_url for RPC")

    def listen(self, target: Target, batch_size: int = 1,
               batch_timeout: float | None = None) -> Listener:
        """Receive RPC requests for ``target``."""
        raise NotSupported(f"The {self.name} driver carries notifications only; "
                           "use a rabbit:// transport_url for RPC")

    def cleanup(self) -> None:
        """Flush what can be flushed and close every connection."""
