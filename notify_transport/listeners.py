"""Listeners registered through entry points: the ``notify_transport.listeners`` group.

An entry names an endpoint class (built with no argument or with the
``ConfigOpts``) or a factory; its attributes (:data:`ATTRIBUTES`) and a
``[listener:NAME]`` section describe the listener (doc/source/listeners.rst).
Entries are loaded with stevedore, only those asked for; one that fails is
reported by name.
"""
from __future__ import annotations

import copy
import dataclasses
import inspect
import logging
import threading
import time
from importlib import metadata as importlib_metadata
from typing import Any, Iterable, Sequence

from oslo_config import cfg
from stevedore import named

from notify_transport.drivers.naming import PRIORITIES
from notify_transport.drivers.config import register_opts
from notify_transport.exceptions import ConfigurationError
from notify_transport.notify.filter import NotificationFilter
from notify_transport.notify.listener import (NotificationServer, get_batch_notification_listener,
                                              get_notification_listener)
from notify_transport import precedence
from notify_transport.options import NOTIFICATIONS_GROUP, register_notifier_opts, warn_ignored_file_options
from notify_transport.precedence import Source, attributes, warn_deprecated
from notify_transport.target import Target
from notify_transport.transport import listener_options

LOG = logging.getLogger(__name__)

#: The entry point group service packages register their listeners in.
NAMESPACE = "notify_transport.listeners"
#: The config section of listener NAME is ``[listener:NAME]``.
SECTION_PREFIX = "listener:"

#: Listener attributes an endpoint may declare, besides the drivers' listener options
#: (:meth:`notify_transport.drivers.base.BaseDriver.listener_options`, Kafka's delivery options)
#: and keywords (Kafka's ``hooks``).
ATTRIBUTES = ("topics", "pool", "filter_rule", "batch_size", "batch_timeout", "allow_requeue")

#: Options of a ``[listener:NAME]`` section. Unset (None) means: the endpoint's
#: attribute, else the library's default.
_own_opts = [
    cfg.ListOpt("topics", help="Notification topics this listener subscribes to. Default: the "
                               "endpoint's topics attribute, else [oslo_messaging_notifications] topics."),
    cfg.StrOpt("pool", help="Listener pool (Kafka consumer group); every pool receives every "
                            "notification. Default: the endpoint's pool attribute, else the "
                            "listener's entry point name."),
    cfg.StrOpt("filter_event_type",
               help="Regular expression matched at the start of the event type; with "
                    "filter_publisher_id it replaces the endpoint's filter_rule."),
    cfg.StrOpt("filter_publisher_id",
               help="Regular expression matched at the start of the publisher id; with "
                    "filter_event_type it replaces the endpoint's filter_rule."),
    cfg.IntOpt("batch_size", min=1,
               help="Notifications per endpoint call, for endpoints that declare batch_size "
                    "(batch endpoints)."),
    cfg.FloatOpt("batch_timeout", min=0,
                 help="Seconds a batch may wait to fill up, for batch endpoints."),
    cfg.BoolOpt("allow_requeue",
                help="Whether an endpoint returning REQUEUE (or raising) has the notification "
                     "delivered again (Kafka: through the retry topic)."),
]


def _unset_default(opt: cfg.Opt) -> cfg.Opt:
    """A driver's listener option with no default: unset falls through to the transport's."""
    mine = copy.deepcopy(opt)
    mine.default = None
    mine.help = f"{opt.help} Default: the endpoint's {opt.name} attribute, else the driver's option."
    return mine


def listener_opts() -> list[cfg.Opt]:
    """The options of one ``[listener:NAME]`` section (fresh copies): ours, then the drivers'."""
    return copy.deepcopy(_own_opts) + [_unset_default(opt) for opt in listener_options()[0]]


def section(name: str) -> str:
    """The config section of listener ``name``."""
    return f"{SECTION_PREFIX}{name}"


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    """The per-listener options, under a placeholder section, for documentation."""
    return [(section("NAME"), listener_opts())]


