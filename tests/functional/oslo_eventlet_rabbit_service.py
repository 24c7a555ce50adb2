"""An eventlet-monkey-patched oslo.messaging service on ``ntrabbit://``; run as a child process.

``python oslo_eventlet_rabbit_service.py AMQP_URL EXECUTOR PREFIX [CONFIG_FILE]``
monkey-patches first thing (importing oslo_eventlet_service does), reads
CONFIG_FILE as a service reads its own (``--config-file``: e.g.
``[oslo_messaging_rabbit] ssl``), then drives notify-transport only through
oslo.messaging's public API: an RPC server on ``ntrabbit://`` and one on oslo's
own ``rabbit://`` behind one topic, clients on both schemes, calls, casts,
fanout, remote errors, a timeout, a notification listener and a batch
listener; then the broker cuts the process's ``ntrabbit`` connections while
casts flow and two calls are in flight. The ticking green thread of
oslo_eventlet_service shows whether the hub was blocked. Prints one JSON
object per check, then ``{"check": "done"}``.
"""
from oslo_eventlet_service import ServiceBase, run_checks, wait_until  # noqa: I001 - monkey-patches first

import eventlet  # noqa: E402

import contextlib  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import oslo_messaging  # noqa: E402
from oslo_config import cfg  # noqa: E402
from cut_traffic import Casts, Holds, call_held  # noqa: E402
from rabbit_ctl import cut_connections  # noqa: E402

#: Timeout of the call left unanswered across the cut: longer than the cut takes.
CUT_CALL_TIMEOUT = 8


class ServiceError(Exception):
    """Raised by the endpoint; callers allowing this module get it back as ServiceError_Remote."""


class Endpoint(Holds):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.got: list[Any] = []

    def echo(self, ctxt: dict, value: Any) -> dict:
        self.got.append(value)
        return {"server": self.name, "value": value}

    def fail(self, ctxt: dict) -> None:
        raise ServiceError("refused")

    def slow(self, ctxt: dict, seconds: float) -> str:
        eventlet.sleep(seconds)  # green: the server keeps serving others meanwhile
        return "late"


class Notes:
    def __init__(self) -> None:
        self.got: list[Any] = []
        self.batches: list[list[Any]] = []

    def info(self, *args: Any) -> None:
        if len(args) == 1:  # a batch endpoint gets the list of messages
            self.batches.append([m["payload"] for m in args[0]])
        else:
            self.got.append(args[3])


