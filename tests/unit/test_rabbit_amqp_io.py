"""The shortcuts of ``drivers.rabbit.amqp_io`` against pika's own paths: the same bytes
published, the same confirms and deliveries read (whole, split, mixed with other frames),
and a waiting thread reading a socket while the I/O loop's thread leaves it alone."""
import socket
import threading
import time

import pika
import pytest
from pika import frame, spec
from pika.adapters.utils.io_services_utils import _AsyncPlaintextTransport
from pika.adapters.utils.selector_ioloop_adapter import SelectorIOServicesAdapter
from pika.channel import ContentFrameAssembler

from notify_transport.drivers.rabbit import amqp_io
from notify_transport.drivers.rabbit.amqp_io import AmqpConnection, LockingIOLoop
from notify_transport.drivers.rabbit.codec import BodyCodec

pytestmark = pytest.mark.skipif(not amqp_io._SHORTCUTS_USABLE, reason="pika internals differ")


class Conn(AmqpConnection):
    """An AmqpConnection without a socket: what it writes and what pika would process."""

    def __init__(self, frame_max=131072):  # noqa: D107 - no pika set-up on purpose
        self._confirm_handlers = {}
        self._channels = {}
        self._frame_buffer = b""
        self.bytes_sent = self.frames_sent = self.bytes_received = self.frames_received = 0
        self._body_max_length = frame_max - 8
        self.connection_state = self.CONNECTION_OPEN
        self.written = []
        self.slow = []  # frames left to pika

    def _adapter_emit_data(self, data):
        self.written.append(data)

    def _process_frame(self, frame_value):
        self.frames_received += 1
        self.slow.append(frame_value)


class Channel:
    channel_number = 1
    is_open = True

    def __init__(self):
        self.deliveries = []
        self.rejected = []
        self._consumers = {"ctag": lambda ch, method, props, body: self.deliveries.append(
            (method, props, body))}
        self._cancelled = set()
        self._consumers_with_noack = set()

    def _raise_if_not_open(self):
        if not self.is_open:
            raise pika.exceptions.ChannelWrongStateError("closed")

    def basic_reject(self, tag):
        self.rejected.append(tag)


def delivery_bytes(body, props=None, tag=7, channel=1, frame_max=131072, consumer_tag="ctag"):
    props = props or BodyCodec().properties(3.0)
    frames = [frame.Method(channel, spec.Basic.Deliver(consumer_tag, tag, False, "openstack", "t.s")),
              frame.Header(channel, len(body), props)]
    step = frame_max - 8
    frames += [frame.Body(channel, body[i:i + step]) for i in range(0, len(body), step)]
    return b"".join(f.marshal() for f in frames)


def pika_delivery(data):
    """What pika's decoder and content assembler make of one delivery."""
    assembler = ContentFrameAssembler()
    while data:
        used, value = frame.decode_frame(data)
        data = data[used:]
        done = assembler.process(value)
    return done[0].method, done[1].properties, done[2]


def confirm_bytes(tag, multiple=False, nack=False, channel=1):
    method = (spec.Basic.Nack if nack else spec.Basic.Ack)(delivery_tag=tag, multiple=multiple)
    return frame.Method(channel, method).marshal()


@pytest.mark.parametrize("frame_max", [131072, 4096, 100])
@pytest.mark.parametrize("body", [b"", b"{}", b"x" * 5000, "é".encode() * 300])
def test_fast_publish_writes_what_pika_would(frame_max, body):
    for props in (BodyCodec().properties(), BodyCodec("gzip").properties(12.5),
                  pika.BasicProperties(message_id="17", headers={"a": 1})):
        for exchange, key, mandatory in (("", "reply_x", True), ("openstack", "t.s", False),
                                         ("é", "ü" * 100, True)):
            ours, theirs = Conn(frame_max), Conn(frame_max)
            ours.fast_publish(Channel(), exchange, key, body, props, mandatory)
            pika.connection.Connection._send_message(  # the path of channel.basic_publish
                theirs, 1, spec.Basic.Publish(exchange=exchange, routing_key=key,
                                              mandatory=mandatory), (props, body))
            assert ours.written == theirs.written
            assert (ours.bytes_sent, ours.frames_sent) == (theirs.bytes_sent, theirs.frames_sent)


