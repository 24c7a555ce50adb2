"""The listener server's side of the delivery features, over a stand-in driver listener:
driver-run processing (submit), graceful and abrupt stops bounded in time, metrics."""
import threading
import time

import pytest
from waits import wait_until

from notify_transport import NotificationResult, Target
from notify_transport.drivers.base import IncomingMessage, Listener
from notify_transport.exceptions import ConfigurationError
from notify_transport.notify.listener import get_batch_notification_listener, get_notification_listener


class StubListener(Listener):
    """Hands out one batch, runs submitted work on one worker thread, records acks."""

    #: whether it offers itself as the executor (the driver runs each dispatch)
    runs_processing = True
    workers = 1

    def executor(self, batch):
        if batch and self.workers > 1:
            raise ConfigurationError("workers > 1 needs a listener that dispatches one "
                                     "notification at a time, not a batch listener")
        return self if self.runs_processing and not batch else None

    def __init__(self, count):
        super().__init__()
        self.batch = [IncomingMessage({}, {"priority": "INFO", "event_type": "e", "publisher_id": "p",
                                           "payload": {"i": i}}, topic="t", partition=0, offset=i,
                                      on_ack=self._ack, on_requeue=self._requeue)
                      for i in range(count)]
        self.acked, self.requeued, self.submitted = [], [], 0
        self.aborted = self.cleaned = False
        self._queue: list = []
        self._cond = threading.Condition()
        self._worker = threading.Thread(target=self._work, daemon=True)
        self._busy = 0

    def _ack(self, m):
        self.acked.append(m.offset)

    def _requeue(self, m):
        self.requeued.append((m.offset, type(m.error).__name__ if m.error else None))

    def start(self):
        self._worker.start()

    def poll(self, timeout=None, max_messages=1):
        if self.batch:
            out, self.batch = self.batch, []
            return out
        self._stopped.wait(timeout)
        return []

    def submit(self, message, work):
        self.submitted += 1
        with self._cond:
            self._busy += 1
            self._queue.append((message, work))
            self._cond.notify_all()

    def _work(self):
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                message, work = self._queue.pop(0)
            if message is None:
                return
            if not self.aborted:
                work(message)
            with self._cond:
                self._busy -= 1
                self._cond.notify_all()

    def drain(self, timeout=None):
        with self._cond:
            return self._cond.wait_for(lambda: self._busy == 0, timeout)

    def abort(self):
        self.aborted = True
        self.stop()

    def metrics(self):
        return {"dead_lettered": 0, "in_flight": self._busy}

    def cleanup(self):
        self.cleaned = True
        with self._cond:
            self._queue.append((None, None))
            self._cond.notify_all()


class StubTransport:
    def __init__(self, listener):
        self.listener = listener
        self.options = None

    def _listen_for_notifications(self, pairs, pool, batch_size, batch_timeout, **options):
        self.options = options
        return self.listener


class Endpoint:
    def __init__(self, release=None, fail=()):
        self.release = release
        self.fail = set(fail)
        self.seen = []

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self.seen.append(payload["i"])
        if self.release is not None:
            self.release.wait(10)
        if payload["i"] in self.fail:
            raise ValueError(f"bad {payload['i']}")
        return None


def test_driver_runs_processing_and_stats_come_back():
    stub = StubListener(5)
    endpoint = Endpoint(fail={3})
    server = get_notification_listener(StubTransport(stub), [Target(topic="t")], [endpoint],
                                       allow_requeue=True, workers=2)
    server.start()
    assert wait_until(lambda: len(stub.acked) + len(stub.requeued) == 5)
    assert stub.submitted == 5 and endpoint.seen == [0, 1, 2, 3, 4]
    assert stub.requeued == [(3, "ValueError")]  # the endpoint's exception travels with the message
    metrics = server.metrics()
    assert metrics == {"received": 5, "dispatched": 4, "failed": 0, "requeued": 1,
                       "dead_lettered": 0, "in_flight": 0}
    assert server.stop(timeout=5) is True
    assert stub.cleaned and server.wait(1)
    assert server.metrics()["dispatched"] == 4  # still readable after the stop


def test_graceful_stop_finishes_in_flight_work():
    stub = StubListener(4)
    release = threading.Event()
    server = get_notification_listener(StubTransport(stub), [Target(topic="t")], [Endpoint(release)])
    server.start()
    assert wait_until(lambda: stub.submitted == 4)
    threading.Timer(0.3, release.set).start()
    started = time.monotonic()
    assert server.stop(graceful=True, timeout=5) is True
    assert stub.acked == [0, 1, 2, 3] and not stub.aborted and stub.cleaned
    assert time.monotonic() - started < 5


