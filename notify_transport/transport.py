"""Transports: a driver chosen by the URL scheme, loaded through stevedore.

Drivers register under the ``notify_transport.drivers`` entry point namespace;
third-party packages add their own the same way. A :class:`Transport` is the
only object the notifier, listeners and RPC client/server hold.
"""
from __future__ import annotations

import logging
import weakref
from importlib import metadata as importlib_metadata
from types import TracebackType
from typing import Any, Callable, Iterable, NoReturn, TypeVar

from oslo_config import cfg
from stevedore import driver as sv_driver
from stevedore.exception import NoMatches

from notify_transport import options
from notify_transport.drivers import threads
from notify_transport.drivers.base import BaseDriver, Listener, NotificationSender
from notify_transport.exceptions import (ConfigurationError, DriverLoadFailure, InvalidTarget, InvalidTransportURL,
                                         NotSupported)
from notify_transport.target import Target
from notify_transport.url import TransportHost, TransportURL

__all__ = ["DriverLoadFailure", "InvalidTransportURL", "Transport", "TransportHost", "TransportURL",
           "TransportOptions", "get_transport", "set_transport_defaults", "NotificationTransport",
           "RPCTransport", "get_notification_transport", "get_rpc_transport", "installed_drivers",
           "open_transport_drivers"]

LOG = logging.getLogger(__name__)

DRIVER_NAMESPACE = "notify_transport.drivers"

_T = TypeVar("_T", bound="Transport")

#: Drivers of transports made and not cleaned up. Weak: a forgotten transport whose driver
#: runs no thread is collected; one whose threads keep its driver alive stays listed.
_OPEN: "weakref.WeakSet[BaseDriver]" = weakref.WeakSet()


def open_transport_drivers() -> list[BaseDriver]:
    """The drivers of this process's transports that are still open (:meth:`~Transport.cleanup`
    not called), also of transports no longer referenced.

    For tests and diagnostics: a test can check it left none behind.
    """
    return list(_OPEN)


def set_transport_defaults(control_exchange: str) -> None:
    """Set the default of ``[DEFAULT] control_exchange`` (as oslo.messaging's function does)."""
    cfg.set_defaults(options.transport_opts, control_exchange=control_exchange)


class TransportOptions:
    """Per-call options an RPC client hands to the driver (oslo.messaging's ``TransportOptions``)."""

    def __init__(self, at_least_once: bool = False) -> None:
        self._at_least_once = at_least_once

    @property
    def at_least_once(self) -> bool:
        """Ask the driver to confirm the message reached a queue (mandatory publish)."""
        return self._at_least_once

    def __repr__(self) -> str:
        return f"TransportOptions(at_least_once={self._at_least_once})"


def installed_drivers() -> list[str]:
    """Names of every driver registered under the entry point namespace."""
    return sorted({ep.name for ep in importlib_metadata.entry_points(group=DRIVER_NAMESPACE)})


def listener_options() -> tuple[list[cfg.Opt], tuple[str, ...]]:
    """The listener options of every installed driver (the first of a name, drivers in name
    order) and their listener keywords that are not options.

    A driver that cannot be imported is left out (and logged): it could not
    run a listener either.
    """
    opts: dict[str, cfg.Opt] = {}
    keywords: dict[str, None] = {}
    for name in installed_drivers():
        try:
            driver_cls = _driver_class(name)
        except Exception as exc:  # noqa: BLE001 - a broken third-party driver must not stop the others
            LOG.debug("driver %s not loaded for its listener options: %s", name, exc)
            continue
        for opt in getattr(driver_cls, "listener_options", lambda: [])():
            opts.setdefault(opt.name, opt)
        keywords.update(dict.fromkeys(getattr(driver_cls, "listener_keywords", lambda: ())()))
    return list(opts.values()), tuple(keywords)


