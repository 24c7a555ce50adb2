"""``ntrabbit://`` through oslo.messaging's API when the broker cuts its connections.

The broker closes every connection of this process (``rabbitmqctl
close_connection``, only ours: the broker is shared) while a client casts
without pause and a call is in flight. Every cast that returned (the broker
confirmed it) reaches the server, the call in flight ends with a timeout (or
its answer) instead of hanging, and calls, casts and fanout work again
afterwards without anyone reconnecting by hand.
"""
from __future__ import annotations

import os
import re
import shutil
import threading
import time
from typing import Any

import pytest
from oslo_config import cfg

oslo_messaging = pytest.importorskip("oslo_messaging")

from rabbit_fixtures import FAST_RETRY, rabbit_url, rabbitmqctl  # noqa: E402
from waits import wait_until  # noqa: E402

pytestmark = pytest.mark.functional

#: Connection cuts per run: a request lost at a cut is one that was on its way then,
#: so each cut is another chance to catch a loss.
CUTS = 4

if not shutil.which("rabbitmqctl"):
    pytest.skip("rabbitmqctl is needed to cut connections", allow_module_level=True)


class Endpoint:
    def __init__(self) -> None:
        self.seen: list[Any] = []
        self._lock = threading.Lock()

    def echo(self, ctxt: dict, value: Any) -> Any:
        with self._lock:
            self.seen.append(value)
        return value

    def sleep(self, ctxt: dict, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    def values(self) -> list[Any]:
        with self._lock:
            return list(self.seen)


def connections_of_this_process() -> list[str]:
    """Broker-side ids of the connections this process opened (their names carry our pid)."""
    listing = rabbitmqctl("list_connections", "-q", "--no-table-headers", "pid", "client_properties").stdout
    marker = re.compile(rf'"connection_name","[^"]*:{os.getpid()}:')
    return [line.split("\t", 1)[0] for line in listing.splitlines() if marker.search(line)]


def cut_connections() -> int:
    ids = connections_of_this_process()
    for conn_id in ids:
        rabbitmqctl("close_connection", conn_id, "test: connection cut", check=False)
    return len(ids)


def test_confirmed_casts_survive_a_cut_connection_and_calls_time_out(rabbit, unique):
    cfg.CONF([])
    url = rabbit_url(query=FAST_RETRY).replace("rabbit://", "ntrabbit://", 1)
    topic = unique("ntrcut")
    server_transport = oslo_messaging.get_rpc_transport(cfg.CONF, url)
    client_transport = oslo_messaging.get_rpc_transport(cfg.CONF, url)
    endpoint = Endpoint()
    server = oslo_messaging.get_rpc_server(server_transport, oslo_messaging.Target(topic=topic, server="s1"),
                                           [endpoint])
    server.start()
    client = oslo_messaging.get_rpc_client(client_transport, oslo_messaging.Target(topic=topic), timeout=5)
    confirmed: list[int] = []
    failed: list[str] = []
    stop = threading.Event()

    def cast_forever() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            try:
                client.cast({}, "echo", value=n)
                confirmed.append(n)
            except oslo_messaging.MessagingException as exc:  # not confirmed: may be lost
                failed.append(f"{n}: {exc}")

    outcome: dict[str, Any] = {}

    def call_in_flight() -> None:
        try:
            outcome["result"] = client.prepare(timeout=2).call({}, "sleep", seconds=4)
        except oslo_messaging.MessagingTimeout:
            outcome["result"] = "timeout"

    caster = threading.Thread(target=cast_forever)
    caller = threading.Thread(target=call_in_flight)
    try:
        assert client.call({}, "echo", value="before") == "before"
        caster.start()
        assert wait_until(lambda: len(confirmed) >= 50)
        caller.start()
        assert wait_until(lambda: len(connections_of_this_process()) >= 4)  # both transports connected
        assert cut_connections() >= 4
        caller.join(30)  # a hang, not a slow answer, fails here
        assert not caller.is_alive()
        assert outcome["result"] == "timeout"  # the answer would have come after 4 s
        cut_at = len(confirmed)
        assert wait_until(lambda: len(confirmed) >= cut_at + 50, timeout=60), failed[-3:]
        # more cuts while casts flow (what is on its way at a cut is the loss this looks for)
        for _ in range(CUTS - 1):
            assert wait_until(lambda: len(connections_of_this_process()) >= 4, timeout=60)
            assert cut_connections() >= 4
            cut_at = len(confirmed)
            assert wait_until(lambda: len(confirmed) >= cut_at + 50, timeout=60), failed[-3:]
        stop.set()
        caster.join(30)
        assert not caster.is_alive()
        # every cast the broker confirmed reached the server (at most once each)
        assert wait_until(lambda: set(confirmed) <= set(endpoint.values()), timeout=30), \
            sorted(set(confirmed) - set(endpoint.values()))[:10]
        numbers = [v for v in endpoint.values() if isinstance(v, int)]
        assert len(numbers) == len(set(numbers))
        # and the rest works again: a call, a fanout
        assert client.call({}, "echo", value="after") == "after"
        client.prepare(fanout=True).cast({}, "echo", value="fanout-after")
        assert wait_until(lambda: "fanout-after" in endpoint.values())
    finally:
        stop.set()
        if caster.is_alive():
            caster.join(30)
        server.stop()
        server.wait()
        server_transport.cleanup()
        client_transport.cleanup()
