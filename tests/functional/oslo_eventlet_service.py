"""An eventlet-monkey-patched oslo.messaging service on ``ntkafka://``; run as a child process.

``python oslo_eventlet_service.py BOOTSTRAP EXECUTOR PREFIX`` monkey-patches
first thing, then drives notify-transport only through oslo.messaging's public
API (get_notification_transport, get_notification_listener with EXECUTOR,
get_batch_notification_listener, Notifier, LoggingNotificationHandler). A
green thread ticks every 10 ms the whole time; each phase reports how often it
ticked and its longest gap, which shows whether the hub was blocked. Prints
one JSON object per check on stdout, then ``{"check": "done"}``.
test_oslo_eventlet.py runs it with a timeout, so a hang fails instead of
hanging the test run.
"""
import eventlet

eventlet.monkey_patch()

import contextlib  # noqa: E402
import faulthandler  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import uuid  # noqa: E402
from typing import Any, Callable, Iterator, Sequence  # noqa: E402

import greenlet  # noqa: E402
import oslo_messaging  # noqa: E402
from oslo_config import cfg  # noqa: E402

TICK = 0.01
#: Longest wait for notifications to arrive.
ARRIVAL_TIMEOUT = 30.0


class HubWatch:
    """A green thread that ticks every ``TICK`` seconds; phases report its ticks and longest gap."""

    def __init__(self) -> None:
        self.ticks: list[float] = []
        eventlet.spawn(self._run)

    def _run(self) -> None:
        while True:
            self.ticks.append(time.monotonic())
            eventlet.sleep(TICK)

    @contextlib.contextmanager
    def phase(self, into: dict, name: str) -> Iterator[None]:
        eventlet.sleep(0)
        start = time.monotonic()
        try:
            yield
        finally:
            end = time.monotonic()
            inside = [t for t in self.ticks if start <= t <= end]
            points = [start, *inside, end]
            into[name] = {"seconds": end - start, "ticks": len(inside),
                          "max_gap": max(b - a for a, b in zip(points, points[1:]))}


