"""One AMQP connection driven by its own I/O thread, reconnecting by itself.

pika is not thread-safe: the connection runs on a
:class:`~notify_transport.drivers.rabbit.ioloop.LendingIOLoop`, and other threads hand
it work (:meth:`RabbitConnection.call_soon`) or do it under the loop's lock when it is
free; ``io_*`` methods run on the I/O thread or under the lock. Each
:class:`ChannelUser` gets its channel back after a reconnect. A refused login is kept
as :attr:`fatal_error`, so operations fail at once while reconnecting goes on.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any, Callable

import pika
import pika.exceptions as pex
from pika.adapters.select_connection import IOLoop
from pika.channel import Channel

from notify_transport.drivers.rabbit import ioloop, pika_log
from notify_transport.drivers.rabbit.settings import Endpoint, RabbitSettings
from notify_transport.exceptions import AccessDenied, MessageDeliveryFailure

LOG = logging.getLogger(__name__)

_ENTITY_RE = re.compile(r"(exchange|queue) '([^']*)' in vhost")
_FATAL_OPEN_ERRORS = (pex.ProbableAuthenticationError, pex.ProbableAccessDeniedError,
                      pex.AuthenticationError)


def describe(error: BaseException | None) -> str:
    """A short, credential-free description of a pika error."""
    if error is None:
        return "unknown error"
    if isinstance(error, (pex.ConnectionClosed, pex.ChannelClosed)):
        return f"({error.reply_code}) {error.reply_text}"
    if isinstance(error, pex.AMQPConnectionError) and error.args:
        inner = error.args[0]
        return describe(inner) if isinstance(inner, BaseException) else str(inner)
    nested = getattr(error, "exceptions", None)  # pika's connection workflow failure
    if nested:
        return describe(nested[-1])
    inner = getattr(error, "exception", None)  # pika's connector phase errors
    if isinstance(inner, BaseException):
        return describe(inner)
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class ChannelUser:
    """A part of the driver that needs a channel of its own on a connection."""

    name = "channel-user"

    def io_channel_open(self, channel: Channel) -> None:
        """A channel is open for this user: declare, consume, flush backlogs."""

    def io_channel_closed(self, channel: Channel, reason: BaseException) -> None:
        """The channel closed (channel error or lost connection)."""

    def io_connect_failed(self, error: BaseException) -> None:
        """An attempt to (re)connect failed."""

    def io_before_close(self, channel: Channel) -> None:
        """The user is being removed; last words on its channel (e.g. delete queues)."""

    def io_reopen_delay(self, reason: BaseException) -> float | None:
        """Seconds before reopening a channel closed by the broker; None to leave it closed."""
        return 0.1


class RabbitConnection:
    """A pika SelectConnection on a private I/O thread, with failover and reconnect."""

    def __init__(self, settings: RabbitSettings, purpose: str) -> None:
        self.settings = settings
        self.purpose = purpose
        #: Whether other threads may borrow the loop (try_run_locked, read_while_waiting).
        self._lending = ioloop.AVAILABLE
        self._ioloop: Any = ioloop.LendingIOLoop() if self._lending else IOLoop()
        self._thread = threading.Thread(target=self._run, name=f"rabbit-{purpose}-io", daemon=True)
        self._io_ident: int | None = None
        self._conn: pika.SelectConnection | None = None
        self._endpoint: Endpoint | None = None
        self._round: list[Endpoint] = []
        self._failed_rounds = 0
        self._users: list[ChannelUser] = []
        self._channels: dict[ChannelUser, Channel] = {}
        self._cond = threading.Condition()
        self._open = False
        self._closing = False
        self._closed = threading.Event()
        self._started = False
        self._start_lock = threading.Lock()
        #: Connections established so far; a change means "reconnected".
        self.generation = 0
        #: Failed connection attempts since the last successful one, and in all.
        self.failed_attempts = 0
        self.total_failures = 0
        self.last_error: str | None = None
        self.fatal_error: AccessDenied | None = None
        #: Entities that exist with other attributes: declared passively from then on.
        self.passive_names: set[str] = set()
        self._warned_passive: set[str] = set()

    def __repr__(self) -> str:
        return f"<RabbitConnection {self.purpose} {self.settings.url_for_logs}>"

    def start(self) -> None:
        with self._start_lock:
            if not self._started:
                self._started = True
                pika_log.install()
                self._thread.start()
                self.call_soon(self._io_connect)

    def close(self, timeout: float = 5.0) -> None:
        """Close channels and the connection and end the I/O thread."""
        if not self._started or self._closing:
            return
        self._closing = True
        try:
            self.call_soon(self._io_close)
        except MessageDeliveryFailure:
            return  # the loop already ended
        self._closed.wait(timeout)
        if not self._closed.is_set():
            LOG.warning("%r: did not close within %.1fs", self, timeout)
            self._ioloop.add_callback_threadsafe(self._ioloop.stop)
        if threading.get_ident() != self._io_ident:
            self._thread.join(timeout)
        with self._cond:
            self._open = False
            self._cond.notify_all()

    @property
    def is_open(self) -> bool:
        return self._open

    def in_io_thread(self) -> bool:
        """True where pika's objects may be touched now: under the loop's lock (its thread's
        turn or a lent block) or, on pika's own loop, on the I/O thread."""
        if self._lending:
            return bool(self._ioloop.holds_lock())
        return threading.get_ident() == self._io_ident

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the I/O thread (thread-safe)."""
        if self._closed.is_set():
            raise MessageDeliveryFailure(f"{self!r} is closed")
        if args:
            self._ioloop.add_callback_threadsafe(lambda: fn(*args))
        else:
            self._ioloop.add_callback_threadsafe(fn)

    def try_run_locked(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Run ``fn(*args)`` now under the loop's lock if it is free; False (nothing run) otherwise.

        For short non-blocking work (one publish): no wake-up, no thread hop. Told False, the
        caller hands its work to :meth:`call_soon` rather than queue for the lock.
        """
        if not self._lending or not self._ioloop.try_lend():
            return False
        try:
            if self._closed.is_set():
                raise MessageDeliveryFailure(f"{self!r} is closed")
            fn(*args)
        finally:
            self._ioloop.end_lent()
        return True

    def call_unlocked(self, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on this thread outside the loop's lock: once this thread lets go of
        it, or now if it holds none (for the application's callbacks, e.g. ``on_done``)."""
        if self._lending and self._ioloop.holds_lock():
            self._ioloop.call_unlocked(fn)
        else:
            fn()

    def read_while_waiting(self, done: Callable[[], bool], timeout: float | None,
                           first: Callable[[], None] | None = None,
                           recheck: float = 0.01) -> bool:
        """Before waiting for what this connection will bring, read it on this thread.

        Returns when ``done()``, after ``timeout`` or at once (False, ``first`` not run) when
        another thread reads; see :meth:`LendingIOLoop.read_while`.
        """
        if timeout is None:
            timeout = 3600.0
        if timeout <= 0 or not self._lending or self._closed.is_set() or not self._open:
            return False
        return self._ioloop.read_while(done, time.monotonic() + timeout, first, recheck)

    def call_later(self, delay: float, fn: Callable[[], Any]) -> None:
        """Run ``fn`` on the I/O thread after ``delay`` seconds (thread-safe)."""
        if self.in_io_thread():
            self._ioloop.call_later(delay, fn)
        else:
            self.call_soon(lambda: self._ioloop.call_later(delay, fn))

    def wait_open(self, timeout: float | None, max_failures: int | None = None) -> bool:
        """Wait until connected; False on timeout or after ``max_failures`` more failed
        attempts. Raises the fatal error, if any."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            failures_at_start = self.total_failures
            while not self._open:
                if max_failures is not None and self.total_failures - failures_at_start >= max_failures:
                    return False
                if self.fatal_error is not None:
                    raise self.fatal_error
                if self._closing:
                    return False
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining if remaining is not None else 1.0)
        return True

    def add_user(self, user: ChannelUser) -> None:
        """Give ``user`` a channel now (if connected) and after every reconnect."""
        self.start()
        self.call_soon(self._io_add_user, user)

    def remove_user(self, user: ChannelUser, timeout: float = 5.0) -> None:
        """Close ``user``'s channel (after its last words) and forget it."""
        if self._closed.is_set() or not self._thread.is_alive():
            return
        done = threading.Event()
        try:
            self.call_soon(self._io_remove_user, user, done)
        except MessageDeliveryFailure:
            return  # closed meanwhile: the channel went with the connection
        if threading.get_ident() != self._io_ident and not self.in_io_thread():
            done.wait(timeout)

    def note_entity_error(self, reason: BaseException) -> bool:
        """Learn from a channel error about an exchange or queue; True if retrying may help.

        406 PRECONDITION_FAILED: the entity exists with other attributes (say a
        durable exchange made by another service); use it as it is, as oslo
        does. 404 NOT_FOUND on a passive declaration: it is gone, declare it.
        """
        if not isinstance(reason, pex.ChannelClosedByBroker):
            return True
        match = _ENTITY_RE.search(reason.reply_text or "")
        if reason.reply_code == 406 and match and "inequivalent arg" in reason.reply_text:
            name = match.group(2)
            self.passive_names.add(name)
            if name not in self._warned_passive:
                self._warned_passive.add(name)
                LOG.warning("%s %r already exists with other attributes (%s); using it as it is",
                            match.group(1).capitalize(), name, reason.reply_text)
            return True
        if reason.reply_code == 404 and match:
            self.passive_names.discard(match.group(2))
            return True
        if reason.reply_code == 404:
            return True
        return reason.reply_code not in (403, 530)

    def _run(self) -> None:
        self._io_ident = threading.get_ident()
        pika_log.mark_io_thread()  # pika's lines about our attempts: we log each one ourselves
        try:
            self._ioloop.start()
        except Exception:  # pragma: no cover - the loop itself failing is a bug
            LOG.exception("%r: I/O loop crashed", self)
        finally:
            with self._cond:
                self._open = False
                self._cond.notify_all()
            self._closed.set()
            try:
                self._ioloop.close()
            except Exception:  # noqa: BLE001 - closing a dead loop
                pass

    def _io_connect(self) -> None:
        if self._closing:
            return
        if not self._round:
            self._round = self.settings.next_order()
        endpoint = self._round.pop(0)
        self._endpoint = endpoint
        LOG.debug("%r: connecting to %s", self, endpoint.netloc)
        try:
            self._conn = pika.SelectConnection(
                self.settings.parameters(endpoint, self.purpose),
                on_open_callback=self._io_on_open, on_open_error_callback=self._io_on_open_error,
                on_close_callback=self._io_on_close,
                custom_ioloop=self._ioloop)
        except Exception as exc:  # bad parameters surface here
            self._io_on_open_error(None, exc)

    def _io_on_open(self, conn: pika.SelectConnection) -> None:
        if self._closing:
            conn.close()
            return
        conn.add_on_connection_blocked_callback(self._io_on_blocked)
        conn.add_on_connection_unblocked_callback(self._io_on_unblocked)
        self._round = []
        self._failed_rounds = 0
        with self._cond:
            self._open = True
            self.generation += 1
            self.failed_attempts = 0
            self.fatal_error = None
            self.last_error = None
            self._cond.notify_all()
        level = logging.INFO if self.generation > 1 else logging.DEBUG
        LOG.log(level, "%r: connected to %s vhost %r", self, self._endpoint and self._endpoint.netloc,
                self.settings.virtual_host)
        for user in list(self._users):
            self._io_open_channel(user)

    def _io_on_open_error(self, conn: Any, error: BaseException) -> None:
        if self._closing:
            self._ioloop.stop()
            return
        where = self._endpoint.netloc if self._endpoint else "?"
        message = describe(error)
        with self._cond:
            self.failed_attempts += 1
            self.total_failures += 1
            self.last_error = f"{where}: {message}"
            if isinstance(error, _FATAL_OPEN_ERRORS):
                user = self._endpoint.username if self._endpoint else "?"
                kind = ("virtual host" if isinstance(error, pex.ProbableAccessDeniedError)
                        else "login")
                self.fatal_error = AccessDenied(
                    f"RabbitMQ at {where} refused the {kind} for user {user!r} on virtual host "
                    f"{self.settings.virtual_host!r}: {message}")
            self._cond.notify_all()
        LOG.error("%r: cannot connect to %s: %s", self, where, message)
        for channel_user in list(self._users):
            try:
                channel_user.io_connect_failed(error)
            except Exception:
                LOG.exception("%r: %s failed handling a connection failure", self, channel_user.name)
        self._io_schedule_reconnect()

    def _io_schedule_reconnect(self) -> None:
        if self._closing:
            return
        if self._round:
            delay = 0.0  # next host of this round at once
        else:
            self._failed_rounds += 1
            delay = self.settings.reconnect_backoff.delay(self._failed_rounds)
            if self.fatal_error is not None:
                delay = max(delay, float(self.settings.opts.rabbit_interval_max))
        if delay > 0:
            LOG.info("%r: reconnecting in %.1fs", self, delay)
        self._ioloop.call_later(delay, self._io_connect)

    def _io_on_close(self, conn: pika.SelectConnection, reason: BaseException) -> None:
        with self._cond:
            self._open = False
            self._cond.notify_all()
        self._channels.clear()
        if self._closing:
            self._ioloop.stop()
            return
        LOG.warning("%r: connection to %s lost: %s", self, self._endpoint and self._endpoint.netloc,
                    describe(reason))
        self._round = []
        self._failed_rounds = 0
        self._io_schedule_reconnect_after_loss()

    def _io_schedule_reconnect_after_loss(self) -> None:
        # Start a fresh round at once; backoff starts if the whole round fails.
        self._ioloop.call_later(0, self._io_connect)

    def _io_on_blocked(self, conn: Any, frame: Any) -> None:
        reason = getattr(getattr(frame, "method", None), "reason", "")
        LOG.error("%r: the broker blocked the connection: %s", self, reason)

    def _io_on_unblocked(self, conn: Any, frame: Any) -> None:
        LOG.info("%r: the broker unblocked the connection", self)

    def _io_close(self) -> None:
        for user in list(self._users):
            self._io_remove_user(user, None)
        conn = self._conn
        if conn is not None and not (conn.is_closed or conn.is_closing):
            try:
                conn.close()
                return  # _io_on_close stops the loop
            except Exception:  # noqa: BLE001 - already closing
                pass
        self._ioloop.stop()

    def _io_add_user(self, user: ChannelUser) -> None:
        if user in self._users:
            return
        self._users.append(user)
        if self._open:
            self._io_open_channel(user)

    def _io_remove_user(self, user: ChannelUser, done: threading.Event | None) -> None:
        if user in self._users:
            self._users.remove(user)
        channel = self._channels.pop(user, None)
        if channel is not None and channel.is_open:
            try:
                user.io_before_close(channel)
            except Exception:
                LOG.exception("%r: %s failed before closing its channel", self, user.name)
            if done is not None:
                channel.add_on_close_callback(lambda ch, reason: done.set())
            try:
                channel.close()
            except Exception:  # noqa: BLE001 - already closing
                if done is not None:
                    done.set()
        elif done is not None:
            done.set()

    def _io_open_channel(self, user: ChannelUser) -> None:
        conn = self._conn
        if conn is None or not conn.is_open or user not in self._users or user in self._channels:
            return
        generation = self.generation
        try:
            conn.channel(on_open_callback=lambda ch: self._io_on_channel_open(user, generation, ch))
        except Exception as exc:
            LOG.warning("%r: cannot open a channel for %s: %s", self, user.name, describe(exc))

    def _io_on_channel_open(self, user: ChannelUser, generation: int, channel: Channel) -> None:
        if user not in self._users or generation != self.generation or user in self._channels:
            channel.close()
            return
        self._channels[user] = channel
        channel.add_on_close_callback(lambda ch, reason: self._io_on_channel_closed(user, ch, reason))
        try:
            user.io_channel_open(channel)
        except Exception:
            LOG.exception("%r: %s failed setting up its channel", self, user.name)
            channel.close()

    def _io_on_channel_closed(self, user: ChannelUser, channel: Channel, reason: BaseException) -> None:
        if self._channels.get(user) is channel:
            del self._channels[user]
        try:
            user.io_channel_closed(channel, reason)
        except Exception:
            LOG.exception("%r: %s failed handling its channel closing", self, user.name)
        if self._closing or user not in self._users or not self._open:
            return  # a reconnect opens the channel again
        delay = user.io_reopen_delay(reason)
        if delay is not None:
            self._ioloop.call_later(delay, lambda: self._io_open_channel(user))
