"""notify-transport's Kafka driver inside oslo.messaging, under the scheme ``ntkafka``.

A service keeps oslo.messaging and changes only the scheme of its notification URL
(``ntkafka://kafka1:9092,kafka2:9092/prod``) to get this driver's fixes: the vhost on
the listening side, delivery reports, listeners that read what is sent right after
``start()``, idempotent sends. Options come from ``[oslo_messaging_kafka]`` with the
URL query over them; RPC raises ``NotImplementedError`` as oslo's Kafka driver does.
Under eventlet every call that may wait in librdkafka goes through ``eventlet.tpool``
(:mod:`notify_transport.integrations.eventlet_support`). Only this module imports
oslo.messaging.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterable

import oslo_messaging
from oslo_messaging._drivers import base as oslo_base

from notify_transport import exceptions as nt_exceptions
from notify_transport.drivers.base import BaseDriver, IncomingMessage, Listener, close_listeners
from notify_transport.drivers.kafka import KafkaDriver
from notify_transport.drivers.reporting import RateLimitedLog
from notify_transport.drivers.ntkafka import driver_query
from notify_transport.integrations.eventlet_support import Offload, log_bridge
from notify_transport.target import Target
from notify_transport.url import TransportHost, TransportURL

LOG = logging.getLogger(__name__)

#: The scheme this driver is registered under in ``oslo.messaging.drivers``.
SCHEME = "ntkafka"
#: Longest wait of one underlying poll, so that a stop is noticed quickly.
POLL_SLICE = 1.0
#: Calls run where they are made (no eventlet): the default of the classes below.
_DIRECT = Offload(patched=False)


# -- URL ---------------------------------------------------------------------------------

def our_url(url: Any, transport: str) -> TransportURL:
    """oslo's TransportURL -> ours, under the scheme of our driver that carries it."""
    hosts = [TransportHost(h.hostname, h.port, h.username, h.password) for h in url.hosts]
    return TransportURL(conf=url.conf, transport=transport, virtual_host=url.virtual_host,
                        hosts=hosts, query=dict(url.query or {}))


def convert_url(url: Any) -> TransportURL:
    """oslo's TransportURL -> our ``kafka://`` TransportURL, its query read by
    :func:`notify_transport.drivers.ntkafka.driver_query`, as notify_transport's own
    ``ntkafka://`` driver reads it."""
    ours = our_url(url, "kafka")
    return TransportURL(conf=url.conf, transport="kafka", virtual_host=url.virtual_host,
                        hosts=ours.hosts, query=driver_query(ours))


def redacted_url(url: Any) -> str:
    """oslo's TransportURL as text for messages and reprs: no password."""
    return our_url(url, url.transport).redacted()


# -- errors ----------------------------------------------------------------------------------

def oslo_error(exc: BaseException, target: Any = None) -> BaseException:
    """The oslo.messaging exception a caller of oslo's API expects for one of ours.

    A configuration error stays ours (a ValueError naming the bad option).
    Nothing becomes oslo's TransportDriverError: oslo.messaging 18.3.1's
    notification server fails with an AttributeError when it catches one.
    """
    if isinstance(exc, nt_exceptions.InvalidTarget):
        return oslo_messaging.InvalidTarget(str(exc), target if target is not None else exc.target)
    if isinstance(exc, nt_exceptions.MessageDeliveryFailure):
        return oslo_messaging.MessageDeliveryFailure(str(exc))
    if isinstance(exc, nt_exceptions.MessagingTimeout):
        return oslo_messaging.MessagingTimeout(str(exc))
    if isinstance(exc, nt_exceptions.ConfigurationError):
        return exc
    return oslo_messaging.MessagingException(f"{type(exc).__name__}: {exc}")


# -- incoming messages and the listener -------------------------------------------------------

class OsloNotification(oslo_base.IncomingMessage):
    """One of our received notifications, as oslo's notification server handles it.

    Acknowledging may commit offsets: under eventlet it goes through ``offload``.
    """

    def __init__(self, incoming: IncomingMessage, offload: Offload | None = None) -> None:
        super().__init__(incoming.ctxt, incoming.message, msg_id=incoming.message.get("message_id"))
        self.incoming = incoming
        self._offload = offload or _DIRECT

    def acknowledge(self) -> None:
        try:
            self._offload(self.incoming.acknowledge)
        except Exception:  # noqa: BLE001 - oslo: "does not raise", log the reason
            LOG.exception("Could not acknowledge %s", self.incoming.coordinates)

    def requeue(self) -> None:
        try:
            self._offload(self.incoming.requeue)
        except Exception:  # noqa: BLE001
            LOG.exception("Could not requeue %s", self.incoming.coordinates)

    def __repr__(self) -> str:
        return f"<OsloNotification {self.incoming.coordinates}>"


