"""A listener process SIGKILLed mid-stream in at-least-once mode.

Runs on Tansu, which evicts a member that stopped heartbeating (its fixture
sets a short session timeout); noida-db never does, so a replacement would
wait forever there. Each listener process appends ``<i>`` to its own file and
fsyncs before the endpoint returns, so the files say exactly what was
processed even after SIGKILL.
"""
from __future__ import annotations

import select
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

import notify_transport
from notify_transport import Notifier
from kafka_fixtures import group_offsets
from waits import wait_until

pytestmark = [pytest.mark.functional, pytest.mark.slow]

#: Notifications sent; the listener is killed once two thirds of them were processed.
COUNT = 900
MAX_IN_FLIGHT = 40

CHILD = textwrap.dedent("""
    import os, sys, threading, time
    from oslo_config import cfg
    import notify_transport as nt

    url, topic, pool, out_path, max_in_flight = sys.argv[1:6]
    conf = cfg.ConfigOpts()
    conf([])
    transport = nt.get_notification_transport(conf, url)
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    lock = threading.Lock()

    class Endpoint:
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            time.sleep(0.01)  # some work, so that the kill lands mid-stream
            with lock:
                os.write(out, b"%d %.6f\\n" % (payload["i"], time.time()))
                os.fsync(out)

    server = nt.get_notification_listener(
        transport, [nt.Target(topic=topic)], [Endpoint()], pool=pool,
        delivery_mode="at_least_once", workers=4, max_in_flight=int(max_in_flight),
        commit_interval=0.2)
    server.start()
    print("ready", flush=True)
    while True:
        time.sleep(1)
""")


class ListenerProcess:
    def __init__(self, url: str, topic: str, pool: str, out: Path, script: Path) -> None:
        self.out = out
        self.process = subprocess.Popen(
            [sys.executable, str(script), url, topic, pool, str(out), str(MAX_IN_FLIGHT)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait (bounded) for the child's "ready": its listener joined the group."""
        readable, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if readable else ""  # type: ignore[union-attr]
        assert line.strip() == "ready", f"listener process not ready after {timeout}s: {line!r}"

    def lines(self) -> list[tuple[int, float]]:
        if not self.out.exists():
            return []
        out = []
        for line in self.out.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2:  # a SIGKILL can leave no partial line (fsync'd writes), but be safe
                out.append((int(parts[0]), float(parts[1])))
        return out

    def processed(self) -> list[int]:
        return [i for i, _ in self.lines()]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


def committed_offset(bootstrap: str, pool: str, topic: str) -> int:
    return group_offsets(bootstrap, pool, topic)[0]




def test_sigkilled_listener_every_message_processed_dupes_bounded(tansu, kafka_conf, unique_topic,
                                                                    tmp_path):
    topic = unique_topic("crash")
    pool = f"crash-{uuid.uuid4().hex[:6]}"
    url = tansu.url(topic_partitions=1)
    script = tmp_path / "listener.py"
    script.write_text(CHILD)
    children = []
    try:
        first = ListenerProcess(url, topic, pool, tmp_path / "first.txt", script)
        children.append(first)
        first.wait_ready()
        transport = notify_transport.get_notification_transport(kafka_conf, url)
        notifier = Notifier(transport, driver="messagingv2", topics=[topic])
        for i in range(COUNT):  # one partition: offset == i; 8 publishers spread the workers
            notifier.prepare(publisher_id=f"pub-{i % 8}").info({}, "e", {"i": i})
        assert transport.flush(10) == 0
        transport.cleanup()
        assert wait_until(lambda: len(first.processed()) >= 2 * COUNT // 3, 30), "first listener idle"
        first.kill()
        killed_at = time.time()
        first_lines = first.lines()
        by_first = [i for i, _ in first_lines]
        assert len(by_first) < COUNT, "killed too late to test anything"
        committed = committed_offset(tansu.bootstrap, pool, f"{topic}.info")
        assert 0 <= committed <= COUNT

        second = ListenerProcess(url, topic, pool, tmp_path / "second.txt", script)
        children.append(second)
        second.wait_ready()  # joins once Tansu evicted the dead member
        everything = lambda: set(by_first) | set(second.processed())  # noqa: E731
        assert wait_until(lambda: everything() == set(range(COUNT)), 60), (
            f"missing: {sorted(set(range(COUNT)) - everything())[:20]}")
        # nothing more arrives once the group committed the end
        assert wait_until(lambda: committed_offset(tansu.bootstrap, pool, f"{topic}.info") == COUNT, 30,
                          interval=0.2)
        by_second = second.processed()
    finally:
        for child in children:
            child.kill()

    # every message processed at least once by the group
    assert set(by_first) | set(by_second) == set(range(COUNT))
    assert len(by_first) == len(set(by_first)) and len(by_second) == len(set(by_second))
    # what the first had committed was not delivered again; the replacement started there
    assert min(by_second) == committed and set(by_second) == set(range(committed, COUNT))
    # duplicates: exactly what the first processed beyond its committed offset (in flight or
    # finished since its last commit), and never more than that window
    dupes = set(by_first) & set(by_second)
    window = {i for i in by_first if i >= committed}
    assert dupes == window
    assert len(dupes) <= len(window)
    # the window is bounded: what finished since the last periodic commit (commit_interval
    # 0.2 s, plus 0.5 s for the asynchronous commit to land) and what waited behind a record
    # still in flight (at most max_in_flight of those)
    recent = sum(1 for _, at in first_lines if at >= killed_at - 0.7)
    assert len(window) <= recent + MAX_IN_FLIGHT
    assert len(window) < len(by_first)  # most of what the first did was committed
    print(f"\nprocessed by first={len(by_first)} committed={committed} "
          f"second={len(by_second)} duplicates={len(dupes)}")
