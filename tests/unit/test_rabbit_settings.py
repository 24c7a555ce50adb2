"""Connection settings from the URL and options: defaults as oslo's, TLS, failover, no secrets shown."""
import ssl

import pytest
from oslo_config import cfg

from notify_transport.drivers.config import resolve_options
from notify_transport.drivers.rabbit.connection import describe
from notify_transport.drivers.rabbit.options import GROUP, all_opts
from notify_transport.drivers.rabbit.settings import PIKA_CHECK_GRACE, RabbitSettings, build_ssl_context, pika_heartbeat
from notify_transport.exceptions import ConfigurationError
from notify_transport.url import TransportURL


def settings(url, **query):
    conf = cfg.ConfigOpts()
    conf([])
    parsed = TransportURL.parse(conf, url)
    merged = dict(parsed.query, **{k: str(v) for k, v in query.items()})
    return RabbitSettings(parsed, resolve_options(conf, GROUP, all_opts(), merged))


def test_defaults_like_oslo():
    s = settings("rabbit://")
    (endpoint,) = s.endpoints
    assert (endpoint.host, endpoint.port, endpoint.username, endpoint.password) == \
        ("localhost", 5672, "guest", "guest")
    assert s.virtual_host == "/"
    assert settings("rabbit://h:1234").endpoints[0].username == "guest"
    assert settings("rabbit://h/").virtual_host == "/"
    assert settings("rabbit://h//").virtual_host == "/"
    assert settings("rabbit://h/nova").virtual_host == "nova"
    assert settings("rabbit://h/a%2Fb").virtual_host == "a/b"


def test_parameters_carry_vhost_heartbeat_and_credentials():
    s = settings("rabbit://user:p%40ss@[::1]:5673/vh", heartbeat_timeout_threshold=10,
                 connection_timeout=2)
    params = s.parameters(s.endpoints[0], "send")
    # pika checks every heartbeat + 5 s: a threshold of 10 s negotiates 4 s (see pika_heartbeat)
    assert (params.host, params.port, params.virtual_host, params.heartbeat) == ("::1", 5673, "vh", 4)
    assert (params.credentials.username, params.credentials.password) == ("user", "p@ss")
    assert params.socket_timeout == 2
    assert params.client_properties["connection_name"].split(":")[2] == "send"


def test_secrets_never_in_reprs_or_logs_text():
    s = settings("rabbit://admin:topsecret@h1:5672,admin:topsecret@h2:5672/")
    assert "topsecret" not in repr(s.endpoints) + s.url_for_logs
    assert "topsecret" not in repr(s.parameters(s.endpoints[0], "x"))


def test_failover_order_and_backoff():
    s = settings("rabbit://h1,h2,h3", rabbit_retry_interval=2, rabbit_retry_backoff=3,
                 rabbit_interval_max=7)
    assert sorted(e.host for e in s.next_order()) == ["h1", "h2", "h3"]
    assert s.next_order() == s.next_order()  # round-robin keeps the order
    assert [s.reconnect_backoff.delay(n) for n in range(5)] == [0.0, 2.0, 5.0, 7.0, 7.0]
    shuffled = settings("rabbit://h1,h2,h3,h4,h5,h6", kombu_failover_strategy="shuffle")
    orders = {tuple(e.host for e in shuffled.next_order()) for _ in range(20)}
    assert len(orders) > 1


def test_login_methods():
    assert settings("rabbit://h", rabbit_login_method="PLAIN").opts.rabbit_login_method == "PLAIN"
    s = settings("rabbit://h", rabbit_login_method="EXTERNAL")
    assert s.parameters(s.endpoints[0], "x").credentials.TYPE == "EXTERNAL"
    with pytest.raises(ConfigurationError, match="RABBIT-CR-DEMO"):
        settings("rabbit://h", rabbit_login_method="RABBIT-CR-DEMO")


def test_ssl_contexts(tmp_path):
    s = settings("rabbit://h", ssl=True)
    params = s.parameters(s.endpoints[0], "x")
    assert params.ssl_options.context.verify_mode == ssl.CERT_NONE  # oslo: no CA file, no check
    opts = settings("rabbit://h").opts
    opts.ssl_version = "tlsv1_2"
    ctx = build_ssl_context(opts)
    assert ctx.minimum_version == ctx.maximum_version == ssl.TLSVersion.TLSv1_2
    opts.ssl_version = "sslv2"
    with pytest.raises(ConfigurationError, match="SSL version"):
        build_ssl_context(opts)
    opts.ssl_version = ""
    opts.ssl_ca_file = str(tmp_path / "missing-ca.pem")
    with pytest.raises(OSError):
        build_ssl_context(opts)


def test_describe_pika_errors_without_noise():
    import pika.exceptions as pex
    assert describe(pex.ConnectionClosedByBroker(320, "CONNECTION_FORCED - shutdown")) == \
        "(320) CONNECTION_FORCED - shutdown"
    assert describe(ConnectionRefusedError(111, "Connection refused")) == "Connection refused"
    assert describe(None) == "unknown error"


@pytest.mark.parametrize("threshold", [7, 10, 60, 600])
def test_a_silent_broker_is_noticed_within_two_thresholds(threshold):
    """pika's liveness check runs every heartbeat + 5 s and needs a whole quiet period: at worst two,
    with a second to spare for a late timer."""
    check_period = pika_heartbeat(threshold) + PIKA_CHECK_GRACE
    assert 2 * check_period <= 2 * (threshold - 1)
    assert pika_heartbeat(threshold) >= 1


def test_heartbeats_off_stay_off_and_short_thresholds_get_the_shortest_heartbeat():
    assert pika_heartbeat(0) == 0
    assert pika_heartbeat(1) == pika_heartbeat(7) == 1
