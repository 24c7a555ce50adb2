"""Notifications over RabbitMQ: send rate (confirmed), then receive+dispatch rate.

One worker per implementation: it sends ``count`` notifications (after a
warm-up) into the default queue of ``<topic_base>.info``, which oslo.messaging's
layout creates on send so nothing is lost before a listener exists, then
starts a listener without a pool on that queue and times dispatching all of
them (first to last dispatch).
"""
from __future__ import annotations

import threading
import time

from bench.payload import make_context, make_payload
from bench.rabbit_impls import make_rabbit_notify
from bench.stats import rate


def run(impl: str, url: str, rabbit: dict, topic_base: str, count: int, warmup: int,
        context: str = "request", max_seconds: float = 30.0) -> dict:
    ctxt = make_context(context)
    payload = make_payload(ctxt)
    side = make_rabbit_notify(impl, url, rabbit, topic_base, ctxt)
    out: dict = {}
    try:
        for _ in range(warmup):
            side.send(payload)
        side.flush()
        deadline = time.perf_counter() + max_seconds
        start = time.perf_counter()
        sent = 0
        while sent < count and time.perf_counter() < deadline:
            for _ in range(min(200, count - sent)):
                side.send(payload)
            sent += min(200, count - sent)
        side.flush()
        elapsed = time.perf_counter() - start
        out["rabbit_notify_send"] = {"rate": rate(sent, elapsed), "sent": sent, "seconds": elapsed}

        expected = sent + warmup
        state = {"count": 0, "first": 0.0, "last": 0.0}
        lock = threading.Lock()
        done = threading.Event()

        def on_count(n: int, now: float) -> None:
            with lock:
                if state["count"] == 0:
                    state["first"] = now
                state["count"] += n
                state["last"] = now
                if state["count"] >= expected:
                    done.set()

        server = side.listen(on_count)
        try:
            started = time.monotonic()
            last_seen, last_progress = 0, started
            while not done.wait(0.2):
                now = time.monotonic()
                if state["count"] != last_seen:
                    last_seen, last_progress = state["count"], now
                if now - started > max_seconds or (state["count"] and now - last_progress > 3):
                    break
        finally:
            server.stop()
            server.wait()
        got = state["count"]
        recv = {"rate": rate(got - 1, state["last"] - state["first"]), "received": got,
                "expected": expected, "seconds": state["last"] - state["first"]}
        if got < expected:
            recv["note"] = f"received {got} of {expected}"
        out["rabbit_notify_recv"] = recv
    finally:
        side.close()
    return out
