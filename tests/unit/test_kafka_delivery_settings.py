"""Delivery settings, start positions and hooks: validation and defaults, no broker."""
import datetime
import types

import pytest
from confluent_kafka import TopicPartition
from oslo_config import cfg

from notify_transport.drivers.config import resolve_options
from notify_transport.drivers.kafka import options as kafka_options
from notify_transport.drivers.kafka.delivery.hooks import ListenerHooks, as_hooks
from notify_transport.drivers.kafka.positions import (MessageId, StartPosition, parse_start_position,
                                                      resolve_offsets)
from notify_transport.drivers.kafka.delivery.settings import listener_settings, topic_name
from notify_transport.exceptions import ConfigurationError, InvalidTransportURL


def opts(**query):
    return resolve_options(cfg.ConfigOpts(), kafka_options.GROUP, kafka_options.all_opts(),
                           {k: str(v) for k, v in query.items()})


def test_defaults_keep_commit_before_dispatch_without_side_topics():
    s = listener_settings(opts(), {})
    assert s.delivery_mode == "commit_before_dispatch" and not s.at_least_once
    assert s.retry_topic is None and s.dead_letter_topic is None and not s.requeue_possible
    assert s.workers == 1 and not s.runs_processing
    assert s.start_position == StartPosition("committed")


def test_at_least_once_gets_retry_and_dead_letter_topics():
    s = listener_settings(opts(), {"delivery_mode": "at_least_once"})
    assert s.runs_processing and s.requeue_possible
    assert s.retry_topic_for("nova.info", "billing pool") == "nova.info.retry.billing_pool"
    assert s.dead_letter_topic_for("nova.info", "p") == "nova.info.dlq"


def test_options_from_config_and_url_query_keywords_override():
    o = opts(delivery_mode="at_least_once", workers=3, max_attempts=5, retry_delay=0.5)
    s = listener_settings(o, {"workers": "4", "requeue_on_error": "false"})
    assert (s.workers, s.max_attempts, s.retry_delay, s.requeue_on_error) == (4, 5, 0.5, False)
    with pytest.raises(InvalidTransportURL, match="delivery_mode"):
        opts(delivery_mode="exactly_once")


def test_one_attempt_means_no_retry_topic():
    s = listener_settings(opts(), {"delivery_mode": "at_least_once", "max_attempts": 1})
    assert s.retry_topic is None and s.dead_letter_topic == "{topic}.dlq"


def test_retry_topic_in_commit_before_dispatch_brings_a_dead_letter_topic():
    s = listener_settings(opts(), {"retry_topic": "{topic}.again.{pool}"})
    assert s.requeue_possible and s.dead_letter_topic == "{topic}.dlq"
    s = listener_settings(opts(), {"dead_letter_topic": "all-dead"})
    assert s.retry_topic is None and s.dead_letter_topic_for("x", "p") == "all-dead"


@pytest.mark.parametrize("options,match", [
    ({"delivery_mode": "at_least_once", "dead_letter_topic": "none"}, "needs a dead_letter_topic"),
    ({"retry_topic": "{topic}.r.{pool}", "dead_letter_topic": "none"}, "needs a dead_letter_topic"),
    ({"delivery_mode": "sometimes"}, "delivery_mode"),
    ({"workers": 0}, "workers"),
    ({"workers": True}, "workers=True: a number is expected"),  # bool is an int to Python
    ({"workers": 2.5}, "workers"),
    ({"max_in_flight": "lots"}, "max_in_flight"),
    ({"commit_interval": "soon"}, "commit_interval"),
    ({"requeue_on_error": 1}, "requeue_on_error=1: true or false"),
    ({"workers": 4, "max_in_flight": 2}, "max_in_flight"),
    ({"max_attempts": "many"}, "max_attempts"),
    ({"retry_delay": -1}, "retry_delay"),
    ({"requeue_on_error": "perhaps"}, "requeue_on_error"),
    ({"retry_topic": "{topic}.{queue}"}, "unknown placeholder"),
    ({"dead_letter_topic": "bad topic name"}, "invalid Kafka topic"),
    ({"start_position": "yesterday"}, "start_position"),
    ({"hooks": {"on_everything": print}}, "Unknown hook"),
    ({"hooks": {"on_commit": 3}}, "callable"),
])
def test_bad_settings_are_clear_errors(options, match):
    with pytest.raises(ConfigurationError, match=match):
        listener_settings(opts(), options)


