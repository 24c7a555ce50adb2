"""Send-side failures: nothing is dropped silently, nothing hangs."""
from __future__ import annotations

import logging
import threading
import uuid

import pytest
from waits import wait_until

from notify_transport.exceptions import MessageDeliveryFailure
from notify_transport.target import Target
from notify_transport.testing.brokers import free_port, kafka_url

pytestmark = pytest.mark.functional

KAFKA_LOGGER = "notify_transport.drivers.kafka"


def notification(i: int = 0, size: int = 0) -> dict:
    return {"message_id": str(uuid.uuid4()), "publisher_id": "pub", "event_type": "e.x",
            "priority": "INFO", "payload": {"i": i, "pad": "x" * size}, "timestamp": "t"}


def send_in_thread(driver, target: Target, count: int, retry=None, timeout: float = 10.0):
    """Send ``count`` notifications from a thread; fail the test if that does not return."""
    errors: list[BaseException] = []

    def run():
        try:
            for i in range(count):
                driver.send_notification(target, {"secret_in_ctxt": "s3cr3t"}, notification(i), 2.0,
                                         retry=retry)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "send_notification blocked although the broker is down"
    return errors


def down_url(**query) -> str:
    """A broker address nobody listens on."""
    return kafka_url(f"127.0.0.1:{free_port()}", None, query)


def test_broker_down_send_is_bounded_and_failures_reported(kafka_driver, caplog):
    caplog.set_level(logging.ERROR, KAFKA_LOGGER)
    driver = kafka_driver(down_url(delivery_timeout=0.5))
    assert send_in_thread(driver, Target(topic="down.info"), 3) == []
    assert driver.flush(10) == 0  # bounded by delivery_timeout
    assert driver.delivery_stats() == {"sent": 3, "delivered": 0, "failed": 3, "pending": 0}
    lines = [r.getMessage() for r in caplog.records if "delivery" in r.getMessage()]
    assert lines and "Kafka topic down.info failed" in lines[0]
    assert "timed out" in lines[0].lower()
    assert not any("s3cr3t" in r.getMessage() or "pad" in r.getMessage() for r in caplog.records)


def test_failure_reported_while_the_service_sends_nothing_more(kafka_driver, caplog):
    """No flush, no further send: the failure is still logged and counted when it happens."""
    caplog.set_level(logging.ERROR, KAFKA_LOGGER)
    driver = kafka_driver(down_url(delivery_timeout=0.3))
    assert send_in_thread(driver, Target(topic="idle.info"), 1) == []
    wait_until(lambda: driver.delivery_stats()["failed"] > 0, 10)
    assert driver.delivery_stats() == {"sent": 1, "delivered": 0, "failed": 1, "pending": 0}
    assert any("idle.info" in r.getMessage() for r in caplog.records)


def test_retry_resends_a_failed_delivery_n_times(kafka_driver, caplog):
    caplog.set_level(logging.WARNING, KAFKA_LOGGER)
    driver = kafka_driver(down_url(delivery_timeout=0.3))
    assert send_in_thread(driver, Target(topic="retry.info"), 1, retry=2) == []
    assert driver.flush(10) == 0
    assert driver.delivery_stats() == {"sent": 1, "delivered": 0, "failed": 1, "pending": 0}
    again = [r.getMessage() for r in caplog.records if "sending again" in r.getMessage()]
    assert len(again) == 2
    assert "1 retries left" in again[0] and "0 retries left" in again[1]


@pytest.mark.parametrize("retry", [None, -1, 0])
def test_no_resend_without_positive_retry(kafka_driver, caplog, retry):
    caplog.set_level(logging.WARNING, KAFKA_LOGGER)
    driver = kafka_driver(down_url(delivery_timeout=0.3))
    assert send_in_thread(driver, Target(topic="noretry.info"), 1, retry=retry) == []
    assert driver.flush(10) == 0
    assert driver.delivery_stats()["failed"] == 1
    assert not any("sending again" in r.getMessage() for r in caplog.records)


def test_full_queue_blocks_for_a_bounded_time_then_raises(kafka_driver):
    driver = kafka_driver(down_url(delivery_timeout=30, producer_queue_timeout=0.3, flush_timeout=0.2,
                                   producer_config="queue.buffering.max.messages:5"))
    errors = send_in_thread(driver, Target(topic="full.info"), 6)
    assert len(errors) == 1 and isinstance(errors[0], MessageDeliveryFailure)
    assert "stayed full for 0.3s" in str(errors[0])
    stats = driver.delivery_stats()
    assert stats["sent"] == 6 and stats["failed"] == 1 and stats["pending"] == 5


def test_cleanup_flushes_for_a_bounded_time_and_reports_the_lost(kafka_driver, caplog):
    caplog.set_level(logging.ERROR, KAFKA_LOGGER)
    driver = kafka_driver(down_url(delivery_timeout=60, flush_timeout=0.3))
    assert send_in_thread(driver, Target(topic="lost.info"), 4) == []
    done = threading.Event()
    closer = threading.Thread(target=lambda: (driver.cleanup(), done.set()))
    closer.start()
    closer.join(10)
    assert done.is_set(), "cleanup() did not return"
    assert driver.delivery_stats() == {"sent": 4, "delivered": 0, "failed": 4, "pending": 0}
    messages = [r.getMessage() for r in caplog.records]
    assert any("4 notification(s)" in m and "are lost" in m for m in messages)


def test_message_too_large_is_refused_at_send(kafka_broker, kafka_driver):
    driver = kafka_driver(kafka_broker.url(producer_config="message.max.bytes:2000"))
    with pytest.raises(MessageDeliveryFailure, match="too large"):
        driver.send_notification(Target(topic="big.info"), {}, notification(size=5000), 2.0)
    driver.send_notification(Target(topic="big.info"), {}, notification(size=10), 2.0)
    assert driver.flush(10) == 0
    assert driver.delivery_stats() == {"sent": 2, "delivered": 1, "failed": 1, "pending": 0}


def test_unknown_topic_without_auto_creation_is_reported(kafka_broker, kafka_driver, unique_topic, caplog):
    caplog.set_level(logging.ERROR, KAFKA_LOGGER)
    driver = kafka_driver(kafka_broker.url(delivery_timeout=1,
                                    producer_config="allow.auto.create.topics:false"))
    topic = unique_topic("missing")
    driver.send_notification(Target(topic=f"{topic}.info"), {}, notification(), 2.0)
    assert driver.flush(10) == 0
    assert driver.delivery_stats()["failed"] == 1
    assert any(f"Kafka topic {topic}.info failed" in r.getMessage() for r in caplog.records)


def test_every_delivery_report_is_counted(kafka_driver, unique_topic, kafka_broker):
    """On a healthy broker every notification is confirmed and counted once."""
    driver = kafka_driver(kafka_broker.url())
    topic = unique_topic("ok")
    for i in range(200):
        driver.send_notification(Target(topic=f"{topic}.info"), {}, notification(i), 2.0)
    assert driver.flush(10) == 0
    assert driver.delivery_stats() == {"sent": 200, "delivered": 200, "failed": 0, "pending": 0}