class Transport:
    """A loaded driver plus the URL it was made from.

    ``with get_notification_transport(conf) as transport:`` calls
    :meth:`cleanup` on leaving the block (pending sends flushed, connections
    closed), also when the block raised.

    ``offload`` (set by the factories in an eventlet-monkey-patched process,
    for the Kafka driver) runs the calls that may wait off eventlet's hub.
    """

    def __init__(self, driver: BaseDriver, offload: Callable[..., Any] | None = None) -> None:
        self._driver = driver
        self._offload = offload
        self.conf = driver.conf
        self.url: TransportURL = driver.url
        try:
            _OPEN.add(driver)
        except TypeError:  # a third-party driver that cannot be weakly referenced: not listed
            pass

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url.redacted()}>"

    @property
    def driver(self) -> BaseDriver:
        return self._driver

    def _send_notification(self, target: Target, ctxt: dict, message: dict,
                           version: float, retry: int | None = None) -> None:
        if not target.topic:
            raise InvalidTarget("A topic is required to send", target)
        if self._offload is None:
            self._driver.send_notification(target, ctxt, message, version, retry=retry)
        else:
            self._offload(self._driver.send_notification, target, ctxt, message, version, retry=retry)

    def _notification_sender(self, target: Target, version: float) -> NotificationSender:
        """``send(ctxt, message, retry)`` for ``target`` (checked once here): the driver's
        own sender, run through the offload where the process needs one."""
        if not target.topic:
            raise InvalidTarget("A topic is required to send", target)
        send = self._driver.notification_sender(target, version)
        offload = self._offload
        if offload is None:
            return send

        def offloaded(ctxt: dict, message: dict, retry: int | None = None) -> None:
            offload(send, ctxt, message, retry)
        return offloaded

    def _listen_for_notifications(self, targets_and_priorities: list[tuple[Target, str]],
                                  pool: str | None, batch_size: int = 1,
                                  batch_timeout: float | None = None, **options: Any) -> Listener:
        for target, _priority in targets_and_priorities:
            if not target.topic:
                    raise InvalidTarget("A topic is required to listen", target)
        if self._offload is not None:
            raise ConfigurationError(
                f"The {self.url.transport} driver cannot listen through notify_transport's own API in "
                "an eventlet-monkey-patched process (its threads would run the callbacks off the hub); "
                "listen through oslo.messaging with transport_url ntkafka://..., which runs it there, "
                "or listen in a process that is not monkey-patched")
        return self._driver.listen_for_notifications(
            targets_and_priorities, pool, batch_size, batch_timeout, **options)

    def _send(self, target: Target, ctxt: dict, message: dict, wait_for_reply: bool = False,
              timeout: float | None = None, retry: int | None = None,
              transport_options: Any = None) -> Any:
        return self._driver.send(target, ctxt, message, wait_for_reply=wait_for_reply,
                                 timeout=timeout, retry=retry, transport_options=transport_options)

    def _listen(self, target: Target, batch_size: int = 1,
                batch_timeout: float | None = None) -> Listener:
        return self._driver.listen(target, batch_size, batch_timeout)

    def flush(self, timeout: float | None = None) -> int:
        """Wait for sent notifications to be confirmed; return how many are still pending."""
        if self._offload is None:
            return self._driver.flush(timeout)
        return self._offload(self._driver.flush, timeout)

    def check_connection(self, timeout: float) -> None:
        """Return once a broker answers; ``BrokerUnreachable`` after ``timeout`` seconds,
        ``AccessDenied`` for refused credentials (see ``BaseDriver.check_connection``)."""
        if self._offload is None:
            self._driver.check_connection(timeout)
        else:
            self._offload(self._driver.check_connection, timeout)

    def delivery_stats(self) -> dict[str, int]:
        """The driver's counters of sent, delivered and failed notifications."""
        return self._driver.delivery_stats()

    def cleanup(self) -> None:
        """Flush pending sends and close connections."""
        try:
            if self._offload is None:
                self._driver.cleanup()
            else:
                self._offload(self._driver.cleanup)
                from notify_transport.integrations.eventlet_support import drain_logs  # loaded with the offload

                drain_logs()  # what the driver logged while closing (in tpool), before the process may exit
        finally:
            _OPEN.discard(self._driver)

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cleanup()


class NotificationTransport(Transport):
    """A transport used for notifications."""


class RPCTransport(Transport):
    """A transport used for RPC."""


def load_driver(conf: cfg.ConfigOpts, url: TransportURL,
                allowed_remote_exmods: Iterable[str] | None = None) -> BaseDriver:
    """Instantiate the driver registered for ``url.transport``."""
    return _build_driver(_driver_factory(url), conf, url, allowed_remote_exmods)


def _driver_factory(url: TransportURL) -> Any:
    """What is registered for ``url.transport`` (a driver class), loaded but not called yet."""
    if not url.transport:
        raise InvalidTransportURL(url.redacted(), "The transport URL names no driver")
    try:
        return _driver_class(url.transport)
    except NoMatches:
        raise DriverLoadFailure(
            url.transport,
            f"No driver named {url.transport!r} for transport URL {url.redacted()}; "
            f"installed drivers: {', '.join(installed_drivers()) or 'none'}") from None
    except RuntimeError as exc:  # stevedore's "multiple drivers" error
        raise DriverLoadFailure(url.transport, str(exc)) from None


