"""A service restarted right after a crash starts its listener.

The group coordinator evicts the SIGKILLed predecessor only ``session_timeout``
after its last heartbeat, and the new listener gets its partitions after that.
The default ``listener_start_timeout`` (2 x ``session_timeout`` + 15 s) waits
it out; one below the session timeout fails. On Tansu, which evicts members
that stop heartbeating (noida-db never does, so a replacement would wait
forever there), about twice the session timeout after the crash (measured:
11 s for 6 s, 22 s for 12 s); Kafka evicts at the session expiry.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import uuid

import pytest
from endpoints import IdRecorder
from oslo_config import cfg
from waits import wait_until

import notify_transport as nt

pytestmark = [pytest.mark.functional, pytest.mark.slow]

CHILD = textwrap.dedent("""
    import sys, time
    from oslo_config import cfg
    import notify_transport as nt
    conf = cfg.ConfigOpts()
    conf([])
    transport = nt.get_notification_transport(conf, sys.argv[1])
    class Endpoint:
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            pass
    server = nt.get_notification_listener(transport, [nt.Target(topic=sys.argv[2])], [Endpoint()],
                                          pool=sys.argv[3])
    server.start()
    print("ready", flush=True)
    while True:
        time.sleep(1)
""")


def crash_a_member(url: str, topic: str, pool: str) -> None:
    """Start a listener of ``pool`` in a child process, wait until it joined, SIGKILL it."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, url, topic, pool], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"  # type: ignore[union-attr]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)


def listener(url: str, topic: str, pool: str, endpoint: IdRecorder, **query):
    conf = cfg.ConfigOpts()
    conf([])
    extra = "".join(f"&{k}={v}" for k, v in query.items())
    transport = nt.get_notification_transport(conf, url + extra)
    return transport, nt.get_notification_listener(transport, [nt.Target(topic=topic)], [endpoint], pool=pool)


def test_default_start_timeout_waits_out_the_dead_predecessor(tansu, unique_topic):
    # Tansu evicts about 2 x 20 s after the crash: more than the former fixed default (30 s)
    url = tansu.url(None, session_timeout=20, heartbeat_interval=1, consumer_config="max.poll.interval.ms:20000")
    topic, pool = unique_topic("restart"), f"restart-{uuid.uuid4().hex[:6]}"
    crash_a_member(url, topic, pool)
    endpoint = IdRecorder()
    transport, server = listener(url, topic, pool, endpoint)
    try:
        server.start()  # returns once the dead member was evicted and this one got the partitions
        nt.Notifier(transport, "svc", driver="messagingv2", topics=[topic]).info({}, "after.restart", {"x": 1})
        transport.flush(30)
        assert wait_until(lambda: endpoint.payloads, 60), "the restarted listener received nothing"
        assert endpoint.payloads == [{"x": 1}]
    finally:
        server.stop()
        server.wait()
        transport.cleanup()


def test_a_start_timeout_below_the_session_timeout_fails_the_restart(tansu, unique_topic):
    url = tansu.url(None, session_timeout=8, heartbeat_interval=0.5)
    topic, pool = unique_topic("restart"), f"restart-{uuid.uuid4().hex[:6]}"
    crash_a_member(url, topic, pool)
    transport, server = listener(url, topic, pool, IdRecorder(), listener_start_timeout=1)
    try:
        with pytest.raises(nt.ServerListenError, match="did not get its partitions"):
            server.start()
    finally:
        transport.cleanup()
