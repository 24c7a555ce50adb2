"""``rabbitmqctl`` for the tests: the command itself, and cutting one process's connections.

No pytest here: the eventlet-patched child services (oslo_eventlet_rabbit_service.py)
cut their own connections with it too. The broker is shared by everyone on the
machine, so a cut closes only the connections that notify-transport opened in one
process (their names carry its pid, see ``RabbitSettings.connection_name``); oslo's
own ``rabbit://`` connections in that process are left alone.
"""
from __future__ import annotations

import re
import subprocess


def rabbitmqctl(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["rabbitmqctl", *args], check=check, capture_output=True, text=True,
                          timeout=120)


def connections_of(pid: int) -> list[str]:
    """Broker-side ids of the connections notify-transport opened in process ``pid``."""
    listing = rabbitmqctl("list_connections", "-q", "--no-table-headers", "pid", "client_properties").stdout
    ours = re.compile(rf'"connection_name","[^"]*:{pid}:')
    return [line.split("\t", 1)[0] for line in listing.splitlines()
            if ours.search(line) and '{"product","notify-transport"}' in line]


def cut_connections(pid: int) -> int:
    """Have the broker close every connection of :func:`connections_of`; how many there were.

    All at once (one ``rabbitmqctl`` each, side by side): each takes a second or more to
    start, and a test wants its connections cut while what it set up is still in flight.
    """
    closing = [subprocess.Popen(["rabbitmqctl", "close_connection", conn_id, "test: connection cut"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for conn_id in connections_of(pid)]
    for process in closing:
        process.wait(120)
    return len(closing)
