"""An I/O loop for pika's ``SelectConnection`` that lends itself to the threads waiting on it.

pika lets an application bring its own loop: ``SelectConnection(...,
custom_ioloop=loop)`` accepts any object with the interface of
``pika.adapters.utils.selector_ioloop_adapter.AbstractSelectorIOLoop`` (the
one tornado's loop has). pika then registers its socket with
``add_handler(fd, handler, events)`` and calls nothing else of the loop than
that interface. :class:`LendingIOLoop` is such a loop, on ``select.epoll``,
with one difference from pika's own: it runs under a lock that it releases
only while it waits in ``epoll``, so that another thread may take the lock and
do the loop's work itself instead of waking the loop's thread and waiting for
it (each such hand-off costs a wake-up and a switch of the GIL):

* :meth:`LendingIOLoop.lent` runs a block under the lock, as the loop's
  thread would run it (e.g. ``basic_publish``); data that pika buffered for
  the socket during the block is sent before the lock is released (pika's
  write handler is called, as the loop would once the socket is writable)
  rather than one ``epoll`` round later.
* :meth:`LendingIOLoop.read_while` lets a thread that waits for something
  the socket will bring (a confirm, a reply, a request) read the socket
  itself, through pika's read handler, while the loop leaves reading to it.

Nothing of pika's is touched but the handlers pika gave the loop; every
frame is decoded by pika. Where ``select.epoll`` is missing, the connection
uses pika's own ``IOLoop`` and hands work to its thread instead.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import os
import select
import socket
import threading
import time
from typing import Any, Callable

from pika.adapters.utils.nbio_interface import (AbstractIOReference, AbstractStreamProtocol,
                                                AbstractStreamTransport)
from pika.adapters.utils.selector_ioloop_adapter import SelectorIOServicesAdapter

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


class _Lent:
    """The context manager of :meth:`LendingIOLoop.lent` (one per loop: it holds no state)."""

    __slots__ = ("_loop",)

    def __init__(self, loop: "LendingIOLoop") -> None:
        self._loop = loop

    def __enter__(self) -> None:
        self._loop._acquire()

    def __exit__(self, *exc_info: object) -> None:
        self._loop._end_lent()


class LendingIOLoop:
    """pika's ``AbstractSelectorIOLoop`` on epoll, run under a lock that other threads may borrow.

    Every method but :meth:`add_callback`, :meth:`lent` and
    :meth:`read_while` runs on the loop's thread or under the lock (pika
    calls them from the code the lock protects).
    """

    READ = select.EPOLLIN if AVAILABLE else 1
    WRITE = select.EPOLLOUT if AVAILABLE else 4
    ERROR = select.EPOLLERR if AVAILABLE else 8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None
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
        self._timers: list[tuple[float, int, _Timer]] = []
        self._timer_seq = itertools.count()
        self._callbacks: list[Callable[[], Any]] = []
        self._callbacks_lock = threading.Lock()
        self._stopping = False
        self._closed = False
        self._lent = _Lent(self)

    # -- the lock ---------------------------------------------------------------------------
    def holds_lock(self) -> bool:
        """True on the thread holding the loop's lock (the loop's, or one it lent it to)."""
        return self._owner == threading.get_ident()

    def _acquire(self) -> None:
        self._lock.acquire()
        self._owner = threading.get_ident()

    def _release(self) -> None:
        self._owner = None
        self._lock.release()

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
        return True

    def end_lent(self) -> None:
        """End a block begun with :meth:`try_lend`."""
        self._end_lent()

    def _end_lent(self) -> None:
        try:
            self._write_now()
        finally:
            self._release()

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

    # -- AbstractSelectorIOLoop -----------------------------------------------------------
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
        timer = _Timer(time.monotonic() + max(delay, 0.0), callback)
        heapq.heappush(self._timers, (timer.deadline, next(self._timer_seq), timer))
        if threading.get_ident() != self._loop_thread:
            self._wake()  # set under a lent lock: the loop's wait must end in time for it
        return timer

    def remove_timeout(self, timeout_handle: _Timer) -> None:
        timeout_handle.cancelled = True

    def add_handler(self, fd: int, handler: Handler, events: int) -> None:
        registration = _Registration(handler, events)
        self._handlers[fd] = registration
        self._changed.add(fd)
        registration.applied = self._mask(fd, events)
        self._epoll.register(fd, registration.applied)

    def update_handler(self, fd: int, events: int) -> None:
        registration = self._handlers[fd]
        registration.events = events
        if events & self.WRITE and self._owner is not None and self._owner != self._loop_thread:
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

    # -- the loop ------------------------------------------------------------------------------
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

    # -- reading on a waiting thread --------------------------------------------------------
    def read_while(self, done: Callable[[], bool], deadline: float,
                   first: Callable[[], None] | None = None, recheck: float = 0.01) -> bool:
        """Read the loop's one socket on this thread until ``done()`` or ``deadline``.

        pika's read handler runs here, under the lock, as the loop's thread
        would run it; the loop stops watching the socket for reading meanwhile
        and resumes when this returns. ``first`` (e.g. the publish whose
        confirm is awaited) runs under the lock once reading is taken over, so
        that the answer cannot reach the loop's thread first.

        Returns False at once, without running ``first``, when this is the
        loop's thread or holds the lock, another thread already reads, no
        single socket is registered (connecting), or ``done()`` holds: the
        caller then does its work and waits the usual way. ``done()`` is
        checked after each read and every ``recheck`` seconds, for news that
        came another way.
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


# -- pika's I/O services on this loop, with a transport that joins writes -------------------

