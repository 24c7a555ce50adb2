"""[oslo_messaging_rabbit] options: identical to oslo.messaging 18.3.1's where names overlap,
so both libraries register them in one ConfigOpts; URL query overrides."""
import socket

import pytest
from oslo_config import cfg

from notify_transport.drivers.config import register_opts, resolve_options, shared
from notify_transport.drivers.rabbit import options as rabbit_options
from notify_transport.exceptions import ConfigurationError, InvalidTransportURL
from notify_transport.options import list_opts
from notify_transport.rpc import options as rpc_options
from notify_transport.transport import get_rpc_transport
from notify_transport.url import TransportURL

impl_rabbit = pytest.importorskip("oslo_messaging._drivers.impl_rabbit")
from oslo_messaging._drivers import amqp as oslo_amqp  # noqa: E402

GROUP = rabbit_options.GROUP


def oslo_rabbit_opts():
    return list(impl_rabbit.rabbit_opts) + list(oslo_amqp.amqp_opts)


def test_group_name_is_oslos():
    assert GROUP == "oslo_messaging_rabbit"


def test_every_oslo_option_is_the_same_setting():
    """Every oslo.messaging rabbit option is ours too, equal in all but the words of its help."""
    ours = {o.name: o for o in rabbit_options.oslo_compat_opts}
    theirs = {o.name: o for o in oslo_rabbit_opts()}
    assert set(ours) == set(theirs)
    for name, opt in theirs.items():
        assert shared(ours[name]) == opt, f"{name} differs from oslo.messaging's definition"


def test_our_own_options_have_names_oslo_does_not_use():
    theirs = {o.name for o in oslo_rabbit_opts()}
    assert not theirs & {o.name for o in rabbit_options.extra_opts}


@pytest.mark.parametrize("ours_first", [True, False])
def test_both_libraries_register_in_one_configopts(ours_first):
    conf = cfg.ConfigOpts()
    steps = [lambda: register_opts(conf, rabbit_options.all_opts(), GROUP),
             lambda: (conf.register_opts(impl_rabbit.rabbit_opts, group=GROUP),
                      conf.register_opts(oslo_amqp.amqp_opts, group=GROUP))]
    for step in steps if ours_first else reversed(steps):
        step()  # raises DuplicateOptError if any shared option differed
    conf([])
    assert conf[GROUP].heartbeat_timeout_threshold == 60
    assert conf[GROUP].publisher_confirms is True


def test_rpc_default_options_match_oslo():
    from oslo_messaging import server as oslo_server
    from oslo_messaging.rpc import client as oslo_client
    from oslo_messaging.rpc import dispatcher as oslo_dispatcher
    conf = cfg.ConfigOpts()
    rpc_options.register_client_opts(conf)
    rpc_options.register_server_opts(conf)
    conf.register_opts(oslo_client._client_opts)  # noqa: SLF001
    conf.register_opts(oslo_server._pool_opts)  # noqa: SLF001
    conf.register_opts(oslo_dispatcher._dispatcher_opts)  # noqa: SLF001
    conf([])
    assert conf.rpc_response_timeout == 60 and conf.executor_thread_pool_size == 64


@pytest.mark.parametrize("ours_first", [True, False])
def test_both_transports_in_one_configopts(ours_first):
    """Loading either library's rabbit driver first; neither connects before use."""
    import oslo_messaging
    conf = cfg.ConfigOpts()
    conf([])
    # a listening socket of the test's own as "the broker": the kernel queues any connection
    # attempt, even one given up, until it is accepted
    with socket.socket() as broker:
        broker.bind(("127.0.0.1", 0))
        broker.listen(8)
        broker.setblocking(False)
        url = f"rabbit://guest:guest@127.0.0.1:{broker.getsockname()[1]}/"
        makers = [lambda: get_rpc_transport(conf, url), lambda: oslo_messaging.get_rpc_transport(conf, url)]
        made = [make() for make in (makers if ours_first else reversed(makers))]
        for transport in made:
            transport.cleanup()
        with pytest.raises(BlockingIOError):
            broker.accept()[0].close()  # a connection was attempted


def test_url_query_overrides_options():
    conf = cfg.ConfigOpts()
    conf([])
    url = TransportURL.parse(conf, "rabbit://h:5672/?heartbeat_timeout_threshold=5"
                                   "&publisher_confirms=false&kombu_failover_strategy=shuffle")
    opts = resolve_options(conf, GROUP, rabbit_options.all_opts(), url.query, url.redacted())
    assert opts.heartbeat_timeout_threshold == 5
    assert opts.publisher_confirms is False
    assert opts.kombu_failover_strategy == "shuffle"
    assert opts.rabbit_retry_interval == 1  # untouched


def test_unknown_or_invalid_query_key_is_named():
    conf = cfg.ConfigOpts()
    conf([])
    with pytest.raises(InvalidTransportURL, match="heartbeat_timout"):
        get_rpc_transport(conf, "rabbit://h/?heartbeat_timout=5")
    with pytest.raises(InvalidTransportURL, match="kombu_failover_strategy"):
        get_rpc_transport(conf, "rabbit://h/?kombu_failover_strategy=random")


@pytest.mark.parametrize("query", ["use_queue_manager=true", "rabbit_stream_fanout=true",
                                   "rabbit_login_method=RABBIT-CR-DEMO", "kombu_compression=snappy",
                                   "rabbit_quorum_queue=true&rabbit_ha_queues=true"])
def test_unsupported_settings_are_refused_clearly(query):
    conf = cfg.ConfigOpts()
    conf([])
    with pytest.raises(ConfigurationError):
        transport = get_rpc_transport(conf, f"rabbit://h/?{query}")
        transport.driver.topology.rpc_queues(None, "t", "s")


def test_list_opts_has_the_rabbit_group():
    groups = dict(list_opts())
    names = {o.name for o in groups[GROUP]}
    assert {"heartbeat_timeout_threshold", "rabbit_qos_prefetch_count", "publisher_confirms",
            "ssl", "ssl_ca_file"} <= names


def test_list_opts_has_the_rpc_default_options():
    names = {o.name for o in dict(list_opts())[None]}
    assert {"transport_url", "rpc_response_timeout", "executor_thread_pool_size",
            "rpc_ping_enabled"} <= names
