"""The broker restarted while a notifier sends (acks=all, idempotence): 0 lost, 0 duplicated,
and the outage's end said once in the log.

Apache Kafka and noida-db keep their data across a restart. The broker is one
of this test's own, so the session's main broker is not disturbed.

The notifier keeps sending while the broker is down and while it starts again;
librdkafka queues, reconnects and retries, and the idempotent producer
continues its sequence. The stop itself happens once the writes sent so far
were acknowledged: noida-db 0.2 can acknowledge a write (acks=all) that a stop
arriving at that moment then loses (seen here: the acked record is missing
after the restart and the broker answers the next batch with
OUT_OF_ORDER_SEQUENCE_NUMBER). No client can recover a write the broker
acknowledged and dropped, so the test does not stop the broker mid-write.
"""
from __future__ import annotations

import collections
import json
import logging
import re
import threading
import time

import pytest

import notify_transport
from notify_transport import Notifier
from notify_transport.reading import read_topic

pytestmark = [pytest.mark.functional, pytest.mark.slow]

COUNT = 3000


def test_restart_while_sending_loses_and_duplicates_nothing(own_kafka, kafka_conf, unique_topic,
                                                             caplog):
    caplog.set_level(logging.WARNING, "notify_transport")
    caplog.set_level(logging.INFO, "notify_transport.drivers.kafka.outage")
    topic = unique_topic("restart")
    url = own_kafka.url(topic_partitions=2)
    transport = notify_transport.get_notification_transport(kafka_conf, url)
    driver = transport.driver
    assert driver.opts.producer_acks == "all" and driver.opts.enable_idempotence
    driver._admin.ensure_topics([f"{topic}.info"])
    notifier = Notifier(transport, driver="messagingv2", topics=[topic])
    first_third_sent = threading.Event()
    broker_stopped = threading.Event()
    sent_while_down: list[int] = []
    errors: list[BaseException] = []

    def send() -> None:
        try:
            for i in range(COUNT):
                if i == COUNT // 3:
                    first_third_sent.set()
                    assert broker_stopped.wait(30)
                if broker_stopped.is_set() and not own_kafka.running:
                    sent_while_down.append(i)
                notifier.prepare(publisher_id=f"pub-{i % 5}").info({}, "e", {"i": i})
                time.sleep(0.001)  # a steady stream across the outage and the start
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    sender = threading.Thread(target=send)
    sender.start()
    assert first_third_sent.wait(30)
    assert transport.flush(10) == 0  # see the module docstring
    stopped_at = time.monotonic()
    own_kafka.stop()
    broker_stopped.set()
    time.sleep(1.0)  # the notifier goes on sending to a broker that is down
    own_kafka.start()
    down_for = time.monotonic() - stopped_at
    sender.join(120)
    assert not sender.is_alive() and errors == []
    assert transport.flush(60) == 0
    stats = transport.delivery_stats()
    assert stats == {"sent": COUNT, "delivered": COUNT, "failed": 0, "pending": 0}, stats
    assert len(sent_while_down) > 100  # sends really happened during the outage
    assert not [r for r in caplog.records if "fatal" in r.getMessage().lower()]
    # the end of the outage is said once, with its length (the producer's statistics come
    # once a second, so the line may follow the flush by that much)
    deadline = time.monotonic() + 10
    while not (said := _back_lines(caplog)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(said) == 1, said
    seconds = int(re.search(r"again, (\d+)s after", said[0]).group(1))
    assert seconds - 0.5 <= time.monotonic() - stopped_at, said   # said in whole seconds

    reader = read_topic(driver, f"{topic}.info", "earliest", until_end=True)
    try:
        ids = [json.loads(json.loads(r.value)["oslo.message"])["payload"]["i"] for r in reader]
    finally:
        reader.close()
    transport.cleanup()
    counts = collections.Counter(ids)
    lost = sorted(set(range(COUNT)) - set(counts))
    duplicated = sorted(i for i, n in counts.items() if n > 1)
    print(f"\nbroker down for {down_for:.1f}s, {len(sent_while_down)} sent meanwhile; "
          f"read back {len(ids)} of {COUNT}, lost {len(lost)}, duplicated {len(duplicated)}")
    assert lost == [] and duplicated == [] and len(ids) == COUNT


def _back_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The producer's lines saying it reached a broker again after all were down."""
    return [m for m in (r.getMessage() for r in caplog.records)
            if m.startswith("Kafka producer for") and "connected to a broker again" in m]
