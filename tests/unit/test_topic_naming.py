"""Topic naming shared by the drivers, the CLI and the pipeline: built and read back."""
from hypothesis import given, settings
from hypothesis import strategies as st

from notify_transport.drivers.naming import (DEFAULT_DEAD_LETTER_TOPIC, DEFAULT_RETRY_TOPIC, ERROR_PRIORITIES,
                                             PRIORITIES, SideTopic, TopicParts, all_vhosts_pattern,
                                             notification_topic, parse_side_topic, parse_topic, routing_key,
                                             side_topic, subscription_topics)

segment = st.text(alphabet="abcxyz_-0123456789", min_size=1, max_size=8).filter(lambda s: s not in PRIORITIES)
dotted = st.lists(segment, min_size=1, max_size=3).map(".".join)


@settings(max_examples=60, deadline=None)
@given(base=dotted, priority=st.sampled_from(PRIORITIES), vhost=st.none() | dotted)
def test_a_built_name_reads_back_with_and_without_the_configured_topics(base, priority, vhost):
    name = notification_topic(base, priority, vhost)
    assert parse_topic(name, [base]) == TopicParts(base, priority, vhost)
    assert parse_topic(name) == TopicParts(base, priority, vhost)
    import re
    assert re.fullmatch(all_vhosts_pattern([base]), name)


def test_subscription_topics_and_names_without_a_priority():
    assert subscription_topics(["n"], "vh", ["info", "ERROR"]) == ["n.info.vh", "n.error.vh"]
    assert subscription_topics(["n"], None)[0] == "n.audit" and len(subscription_topics(["n"], "")) == 7
    assert parse_topic("plain.topic") == TopicParts("plain.topic", None, None)
    assert notification_topic("n", None, None) == "n"


def test_the_priorities_are_defined_once():
    from notify_transport.drivers import base
    from notify_transport.notify import dispatcher
    assert base.PRIORITIES is PRIORITIES and dispatcher.PRIORITIES is PRIORITIES


pool_name = st.from_regex(r"[a-zA-Z0-9_-][a-zA-Z0-9._-]{0,10}", fullmatch=True)
literal = st.text(alphabet="abc-_.", max_size=4)


@settings(max_examples=80, deadline=None)
@given(base=dotted, priority=st.sampled_from(PRIORITIES), vhost=st.none() | dotted, pool=pool_name)
def test_retry_and_dead_letter_names_read_back_to_what_built_them(base, priority, vhost, pool):
    source = notification_topic(base, priority, vhost)
    retry = side_topic(DEFAULT_RETRY_TOPIC, source, pool)
    assert parse_side_topic(DEFAULT_RETRY_TOPIC, retry) == SideTopic(source, pool)
    assert parse_side_topic(DEFAULT_DEAD_LETTER_TOPIC, side_topic(DEFAULT_DEAD_LETTER_TOPIC, source, pool)) == (
        SideTopic(source, None))
    assert parse_topic(parse_side_topic(DEFAULT_RETRY_TOPIC, retry).topic) == TopicParts(base, priority, vhost)


@settings(max_examples=80, deadline=None)
@given(head=literal, middle=st.text(alphabet="abc-_", min_size=1, max_size=4), tail=literal,
       pool_first=st.booleans(), source=dotted, pool=pool_name)
def test_any_template_with_both_placeholders_reads_back(head, middle, tail, pool_first, source, pool):
    fields = ("{pool}", "{topic}") if pool_first else ("{topic}", "{pool}")
    template = head + fields[0] + middle + fields[1] + tail
    name = side_topic(template, source, pool)
    found = parse_side_topic(template, name)
    assert found is not None and side_topic(template, found.topic, found.pool or "") == name


def test_side_topics_make_the_pool_safe_and_refuse_foreign_names():
    assert side_topic(DEFAULT_RETRY_TOPIC, "n.info", "billing pool/2") == "n.info.retry.billing_pool_2"
    assert parse_side_topic(DEFAULT_DEAD_LETTER_TOPIC, "n.info.retry.p") is None
    assert parse_side_topic("all-dead", "all-dead") is None  # no {topic}: the source is unknown


@settings(max_examples=40, deadline=None)
@given(topic=dotted, priority=st.sampled_from(PRIORITIES))
def test_rabbit_routing_keys_split_like_topics(topic, priority):
    assert parse_topic(routing_key(topic, priority)) == TopicParts(topic, priority, None)


def test_error_priorities_are_priorities_defined_once():
    from notify_transport.pipeline import report, topics

    assert set(ERROR_PRIORITIES) <= set(PRIORITIES)
    assert report.ERROR_PRIORITIES is ERROR_PRIORITIES and not hasattr(topics, "ERROR_PRIORITIES")