def test_fast_publish_checks_the_channel_like_basic_publish():
    channel = Channel()
    channel.is_open = False
    with pytest.raises(pika.exceptions.ChannelWrongStateError):
        Conn().fast_publish(channel, "", "rk", b"{}", pika.BasicProperties(), False)


def test_confirms_go_to_the_channel_handler_others_to_pika():
    conn = Conn()
    seen = []
    conn.set_confirm_handler(1, lambda tag, multiple, acked: seen.append((tag, multiple, acked)))
    data = (confirm_bytes(1) + confirm_bytes(3, multiple=True) + confirm_bytes(4, nack=True)
            + confirm_bytes(9, channel=2) + frame.Method(1, spec.Channel.Flow(True)).marshal())
    conn._on_data_available(data)
    assert seen == [(1, False, True), (3, True, True), (4, False, False)]
    assert [(f.channel_number, type(f.method)) for f in conn.slow] == [
        (2, spec.Basic.Ack), (1, spec.Channel.Flow)]  # no handler on channel 2: pika's
    assert conn.bytes_received == len(data) and conn.frames_received == 5
    conn.set_confirm_handler(1, None)
    conn._on_data_available(confirm_bytes(5))
    assert len(seen) == 3 and type(conn.slow[-1].method) is spec.Basic.Ack


@pytest.mark.parametrize("size", [0, 10, 1000, 5000])
def test_delivery_as_pika_assembles_it_even_byte_by_byte(size):
    body = bytes(range(256)) * (size // 256) + b"z" * (size % 256)
    data = delivery_bytes(body, frame_max=4096)
    want = pika_delivery(data)
    for chunks in ([data], [data[i:i + 1] for i in range(len(data))]):
        conn, channel = Conn(), Channel()
        conn._channels[1] = channel
        for chunk in chunks:
            conn._on_data_available(chunk)
        assert len(channel.deliveries) == 1 and not conn.slow
        method, props, got = channel.deliveries[0]
        assert got == want[2]
        assert (method.consumer_tag, method.delivery_tag, method.redelivered, method.exchange,
                method.routing_key) == ("ctag", 7, False, "openstack", "t.s")
        assert props.__dict__ == want[1].__dict__
        assert conn.bytes_received == len(data) and conn._frame_buffer == b""


def test_deliveries_and_other_frames_keep_their_order():
    conn, channel = Conn(), Channel()
    conn._channels[1] = channel
    order = []
    channel._consumers["ctag"] = lambda ch, method, props, body: order.append(body)
    conn._process_frame = lambda f: order.append(type(f.method).__name__)
    conn._on_data_available(delivery_bytes(b"a") + frame.Method(1, spec.Basic.CancelOk("x")).marshal()
                            + delivery_bytes(b"b"))
    assert order == [b"a", "CancelOk", b"b"]


def test_large_delivery_is_left_to_pika():
    conn, channel = Conn(), Channel()
    conn._channels[1] = channel
    conn._on_data_available(delivery_bytes(b"x" * (amqp_io._MAX_SHORT_DELIVERY + 1)))
    assert not channel.deliveries
    assert [type(f).__name__ for f in conn.slow][:2] == ["Method", "Header"]


def test_delivery_to_a_cancelled_or_unknown_consumer():
    conn, channel = Conn(), Channel()
    conn._channels[1] = channel
    channel._cancelled.add("ctag")
    conn._on_data_available(delivery_bytes(b"a", tag=5))
    assert channel.rejected == [5] and not channel.deliveries  # as pika: rejected, not requeued
    conn._on_data_available(delivery_bytes(b"b", consumer_tag="gone"))
    assert not channel.deliveries and conn._frame_buffer == b""


# -- a thread reading the socket instead of the loop's thread ----------------------------

class Protocol:
    def __init__(self, conn):
        self.data_received = conn._proto_data_received

    def eof_received(self):
        return False

    def connection_lost(self, error):
        pass


@pytest.fixture
def loop_and_socket():
    lock = threading.RLock()
    loop = LockingIOLoop(lock)
    ours, broker = socket.socketpair()
    ours.setblocking(False)
    conn = Conn()
    conn.loop_reads = []
    conn._on_data_available = lambda data: conn.loop_reads.append((threading.current_thread(), data))
    conn._transport = _AsyncPlaintextTransport(ours, Protocol(conn), SelectorIOServicesAdapter(loop))

    def run():
        with lock:
            loop.start()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(0.05)
    yield loop, conn, broker, thread
    loop.add_callback_threadsafe(loop.stop)
    thread.join(5)
    ours.close()
    broker.close()


def wait_for(predicate, timeout=2.0):
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.005)
    return predicate()


