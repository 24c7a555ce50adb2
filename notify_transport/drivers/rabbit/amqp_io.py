"""pika's SelectConnection and IOLoop with fewer system calls, thread hops and layers.

pika stays in charge of the protocol (handshake, channels, declarations,
heartbeats, errors); what changes is how the bytes of the frequent frames
move:

* Writes: pika buffers every frame and asks the poller for writability, so
  a message costs a poll round and two ``epoll_ctl`` calls before it leaves.
  :class:`AmqpConnection` joins the frames of a message and sends them at
  once when nothing is buffered (the socket is then almost always writable),
  leaving only a remainder, or an error, to pika's writer. Its
  :meth:`AmqpConnection.fast_publish` builds the frames of a ``Basic.Publish``
  directly, the bytes pika's ``basic_publish`` would build.
* Reading: a ``Basic.Ack``/``Basic.Nack`` on a channel that registered a
  confirm handler is decoded here and handed to it directly, and a
  ``Basic.Deliver`` whose content is at hand goes straight to its consumer
  callback as pika's channel would call it, instead of through pika's frame
  objects, callback manager and content assembler. Every other frame goes
  through pika as before.
* Locking: :class:`LockingIOLoop` holds a lock whenever it runs, except while
  it waits in ``epoll``, so another thread holding that lock can use the
  connection's pika objects itself (e.g. publish) instead of waking the I/O
  thread and waiting for it.
* Reading where the answer is awaited: a thread waiting for something the
  socket will bring (a confirm, a reply, a request) can read the socket
  itself (:meth:`LockingIOLoop.read_here`) while the loop's thread leaves it
  alone, so the answer needs no hand-off between threads (each costs a
  wake-up and a GIL switch). One thread at a time does so; the others wait
  as before for whoever reads.

Each shortcut falls back to pika's own path when pika's internals are not as
expected (another transport, e.g. TLS; another poller).
"""
from __future__ import annotations

import logging
import select
import struct
import threading
import time
from typing import Any, Callable

import pika
from pika import spec
from pika.adapters.select_connection import EPollPoller, IOLoop, PollEvents
from pika.adapters.utils.io_services_utils import _AsyncPlaintextTransport

LOG = logging.getLogger(__name__)

#: Largest write buffer chunk built by joining frames.
_MAX_JOINED_WRITE = 128 * 1024

_FRAME_METHOD = 1
_FRAME_HEADER_TYPE = 2
_FRAME_BODY = 3
_FRAME_END = 0xCE
_END = b"\xce"
_FRAME_HEADER = struct.Struct("!BHI")
_METHOD_ID = struct.Struct("!I")
_CONFIRM_ARGS = struct.Struct("!QB")
_CONTENT_HEADER = struct.Struct("!HHQ")
_PUBLISH_HEAD = struct.pack("!HHH", 60, 40, 0)  # Basic.Publish, reserved ticket
_HEADER_HEAD = struct.Struct("!BHIHHQ")  # frame header, class, weight, body size
_BASIC_CLASS = 60
_BASIC_DELIVER = (60 << 16) | 60
_BASIC_ACK = (60 << 16) | 80
_BASIC_NACK = (60 << 16) | 120
#: Frame header, class and method ids, delivery tag, flags, frame end.
_CONFIRM_FRAME_SIZE = 7 + 4 + 9 + 1
#: Larger deliveries are left to pika's content assembler, which takes them
#: frame by frame instead of waiting for all of them in one buffer.
_MAX_SHORT_DELIVERY = 256 * 1024
#: Bytes asked for by one ``recv`` when a waiting thread reads the socket.
_RECV_SIZE = 32 * 1024
#: pika's channel internals that a delivery taken here needs.
_CHANNEL_ATTRS = ("_consumers", "_cancelled", "_consumers_with_noack")

#: pika internals the shortcuts rely on; without any of them, pika's own paths are used.
_SHORTCUTS_USABLE = all(hasattr(owner, name) for owner, names in (
    (pika.connection.Connection, ("_trim_frame_buffer", "_read_frame", "_process_frame",
                                  "_on_data_available", "_output_marshaled_frames")),
    (pika.SelectConnection, ("_proto_data_received", "_adapter_emit_data")),
    (pika.channel.Channel, ("_raise_if_not_open",)),
    (_AsyncPlaintextTransport, ("_on_socket_readable", "_initiate_abort", "_STATE_ACTIVE")),
    (EPollPoller, ("_init_poller", "_register_fd", "_modify_fd_events", "_unregister_fd",
                   "_dispatch_fd_events")),
) for name in names)

