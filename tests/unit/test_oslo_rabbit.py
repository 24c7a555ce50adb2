"""The ``ntrabbit`` oslo.messaging driver without a broker: entry point, options, errors, messages."""
from __future__ import annotations

import logging
import uuid
from importlib import metadata
from typing import Any

import pytest
from oslo_config import cfg

oslo_messaging = pytest.importorskip("oslo_messaging")

from notify_transport import exceptions as nt_exceptions  # noqa: E402
from notify_transport.drivers.base import IncomingMessage  # noqa: E402
from notify_transport.drivers.remote_errors import (deserialize_remote_exception,  # noqa: E402
                                                    serialize_remote_exception)
from notify_transport.integrations import oslo_rabbit  # noqa: E402
from notify_transport.integrations.eventlet_support import Offload  # noqa: E402


def make_driver(conf: cfg.ConfigOpts, text: str) -> oslo_rabbit.NtRabbitDriver:
    """The driver as oslo.messaging builds it; no connection is made before first use."""
    return oslo_rabbit.NtRabbitDriver(conf, oslo_messaging.TransportURL.parse(conf, text), "openstack", [])


def test_registered_in_oslo_messaging_drivers() -> None:
    entry = [ep for ep in metadata.entry_points(group="oslo.messaging.drivers") if ep.name == "ntrabbit"]
    assert len(entry) == 1, "run pip install -e . so that the entry point is visible"
    assert entry[0].load() is oslo_rabbit.NtRabbitDriver
    assert oslo_rabbit.SCHEME == "ntrabbit"


def test_hosts_vhost_and_options_from_the_services_conf_with_the_query_on_top(conf) -> None:
    driver = make_driver(conf, "ntrabbit://nova:s3cret@r1:5673,nova:s3cret@r2/nova?kombu_reconnect_delay=2.5")
    ours = driver.driver
    assert sorted((e.host, e.port, e.username) for e in ours.settings.endpoints) == [
        ("r1", 5673, "nova"), ("r2", 5672, "nova")]
    assert ours.settings.virtual_host == "nova"
    assert ours.opts.kombu_reconnect_delay == 2.5
    # the options are registered in the service's [oslo_messaging_rabbit], oslo's names
    conf.set_override("amqp_durable_queues", True, group="oslo_messaging_rabbit")
    assert make_driver(conf, "ntrabbit://h/").driver.topology.durable is True
    assert "s3cret" not in repr(driver)
    assert driver.offload.patched is False  # no eventlet here: calls run where they are made


def test_unknown_query_option_is_oslos_invalid_transport_url(conf) -> None:
    with pytest.raises(oslo_messaging.InvalidTransportURL) as raised:
        make_driver(conf, "ntrabbit://u:pw@h/?no_such_option=1")
    assert "no_such_option" in str(raised.value)
    assert "pw" not in raised.value.url


@pytest.mark.parametrize("option", ["use_queue_manager", "rabbit_stream_fanout"])
def test_features_not_implemented_are_refused_by_name(conf, option) -> None:
    with pytest.raises(nt_exceptions.ConfigurationError, match=option):
        make_driver(conf, f"ntrabbit://h/?{option}=true")


def test_targets_convert_field_by_field() -> None:
    target = oslo_messaging.Target(exchange="nova", topic="compute", server="host1", fanout=True)
    ours = oslo_rabbit.our_target(target)
    assert (ours.exchange, ours.topic, ours.server, ours.fanout) == ("nova", "compute", "host1", True)


class ServiceError(Exception):
    pass


def test_remote_errors_become_oslos_classes() -> None:
    hidden = deserialize_remote_exception(serialize_remote_exception(ServiceError("no flavor")), [])
    assert isinstance(hidden, nt_exceptions.RemoteError)
    error = oslo_rabbit.rpc_error(hidden)
    assert isinstance(error, oslo_messaging.RemoteError)
    assert (error.exc_type, error.value) == ("ServiceError", "no flavor")
    assert error.traceback == hidden.traceback
    # an allowed module's exception is rebuilt as its own class and passes as it is
    rebuilt = deserialize_remote_exception(serialize_remote_exception(ServiceError("x")), [__name__])
    assert isinstance(rebuilt, ServiceError)
    assert oslo_rabbit.rpc_error(rebuilt) is rebuilt


def test_driver_errors_become_oslos() -> None:
    undeliverable = oslo_rabbit.rpc_error(nt_exceptions.MessageUndeliverable("312 NO_ROUTE", "openstack",
                                                                             "compute", {"method": "m"}))
    assert isinstance(undeliverable, oslo_messaging.MessageUndeliverable)
    assert (undeliverable.exchange, undeliverable.routing_key, undeliverable.message) == (
        "openstack", "compute", {"method": "m"})
    assert isinstance(oslo_rabbit.rpc_error(nt_exceptions.MessagingTimeout("t")), oslo_messaging.MessagingTimeout)
    assert isinstance(oslo_rabbit.rpc_error(nt_exceptions.MessageDeliveryFailure("f")),
                      oslo_messaging.MessageDeliveryFailure)


class Request(IncomingMessage):
    """A received request as our RabbitMQ driver gives it (msg_id, client_timeout, reply, heartbeat)."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__({"user": "u"}, {"method": "m", "args": {}})
        self.msg_id = "abc"
        self.client_timeout = 20
        self.replies: list[tuple[Any, Any]] = []
        self.heartbeats = 0
        self.fail = fail

    def reply(self, reply: Any = None, failure: Any = None) -> None:
        if self.fail:
            raise nt_exceptions.MessageDeliveryFailure("connection lost")
        self.replies.append((reply, failure))

    def heartbeat(self) -> None:
        self.heartbeats += 1


def test_rpc_message_gives_oslos_dispatcher_what_it_reads_and_replies() -> None:
    request = Request()
    message = oslo_rabbit.OsloRpcMessage(request, Offload(patched=False))
    assert (message.ctxt, message.message, message.msg_id, message.client_timeout) == (
        {"user": "u"}, {"method": "m", "args": {}}, "abc", 20)
    message.acknowledge()
    message.heartbeat()
    failure = (ServiceError, ServiceError("x"), None)
    message.reply(failure=failure)
    message.reply({"ok": 1})
    assert request.heartbeats == 1
    assert request.replies == [(None, failure), ({"ok": 1}, None)]


def test_a_cast_is_logged_under_the_senders_unique_id_without_drawing_a_uuid(monkeypatch) -> None:
    cast = Request()
    cast.msg_id = None  # a cast: no reply expected
    cast.unique_id = "5e4d"  # type: ignore[attr-defined]
    monkeypatch.setattr(uuid, "uuid4", lambda: pytest.fail("a uuid was drawn for a cast"))
    message = oslo_rabbit.OsloRpcMessage(cast, Offload(patched=False))
    assert message.msg_id == "5e4d"


def test_a_reply_that_fails_is_logged_not_raised(caplog) -> None:
    message = oslo_rabbit.OsloRpcMessage(Request(fail=True), Offload(patched=False))
    with caplog.at_level(logging.ERROR, logger=oslo_rabbit.__name__):
        message.reply({"ok": 1})
    assert "Could not reply to" in caplog.text and "connection lost" in caplog.text
