"""Config compatibility with oslo.messaging and URL-query overrides."""
import pytest
from oslo_config import cfg

from notify_transport import InvalidTransportURL, TransportURL, list_opts
from notify_transport.drivers.config import register_opts, resolve_options, shared
from notify_transport.drivers.kafka import options as kafka_options
from notify_transport.options import notifier_opts, transport_opts


def test_compat_opts_are_oslo_s_settings():
    """Equal to oslo.messaging's in all but the words of their help (and ours mask the key password)."""
    from oslo_messaging import transport as om_transport
    from oslo_messaging._drivers.kafka_driver import kafka_options as om_kafka
    from oslo_messaging.notify import notifier as om_notifier
    assert [shared(o) for o in kafka_options.oslo_compat_opts] == om_kafka.KAFKA_OPTS
    assert [shared(o) for o in notifier_opts] == om_notifier._notifier_opts
    assert [shared(o) for o in transport_opts] == om_transport._transport_opts


@pytest.mark.parametrize("order", ["ours_first", "oslo_first"])
def test_both_libraries_register_in_one_conf(order):
    import oslo_messaging
    from notify_transport import get_notification_transport
    conf = cfg.ConfigOpts()
    conf([])
    url = "kafka://127.0.0.1:1"
    steps = [lambda: get_notification_transport(conf, url),
             lambda: oslo_messaging.get_notification_transport(conf, url)]
    if order == "oslo_first":
        steps.reverse()
    for step in steps:
        step().cleanup()
    assert conf.oslo_messaging_kafka.consumer_group == "oslo_messaging_consumer"


def test_query_overrides_and_converts():
    conf = cfg.ConfigOpts()
    url = TransportURL.parse(None, "kafka://h?max_poll_records=7&enable_auto_commit=true&compression_codec=lz4")
    opts = resolve_options(conf, kafka_options.GROUP, kafka_options.all_opts(), url.query)
    assert opts.max_poll_records == 7 and opts.enable_auto_commit is True
    assert opts.compression_codec == "lz4"
    assert opts.consumer_group == "oslo_messaging_consumer"


def test_unknown_query_key_is_named():
    conf = cfg.ConfigOpts()
    with pytest.raises(InvalidTransportURL, match="'max_pol_records'"):
        resolve_options(conf, kafka_options.GROUP, kafka_options.all_opts(), {"max_pol_records": "1"})


@pytest.mark.parametrize("key,val", [("max_poll_records", "many"), ("compression_codec", "brotli"),
                                     ("enable_auto_commit", "maybe")])
def test_bad_query_value_rejected(key, val):
    with pytest.raises(InvalidTransportURL, match=key):
        resolve_options(cfg.ConfigOpts(), kafka_options.GROUP, kafka_options.all_opts(), {key: val})


def test_conflicting_registration_is_a_clear_error():
    conf = cfg.ConfigOpts()
    conf.register_opt(cfg.IntOpt("consumer_group", default=3), group=kafka_options.GROUP)
    with pytest.raises(ValueError, match="consumer_group"):
        register_opts(conf, kafka_options.all_opts(), kafka_options.GROUP)


def test_list_opts_for_generator():
    groups = dict(list_opts())
    assert None in groups and "oslo_messaging_notifications" in groups
    names = {o.name for o in groups["oslo_messaging_kafka"]}
    assert {"kafka_max_fetch_bytes", "producer_acks", "enable_idempotence"} <= names