class Recorder:
    """A notification endpoint that keeps what it gets."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def _keep(self, priority: str, publisher_id: str, event_type: str, payload: Any) -> None:
        self.calls.append({"priority": priority, "publisher_id": publisher_id, "event_type": event_type,
                           "payload": payload})

    def info(self, ctxt, publisher_id, event_type, payload, metadata) -> None:
        self._keep("info", publisher_id, event_type, payload)

    def error(self, ctxt, publisher_id, event_type, payload, metadata) -> None:
        self._keep("error", publisher_id, event_type, payload)

    def warn(self, ctxt, publisher_id, event_type, payload, metadata) -> None:
        self._keep("warn", publisher_id, event_type, payload)


class BatchRecorder:
    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def info(self, messages: list[dict]) -> None:
        self.batches.append([m["payload"]["seq"] for m in messages])


def wait_until(condition: Callable[[], bool], timeout: float = ARRIVAL_TIMEOUT) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        eventlet.sleep(0.02)
    return True


class ServiceBase:
    """Transports and servers of one run; everything is stopped, waited for and cleaned up at the end.

    The base of this module's Service and oslo_eventlet_rabbit_service's: one hub watch, one
    list of what to stop, one timed stop (the tests read the same phases from both).
    """

    def __init__(self, executor: str, prefix: str) -> None:
        self.executor = executor
        self.prefix = prefix
        self.hub = HubWatch()
        self.transports: list[Any] = []
        self.servers: list[Any] = []

    def stop_everything(self) -> dict:
        """stop(), wait() and cleanup() of every server and transport, each phase timed."""
        report: dict = {"servers": len(self.servers), "transports": len(self.transports)}
        with self.hub.phase(report, "stop"):
            for server in self.servers:
                server.stop()
        with self.hub.phase(report, "wait"):
            for server in self.servers:
                server.wait()
        with self.hub.phase(report, "cleanup"):
            for transport in self.transports:
                transport.cleanup()
        return report


class Service(ServiceBase):
    """The notification checks on ``ntkafka://``."""

    def __init__(self, bootstrap: str, executor: str, prefix: str) -> None:
        super().__init__(executor, prefix)
        self.bootstrap = bootstrap

    def url(self, vhost: str, query: str = "") -> str:
        return f"ntkafka://{self.bootstrap}/{vhost}" + (f"?{query}" if query else "")

    def topic(self, name: str) -> str:
        return f"{self.prefix}-{name}-{uuid.uuid4().hex[:6]}"

    def transport(self, url: str) -> Any:
        transport = oslo_messaging.get_notification_transport(cfg.CONF, url=url)
        self.transports.append(transport)
        return transport

    def listener(self, transport: Any, topic: str, endpoint: Any, pool: str) -> Any:
        return oslo_messaging.get_notification_listener(
            transport, [oslo_messaging.Target(topic=topic)], [endpoint], executor=self.executor, pool=pool)

    def start(self, server: Any, report: dict, phase: str = "start") -> Any:
        with self.hub.phase(report, phase):
            server.start()
        self.servers.append(server)
        return server

    # -- the checks ----------------------------------------------------------------------------
    def first_notification_and_vhost(self) -> dict:
        """Sent right after start() returned: kept; a listener of another vhost gets nothing."""
        report: dict = {}
        topic, here, elsewhere = self.topic("first"), vhost(), vhost()
        transport = self.transport(self.url(here))
        mine, other = Recorder(), Recorder()
        self.start(self.listener(self.transport(self.url(elsewhere)), topic, other, "p1"), report,
                   "start_other")
        self.start(self.listener(transport, topic, mine, "p1"), report)
        notifier = oslo_messaging.Notifier(transport, publisher_id="compute.host1", driver="messagingv2",
                                           topics=[topic])
        with self.hub.phase(report, "send"):
            notifier.info({}, "compute.instance.create.end", {"seq": 0})
        with self.hub.phase(report, "receive"):
            wait_until(lambda: len(mine.calls) >= 1)
        with self.hub.phase(report, "idle"):
            eventlet.sleep(3.0)
        report["received"] = mine.calls
        report["other_vhost_received"] = other.calls
        return report

    def pools(self) -> dict:
        """Two pools of the same topic each get every notification."""
        report: dict = {}
        topic = self.topic("pools")
        transport = self.transport(self.url(vhost(), "topic_partitions=2"))
        audit, billing = Recorder(), Recorder()
        self.start(self.listener(transport, topic, audit, "audit"), report, "start_audit")
        self.start(self.listener(transport, topic, billing, "billing"), report, "start_billing")
        notifier = oslo_messaging.Notifier(transport, driver="messagingv2", topics=[topic])
        with self.hub.phase(report, "send"):
            for seq in range(10):
                notifier.prepare(publisher_id=f"compute.host{seq % 3}").info({}, "e", {"seq": seq})
        with self.hub.phase(report, "receive"):
            wait_until(lambda: len(audit.calls) >= 10 and len(billing.calls) >= 10)
        # a last one per publisher (its key picks the partition, which keeps order): once
        # they are in, so is anything sent before them
        for host in range(3):
            notifier.prepare(publisher_id=f"compute.host{host}").info({}, "last", {"seq": None})
        wait_until(lambda: all(sum(c["event_type"] == "last" for c in r.calls) == 3 for r in (audit, billing)))
        report["audit"] = sorted(c["payload"]["seq"] for c in audit.calls if c["event_type"] != "last")
        report["billing"] = sorted(c["payload"]["seq"] for c in billing.calls if c["event_type"] != "last")
        return report

    def batch(self) -> dict:
        """A batch listener gets batches of at most batch_size."""
        report: dict = {}
        topic = self.topic("batch")
        transport = self.transport(self.url(vhost()))
        recorder = BatchRecorder()
        server = oslo_messaging.get_batch_notification_listener(
            transport, [oslo_messaging.Target(topic=topic)], [recorder], executor=self.executor,
            pool="batch", batch_size=5, batch_timeout=0.5)
        self.start(server, report)
        notifier = oslo_messaging.Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
        for seq in range(12):
            notifier.info({}, "e", {"seq": seq})
        with self.hub.phase(report, "receive"):
            wait_until(lambda: sum(map(len, recorder.batches)) >= 12)
        report["batches"] = recorder.batches
        return report

    def logging_handler(self) -> dict:
        """oslo's LoggingNotificationHandler (oslo_messaging.notify.logger) sends log records as notifications,

        from a green thread and from a native one (as a record logged by a library's own thread).
        """
        report: dict = {}
        topic, vh = self.topic("logs"), vhost()
        recorder = Recorder()
        self.start(self.listener(self.transport(self.url(vh)), topic, recorder, "logs"), report)
        handler = oslo_messaging.LoggingNotificationHandler(self.url(vh), publisher_id="svc.host1",
                                                             driver="messagingv2", topic=topic)
        handler.setLevel(logging.WARNING)
        logger = logging.getLogger(f"{self.prefix}.service")
        logger.addHandler(handler)
        logger.propagate = False
        try:
            with self.hub.phase(report, "log"):
                logger.error("disk %s is full", "sda1")
                logger.info("not sent: below the handler's level")
                native = eventlet.patcher.original("threading").Thread(
                    target=logger.warning, args=("from a native thread",), daemon=True)
                native.start()
                wait_until(lambda: not native.is_alive())
            with self.hub.phase(report, "receive"):
                wait_until(lambda: len(recorder.calls) >= 2)
            # a last one at each level (one partition each, which keeps order): once they are
            # in, so is anything logged before them
            logger.error("last")
            logger.warning("last")
            wait_until(lambda: sum(c["payload"].get("msg") == "last" for c in recorder.calls) == 2)
        finally:
            logger.removeHandler(handler)
            with self.hub.phase(report, "handler_cleanup"):
                handler.notifier.transport.cleanup()
        report["received"] = [{"priority": c["priority"], "publisher_id": c["publisher_id"],
                               "event_type": c["event_type"], "msg": c["payload"].get("msg"),
                               "levelname": c["payload"].get("levelname")} for c in recorder.calls
                              if c["payload"].get("msg") != "last"]
        return report

    def start_failure(self) -> dict:
        """An unreachable broker: start() raises oslo's exception, from tpool, within its timeout."""
        from notify_transport.testing.brokers import free_port

        report: dict = {}
        transport = self.transport(f"ntkafka://127.0.0.1:{free_port()}/v?listener_start_timeout=1")
        server = self.listener(transport, self.topic("unreachable"), Recorder(), "p")
        with self.hub.phase(report, "failed_start"):
            try:
                server.start()
            except oslo_messaging.MessagingException as exc:
                report["raised"] = f"{type(exc).__name__}: {exc}"
        return report


