"""Kafka listener dispatch rate over a pre-filled topic, one pool.

The orchestrator fills ``<topic_base>.info`` with ``expected`` envelopes and
commits offset 0 for the pool's group, so every implementation starts at the
same place whatever its ``auto.offset.reset``. The rate is taken from the
first dispatched message to the last one (group join and the first fetch are
left out, alike for all), over at most ``max_seconds``.
"""
from __future__ import annotations

import itertools
import threading
import time

from bench.kafka_impls import make_receiver
from bench.stats import rate


class _Counter:
    """Counts dispatches from any thread; remembers the first and last times."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self._next = itertools.count(1).__next__
        self.count = 0
        self.first = 0.0
        self.last = 0.0
        self.done = threading.Event()

    cpu_first: float | None = None   # process CPU time at the first and the last expected message
    cpu_done: float | None = None

    def on_message(self, _payload: dict, now: float) -> None:
        n = self._next()
        if n == 1:
            self.first = now
            self.cpu_first = time.process_time()
        self.count = max(self.count, n)
        self.last = now
        if n >= self.expected:
            if n == self.expected:
                self.cpu_done = time.process_time()
            self.done.set()

    def on_count(self, n: int, now: float) -> None:
        if self.count == 0:
            self.first = now
            self.first_batch = n
            self.cpu_first = time.process_time()
        self.count += n
        self.last = now
        if self.count >= self.expected:
            if self.cpu_done is None:
                self.cpu_done = time.process_time()
            self.done.set()


def run(impl: str, bootstrap: str, topic_base: str, group: str, expected: int,
        max_seconds: float = 20.0, idle_seconds: float = 3.0, decode_group: str | None = None) -> dict:
    """The dispatch rate of ``impl``; for raw with ``decode_group``, also the rate of a
    raw consumer that decodes every record with orjson (``decode_rate``), in that group."""
    result = _run(impl, bootstrap, topic_base, group, expected, max_seconds, idle_seconds, False)
    if impl == "raw" and decode_group:
        floor = _run(impl, bootstrap, topic_base, decode_group, expected, max_seconds,
                     idle_seconds, True)
        result["decode_rate"] = floor["rate"]
        if "cpu_us_per_msg" in floor:
            result["decode_cpu_us_per_msg"] = floor["cpu_us_per_msg"]
        if "note" in floor:
            result["note"] = f"{result.get('note', '')} decode pass: {floor['note']}".strip()
    return result


def _run(impl: str, bootstrap: str, topic_base: str, group: str, expected: int,
         max_seconds: float, idle_seconds: float, raw_decode: bool) -> dict:
    counter = _Counter(expected)
    options = ({"decode": "batch" if raw_decode else False, "on_count": counter.on_count}
               if impl == "raw" else {})
    receiver = make_receiver(impl, bootstrap, topic_base, group, counter.on_message, **options)
    receiver.start()
    started = time.monotonic()
    cpu_last, seen_at_cpu_last = None, 0   # CPU time when progress was last seen (if it stalls)
    ended_by = "done"
    try:
        last_seen, last_progress = 0, time.monotonic()
        while not counter.done.wait(0.2):
            now = time.monotonic()
            if counter.count != last_seen:
                last_seen, last_progress = counter.count, now
                cpu_last, seen_at_cpu_last = time.process_time(), counter.count
            if now - started > max_seconds:
                ended_by = "time limit"
                break
            if counter.count and now - last_progress > idle_seconds:
                ended_by = f"nothing more for {idle_seconds:g}s"
                break
    finally:
        receiver.stop()
    # the first record (or, for raw, the first batch) marks the start of the clock
    first_unit = getattr(counter, "first_batch", 1) if impl == "raw" else 1
    measured = counter.count - first_unit
    elapsed = counter.last - counter.first
    result = {"rate": rate(measured, elapsed), "dispatched": counter.count,
              "expected": expected, "seconds": elapsed}
    # CPU of every thread of the process (client library threads too) per dispatched message
    if counter.cpu_first is not None:
        if counter.cpu_done is not None:
            result["cpu_us_per_msg"] = (counter.cpu_done - counter.cpu_first) / max(1, expected - first_unit) * 1e6
        elif cpu_last is not None and seen_at_cpu_last > first_unit:
            result["cpu_us_per_msg"] = (cpu_last - counter.cpu_first) / (seen_at_cpu_last - first_unit) * 1e6
    if counter.count < expected:
        result["note"] = f"dispatched {counter.count} of {expected} ({ended_by})"
    return result
