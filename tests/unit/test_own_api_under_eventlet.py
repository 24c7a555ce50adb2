"""notify_transport's own API in an eventlet-monkey-patched process, without a broker.

``kafka://`` through ``get_notification_transport``: the Kafka driver gets native
threads before it is built, sends and flushes wait off the hub (a green thread
keeps running meanwhile), a listener is refused with a ConfigurationError that
names ``ntkafka://`` (never a hang), and a driver outside the Kafka package is
left as it is. Before this, the child hung at its first send (its
delivery-report thread was a green thread looping on a blocking librdkafka
poll): the subprocess timeout fails it.

The checks run in a child process (monkey-patching cannot be undone in this one).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from notify_transport.testing.brokers import free_port

pytest.importorskip("eventlet")

#: A hang guard, not a timing check: the child's own waits are a few seconds at most.
CHILD_TIMEOUT = 60

CHILD = textwrap.dedent("""
    import sys
    import eventlet
    eventlet.monkey_patch()
    import json
    from eventlet import patcher
    from oslo_config import cfg
    import notify_transport
    from notify_transport import ConfigurationError, Target

    conf = cfg.ConfigOpts()
    conf([])
    ticks = [0]
    def ticker():
        while True:
            ticks[0] += 1
            eventlet.sleep(0.01)
    eventlet.spawn(ticker)
    import logging
    class Collect(logging.Handler):
        def __init__(self):
            super().__init__()
            self.records = []
        def emit(self, record):
            self.records.append(record)
    collect = Collect()
    logging.getLogger().addHandler(collect)

    out = {}
    # nothing listens there; delivery_timeout far beyond the flush below, so the message stays pending
    url = f"kafka://127.0.0.1:{sys.argv[1]}?delivery_timeout=600&exit_flush_timeout=0&flush_timeout=1"
    transport = notify_transport.get_notification_transport(conf, url)
    notifier = notify_transport.Notifier(transport, publisher_id="p", driver="messagingv2", topics=["t"])
    notifier.info({}, "own.api", {"n": 1})
    # the producer's delivery-report thread is an operating-system thread, not a green one
    out["native_threads"] = "notify-kafka-delivery-reports" in [
        t.name for t in patcher.original("threading").enumerate()]
    before = ticks[0]
    out["pending"] = transport.flush(1.0)
    out["hub_ran_during_flush"] = ticks[0] > before

    class Endpoint:
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            pass
    listener = notify_transport.get_notification_listener(transport, [Target(topic="t")], [Endpoint()])
    try:
        listener.start()
        out["listener"] = "started"
    except ConfigurationError as exc:
        out["listener"] = "ntkafka://" in str(exc) and "oslo.messaging" in str(exc)
    transport.cleanup()
    # the producer says at cleanup (in a tpool thread) that the message is lost: emitted by now
    out["cleanup_logged"] = any(r.levelno == logging.ERROR and "not confirmed" in r.getMessage()
                                for r in collect.records)

    fake = notify_transport.get_notification_transport(conf, "fake://")
    notify_transport.Notifier(fake, publisher_id="p", driver="messagingv2", topics=["t"]).info({}, "e", {})
    out["fake_sent"] = fake.delivery_stats().get("sent")
    fake.cleanup()
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def patched_child() -> dict:
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    result = subprocess.run([sys.executable, "-c", CHILD, str(free_port())], capture_output=True, text=True,
                            timeout=CHILD_TIMEOUT, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_kafka_driver_runs_on_native_threads(patched_child) -> None:
    assert patched_child["native_threads"] is True


def test_a_send_and_a_flush_leave_the_hub_running(patched_child) -> None:
    assert patched_child["pending"] == 1
    assert patched_child["hub_ran_during_flush"] is True


def test_a_kafka_listener_is_refused_with_a_pointer_to_ntkafka(patched_child) -> None:
    assert patched_child["listener"] is True


def test_what_the_driver_logs_while_closing_is_emitted_when_cleanup_returns(patched_child) -> None:
    assert patched_child["cleanup_logged"] is True


def test_a_driver_outside_the_kafka_package_still_sends(patched_child) -> None:
    assert patched_child["fake_sent"] == 1
