"""The RabbitMQ driver's I/O loop for pika, without a broker: the loop's own duties
(callbacks, timers, handlers, stop), lending it to other threads (work under its lock,
writes sent at the end of a lent block, a waiting thread reading the socket itself,
callbacks run once the lock is let go), the methods that need the loop refusing other
threads, and the contract with pika: pika's documented ``IOLoop`` interface, nothing of
pika's that pika calls not public."""
from __future__ import annotations

import ast
import contextlib
import inspect
import os
import pathlib
import socket
import threading
import time

import pytest
from pika.adapters.select_connection import IOLoop

import notify_transport
from notify_transport.drivers.rabbit import ioloop
from notify_transport.drivers.rabbit.ioloop import LendingIOLoop, LoopNotHeld

pytestmark = pytest.mark.skipif(not ioloop.AVAILABLE, reason="needs epoll")


def wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.005)


@pytest.fixture
def running_loop():
    loop = LendingIOLoop()
    thread = threading.Thread(target=loop.start, daemon=True)
    thread.start()
    wait_for(lambda: loop.holds_lock() is False and thread.is_alive())
    loop.add_callback(lambda: None)  # make sure the loop ran once
    yield loop, thread
    loop.add_callback(loop.stop)
    thread.join(5)
    assert not thread.is_alive()
    loop.close()


def test_callbacks_run_on_the_loop_thread_in_order(running_loop):
    loop, thread = running_loop
    seen = []
    for i in range(5):
        loop.add_callback(lambda i=i: seen.append((i, threading.current_thread() is thread)))
    wait_for(lambda: len(seen) == 5)
    assert seen == [(i, True) for i in range(5)]


def test_timers_fire_in_deadline_order_and_can_be_removed(running_loop):
    loop, _thread = running_loop
    seen = []
    with loop.lent():  # timers are set under the lock, as pika sets them
        loop.call_later(0.05, lambda: seen.append("late"))
        loop.call_later(0.01, lambda: seen.append("early"))
        removed = loop.call_later(0.02, lambda: seen.append("removed"))
        loop.remove_timeout(removed)
    wait_for(lambda: len(seen) == 2)
    time.sleep(0.05)
    assert seen == ["early", "late"]


def test_a_timer_set_by_a_borrower_cuts_the_loops_wait_short(running_loop):
    loop, _thread = running_loop
    fired = threading.Event()
    time.sleep(0.05)  # the loop now waits with no timer at all
    with loop.lent():
        loop.call_later(0.0, fired.set)
    assert fired.wait(5)


def test_handlers_are_called_for_readable_sockets_and_removed_cleanly(running_loop):
    loop, thread = running_loop
    a, b = socket.socketpair()
    a.setblocking(False)
    got = []

    def on_event(fd, events):
        got.append((events, threading.current_thread() is thread, a.recv(100)))

    try:
        with loop.lent():
            loop.add_handler(a.fileno(), on_event, loop.READ)
        b.send(b"ping")
        wait_for(lambda: got)
        assert got == [(loop.READ, True, b"ping")]
        with loop.lent():
            loop.remove_handler(a.fileno())
        b.send(b"more")
        time.sleep(0.05)
        assert len(got) == 1
    finally:
        a.close()
        b.close()


def test_a_lent_block_keeps_the_loop_out(running_loop):
    loop, _thread = running_loop
    inside = []
    with loop.lent():
        assert loop.holds_lock()
        loop.add_callback(lambda: inside.append("loop"))
        time.sleep(0.05)  # the loop is woken but must wait for the lock
        inside.append("borrower")
    wait_for(lambda: len(inside) == 2)
    assert inside == ["borrower", "loop"]
    assert not loop.holds_lock()


def test_try_lend_takes_only_a_free_lock(running_loop):
    loop, _thread = running_loop
    inside, release = threading.Event(), threading.Event()

    def hold():
        with loop.lent():
            inside.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(5)
    assert loop.try_lend() is False  # busy: the caller hands its work over instead
    release.set()
    holder.join(5)
    deadline = time.monotonic() + 5
    while not loop.try_lend():  # free again (the loop's thread may hold it for a moment)
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert loop.holds_lock()
    loop.end_lent()
    assert not loop.holds_lock()


