"""An I/O loop for pika's ``SelectConnection`` that lends itself to the threads waiting on it.

pika accepts a loop of the application's (``custom_ioloop``) with the interface of its
own ``IOLoop``; :class:`LendingIOLoop` is one on ``select.epoll`` that holds a lock
except while it waits in ``epoll``. A thread that takes the lock does the loop's work
itself instead of waking the loop's thread and waiting for it, which saves a wake-up
and a GIL switch per hand-off: :meth:`LendingIOLoop.lent` runs a block (a publish) and
flushes pika's buffered writes before letting go, :meth:`LendingIOLoop.read_while`
reads the socket for a thread awaiting an answer, and :meth:`LendingIOLoop.call_unlocked`
keeps application callbacks out of the locked section. pika's calls that are not
thread-safe raise :class:`LoopNotHeld` without the lock. Without ``epoll`` the
connection uses pika's own loop.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import os
import select
import threading
import time
from typing import Any, Callable

LOG = logging.getLogger(__name__)

#: Whether this platform has what :class:`LendingIOLoop` needs.
AVAILABLE = hasattr(select, "epoll")

Handler = Callable[[int, int], None]


class _Registration:
    """One file descriptor's handler and the events it asked for."""

    __slots__ = ("handler", "events", "applied")

    def __init__(self, handler: Handler, events: int) -> None:
        self.handler = handler
        self.events = events
        #: the epoll mask in force (lags behind ``events`` inside a lent block)
        self.applied = 0


