"""Keeping librdkafka off eventlet's hub, for the ``ntkafka`` oslo.messaging driver.

Many OpenStack services still call ``eventlet.monkey_patch()``: ``threading``,
``queue`` and ``time.sleep`` then make green threads, which all run in one
operating-system thread, taking turns at the hub. A librdkafka call that waits
(``poll``, ``consume``, ``flush``, a synchronous ``commit``, ``close``) holds that
thread, so while it waits no green thread runs; a loop of such calls (a
listener polling, the producer's delivery-report thread) stops the service.

The design, in two parts, both confined to the oslo.messaging integration
(notify-transport's core never imports eventlet):

1. **notify-transport's Kafka driver runs on native threads.** Its modules
   (:mod:`notify_transport.drivers.kafka` and the listener base class in
   :mod:`notify_transport.drivers.base`) get the *unpatched* ``threading``,
   ``queue`` and ``time`` (``eventlet.patcher.original``) when the first
   ``ntkafka`` driver is created in a monkey-patched process. Its
   background threads (delivery reports, committer, workers, readers) are then
   operating-system threads, and its locks, events and queues are the
   operating system's, consistent among themselves whichever thread uses them.
2. **Calls from the hub cross over through** ``eventlet.tpool``, as
   oslo.messaging's own Kafka driver does with its ``tpool_execute``: every call
   of the integration into the driver that may wait (send, flush, listener
   start, poll, stop, commit, cleanup, acknowledgements) made on the hub's
   thread runs in tpool's native thread pool while the calling green thread
   waits cooperatively; tpool hands the result (or the exception) back through
   the hub. A call made on any other native thread (a tpool worker, one of
   the driver's own threads, e.g. a log record that oslo's
   ``LoggingNotificationHandler`` turns into a notification) runs directly:
   tpool can only wake green threads of the hub's thread.

The integration's own bookkeeping (its list of listeners, the stop flag of a
poll loop) stays on the hub side with green primitives; nothing green is
shared with a native thread, and nothing native that is held for long is
waited on by the hub.

Limits: each listener that polls holds one tpool thread for at most a poll
slice (one second) at a time, and tpool has ``EVENTLET_THREADPOOL_SIZE``
threads (20 by default): a service with many listeners should raise it.
Native threads log through the process's logging handlers, whose locks
eventlet greens, as every tpool user does (oslo.messaging's Kafka driver too).
The hub is taken to run in the main thread, as in monkey-patched services.
"""
from __future__ import annotations

import sys
import threading
from types import ModuleType
from typing import Any, Callable, TypeVar

#: The modules whose concurrency primitives must be native under eventlet.
NATIVE_PACKAGE = "notify_transport.drivers.kafka"
NATIVE_MODULES = ("notify_transport.drivers.base",)
#: Standard modules that eventlet patches and the driver uses.
PATCHED_STDLIB = ("threading", "queue", "time")

T = TypeVar("T")

_switch_lock = threading.Lock()


def monkey_patched() -> bool:
    """Whether eventlet patched ``threading`` in this process (so its threads are green).

    A process that never imported eventlet is not patched: eventlet is not imported here then
    (oslo_utils.eventletutils, which oslo.messaging uses for this, is deprecated).
    """
    if "eventlet" not in sys.modules:
        return False
    from eventlet import patcher

    return bool(patcher.is_monkey_patched("thread"))


def kafka_driver_modules() -> list[ModuleType]:
    """The loaded modules of notify-transport's Kafka driver (and its listener base class)."""
    return [module for name, module in list(sys.modules.items())
            if module is not None and (name in NATIVE_MODULES or name == NATIVE_PACKAGE
                                       or name.startswith(NATIVE_PACKAGE + "."))]


def use_native_threads() -> int:
    """Give the Kafka driver's modules the unpatched ``threading``, ``queue`` and ``time``.

    Idempotent; returns how many module attributes were switched. Only a
    module-level name bound to the patched standard module itself is
    switched (``import threading``), which is how the driver imports them.
    """
    from eventlet import patcher

    replacements = {id(sys.modules[name]): patcher.original(name)
                    for name in PATCHED_STDLIB if name in sys.modules}
    switched = 0
    with _switch_lock:
        for module in kafka_driver_modules():
            for attr, value in list(vars(module).items()):
                native = replacements.get(id(value))
                if native is not None and value is not native:
                    setattr(module, attr, native)
                    switched += 1
    return switched


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
