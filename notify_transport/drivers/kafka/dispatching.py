"""Running a listener's dispatches: inline or on ordered workers, with the hooks around each.

A message whose partition went to another member meanwhile is not dispatched
here (its next owner reads it again); after an abrupt stop nothing new starts.
Both are counted. :meth:`Dispatcher.drain` waits for what was handed to workers
and for the retry and dead-letter copies still being written.
"""
from __future__ import annotations

import functools
import time
from typing import Any, Callable

from notify_transport.drivers.base import IncomingMessage
from notify_transport.drivers.kafka.delivery.commit import CommitPolicy
from notify_transport.drivers.kafka.delivery.counters import DeliveryCounters
from notify_transport.drivers.kafka.delivery.deadletter import SideProducer
from notify_transport.drivers.kafka.delivery.settings import ListenerSettings
from notify_transport.drivers.kafka.delivery.workers import OrderedWorkers, worker_index

Work = Callable[[IncomingMessage], Any]


class Dispatcher:
    """What runs each message's work for one listener (see the module docstring)."""

    def __init__(self, settings: ListenerSettings, policy: CommitPolicy, counters: DeliveryCounters,
                 side: SideProducer | None, thread_name: str) -> None:
        self.settings = settings
        self.policy = policy
        self.counters = counters
        self.side = side
        self._hooks = settings.hooks
        self._thread_name = thread_name
        self.workers: OrderedWorkers | None = None
        #: delivery reports of retry / dead-letter copies and periodic commits, run between polls
        self.tick: Callable[[], None] | None = None
        self.aborted = False

    def start(self) -> None:
        """Ready to run: the housekeeping a poll loop runs, the workers if settings ask for them."""
        if self.side is not None or self.policy.tick is not None:
            self.tick = self._housekeeping
        if self.settings.workers > 1 and self.workers is None:
            self.workers = OrderedWorkers(self.settings.workers, self.settings.max_in_flight,
                                          name=self._thread_name)

    def _housekeeping(self) -> None:
        if self.side is not None:
            self.side.serve()
        tick = self.policy.tick
        if tick is not None:
            tick()

    def submit(self, message: IncomingMessage, work: Work) -> None:
        """Run ``work(message)`` (dispatch and settle) inline or on the key's worker."""
        workers = self.workers
        if workers is None:
            self._run(message, work)
            return
        record = message.record  # type: ignore[attr-defined]
        index = worker_index(record.key(), record.topic(), record.partition(), workers.count)
        if not workers.submit(index, functools.partial(self._run, message, work)):
            self.counters.cancelled.incr()

    def _run(self, message: IncomingMessage, work: Work) -> None:
        if self.aborted:
            self.counters.cancelled.incr()
            return
        if not self.policy.still_owned(message):
            # its partition went to another listener, which reads it again: not dispatched here
            self.counters.stale.incr()
            return
        hooks = self._hooks
        if not hooks.around_dispatch:
            work(message)
        else:
            hooks.call("before_dispatch", message)
            started = time.perf_counter()
            result = work(message)
            elapsed = time.perf_counter() - started
            error = getattr(message, "error", None)
            if error is not None:
                hooks.call("on_error", message, error)
            hooks.call("after_dispatch", message, result, elapsed)
        if self.workers is None and self.tick is not None:
            # inline, this is the polling thread: keep committing during a long batch
            self.tick()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait for dispatches handed to workers and for retry / dead-letter copies to finish."""
        deadline = None if timeout is None else time.monotonic() + timeout
        finished = True
        if self.workers is not None:
            finished = self.workers.drain(timeout)
        if self.side is not None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            finished = self.side.flush(self.settings.shutdown_timeout if left is None else left) == 0 \
                and finished
        return finished

    def abort(self) -> None:
        """Nothing new starts; what waits for a worker is dropped (never committed)."""
        self.aborted = True
        if self.workers is not None:
            self.workers.cancel()

    def in_flight(self) -> int:
        return self.policy.in_flight() + (self.workers.in_flight if self.workers else 0)

    def cancelled_waiting(self) -> int:
        """Messages that waited for a worker when the stop was abrupt."""
        return self.workers.dropped if self.workers is not None else 0

    def close(self) -> None:
        """After the consumer closed: the workers (briefly if aborted) and the side producer."""
        grace = self.settings.shutdown_timeout
        if self.workers is not None:
            self.workers.close(min(grace, 5.0) if not self.aborted else 1.0)
        if self.side is not None:
            self.side.close(0)