@dataclasses.dataclass(frozen=True)
class RegisteredEntry:
    """One entry point of the group, not imported: its name, its target and who declared it."""

    name: str
    value: str
    distribution: str


@dataclasses.dataclass(frozen=True)
class BrokenEntry:
    """An entry that could not be imported or built, and why."""

    entry: RegisteredEntry
    error: str

    def __str__(self) -> str:
        return (f"listener {self.entry.name!r} ({self.entry.value}, from {self.entry.distribution}): "
                f"{self.error}")


class UnknownListenerError(ConfigurationError):
    """Names were asked for that no distribution registers."""

    def __init__(self, unknown: Sequence[str], registered: Sequence[str]) -> None:
        self.unknown = list(unknown)
        self.registered = list(registered)
        super().__init__(
            f"No listener named {', '.join(map(repr, self.unknown))} in entry point group {NAMESPACE}; "
            f"registered: {', '.join(self.registered) or 'none'}")


class BrokenListenerError(ConfigurationError):
    """Entries failed to import or build; nothing was started."""

    def __init__(self, broken: Sequence[BrokenEntry]) -> None:
        self.broken = list(broken)
        lines = "\n".join(f"  {b}" for b in self.broken)
        super().__init__(f"{len(self.broken)} listener entry point(s) failed to load (nothing "
                         f"started; --skip-broken / skip_broken=True runs the others):\n{lines}")


def registered_entries() -> list[RegisteredEntry]:
    """Every entry of the group, sorted by name, with its distribution; nothing is imported."""
    dists: dict[tuple[str, str], str] = {}
    for ep in importlib_metadata.entry_points(group=NAMESPACE):
        dist = getattr(ep, "dist", None)
        dists.setdefault((ep.name, ep.value), f"{dist.name} {dist.version}" if dist else "unknown")
    # stevedore's view (what it will load) is the reference; the distribution comes from metadata
    eps = named.NamedExtensionManager(NAMESPACE, names=[]).list_entry_points()
    entries = {RegisteredEntry(ep.name, ep.value, dists.get((ep.name, ep.value), "unknown")) for ep in eps}
    return sorted(entries, key=lambda e: (e.name, e.distribution, e.value))


@dataclasses.dataclass
class EntryPointListener:
    """A built endpoint and everything needed to run it as a listener."""

    entry: RegisteredEntry
    endpoint: Any
    topics: list[str]
    pool: str
    batch: bool
    batch_size: int
    batch_timeout: float | None
    allow_requeue: bool
    #: the delivery options set for this listener (attribute or section), passed to the driver
    driver_options: dict[str, Any]

    @property
    def name(self) -> str:
        return self.entry.name

    def server(self, transport: Any) -> NotificationServer:
        """A (not yet started) server running this listener on ``transport``."""
        targets = [Target(topic=topic) for topic in self.topics]
        if self.batch:
            return get_batch_notification_listener(
                transport, targets, [self.endpoint], allow_requeue=self.allow_requeue, pool=self.pool,
                batch_size=self.batch_size, batch_timeout=self.batch_timeout, **self.driver_options)
        return get_notification_listener(transport, targets, [self.endpoint],
                                         allow_requeue=self.allow_requeue, pool=self.pool,
                                         **self.driver_options)


class _Refiltered:
    """An endpoint seen through another ``filter_rule`` (the config section's)."""

    def __init__(self, endpoint: Any, rule: NotificationFilter) -> None:
        self._endpoint = endpoint
        self.filter_rule = rule

    def __getattr__(self, name: str) -> Any:
        return getattr(self._endpoint, name)

    def __repr__(self) -> str:
        return f"<{self._endpoint!r} filtered by [listener] filter_* options>"


