"""The broker is SIGKILLed and restarted (issues 11 and 19): no notification lost, no caller blocked.

A broker of the test's own (Apache Kafka and noida-db, data kept on disk;
Tansu, memory only)
is killed without warning while notifications flow, and started again on the
same port a few seconds later. A crash may cost writes the broker
acknowledged but had not stored yet; with the idempotent producer the next
writes then get OUT_OF_ORDER_SEQUENCE_NUMBER (noida-db) or
UNKNOWN_PRODUCER_ID (Tansu, which forgets every producer), a fatal error: the
producer is replaced and every message it held is sent again on the new
client (a resend may duplicate; the message id lets a consumer drop the
copy), not failed.

* notifier: every notification sent from 10 s after the broker answers again
  is delivered, and every one sent meanwhile is in the topic or counted as
  failed (``delivery_stats()``), nothing pending at the end;
* storm: 8 threads sharing one transport at 400 msg/s across
  three 3 s restarts, on noida-db and Tansu: at most 1% of sends fail,
  no ``Notifier.info()`` call blocks longer than 10 s (a product guarantee),
  ``delivered + failed + pending == sent``, and every notification not
  reported failed is in the topic (except what the broker itself lost);
* listener (both delivery modes): every notification already in the topic
  before the crash is dispatched, duplicates are counted and stay below what
  one poll and the in-flight limit hold.
"""
from __future__ import annotations

import collections
import json
import logging
import os
import sys
import threading
import time
import uuid

import pytest

import notify_transport
from notify_transport import Notifier, Target
from notify_transport.drivers.kafka.delivery.hooks import ListenerHooks
from notify_transport.exceptions import MessageDeliveryFailure
from notify_transport.reading import read_topic

pytestmark = [pytest.mark.functional, pytest.mark.slow]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.kafka_restart_storm import in_crash_window, run_storm  # noqa: E402  (the benchmark row runs the same storm)
from bench.kafka_restart_storm import read_ids as read_storm_ids  # noqa: E402

RATE = 200          # notifications per second
BEFORE = 2.0        # seconds of sending before the crash
DOWN = 5.0          # seconds the broker stays down
AFTER = 15.0        # seconds of sending after it answers again
RESUME_WITHIN = 10.0
IN_FLIGHT = 200     # at-least-once max_in_flight


def read_ids(driver, topic: str) -> list[int]:
    reader = read_topic(driver, topic, "earliest", until_end=True)
    try:
        return [json.loads(json.loads(r.value)["oslo.message"])["payload"]["i"] for r in reader]
    finally:
        reader.close()


def test_notifier_resumes_after_a_broker_crash(own_kafka, kafka_conf, unique_topic, caplog):
    caplog.set_level(logging.WARNING, "notify_transport")
    topic = unique_topic("kill")
    transport = notify_transport.get_notification_transport(
        kafka_conf, own_kafka.url(delivery_timeout=8.0))
    driver = transport.driver
    assert driver.opts.enable_idempotence and driver.opts.producer_acks == "all"
    driver._admin.ensure_topics([f"{topic}.info"])
    notifier = Notifier(transport, driver="messagingv2", topics=[topic], publisher_id="killer")
    sent_at: list[float] = []
    raised: list[int] = []
    stop = threading.Event()

    def send() -> None:
        i = 0
        while not stop.is_set():
            sent_at.append(time.monotonic())
            try:
                notifier.info({}, "e", {"i": i})
            except MessageDeliveryFailure:
                raised.append(i)  # counted in delivery_stats() as failed too
            i += 1
            time.sleep(1.0 / RATE)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        time.sleep(BEFORE)
        own_kafka.kill()
        killed_at = time.monotonic()
        time.sleep(DOWN)
        own_kafka.start()  # returns once the broker answers metadata requests
        answered_at = time.monotonic()
        time.sleep(AFTER)
    finally:
        stop.set()
        sender.join(30)
    assert not sender.is_alive()
    assert transport.flush(30) == 0
    stats = transport.delivery_stats()
    total = len(sent_at)
    assert stats["sent"] == total and stats["pending"] == 0
    assert stats["delivered"] + stats["failed"] == total

    ids = read_ids(driver, f"{topic}.info")
    counts = collections.Counter(ids)
    missing = sorted(set(range(total)) - set(counts))
    duplicated = sum(n - 1 for n in counts.values() if n > 1)
    resume_from = next(i for i, t in enumerate(sent_at) if t >= answered_at + RESUME_WITHIN)
    late_missing = [i for i in missing if i >= resume_from]
    first_ok_after = next((i for i in sorted(counts) if sent_at[i] >= answered_at), None)
    resumed_after = sent_at[first_ok_after] - answered_at if first_ok_after is not None else -1.0
    print(f"\nbroker killed after {BEFORE}s, down {answered_at - killed_at:.1f}s; sent {total}: "
          f"delivered {stats['delivered']}, failed {stats['failed']} (raised {len(raised)}), "
          f"missing from the topic {len(missing)}, duplicated {duplicated}; first delivered "
          f"notification sent {resumed_after:.2f}s after the broker answered (-1: none)")
    before = [i for i in missing if sent_at[i] < killed_at]
    print(f"missing sent before the kill: {len(before)} ({before[:3]}..{before[-3:]}), during the "
          f"outage: {len([i for i in missing if killed_at <= sent_at[i] < answered_at])}, after: "
          f"{len([i for i in missing if sent_at[i] >= answered_at])}; last sent before the kill: "
          f"{max(i for i, t in enumerate(sent_at) if t < killed_at)}")
    assert late_missing == [], late_missing[:20]  # sending resumed within RESUME_WITHIN
    # every notification sent since the crash that is not in the topic was reported as failed
    since_crash = [i for i in missing if sent_at[i] >= killed_at]
    assert len(since_crash) <= stats["failed"], (len(since_crash), stats)
    # the others are writes the broker acknowledged just before it was killed and had not
    # stored (noida-db keeps data across a clean stop, not necessarily across SIGKILL): no
    # client can see that loss; it is confined to the moment of the crash
    assert all(sent_at[i] >= killed_at - 1.0 for i in before), before[:20]
    if stats["failed"]:
        assert [r for r in caplog.records if r.levelno >= logging.ERROR and "failed" in r.getMessage()]
    transport.cleanup()


