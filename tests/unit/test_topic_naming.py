"""Topic naming shared by the drivers, the CLI and the pipeline: built and read back."""
from hypothesis import given, settings
from hypothesis import strategies as st

from notify_transport.drivers.naming import (PRIORITIES, TopicParts, all_vhosts_pattern, notification_topic,
                                             parse_topic, subscription_topics)

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