class Service(ServiceBase):
    """The RPC and notification checks on ``ntrabbit://`` beside ``rabbit://``."""

    def __init__(self, amqp_url: str, executor: str, prefix: str) -> None:
        super().__init__(executor, prefix)
        self.url = amqp_url

    def transport(self, scheme: str, kind: str = "rpc") -> Any:
        url = self.url.replace("rabbit://", f"{scheme}://", 1)
        if kind == "rpc":
            made = oslo_messaging.get_rpc_transport(cfg.CONF, url, allowed_remote_exmods=[__name__])
        else:
            made = oslo_messaging.get_notification_transport(cfg.CONF, url)
        self.transports.append(made)
        return made

    def start(self, server: Any) -> Any:
        server.start()
        self.servers.append(server)
        return server

    def rpc(self) -> dict:
        report: dict[str, Any] = {}
        topic = f"{self.prefix}_rpc"
        ours, theirs = Endpoint("ntrabbit"), Endpoint("rabbit")
        # The first transport of a scheme imports its driver (seconds on a loaded machine, and an
        # import holds the hub whoever makes it): made before the phase that watches start().
        transports = {scheme: self.transport(scheme) for scheme in ("ntrabbit", "rabbit")}
        with self.hub.phase(report, "start"):
            for scheme, end in (("ntrabbit", ours), ("rabbit", theirs)):
                self.start(oslo_messaging.get_rpc_server(
                    transports[scheme], oslo_messaging.Target(topic=topic, server=scheme), [end],
                    executor=self.executor))
        client = oslo_messaging.get_rpc_client(self.transport("ntrabbit"), oslo_messaging.Target(topic=topic),
                                               timeout=10)
        oslo_client = oslo_messaging.get_rpc_client(self.transport("rabbit"),
                                                    oslo_messaging.Target(topic=topic), timeout=10)
        with self.hub.phase(report, "calls"):
            # oslo's server is ready once it answers (its start() returns before it consumes)
            wait_until(lambda: _answers(client.prepare(server="rabbit", timeout=1)))
            report["to_rabbit"] = client.prepare(server="rabbit").call({}, "echo", value=1)
            report["from_rabbit"] = oslo_client.prepare(server="ntrabbit").call({}, "echo", value=2)
            # twenty concurrent calls from green threads, all answered
            pool = eventlet.GreenPool()
            report["concurrent"] = sorted(pool.imap(lambda i: client.call({}, "echo", value=i)["value"],
                                                    range(20)))
        with self.hub.phase(report, "fanout_phase"):
            mark = f"fan-{time.monotonic()}"
            probe = [0]

            def both_probed() -> bool:
                probe[0] += 1
                client.prepare(fanout=True).cast({}, "echo", value=f"probe-{probe[0]}")
                eventlet.sleep(0.2)
                return f"probe-{probe[0]}" in ours.got and f"probe-{probe[0]}" in theirs.got

            wait_until(both_probed)
            oslo_client.prepare(fanout=True).cast({}, "echo", value=mark)
            client.prepare(fanout=True).cast({}, "echo", value=mark + "-ours")
            wait_until(lambda: all(m in e.got for e in (ours, theirs) for m in (mark, mark + "-ours")))
            report["fanout"] = {e.name: [v for v in e.got if isinstance(v, str) and v.startswith(mark)]
                                for e in (ours, theirs)}
        with self.hub.phase(report, "errors"):
            try:
                client.prepare(server="rabbit").call({}, "fail")
            except ServiceError as exc:
                report["remote_error"] = type(exc).__name__
            started = time.monotonic()
            try:
                client.prepare(server="ntrabbit", timeout=1).call({}, "slow", seconds=3)
            except oslo_messaging.MessagingTimeout:
                report["timeout_after"] = time.monotonic() - started
        return report

    def notifications(self) -> dict:
        report: dict[str, Any] = {}
        topic = f"{self.prefix}_notes"
        notes, batch = Notes(), Notes()
        listening = self.transport("ntrabbit", "notifications")
        with self.hub.phase(report, "start"):
            self.start(oslo_messaging.get_notification_listener(
                listening, [oslo_messaging.Target(topic=topic)], [notes], executor=self.executor))
            self.start(oslo_messaging.get_batch_notification_listener(
                listening, [oslo_messaging.Target(topic=topic)], [batch], executor=self.executor,
                pool=f"{topic}_batch", batch_size=4, batch_timeout=1))
        with self.hub.phase(report, "idle"):
            eventlet.sleep(2)  # two listeners polling, nothing to read: the ticker must go on
        for scheme in ("ntrabbit", "rabbit"):
            notifier = oslo_messaging.Notifier(self.transport(scheme, "notifications"), publisher_id=scheme,
                                               driver="messagingv2", topics=[topic])
            for i in range(5):
                notifier.info({}, "compute.instance.update", {"from": scheme, "n": i})
        with self.hub.phase(report, "arrival"):
            wait_until(lambda: len(notes.got) >= 10 and sum(map(len, batch.batches)) >= 10)
        report["received"] = sorted((p["from"], p["n"]) for p in notes.got)
        report["batches"] = batch.batches
        return report

    def cut(self) -> dict:
        """The broker cuts every ``ntrabbit`` connection of this process (rabbitmqctl) while a
        green thread casts and two calls wait: one answered after the cut, one never."""
        report: dict[str, Any] = {}
        topic = f"{self.prefix}_cut"
        end = Endpoint("ntrabbit")
        self.start(oslo_messaging.get_rpc_server(
            self.transport("ntrabbit"), oslo_messaging.Target(topic=topic, server="ntrabbit"), [end],
            executor=self.executor))
        client = oslo_messaging.get_rpc_client(self.transport("ntrabbit"), oslo_messaging.Target(topic=topic),
                                               timeout=10)
        client.call({}, "echo", value="before")
        casts = Casts(client)  # threading is green here: so are its events, and Holds'
        outcome: dict[str, Any] = {}
        caster = eventlet.spawn(casts.run)
        answered = eventlet.spawn(call_held, client, "answered", 60, outcome)
        unanswered = eventlet.spawn(call_held, client, "unanswered", CUT_CALL_TIMEOUT, outcome)
        wait_until(lambda: len(end.held) == 2 and len(casts.confirmed) >= 20)
        with self.hub.phase(report, "cut"):
            report["connections_cut"] = cut_connections(os.getpid())
            unanswered.wait()
        report["unanswered"] = outcome.get("unanswered")
        report["unanswered_still_held"] = not end.released["unanswered"].is_set()
        with self.hub.phase(report, "after_cut"):
            end.released["answered"].set()
            answered.wait()
            report["answered"] = outcome.get("answered")
            cut_at = len(casts.confirmed)
            wait_until(lambda: len(casts.confirmed) >= cut_at + 20)  # casts flow again
            casts.stop()
            caster.wait()
            wait_until(lambda: not casts.lost(end.got))
            report["confirmed"] = len(casts.confirmed)
            report["lost"] = casts.lost(end.got)
            report["duplicates"] = casts.duplicates(end.got)
            report["after"] = client.call({}, "echo", value="after")["value"]
        end.release_all()
        return report


def _answers(client: Any) -> bool:
    with contextlib.suppress(oslo_messaging.MessagingTimeout):
        client.call({}, "echo", value="ping")
        return True
    return False


def main(argv: list[str]) -> int:
    return run_checks(argv, "oslo-eventlet-rabbit-check", Service,
                      ("rpc", "notifications", "cut", "stop_everything"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
