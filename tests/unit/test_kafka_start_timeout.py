"""The listener start timeout outlasts the consumer session timeout.

A service restarted right after a crash joins its consumer group only once the
coordinator evicted the dead predecessor, ``session_timeout`` after its last
heartbeat (up to twice that on brokers that check expiry periodically); a
start timeout below that fails every such restart.
"""
import logging
import types

import pytest
from oslo_config import cfg

import notify_transport as nt
from notify_transport.drivers.kafka.options import START_TIMEOUT_MARGIN, all_opts, listener_start_timeout


def opts(**values):
    defaults = {o.dest: o.default for o in all_opts()}
    return types.SimpleNamespace(**{**defaults, **values})


def test_default_outlasts_the_default_session_timeout():
    o = opts()
    assert o.listener_start_timeout is None
    assert listener_start_timeout(o) == 2 * o.session_timeout + START_TIMEOUT_MARGIN > o.session_timeout


def test_default_follows_a_configured_session_timeout():
    assert listener_start_timeout(opts(session_timeout=6.0)) == 12.0 + START_TIMEOUT_MARGIN


def test_an_explicit_value_is_kept_and_a_short_one_warned_about(caplog):
    assert listener_start_timeout(opts(listener_start_timeout=120.0)) == 120.0
    with caplog.at_level(logging.WARNING):
        assert listener_start_timeout(opts(listener_start_timeout=5.0, session_timeout=45.0)) == 5.0
    assert "not above session_timeout" in caplog.text


@pytest.mark.parametrize("query,expected", [
    ("", 90.0 + START_TIMEOUT_MARGIN),
    ("?session_timeout=10", 20.0 + START_TIMEOUT_MARGIN),
    ("?listener_start_timeout=99", 99.0),
])
def test_the_driver_uses_it(query, expected):
    conf = cfg.ConfigOpts()
    conf([])
    transport = nt.get_notification_transport(conf, f"kafka://127.0.0.1:1/{query}")
    try:
        assert transport.driver._start_timeout == expected
    finally:
        transport.cleanup()