def test_a_keyword_given_as_none_is_not_given():
    """None says nothing (as an unset [listener:NAME] key): the transport's option stays."""
    o = opts()
    o.max_in_flight = 7
    assert listener_settings(o, {"max_in_flight": None}).max_in_flight == 7


def test_retry_template_without_pool_is_allowed_but_warned(caplog):
    s = listener_settings(opts(), {"delivery_mode": "at_least_once", "retry_topic": "{topic}.retry"})
    assert s.retry_topic_for("a", "p") == "a.retry"
    assert any("{pool}" in r.getMessage() for r in caplog.records)


def test_topic_name_checks_length():
    with pytest.raises(ConfigurationError, match="invalid Kafka topic"):
        topic_name("{topic}.{pool}", "t" * 200, "p" * 60)


@pytest.mark.parametrize("value,expected", [
    (None, StartPosition("committed")),
    ("committed", StartPosition("committed")),
    ("EARLIEST", StartPosition("earliest")),
    ("latest", StartPosition("latest")),
    (0, StartPosition("offset", 0)),
    ("offset:42", StartPosition("offset", 42)),
    ("time:1700000000.5", StartPosition("timestamp", 1700000000.5)),
    ("time:2024-01-02T03:04:05+00:00", StartPosition("timestamp", 1704164645.0)),
    ("time:2024-01-02T03:04:05", StartPosition("timestamp", 1704164645.0)),  # naive = UTC
    (datetime.datetime(2024, 1, 2, 3, 4, 5), StartPosition("timestamp", 1704164645.0)),
])
def test_start_positions(value, expected):
    assert parse_start_position(value) == expected
    assert parse_start_position(str(expected)) == expected  # str() round-trips


@pytest.mark.parametrize("value", [-1, 3.5, True, "offset:x", "time:soon", "later", [1]])
def test_bad_start_positions(value):
    with pytest.raises(ConfigurationError):
        parse_start_position(value)


