"""Kafka topic naming, counters, commit offsets and the driver's broker-free behaviour."""
from __future__ import annotations

import threading

import pytest

from notify_transport.drivers.kafka.delivery.commit import next_offsets
from notify_transport.drivers.counter import Counter
from notify_transport.drivers.kafka.naming import SendTopics, kafka_topic
from notify_transport.exceptions import (ConfigurationError, InvalidTarget, InvalidTransportURL,
                                         NotSupported)
from notify_transport.target import Target
from notify_transport.url import TransportURL


@pytest.mark.parametrize("topic, priority, vhost, expected", [
    ("notifications", "info", None, "notifications.info"),
    ("notifications", "info", "", "notifications.info"),
    ("notifications", "info", "prod", "notifications.info.prod"),
    ("notifications.info", None, "prod", "notifications.info.prod"),
    ("notifications.info", None, None, "notifications.info"),
    ("a-b_c", "error", "v.1", "a-b_c.error.v.1"),
])
def test_topic_names(topic, priority, vhost, expected):
    assert kafka_topic(topic, priority, vhost) == expected


@pytest.mark.parametrize("topic, vhost", [("bad topic", None), ("t", "/"), ("t", "vh/x"),
                                          ("ü", None), ("x" * 250, None)])
def test_illegal_topic_names(topic, vhost):
    with pytest.raises(InvalidTarget):
        kafka_topic(topic, "info", vhost)


def test_send_topics_cache_is_consistent_with_listen_side():
    send = SendTopics("vh")
    for priority in ("audit", "debug", "info", "warn", "error", "critical", "sample"):
        assert send(f"notifications.{priority}") == kafka_topic("notifications", priority, "vh")
    assert SendTopics("")("n.info") == "n.info"


def test_counter_is_exact_under_threads():
    counter = Counter()
    assert counter.value == 0

    def work():
        for _ in range(20000):
            counter.incr()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    reads = [counter.value for _ in range(50)]  # reading while others increment
    for t in threads:
        t.join()
    assert counter.value == 80000
    assert counter.value == 80000
    assert reads == sorted(reads)


class FakeRecord:
    def __init__(self, topic, partition, offset):
        self._t, self._p, self._o = topic, partition, offset

    def topic(self):
        return self._t

    def partition(self):
        return self._p

    def offset(self):
        return self._o


def test_next_offsets_takes_the_highest_per_partition():
    records = [FakeRecord("a", 0, 5), FakeRecord("a", 1, 2), FakeRecord("a", 0, 7),
               FakeRecord("b", 0, 0), FakeRecord("a", 0, 6)]
    got = {(tp.topic, tp.partition): tp.offset for tp in next_offsets(records)}
    assert got == {("a", 0): 8, ("a", 1): 3, ("b", 0): 1}


# -- the driver, constructed without any broker --------------------------------

def make_driver(conf, url):
    from notify_transport.drivers.kafka.driver import KafkaDriver

    return KafkaDriver(conf, TransportURL.parse(conf, url))


def test_driver_opens_no_connection_until_used(conf):
    driver = make_driver(conf, "kafka://127.0.0.1:1/vh?delivery_timeout=1")
    assert driver.delivery_stats() == {"sent": 0, "delivered": 0, "failed": 0, "pending": 0}
    assert driver.flush(0) == 0
    driver.cleanup()


def test_driver_rpc_is_not_supported(conf):
    driver = make_driver(conf, "kafka://127.0.0.1:1")
    with pytest.raises(NotSupported, match="notifications only"):
        driver.send(Target(topic="t"), {}, {})
    with pytest.raises(NotSupported, match="notifications only"):
        driver.listen(Target(topic="t"))


def test_driver_listen_topics_include_the_vhost(conf):
    driver = make_driver(conf, "kafka://127.0.0.1:1/prod")
    pairs = [(Target(topic="n"), "info"), (Target(topic="n"), "error"), (Target(topic="n"), "info")]
    assert driver.kafka_topics(pairs) == ["n.info.prod", "n.error.prod"]


def test_driver_rejects_a_vhost_kafka_cannot_name(conf):
    with pytest.raises(InvalidTransportURL, match="Virtual host"):
        make_driver(conf, "kafka://127.0.0.1:1/a%20b")


def test_driver_rejects_bad_options_at_construction(conf):
    with pytest.raises(InvalidTransportURL, match="'nope'"):
        make_driver(conf, "kafka://127.0.0.1:1?nope=1")
    with pytest.raises(ConfigurationError, match="heartbeat_interval"):
        make_driver(conf, "kafka://127.0.0.1:1?session_timeout=1&heartbeat_interval=5")


def test_driver_rejects_unknown_listener_options(conf):
    driver = make_driver(conf, "kafka://127.0.0.1:1")
    with pytest.raises(ConfigurationError, match="frobnicate"):
        driver.listen_for_notifications([(Target(topic="n"), "info")], None, 1, None, frobnicate=1)


def test_loaded_through_the_entry_point(conf):
    from notify_transport import get_notification_transport
    from notify_transport.drivers.kafka.driver import KafkaDriver

    transport = get_notification_transport(conf, "kafka://127.0.0.1:1")
    assert isinstance(transport.driver, KafkaDriver)
    transport.cleanup()
