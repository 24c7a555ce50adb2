"""An eventlet-patched oslo.messaging service on ``ntrabbit://`` over a RabbitMQ cluster; a child process.

``python oslo_eventlet_cluster_service.py CLUSTER_URL EXECUTOR PREFIX CONFIG_FILE``; the
config file is the service's own (``[oslo_messaging_rabbit]`` quorum queues,
as an operator sets them). Through oslo.messaging's public API only: an RPC
server, a client and a notification listener on ``ntrabbit://``; 8 green
threads of calls and casts run and notifications flow, then the child prints
``{"check": "kill_now"}`` and waits for the file ``$NT_CLUSTER_KILLED``: the
test kills the node that holds this process's connections (the broker's
listing says which) and writes the wall-clock time of the kill there. A green
thread of calls still running 30 s after it was told to stop is reported with
its stack (``stuck_workers``). Prints one JSON object per check, then
``{"check": "done"}``.
"""
from oslo_eventlet_service import (  # noqa: I001 - monkey-patches first
    ServiceBase, emit, green_stack, run_checks, wait_until)

import eventlet  # noqa: E402

import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import oslo_messaging  # noqa: E402
from oslo_config import cfg  # noqa: E402

CALL_TIMEOUT = 5
GREEN_THREADS = 8
#: A worker ends after its cast and its call (at most CALL_TIMEOUT): one still running past this
#: is stuck, and the report shows where.
WORKER_STOP = 30.0


def stuck(worker: Any) -> str:
    """Where a green thread that should have ended waits; it is killed so the check can end."""
    where = green_stack(worker)
    worker.kill()
    return where


class Endpoint:
    def __init__(self) -> None:
        self.got: set[str] = set()

    def echo(self, ctxt: dict, value: str) -> str:
        self.got.add(value)
        return value


class Notes:
    def __init__(self) -> None:
        self.got: set[int] = set()

    def info(self, ctxt, publisher_id, event_type, payload, metadata) -> None:
        self.got.add(payload["n"])


class Service(ServiceBase):
    def __init__(self, url: str, executor: str, prefix: str) -> None:
        super().__init__(executor, prefix)
        self.url = url.replace("rabbit://", "ntrabbit://", 1)

    def transport(self, kind: str = "rpc") -> Any:
        made = (oslo_messaging.get_rpc_transport(cfg.CONF, self.url) if kind == "rpc"
                else oslo_messaging.get_notification_transport(cfg.CONF, self.url))
        self.transports.append(made)
        return made

    def failover(self) -> dict:
        report: dict[str, Any] = {}
        topic = f"{self.prefix}_failover"
        end, notes = Endpoint(), Notes()
        server = oslo_messaging.get_rpc_server(self.transport(), oslo_messaging.Target(topic=topic, server="s1"),
                                               [end], executor=self.executor)
        server.start()
        self.servers.append(server)
        listener = oslo_messaging.get_notification_listener(
            self.transport("notify"), [oslo_messaging.Target(topic=topic)], [notes], executor=self.executor,
            pool="cluster")
        listener.start()
        self.servers.append(listener)
        notifier = oslo_messaging.Notifier(self.transport("notify"), publisher_id="p", driver="messagingv2",
                                           topics=[topic])
        client = oslo_messaging.get_rpc_client(self.transport(), oslo_messaging.Target(topic=topic),
                                               timeout=CALL_TIMEOUT)
        report["ready"] = client.call({}, "echo", value="ready")
        confirmed: set[str] = set()
        failed: list[str] = []
        calls: list[tuple[float, float, str]] = []
        stopping = [False]

        def work(number: int) -> None:
            i = 0
            while not stopping[0]:
                i += 1
                value = f"g{number}-{i}"
                try:
                    client.cast({}, "echo", value=f"cast-{value}")
                    confirmed.add(f"cast-{value}")
                except oslo_messaging.MessagingException as exc:
                    failed.append(f"{value}: {exc!r}")
                started = time.time()  # the wall clock: the test writes the kill's time in it
                try:
                    client.call({}, "echo", value=f"call-{value}")
                    outcome = "answered"
                except oslo_messaging.MessagingTimeout:
                    outcome = "timeout"
                except Exception as exc:  # noqa: BLE001 - reported
                    outcome = f"error {type(exc).__name__}"
                calls.append((started, time.time() - started, outcome))

        for n in range(100):
            notifier.info({}, "ev", {"n": n})
        with self.hub.phase(report, "failover"):
            workers = [eventlet.spawn(work, n) for n in range(GREEN_THREADS)]
            wait_until(lambda: len(calls) >= 40)
            emit("kill_now")
            killed = os.environ["NT_CLUSTER_KILLED"]
            wait_until(lambda: os.path.exists(killed), 120)
            with open(killed) as file:
                killed_at = float(file.read())
            for n in range(100, 200):
                notifier.info({}, "ev", {"n": n})
            report["answered_again"] = wait_until(
                lambda: any(s > killed_at and o == "answered" for s, _, o in calls), 30)
            after = [s + e - killed_at for s, e, o in calls if s > killed_at and o == "answered"]
            report["first_answer_after_kill"] = min(after) if after else None
            wait_until(lambda: len([c for c in calls if c[0] > killed_at + 3]) >= 40, 60)
            stopping[0] = True
            wait_until(lambda: all(worker.dead for worker in workers), WORKER_STOP)
            report["stuck_workers"] = [stuck(worker) for worker in workers if not worker.dead]
        wait_until(lambda: confirmed <= end.got, 30)
        wait_until(lambda: notes.got >= set(range(200)), 60)
        report["confirmed"] = len(confirmed)
        report["lost"] = sorted(confirmed - end.got)[:10]
        report["failed_casts"] = failed[:5]
        report["calls"] = len(calls)
        report["outcomes"] = sorted({o for _, _, o in calls})
        report["longest_call"] = max(e for _, e, _ in calls)
        report["notifications_missing"] = sorted(set(range(200)) - notes.got)[:10]
        return report


def main(argv: list[str]) -> int:
    return run_checks(argv, "oslo-eventlet-cluster-check", Service, ("failover", "stop_everything"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