#: Bytes asked for by one ``recv``.
RECV_SIZE = 64 * 1024
#: Bytes handed to pika at a time: pika copies what is left of its buffer after each
#: frame it takes out, so a large piece would cost time quadratic in its size.
FEED_SIZE = 16 * 1024
#: Bytes read from the socket per readiness event before other work gets a turn.
MAX_READ_PER_EVENT = 1024 * 1024


class LendingIOServices(SelectorIOServicesAdapter):
    """pika's I/O services on a :class:`LendingIOLoop` (``SelectConnection(custom_ioloop=...)``).

    Plaintext connections get a :class:`JoinedWritesTransport`; TLS ones
    pika's own transport (which handles the TLS handshake and records).
    """

    def __init__(self, loop: LendingIOLoop | None = None) -> None:
        super().__init__(loop or LendingIOLoop())

    @property
    def loop(self) -> LendingIOLoop:
        loop: LendingIOLoop = self.get_native_ioloop()
        return loop

    def create_streaming_connection(self, protocol_factory: Callable[[], AbstractStreamProtocol],
                                    sock: socket.socket, on_done: Callable[[Any], None],
                                    ssl_context: Any = None,
                                    server_hostname: str | None = None) -> AbstractIOReference:
        if ssl_context is not None:
            return super().create_streaming_connection(protocol_factory, sock, on_done,
                                                       ssl_context, server_hostname)
        return _PlainLinkup(self, protocol_factory, sock, on_done).start()


class _PlainLinkup(AbstractIOReference):
    """Links a connected plain socket to pika's protocol on the loop's thread, as pika does."""

    def __init__(self, services: LendingIOServices,
                 protocol_factory: Callable[[], AbstractStreamProtocol], sock: socket.socket,
                 on_done: Callable[[Any], None]) -> None:
        self._services = services
        self._protocol_factory = protocol_factory
        self._socket = sock
        self._on_done = on_done
        self._state = "new"

    def start(self) -> "_PlainLinkup":
        self._state = "active"
        self._services.add_callback_threadsafe(self._link)
        return self

    def cancel(self) -> bool:
        if self._state != "active":
            return False
        self._state = "cancelled"
        self._socket.close()
        return True

    def _link(self) -> None:
        if self._state != "active":
            return
        self._state = "done"
        try:
            protocol = self._protocol_factory()
            transport = JoinedWritesTransport(self._socket, protocol, self._services)
            protocol.connection_made(transport)
        except Exception as exc:  # noqa: BLE001 - handed to pika, which reports it
            LOG.debug("Linking the AMQP protocol to the socket failed: %r", exc)
            self._socket.close()
            self._on_done(exc)
            return
        self._on_done((transport, protocol))


class JoinedWritesTransport(AbstractStreamTransport):
    """A plain TCP transport for pika whose pending writes leave in one ``send``.

    pika writes each frame of a message on its own (a publish is three
    writes), and its transport sends them one by one: with ``TCP_NODELAY``
    each becomes a segment of its own and a system call that lets go of the
    GIL. Here everything written since the last send leaves joined. Reads
    take up to :data:`RECV_SIZE` at a time, and stop at a short read instead
    of one more ``recv`` failing with EAGAIN (epoll is level-triggered: what
    is left is reported again).
    """

    def __init__(self, sock: socket.socket, protocol: AbstractStreamProtocol,
                 services: LendingIOServices) -> None:
        self._socket = sock
        self._protocol = protocol
        self._services = services
        self._fd = sock.fileno()
        self._out: list[bytes] = []
        self._out_size = 0
        self._active = True
        services.set_reader(self._fd, self._on_readable)

    def get_protocol(self) -> AbstractStreamProtocol:
        return self._protocol

    def get_write_buffer_size(self) -> int:
        return self._out_size

    def write(self, data: bytes) -> None:
        if not data:
            raise ValueError("write() called with empty data")
        if not self._active:
            return
        was_empty = not self._out
        self._out.append(data)
        self._out_size += len(data)
        if was_empty:
            self._services.set_writer(self._fd, self._on_writable)

    def abort(self) -> None:
        self._fail(None)

    def _on_writable(self) -> None:
        if not self._active or not self._out:
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        try:
            sent = self._socket.send(data)
        except (BlockingIOError, InterruptedError):
            self._out = [data]
            return
        except OSError as exc:
            self._fail(exc)
            return
        self._out_size -= sent
        if sent < len(data):
            self._out = [data[sent:]]
        else:
            self._out = []
            self._services.remove_writer(self._fd)

    def _on_readable(self) -> None:
        total = 0
        while self._active and total < MAX_READ_PER_EVENT:
            try:
                data = self._socket.recv(RECV_SIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._fail(exc)
                return
            if not data:
                self._on_eof()
                return
            total += len(data)
            try:
                if len(data) <= FEED_SIZE:
                    self._protocol.data_received(data)
                else:
                    for start in range(0, len(data), FEED_SIZE):
                        self._protocol.data_received(data[start:start + FEED_SIZE])
            except Exception as exc:
                LOG.exception("Handling data from the broker failed; closing the connection")
                self._fail(exc)
                return
            if len(data) < RECV_SIZE:
                return

    def _on_eof(self) -> None:
        try:
            keep_open = self._protocol.eof_received()
        except Exception as exc:
            self._fail(exc)
            return
        if keep_open:
            self._services.remove_reader(self._fd)
        else:
            self._fail(None)

    def _fail(self, error: BaseException | None) -> None:
        """Stop all I/O now; tell the protocol from the loop's thread, then close the socket."""
        if not self._active:
            return
        self._active = False
        self._services.remove_reader(self._fd)
        self._services.remove_writer(self._fd)
        self._out = []
        self._out_size = 0
        self._services.add_callback_threadsafe(lambda: self._lost(error))

    def _lost(self, error: BaseException | None) -> None:
        try:
            self._protocol.connection_lost(error)
        finally:
            try:
                self._socket.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._socket.close()
