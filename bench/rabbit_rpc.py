"""RPC over RabbitMQ: call latency (sequential), call throughput (threads), cast throughput.

``serve`` runs the RPC server of one implementation in its own process until
the orchestrator writes ``stop``. ``client`` runs the three client measures
against it, in order, after a warm-up:

- sequential ``call('echo')`` latency for ``seq_seconds`` (or ``seq_calls``);
- ``threads`` threads calling ``echo`` for ``thread_seconds``;
- ``casts`` casts of ``bump``; the rate is taken up to the moment the
  *server* counted the last one (its own clock, same machine), so a cast that
  returns before it is delivered gains nothing.
"""
from __future__ import annotations

import threading
import time

from bench.payload import make_payload
from bench.rabbit_impls import make_rpc_client, make_rpc_server
from bench.stats import rate, summarize_latencies
from bench.worker import signal, wait_command


def serve(impl: str, url: str, rabbit: dict, topic: str, server: str) -> dict:
    rpc_server = make_rpc_server(impl, url, rabbit, topic, server)
    rpc_server.start()
    try:
        signal("ready")
        wait_command("stop")
    finally:
        rpc_server.stop()
    return {"stopped": True}


def _call_latency(client, value: dict, calls: int, seconds: float) -> dict:
    latencies = []
    deadline = time.perf_counter() + seconds
    for _ in range(calls):
        t0 = time.perf_counter()
        reply = client.call("echo", value=value)
        latencies.append(time.perf_counter() - t0)
        if reply != value:
            raise AssertionError("echo returned something else")
        if t0 > deadline:
            break
    out = summarize_latencies(latencies)
    out["calls"] = len(latencies)
    return out


def _call_threads(client, value: dict, threads: int, seconds: float) -> dict:
    counts = [0] * threads
    errors: list[str] = []
    start_barrier = threading.Barrier(threads + 1)
    stop_at = [0.0]

    def work(i: int) -> None:
        own = client.for_thread()
        try:
            start_barrier.wait()
            while time.perf_counter() < stop_at[0]:
                own.call("echo", value=value)
                counts[i] += 1
        except Exception as exc:  # reported, not hidden
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            if own is not client:
                own.close()

    workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    start = time.perf_counter()
    stop_at[0] = start + seconds
    start_barrier.wait()
    for w in workers:
        w.join(seconds + 60)
    elapsed = time.perf_counter() - start
    out = {"rate": rate(sum(counts), elapsed), "calls": sum(counts), "seconds": elapsed,
           "threads": threads}
    if errors:
        out["error"] = f"{len(errors)} thread(s) failed: {errors[0]}"
    return out


def _casts(client, value: dict, casts: int, max_wait: float) -> dict:
    before = client.call("count")["casts"]
    start_wall = time.time()
    t0 = time.perf_counter()
    for _ in range(casts):
        client.cast("bump", value=value)
    returned = time.perf_counter() - t0
    deadline = time.monotonic() + max_wait
    while True:
        state = client.call("count")
        if state["casts"] - before >= casts or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    delivered = state["casts"] - before
    elapsed = max(state["last"] - start_wall, returned)
    out = {"rate": rate(delivered, elapsed), "casts": casts, "delivered": delivered,
           "seconds": elapsed, "client_return_rate": rate(casts, returned)}
    if delivered < casts:
        out["error"] = f"only {delivered} of {casts} casts reached the server"
    return out


def client(impl: str, url: str, rabbit: dict, topic: str, warmup: int, seq_calls: int,
           seq_seconds: float, threads: int, thread_seconds: float, casts: int,
           timeout: float = 30.0) -> dict:
    value = make_payload(None, envelope_bytes=1000)
    rpc = make_rpc_client(impl, url, rabbit, topic, timeout)
    results: dict = {}
    try:
        for _ in range(warmup):
            rpc.call("echo", value=value)
        for name, fn in (("rpc_call_seq", lambda: _call_latency(rpc, value, seq_calls, seq_seconds)),
                         ("rpc_call_threads", lambda: _call_threads(rpc, value, threads, thread_seconds)),
                         ("rpc_cast", lambda: _casts(rpc, value, casts, 60.0))):
            try:
                results[name] = fn()
            except Exception as exc:
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        rpc.close()
    return results