#: Longest a Notifier.info() call may block, broker down or not: a product guarantee.
LONGEST_CALL = 10.0


@pytest.mark.parametrize("broker_name", ["own_apache_kafka", "own_noida", "own_tansu"])
def test_broker_restart_storm_costs_no_notification(request, broker_name, kafka_conf, unique_topic):
    broker = request.getfixturevalue(broker_name)
    # Apache Kafka has written what it acknowledged: nothing sent before a kill is exempt
    result = run_storm(broker, kafka_conf, unique_topic("storm"), threads=8, rate=400.0, cycles=3,
                       down=3.0, keeps_data=broker_name != "own_tansu",
                       crash_window=broker_name != "own_apache_kafka")
    print("\n" + result.summary())
    assert result.sent == result.delivered + result.failed + result.pending
    assert result.pending == 0
    assert result.failed <= 0.01 * result.sent, result.summary()
    assert result.longest_call <= LONGEST_CALL, result.summary()
    # nothing lost silently: each notification that must be in the topic is there or failed
    assert result.missing <= result.failed, (result.missing_sample, result.summary())
    assert result.checked > 0


@pytest.mark.parametrize("broker_name", ["own_apache_kafka", "own_noida", "own_tansu"])
def test_retry_and_dead_letter_copies_survive_broker_restarts(request, broker_name, kafka_conf,
                                                              unique_topic):
    """The listeners' copy producer across three 3 s restarts: each copy is confirmed or
    reported failed exactly once (at most 1% failed), and each confirmed copy is in the topic."""
    from notify_transport.drivers.kafka import client_properties
    from notify_transport.drivers.kafka.delivery.deadletter import SideProducer

    broker = request.getfixturevalue(broker_name)
    keeps_data = broker_name != "own_tansu"
    transport = notify_transport.get_notification_transport(kafka_conf, broker.url())
    driver = transport.driver
    topic = unique_topic("copies")
    driver._admin.ensure_topics([topic])
    side = SideProducer(client_properties.producer_config(driver.url, driver.opts), "storm")
    outcomes: dict[int, object] = {}
    sent_at: dict[int, float] = {}
    stop = threading.Event()
    rate = 400.0

    def send() -> None:  # the listener's polling thread sends copies and serves their reports
        i, next_at = 0, time.monotonic()
        while not stop.is_set():
            sent_at[i] = time.monotonic()
            side.send(topic, json.dumps({"i": i}).encode(), b"k", [("nt-attempts", b"1")],
                      lambda err, i=i: outcomes.__setitem__(i, err))
            side.serve()
            i, next_at = i + 1, next_at + 1.0 / rate
            stop.wait(max(0.0, next_at - time.monotonic()))

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    kills: list[float] = []
    try:
        stop.wait(2.0)
        for _ in range(3):
            broker.kill()
            kills.append(time.monotonic())
            stop.wait(3.0)
            broker.start()
            if not keeps_data:
                driver._admin.ensure_topics([topic])
            stop.wait(4.0)
    finally:
        stop.set()
        sender.join(30)
    assert not sender.is_alive()
    assert side.flush(60) == 0
    assert sorted(outcomes) == sorted(sent_at)  # every copy settled once
    failed = [i for i, err in outcomes.items() if err is not None]
    confirmed = {i for i, err in outcomes.items() if err is None
                 and (keeps_data or sent_at[i] >= kills[-1])}
    seen = set(read_storm_ids(driver, topic, confirmed, decode=lambda v: json.loads(v)["i"]))
    strict = broker_name == "own_apache_kafka"  # it keeps every write it acknowledged
    missing = sorted(i for i in confirmed - seen if strict or not in_crash_window(sent_at[i], kills))
    print(f"\n{broker_name}: copies sent {len(sent_at)}, failed {len(failed)}, confirmed and "
          f"checked {len(confirmed)}, missing {len(missing)}, lost by the broker at a crash "
          f"{len(confirmed - seen) - len(missing)}")
    assert len(failed) <= 0.01 * len(sent_at), len(failed)
    assert missing == [], missing[:20]
    side.close(0)
    transport.cleanup()


