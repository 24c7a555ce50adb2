"""One OpenStack-style service, one config file, two libraries.

The service script does RPC on RabbitMQ (``[DEFAULT] transport_url``) and sends
notifications to Kafka with a vhost (``[oslo_messaging_notifications]
transport_url = ntkafka://...``) that two listener pools receive. It runs twice
in a subprocess from the same configuration file: once with
``import oslo_messaging as messaging`` (notifications through notify-transport's
``ntkafka`` oslo.messaging driver), once with
``import notify_transport as messaging``, the only line that differs. Both runs
must deliver every notification to both pools. oslo.messaging registers some
options only on the global ``cfg.CONF``, so the script drives it with that.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest


pytestmark = pytest.mark.functional

pytest.importorskip("oslo_messaging")

#: Notifications per run: each is sent by the RPC endpoint, half of the requests are calls, half casts.
COUNT = 40
IMPORTS = {"oslo.messaging": "import oslo_messaging as messaging",
           "notify_transport": "import notify_transport as messaging"}

SERVICE = '''\
"""A compute-like service: RPC on rabbit, notifications on Kafka, two listener pools."""
import json
import logging
import sys
import threading
import time

from oslo_config import cfg

logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")

{import_line}

CONF = cfg.CONF
CONF.register_opts([cfg.StrOpt("rpc_topic"), cfg.IntOpt("count"), cfg.StrOpt("run")], group="service")
CONF(["--config-file", sys.argv[1]], project="hybrid")
run = sys.argv[2]


class Pool:
    """A notification endpoint that keeps the numbers it received for this run."""

    def __init__(self):
        self.got = []
        self.lock = threading.Lock()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        if payload.get("run") == run:
            with self.lock:
                self.got.append(payload["n"])


class Compute:
    target = messaging.Target(version="1.0")

    def __init__(self, notifier):
        self.notifier = notifier

    def boot(self, ctxt, n):
        self.notifier.info(ctxt, "compute.instance.create.end", {{"run": run, "n": n}})
        return n


rpc_transport = messaging.get_rpc_transport(CONF)
notify_transport = messaging.get_notification_transport(CONF)
notifier = messaging.Notifier(notify_transport, publisher_id="compute.host1")  # driver, topics: config
pools = {{"audit": Pool(), "billing": Pool()}}
targets = [messaging.Target(topic=t) for t in CONF.oslo_messaging_notifications.topics]
listeners = [messaging.get_notification_listener(notify_transport, targets, [pool], executor="threading",
                                                 pool=name) for name, pool in pools.items()]
for listener in listeners:
    listener.start()
server = messaging.get_rpc_server(rpc_transport, messaging.Target(topic=CONF.service.rpc_topic, server="host1"),
                                  [Compute(notifier)], executor="threading")
server.start()
client = messaging.get_rpc_client(rpc_transport, messaging.Target(topic=CONF.service.rpc_topic))
client = client.prepare(timeout=60)
count = CONF.service.count
for n in range(count):
    if n % 2:
        client.cast({{}}, "boot", n=n)
    else:
        assert client.call({{}}, "boot", n=n) == n
deadline = time.monotonic() + 90
while time.monotonic() < deadline and any(len(set(p.got)) < count for p in pools.values()):
    time.sleep(0.1)
server.stop()
server.wait()
for listener in listeners:
    listener.stop()
    listener.wait()
rpc_transport.cleanup()
notify_transport.cleanup()
print(json.dumps({{name: sorted(p.got) for name, p in pools.items()}}))
'''


def service_script(library: str) -> str:
    return SERVICE.format(import_line=IMPORTS[library])


def test_the_scripts_differ_only_by_the_import():
    a, b = (service_script(lib).splitlines() for lib in IMPORTS)
    assert [(x, y) for x, y in zip(a, b) if x != y] == [tuple(IMPORTS.values())]


def test_one_config_file_on_oslo_messaging_and_on_notify_transport(broker, rabbit, tmp_path: Path):
    vhost = f"hyb{uuid.uuid4().hex[:8]}"
    notify_url = broker.url(vhost).replace("kafka://", "ntkafka://", 1)
    config = tmp_path / "service.conf"
    config.write_text(textwrap.dedent(f"""\
        [DEFAULT]
        transport_url = {rabbit}

        [oslo_messaging_notifications]
        driver = messagingv2
        transport_url = {notify_url}
        topics = hybrid_{uuid.uuid4().hex[:8]}

        [service]
        rpc_topic = hybrid_rpc_{uuid.uuid4().hex[:8]}
        count = {COUNT}
        """))
    for library in IMPORTS:
        script = tmp_path / f"service_{library.replace('.', '_')}.py"
        script.write_text(service_script(library))
        run = f"{library}-{uuid.uuid4().hex[:6]}"
        out = subprocess.run([sys.executable, str(script), str(config), run], capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, f"{library}: {out.stderr[-3000:]}"
        got = json.loads(out.stdout.strip().splitlines()[-1])
        for pool in ("audit", "billing"):
            # the service's warnings (group, fetch and commit trouble) tell why a pool missed some
            assert got[pool] == list(range(COUNT)), f"{library}, pool {pool}: {got[pool]}\n{out.stderr[-3000:]}"
