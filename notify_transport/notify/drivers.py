"""Notifier drivers: what a :class:`~notify_transport.notify.Notifier` does with a notification.

Loaded by name with stevedore from the ``notify_transport.notify.drivers`` group
(third parties add theirs); built once per notifier as
``Driver(conf, topics, transport)``.
"""
from __future__ import annotations

import abc
import fnmatch
import logging
import warnings
from typing import Any, Callable

from oslo_config import cfg
from stevedore import extension, named

from notify_transport.drivers.config import register_opts
from notify_transport.drivers.naming import notification_topic
from notify_transport.exceptions import ConfigurationError
from notify_transport.target import Target
from notify_transport.secrets import mask

LOG = logging.getLogger(__name__)

#: The entry point group notifier drivers are registered under.
NAMESPACE = "notify_transport.notify.drivers"

#: ``(send(ctxt, msg, retry), topic or None)``: see :meth:`Driver.routes`
Route = tuple[Callable[[dict, dict, "int | None"], None], "str | None"]

routing_config_opt = cfg.StrOpt("routing_config", default="",
                                help="RoutingNotifier configuration file location.")


class Driver(abc.ABC):
    """Base class of notifier drivers (oslo.messaging's ``notify.notifier.Driver``)."""

    def __init__(self, conf: Any, topics: list[str], transport: Any) -> None:
        self.conf = conf
        self.topics = topics
        self.transport = transport

    @abc.abstractmethod
    def notify(self, ctxt: dict, msg: dict, priority: str, retry: int | None) -> None:
        """Send one notification at ``priority`` (``retry``: None/-1 forever, 0 none, N at most N)."""

    def routes(self, priority: str) -> list[Route]:
        """What the notifier calls for a notification at ``priority``, worked out once per priority.

        Each :data:`Route` is ``(send(ctxt, msg, retry), topic)``; a topic means the notifier logs
        a failure of that send and goes on (as oslo's messaging driver does per target), None
        that the failure reaches the caller. By default: :meth:`notify` at ``priority``.
        """
        def send(ctxt: dict, msg: dict, retry: int | None) -> None:
            self.notify(ctxt, msg, priority, retry)
        return [(send, None)]


def log_failed_send(msg: dict, topic: str | None, exc: Exception) -> None:
    """The one line a notification that could not be sent gets (the traceback with debug on)."""
    LOG.error("Could not send notification %s (%s) to %s: %s", msg["message_id"], msg["event_type"], topic, exc,
              exc_info=LOG.isEnabledFor(logging.DEBUG))


class MessagingDriver(Driver):
    """Sends through the transport without oslo's envelope (message version 1.0).

    Its routes are the transport's senders, one per topic: the notifier calls them
    directly, and logs (never raises) what one of them could not send.
    """

    version = 1.0

    def __init__(self, conf: Any, topics: list[str], transport: Any) -> None:
        super().__init__(conf, topics, transport)
        self._targets: dict[str, list[Target]] = {}
        self._send = transport._send_notification

    def _targets_for(self, priority: str) -> list[Target]:
        prio = priority.lower()
        targets = self._targets[priority] = [Target(topic=notification_topic(t, prio)) for t in self.topics]
        return targets

    def routes(self, priority: str) -> list[Route]:
        sender = getattr(self.transport, "_notification_sender", None)
        if sender is None:  # a transport of another kind: through notify(), which logs failures
            return super().routes(priority)
        routes: list[Route] = []
        for target in self._targets_for(priority):
            try:
                routes.append((sender(target, self.version), target.topic))
            except Exception as exc:  # noqa: BLE001 - failed per notification, logged, as a send failure is
                routes.append((_Refused(exc), target.topic))
        return routes

    def notify(self, ctxt: dict, msg: dict, priority: str, retry: int | None) -> None:
        targets = self._targets.get(priority) or self._targets_for(priority)
        send, version = self._send, self.version
        for target in targets:
            try:
                send(target, ctxt, msg, version, retry=retry)
            except Exception as exc:  # never break the caller, as oslo does
                log_failed_send(msg, target.topic, exc)


class _Refused:
    """A route whose sender could not be made: each send raises why, for the notifier to log."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __call__(self, ctxt: dict, msg: dict, retry: int | None) -> None:
        # the one error raised again and again: its traceback restarts each time instead of growing
        raise self.error.with_traceback(None)


class MessagingV2Driver(MessagingDriver):
    """Sends through the transport in oslo's 2.0 envelope (what consumers expect)."""

    version = 2.0


