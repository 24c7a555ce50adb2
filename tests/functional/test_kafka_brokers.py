"""The broker launchers users import from notify_transport.testing."""
from __future__ import annotations

import os
import socket

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from notify_transport.testing import (BrokerStartError, NoidaBroker, TansuBroker, broker_answers,
                                      external_kafka)

pytestmark = pytest.mark.functional


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead too
        return stat.read().split()[2] != "Z"


def read_all(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-all",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    for _ in range(50):
        values += [m.value() for m in consumer.consume(10, 0.2) if m.error() is None]
        if len(values) >= 3:
            break
    consumer.close()
    return values


def test_noida_restart_keeps_data_and_address(tmp_path, unique_topic):
    topic = unique_topic("keep")
    with NoidaBroker(data_dir=tmp_path / "data") as broker:
        pid, bootstrap = broker.pid, broker.bootstrap
        producer = Producer({"bootstrap.servers": bootstrap})
        for value in (b"a", b"b", b"c"):
            producer.produce(topic, value)
        assert producer.flush(10) == 0
        broker.restart()
        assert broker.bootstrap == bootstrap and broker.pid != pid and not alive(pid)
        assert read_all(bootstrap, topic) == [b"a", b"b", b"c"]
        pid = broker.pid
    assert not alive(pid) and not broker_answers(bootstrap, timeout=0.5)
    assert (tmp_path / "data").is_dir()  # a data dir the caller chose is left in place


def test_tansu_starts_and_stops_without_leftovers():
    broker = TansuBroker()
    with broker:
        assert broker.running and broker_answers(broker.bootstrap)
        pid = broker.pid
        assert "session_timeout" in broker.url()
    assert not alive(pid) and not broker.running


def test_start_failure_reports_the_log_tail():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        broker = NoidaBroker(port=taken.getsockname()[1])
        with pytest.raises(BrokerStartError, match="exited with status") as info:
            broker.start()
    assert "already in use" in str(info.value)  # the broker's own words, from its log
    assert not broker.running
    broker.close()


def test_url_helper():
    broker = NoidaBroker(port=12345)
    assert broker.url() == "kafka://127.0.0.1:12345"
    assert broker.url("vh", max_poll_records=5) == "kafka://127.0.0.1:12345/vh?max_poll_records=5"
    broker.close()


def test_external_kafka_from_environment(monkeypatch):
    monkeypatch.setenv("NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP", "k1:9092,k2:9092")
    cluster = external_kafka()
    assert cluster is not None and cluster.bootstrap == "k1:9092,k2:9092"
    assert cluster.url("v") == "kafka://k1:9092,k2:9092/v"
    monkeypatch.delenv("NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP")
    assert external_kafka() is None