@pytest.mark.parametrize("mode", ["commit_before_dispatch", "at_least_once"])
def test_listener_loses_nothing_across_a_broker_crash(own_kafka, kafka_conf, unique_topic, mode):
    count = 3000
    topic = unique_topic(f"kill-{mode[:3]}")
    transport = notify_transport.get_notification_transport(kafka_conf, own_kafka.url())
    notifier = Notifier(transport, driver="messagingv2", topics=[topic], publisher_id="p")
    transport.driver._admin.ensure_topics([f"{topic}.info"])
    for i in range(count):
        notifier.info({}, "e", {"i": i})
    assert transport.flush(30) == 0
    time.sleep(1.0)  # let the broker store what it acknowledged before it is killed
    assert len(read_ids(transport.driver, f"{topic}.info")) == count

    seen: list[int] = []
    lock = threading.Lock()
    third = threading.Event()

    class Endpoint:
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            with lock:
                seen.append(payload["i"])
                if len(seen) >= count // 3:
                    third.set()
            time.sleep(0.002)  # slow enough that the crash hits mid-stream

    assigned_at: list[int] = []  # dispatches done when the listener (re)got its partitions

    def on_assign(partitions):
        with lock:
            assigned_at.append(len(seen))

    options = {"delivery_mode": mode, "start_position": "earliest",
               "hooks": ListenerHooks(on_assign=on_assign)}
    if mode == "at_least_once":
        options.update(commit_interval=0.2, max_in_flight=IN_FLIGHT)
    server = notify_transport.get_notification_listener(
        transport, [Target(topic=topic)], [Endpoint()], pool=f"kill-{uuid.uuid4().hex[:6]}",
        **options)
    server.start()
    try:
        assert third.wait(60)
        own_kafka.kill()
        time.sleep(3.0)
        own_kafka.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(set(seen)) < count:
            time.sleep(0.1)
        time.sleep(2.0)  # anything delivered twice shows up now
        metrics = server.metrics()
        assert server._thread is not None and server._thread.is_alive()
    finally:
        server.stop(timeout=15)
        transport.cleanup()
    counts = collections.Counter(seen)
    missing = sorted(set(range(count)) - set(counts))
    duplicated = sum(n - 1 for n in counts.values() if n > 1)
    print(f"\n{mode}: {count} notifications, broker killed after {count // 3} dispatches: "
          f"missing {len(missing)}, duplicated {duplicated}; dispatched when (re)assigned "
          f"{assigned_at}; listener metrics {metrics}")
    assert missing == []
    # Only what was dispatched before the listener got its partitions back from the restarted
    # broker can come again (its commits may be lost with the crash: noida-db kept none made in
    # the last moments here), plus what one fetch and the in-flight limit hold. Apache Kafka
    # keeps the group across a 3 s restart (the member's session has not ended): no new
    # assignment, and only what one fetch and the in-flight limit hold may come again.
    bound = assigned_at[-1] + transport.driver.opts.max_poll_records + IN_FLIGHT
    assert duplicated <= bound, (duplicated, assigned_at)