def _driver_class(name: str) -> Any:
    """The class registered as driver ``name``, imported but not instantiated (stevedore's
    NoMatches when none is; a failing import raised as :func:`_raise_failure` says)."""
    return sv_driver.DriverManager(DRIVER_NAMESPACE, name, invoke_on_load=False,
                                   on_load_failure_callback=_raise_load_failure).driver


def _build_driver(factory: Any, conf: cfg.ConfigOpts, url: TransportURL,
                  allowed_remote_exmods: Iterable[str] | None) -> BaseDriver:
    name = url.transport or ""
    try:
        driver = factory(conf, url, default_exchange=conf.control_exchange,
                         allowed_remote_exmods=list(allowed_remote_exmods or []))
    except Exception as exc:  # noqa: BLE001 - as stevedore reports a failed invoke_on_load
        _raise_failure(name, exc)
    if not isinstance(driver, BaseDriver):
        raise DriverLoadFailure(name, f"{type(driver).__name__} registered under "
                                f"{DRIVER_NAMESPACE!r} is not a notify_transport.drivers.base.BaseDriver")
    return driver


def _raise_load_failure(manager: Any, entrypoint: Any, exc: BaseException) -> None:
    _raise_failure(entrypoint.name, exc)


def _raise_failure(name: str, exc: BaseException) -> NoReturn:
    """Raise ``exc`` if it says what is wrong (a bad URL or value), else a DriverLoadFailure."""
    if isinstance(exc, (InvalidTransportURL, DriverLoadFailure)) or isinstance(exc, ValueError):
        raise exc
    raise DriverLoadFailure(name, f"Driver {name!r} failed to load: {exc}") from exc


def _make(cls: type[Transport], conf: cfg.ConfigOpts, url: str | TransportURL | None,
          allowed_remote_exmods: Iterable[str] | None) -> Transport:
    options.warn_ignored_file_options(conf)
    parsed = TransportURL.parse(conf, url)
    LOG.debug("Loading %s driver for %s", parsed.transport, parsed.redacted())
    factory = _driver_factory(parsed)
    offload = None
    if isinstance(factory, type) and threads.patched():
        # under eventlet only: the Kafka driver's threads native and its waits off the hub, set up
        # before it is built; a process eventlet did not patch never loads the integration
        from notify_transport.integrations.eventlet_support import api_offload

        offload = api_offload(factory)
    return cls(_build_driver(factory, conf, parsed, allowed_remote_exmods), offload)


def get_notification_transport(conf: cfg.ConfigOpts, url: str | TransportURL | None = None,
                               allowed_remote_exmods: Iterable[str] | None = None) -> NotificationTransport:
    """A transport for notifications.

    URL precedence, as oslo.messaging: ``url``, then
    ``[oslo_messaging_notifications] transport_url``, then ``[DEFAULT] transport_url``.
    """
    options.register_transport_opts(conf)
    options.register_notifier_opts(conf)
    if url is None:
        url = conf[options.NOTIFICATIONS_GROUP].transport_url or conf.transport_url
    return _make(NotificationTransport, conf, url, allowed_remote_exmods)  # type: ignore[return-value]


def get_rpc_transport(conf: cfg.ConfigOpts, url: str | TransportURL | None = None,
                      allowed_remote_exmods: Iterable[str] | None = None,
                      transport_cls: type[RPCTransport] = RPCTransport) -> RPCTransport:
    """A transport for RPC: ``url``, else ``[DEFAULT] transport_url``."""
    options.register_transport_opts(conf)
    if url is None:
        url = conf.transport_url
    transport = _make(transport_cls, conf, url, allowed_remote_exmods)
    if not transport.driver.supports_rpc:
        scheme = transport.url.transport
        transport.cleanup()
        raise NotSupported(f"The {scheme} driver carries notifications only and cannot be "
                           "used for RPC; use a rabbit:// transport_url for RPC (a hybrid "
                           "deployment sets [oslo_messaging_notifications] transport_url "
                           "to kafka:// and [DEFAULT] transport_url to rabbit://)")
    return transport  # type: ignore[return-value]


def get_transport(conf: cfg.ConfigOpts, url: str | TransportURL | None = None,
                  allowed_remote_exmods: Iterable[str] | None = None) -> Transport:
    """A transport from ``url`` or ``[DEFAULT] transport_url``, for any use."""
    options.register_transport_opts(conf)
    return _make(Transport, conf, url or conf.transport_url, allowed_remote_exmods)
