"""A process that sends and exits without cleanup() delivers what it sent.

Each case runs exit_sender.py in a child process, through notify_transport on
``kafka://`` and through oslo.messaging's public API on ``ntkafka://``,
threaded and eventlet-monkey-patched, then reads the topic
back. Before the
exit flush, every child exited at once and delivered none of its 20
notifications. Against a broker that does not answer, the child gives up after
``exit_flush_timeout`` (a hang would fail on the run timeout; the messages'
own ``delivery_timeout`` is far longer) and says on stderr how many it lost.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kafka_fixtures import SESSION_PREFIX
from notify_transport.testing.brokers import free_port
from notify_transport.reading import read_topic

pytestmark = pytest.mark.functional

SENDER = Path(__file__).with_name("exit_sender.py")
COUNT = 20
#: A hang guard, not a timing check: a child that does not exit by then failed.
RUN_TIMEOUT = 120.0
#: Far beyond RUN_TIMEOUT: a child that waited for its messages' own timeout would hang the test.
LONG_DELIVERY_TIMEOUT = 600
#: Every API in both modes. ("nt", "eventlet") hung at its first send before notify_transport's
#: own API ran the Kafka driver on native threads under monkey-patching (its delivery-report
#: thread was a green thread looping on a blocking librdkafka poll): it fails on RUN_TIMEOUT.
CASES = [("nt", "threaded"), ("nt", "eventlet"), ("oslo", "threaded"), ("oslo", "eventlet")]
#: One case per API that runs monkey-patched, plus the plain threaded one.
PATCHED_AND_NOT = [("nt", "threaded"), ("nt", "eventlet"), ("oslo", "eventlet")]
SCHEME = {"nt": "kafka", "oslo": "ntkafka"}
#: What notify-transport says about notifications lost at exit (its own words, from exit_flush).
LOST = "were not confirmed by the broker within"


def run_sender(api: str, mode: str, url: str, topic: str, *flags: str) -> subprocess.CompletedProcess:
    """Run the child to its end (killed after RUN_TIMEOUT: a hang fails with what it printed)."""
    if mode == "eventlet":
        pytest.importorskip("eventlet")
    if api == "oslo":
        pytest.importorskip("oslo_messaging")
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    child = subprocess.Popen([sys.executable, str(SENDER), api, mode, url, topic, str(COUNT), *flags],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             cwd=SENDER.parent)
    try:
        out, err = child.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        pytest.fail(f"the sender did not exit within {RUN_TIMEOUT}s\nstdout:\n{out}\nstderr:\n{err}")
    assert child.returncode == 0 and "sent" in out, f"exit {child.returncode}\n{out}\n{err}"
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def received_seqs(driver, topic: str) -> list[int]:
    reader = read_topic(driver, f"{topic}.info", "earliest", until_end=True)
    try:
        return sorted(json.loads(json.loads(r.value)["oslo.message"])["payload"]["seq"] for r in reader)
    finally:
        reader.close()


@pytest.fixture
def topic(broker, kafka_driver, unique_topic) -> str:
    """A fresh topic, created up front so that reading it back never fails for lack of it."""
    name = unique_topic("exit")
    kafka_driver(broker.url())._admin.ensure_topics([f"{name}.info"])
    return name


def assert_clean_exit(result: subprocess.CompletedProcess) -> None:
    for trouble in ("Traceback", "Logging error", "Exception ignored"):
        assert trouble not in result.stderr, result.stderr


@pytest.mark.parametrize("api,mode", CASES, ids=[f"{a}-{m}" for a, m in CASES])
def test_a_process_that_exits_without_cleanup_delivers_everything(api, mode, broker, topic, kafka_driver):
    result = run_sender(api, mode, f"{SCHEME[api]}://{broker.bootstrap}", topic)
    assert received_seqs(kafka_driver(broker.url()), topic) == list(range(COUNT)), result.stderr
    assert "not confirmed" not in result.stderr, result.stderr
    assert_clean_exit(result)


@pytest.mark.parametrize("api,mode", PATCHED_AND_NOT, ids=[f"{a}-{m}" for a, m in PATCHED_AND_NOT])
def test_a_transport_collected_without_cleanup_still_delivers(api, mode, broker, topic, kafka_driver):
    result = run_sender(api, mode, f"{SCHEME[api]}://{broker.bootstrap}", topic, "--gc")
    assert received_seqs(kafka_driver(broker.url()), topic) == list(range(COUNT)), result.stderr
    assert_clean_exit(result)


@pytest.mark.parametrize("api,mode", PATCHED_AND_NOT, ids=[f"{a}-{m}" for a, m in PATCHED_AND_NOT])
def test_a_cleanup_after_the_exit_flush_is_harmless(api, mode, broker, topic, kafka_driver):
    result = run_sender(api, mode, f"{SCHEME[api]}://{broker.bootstrap}", topic, "--cleanup-at-exit")
    assert received_seqs(kafka_driver(broker.url()), topic) == list(range(COUNT)), result.stderr
    assert_clean_exit(result)


@pytest.mark.parametrize("api,mode", CASES, ids=[f"{a}-{m}" for a, m in CASES])
def test_an_unreachable_broker_costs_the_bound_and_is_reported(api, mode):
    """Nothing answers: the child waits exit_flush_timeout, not the messages' delivery timeout,
    and stderr names how many notifications were lost (the oslo child logs with level names)."""
    bootstrap = f"127.0.0.1:{free_port()}"
    url = f"{SCHEME[api]}://{bootstrap}?exit_flush_timeout=1&delivery_timeout={LONG_DELIVERY_TIMEOUT}"
    result = run_sender(api, mode, url, f"{SESSION_PREFIX}-gone-{uuid.uuid4().hex[:6]}")
    lost = [line for line in result.stderr.splitlines() if LOST in line]
    assert len(lost) == 1, result.stderr
    assert f"At exit, {COUNT} notification(s) for kafka://{bootstrap}" in lost[0], result.stderr
    assert "exit_flush_timeout" in lost[0], result.stderr
    if api == "oslo":
        assert "WARNING" in lost[0], result.stderr
    assert_clean_exit(result)


@pytest.mark.parametrize("mode", ["threaded", "eventlet"])
@pytest.mark.parametrize("flags", [(), ("--gc",)], ids=["alive", "collected"])
def test_a_process_that_exits_without_cleanup_delivers_everything_on_rabbitmq(flags, mode, rabbit, rabbit_admin,
                                                                               unique):
    from rabbit_fixtures import rabbit_url

    topic = unique("exit")
    result = run_sender("nt", mode, rabbit_url(), topic, *flags)
    assert rabbit_admin.queue_info(f"{topic}.info")[0] == COUNT, result.stderr
    assert_clean_exit(result)
