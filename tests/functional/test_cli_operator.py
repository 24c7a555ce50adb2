"""The operator CLI as an operator runs it: a separate process, global options anywhere, one-line
errors with exit codes, tail following a topic created after it started, retry and dead-letter
topics labelled, --timeout bounding the command.

On noida (and on the cluster of $NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP when set); the rabbit case uses
a port where nothing listens, so it needs no broker.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from typing import Any, Iterator

import pytest
from endpoints import IdRecorder
from waits import time_between_batches, wait_until

import notify_transport as nt

pytestmark = pytest.mark.functional

CLI = [sys.executable, "-m", "notify_transport.cli.main"]


def vhost() -> str:
    return f"v{uuid.uuid4().hex[:8]}"


def run_cli(*argv: Any, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_TRANSPORT_URL"}
    return subprocess.run(CLI + [str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


@pytest.fixture
def notifier(kafka_conf) -> Iterator[Any]:
    """``notifier(url, topic)`` -> a messagingv2 Notifier; transports cleaned up after the test."""
    made: list[Any] = []

    def make(url: str, topic: str) -> Any:
        transport = nt.get_notification_transport(kafka_conf, url)
        made.append(transport)
        return nt.Notifier(transport, publisher_id="compute.h1", driver="messagingv2", topics=[topic])

    yield make
    for transport in made:
        transport.cleanup()


def send(notifier: Any, seqs: range, priority: str = "info") -> None:
    for seq in seqs:
        getattr(notifier, priority)({}, "test.event", {"seq": seq})
    assert notifier.flush(10) == 0


# -- tail -------------------------------------------------------------------------------------------

class Lines:
    """The lines a process writes on one stream, read by a thread (so a test can wait on them)."""

    def __init__(self, stream: Any) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.queue.put(line.rstrip("\n"))

    def all(self, quiet: float = 0.5) -> list[str]:
        """Every line so far, once the stream stayed quiet for ``quiet`` seconds."""
        while True:
            try:
                self.seen.append(self.queue.get(timeout=quiet))
            except queue.Empty:
                return list(self.seen)

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.queue.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"{text!r} not seen within {timeout}s; seen: {self.seen}")


def test_tail_follows_a_topic_created_after_it_started(broker, unique_topic, notifier) -> None:
    topic, vh = unique_topic("newtopic"), vhost()
    url = broker.url(vh)
    send(notifier(url, topic), range(1))  # the info topic exists, the error one does not yet
    proc = subprocess.Popen(CLI + ["tail", "--transport-url", url, "--topic", topic, "--priority", "info,error",
                                   "--max", "2", "--timeout", "90", "--refresh", "0.5",
                                   "--line-format", "{priority} {payload}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        err = Lines(proc.stderr)
        out = Lines(proc.stdout)
        started = err.wait_for("following 1 partition(s)")
        assert f"{topic}.error.{vh}" in started and "followed from their beginning once created" in started
        # the topic is created after the tail started following without it
        send(notifier(url, topic), range(1, 2), priority="error")  # creates the error topic now
        assert out.wait_for('ERROR {"seq":1}') == 'ERROR {"seq":1}'
        err.wait_for(f"following 1 new partition(s) of {topic}.error.{vh}")
        send(notifier(url, topic), range(2, 3))
        assert out.wait_for('INFO {"seq":2}')
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_tail_start_positions_and_exit_at_end(broker, unique_topic, notifier) -> None:
    topic, vh = unique_topic("from"), vhost()
    url = broker.url(vh)
    sender = notifier(url, topic)
    send(sender, range(5))
    middle = time_between_batches()  # broker timestamps are milliseconds
    send(sender, range(5, 8))
    common = ["tail", "--transport-url", url, "--topic", topic, "--priority", "info", "-e",
              "--line-format", "{offset}"]
    for start, offsets in (("earliest", list(range(8))), ("-3", [5, 6, 7]), ("6", [6, 7]),
                           (time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(middle))
                            + f".{int(middle * 1000) % 1000:03d}Z", [5, 6, 7]),
                           ("latest", [])):
        done = run_cli(*common, "--from", start)
        assert done.returncode == 0, done.stderr
        assert [int(line) for line in done.stdout.split()] == offsets, (start, done.stdout)
    # -N before the option value, as an operator types it, and a relative time
    done = run_cli(*common, "--from", "-1h")
    assert done.returncode == 0 and len(done.stdout.split()) == 8


# -- global options and one-line errors --------------------------------------------------------------

def test_global_options_before_and_after_the_command(broker, unique_topic, notifier, tmp_path) -> None:
    topic, vh = unique_topic("globals"), vhost()
    url = broker.url(vh)
    send(notifier(url, topic), range(3))
    conf = tmp_path / "service.conf"
    conf.write_text(f"[oslo_messaging_notifications]\ntransport_url = {url}\ntopics = {topic}\n")
    confdir = tmp_path / "conf.d"
    confdir.mkdir()
    (confdir / "topic.conf").write_text(f"[oslo_messaging_notifications]\ntopics = {topic}\n")
    for argv in (["--config-file", conf, "topics", "--vhost", vh, "-f", "value"],
                 ["topics", "--vhost", vh, "-f", "value", "--config-file", conf],
                 ["--transport-url", url, "--config-dir", confdir, "topics", "--vhost", vh, "-f", "value"],
                 ["topics", "--vhost", vh, "-f", "value", "--config-dir", confdir, "--transport-url", url]):
        done = run_cli(*argv)
        assert done.returncode == 0, (argv, done.stderr)
        assert done.stdout.split() == [vh, topic, "info", "notification", "-", f"{topic}.info.{vh}", "1", "3"]
    version = run_cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("notify-transport ")


def test_user_errors_are_one_line_and_an_exit_code(broker, tmp_path) -> None:
    missing = run_cli("--config-file", tmp_path / "nope.conf", "lag")
    assert missing.returncode == 2
    assert error_lines(missing.stderr) == [f"notify-transport: error: config file {tmp_path / 'nope.conf'}: "
                                           "no such file; try: check the path and its permissions"]
    unknown = run_cli("lag", "--transport-url", broker.url(vhost()), "--pool", "nosuch", "--topic", "nothing")
    assert unknown.returncode == 1 and len(error_lines(unknown.stderr)) == 1
    unreachable = run_cli("lag", "--transport-url", "kafka://127.0.0.1:1", "--connect-timeout", "2")
    assert unreachable.returncode == 3
    assert len(error_lines(unreachable.stderr)) == 1 and "Cannot reach the Kafka cluster" in unreachable.stderr
    scheme = run_cli("topics", "--transport-url", "nosuch://h:1")
    assert scheme.returncode == 2 and len(error_lines(scheme.stderr)) == 1


def test_a_command_whose_extra_is_missing_says_how_to_install_it() -> None:
    import importlib.util

    if importlib.util.find_spec("pyspark") is not None:
        pytest.skip("the spark extra is installed here")
    listing = run_cli("--help")
    assert listing.returncode == 0 and "pipeline" in listing.stdout and "Traceback" not in listing.stderr
    done = run_cli("pipeline", "run", "--output", "out", "--transport-url", "kafka://127.0.0.1:1")
    assert done.returncode == 2
    assert error_lines(done.stderr) == ["notify-transport: error: 'pipeline run' needs the 'spark' extra "
                                        "(pyspark, matplotlib not installed); try: pip install "
                                        "'notify-transport[spark]'"]


def test_send_timeout_bounds_an_unreachable_rabbit() -> None:
    done = run_cli("send", "--transport-url", "rabbit://guest:guest@127.0.0.1:1/", "--timeout", "3",
                   "--event-type", "x")
    assert done.returncode == 3  # broker unreachable, as for Kafka
    lines = error_lines(done.stderr)
    assert len(lines) == 1, done.stderr  # not a pika ERROR line per attempt
    # the wait was --timeout's 3 s (below --connect-timeout's 10 s), and the line says why
    assert "Cannot reach RabbitMQ at 127.0.0.1:1 within 3s" in lines[0] and "Connection refused" in lines[0]
    assert "guest:guest" not in done.stderr  # the password never reaches the line


# -- retry and dead-letter topics ---------------------------------------------------------------------

def test_retry_and_dead_letter_topics_are_labelled(broker, unique_topic, notifier, kafka_conf) -> None:
    topic, vh = unique_topic("dlq"), vhost()
    url = broker.url(vh)
    send(notifier(url, topic), range(2))
    transport = nt.get_notification_transport(kafka_conf, broker.url(vh, auto_offset_reset="earliest"))
    # requeues every notification: they go to the retry topic, then to the dead-letter topic
    endpoint = IdRecorder(result=lambda payload: nt.NotificationResult.REQUEUE)
    server = nt.get_notification_listener(transport, [nt.Target(topic=topic)], [endpoint], pool="billing",
                                          allow_requeue=True, delivery_mode="at_least_once", max_attempts=2,
                                          retry_delay=0.1)
    server.start()
    try:
        assert wait_until(lambda: len(endpoint.ids) >= 4, timeout=60)  # each notification twice: then dead-lettered
        # the dead letters are confirmed once the broker has them: wait until they are counted
        listing: dict = {}

        def dead_letters_counted() -> bool:
            done = run_cli("topics", "--transport-url", url, "--vhost", vh, "-f", "json")
            assert done.returncode == 0, done.stderr
            listing.update({t["KAFKA TOPIC"]: {k.lower(): v for k, v in t.items()} for t in json.loads(done.stdout)})
            return listing.get(f"{topic}.info.{vh}.dlq", {}).get("messages") == 2
        wait_until(dead_letters_counted, 30, interval=0.5)
        assert listing[f"{topic}.info.{vh}"]["kind"] == "notification"
        retry = listing[f"{topic}.info.{vh}.retry.billing"]
        assert (retry["kind"], retry["pool"], retry["topic"], retry["vhost"]) == ("retry", "billing", topic, vh)
        dead = listing[f"{topic}.info.{vh}.dlq"]
        assert (dead["kind"], dead["topic"], dead["vhost"], dead["messages"]) == ("dead-letter", topic, vh, 2)
        done = run_cli("topics", "--transport-url", url, "--vhost", vh, "-f", "csv", "-c", "VHOST", "-c", "KIND")
        assert done.stdout.splitlines() == ['"VHOST","KIND"', f'"{vh}","notification"', f'"{vh}","retry"',
                                            f'"{vh}","dead-letter"']  # no vhost "retry.billing" nor "dlq"

        done = run_cli("lag", "--transport-url", url, "--topic", topic, "--priority", "info", "--pool", "billing",
                       "--describe", "-f", "value")
        assert done.returncode == 0, done.stderr
        kinds = {row.split()[1]: row.split()[2] for row in done.stdout.splitlines()}
        assert kinds == {f"{topic}.info.{vh}": "notification", f"{topic}.info.{vh}.retry.billing": "retry",
                         f"{topic}.info.{vh}.dlq": "dead-letter"}
    finally:
        server.stop()
        server.wait()
        transport.cleanup()



# -- a broker outage while tailing -------------------------------------------------------------------

@pytest.fixture
def own_noida(tmp_path) -> Iterator[Any]:
    from notify_transport.testing.brokers import NoidaBroker

    broker = NoidaBroker(data_dir=tmp_path / "data")
    broker.start()
    yield broker
    broker.close()


def test_tail_logs_an_outage_once_and_the_recovery_once(own_noida, unique_topic, notifier) -> None:
    topic = unique_topic("outage")
    url = own_noida.url()
    send(notifier(url, topic), range(1))
    proc = subprocess.Popen(CLI + ["tail", "--transport-url", url, "--topic", topic, "--priority", "info",
                                   "--from", "earliest", "--max", "2", "--timeout", "120", "--refresh", "0.5",
                                   "--line-format", "{payload}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        err, out = Lines(proc.stderr), Lines(proc.stdout)
        out.wait_for('{"seq":0}')
        own_noida.stop()
        err.wait_for("lost the connection to the Kafka brokers", timeout=60)
        time.sleep(5.0)  # the outage under test: librdkafka retries many times meanwhile
        own_noida.start()
        err.wait_for("answer again", timeout=60)
        send(notifier(url, topic), range(1, 2))
        out.wait_for('{"seq":1}')
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = err.all()
    outage = [line for line in lines if "lost the connection" in line or "answer again" in line]
    assert len(outage) == 2, "\n".join(lines)  # one per change of state
    assert not [line for line in lines if "ERROR" in line or "FAIL" in line], lines