class FakeListOffsets:
    """``ClusterAdmin.offsets_at`` over partitions holding records [start, end), one per second."""

    def __init__(self, start=10, end=20, first_time_ms=1_000_000):
        self.start, self.end, self.first = start, end, first_time_ms

    def __call__(self, partitions, spec):
        if spec == -2:
            offset = self.start
        elif spec == -1:
            offset = self.end
        else:
            index = max(0, -(-(spec - self.first) // 1000))
            offset = self.start + index if self.start + index < self.end else -1
        return {tp: offset for tp in partitions}


@pytest.mark.parametrize("position,expected", [
    (StartPosition("earliest"), 10), (StartPosition("latest"), 20),
    (StartPosition("offset", 15), 15), (StartPosition("offset", 3), 10),  # clamped
    (StartPosition("offset", 99), 20),
    (StartPosition("timestamp", 1002.5), 13),  # first record at or after the time
    (StartPosition("timestamp", 5000.0), 20),  # after the last record: the end
])
def test_resolve_offsets(position, expected):
    found = resolve_offsets(FakeListOffsets(), [TopicPartition("t", 0)], position)
    assert [(tp.topic, tp.partition, tp.offset) for tp in found] == [("t", 0, expected)]


def test_resolve_offsets_per_partition_and_committed_refused():
    found = resolve_offsets(FakeListOffsets(), [TopicPartition("t", 0), TopicPartition("t", 1)],
                            StartPosition("offset", 0), offsets={("t", 1): 12})
    assert [tp.offset for tp in found] == [10, 12]
    with pytest.raises(ValueError):
        resolve_offsets(FakeListOffsets(), [TopicPartition("t", 0)], StartPosition("committed"))


def test_message_id():
    mid = MessageId("t", 2, 40)
    assert str(mid) == "t[2]@40" and mid == ("t", 2, 40)


def test_hooks_are_called_and_their_errors_swallowed(caplog):
    seen = []

    def boom(*args):
        raise RuntimeError("hook bug")

    hooks = as_hooks({"before_dispatch": seen.append, "on_commit": boom})
    assert hooks.around_dispatch and not ListenerHooks().around_dispatch
    hooks.call("before_dispatch", "m")
    hooks.call("on_commit", [], None)
    hooks.call("on_revoke", [])  # not set: nothing happens
    assert seen == ["m"]
    assert any("on_commit raised" in r.getMessage() for r in caplog.records)
    assert as_hooks(None) == ListenerHooks() and as_hooks(hooks) is hooks
    with pytest.raises(ConfigurationError):
        as_hooks(types.SimpleNamespace())


# -- the driver builds the right policy, or refuses clearly (no broker needed) ----------------

def driver_for(url: str):
    from notify_transport.drivers.kafka.driver import KafkaDriver
    from notify_transport.url import TransportURL

    conf = cfg.ConfigOpts()
    conf([])
    return KafkaDriver(conf, TransportURL.parse(conf, url))


def listen(driver, **options):
    from notify_transport.target import Target

    return driver.listen_for_notifications([(Target(topic="n"), "info")], "pool", 1, None, **options)


def test_driver_picks_the_policy_and_side_topics():
    from notify_transport.drivers.kafka.delivery.atleastonce import AtLeastOnce
    from notify_transport.drivers.kafka.delivery.commit import AutoCommit, CommitBeforeDispatch

    driver = driver_for("kafka://127.0.0.1:1/vh")
    try:
        plain = listen(driver)
        assert type(plain.policy) is CommitBeforeDispatch and plain.policy.requeuer is None
        assert plain.retry_topics == [] and plain.dead_letter_topics == []
        assert plain.executor(batch=False) is None  # dispatched inline by the server
        alo = listen(driver, delivery_mode="at_least_once", workers=3)
        assert isinstance(alo.policy, AtLeastOnce) and alo.executor(batch=False) is alo
        with pytest.raises(ConfigurationError, match="workers > 1"):
            alo.executor(batch=True)  # a batch listener cannot use ordered workers
        assert listen(driver, delivery_mode="at_least_once").executor(batch=True) is None
        assert alo.retry_topics == ["n.info.vh.retry.pool"]
        assert alo.dead_letter_topics == ["n.info.vh.dlq"]
        assert alo._config["enable.auto.commit"] is False
        cbd = listen(driver, retry_topic="{topic}.r.{pool}")
        assert cbd.policy.requeuer is not None and cbd.retry_topics == ["n.info.vh.r.pool"]
    finally:
        driver.cleanup()
    auto = driver_for("kafka://127.0.0.1:1?enable_auto_commit=true")
    try:
        assert type(listen(auto).policy) is AutoCommit
        with pytest.raises(ConfigurationError, match="enable_auto_commit"):
            listen(auto, delivery_mode="at_least_once")
        with pytest.raises(ConfigurationError, match="enable_auto_commit"):
            listen(auto, dead_letter_topic="{topic}.dlq")
    finally:
        auto.cleanup()


def test_driver_refuses_unknown_and_conflicting_listener_options():
    from notify_transport.drivers.kafka.delivery.commit import CommitBeforeDispatch

    driver = driver_for("kafka://127.0.0.1:1?delivery_mode=at_least_once")
    try:
        with pytest.raises(ConfigurationError, match="Unknown Kafka listener option.*deliverymode"):
            listen(driver, deliverymode="at_least_once")
        with pytest.raises(ConfigurationError, match="commit_policy cannot be combined"):
            listen(driver, commit_policy=CommitBeforeDispatch)
        assert listen(driver).settings.at_least_once  # from the URL query
        assert not listen(driver, delivery_mode="commit_before_dispatch").settings.at_least_once
    finally:
        driver.cleanup()
