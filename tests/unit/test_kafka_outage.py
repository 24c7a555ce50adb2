"""The end of an outage is said: one line when a client that lost all its brokers reaches one again
(librdkafka has an error for the way down and nothing for the way back)."""
from __future__ import annotations

import json
import logging

import pytest
from confluent_kafka import KafkaError
from waits import Clock, wait_until

from notify_transport.drivers.kafka import outage, producer as producer_module
from notify_transport.drivers.kafka.outage import BrokersBack, ClientWarnings, parse_stats

#: librdkafka's statistics, cut to what is read: each broker's connection state
DOWN = {"brokers": {"127.0.0.1:9092/bootstrap": {"state": "CONNECT", "nodeid": -1},
                    "127.0.0.1:9092/1": {"state": "DOWN", "nodeid": 1}}}
UP = {"brokers": {"127.0.0.1:9092/bootstrap": {"state": "INIT", "nodeid": -1},
                  "127.0.0.1:9092/1": {"state": "UP", "nodeid": 1}}}


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.endswith("kafka.outage")]


def test_a_broker_up_after_all_were_down_is_one_line_with_the_outage_length(caplog) -> None:
    clock = Clock(100.0)
    watch = BrokersBack("Kafka producer for kafka://h/", clock=clock)
    with caplog.at_level(logging.INFO, logger="notify_transport.drivers.kafka.outage"):
        watch.on_stats(UP)  # no outage: nothing to say
        watch.on_error(KafkaError(KafkaError._TRANSPORT))  # one broker's connection: not all down
        watch.on_stats(UP)
        assert _lines(caplog) == []
        watch.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN))
        clock.now = 130.0
        watch.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN))  # repeats keep the first time
        watch.on_stats_json(json.dumps(DOWN))
        assert _lines(caplog) == []
        clock.now = 223.4
        watch.on_stats_json(json.dumps(UP))
        watch.on_stats_json(json.dumps(UP))  # said once
    assert _lines(caplog) == ["Kafka producer for kafka://h/: connected to a broker again, "
                              "123s after all brokers went down"]
    assert watch.down_since is None


def test_statistics_that_do_not_parse_change_nothing() -> None:
    watch = BrokersBack("x")
    watch.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN))
    for text in ("", "not json", "[]", '{"brokers": []}', '{"brokers": {"b": "UP"}}'):
        watch.on_stats_json(text)
    assert watch.down_since is not None
    assert parse_stats("[1]") == {} and parse_stats("{") == {}


def test_a_producer_says_when_its_broker_is_back_without_idempotence_too(monkeypatch, caplog) -> None:
    # before: statistics (and so any way to see the way back) only with enable.idempotence on
    from kafka_fake_producer import FakeClient, install, send

    from notify_transport.drivers.kafka.producer import NotificationProducer

    clients = install(monkeypatch, FakeClient)
    producer = NotificationProducer({"bootstrap.servers": "x", "enable.idempotence": False}, 1.0, 0.2,
                                    "kafka://x")
    send(producer, "t.info", b"v")
    config = clients[0].config
    with caplog.at_level(logging.INFO, logger="notify_transport.drivers.kafka.outage"):
        config["error_cb"](KafkaError(KafkaError._ALL_BROKERS_DOWN))
        config["stats_cb"](json.dumps(DOWN))
        assert _lines(caplog) == []
        config["stats_cb"](json.dumps(UP))
    producer.close()
    (line,) = _lines(caplog)
    assert line.startswith("Kafka producer for kafka://x: connected to a broker again, ")


@pytest.mark.parametrize("code", [KafkaError._ALL_BROKERS_DOWN, KafkaError._AUTHENTICATION])
def test_a_producer_counts_the_warnings_it_left_out_once_their_interval_is_over(
        monkeypatch, caplog, code) -> None:
    # before: the backed-off warning's last interval was never counted in the log, and a
    # refused login (retried by librdkafka at each reconnect) was a line each time
    from kafka_fake_producer import FakeClient, install, send

    from notify_transport.drivers.kafka.producer import NotificationProducer

    clients = install(monkeypatch, FakeClient)
    producer = NotificationProducer({"bootstrap.servers": "x"}, 1.0, 0.2, "kafka://x")
    clock = Clock(0.0)
    producer.client._warnings = ClientWarnings("Kafka producer for kafka://x", producer_module.LOG, clock=clock)
    send(producer, "t.info", b"v")
    error_cb = clients[0].config["error_cb"]
    with caplog.at_level(logging.WARNING, logger=producer_module.LOG.name):
        for _ in range(5):  # an outage's errors within one interval: one line, four left out
            error_cb(KafkaError(code, "what librdkafka said"))
        clock.now = 1.5  # the broker is back: no more errors, the interval is over
        assert wait_until(lambda: len(caplog.records) == 2, timeout=5)
    lines = [r.getMessage() for r in caplog.records]
    clients[0].confirm(1)
    producer.close()
    assert lines == ["Kafka producer for kafka://x: what librdkafka said",
                     "4 more not logged one by one; the last: Kafka producer for kafka://x: "
                     "what librdkafka said"]


def test_a_producer_without_idempotence_reads_its_statistics_only_during_an_outage(monkeypatch) -> None:
    from kafka_fake_producer import FakeClient, install, send

    from notify_transport.drivers.kafka.producer import NotificationProducer

    parsed: list[str] = []
    def recorded(text: str) -> dict:
        parsed.append(text)
        return parse_stats(text)

    for module in (producer_module, outage):   # wherever the producer has them parsed
        monkeypatch.setattr(module, "parse_stats", recorded)
    clients = install(monkeypatch, FakeClient)
    producer = NotificationProducer({"bootstrap.servers": "x", "enable.idempotence": False}, 1.0, 0.2,
                                    "kafka://x")
    send(producer, "t.info", b"v")
    config = clients[0].config
    config["stats_cb"](json.dumps(UP))
    assert parsed == []
    config["error_cb"](KafkaError(KafkaError._ALL_BROKERS_DOWN))
    config["stats_cb"](json.dumps(DOWN))
    config["stats_cb"](json.dumps(UP))   # the end of the outage
    config["stats_cb"](json.dumps(UP))
    producer.close()
    assert parsed == [json.dumps(DOWN), json.dumps(UP)]