def vhost() -> str:
    return f"v{uuid.uuid4().hex[:8]}"


#: The test sends this before it kills a child that ran past its time: the stacks show where it waited.
STACKS_SIGNAL = signal.SIGUSR1


def green_stack(thread: greenlet.greenlet) -> str:
    """Where the suspended green thread ``thread`` waits ("?" when it is running or has ended)."""
    return "".join(traceback.format_stack(thread.gr_frame)) if thread.gr_frame is not None else "?"


def green_stacks() -> list[str]:
    """The stack of every green thread now suspended (a green thread is not an OS thread, so
    faulthandler cannot see it)."""
    return [green_stack(g) for g in gc.get_objects() if isinstance(g, greenlet.greenlet) and g.gr_frame is not None]


def _print_green_stacks(signum: int, frame: Any) -> None:
    print(f"--- {len(stacks := green_stacks())} green threads ---", file=sys.stderr)
    for stack in stacks:
        print(stack, file=sys.stderr, flush=True)


def show_stacks_on_signal() -> None:
    """On :data:`STACKS_SIGNAL`, print every OS thread's stack at once (faulthandler, even while
    the hub is held in C code), then every green thread's when Python runs again."""
    signal.signal(STACKS_SIGNAL, _print_green_stacks)
    faulthandler.register(STACKS_SIGNAL, file=sys.stderr, all_threads=True, chain=True)


def emit(check: str, **data: Any) -> None:
    print(json.dumps({"check": check, **data}, default=repr), flush=True)


def run_checks(argv: list[str], project: str, service_class: Callable[[str, str, str], Any],
               checks: Sequence[str]) -> int:
    """The main of a child service script: ``argv`` is ``TARGET EXECUTOR PREFIX [CONFIG_FILE...]``
    (the files read as a service reads its ``--config-file``); each check's report (or its error,
    so the test fails on it with the child's output) is one JSON line."""
    target, executor, prefix, *config_files = argv
    show_stacks_on_signal()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    cfg.CONF([arg for path in config_files for arg in ("--config-file", path)], project=project)
    emit("patched", thread=eventlet.patcher.is_monkey_patched("thread"), executor=executor)
    service = service_class(target, executor, prefix)
    for check in checks:
        try:
            emit(check, **getattr(service, check)())
        except Exception as exc:  # noqa: BLE001 - reported, the test fails on it
            logging.exception("%s failed", check)
            emit(check, error=f"{type(exc).__name__}: {exc}")
    emit("done")
    return 0


def main(argv: list[str]) -> int:
    return run_checks(argv, "oslo-eventlet-check", Service,
                      ("first_notification_and_vhost", "pools", "batch", "logging_handler", "start_failure",
                       "stop_everything"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
