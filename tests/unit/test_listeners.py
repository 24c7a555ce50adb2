"""How an entry-point listener is built and described: attributes, config sections, errors.

Entry point discovery itself runs against installed distributions in
tests/functional/test_serve.py; here the endpoints are given directly.
"""
from __future__ import annotations

from typing import Any

import pytest
from oslo_config import cfg

from notify_transport import ConfigurationError, NotificationFilter, get_notification_transport
from notify_transport.listeners import (BrokenEntry, BrokenListenerError, RegisteredEntry, UnknownListenerError,
                                        _build, describe, list_opts, listener_opts, load_listeners,
                                        stop_servers)
from notify_transport.notify.counters_log import CountersLog, summary

ENTRY = RegisteredEntry("billing", "mybilling.listeners:Endpoint", "mybilling 1.0")


def conf_with(tmp_path: Any, text: str = "") -> cfg.ConfigOpts:
    path = tmp_path / "listeners.conf"
    path.write_text(text)
    conf = cfg.ConfigOpts()
    conf(args=[], default_config_files=[str(path)])
    return conf


class Plain:
    def info(self, ctxt, publisher_id, event_type, payload, metadata) -> None:
        pass


class Declared(Plain):
    topics = ["compute"]
    pool = "finance"
    delivery_mode = "at_least_once"
    workers = 4
    allow_requeue = True
    filter_rule = NotificationFilter(event_type="compute")


class Batch:
    batch_size = 10
    batch_timeout = 2.0

    def info(self, messages) -> None:
        pass


def test_defaults_are_the_entry_name_and_the_notification_topics(tmp_path) -> None:
    conf = conf_with(tmp_path, "[oslo_messaging_notifications]\ntopics = notifications,audit\n")
    listener = describe(ENTRY, Plain(), conf)
    assert listener.topics == ["notifications", "audit"]
    assert listener.pool == "billing"
    assert listener.driver_options == {}  # nothing set: the transport's delivery options apply
    assert not listener.batch and not listener.allow_requeue


def test_endpoint_attributes_describe_the_listener(tmp_path) -> None:
    listener = describe(ENTRY, Declared(), conf_with(tmp_path))
    assert (listener.topics, listener.pool, listener.allow_requeue) == (["compute"], "finance", True)
    assert listener.driver_options == {"delivery_mode": "at_least_once", "workers": 4}


def test_the_config_section_overrides_the_attributes(tmp_path) -> None:
    conf = conf_with(tmp_path, "[listener:billing]\ntopics = a,b\npool = p2\nworkers = 2\n"
                               "delivery_mode = commit_before_dispatch\nretry_topic = none\n"
                               "allow_requeue = false\nfilter_event_type = ^identity\\.\n")
    listener = describe(ENTRY, Declared(), conf)
    assert (listener.topics, listener.pool, listener.allow_requeue) == (["a", "b"], "p2", False)
    assert listener.driver_options == {"delivery_mode": "commit_before_dispatch", "workers": 2,
                                       "retry_topic": "none"}
    rule = listener.endpoint.filter_rule
    assert rule.match({}, "x", "identity.authenticate", {}, {})
    assert not rule.match({}, "x", "compute.instance.create.end", {}, {})
    assert callable(listener.endpoint.info)  # the methods are the endpoint's


def test_a_bad_value_in_the_section_names_the_option(tmp_path) -> None:
    conf = conf_with(tmp_path, "[listener:billing]\ndelivery_mode = sometimes\n")
    with pytest.raises(ValueError, match="delivery_mode"):
        describe(ENTRY, Plain(), conf)


def test_batch_endpoints_and_batch_options(tmp_path) -> None:
    listener = describe(ENTRY, Batch(), conf_with(tmp_path, "[listener:billing]\nbatch_size = 50\n"))
    assert (listener.batch, listener.batch_size, listener.batch_timeout) == (True, 50, 2.0)
    with pytest.raises(ConfigurationError, match="batch endpoints only"):
        describe(ENTRY, Plain(), conf_with(tmp_path, "[listener:billing]\nbatch_size = 50\n"))