class LogDriver(Driver):
    """Logs each notification as JSON (secrets masked) to ``oslo.messaging.notification.<event_type>``.

    The logger name is oslo's, so logging configurations written for it keep working.
    """

    LOGGER_BASE = "oslo.messaging.notification"

    def notify(self, ctxt: dict, msg: dict, priority: str, retry: int | None) -> None:
        from notify_transport.drivers.envelope import dumps
        logger = logging.getLogger(f"{self.LOGGER_BASE}.{msg['event_type']}")
        method = getattr(logger, priority.lower(), None)
        if method is None:
            warnings.warn(f"Unable to log message as notify cannot find a logger with the priority "
                          f"specified {priority.lower()}")
            return
        method(dumps(mask(msg)))


class TestDriver(Driver):
    """Keeps every notification in ``self.sent`` as ``(ctxt, message, priority)`` for tests."""

    __test__ = False  # not a pytest test class

    def __init__(self, conf: Any, topics: list[str], transport: Any) -> None:
        super().__init__(conf, topics, transport)
        self.sent: list[tuple[dict, dict, str]] = []

    def notify(self, ctxt: dict, msg: dict, priority: str, retry: int | None) -> None:
        self.sent.append((ctxt, msg, priority))


class NoOpDriver(Driver):
    """Drops notifications (an explicit "off")."""

    def notify(self, ctxt: dict, msg: dict, priority: str, retry: int | None) -> None:
        return None


class RoutingDriver(Driver):
    """Sends each notification to the drivers its event type and priority are routed to.

    ``[oslo_messaging_notifications] routing_config`` names oslo's YAML of groups (driver
    -> ``accepted_events``/``accepted_priorities``, ``fnmatch`` patterns, priorities in any
    case; a driver without rules gets everything). The file is read when the notifier is
    built, so a broken file fails there and not in a caller of ``info()``.
    """

    def __init__(self, conf: Any, topics: list[str], transport: Any) -> None:
        super().__init__(conf, topics, transport)
        self._routes: dict[str, dict[str, dict[str, list[str]]]] = {}
        self._drivers: dict[str, Driver] = {}
        self._load()

    def _load(self) -> None:
        register_opts(self.conf, [routing_config_opt], "oslo_messaging_notifications")
        filename = self.conf.oslo_messaging_notifications.routing_config
        routes: dict = {}
        if filename:
            import yaml
            with open(filename, encoding="utf-8") as f:
                routes = yaml.safe_load(f) or {}
            if not isinstance(routes, dict) or not all(isinstance(g, dict) for g in routes.values()):
                raise ConfigurationError(f"Routing config {filename}: expected a mapping of groups, "
                                         "each a mapping of driver name to rules")
        names = sorted({name for group in routes.values() for name in group} - {"routing"})
        self._drivers = load_drivers(names, self.conf, self.topics, self.transport) if names else {}
        self._routes = routes

    def accepted_drivers(self, event_type: str, priority: str) -> set[str]:
        """Names of the drivers this event type and priority are routed to."""
        accepted = set()
        for group in self._routes.values():
            for driver, rules in group.items():
                checks = []
                for key, patterns in (rules or {}).items():
                    if key == "accepted_events":
                        checks.append(any(fnmatch.fnmatch(event_type, p) for p in patterns))
                    elif key == "accepted_priorities":
                        checks.append(any(fnmatch.fnmatch(priority, p.lower()) for p in patterns))
                if all(checks):
                    accepted.add(driver)
        return accepted

    def notify(self, ctxt: dict, msg: dict, priority: str, retry: int | None) -> None:
        for name in sorted(self.accepted_drivers(msg["event_type"], priority.lower())):
            driver = self._drivers.get(name)
            if driver is not None:
                LOG.debug("Routing %r notification to %r driver", msg["event_type"], name)
                driver.notify(ctxt, msg, priority, retry)


def load_drivers(names: list[str], conf: Any, topics: list[str], transport: Any) -> dict[str, Driver]:
    """Instantiate the named notifier drivers, in the order given; an unknown name is an error."""
    def failed(_manager: Any, entrypoint: Any, exc: BaseException) -> None:
        raise ConfigurationError(f"Notification driver {entrypoint.name!r} failed to load: {exc}") from exc

    manager = named.NamedExtensionManager(
        NAMESPACE, names=names, invoke_on_load=True, invoke_args=(conf, topics, transport),
        name_order=True, on_load_failure_callback=failed)
    loaded: dict[str, Driver] = {}
    for ext in manager:
        if ext.obj is None:  # invoke_on_load: stevedore made it, unless the factory returned None
            raise ConfigurationError(f"Notification driver {ext.name!r} built nothing")
        loaded[ext.name] = ext.obj
    missing = [n for n in names if n not in loaded]
    if missing:
        installed: extension.ExtensionManager[Any] = extension.ExtensionManager(NAMESPACE)
        known = sorted(e.name for e in installed)
        raise ConfigurationError(f"Unknown notification driver(s) {', '.join(map(repr, missing))}; "
                                 f"installed: {', '.join(known)}")
    return loaded
