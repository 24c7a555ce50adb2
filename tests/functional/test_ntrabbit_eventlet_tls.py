"""``ntrabbit`` over TLS in an eventlet-monkey-patched oslo.messaging service.

The same child service and checks as test_ntrabbit_eventlet.py (RPC both ways
with ``rabbit://``, fanout, remote errors, timeouts, notifications, batches, a
cut connection, a hub never blocked), but every connection goes to the TLS
proxy of rabbit_fixtures, and TLS is switched on the way a service does it:
``[oslo_messaging_rabbit] ssl = True`` and ``ssl_ca_file`` in the service's
configuration file, not in the URL. The proxy speaks only TLS, so nothing
passes unless the patched process's TLS (eventlet's green ``ssl`` under pika,
and kombu for ``rabbit://``) works.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from rabbit_fixtures import SESSION_PREFIX
from test_ntrabbit_eventlet import SERVICE
from test_oslo_eventlet import EXECUTORS, check, run_service

# The checks of the plain run, collected here again against this module's ``service``.
from test_ntrabbit_eventlet import (  # noqa: F401
    test_a_cut_connection_loses_no_confirmed_cast_and_calls_end_on_time,
    test_calls_both_ways_and_concurrent_calls_from_green_threads, test_fanout_reaches_both_schemes_once,
    test_notifications_from_both_schemes_and_batches, test_remote_error_class_and_timeout,
    test_the_child_is_monkey_patched, test_the_hub_keeps_running)

pytestmark = pytest.mark.functional

pytest.importorskip("oslo_messaging")
pytest.importorskip("eventlet")


@pytest.fixture(scope="module", params=EXECUTORS)
def service(request: pytest.FixtureRequest, tls_proxy: Any, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, Any]:
    proxy, ca_file = tls_proxy
    config = Path(tmp_path_factory.mktemp("ntrabbit-tls")) / "service.conf"
    config.write_text("[oslo_messaging_rabbit]\n"
                      "ssl = True\n"
                      f"ssl_ca_file = {ca_file}\n")
    before = proxy.connections
    report = run_service(f"rabbit://guest:guest@127.0.0.1:{proxy.port}/", request.param, SERVICE,
                         f"{SESSION_PREFIX}_evtls_{uuid.uuid4().hex[:8]}", str(config))
    report["tls_connections"] = proxy.connections - before
    return report


def test_every_connection_went_through_tls(service) -> None:
    check(service, "rpc")
    # ntrabbit's and rabbit's servers and clients, notifications, and the reconnections after the cut
    assert service["tls_connections"] >= 8, service["output"]
