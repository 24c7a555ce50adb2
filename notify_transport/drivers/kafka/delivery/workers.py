"""Ordered parallel processing: N worker threads fed by key (zkafka's virtual partitions).

Records with the same key run one after the other in read order, different
keys in parallel; keyless records go by partition. :meth:`OrderedWorkers.submit`
blocks beyond ``max_in_flight``, so a slow endpoint slows reading, not memory.
"""
from __future__ import annotations

import logging
import time
import zlib
from typing import TYPE_CHECKING, Callable

from notify_transport.drivers import threads

if TYPE_CHECKING:
    import queue

LOG = logging.getLogger(__name__)

_STOP = object()
#: Longest single wait of a blocked submit() before it checks for cancellation.
_WAIT_SLICE = 0.1


#: Fibonacci hashing constant: spreads CRC-32 values whose low bits are alike
#: (keys such as "host-1", "host-2" differ in one character).
_MIX = 0x9E3779B1


def worker_index(key: bytes | str | None, topic: str, partition: int, count: int) -> int:
    """Which of ``count`` workers processes a record: by key, else by partition."""
    if count == 1:
        return 0
    if key is None:
        return (zlib.crc32(topic.encode()) + partition) % count
    if isinstance(key, str):
        key = key.encode("utf-8", "surrogatepass")
    return (((zlib.crc32(key) * _MIX) & 0xFFFFFFFF) >> 16) % count


class OrderedWorkers:
    """``count`` threads, one FIFO queue each; see the module docstring."""

    def __init__(self, count: int, max_in_flight: int, name: str = "kafka") -> None:
        self.count = count
        self.name = name
        self.max_in_flight = max_in_flight
        self._queues: list[queue.SimpleQueue] = [threads.SimpleQueue() for _ in range(count)]
        self._slots = threads.Semaphore(max_in_flight)
        self._busy = 0
        self._idle = threads.Condition()
        self._cancelled = threads.Event()
        self.dropped = 0
        self._threads = [threads.Thread(target=self._run, args=(q,), daemon=True,
                                        name=f"{name}-worker-{i}")
                         for i, q in enumerate(self._queues)]
        for thread in self._threads:
            thread.start()

    @property
    def in_flight(self) -> int:
        """Items queued or running."""
        return self._busy

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def room(self) -> int:
        """Items that can be submitted now without blocking."""
        return self.max_in_flight - self._busy

    def wait_for_room(self, timeout: float) -> bool:
        """Wait up to ``timeout`` until an item can be submitted without blocking."""
        with self._idle:
            return self._idle.wait_for(lambda: self._busy < self.max_in_flight, max(0.0, timeout))

    def submit(self, index: int, item: Callable[[], None]) -> bool:
        """Queue ``item`` on worker ``index``; block while ``max_in_flight`` are in flight.

        Returns False (``item`` not queued) once :meth:`cancel` was called.
        """
        while not self._slots.acquire(timeout=_WAIT_SLICE):
            if self._cancelled.is_set():
                return False
        if self._cancelled.is_set():
            self._slots.release()
            return False
        with self._idle:
            self._busy += 1
        self._queues[index].put(item)
        return True

    def _run(self, items: queue.SimpleQueue) -> None:
        while True:
            item = items.get()
            if item is _STOP:
                return
            dropped = self._cancelled.is_set()
            try:
                if not dropped:
                    item()
            except Exception:  # noqa: BLE001 - one item must not kill the worker
                LOG.exception("%s: a worker item raised", self.name)
            finally:
                self._slots.release()
                with self._idle:
                    self._busy -= 1
                    self.dropped += dropped
                    self._idle.notify_all()

    def drain(self, timeout: float | None) -> bool:
        """Wait until nothing is queued or running; False if ``timeout`` ran out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._busy:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def cancel(self) -> None:
        """Abrupt stop: queued items are dropped unrun; running ones finish."""
        self._cancelled.set()

    def close(self, timeout: float) -> bool:
        """End the threads (after what is queued, unless cancelled); False if one is still busy."""
        for items in self._queues:
            items.put(_STOP)
        deadline = time.monotonic() + timeout
        alive = False
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            alive = alive or thread.is_alive()
        if alive:
            LOG.error("%s: a worker is still running an endpoint after %.1fs; left behind "
                      "(daemon thread)", self.name, timeout)
        return not alive