#: ``handler(delivery_tag, multiple, acked)``, run by the thread reading the connection.
ConfirmHandler = Callable[[int, bool, bool], None]


class AmqpConnection(pika.SelectConnection):
    """pika's SelectConnection with direct, joined writes and short paths for confirms and deliveries."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._confirm_handlers: dict[int, ConfirmHandler] = {}
        super().__init__(*args, **kwargs)

    def set_confirm_handler(self, channel_number: int, handler: ConfirmHandler | None) -> None:
        """Route the confirms of a channel to ``handler`` (None: back to pika's callbacks)."""
        if handler is None or not _SHORTCUTS_USABLE:
            self._confirm_handlers.pop(channel_number, None)
        else:
            self._confirm_handlers[channel_number] = handler

    # -- writing ----------------------------------------------------------------------
    def fast_publish(self, channel: Any, exchange: str, routing_key: str, body: bytes,
                     properties: pika.BasicProperties, mandatory: bool) -> None:
        """``channel.basic_publish(...)``: the same checks, frames and bytes, built here."""
        exchange_bytes = exchange.encode()
        key_bytes = routing_key.encode()
        if (len(exchange_bytes) > 255 or len(key_bytes) > 255 or type(body) is not bytes
                or properties is None or not _SHORTCUTS_USABLE):
            channel.basic_publish(exchange, routing_key, body, properties, mandatory=mandatory)
            return  # pika raises what it must
        channel._raise_if_not_open()  # noqa: SLF001 - as basic_publish
        if self.is_closed:
            raise pika.exceptions.ConnectionWrongStateError(
                "Attempted to send a frame on closed connection.")
        number = channel.channel_number
        method = b"".join((_PUBLISH_HEAD, bytes((len(exchange_bytes),)), exchange_bytes,
                           bytes((len(key_bytes),)), key_bytes, b"\x01" if mandatory else b"\x00"))
        props = b"".join(properties.encode())
        frames = [_FRAME_HEADER.pack(_FRAME_METHOD, number, len(method)), method, _END,
                  _HEADER_HEAD.pack(_FRAME_HEADER_TYPE, number, 12 + len(props), _BASIC_CLASS, 0,
                                    len(body)), props, _END]
        count = 2
        step = self._body_max_length
        for start in range(0, len(body), step):
            chunk = body[start:start + step] if len(body) > step else body
            frames += (_FRAME_HEADER.pack(_FRAME_BODY, number, len(chunk)), chunk, _END)
            count += 1
        data = b"".join(frames)
        self.bytes_sent += len(data)
        self.frames_sent += count
        self._adapter_emit_data(data)

    def _output_marshaled_frames(self, marshaled_frames: Any) -> None:
        if len(marshaled_frames) > 1:
            data = b"".join(marshaled_frames)
            self.bytes_sent += len(data)
            self.frames_sent += len(marshaled_frames)
            self._adapter_emit_data(data)
        else:
            super()._output_marshaled_frames(marshaled_frames)

    def _adapter_emit_data(self, data: bytes) -> None:
        transport = self._transport
        buffers = getattr(transport, "_tx_buffers", None)
        if not buffers and type(transport) is _AsyncPlaintextTransport and _SHORTCUTS_USABLE:
            data = _send_now(transport, data)
            if not data:
                return
        if (buffers and isinstance(buffers[-1], bytes)
                and len(buffers[-1]) + len(data) <= _MAX_JOINED_WRITE
                and hasattr(transport, "_tx_buffered_byte_count")):
            buffers[-1] += data
            transport._tx_buffered_byte_count += len(data)  # noqa: SLF001
            return
        super()._adapter_emit_data(data)

    # -- reading ----------------------------------------------------------------------
    def _on_data_available(self, data_in: bytes) -> None:
        # pika's loop, with confirms and deliveries taken out before pika builds frame objects.
        if not _SHORTCUTS_USABLE:
            super()._on_data_available(data_in)
            return
        self._frame_buffer += data_in
        while self._frame_buffer:
            taken = self._take_frequent()
            if taken:
                continue
            if taken is None:
                return  # the rest of a delivery is still on its way
            consumed_count, frame_value = self._read_frame()
            if not frame_value:
                return
            self._trim_frame_buffer(consumed_count)
            self._process_frame(frame_value)

    def _take_frequent(self) -> bool | None:
        """Handle a confirm or a delivery at the head of the buffer.

        True if handled; False if the buffer holds something else (pika's
        turn); None if a delivery to take here is not complete yet.
        """
        buf = self._frame_buffer
        if len(buf) < 11:
            return False
        frame_type, channel_number, size = _FRAME_HEADER.unpack_from(buf)
        if frame_type != _FRAME_METHOD:
            return False
        method_id = _METHOD_ID.unpack_from(buf, 7)[0]
        if method_id == _BASIC_DELIVER:
            return self._take_delivery(buf, channel_number, size)
        if method_id == _BASIC_ACK or method_id == _BASIC_NACK:
            return self._take_confirm(buf, channel_number, size, method_id)
        return False

    def _take_confirm(self, buf: bytes, channel_number: int, size: int, method_id: int) -> bool:
        handler = self._confirm_handlers.get(channel_number)
        if (handler is None or size != 13 or len(buf) < _CONFIRM_FRAME_SIZE
                or buf[_CONFIRM_FRAME_SIZE - 1] != _FRAME_END):
            return False
        delivery_tag, flags = _CONFIRM_ARGS.unpack_from(buf, 11)
        self._trim_frame_buffer(_CONFIRM_FRAME_SIZE)
        self.frames_received += 1
        handler(delivery_tag, bool(flags & 1), method_id == _BASIC_ACK)
        return True

    def _take_delivery(self, buf: bytes, channel_number: int, size: int) -> bool | None:
        """A delivery, as pika's content assembler and ``Channel._on_deliver`` would handle it."""
        channel = self._channels.get(channel_number)
        if channel is None or not all(hasattr(channel, name) for name in _CHANNEL_ATTRS):
            return False
        available = len(buf)
        end = 7 + size
        if available <= end:
            return None
        if buf[end] != _FRAME_END:
            return False  # pika reports the broken frame
        header_at = end + 1
        if available < header_at + 7 + 12 + 1:
            return None
        header_type, header_channel, header_size = _FRAME_HEADER.unpack_from(buf, header_at)
        if header_type != _FRAME_HEADER_TYPE or header_channel != channel_number:
            return False
        header_end = header_at + 7 + header_size
        if available <= header_end:
            return None
        class_id, _weight, body_size = _CONTENT_HEADER.unpack_from(buf, header_at + 7)
        if (buf[header_end] != _FRAME_END or class_id != _BASIC_CLASS
                or body_size > _MAX_SHORT_DELIVERY):
            return False
        parts = []
        received = 0
        at = header_end + 1
        while received < body_size:
            if available < at + 8:
                return None
            body_type, body_channel, body_frame_size = _FRAME_HEADER.unpack_from(buf, at)
            if body_type != _FRAME_BODY or body_channel != channel_number:
                return False
            body_end = at + 7 + body_frame_size
            if available <= body_end:
                return None
            if buf[body_end] != _FRAME_END:
                return False
            parts.append(buf[at + 7:body_end])
            received += body_frame_size
            at = body_end + 1
        if received != body_size:
            return False  # pika reports the oversized body
        method = spec.Basic.Deliver().decode(buf, 11)
        properties = spec.BasicProperties()
        properties.decode(buf[header_at + 7 + 12:header_end])
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        self._trim_frame_buffer(at)
        self.frames_received += 2 + len(parts)
        consumer_tag = method.consumer_tag
        if consumer_tag in channel._cancelled:  # noqa: SLF001 - as Channel._on_deliver
            if channel.is_open and consumer_tag not in channel._consumers_with_noack:  # noqa: SLF001
                channel.basic_reject(method.delivery_tag)
            return True
        consumer = channel._consumers.get(consumer_tag)  # noqa: SLF001
        if consumer is None:
            LOG.error("Unexpected delivery: %r", method)
            return True
        consumer(channel, method, properties, body)
        return True

    def read_available(self) -> None:
        """Read what the socket holds and handle it (the I/O lock held; plain sockets only).

        One ``recv`` instead of pika's loop, which always ends with a second
        ``recv`` failing with EAGAIN; end of stream and errors are left to
        pika's reader, which meets them again and handles them.
        """
        transport = self._transport
        try:
            data = transport._sock.recv(_RECV_SIZE)  # noqa: SLF001
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            transport._on_socket_readable()  # noqa: SLF001
            return
        try:
            self._proto_data_received(data)
        except Exception as exc:  # as pika's reader: the connection cannot go on
            LOG.exception("Handling data from RabbitMQ failed; aborting the connection")
            transport._initiate_abort(exc)  # noqa: SLF001


def _send_now(transport: Any, data: bytes) -> bytes:
    """Send on the transport's socket at once; return what is left for pika to buffer."""
    if transport._state != transport._STATE_ACTIVE:  # noqa: SLF001
        return data
    try:
        sent = transport._sock.send(data)  # noqa: SLF001
    except OSError:  # EAGAIN, or a broken socket that pika's writer will report
        return data
    return data[sent:]


class _LockReleasingPoll:
    """An epoll object that releases the I/O lock while it waits.

    Events of a file descriptor that another thread registered or removed
    while the loop's thread waited for the lock are dropped: they may be
    about a closed socket, or an older one with the same number. (pika's
    single-threaded loop never sees that.) Readiness that still holds is
    reported again by the next wait, epoll being level-triggered.
    """

    __slots__ = ("_poll", "_lock", "changed", "register", "modify", "unregister", "close")

    def __init__(self, poll: Any, lock: Any) -> None:
        self._poll = poll
        self._lock = lock
        #: descriptors (un)registered since the current wait began
        self.changed: set[int] = set()
        self.register = poll.register
        self.modify = poll.modify
        self.unregister = poll.unregister
        self.close = poll.close

    def poll(self, timeout: float = -1) -> list:
        self.changed.clear()
        self._lock.release()
        try:
            events = self._poll.poll(timeout)
        finally:
            self._lock.acquire()
        if self.changed:
            events = [event for event in events if event[0] not in self.changed]
        return events


class _LockingEPollPoller(EPollPoller):
    """pika's epoll poller, holding the I/O lock except while it waits.

    It also stops watching a socket for reading while another thread reads
    it (:meth:`stop_reading`), whatever pika changes in the meantime.
    """

    io_lock: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        #: descriptor -> the token of the thread reading it instead of the loop's thread
        self._read_elsewhere: dict[int, object] = {}
        super().__init__(*args, **kwargs)

    def _init_poller(self) -> None:
        super()._init_poller()
        self._poll = _LockReleasingPoll(self._poll, self.io_lock)

    def _events(self, fileno: int) -> int:
        events = 0
        for evt in (PollEvents.READ, PollEvents.WRITE, PollEvents.ERROR):
            if fileno in self._fd_events[evt]:
                events |= evt
        return events & ~PollEvents.READ if fileno in self._read_elsewhere else events

    def _register_fd(self, fileno: int, events: int) -> None:
        if fileno in self._read_elsewhere:
            events &= ~PollEvents.READ
        if self._poll is not None:
            self._poll.changed.add(fileno)
        super()._register_fd(fileno, events)

    def _modify_fd_events(self, fileno: int, events: int, events_to_clear: int,
                          events_to_set: int) -> None:
        if fileno in self._read_elsewhere:
            events &= ~PollEvents.READ
        super()._modify_fd_events(fileno, events, events_to_clear, events_to_set)

    def _unregister_fd(self, fileno: int, events_to_clear: int) -> None:
        self._read_elsewhere.pop(fileno, None)
        if self._poll is not None:
            self._poll.changed.add(fileno)
        super()._unregister_fd(fileno, events_to_clear)

    def _dispatch_fd_events(self, fd_event_map: dict[int, int]) -> None:
        # Events polled just before another thread took reading over are its to handle.
        for fileno in self._read_elsewhere:
            if fileno in fd_event_map:
                fd_event_map[fileno] &= ~PollEvents.READ
        super()._dispatch_fd_events(fd_event_map)

    def stop_reading(self, fileno: int, token: object) -> bool:
        """Leave reading ``fileno`` to the caller (``token``); False if that is not possible now."""
        if (self._poll is None or fileno in self._read_elsewhere
                or fileno not in self._fd_events[PollEvents.READ]):
            return False
        self._read_elsewhere[fileno] = token
        self._poll.modify(fileno, self._events(fileno))
        return True

    def resume_reading(self, fileno: int, token: object) -> None:
        if self._read_elsewhere.get(fileno) is not token:
            return  # unregistered meanwhile (the connection closed), maybe reused since
        del self._read_elsewhere[fileno]
        if self._poll is not None and fileno in self._fd_handlers:
            self._poll.modify(fileno, self._events(fileno))


class LockingIOLoop(IOLoop):
    """pika's IOLoop on an epoll poller that releases ``io_lock`` only while waiting.

    The thread running the loop must hold ``io_lock`` when it starts it;
    other threads use the loop's objects only while holding it. Without epoll
    (not Linux) this is pika's own loop and :attr:`locking` is False: other
    threads then hand their work to the loop's thread.
    """

    def __init__(self, io_lock: Any) -> None:
        self._io_lock = io_lock
        self._loop_thread: int | None = None
        super().__init__()
        self.locking = isinstance(self._poller, _LockingEPollPoller)

    def _get_poller(self, get_wait_seconds: Callable[[], float | None],  # type: ignore[override]
                    process_timeouts: Callable[[], None]) -> Any:
        if hasattr(select, "epoll") and _SHORTCUTS_USABLE:
            poller = _LockingEPollPoller(get_wait_seconds=get_wait_seconds,
                                         process_timeouts=process_timeouts)
            poller.io_lock = self._io_lock
            return poller
        return IOLoop._get_poller(get_wait_seconds, process_timeouts)

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
        super().start()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Any:
        # A timer set by another thread (under the lock) must cut the loop's wait short.
        timeout = super().call_later(delay, callback)
        if threading.get_ident() != self._loop_thread:
            self._poller.wake_threadsafe()
        return timeout

    def read_here(self, connection: Callable[[], AmqpConnection | None], done: Callable[[], bool],
                  deadline: float, first: Callable[[], None] | None = None,
                  recheck: float = 0.01) -> bool:
        """Read the connection's socket on this thread until ``done()`` or ``deadline``.

        Frames are handled here, under the I/O lock, as the loop's thread
        would handle them; the loop's thread stops watching the socket for
        reading meanwhile and resumes when this returns. ``first`` (e.g. the
        publish whose confirm is awaited) runs under the lock once reading is
        taken over, so that the answer cannot reach the loop's thread first.

        Returns False at once, without running ``first``, when another thread
        already reads the socket, ``done()`` already holds, or the transport
        is not a plain socket (TLS buffers data that ``poll`` does not see):
        the caller then does its work and waits the usual way. ``done()`` is
        checked after each read and every ``recheck`` seconds, for news that
        came another way.
        """
        if (not self.locking or threading.get_ident() == self._loop_thread
                or self._io_lock._is_owned()):  # noqa: SLF001 - never wait holding the lock
            return False
        poller = self._poller
        with self._io_lock:
            conn = connection()
            transport = getattr(conn, "_transport", None)
            if (done() or not isinstance(conn, AmqpConnection)
                    or type(transport) is not _AsyncPlaintextTransport
                    or transport._state != transport._STATE_ACTIVE):  # noqa: SLF001
                return False
            fileno = transport._sock.fileno()  # noqa: SLF001
            token = object()
            if not poller.stop_reading(fileno, token):
                return False
            try:
                if first is not None:
                    first()
            except BaseException:
                poller.resume_reading(fileno, token)
                raise
        try:
            readable = select.poll()
            readable.register(fileno, select.POLLIN)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or done():
                    return True
                ready = readable.poll(min(remaining, recheck) * 1000)
                with self._io_lock:
                    if conn._transport is not transport or transport._state != transport._STATE_ACTIVE:  # noqa: SLF001
                        return True
                    if ready:
                        conn.read_available()
                    if done():
                        return True
        finally:
            with self._io_lock:
                poller.resume_reading(fileno, token)