def test_graceful_stop_that_runs_out_of_time_turns_abrupt():
    stub = StubListener(3)
    release = threading.Event()
    server = get_notification_listener(StubTransport(stub), [Target(topic="t")], [Endpoint(release)])
    server.start()
    assert wait_until(lambda: stub.submitted == 3)
    started = time.monotonic()
    assert server.stop(graceful=True, timeout=0.5) is False
    assert time.monotonic() - started < 3  # bounded
    assert stub.aborted and stub.cleaned
    release.set()
    stub._worker.join(5)  # the running call ends, then the worker goes through the rest
    assert not stub._worker.is_alive()
    assert stub.acked == [0]  # and never started it


def test_abrupt_stop_drops_what_has_not_started():
    stub = StubListener(3)
    release = threading.Event()
    endpoint = Endpoint(release)
    server = get_notification_listener(StubTransport(stub), [Target(topic="t")], [endpoint])
    server.start()
    assert wait_until(lambda: endpoint.seen == [0])
    started = time.monotonic()
    assert server.stop(graceful=False, timeout=2) is True
    assert time.monotonic() - started < 3
    release.set()
    stub._worker.join(5)  # the running call ends, then the worker goes through the rest
    assert not stub._worker.is_alive()
    assert endpoint.seen == [0] and stub.acked == [0] and stub.aborted


def test_abrupt_stop_of_inline_dispatch_stops_mid_batch():
    """Without driver-run processing the dispatch thread itself checks for an abrupt stop."""
    stub = StubListener(50)
    stub.runs_processing = False
    release = threading.Event()
    endpoint = Endpoint(release)
    server = get_notification_listener(StubTransport(stub), [Target(topic="t")], [endpoint])
    server.start()
    assert wait_until(lambda: endpoint.seen == [0])
    threading.Timer(0.2, release.set).start()
    assert server.stop(graceful=False, timeout=3)
    assert len(endpoint.seen) < 50


def test_plain_stop_and_wait_still_work():
    stub = StubListener(2)
    server = get_notification_listener(StubTransport(stub), [Target(topic="t")], [Endpoint()])
    server.start()
    assert wait_until(lambda: len(stub.acked) == 2)
    assert server.stop() is True  # oslo.messaging's form: returns at once
    assert server.wait(5) and stub.cleaned


def test_a_driver_refusing_a_batch_listener_is_closed_and_its_error_reaches_the_caller():
    stub = StubListener(1)
    stub.workers = 3

    class BatchEndpoint:
        def info(self, messages):
            return NotificationResult.HANDLED

    server = get_batch_notification_listener(StubTransport(stub), [Target(topic="t")],
                                             [BatchEndpoint()], batch_size=5, workers=3)
    with pytest.raises(ConfigurationError, match="workers"):
        server.start()
    assert stub.cleaned


class ChunkingListener(Listener):
    """Takes one batch of ``count`` at the first poll and hands it out ``chunk`` at a time,
    also after stop(), as a driver that committed the whole batch must (the Listener contract);
    with ``support=False`` it hands everything out at once and nothing after stop()."""

    def __init__(self, count, support=True):
        super().__init__()
        self.held = [IncomingMessage({}, {"priority": "INFO", "event_type": "e", "publisher_id": "p",
                                          "payload": {"i": i}}, topic="t", partition=0, offset=i)
                     for i in range(count)]
        self.chunk = 64 if support else None
        self.polls_after_stop = 0

    def poll(self, timeout=None, max_messages=1):
        if self.stopped:
            self.polls_after_stop += 1
        if self.held and (self.chunk or not self.stopped):
            size = min(max_messages, self.chunk or len(self.held))
            out, self.held = self.held[:size], self.held[size:]
            return out
        self._stopped.wait(timeout)
        return []


def test_what_the_driver_held_back_is_dispatched_after_a_graceful_stop():
    stub = ChunkingListener(300)
    release = threading.Event()
    endpoint = Endpoint(release=release)
    server = get_notification_listener(StubTransport(stub), [Target(topic="t")], [endpoint])
    server.start()
    assert wait_until(lambda: len(endpoint.seen) == 1)
    server.stop()  # while the first piece is being dispatched
    release.set()
    assert server.wait(10)
    assert endpoint.seen == list(range(300))  # all of it, in order
    assert stub.polls_after_stop >= 2 and server.metrics()["received"] == 300


def test_an_abrupt_stop_does_not_drain_and_a_driver_without_chunks_is_not_polled_after_stop():
    stub = ChunkingListener(300)
    release = threading.Event()
    endpoint = Endpoint(release=release)
    server = get_notification_listener(StubTransport(stub), [Target(topic="t")], [endpoint])
    server.start()
    assert wait_until(lambda: len(endpoint.seen) == 1)
    server.stop(graceful=False)
    release.set()
    assert server.wait(10)
    assert len(endpoint.seen) < 64 and stub.polls_after_stop == 0

    plain = ChunkingListener(10, support=False)
    server = get_notification_listener(StubTransport(plain), [Target(topic="t")], [Endpoint()])
    server.start()
    assert wait_until(lambda: not plain.held)
    server.stop()
    # the poll the stop woke, and one that finds nothing held back
    assert server.wait(10) and plain.polls_after_stop <= 2
