"""RPC on a three-node RabbitMQ cluster while its nodes fail: ours against oslo.messaging's rabbit driver.

Eight threads share one transport (an RPC server's and its client's) and
each loops: a cast (``echo``), then a call (``echo``, timeout 5 s). Every
queue is a quorum queue (``rabbit_quorum_queue``,
``rabbit_transient_quorum_queue``), as operators of a cluster set it. The
faults (:data:`FAULTS`):

* ``kill``: the node holding the process's connections (the broker's
  listing says which) SIGKILLed, started again once the load has gone on;
* ``rolling``: each node in turn stopped with SIGTERM and started again,
  the next one once the cluster is whole.

What counts (:class:`FaultResult`): a cast that returned was confirmed by
the broker and must reach the server (``lost`` otherwise); a call must
answer or time out, never later than its timeout (``longest_call``); after
a kill, how long until a call started after it was answered.
``tests/functional/test_rabbit_cluster.py`` asserts these on our driver;
``python -m bench --only rabbit_cluster_faults`` shows both drivers' rows.

    python -m bench.rabbit_cluster_faults --fault kill --impl ours
"""
from __future__ import annotations

import argparse
import json
import os
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

#: Faults, each a row group of the benchmark (results key ``rabbit_cluster_<fault>``).
FAULTS = ("kill", "rolling")
#: The drivers compared: notify-transport's API on ``rabbit://``, oslo.messaging's own ``rabbit://``.
IMPLS = ("ours", "oslo")
CALL_TIMEOUT = 5.0
#: Options of a cluster's operators, and reconnects spaced by a second, as the URL's query.
QUORUM_OPTIONS = {"rabbit_quorum_queue": True, "rabbit_transient_quorum_queue": True}
RETRY_OPTIONS = {"rabbit_retry_interval": 1, "rabbit_retry_backoff": 0, "rabbit_interval_max": 1}


