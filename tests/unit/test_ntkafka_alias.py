"""``ntkafka://`` works under notify_transport as under oslo.messaging."""
import pytest

import notify_transport as nt
from notify_transport.drivers.kafka.driver import KafkaDriver
from notify_transport.drivers.ntkafka import NtKafkaDriver, split_listener_options
from notify_transport.transport import installed_drivers


def test_ntkafka_is_a_registered_driver():
    assert "ntkafka" in installed_drivers()


def test_ntkafka_url_loads_the_kafka_driver_with_the_vhost(conf):
    transport = nt.get_notification_transport(
        conf, "ntkafka://127.0.0.1:1/prod?listener.delivery_mode=at_least_once&compression_codec=gzip")
    try:
        assert isinstance(transport.driver, NtKafkaDriver) and isinstance(transport.driver, KafkaDriver)
        assert transport.driver.vhost == "prod"
        assert transport.driver.kafka_topics([(nt.Target(topic="notifications"), "info")]) == [
            "notifications.info.prod"]
    finally:
        transport.cleanup()


def test_listener_options_from_the_query_are_split_and_typed():
    url = nt.TransportURL.parse(None, "ntkafka://h/v?listener.a=true&listener.b=12&listener.c=0.5"
                                      "&listener.d=x&acks=all")
    query, listener = split_listener_options(url)
    assert query == {"acks": "all"}
    assert listener == {"a": True, "b": 12, "c": 0.5, "d": "x"}


def test_unknown_listener_option_in_the_query_is_refused_at_listen(conf):
    transport = nt.get_notification_transport(conf, "ntkafka://127.0.0.1:1/?listener.nosuch=1")
    try:
        with pytest.raises(nt.ConfigurationError, match="nosuch"):
            transport._listen_for_notifications([(nt.Target(topic="t"), "info")], "pool")
    finally:
        transport.cleanup()


def test_empty_listener_option_name_is_refused(conf):
    with pytest.raises(nt.InvalidTransportURL, match="Empty listener option"):
        nt.get_notification_transport(conf, "ntkafka://127.0.0.1:1/?listener.=1")