def test_waiting_thread_reads_while_the_loop_leaves_the_socket_alone(loop_and_socket):
    loop, conn, broker, loop_thread = loop_and_socket
    broker.send(b"before")
    assert wait_for(lambda: conn.loop_reads)  # nobody waits: the loop reads
    assert conn.loop_reads.pop()[0] is loop_thread
    sent = []
    took_over = loop.read_here(lambda: conn, lambda: bool(conn.loop_reads), time.monotonic() + 2,
                               first=lambda: sent.append(broker.send(b"answer")))
    assert took_over and sent
    assert conn.loop_reads == [(threading.current_thread(), b"answer")]
    conn.loop_reads.clear()
    broker.send(b"after")  # done waiting: the loop reads again
    assert wait_for(lambda: conn.loop_reads) and conn.loop_reads[0][0] is loop_thread


def test_one_reader_at_a_time(loop_and_socket):
    loop, conn, broker, _loop_thread = loop_and_socket
    release = threading.Event()
    first = threading.Thread(target=loop.read_here, args=(lambda: conn, release.is_set,
                                                          time.monotonic() + 5))
    first.start()
    time.sleep(0.05)
    ran = []
    assert not loop.read_here(lambda: conn, lambda: False, time.monotonic() + 1,
                              first=lambda: ran.append(1))
    assert not ran  # declined at once, ``first`` left to the caller
    release.set()
    first.join(2)
    assert not first.is_alive()


def test_reader_gives_up_at_the_deadline(loop_and_socket):
    loop, conn, _broker, _loop_thread = loop_and_socket
    started = time.monotonic()
    assert loop.read_here(lambda: conn, lambda: False, started + 0.1, recheck=0.02)
    assert 0.09 <= time.monotonic() - started < 1.0


def test_events_of_descriptors_changed_during_the_wait_are_dropped():
    lock = threading.RLock()
    lock.acquire()

    class Epoll:
        register = modify = unregister = close = staticmethod(lambda *args: None)

        def poll(self, timeout):
            assert not lock._is_owned()  # the lock is free while waiting
            wrapped.changed.add(5)  # another thread closed fd 5 meanwhile
            return [(5, 1), (6, 1)]

    wrapped = amqp_io._LockReleasingPoll(Epoll(), lock)
    assert wrapped.poll(0) == [(6, 1)]
    assert lock._is_owned()
    wrapped.changed.clear()


def test_only_the_reader_that_took_a_socket_over_gives_it_back(loop_and_socket):
    loop, conn, broker, loop_thread = loop_and_socket
    poller, fileno = loop._poller, conn._transport._sock.fileno()
    mine, other = object(), object()
    with loop._io_lock:
        assert poller.stop_reading(fileno, mine)
        assert not poller.stop_reading(fileno, other)
        poller.resume_reading(fileno, other)  # not its to give back
    broker.send(b"x")
    time.sleep(0.1)
    assert not conn.loop_reads  # still left to the reader
    with loop._io_lock:
        poller.resume_reading(fileno, mine)
    assert wait_for(lambda: conn.loop_reads) and conn.loop_reads[0][0] is loop_thread
