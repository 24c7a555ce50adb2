"""End-to-end latency at a paced rate: notifier process -> broker -> listener process.

``listen`` (one worker) subscribes, signals ``ready``, records
``receive time - payload['sent_at']`` for every message of the measured phase
and returns the summary when the end marker arrives. ``send`` (another
worker) sends warm-up messages until the orchestrator says ``go`` (after the
listener got one), then sends at ``rate`` per second for ``seconds``, then end
markers. Both sides of an implementation are the same library.
"""
from __future__ import annotations

import threading
import time

from bench.kafka_impls import make_receiver, make_sender
from bench.payload import make_context, make_payload
from bench.stats import summarize_latencies
from bench.worker import signal, wait_command


def listen(impl: str, bootstrap: str, topic_base: str, group: str, max_seconds: float,
           keep_samples: bool = False) -> dict:
    latencies: list[float] = []
    samples: list[tuple[float, float]] = []
    warm = threading.Event()
    ended = threading.Event()
    counts = {"warmup": 0, "measure": 0}

    def on_message(payload: dict, now: float) -> None:
        phase = payload.get("phase")
        if phase == "measure":
            latencies.append(now - payload["sent_at"])
            if keep_samples:
                samples.append((payload["sent_at"], now - payload["sent_at"]))
            counts["measure"] += 1
        elif phase == "warmup":
            counts["warmup"] += 1
            warm.set()
        elif phase == "end":
            ended.set()

    receiver = make_receiver(impl, bootstrap, topic_base, group, on_message)
    receiver.start()
    try:
        signal("ready")
        if not warm.wait(max_seconds):
            return {"error": "no warm-up message arrived"}
        signal("warm")
        ended.wait(max_seconds)
    finally:
        receiver.stop()
    result = summarize_latencies(latencies)
    result["received"] = counts["measure"]
    if keep_samples:
        result["samples"] = samples
    if not ended.is_set():
        result["note"] = "end marker not received in time"
    return result


def send(impl: str, bootstrap: str, topic_base: str, rate: float, seconds: float,
         context: str = "request", max_warmup_seconds: float = 60.0) -> dict:
    ctxt = make_context(context)
    base = make_payload(ctxt)
    # raw: no batching delay, the best latency confluent-kafka offers
    options = {"pre_encoded": False, "linger_ms": 0} if impl == "raw" else {}
    sender = make_sender(impl, bootstrap, topic_base, ctxt, **options)

    def one(phase: str) -> None:
        payload = dict(base)
        payload["phase"] = phase
        payload["sent_at"] = time.time()
        sender.send(payload)

    go = threading.Event()
    threading.Thread(target=lambda: (wait_command("go"), go.set()), daemon=True).start()
    try:
        signal("warming")
        deadline = time.monotonic() + max_warmup_seconds
        while not go.wait(0.05):
            if time.monotonic() > deadline:
                return {"error": "listener never received a warm-up message"}
            one("warmup")
        total = int(rate * seconds)
        interval = 1.0 / rate
        start = time.perf_counter()
        late = 0
        for i in range(total):
            due = start + i * interval
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            elif delay < -interval:
                late += 1
            one("measure")
        elapsed = time.perf_counter() - start
        for _ in range(3):
            one("end")
        sender.flush()
    finally:
        sender.close()
    return {"sent": total, "seconds": elapsed, "achieved_rate": total / elapsed, "late_sends": late}
