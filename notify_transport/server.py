"""The one server lifecycle, as ``oslo_messaging.server.MessageHandlingServer``.

Notification listeners and RPC servers inherit :class:`MessageHandlingServer`
(start, stop, wait, ``with``) and add only how they listen (``_listen``) and
what a worker thread does (``_launch``).
"""
from __future__ import annotations

import logging
import threading
import time
from types import TracebackType
from typing import Any, TypeVar

from notify_transport.backoff import Backoff
from notify_transport.drivers.base import Listener
from notify_transport.exceptions import (ConfigurationError, ExecutorLoadFailure, InvalidTarget,
                                         MessagingServerError, ServerListenError)

__all__ = ["ExecutorLoadFailure", "MessageHandlingServer", "MessagingServerError", "ServerListenError"]

LOG = logging.getLogger(__name__)

#: How long one driver poll may block; stop() also wakes it.
POLL_INTERVAL = 1.0
#: Spacing of a worker's retries after a poll failed (0.1 s doubling up to 5 s).
POLL_RETRY = Backoff(initial=0.1, factor=2.0, maximum=5.0)

_Server = TypeVar("_Server", bound="MessageHandlingServer")



def run_bounded(work: Any, timeout: float, name: str) -> bool:
    """Run ``work()`` in a daemon thread named ``name`` and wait at most ``timeout`` seconds.

    False when it is still running then: it goes on in the background, and
    the caller (stopping a server, a process exiting) is not held by a
    broker that does not answer.
    """
    thread = threading.Thread(target=work, daemon=True, name=name)
    thread.start()
    thread.join(timeout)
    return not thread.is_alive()


class MessageHandlingServer:
    """What every server offers: ``start()``, ``stop()``, ``wait()``, ``reset()``, ``with``.

    ``with server:`` starts it and, on leaving the block (also when it
    raised), runs oslo.messaging's shutdown sequence ``stop()`` then
    ``wait()``: what was received is still handled and the connection is
    released before the caller goes on.
    """

    def __init__(self, transport: Any, dispatcher: Any, executor: str | None = "threading") -> None:
        if executor not in (None, "threading"):
            raise ExecutorLoadFailure(executor, "only the 'threading' executor is supported "
                                      "(no eventlet)")
        self.transport = transport
        self.dispatcher = dispatcher
        self.executor_type = executor or "threading"
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        #: set by an abrupt stop: workers drop what they have not started
        self._aborting = False
        self._listener: Listener | None = None
        self._workers: list[threading.Thread] = []

    @property
    def listener(self) -> Listener | None:
        """The driver listener, while the server runs (for driver-specific controls)."""
        return self._listener

    def _listen(self) -> Listener:
        """Open the driver listener (ConfigurationError for a wrong setup)."""
        raise NotImplementedError

    def _listen_target(self) -> Any:
        """What :class:`ServerListenError` names when listening fails."""
        return None

    def _attach(self, listener: Listener) -> None:
        """Prepare for ``listener`` before it starts (after :meth:`_listen`)."""

    def _launch(self, listener: Listener) -> None:
        """Start the worker threads (with :meth:`_spawn`); called holding the lock."""
        raise NotImplementedError

    def start(self, override_pool_size: int | None = None) -> None:
        """Listen and start handling messages; returns once the subscription is live,
        so nothing sent after it returns is missed."""
        with self._lock:
            if self._listener is not None or any(w.is_alive() for w in self._workers):
                LOG.warning("%r has already been started. Ignoring the redundant call to start().", self)
                return
            self._configure(override_pool_size)
            try:
                listener = self._listen()
            except (ConfigurationError, InvalidTarget):
                raise
            except Exception as exc:
                raise ServerListenError(self._listen_target(), exc) from exc
            try:
                self._attach(listener)
            except Exception:
                listener.cleanup()
                raise
            try:
                listener.start()
            except Exception as exc:
                listener.stop()
                listener.cleanup()
                raise ServerListenError(self._listen_target(), exc) from exc
            self._listener = listener
            self._stopping.clear()
            self._aborting = False
            self._workers = []
            self._launch(listener)

    def _configure(self, override_pool_size: int | None) -> None:
        """Read settings that apply to this run (an RPC server's pool size)."""

    def _spawn(self, target: Any, name: str, *args: Any) -> threading.Thread:
        worker = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._workers.append(worker)
        worker.start()
        return worker

    def stop(self, graceful: bool = True, timeout: float | None = None) -> bool:
        """Stop receiving; with ``timeout``, the whole shutdown, bounded by it.

        Without ``timeout`` it returns at once, as oslo's does, and :meth:`wait` finishes.
        ``graceful=True`` lets the work in flight finish and commits; ``graceful=False`` drops
        what was not handled, unacknowledged, so drivers that track completion deliver it
        again. Returns True when the shutdown finished in time.
        """
        self._stopping.set()
        listener = self._listener
        if listener is not None:
            listener.stop()
            if not graceful:
                self._abort(listener)
        if timeout is None:
            return True
        return self._finish(time.monotonic() + max(0.0, timeout))

    def _abort(self, listener: Listener) -> None:
        self._aborting = True
        try:
            listener.abort()
        except Exception:
            LOG.exception("%r: abort failed", self)

    def _finish(self, deadline: float) -> bool:
        """The bounded part of :meth:`stop`: end the workers, drain, close."""
        finished = self._join_workers(deadline)
        listener = self._listener
        if listener is not None and not self._aborting:
            if not finished or not listener.drain(max(0.0, deadline - time.monotonic())):
                LOG.warning("%r: work still in flight at the stop deadline; abandoning it", self)
                finished = False
                self._abort(listener)
        # closing commits and leaves the group: a little time even when the deadline passed
        if not run_bounded(lambda: self._release(quiet=True), max(1.0, deadline - time.monotonic()),
                           f"{type(self).__name__}-close"):
            LOG.warning("%r: closing the listener is taking longer than the stop timeout; "
                        "it goes on in the background", self)
            return False
        return finished

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the work in progress to end, then release the connection.

        Returns False when ``timeout`` ran out first (the server is still
        stopping; call again).
        """
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        if not self._join_workers(deadline):
            LOG.warning("%r: still handling messages after %.1fs", self, timeout)
            return False
        self._release()
        return True

    def _join_workers(self, deadline: float | None) -> bool:
        """Join every worker (more may be spawned meanwhile); False at the deadline."""
        while True:
            with self._lock:
                alive = [w for w in self._workers if w.is_alive()]
            if not alive:
                return True
            for worker in alive:
                worker.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if deadline is not None and time.monotonic() >= deadline:
                with self._lock:
                    return not any(w.is_alive() for w in self._workers)

    def _release(self, quiet: bool = False) -> None:
        """Close the driver listener once; workers still running stay known to start()."""
        with self._lock:
            listener, self._listener = self._listener, None
            self._workers = [w for w in self._workers if w.is_alive()]
            if listener is None:
                return
            try:
                listener.cleanup()
            except Exception:
                if not quiet:
                    raise
                LOG.exception("%r: closing the listener failed", self)

    def reset(self) -> None:
        """Kept for oslo.messaging compatibility; nothing to reset."""

    def _poll_failed(self, failures: int) -> bool:
        """Log a failed poll and wait before the next; True when the server stops meanwhile."""
        LOG.exception("%r: polling failed (%d in a row); retrying", self, failures)
        return POLL_RETRY.wait(failures, stop=self._stopping)

    def __enter__(self: _Server) -> _Server:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            self.stop()
        finally:
            self.wait()
