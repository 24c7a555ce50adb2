"""Keeping blocking I/O off eventlet's hub, for the ``ntkafka`` and ``ntrabbit`` oslo.messaging drivers.

Under monkey patching a librdkafka call that waits would stop every green thread. The
Kafka driver's threads are native (:mod:`notify_transport.drivers.threads`), hub calls
that may wait go through ``eventlet.tpool`` (:class:`Offload`), and native threads' log
records are emitted on the hub (:class:`NativeLogBridge`) since the handlers' locks are
green. Each polling listener or waiting call holds one of the ``EVENTLET_THREADPOOL_SIZE``
tpool threads; the contributor guide's "Threads under eventlet" gives the limits.
"""
from __future__ import annotations

import logging
import sys
import threading
from typing import Any, Callable, TypeVar

from notify_transport.drivers import threads
from notify_transport.drivers.kafka import RDKAFKA_LOG

#: The package whose threads are native under eventlet (drivers/threads.py); calls into it from
#: the hub go through tpool. The RabbitMQ driver stays green in a patched process (see above).
KAFKA_PACKAGE = "notify_transport.drivers.kafka"
#: notify-transport's loggers (one per module, named after it) and pika's are bridged.
LOGGER_PREFIXES = ("notify_transport", "pika")
#: How often the hub emits the records that native threads logged.
LOG_DRAIN_INTERVAL = 0.05
_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)

T = TypeVar("T")
LOG = logging.getLogger(__name__)

_bridge_lock = threading.Lock()
#: The process's one log bridge: loggers are process-wide, so is the bridge.
_log_bridge: "NativeLogBridge | None" = None


def monkey_patched() -> bool:
    """Whether eventlet patched ``threading`` in this process (so its threads are green).

    A process that never imported eventlet is not patched, and eventlet is not imported to say
    so (oslo_utils.eventletutils, which oslo.messaging asks, is deprecated).
    """
    return threads.patched()


def _in_packages(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def runs_native_threads(driver_cls: type) -> bool:
    """Whether ``driver_cls`` belongs to the Kafka driver, whose threads are native under eventlet."""
    return _in_packages(driver_cls.__module__, (KAFKA_PACKAGE,))


class Offload:
    """Runs a call that may block off the hub: through ``eventlet.tpool`` when needed.

    Without monkey-patching, or on a native thread other than the hub's, the
    call runs directly.
    """

    def __init__(self, patched: bool | None = None) -> None:
        self.patched = monkey_patched() if patched is None else patched
        self._execute: Callable[..., Any] | None = None
        self._native_ident: Callable[[], int] | None = None
        self._hub_ident = 0
        if self.patched:
            from eventlet import patcher, tpool

            self._execute = tpool.execute
            self._native_ident = patcher.original("_thread").get_ident
            self._hub_ident = patcher.original("threading").main_thread().ident or 0

    def __repr__(self) -> str:
        return f"<Offload {'through eventlet.tpool' if self.patched else 'direct'}>"

    def on_hub(self) -> bool:
        """Whether the caller runs on the hub's native thread (where blocking stops everything)."""
        return self._native_ident is not None and self._native_ident() == self._hub_ident

    def __call__(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._execute is not None and self.on_hub():
            return self._execute(func, *args, **kwargs)
        return func(*args, **kwargs)


class NativeLogBridge(logging.Filter):
    """A logger filter that defers records made on native threads to a green thread on the hub.

    On the hub's thread a record passes. On any other native thread it is
    queued and dropped there; :meth:`drain` (run every
    :data:`LOG_DRAIN_INTERVAL` by :meth:`start`, and at driver cleanup) hands
    it to its logger again on the hub, where it passes to the handlers.
    """

    def __init__(self, offload: Offload) -> None:
        super().__init__()
        from eventlet import patcher

        self._on_hub = offload.on_hub
        self._queue = patcher.original("queue").SimpleQueue()
        self._green: Any = None
        self._loggers: list[logging.Logger] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if self._on_hub():
            return True
        self._queue.put(record)
        return False

    def drain(self) -> int:
        """Emit the queued records (on the hub); return how many."""
        if not self._on_hub():
            return 0
        count = 0
        while True:
            try:
                record = self._queue.get_nowait()
            except Exception:  # noqa: BLE001 - queue.Empty of the unpatched module
                return count
            try:
                logging.getLogger(record.name).handle(record)
            except Exception:  # noqa: BLE001 - a handler failed: go on with the others
                logging.getLogger(__name__).exception("Could not emit a record from a native thread")
            count += 1

    def start(self) -> None:
        """Run :meth:`drain` in a green thread of the hub, from now on."""
        import eventlet

        if self._green is None:
            self._green = eventlet.spawn(self._run)

    def _run(self) -> None:
        import eventlet

        while True:
            self.drain()
            self.prime()
            eventlet.sleep(LOG_DRAIN_INTERVAL)

    def attach(self) -> int:
        """Add this filter to the logger of every loaded notify-transport module; return how many."""
        added = 0
        names = [name for name in list(sys.modules) if _in_packages(name, LOGGER_PREFIXES)]
        names.append(RDKAFKA_LOG.name)  # librdkafka's own log lines
        for name in names:
            logger = logging.getLogger(name)
            if self not in logger.filters:
                logger.addFilter(self)
                self._loggers.append(logger)
                added += 1
        self.prime()
        return added

    def prime(self) -> None:
        """Fill the bridged loggers' level caches, here on the hub.

        A logger whose cache misses takes logging's module lock, which eventlet
        made green: a native thread taking it while a green thread holds it
        never wakes up. With the caches filled, a native thread's log call
        only reads them. Any ``setLevel`` in the process empties them again,
        so :meth:`start`'s loop fills them again every :data:`LOG_DRAIN_INTERVAL`.
        """
        for logger in self._loggers:
            for level in _LEVELS:
                logger.isEnabledFor(level)


def api_offload(driver_cls: type) -> Offload | None:
    """For notify-transport's own API: prepare ``driver_cls`` for this process, before it is built.

    None when nothing is needed (no monkey-patching, or a driver outside the
    Kafka package, whose threads and sockets eventlet greens as a whole);
    otherwise the log bridge runs, and the returned :class:`Offload` is what
    the transport sends its calls that may wait through.
    """
    if not runs_native_threads(driver_cls) or not monkey_patched():
        return None
    offload = Offload(patched=True)
    log_bridge(offload)
    return offload


def drain_logs() -> int:
    """Emit now (on the hub) what native threads logged, e.g. while a driver closed; return how many."""
    return _log_bridge.drain() if _log_bridge is not None else 0


def log_bridge(offload: Offload) -> NativeLogBridge | None:
    """The process's bridge, attached to notify-transport's loggers and started (on the hub only)."""
    global _log_bridge
    if not offload.patched or not offload.on_hub():
        return _log_bridge
    with _bridge_lock:
        if _log_bridge is None:
            _log_bridge = NativeLogBridge(offload)
        _log_bridge.attach()
        _log_bridge.start()
    return _log_bridge
