"""``ntkafka://`` works under notify_transport as under oslo.messaging."""
import logging

import pytest

import notify_transport as nt
from notify_transport.drivers.kafka.driver import KafkaDriver
from notify_transport.drivers.ntkafka import NtKafkaSchemeDriver, driver_query
from notify_transport.transport import installed_drivers


def test_ntkafka_is_a_registered_driver():
    assert "ntkafka" in installed_drivers()


def test_ntkafka_url_loads_the_kafka_driver_with_the_vhost(conf):
    transport = nt.get_notification_transport(
        conf, "ntkafka://127.0.0.1:1/prod?listener.delivery_mode=at_least_once&compression_codec=gzip")
    try:
        assert isinstance(transport.driver, NtKafkaSchemeDriver) and isinstance(transport.driver, KafkaDriver)
        assert transport.driver.vhost == "prod"
        assert transport.driver.kafka_topics([(nt.Target(topic="notifications"), "info")]) == [
            "notifications.info.prod"]
    finally:
        transport.cleanup()


def test_a_deprecated_listener_key_is_read_as_the_option_with_a_warning(caplog):
    url = nt.TransportURL.parse(None, "ntkafka://h/v?listener.workers=12&listener.delivery_mode=at_least_once"
                                      "&workers=12&acks=all")
    with caplog.at_level(logging.WARNING, logger="notify_transport.drivers.ntkafka"):
        query = driver_query(url)
    assert query == {"acks": "all", "workers": "12", "delivery_mode": "at_least_once"}
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and all("deprecated" in line for line in warned), warned


def test_a_listener_key_that_contradicts_the_option_is_refused():
    url = nt.TransportURL.parse(None, "ntkafka://h/v?listener.workers=12&workers=4")
    with pytest.raises(nt.InvalidTransportURL, match="keep 'workers' only"):
        driver_query(url)


def test_a_listener_key_reaches_the_listener_settings(conf):
    transport = nt.get_notification_transport(conf, "ntkafka://127.0.0.1:1/?listener.workers=3")
    try:
        listener = transport._listen_for_notifications([(nt.Target(topic="t"), "info")], "pool")
        assert listener.settings.workers == 3
    finally:
        transport.cleanup()


def test_unknown_listener_option_in_the_query_is_refused_with_the_transport(conf):
    with pytest.raises(nt.InvalidTransportURL, match="nosuch"):
        nt.get_notification_transport(conf, "ntkafka://127.0.0.1:1/?listener.nosuch=1")


def test_empty_listener_option_name_is_refused(conf):
    with pytest.raises(nt.InvalidTransportURL, match="Empty listener option"):
        nt.get_notification_transport(conf, "ntkafka://127.0.0.1:1/?listener.=1")