def _build(plugin: Any, conf: cfg.ConfigOpts) -> Any:
    """Instantiate the class or call the factory, passing ``conf`` when it takes an argument."""
    params: list[inspect.Parameter]
    try:
        params = list(inspect.signature(plugin).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: call it bare
        params = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    endpoint = plugin(conf) if positional else plugin()
    if endpoint is None:
        raise ConfigurationError("the factory returned None instead of an endpoint")
    if not any(callable(getattr(endpoint, prio, None)) for prio in PRIORITIES):
        raise ConfigurationError(f"{endpoint!r} has no method named after a priority "
                                 f"({', '.join(PRIORITIES)})")
    return endpoint


def _topics(value: Any) -> list[str]:
    topics = [value] if isinstance(value, str) else value
    if not isinstance(topics, (list, tuple)) or not topics \
            or not all(isinstance(t, str) and t for t in topics):
        raise ConfigurationError(f"topics must be a non-empty list of topic names, got {value!r}")
    return list(topics)


def describe(entry: RegisteredEntry, endpoint: Any, conf: cfg.ConfigOpts) -> EntryPointListener:
    """The listener of ``endpoint``: its attributes with the ``[listener:NAME]`` section on top."""
    group = section(entry.name)
    section_opts = listener_opts()
    register_opts(conf, section_opts, group)
    register_notifier_opts(conf)
    warn_ignored_file_options(conf, {group: [opt.dest for opt in section_opts]})
    values = conf[group]

    driver_opts, keywords = listener_options()
    delivery = [opt.name for opt in driver_opts]
    names = [opt.name for opt in section_opts] + list(keywords)
    said = {Source.SECTION: {name: getattr(values, name, None) for name in names},  # hooks: an attribute only
            Source.ENDPOINT: attributes(endpoint, names)}
    warn_deprecated(delivery, said, f"listener {entry.name}")

    def pick(name: str, default: Any = None) -> Any:
        return precedence.pick(name, said, default)

    topics = pick("topics")
    topics = _topics(conf[NOTIFICATIONS_GROUP].topics if topics is None else topics)
    pool = pick("pool", entry.name)
    if not isinstance(pool, str) or not pool:
        raise ConfigurationError(f"pool must be a non-empty string, got {pool!r}")
    batch = hasattr(endpoint, "batch_size") or hasattr(endpoint, "batch_timeout")
    if not batch and (values.batch_size is not None or values.batch_timeout is not None):
        raise ConfigurationError(f"[{group}] batch_size / batch_timeout apply to batch endpoints only "
                                 "(those that declare a batch_size attribute)")
    batch_size = pick("batch_size")
    batch_size = 1 if batch_size is None else batch_size  # declared None: a batch endpoint, default size
    batch_timeout = pick("batch_timeout")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ConfigurationError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if batch_timeout is not None and (not isinstance(batch_timeout, (int, float)) or batch_timeout < 0):
        raise ConfigurationError(f"batch_timeout must be a number of seconds >= 0, got {batch_timeout!r}")
    if values.filter_event_type is not None or values.filter_publisher_id is not None:
        endpoint = _Refiltered(endpoint, NotificationFilter(event_type=values.filter_event_type,
                                                            publisher_id=values.filter_publisher_id))
    rule = getattr(endpoint, "filter_rule", None)
    if rule is not None and not callable(getattr(rule, "match", None)):
        raise ConfigurationError(f"filter_rule must be a NotificationFilter, got {rule!r}")
    options = {name: pick(name) for name in delivery + list(keywords)}
    return EntryPointListener(
        entry=entry, endpoint=endpoint, topics=topics, pool=pool, batch=batch, batch_size=batch_size,
        batch_timeout=batch_timeout, allow_requeue=bool(pick("allow_requeue", False)),
        driver_options={k: v for k, v in options.items() if v is not None})


def load_listeners(conf: cfg.ConfigOpts, names: Sequence[str] | None = None,
                   skip_broken: bool = False) -> tuple[list[EntryPointListener], list[BrokenEntry]]:
    """Import and build the listeners ``names`` (default: every registered one), in name order.

    Raises :class:`UnknownListenerError` for a name nobody registers, and
    :class:`BrokenListenerError` when an entry fails to import or build unless
    ``skip_broken`` (the broken ones are then returned: :func:`log_skipped` logs them).
    """
    registered = registered_entries()
    known = sorted({e.name for e in registered})
    wanted = list(dict.fromkeys(names)) if names else known
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise UnknownListenerError(unknown, known)
    by_key = {(e.name, e.value): e for e in registered}
    broken: list[BrokenEntry] = []

    def failed(_manager: Any, ep: Any, exc: BaseException) -> None:
        broken.append(BrokenEntry(by_key.get((ep.name, ep.value), RegisteredEntry(ep.name, ep.value, "unknown")),
                                  f"cannot import it: {type(exc).__name__}: {exc}"))

    # without name_order, every extension of a name registered twice is kept: that is an error here
    manager = named.NamedExtensionManager(NAMESPACE, names=wanted, on_load_failure_callback=failed)
    loaded: dict[str, list[tuple[RegisteredEntry, Any]]] = {}
    for ext in manager.extensions:
        entry = by_key.get((ext.name, ext.entry_point.value),
                           RegisteredEntry(ext.name, ext.entry_point.value, "unknown"))
        loaded.setdefault(ext.name, []).append((entry, ext.plugin))
    listeners: list[EntryPointListener] = []
    for name in wanted:
        candidates = loaded.get(name, [])
        if len(candidates) > 1:
            declared = "; ".join(f"{e.value} from {e.distribution}" for e, _ in candidates)
            broken.append(BrokenEntry(candidates[0][0], f"the name is registered more than once ({declared})"))
            continue
        for entry, plugin in candidates:
            try:
                listeners.append(describe(entry, _build(plugin, conf), conf))
            except Exception as exc:  # noqa: BLE001 - reported with the entry's name
                broken.append(BrokenEntry(entry, f"cannot build it: {type(exc).__name__}: {exc}"))
    broken.sort(key=lambda b: b.entry.name)
    if broken and not skip_broken:
        raise BrokenListenerError(broken)
    return listeners, broken


def log_skipped(broken: Iterable[BrokenEntry]) -> None:
    """Log each entry that is skipped while the others run (an error: an operator must see it)."""
    for item in broken:
        LOG.error("Skipping %s", item)


def get_entry_point_servers(transport: Any, names: Sequence[str] | None = None,
                            conf: cfg.ConfigOpts | None = None,
                            skip_broken: bool = False) -> dict[str, NotificationServer]:
    """Servers (not started) for the registered listeners ``names`` (default: all), by name.

    The Python counterpart of ``notify-transport serve``, for a service that
    embeds its listeners in its own process: ``start()`` each server, and
    ``stop()``/``wait()`` them (or :func:`stop_servers`) on the way out.
    ``conf`` (default: the transport's) supplies the ``[listener:NAME]`` sections.
    """
    conf = conf if conf is not None else transport.conf
    listeners, broken = load_listeners(conf, names, skip_broken)
    log_skipped(broken)
    return {listener.name: listener.server(transport) for listener in listeners}


def stop_servers(servers: Iterable[NotificationServer], graceful: bool = True,
                 timeout: float = 30.0) -> bool:
    """Stop every server at once (each drains, commits and closes), bounded by ``timeout`` in all.

    Returns True when every one finished in time.
    """
    servers = list(servers)
    results: dict[int, bool] = {}

    def stop(index: int, server: NotificationServer) -> None:
        try:
            results[index] = server.stop(graceful=graceful, timeout=timeout)
        except Exception:  # noqa: BLE001 - stop the others anyway
            LOG.exception("Stopping %r failed", server)
            results[index] = False

    threads = [threading.Thread(target=stop, args=(i, s), daemon=True, name=f"stop-{s.pool}")
               for i, s in enumerate(servers)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout + 2.0  # each stop is bounded by timeout itself
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return all(results.get(i, False) for i in range(len(servers)))