class Echo:
    """The RPC endpoint: keeps every value it was sent."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._lock = threading.Lock()

    def echo(self, ctxt: Any, value: str) -> str:
        with self._lock:
            self.seen.add(value)
        return value


@dataclass
class Load:
    """What the threads did: confirmed casts, failed casts, and each call's (start, seconds, outcome)."""

    confirmed_casts: set[str] = field(default_factory=set)
    failed_casts: list[str] = field(default_factory=list)
    calls: list[tuple[float, float, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def first_answer_after(self, moment: float) -> float | None:
        """Seconds from ``moment`` to the end of the first call started after it that was answered."""
        with self.lock:
            ends = [started + elapsed - moment for started, elapsed, outcome in self.calls
                    if started >= moment and outcome == "answered"]
        return min(ends) if ends else None

    def calls_after(self, moment: float) -> int:
        with self.lock:
            return sum(1 for started, _, _ in self.calls if started > moment)


def run_load(client: Any, load: Load, stop: threading.Event, number: int,
             timeout_error: type[Exception], prepare: Callable[[Any], Any]) -> None:
    """One thread: cast then call, until ``stop``; ``prepare(client)`` gives the call's client."""
    caller = prepare(client)
    i = 0
    while not stop.is_set():
        i += 1
        value = f"t{number}-{i}"
        try:
            client.cast({}, "echo", value=f"cast-{value}")
        except Exception as error:  # noqa: BLE001 - counted: the caller saw it
            with load.lock:
                load.failed_casts.append(f"{value}: {error!r}")
        else:
            with load.lock:
                load.confirmed_casts.add(f"cast-{value}")
        started = time.monotonic()
        try:
            answer = caller.call({}, "echo", value=f"call-{value}")
            outcome = "answered" if answer == f"call-{value}" else f"wrong answer {answer!r}"
        except timeout_error:
            outcome = "timeout"
        except Exception as error:  # noqa: BLE001 - recorded; the caller says which kinds may happen
            outcome = f"error {type(error).__name__}"
        with load.lock:
            load.calls.append((started, time.monotonic() - started, outcome))


@dataclass
class FaultResult:
    impl: str
    fault: str
    confirmed: int = 0
    lost: int = 0
    failed_casts: int = 0
    calls: int = 0
    timeouts: int = 0
    errors: int = 0
    longest_call: float = 0.0
    #: seconds from the kill to the first answered call started after it (kill only)
    first_answer_s: float | None = None
    seconds: float = 0.0
    examples: list[str] = field(default_factory=list)

    def summary(self) -> str:
        first = "" if self.first_answer_s is None else f"; first answer {self.first_answer_s:.2f} s after the kill"
        return (f"[rabbit cluster {self.fault}, {self.impl}] {self.confirmed} confirmed casts, {self.lost} lost, "
                f"{self.failed_casts} failed; {self.calls} calls, {self.timeouts} timed out, {self.errors} errors, "
                f"longest {self.longest_call:.2f} s{first}")


class Driver:
    """One implementation's server, client and timeout error on one transport URL."""

    def __init__(self, impl: str, url: str) -> None:
        self.impl = impl
        query = "&".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                         for k, v in {**QUORUM_OPTIONS, **RETRY_OPTIONS}.items())
        if impl == "ours":
            import notify_transport as nt
            from notify_transport import rpc
            from notify_transport.exceptions import MessagingTimeout
            from oslo_config import cfg

            conf = cfg.ConfigOpts()
            conf([])
            self.transport = nt.get_rpc_transport(conf, f"{url}?{query}")
            self._target, self._server, self._client = nt.Target, rpc.get_rpc_server, rpc.get_rpc_client
            self.timeout_error: type[Exception] = MessagingTimeout
        elif impl == "oslo":
            import oslo_messaging
            from oslo_config import cfg

            # oslo.messaging registers some options only on the global CONF: it is driven with that
            self.transport = oslo_messaging.get_rpc_transport(cfg.CONF, f"{url}?{query}")
            self._target = oslo_messaging.Target
            self._server, self._client = oslo_messaging.get_rpc_server, oslo_messaging.get_rpc_client
            self.timeout_error = oslo_messaging.MessagingTimeout
        else:
            raise ValueError(f"unknown implementation {impl!r}; choose from {IMPLS}")

    def server(self, topic: str, endpoint: Echo) -> Any:
        kwargs = {"executor": "threading"} if self.impl == "oslo" else {}
        server = self._server(self.transport, self._target(topic=topic, server="s1"), [endpoint], **kwargs)
        server.start()
        return server

    def client(self, topic: str) -> Any:
        return self._client(self.transport, self._target(topic=topic), timeout=CALL_TIMEOUT)

    def close(self) -> None:
        self.transport.cleanup()


def _wait(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def run_fault(cluster: Any, impl: str, fault: str, threads: int = 8, calls_after: int = 40) -> FaultResult:
    """Run the load on ``cluster`` (a started ``RabbitCluster``) through ``impl`` while ``fault`` happens.

    Every node runs again when this returns, whatever happened.
    """
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; choose from {FAULTS}")
    started = time.monotonic()
    result = FaultResult(impl, fault)
    driver = Driver(impl, cluster.url())
    topic = f"bench_cluster_{uuid.uuid4().hex[:8]}"
    endpoint = Echo()
    server = driver.server(topic, endpoint)
    client = driver.client(topic)
    load, stop = Load(), threading.Event()
    workers: list[threading.Thread] = []
    try:
        if not _wait(lambda: _answers(client, driver.timeout_error), 60):
            raise RuntimeError(f"{impl}: the server never answered")
        workers = [threading.Thread(target=run_load, args=(client, load, stop, n, driver.timeout_error,
                                                           lambda c: c.prepare(timeout=CALL_TIMEOUT)),
                                    daemon=True) for n in range(threads)]
        for worker in workers:
            worker.start()
        _wait(lambda: len(load.calls) >= 40, 60)
        if fault == "kill":
            victim = cluster.busiest_for(os.getpid())
            killed_at = time.monotonic()
            cluster.node(victim).kill()
            _wait(lambda: load.first_answer_after(killed_at) is not None, 60)
            result.first_answer_s = load.first_answer_after(killed_at)
            _wait(lambda: load.calls_after(killed_at + 3) >= calls_after, 60)
            cluster.restart(victim)
        else:
            for index in range(len(cluster.nodes)):
                cluster.node(index).stop()
                mark = time.monotonic()
                _wait(lambda: load.calls_after(mark + 1) >= calls_after // 4, 60)
                cluster.restart(index)
            mark = time.monotonic()
            _wait(lambda: load.calls_after(mark) >= calls_after, 60)
    finally:
        stop.set()
        for worker in workers:
            worker.join(CALL_TIMEOUT + 30)
        _wait(lambda: load.confirmed_casts <= endpoint.seen, 30)
        for node_index, node in enumerate(cluster.nodes):
            if not node.running:
                cluster.restart(node_index)
        server.stop()
        server.wait()
        driver.close()
    with load.lock:
        lost = sorted(load.confirmed_casts - endpoint.seen)
        result.confirmed, result.lost = len(load.confirmed_casts), len(lost)
        result.failed_casts = len(load.failed_casts)
        result.calls = len(load.calls)
        result.timeouts = sum(1 for _, _, outcome in load.calls if outcome == "timeout")
        result.errors = sum(1 for _, _, outcome in load.calls if outcome not in ("answered", "timeout"))
        result.longest_call = max((elapsed for _, elapsed, _ in load.calls), default=0.0)
        result.examples = lost[:5] + load.failed_casts[:5] + sorted(
            {o for _, _, o in load.calls if o not in ("answered", "timeout")})[:5]
    result.seconds = round(time.monotonic() - started, 1)
    return result


def _answers(client: Any, timeout_error: type[Exception]) -> bool:
    try:
        return client.prepare(timeout=2).call({}, "echo", value="ping") == "ping"
    except timeout_error:
        return False


def measure(fault: str, impl: str) -> dict[str, Any]:
    """One fault for one driver on a three-node cluster of its own, as a ``python -m bench`` result."""
    from notify_transport.testing.rabbitmq import RabbitCluster

    with RabbitCluster(3) as cluster:
        result = run_fault(cluster, impl, fault)
    out = asdict(result)
    out["note"] = result.summary()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rabbit_cluster_faults",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--fault", choices=FAULTS + ("all",), default="all")
    parser.add_argument("--impl", choices=IMPLS + ("all",), default="all")
    parser.add_argument("--json", dest="json_path", default=None, metavar="PATH")
    args = parser.parse_args(argv)
    results = []
    for fault in FAULTS if args.fault == "all" else (args.fault,):
        for impl in IMPLS if args.impl == "all" else (args.impl,):
            result = measure(fault, impl)
            print(result["note"], flush=True)
            results.append(result)
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