@pytest.mark.parametrize("attribute, value, message", [
    ("topics", [], "topics must be a non-empty list"),
    ("topics", ["ok", 3], "topics must be a non-empty list"),
    ("pool", 7, "pool must be a non-empty string"),
    ("pool", "", "pool must be a non-empty string"),
    ("filter_rule", "compute.*", "filter_rule must be a NotificationFilter"),
    ("batch_size", 0, "batch_size must be an integer >= 1"),
    ("batch_timeout", -1, "batch_timeout must be a number of seconds >= 0"),
])
def test_bad_attributes_are_reported(tmp_path, attribute, value, message) -> None:
    endpoint = Plain()
    setattr(endpoint, attribute, value)
    with pytest.raises(ConfigurationError, match=message):
        describe(ENTRY, endpoint, conf_with(tmp_path))


def test_a_class_is_built_with_the_conf_when_its_constructor_takes_it(tmp_path) -> None:
    conf = conf_with(tmp_path)

    class TakesConf(Plain):
        def __init__(self, conf) -> None:
            self.conf = conf

    assert _build(TakesConf, conf).conf is conf
    assert isinstance(_build(Plain, conf), Plain)
    assert isinstance(_build(lambda: Plain(), conf), Plain)  # a factory
    assert _build(lambda c: Declared(), conf).pool == "finance"


def test_what_is_not_an_endpoint_is_refused(tmp_path) -> None:
    conf = conf_with(tmp_path)
    with pytest.raises(ConfigurationError, match="returned None"):
        _build(lambda: None, conf)
    with pytest.raises(ConfigurationError, match="no method named after a priority"):
        _build(object, conf)


def test_the_section_options_are_the_delivery_options_without_defaults() -> None:
    names = {opt.name: opt for opt in listener_opts()}
    for name in ("topics", "pool", "batch_size", "delivery_mode", "workers", "retry_topic",
                 "dead_letter_topic", "max_attempts", "shutdown_timeout"):
        assert name in names and names[name].default is None, name
    assert list_opts()[0][0] == "listener:NAME"
    from notify_transport.drivers.kafka.options import delivery_opts
    assert [o.default for o in delivery_opts][:2] == ["commit_before_dispatch", 1]  # not changed by the copies


def test_unknown_names_and_broken_entries_are_errors(tmp_path) -> None:
    with pytest.raises(UnknownListenerError, match="No listener named 'nosuch'") as info:
        load_listeners(conf_with(tmp_path), ["nosuch"])
    assert info.value.unknown == ["nosuch"]
    error = BrokenListenerError([BrokenEntry(ENTRY, "cannot import it: ImportError: boom")])
    assert "listener 'billing' (mybilling.listeners:Endpoint, from mybilling 1.0): cannot import it" in str(error)
    assert "nothing started" in str(error)


def test_servers_run_on_the_fake_transport_and_stop_together(tmp_path) -> None:
    conf = conf_with(tmp_path)
    transport = get_notification_transport(conf, "fake://")
    seen = []

    class Recorder(Plain):
        def info(self, ctxt, publisher_id, event_type, payload, metadata) -> None:
            seen.append(payload)

    listener = describe(ENTRY, Recorder(), conf)
    server = listener.server(transport)
    assert server.pool == "billing"
    server.start()
    try:
        from notify_transport import Notifier
        Notifier(transport, "compute.host1", driver="messagingv2", topics=["notifications"]).info(
            {}, "compute.instance.create.end", {"seq": 1})
        import time
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        assert stop_servers([server], timeout=10)
    assert seen == [{"seq": 1}]
    assert summary(server.metrics()) == {"received": 1, "dispatched": 1, "failed": 0, "lag": None}


def test_counters_log_one_line_per_listener(caplog) -> None:
    class Server:
        def metrics(self) -> dict:
            return {"received": 5, "dispatched": 4, "failed": 1, "lag": {("t.info", 0): 3, ("t.info", 1): 2}}

    with caplog.at_level("INFO"):
        CountersLog({"billing": Server()}, interval=60).report()
    assert "listener billing: received=5 dispatched=4 failed=1 lag=5" in caplog.text
    with pytest.raises(ValueError):
        CountersLog({}, interval=0)


def test_a_key_of_a_listener_section_that_no_option_takes_is_logged(tmp_path, caplog) -> None:
    conf = conf_with(tmp_path, "[listener:billing]\npol = finance\npool = audit\n")
    with caplog.at_level("WARNING", logger="notify_transport.listeners"):
        listener = describe(ENTRY, Plain(), conf)
    assert listener.pool == "audit"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "[listener:billing] pol is not an option" in lines[0]
    assert "(did you mean pool?)" in lines[0]