@pytest.fixture
def pair():
    """A connected socket pair; the first end is non-blocking, as pika's sockets are."""
    a, b = socket.socketpair()
    a.setblocking(False)
    yield a, b
    a.close()
    b.close()


@contextlib.contextmanager
def watched(loop, sock, handler, events=None):
    """``sock`` registered with ``loop`` for the block (as pika registers its socket)."""
    with loop.lent():
        loop.add_handler(sock.fileno(), handler, loop.READ if events is None else events)
    try:
        yield
    finally:
        with loop.lent():
            loop.remove_handler(sock.fileno())


def test_writes_asked_for_in_a_lent_block_happen_when_it_ends_on_the_borrowers_thread(running_loop, pair):
    loop, thread = running_loop
    a, b = pair
    calls = []

    def on_event(fd, events):
        calls.append((events, threading.current_thread() is thread))
        if events & loop.WRITE:
            a.send(b"out")
            loop.update_handler(fd, loop.READ)

    with watched(loop, a, on_event):
        with loop.lent():
            loop.update_handler(a.fileno(), loop.READ | loop.WRITE)
            assert calls == []  # not yet: at the end of the block
        assert calls == [(loop.WRITE, False)]
        assert b.recv(10) == b"out"
        time.sleep(0.05)
        assert calls == [(loop.WRITE, False)]  # the loop's thread was not called for it


def test_a_waiting_thread_reads_the_socket_itself_then_hands_reading_back(running_loop, pair):
    loop, thread = running_loop
    a, b = pair
    received = []

    def on_event(fd, events):
        try:
            data = a.recv(100)
        except BlockingIOError:
            return
        received.append((data, threading.current_thread() is thread))

    with watched(loop, a, on_event):
        sent_first = []
        assert loop.read_while(lambda: bool(received), time.monotonic() + 10,
                               first=lambda: sent_first.append(b.send(b"answer")))
        assert sent_first == [6]
        assert received == [(b"answer", False)]  # read here, not on the loop's thread
        b.send(b"later")
        wait_for(lambda: len(received) == 2)
        assert received[1] == (b"later", True)  # the loop reads again


def test_only_one_thread_reads_at_a_time_and_done_ends_the_wait(running_loop, pair):
    loop, _thread = running_loop
    a, _b = pair
    release = threading.Event()
    results = []
    with watched(loop, a, lambda fd, ev: None):
        reader = threading.Thread(
            target=lambda: results.append(loop.read_while(release.is_set, time.monotonic() + 10,
                                                          recheck=0.01)))
        reader.start()
        time.sleep(0.05)
        ran = []
        assert loop.read_while(lambda: False, time.monotonic() + 10,
                               first=lambda: ran.append(1)) is False
        assert ran == []  # refused without running ``first``
        release.set()
        reader.join(5)
        assert results == [True]


def test_read_while_gives_up_at_the_deadline(running_loop, pair):
    loop, _thread = running_loop
    a, _b = pair
    with watched(loop, a, lambda fd, ev: None):
        started = time.monotonic()
        assert loop.read_while(lambda: False, started + 0.1) is True
        assert 0.1 <= time.monotonic() - started < 5


def test_read_while_ends_when_the_socket_goes_away(running_loop, pair):
    loop, _thread = running_loop
    a, _b = pair
    with loop.lent():
        loop.add_handler(a.fileno(), lambda fd, ev: None, loop.READ)
    results = []
    reader = threading.Thread(
        target=lambda: results.append(loop.read_while(lambda: False, time.monotonic() + 60)))
    reader.start()
    time.sleep(0.05)
    loop.add_callback(lambda: loop.remove_handler(a.fileno()))  # as pika does when the connection closes
    reader.join(10)
    assert results == [True]
    # and with no socket registered there is nothing to read: refused at once
    assert loop.read_while(lambda: False, time.monotonic() + 60) is False


def test_a_failing_callback_or_timer_is_logged_and_the_loop_goes_on(running_loop, caplog):
    loop, _thread = running_loop
    after = threading.Event()

    def boom():
        raise RuntimeError("bug in a callback")

    loop.add_callback(boom)
    with loop.lent():
        loop.call_later(0, boom)
    loop.add_callback(lambda: loop.add_callback(after.set))
    assert after.wait(5)
    wait_for(lambda: sum("bug in a callback" in r.exc_text for r in caplog.records if r.exc_text) == 2)