class NotificationPollListener(oslo_base.PollStyleListener):
    """oslo's poll-style listener over one of our started listeners.

    ``poll`` keeps oslo's contract (a full batch, a batch whose ``batch_timeout`` ran out,
    nothing after ``timeout``, or what it has on ``stop()``) and never raises: errors are
    logged, rate-limited. Calls into the listener go through ``offload`` one poll slice at
    a time (tpool under eventlet); ``wrap`` makes each message the one oslo's server handles.
    """

    def __init__(self, listener: Listener, on_cleanup: Any = None, offload: Offload | None = None,
                 wrap: Callable[[IncomingMessage, Offload], oslo_base.IncomingMessage] | None = None) -> None:
        super().__init__(prefetch_size=-1)
        self.listener = listener
        self._wrap = wrap or OsloNotification
        self._on_cleanup = on_cleanup
        self._offload = offload or _DIRECT
        self._stopped = threading.Event()
        self._errors = RateLimitedLog(LOG, interval=30.0)

    def __repr__(self) -> str:
        return f"<NotificationPollListener {self.listener!r}>"

    def poll(self, timeout: float | None = None, batch_size: int = 1,
             batch_timeout: float | None = None) -> list[oslo_base.IncomingMessage]:
        size = max(1, int(batch_size or 1))
        if self.prefetch_size > 0:
            size = min(size, self.prefetch_size)
        out: list[oslo_base.IncomingMessage] = []
        deadline = None if timeout is None else time.monotonic() + timeout
        while not out:
            wait = self._wait_until(deadline)
            if wait is None:
                return out
            out.extend(self._take(wait, size))
        if len(out) >= size:
            return out
        batch_deadline = None if batch_timeout is None else time.monotonic() + batch_timeout
        while len(out) < size:
            wait = self._wait_until(batch_deadline)
            if wait is None:
                break
            out.extend(self._take(wait, size - len(out)))
        return out

    def _wait_until(self, deadline: float | None) -> float | None:
        """How long the next underlying poll may wait; None when stopped or past ``deadline``."""
        if self._stopped.is_set():
            return None
        if deadline is None:
            return POLL_SLICE
        left = deadline - time.monotonic()
        return min(POLL_SLICE, left) if left > 0 else None

    def _take(self, wait: float, count: int) -> list[oslo_base.IncomingMessage]:
        self._errors.summarize_due()  # the count of failed polls, once their interval has passed
        try:
            taken = self._offload(self.listener.poll, timeout=wait, max_messages=count)
            return [self._wrap(m, self._offload) for m in taken]
        except Exception as exc:  # noqa: BLE001 - oslo's poll must not raise
            # a class is hashable; mypy does not see type[Exception] as Hashable
            self._errors.log(logging.ERROR, type(exc),  # type: ignore[arg-type]
                             "%r: polling failed, retrying: %s", self, exc)
            self._stopped.wait(min(wait, POLL_SLICE))
            return []

    def stop(self) -> None:
        self._stopped.set()
        self._offload(self.listener.stop)

    def cleanup(self) -> None:
        self._stopped.set()
        try:
            self._offload(self._close)
        finally:
            self._errors.summarize()
            if self._on_cleanup is not None:
                self._on_cleanup(self)

    def _close(self) -> None:
        """Stop, commit what was settled, close the consumer (may wait: offloaded)."""
        self.listener.stop()
        try:
            self.listener.commit()
        except Exception:  # noqa: BLE001 - close anyway
            LOG.exception("%r: final commit failed", self)
        self.listener.cleanup()


# -- the driver -----------------------------------------------------------------------------------

class OffloadingDriver(oslo_base.BaseDriver):
    """What the oslo.messaging drivers over ours share.

    Under eventlet monkey-patching our drivers are switched to native threads
    before they are built, and every call into them that may wait is
    offloaded to ``eventlet.tpool`` (see :mod:`.eventlet_support`). Listeners
    are started before oslo gets them (its ``server.start()`` returns with the
    subscription live), kept until oslo cleans them up, and closed at
    :meth:`cleanup` if it did not.
    """

    prefetch_size = 0
    #: our driver (set by the subclass)
    driver: BaseDriver
    #: Whether our driver runs on native threads under eventlet (False: it stays green)
    native_under_eventlet = True

    def __init__(self, conf: Any, url: Any, default_exchange: str | None = None,
                 allowed_remote_exmods: Iterable[str] | None = None) -> None:
        super().__init__(conf, url, default_exchange, allowed_remote_exmods)
        #: how calls that may block reach our driver (through tpool under eventlet)
        self.offload = Offload() if self.native_under_eventlet else _DIRECT
        self._log_bridge = None
        if self.offload.patched:
            self._log_bridge = log_bridge(self.offload)
        self._listeners: list[NotificationPollListener] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {redacted_url(self._url)}>"

    def offloaded(self, func: Callable[..., Any], *args: Any, target: Any = None, **kwargs: Any) -> Any:
        """``func(*args, **kwargs)`` through the offload; our errors raised as oslo's."""
        try:
            return self.offload(func, *args, **kwargs)
        except nt_exceptions.MessagingException as exc:
            error = self.oslo_error(exc, target)
            if error is exc:
                raise
            raise error from exc

    def oslo_error(self, exc: BaseException, target: Any = None) -> BaseException:
        """The oslo.messaging exception for one of ours (see :func:`oslo_error`)."""
        return oslo_error(exc, target)

    @staticmethod
    def started(make: Callable[[], Listener]) -> Listener:
        """Create and start one of our listeners (may wait: offloaded); closed on failure."""
        listener = make()
        try:
            listener.start()
        except BaseException:
            listener.stop()
            listener.cleanup()
            raise
        return listener

    def oslo_listener(self, listener: Listener, batch_size: int, batch_timeout: float | None,
                      wrap: Callable[[IncomingMessage, Offload], oslo_base.IncomingMessage] | None = None
                      ) -> oslo_base.Listener:
        """oslo's listener over one of our started listeners, remembered until cleaned up."""
        poll_listener = NotificationPollListener(listener, on_cleanup=self._forget, offload=self.offload,
                                                 wrap=wrap)
        with self._lock:
            self._listeners.append(poll_listener)
        return oslo_base.PollStyleListenerAdapter(poll_listener, batch_size, batch_timeout)

    def _forget(self, poll_listener: NotificationPollListener) -> None:
        with self._lock:
            if poll_listener in self._listeners:
                self._listeners.remove(poll_listener)

    def flush(self, timeout: float | None = None) -> int:
        """Wait for sent notifications to be confirmed; return how many are still pending."""
        return int(self.offload(self.driver.flush, timeout))

    def delivery_stats(self) -> dict[str, int]:
        """Counters of sent, delivered and failed notifications."""
        return self.driver.delivery_stats()

    def cleanup(self) -> None:
        """Close listeners oslo did not clean up, then flush (bounded) and close the driver."""
        with self._lock:
            listeners, self._listeners = list(self._listeners), []
        close_listeners(listeners)
        self.offload(self.driver.cleanup)
        if self._log_bridge is not None:
            self._log_bridge.drain()  # what the driver logged while closing, now


