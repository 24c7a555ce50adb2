"""Kafka notify send rate: ``count`` notifications, timed until every one is on the broker.

Runs in a worker process per implementation. A warm-up batch (connection,
metadata, first batches) is sent and flushed before the clock starts; the
clock stops when the flush returns. The orchestrator then checks the topic's
high watermark, so "delivered" is read off the broker, not taken on trust.
"""
from __future__ import annotations

import time

from bench.kafka_impls import make_sender
from bench.payload import make_context, make_payload
from bench.stats import rate


def run(impl: str, bootstrap: str, topic_base: str, count: int, warmup: int,
        context: str = "request", max_seconds: float = 60.0) -> dict:
    ctxt = make_context(context)
    payload = make_payload(ctxt)
    sender = make_sender(impl, bootstrap, topic_base, ctxt)
    try:
        for _ in range(warmup):
            sender.send(payload)
        sender.flush()
        send = sender.send
        sent = 0
        deadline = time.perf_counter() + max_seconds
        cpu_start = time.process_time()   # every thread of the process, librdkafka's too
        start = time.perf_counter()
        # check the clock every 1000 sends only, to keep the loop cheap
        while sent < count:
            for _ in range(min(1000, count - sent)):
                send(payload)
            sent += min(1000, count - sent)
            if time.perf_counter() > deadline:
                break
        sender.flush()
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        stats = sender.stats()
    finally:
        sender.close()
    result = {"rate": rate(sent, elapsed), "sent": sent, "seconds": elapsed,
              "cpu_us_per_msg": cpu / max(1, sent) * 1e6,
              "warmup": warmup, "expected_on_broker": sent + warmup}
    if stats:
        result["driver_stats"] = stats
    if sent < count:
        result["note"] = f"stopped by the time limit after {sent} of {count}"
    return result