def test_a_closed_loop_drops_callbacks_and_never_writes_to_its_old_descriptors():
    loop = LendingIOLoop()
    old_wake = loop._wake_w
    loop.close()
    # the process reuses the freed number for a pipe of its own: nothing may reach it
    reader, writer = os.pipe()
    os.set_blocking(reader, False)
    os.dup2(writer, old_wake)
    try:
        loop.add_callback(lambda: None)  # e.g. pika's transport reporting a loss late
        loop.stop()
        loop.close()  # twice is harmless
        with pytest.raises(BlockingIOError):
            os.read(reader, 1)
    finally:
        for fd in {reader, writer, old_wake}:
            os.close(fd)


def test_stop_from_another_thread_ends_the_loop():
    loop = LendingIOLoop()
    thread = threading.Thread(target=loop.start, daemon=True)
    thread.start()
    time.sleep(0.02)
    loop.add_callback(loop.stop)
    thread.join(5)
    assert not thread.is_alive()
    loop.close()


def test_the_methods_that_need_the_loop_refuse_a_thread_that_does_not_hold_it(running_loop, pair):
    loop, _thread = running_loop
    a, _b = pair
    fd = a.fileno()
    for refused in (lambda: loop.add_handler(fd, lambda fd, ev: None, loop.READ),
                    lambda: loop.call_later(0, lambda: None),
                    lambda: loop.call_unlocked(lambda: None)):
        with pytest.raises(LoopNotHeld):
            refused()
    with loop.lent():
        loop.add_handler(fd, lambda fd, ev: None, loop.READ)
    for refused in (lambda: loop.update_handler(fd, loop.READ | loop.WRITE),
                    lambda: loop.remove_handler(fd)):
        with pytest.raises(LoopNotHeld):
            refused()
    with loop.lent():
        loop.update_handler(fd, loop.READ)
        loop.remove_handler(fd)


def test_callbacks_deferred_in_a_lent_block_run_once_the_lock_is_let_go(running_loop):
    loop, _thread = running_loop
    seen = []

    def deferred():
        took = loop.try_lend()  # free for anyone now
        if took:
            loop.end_lent()
        seen.append((threading.current_thread() is threading.main_thread(), loop.holds_lock(), took))

    with loop.lent():
        loop.call_unlocked(deferred)
        assert seen == []
    assert seen == [(True, False, True)]


def test_callbacks_deferred_on_the_loop_thread_run_unlocked_and_what_they_schedule_runs(running_loop):
    loop, thread = running_loop
    seen = []
    done = threading.Event()

    def deferred():
        seen.append((threading.current_thread() is thread, loop.holds_lock()))
        loop.add_callback(done.set)  # on the loop's thread: no wake-up; the loop must look again

    loop.add_callback(lambda: loop.call_unlocked(deferred))
    assert done.wait(5)
    assert seen == [(True, False)]


#: Methods of pika's IOLoop that its docstrings mark "[Extension]": pika's own uses, not the
#: interface ``SelectConnection`` asks of a ``custom_ioloop``.
PIKA_IOLOOP_EXTENSIONS = {"activate_poller", "deactivate_poller", "poll", "process_timeouts"}


def test_the_loop_has_the_interface_of_pikas_documented_ioloop():
    """Fails when pika changes the interface its ``custom_ioloop`` parameter documents."""
    public = {name for name in vars(IOLoop) if not name.startswith("_")} | {"READ", "WRITE", "ERROR"}
    assert PIKA_IOLOOP_EXTENSIONS <= public
    for name in sorted(public - PIKA_IOLOOP_EXTENSIONS):
        ours = getattr(LendingIOLoop, name, None)
        assert ours is not None, name
        theirs = getattr(IOLoop, name)
        if callable(theirs):
            assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), name
        else:
            assert isinstance(ours, int), name


#: pika's own modules behind its adapters; its nbio_interface says "not a public API".
PIKA_NOT_PUBLIC = ("pika.adapters.utils",)


def test_the_package_imports_nothing_pika_calls_not_public():
    package = pathlib.Path(notify_transport.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(package)}: {name}" for name in names
                      if name.startswith(PIKA_NOT_PUBLIC)]
    assert found == []