class _Timer:
    """A handle returned by ``call_later``."""

    __slots__ = ("deadline", "callback", "cancelled")

    def __init__(self, deadline: float, callback: Callable[[], Any]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False


class LoopNotHeld(RuntimeError):
    """A method that is not thread-safe was called by a thread that does not hold the loop."""


class _Lent:
    """The context manager of :meth:`LendingIOLoop.lent` (one per loop: it holds no state)."""

    __slots__ = ("_loop",)

    def __init__(self, loop: "LendingIOLoop") -> None:
        self._loop = loop

    def __enter__(self) -> None:
        self._loop._acquire()
        self._loop._in_lent = True

    def __exit__(self, *exc_info: object) -> None:
        self._loop._end_lent()


class LendingIOLoop:
    """pika's ``IOLoop`` interface on epoll, run under a lock that other threads may borrow.

    :meth:`add_callback` (``add_callback_threadsafe``), :meth:`remove_timeout`,
    :meth:`stop`, :meth:`lent`, :meth:`try_lend` and :meth:`read_while` may be
    called from any thread; the other methods need the loop (its thread, or a
    lent block), as in pika's own ``IOLoop``, and the handler methods and
    :meth:`call_later` check it.
    """

    READ = select.EPOLLIN if AVAILABLE else 1
    WRITE = select.EPOLLOUT if AVAILABLE else 4
    ERROR = select.EPOLLERR if AVAILABLE else 8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
        #: whether the lock is lent (held by a borrower rather than the loop's own turn)
        self._in_lent = False
        self._loop_thread: int | None = None
        self._epoll = select.epoll()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._epoll.register(self._wake_r, select.EPOLLIN)
        self._handlers: dict[int, _Registration] = {}
        #: descriptor -> registration whose reading a waiting thread took over
        self._read_elsewhere: dict[int, _Registration] = {}
        #: descriptors (un)registered since the loop's current wait began
        self._changed: set[int] = set()
        #: descriptors whose handler asked for writability inside a lent block
        self._to_write: list[int] = []
        #: callbacks to run once the thread holding the lock has let go of it
        self._unlocked: list[Callable[[], Any]] = []
        self._timers: list[tuple[float, int, _Timer]] = []
        self._timer_seq = itertools.count()
        self._callbacks: list[Callable[[], Any]] = []
        self._callbacks_lock = threading.Lock()
        self._stopping = False
        self._closed = False
        self._lent = _Lent(self)

    def holds_lock(self) -> bool:
        """True on the thread holding the loop's lock (the loop's, or one it lent it to)."""
        return self._owner == threading.get_ident()

    def _check_held(self, method: str) -> None:
        if self._owner != threading.get_ident():
            raise LoopNotHeld(f"LendingIOLoop.{method}() is not thread-safe: call it on the "
                              "loop's thread or inside a lent block")

    def _acquire(self) -> None:
        self._lock.acquire()
        self._owner = threading.get_ident()

    def _release(self) -> None:
        """Let go of the lock, then run on this thread what waited for that (:meth:`call_unlocked`)."""
        deferred = self._unlocked
        if deferred:
            self._unlocked = []
        self._owner = None
        self._lock.release()
        for callback in deferred:
            _run_logged(callback)

    def lent(self) -> "_Lent":
        """``with loop.lent():`` runs a block under the loop's lock, as the loop's thread would.

        Never reentrant. What pika wrote during the block is sent when it ends.
        """
        return self._lent

    def try_lend(self) -> bool:
        """Take the lock if it is free now (then end with :meth:`end_lent`); False if busy."""
        if not self._lock.acquire(False):
            return False
        self._owner = threading.get_ident()
        self._in_lent = True
        return True

    def end_lent(self) -> None:
        """End a block begun with :meth:`try_lend`."""
        self._end_lent()

    def _end_lent(self) -> None:
        try:
            self._write_now()
        finally:
            self._in_lent = False
            self._release()

    def call_unlocked(self, callback: Callable[[], Any]) -> None:
        """Run ``callback`` on this thread once it has let go of the loop (the caller holds it).

        For the application's callbacks: they may block, or take locks of their
        own, without holding up every other thread's I/O on this loop.
        """
        self._check_held("call_unlocked")
        self._unlocked.append(callback)

    def _write_now(self) -> None:
        """Send what pika buffered during a lent block: call its write handler, as epoll would."""
        while self._to_write:
            fd = self._to_write.pop()
            registration = self._handlers.get(fd)
            if registration is None:
                continue
            if registration.events & self.WRITE:
                registration.handler(fd, self.WRITE)
            if self._handlers.get(fd) is registration:
                self._apply(fd, registration)  # a remainder that did not fit: epoll's turn

    def _wake(self) -> None:
        with self._callbacks_lock:  # close() closes the pipe under it: never write to a reused fd
            if self._closed:
                return
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass  # the pipe is full: a wake-up is pending anyway

    def add_callback(self, callback: Callable[[], Any]) -> None:
        """Run ``callback`` on the loop's thread soon (thread-safe); dropped once the loop is closed."""
        with self._callbacks_lock:
            if self._closed:
                LOG.debug("Dropping a callback for a closed I/O loop: %r", callback)
                return
            self._callbacks.append(callback)
        if threading.get_ident() != self._loop_thread:
            self._wake()

    add_callback_threadsafe = add_callback

    def call_later(self, delay: float, callback: Callable[[], Any]) -> _Timer:
        self._check_held("call_later")
        timer = _Timer(time.monotonic() + max(delay, 0.0), callback)
        heapq.heappush(self._timers, (timer.deadline, next(self._timer_seq), timer))
        if threading.get_ident() != self._loop_thread:
            self._wake()  # set under a lent lock: the loop's wait must end in time for it
        return timer

    def remove_timeout(self, timeout_handle: _Timer) -> None:
        """Cancel a timer (thread-safe: it only marks the timer)."""
        timeout_handle.cancelled = True

    def add_handler(self, fd: int, handler: Handler, events: int) -> None:
        self._check_held("add_handler")
        registration = _Registration(handler, events)
        self._handlers[fd] = registration
        self._changed.add(fd)
        registration.applied = self._mask(fd, events)
        self._epoll.register(fd, registration.applied)

    def update_handler(self, fd: int, events: int) -> None:
        self._check_held("update_handler")
        registration = self._handlers[fd]
        registration.events = events
        if events & self.WRITE and self._in_lent:
            # Inside a lent block the data is sent when the block ends (_write_now):
            # telling epoll now would only wake the loop's thread for nothing.
            self._to_write.append(fd)
            return
        self._apply(fd, registration)

    def _apply(self, fd: int, registration: _Registration) -> None:
        mask = self._mask(fd, registration.events)
        if mask != registration.applied:
            registration.applied = mask
            try:
                self._epoll.modify(fd, mask)
            except (OSError, ValueError):
                LOG.debug("epoll cannot follow fd %d: the loop is closed or the socket gone", fd)

    def remove_handler(self, fd: int) -> None:
        self._check_held("remove_handler")
        self._handlers.pop(fd, None)
        self._read_elsewhere.pop(fd, None)
        self._changed.add(fd)
        try:
            self._epoll.unregister(fd)
        except (OSError, ValueError):
            pass  # already closed

    def start(self) -> None:
        """Run until :meth:`stop`; the caller must not hold the lock."""
        self._loop_thread = threading.get_ident()
        self._stopping = False
        self._acquire()
        try:
            while not self._stopping:
                self._run_callbacks()
                self._run_timers()
                if self._stopping:
                    break
                if self._unlocked:
                    # Run them with the lock let go, then look again: what they
                    # scheduled counts for how long the next wait may be.
                    self._release()
                    self._acquire()
                    continue
                self._poll_once(self._wait_seconds())
        finally:
            self._loop_thread = None
            self._release()

    def stop(self) -> None:
        self._stopping = True
        if threading.get_ident() != self._loop_thread:
            self._wake()

    def close(self) -> None:
        """Release the loop's descriptors (after :meth:`start` returned)."""
        with self._callbacks_lock:
            if self._closed:
                return
            self._closed = True
            self._callbacks = []
            self._epoll.close()
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)

    def _mask(self, fd: int, events: int) -> int:
        mask = 0
        if events & self.READ and fd not in self._read_elsewhere:
            mask |= select.EPOLLIN
        if events & self.WRITE:
            mask |= select.EPOLLOUT
        return mask | select.EPOLLERR

    def _wait_seconds(self) -> float:
        if self._callbacks:
            return 0.0
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        if not self._timers:
            return -1.0
        return max(0.0, self._timers[0][0] - time.monotonic())

    def _run_callbacks(self) -> None:
        if not self._callbacks:
            return
        with self._callbacks_lock:
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _run_logged(callback)

    def _run_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            _deadline, _seq, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                timer.cancelled = True
                _run_logged(timer.callback)

    def _poll_once(self, timeout: float) -> None:
        self._changed.clear()
        self._release()
        try:
            ready = self._epoll.poll(timeout)
        except InterruptedError:
            ready = []
        finally:
            self._acquire()
        for fd, mask in ready:
            if fd == self._wake_r:
                self._drain_wake_pipe()
                continue
            if fd in self._changed:
                continue  # (un)registered by a borrower meanwhile: maybe another socket now
            registration = self._handlers.get(fd)
            if registration is None:
                continue
            allowed = registration.events
            if allowed & self.WRITE:
                allowed |= self.ERROR  # pika's writer learns of a failed connect this way
            events = _events(mask, self) & allowed
            if fd in self._read_elsewhere:
                events &= ~self.READ
            if events:
                registration.handler(fd, events)

    def _drain_wake_pipe(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def read_while(self, done: Callable[[], bool], deadline: float,
                   first: Callable[[], None] | None = None, recheck: float = 0.01) -> bool:
        """Read the loop's socket on this thread until ``done()`` or ``deadline``.

        pika's read handler runs here under the lock while the loop stops reading; ``first``
        (the publish whose confirm is awaited) runs once reading is taken over, so the answer
        cannot reach the loop's thread first. Returns False at once, without running ``first``,
        when this thread cannot take over (loop thread, lock held, another reader, connecting,
        ``done()``); ``done()`` is checked after each read and every ``recheck`` seconds.
        """
        if threading.get_ident() == self._loop_thread or self.holds_lock():
            return False
        with self.lent():
            if done():
                return False
            readers = [fd for fd, reg in self._handlers.items() if reg.events & self.READ]
            if len(readers) != 1 or self._read_elsewhere:
                return False
            fd = readers[0]
            registration = self._handlers[fd]
            self._read_elsewhere[fd] = registration
            self._apply(fd, registration)
            try:
                if first is not None:
                    first()
            except BaseException:
                self._resume_reading(fd, registration)
                raise
        resumed = False
        try:
            resumed = self._read_until(fd, registration, done, deadline, recheck)
        finally:
            if not resumed:
                with self.lent():
                    self._resume_reading(fd, registration)
        return True

    def _read_until(self, fd: int, registration: _Registration, done: Callable[[], bool],
                    deadline: float, recheck: float) -> bool:
        """Read until done or the deadline; True if reading was handed back to the loop."""
        readable = select.poll()
        readable.register(fd, select.POLLIN)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or done():
                return False
            ready = readable.poll(min(remaining, recheck) * 1000)
            with self.lent():
                if self._handlers.get(fd) is not registration:
                    return False  # the socket closed (a reconnect makes another one)
                if ready and registration.events & self.READ:
                    registration.handler(fd, self.READ)
                if done():
                    self._resume_reading(fd, registration)  # in the same turn of the lock
                    return True

    def _resume_reading(self, fd: int, registration: _Registration) -> None:
        if self._read_elsewhere.get(fd) is not registration:
            return
        del self._read_elsewhere[fd]
        if self._handlers.get(fd) is registration:
            self._apply(fd, registration)


def _run_logged(callback: Callable[[], Any]) -> None:
    """Run a callback or timer; a failing one is logged, and the loop (all connections' I/O) goes on."""
    try:
        callback()
    except Exception:
        LOG.exception("A callback on the RabbitMQ I/O loop failed: %r", callback)


def _events(mask: int, loop: LendingIOLoop) -> int:
    """The loop's READ/WRITE/ERROR flags for an epoll event mask.

    A hang-up or an error is also READ: pika's reader then meets the end of
    the stream or the error and closes the connection.
    """
    events = 0
    if mask & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLRDHUP | select.EPOLLERR):
        events |= loop.READ
    if mask & select.EPOLLOUT:
        events |= loop.WRITE
    if mask & select.EPOLLERR:
        events |= loop.ERROR
    return events
