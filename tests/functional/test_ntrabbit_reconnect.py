"""``ntrabbit://`` through oslo.messaging's API when the broker cuts its connections.

The broker closes every connection of this process (``rabbitmqctl
close_connection``, only ours: the broker is shared) while a client casts
without pause and two calls are in flight (their endpoint holds them until the
test lets it answer). Every cast that returned (the broker confirmed it)
reaches the server; the call the endpoint answers after the cut gets its
answer (reply queue and replier reconnected), the one it does not answer ends
with a timeout instead of hanging; and calls, casts and fanout work again
afterwards without anyone reconnecting by hand.

The test runs in a virtual host of its own: a queue deleted under it by
another test session's cleanup made the broker return casts as unroutable
(they "were lost"), which is not what this test is about.
"""
from __future__ import annotations

import os
import shutil
import threading
from typing import Any

import pytest

oslo_messaging = pytest.importorskip("oslo_messaging")

from cut_traffic import Casts, Holds, call_held  # noqa: E402
from rabbit_ctl import connections_of, cut_connections  # noqa: E402
from rabbit_fixtures import FAST_RETRY, rabbit_url  # noqa: E402
from waits import wait_until  # noqa: E402

pytestmark = pytest.mark.functional

#: Connection cuts per run: a request lost at a cut is one that was on its way then,
#: so each cut is another chance to catch a loss.
CUTS = 4
#: The calls in flight at the first cut: one answered after it, one left to time out.
HELD = ("answered", "unanswered")
#: Timeout of the unanswered call: longer than the cut takes, so the cut comes while it waits.
CALL_TIMEOUT = 8

if not shutil.which("rabbitmqctl"):
    pytest.skip("rabbitmqctl is needed to cut connections", allow_module_level=True)


class Endpoint(Holds):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []
        self._lock = threading.Lock()

    def echo(self, ctxt: dict, value: Any) -> Any:
        with self._lock:
            self.seen.append(value)
        return value

    def values(self) -> list[Any]:
        with self._lock:
            return list(self.seen)


def connections_of_this_process() -> list[str]:
    return connections_of(os.getpid())


def test_confirmed_casts_survive_a_cut_connection_and_calls_time_out(own_vhost, unique, oslo_conf):
    url = rabbit_url(own_vhost, FAST_RETRY).replace("rabbit://", "ntrabbit://", 1)
    topic = unique("ntrcut")
    server_transport = oslo_messaging.get_rpc_transport(oslo_conf, url)
    client_transport = oslo_messaging.get_rpc_transport(oslo_conf, url)
    endpoint = Endpoint()
    server = oslo_messaging.get_rpc_server(server_transport, oslo_messaging.Target(topic=topic, server="s1"),
                                           [endpoint])
    server.start()
    client = oslo_messaging.get_rpc_client(client_transport, oslo_messaging.Target(topic=topic), timeout=5)
    casts = Casts(client)
    confirmed, failed = casts.confirmed, casts.failed
    outcome: dict[str, Any] = {}
    caster = threading.Thread(target=casts.run)
    answered = threading.Thread(target=call_held, args=(client, "answered", 60, outcome))
    unanswered = threading.Thread(target=call_held, args=(client, "unanswered", CALL_TIMEOUT, outcome))
    try:
        assert client.call({}, "echo", value="before") == "before"
        assert wait_until(lambda: len(connections_of_this_process()) >= 4)  # both transports connected
        caster.start()
        assert wait_until(lambda: len(confirmed) >= 50)
        answered.start()
        unanswered.start()
        assert wait_until(lambda: set(endpoint.held) == set(HELD))  # both in flight
        assert cut_connections(os.getpid()) >= 4
        unanswered.join(CALL_TIMEOUT + 30)  # a hang, not a slow answer, fails here
        assert not unanswered.is_alive()
        assert outcome["unanswered"] == "timeout"  # no answer can have come: it is still held
        assert not endpoint.released["unanswered"].is_set()
        endpoint.released["answered"].set()  # answered after the reconnect: the answer arrives
        answered.join(60)
        assert outcome.get("answered") == "answered", outcome
        cut_at = len(confirmed)
        assert wait_until(lambda: len(confirmed) >= cut_at + 50, timeout=60), failed[-3:]
        # more cuts while casts flow (what is on its way at a cut is the loss this looks for)
        for _ in range(CUTS - 1):
            assert wait_until(lambda: len(connections_of_this_process()) >= 4, timeout=60)
            assert cut_connections(os.getpid()) >= 4
            cut_at = len(confirmed)
            assert wait_until(lambda: len(confirmed) >= cut_at + 50, timeout=60), failed[-3:]
        casts.stop()
        caster.join(30)
        assert not caster.is_alive()
        # every cast the broker confirmed reached the server (at most once each)
        assert wait_until(lambda: not casts.lost(endpoint.values()), timeout=30), casts.lost(endpoint.values())
        assert casts.duplicates(endpoint.values()) == 0
        # and the rest works again: a call, a fanout
        assert client.call({}, "echo", value="after") == "after"
        client.prepare(fanout=True).cast({}, "echo", value="fanout-after")
        assert wait_until(lambda: "fanout-after" in endpoint.values())
    finally:
        casts.stop()
        endpoint.release_all()
        for thread in (caster, answered, unanswered):
            if thread.is_alive():
                thread.join(60)
        server.stop()
        server.wait()
        server_transport.cleanup()
        client_transport.cleanup()
