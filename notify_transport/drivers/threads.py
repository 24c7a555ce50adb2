"""Threads, locks, events, queues and sleeps for driver code that runs on threads of its own.

The Kafka driver waits inside librdkafka on threads it starts. Under eventlet's monkey
patching the standard modules hand out green primitives, and waiting on one from
another OS thread hangs, so that code asks this module at the moment it needs one and
gets the operating system's (``eventlet.patcher.original``) in a patched process.
Code meant to stay green (the RabbitMQ driver, the API layer) keeps the standard
modules; ``tests/unit/test_threads_seam.py`` holds the Kafka driver to this module.
"""
from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # the types only: the objects come from native() at call time
    import queue
    import threading

#: The modules eventlet greens whose primitives this module hands out.
STDLIB = ("threading", "queue", "time")


def patched() -> bool:
    """Whether eventlet monkey-patched threads in this process (eventlet is never imported here)."""
    if "eventlet" not in sys.modules:
        return False
    from eventlet import patcher

    return bool(patcher.is_monkey_patched("thread"))


def native(name: str) -> ModuleType:
    """The operating system's version of the standard module ``name`` (one of :data:`STDLIB`)."""
    if name not in STDLIB:
        raise ValueError(f"{name!r} is not one of {STDLIB}")
    if patched():
        from eventlet import patcher

        return patcher.original(name)
    # Through the import system, never sys.modules directly: while one thread runs the module's
    # first import, sys.modules already holds it half built, and import_module waits for it.
    return importlib.import_module(name)


def Lock() -> threading.Lock:  # noqa: N802 - named after what it makes
    """A native lock."""
    return native("threading").Lock()


def RLock() -> threading.RLock:  # noqa: N802
    """A native re-entrant lock."""
    return native("threading").RLock()


def Event() -> threading.Event:  # noqa: N802
    """A native event."""
    return native("threading").Event()


def Condition(lock: Any = None) -> threading.Condition:  # noqa: N802
    """A native condition (over ``lock``, itself from here, or a new native one)."""
    return native("threading").Condition(lock)


def Semaphore(value: int = 1) -> threading.Semaphore:  # noqa: N802
    """A native semaphore."""
    return native("threading").Semaphore(value)


def Thread(target: Callable[..., Any], name: str | None = None, args: tuple = (),  # noqa: N802
           daemon: bool = True) -> threading.Thread:
    """A native thread, not started; a daemon unless told otherwise."""
    return native("threading").Thread(target=target, name=name, args=args, daemon=daemon)


def current_thread() -> threading.Thread:
    """The native thread running the caller (what :func:`Thread` objects compare to)."""
    return native("threading").current_thread()


def Queue(maxsize: int = 0) -> queue.Queue:  # noqa: N802
    """A native bounded queue; it raises :func:`queue_empty` and :func:`queue_full`."""
    return native("queue").Queue(maxsize)


def SimpleQueue() -> queue.SimpleQueue:  # noqa: N802
    """A native unbounded queue."""
    return native("queue").SimpleQueue()


def queue_empty() -> type[Exception]:
    """What a native queue's ``get`` raises when nothing came in time."""
    return native("queue").Empty


def queue_full() -> type[Exception]:
    """What a native queue's ``put`` raises when no room came in time."""
    return native("queue").Full


def sleep(seconds: float) -> None:
    """Hold the calling native thread for ``seconds`` (a green sleep would wait for a hub turn)."""
    native("time").sleep(seconds)
