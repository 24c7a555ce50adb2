"""A Kafka listener's client errors (drivers/kafka/client_errors.py): what stops the listener,
and what is only logged, one line a kind a second, with the repeats counted while it polls."""
from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError
from waits import Clock

from notify_transport.drivers.kafka.client_errors import ClientErrors, KafkaListenerError



def test_an_outages_repeated_errors_are_one_line_then_a_count_while_polling(caplog) -> None:
    clock = Clock()
    errors = ClientErrors("listener pool=p", clock=clock)
    down = KafkaError(KafkaError._TRANSPORT, "127.0.0.1:9092/1: Connect failed")
    with caplog.at_level(logging.WARNING, "notify_transport.drivers.kafka.client_errors"):
        for _ in range(40):
            errors.on_error(down)
        assert [r.getMessage() for r in caplog.records] == ["listener pool=p: 127.0.0.1:9092/1: Connect failed"]
        errors.raise_if_fatal()  # a broker down is retried, never raised
        clock.now = 0.5
        errors.summarize_due()
        assert len(caplog.records) == 1
        clock.now = 1.0  # the broker is back: no error comes any more, the count comes from the poll
        errors.summarize_due()
        assert caplog.records[-1].getMessage() == \
            "39 more not logged one by one; the last: listener pool=p: 127.0.0.1:9092/1: Connect failed"
        errors.summarize()
        assert len(caplog.records) == 2
    assert errors.last is down


def test_a_permanent_error_stops_the_listener() -> None:
    errors = ClientErrors("listener pool=p")
    errors.on_error(KafkaError(KafkaError.SASL_AUTHENTICATION_FAILED, "bad password"))
    with pytest.raises(KafkaListenerError, match="bad password"):
        errors.raise_if_fatal()
    with pytest.raises(KafkaListenerError, match="not allowed"):
        errors.on_record(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not allowed"))
    errors.on_record(KafkaError(KafkaError._PARTITION_EOF))  # the end of a partition: nothing


def test_the_listener_counts_an_outages_errors_as_it_polls(caplog) -> None:
    """The listener's poll loop says the count: after the outage, with no error arriving any more,
    the next poll logs how many lines were left out."""
    from notify_transport.drivers.kafka.delivery.commit import CommitBeforeDispatch
    from notify_transport.drivers.kafka.delivery.hooks import ListenerHooks
    from notify_transport.drivers.kafka.listener import KafkaListener
    from tests.unit.test_kafka_failed_hand_out import LogClient

    clock = Clock()
    client = LogClient({0: 0})
    policy = CommitBeforeDispatch(hooks=ListenerHooks())
    policy.attach(client, "take")
    listener = KafkaListener({"group.id": "g"}, ["t.info"], policy)
    listener.errors = ClientErrors(listener.name, clock=clock)
    listener._consumer = client  # as if started
    try:
        with caplog.at_level(logging.WARNING, "notify_transport.drivers.kafka.client_errors"):
            for _ in range(12):  # librdkafka's error_cb, from inside the client's polls
                listener.errors.on_error(KafkaError(KafkaError._TRANSPORT, "Connect failed"))
            assert listener.poll(timeout=0) == []
            assert len(caplog.records) == 1
            clock.now = 2.0
            assert listener.poll(timeout=0) == []
            assert caplog.records[-1].getMessage().startswith("11 more not logged one by one; the last: ")
    finally:
        policy.on_close()
