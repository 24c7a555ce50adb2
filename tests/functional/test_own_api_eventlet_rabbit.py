"""notify_transport's own API on ``rabbit://`` in an eventlet-monkey-patched process.

eventlet greens the rabbit driver's threads and sockets as a whole, so the
transport uses it as it is (no native threads, no tpool): a notification
listener receives what a notifier sends, an RPC call gets its answer, and
stop, wait and cleanup return. The child runs monkey-patched (it cannot be
undone in this process); a hang fails on the subprocess timeout.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.functional
pytest.importorskip("eventlet")

#: A hang guard, not a timing check.
CHILD_TIMEOUT = 120

CHILD = textwrap.dedent("""
    import eventlet
    eventlet.monkey_patch()
    import json, sys, time
    from oslo_config import cfg
    import notify_transport
    from notify_transport import Target

    url, topic, rpc_topic = sys.argv[1:4]
    conf = cfg.ConfigOpts()
    conf([])
    out = {}
    got = []

    class Listening:
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            got.append(payload)

    transport = notify_transport.get_notification_transport(conf, url)
    listener = notify_transport.get_notification_listener(transport, [Target(topic=topic)], [Listening()])
    listener.start()
    notify_transport.Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic]).info(
        {}, "own.api", {"n": 1})
    deadline = time.monotonic() + 60  # a bound on waiting for the condition, not a timing check
    while not got and time.monotonic() < deadline:
        eventlet.sleep(0.01)
    out["received"] = got
    listener.stop()
    listener.wait()
    transport.cleanup()

    class Answering:
        def ping(self, ctxt, x):
            return x + 1

    rpc = notify_transport.get_rpc_transport(conf, url)
    server = notify_transport.get_rpc_server(rpc, Target(topic=rpc_topic, server="s1"), [Answering()])
    server.start()
    out["answer"] = notify_transport.get_rpc_client(rpc, Target(topic=rpc_topic)).call({}, "ping", x=1)
    server.stop()
    server.wait()
    rpc.cleanup()
    print(json.dumps(out))
""")


def test_a_listener_and_an_rpc_call_work_monkey_patched(rabbit, unique) -> None:
    from rabbit_fixtures import rabbit_url

    topic, rpc_topic = unique("evl"), unique("evlrpc")
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    result = subprocess.run([sys.executable, "-c", CHILD, rabbit_url(), topic, rpc_topic], capture_output=True,
                            text=True, timeout=CHILD_TIMEOUT, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == {"received": [{"n": 1}], "answer": 2}, result.stderr[-4000:]
