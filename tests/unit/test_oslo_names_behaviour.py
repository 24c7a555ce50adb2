"""The names added for oslo.messaging compatibility behave as oslo.messaging's do."""
import datetime
import logging
import uuid

import oslo_messaging
import pytest
from oslo_config import cfg

import notify_transport as nt
from notify_transport import conffixture


def test_json_payload_serializer_matches_oslo():
    class Thing:
        def __init__(self):
            self.a, self.when = 1, datetime.datetime(2024, 1, 2, 3, 4, 5, 6)
    entity = {"t": Thing(), "s": {3}, "u": uuid.UUID(int=5), "d": datetime.datetime(2020, 1, 1)}
    assert nt.JsonPayloadSerializer().serialize_entity({}, entity) == \
        oslo_messaging.JsonPayloadSerializer().serialize_entity({}, entity)
    assert nt.JsonPayloadSerializer().deserialize_entity({}, {"x": 1}) == {"x": 1}


def test_transport_options_and_defaults(conf):
    assert nt.TransportOptions().at_least_once is False
    assert nt.TransportOptions(at_least_once=True).at_least_once is True
    nt.set_transport_defaults("nova")
    try:
        fresh = cfg.ConfigOpts()
        fresh([])
        from notify_transport.options import register_transport_opts
        register_transport_opts(fresh)
        assert fresh.control_exchange == "nova"
    finally:
        nt.set_transport_defaults("openstack")


def test_executor_load_failure(conf):
    with nt.get_notification_transport(conf, "fake:///") as transport, \
            pytest.raises(nt.ExecutorLoadFailure) as err:
        nt.get_notification_listener(transport, [nt.Target(topic="t")], [object()], executor="eventlet")
    assert err.value.executor == "eventlet" and isinstance(err.value, nt.MessagingServerError)
    assert isinstance(err.value, nt.ConfigurationError)  # what earlier releases raised


def test_servers_are_message_handling_servers(conf):
    transport = nt.get_notification_transport(conf, "fake:///")
    single = nt.get_notification_listener(transport, [nt.Target(topic="t")], [object()])
    batch = nt.get_batch_notification_listener(transport, [nt.Target(topic="t")], [object()])
    assert isinstance(single, nt.MessageHandlingServer) and isinstance(batch, nt.MessageHandlingServer)
    assert isinstance(batch, nt.notify.BatchNotificationServer)
    assert not isinstance(single, nt.notify.BatchNotificationServer)
    assert isinstance(single.dispatcher, nt.dispatcher.DispatcherBase)


def test_target_legacy_namespaces():
    assert nt.Target(namespace="a", legacy_namespaces=["b"]).accepted_namespaces == ["a", "b"]
    assert nt.Target(None, None, "a", None, None, None, ["b"]).accepted_namespaces == \
        oslo_messaging.Target(None, None, "a", None, None, None, ["b"]).accepted_namespaces


def test_get_rpc_client_takes_a_client_class():
    class Mine(nt.RPCClient):
        pass

    class FakeTransport:
        conf = cfg.ConfigOpts()
    client = nt.get_rpc_client(FakeTransport(), nt.Target(topic="t"), Mine, timeout=3)
    assert type(client) is Mine and client.timeout == 3


def test_conf_fixture_registers_overrides_and_resets(conf):
    fixture = conffixture.ConfFixture(conf, transport_url="fake:/")
    fixture.setUp()
    try:
        assert fixture.transport_url == "fake:/" and conf.transport_url == "fake:/"
        fixture.response_timeout = 7
        assert conf.rpc_response_timeout == 7
        conf.set_override("notification_driver", ["test"])  # the pre-group name, as oslo's fixture maps it
        assert conf.oslo_messaging_notifications.driver == ["test"]
        conf.clear_override("notification_driver")
        assert conf.oslo_messaging_notifications.driver == []
    finally:
        fixture.cleanUp()
    assert conf.transport_url == "rabbit://"
    assert conf.set_override("transport_url", "x://") is None  # the original method is back
    assert "wrapped" not in vars(conf.set_override)


def test_logging_notification_handler_sends_records(conf):
    class Handler(nt.LoggingNotificationHandler):
        CONF = conf
    handler = Handler("fake:///", publisher_id="svc", driver="test")
    logger = logging.getLogger("test.notify.logger")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.error("disk %s full", "/var")
        logger.log(5, "no notifier method for this level")
    finally:
        logger.removeHandler(handler)
    (ctxt, msg, priority), = handler.notifier.sent
    assert priority == "ERROR" and msg["event_type"] == "logrecord" and msg["publisher_id"] == "svc"
    assert msg["payload"]["msg"] == "disk /var full" and msg["payload"]["name"] == "test.notify.logger"


def test_logging_handler_does_not_recurse_on_a_failing_send(conf, caplog):
    class Handler(nt.LoggingNotificationHandler):
        CONF = conf
    handler = Handler("fake:///", driver="messagingv2", topic="t")

    calls = []

    def boom(*a, **k):
        calls.append(a)
        logging.getLogger("notify_transport.x").error("send failed")  # reaches the handler again
        raise RuntimeError("down")
    # the notifier asks the transport for its sender on the first notification
    handler.notifier.transport._notification_sender = lambda target, version: boom
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        logging.getLogger("svc").error("first")
    finally:
        root.removeHandler(handler)
        handler.close()
    assert len(calls) == 1  # the records logged while sending were not sent again


def test_publish_errors_handler(monkeypatch):
    conf = cfg.ConfigOpts()
    conf([])
    monkeypatch.setattr(cfg, "CONF", conf)
    from notify_transport.options import register_notifier_opts, register_transport_opts
    register_transport_opts(conf)
    register_notifier_opts(conf)
    conf.set_override("transport_url", "fake:///")
    conf.set_override("driver", ["test"], group="oslo_messaging_notifications")
    from notify_transport.notify import log_handler
    monkeypatch.setattr(log_handler.cfg, "CONF", conf)
    handler = nt.PublishErrorsHandler(logging.ERROR)
    handler.emit(logging.LogRecord("x", logging.ERROR, __file__, 1, "it broke", None, None))
    (_ctxt, msg, priority), = handler._notifier.sent
    assert (msg["event_type"], msg["publisher_id"], msg["payload"], priority) == (
        "error_notification", "error.publisher", {"error": "it broke"}, "ERROR")
    conf.set_override("driver", ["log", "test"], group="oslo_messaging_notifications")
    handler.emit(logging.LogRecord("x", logging.ERROR, __file__, 1, "again", None, None))
    assert len(handler._notifier.sent) == 1  # with the log driver it would loop: nothing sent