class NtKafkaDriver(OffloadingDriver):
    """oslo.messaging driver ``ntkafka://``: notifications through notify-transport's Kafka driver."""

    driver: KafkaDriver

    def __init__(self, conf: Any, url: Any, default_exchange: str | None = None,
                 allowed_remote_exmods: Iterable[str] | None = None) -> None:
        super().__init__(conf, url, default_exchange, allowed_remote_exmods)
        try:
            kafka_url = convert_url(url)
            self.driver = KafkaDriver(conf, kafka_url, default_exchange, allowed_remote_exmods)
        except nt_exceptions.InvalidTransportURL as exc:
            # the caller of oslo's get_notification_transport() catches oslo's exception
            raise oslo_messaging.InvalidTransportURL(redacted_url(url), str(exc)) from exc

    def require_features(self, requeue: bool = False) -> None:
        """Requeue needs a delivery mode that supports it ([oslo_messaging_kafka] or the URL query)."""
        if requeue and not self.requeue_supported():
            raise NotImplementedError(
                f"Message requeueing is not supported by the {SCHEME} driver in its default delivery "
                "mode (offsets are committed before dispatch, as oslo's Kafka driver does); choose a "
                "delivery mode that can requeue in [oslo_messaging_kafka] or the transport URL query")

    def requeue_supported(self) -> bool:
        """Whether listeners of this transport can requeue, as the Kafka driver's settings say."""
        try:
            from notify_transport.drivers.kafka import listener_settings
            settings = listener_settings(self.driver.opts, {})
        except (ImportError, TypeError, nt_exceptions.ConfigurationError) as exc:
            LOG.debug("Cannot tell whether requeue is possible: %s", exc)
            return False
        return bool(getattr(settings, "requeue_possible", False))

    # -- notifications --------------------------------------------------------------------
    def send_notification(self, target: Any, ctxt: Any, message: dict, version: float,
                          retry: int | None = None) -> None:
        self.offloaded(self.driver.send_notification, Target(exchange=target.exchange, topic=target.topic),
                       ctxt, message, version, retry=retry, target=target)

    def listen_for_notifications(self, targets_and_priorities: Iterable[tuple[Any, str]], pool: str | None,
                                 batch_size: int, batch_timeout: float | None) -> oslo_base.Listener:
        """Subscribe now, so that oslo's ``server.start()`` returns with the subscription live."""
        pairs = [(Target(exchange=t.exchange, topic=t.topic), priority)
                 for t, priority in targets_and_priorities]
        listener = self.offloaded(self.started, lambda: self.driver.listen_for_notifications(
            pairs, pool, batch_size, batch_timeout))
        return self.oslo_listener(listener, batch_size, batch_timeout)

    # -- RPC: not carried ----------------------------------------------------------------------
    def send(self, target: Any, ctxt: Any, message: Any, wait_for_reply: Any = None,
             timeout: Any = None, call_monitor_timeout: Any = None, retry: Any = None,
             transport_options: Any = None) -> Any:
        raise NotImplementedError(f"The {SCHEME} driver carries notifications only; "
                                  "use a rabbit:// transport_url for RPC")

    def listen(self, target: Any, batch_size: int, batch_timeout: float | None) -> Any:
        raise NotImplementedError(f"The {SCHEME} driver carries notifications only; "
                                  "use a rabbit:// transport_url for RPC")
