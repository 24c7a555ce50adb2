"""The librdkafka configuration built from options and the transport URL (no broker)."""
from __future__ import annotations

import logging

import pytest
from oslo_config import cfg

from notify_transport.drivers.config import resolve_options
from notify_transport.drivers.kafka import client_properties as kc
from notify_transport.drivers.kafka.options import GROUP, all_opts
from notify_transport.exceptions import ConfigurationError, InvalidTransportURL
from notify_transport.secrets import mask_properties
from notify_transport.url import TransportURL


def build(conf: cfg.ConfigOpts, url: str):
    parsed = TransportURL.parse(conf, url)
    opts = resolve_options(conf, GROUP, all_opts(), parsed.query, parsed.redacted())
    return parsed, opts


@pytest.mark.parametrize("query,linger_ms", [
    ("", 2.0), ("?producer_linger=0", 0.0), ("?producer_batch_timeout=0.01", 10.0),
    ("?producer_batch_timeout=0.01&producer_linger=0", 10.0),
])
def test_linger_from_batch_timeout_else_producer_linger(conf, query, linger_ms):
    url, opts = build(conf, "kafka://h" + query)
    assert kc.producer_config(url, opts)["linger.ms"] == linger_ms


def test_defaults_match_oslo_and_add_safe_delivery(conf):
    url, opts = build(conf, "kafka://h1:9093,h2")
    producer = kc.producer_config(url, opts)
    assert producer["bootstrap.servers"] == "h1:9093,h2:9092"
    assert producer["security.protocol"] == "PLAINTEXT"
    assert producer["acks"] == "all"
    assert producer["enable.idempotence"] is True
    assert producer["compression.codec"] == "none"
    assert producer["linger.ms"] == 2.0  # producer_batch_timeout=0 falls back to producer_linger
    assert producer["batch.num.messages"] == 16384
    # five minutes, librdkafka's own default: a cluster that takes no writes for two minutes
    # (two of three brokers down) costs no notification
    assert producer["message.timeout.ms"] == 300_000
    # what waits is held within a stated bound
    assert producer["queue.buffering.max.messages"] == 100_000
    assert producer["queue.buffering.max.kbytes"] == 128 * 1024
    assert producer["delivery.report.only.error"] is True
    assert not any(k.startswith(("sasl.", "ssl.")) for k in producer)

    consumer = kc.consumer_config(url, opts, "pool-a")
    assert consumer["group.id"] == "pool-a"
    assert consumer["enable.auto.commit"] is False
    assert consumer["enable.auto.offset.store"] is False
    assert consumer["auto.offset.reset"] == "latest"
    assert consumer["max.partition.fetch.bytes"] == 1024 * 1024
    assert consumer["session.timeout.ms"] == 45000
    assert consumer["heartbeat.interval.ms"] == 500
    assert consumer["queued.min.messages"] == 5000
    assert consumer["fetch.queue.backoff.ms"] == 10
    assert "acks" not in consumer and "group.id" not in producer


def test_prefetch_bound_from_the_url_and_consumer_config_wins(conf):
    url, opts = build(conf, "kafka://h?prefetch_messages=200&prefetch_backoff=0.05")
    consumer = kc.consumer_config(url, opts, "pool-a")
    assert (consumer["queued.min.messages"], consumer["fetch.queue.backoff.ms"]) == (200, 50)
    url, opts = build(conf, "kafka://h?consumer_config=queued.min.messages:9")
    assert kc.consumer_config(url, opts, "pool-a")["queued.min.messages"] == "9"
    with pytest.raises(InvalidTransportURL, match="prefetch_messages"):
        build(conf, "kafka://h?prefetch_messages=0")


def test_ipv6_hosts_are_bracketed(conf):
    url, _ = build(conf, "kafka://[::1]:9092,[fe80::1]")
    assert kc.bootstrap_servers(url) == "[::1]:9092,[fe80::1]:9092"


def test_no_host_is_a_clear_error(conf):
    url, _ = build(conf, "kafka://")
    with pytest.raises(ConfigurationError, match="names no Kafka broker"):
        kc.bootstrap_servers(url)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compression_codecs(conf, codec):
    url, opts = build(conf, f"kafka://h?compression_codec={codec}")
    assert kc.producer_config(url, opts)["compression.codec"] == codec


def test_unknown_codec_rejected_by_the_option_type(conf):
    with pytest.raises(InvalidTransportURL, match="compression_codec"):
        build(conf, "kafka://h?compression_codec=brotli")


def test_url_query_overrides_options(conf):
    conf.register_group(cfg.OptGroup(GROUP))
    conf.register_opts(all_opts(), group=GROUP)
    conf.set_override("producer_batch_timeout", 0.5, group=GROUP)
    conf.set_override("producer_batch_size", 100, group=GROUP)
    url, opts = build(conf, "kafka://h?producer_batch_size=7&producer_acks=all&delivery_timeout=2.5"
                            "&session_timeout=10&heartbeat_interval=1&enable_auto_commit=true")
    producer = kc.producer_config(url, opts)
    assert producer["linger.ms"] == 500.0  # from the option
    assert producer["batch.num.messages"] == 7  # the URL wins
    assert producer["message.timeout.ms"] == 2500
    consumer = kc.consumer_config(url, opts, "g")
    assert consumer["session.timeout.ms"] == 10000
    assert consumer["heartbeat.interval.ms"] == 1000
    assert consumer["enable.auto.commit"] is True


def test_unknown_query_key_names_it(conf):
    with pytest.raises(InvalidTransportURL, match="'linger_ms'"):
        build(conf, "kafka://h?linger_ms=5")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "scram-sha-512"])
def test_sasl_credentials_from_the_url(conf, mechanism):
    url, opts = build(conf, f"kafka://us%40er:p%3Ass@h1:9092,other:x@h2:9092"
                            f"?security_protocol=SASL_SSL&sasl_mechanism={mechanism}"
                            f"&ssl_cafile=/ca.pem&ssl_client_cert_file=/c.pem"
                            f"&ssl_client_key_file=/k.pem&ssl_client_key_password=kp")
    producer = kc.producer_config(url, opts)
    assert producer["security.protocol"] == "SASL_SSL"
    assert producer["sasl.mechanism"] == mechanism.upper()
    assert producer["sasl.username"] == "us@er"  # first host's credentials, percent-decoded
    assert producer["sasl.password"] == "p:ss"
    assert producer["ssl.ca.location"] == "/ca.pem"
    assert producer["ssl.certificate.location"] == "/c.pem"
    assert producer["ssl.key.location"] == "/k.pem"
    assert producer["ssl.key.password"] == "kp"
    redacted = mask_properties(producer)
    assert redacted["sasl.password"] == "***" and redacted["ssl.key.password"] == "***"
    assert "p:ss" not in repr(redacted)


def test_sasl_credentials_from_options_when_url_has_none(conf):
    url, opts = build(conf, "kafka://h?security_protocol=SASL_PLAINTEXT&sasl_username=u&sasl_password=pw")
    consumer = kc.consumer_config(url, opts, "g")
    assert (consumer["sasl.username"], consumer["sasl.password"]) == ("u", "pw")
    assert consumer["sasl.mechanism"] == "PLAIN"
    assert not any(k.startswith("ssl.") for k in consumer)


def test_sasl_without_user_is_an_error(conf):
    url, opts = build(conf, "kafka://h?security_protocol=SASL_SSL")
    with pytest.raises(ConfigurationError, match="needs a user name"):
        kc.producer_config(url, opts)


def test_unknown_sasl_mechanism(conf):
    url, opts = build(conf, "kafka://u:p@h?security_protocol=SASL_SSL&sasl_mechanism=MD5")
    with pytest.raises(ConfigurationError, match="sasl_mechanism 'MD5'"):
        kc.producer_config(url, opts)


def test_ssl_only_no_sasl_keys(conf):
    url, opts = build(conf, "kafka://u:p@h?security_protocol=SSL&ssl_cafile=/ca.pem")
    producer = kc.producer_config(url, opts)
    assert producer["ssl.ca.location"] == "/ca.pem"
    assert not any(k.startswith("sasl.") for k in producer)


def test_escape_hatches_come_last(conf):
    url, opts = build(conf, "kafka://h?librdkafka_config=socket.keepalive.enable:true,acks:1"
                            "&producer_config=linger.ms:20,enable.idempotence:false"
                            "&consumer_config=fetch.wait.max.ms:50,group.id:forced")
    producer = kc.producer_config(url, opts)
    assert producer["socket.keepalive.enable"] == "true"
    assert producer["acks"] == "1"  # the general escape hatch overrides producer_acks
    assert producer["linger.ms"] == "20"  # the producer one overrides both
    assert "fetch.wait.max.ms" not in producer
    consumer = kc.consumer_config(url, opts, "g")
    assert consumer["socket.keepalive.enable"] == "true"
    assert consumer["fetch.wait.max.ms"] == "50"
    assert consumer["group.id"] == "forced"
    assert "linger.ms" not in consumer


def test_idempotence_needs_acks_all(conf):
    url, opts = build(conf, "kafka://h?producer_acks=1")
    with pytest.raises(ConfigurationError, match="enable_idempotence requires producer_acks=all"):
        kc.producer_config(url, opts)
    url, opts = build(conf, "kafka://h?producer_acks=1&enable_idempotence=false")
    producer = kc.producer_config(url, opts)
    assert producer["acks"] == "1" and producer["enable.idempotence"] is False


def test_heartbeat_must_be_below_session_timeout(conf):
    url, opts = build(conf, "kafka://h?session_timeout=2&heartbeat_interval=2")
    with pytest.raises(ConfigurationError, match="heartbeat_interval"):
        kc.consumer_config(url, opts, "g")


def test_oslo_option_names_are_all_present():
    from oslo_messaging._drivers.kafka_driver import kafka_options

    ours = {o.name: o for o in all_opts()}
    for opt in kafka_options.KAFKA_OPTS:
        assert opt.name in ours, opt.name
        assert ours[opt.name].default == opt.default
        assert isinstance(ours[opt.name], type(opt))  # a subclass: ssl_client_key_password is secret


@pytest.mark.parametrize("text, value", [("false", False), ("True", True), ("0", False)])
def test_failure_only_reports_can_be_switched_off_from_the_url(conf, text, value):
    url, opts = build(conf, f"kafka://h?producer_config=delivery.report.only.error:{text}")
    assert kc.producer_config(url, opts)["delivery.report.only.error"] is value


def test_a_bad_boolean_property_is_a_clear_error(conf):
    url, opts = build(conf, "kafka://h?producer_config=delivery.report.only.error:maybe")
    with pytest.raises(ConfigurationError, match="delivery.report.only.error must be true or false"):
        kc.producer_config(url, opts)


def test_the_tls_options_map_to_properties_once(conf):
    from notify_transport.drivers.kafka import client_check

    url, opts = build(conf, "kafka://h?security_protocol=SSL&ssl_cafile=/ca.pem&ssl_client_key_password=pw")
    assert kc.ssl_properties(opts) == {kc.CA_FILE: "/ca.pem", kc.KEY_PASSWORD: "pw"}
    assert {k: v for k, v in kc.common_config(url, opts).items() if k.startswith("ssl.")} == kc.ssl_properties(opts)
    assert client_check.option_files(opts)[kc.CA_FILE] == "/ca.pem"
    assert set(kc.TLS_FILE_OPTIONS) < set(kc.SSL_OPTIONS)


def test_reader_and_admin_properties_come_from_the_same_builder(conf):
    url, opts = build(conf, "kafka://h?librdkafka_config=socket.timeout.ms:999&consumer_config=fetch.wait.max.ms:7")
    reader = kc.reader_config(url, opts)
    assert reader["enable.auto.commit"] is False and reader["socket.timeout.ms"] == "999"
    assert reader["fetch.wait.max.ms"] == "7" and reader["group.id"].startswith("notify-transport-reader-")
    admin = kc.admin_properties(reader)
    assert admin["socket.timeout.ms"] == "999" and admin["bootstrap.servers"] == "h:9092"
    assert not {"group.id", "fetch.wait.max.ms", "enable.auto.commit", "session.timeout.ms",
                "max.partition.fetch.bytes"} & set(admin)
    assert kc.client_config(url, opts, kc.ADMIN) == kc.admin_config(url, opts)


def test_group_protocol_classic_by_default_with_the_client_side_session(conf):
    url, opts = build(conf, "kafka://h?session_timeout=6&heartbeat_interval=1")
    consumer = kc.consumer_config(url, opts, "g")
    assert "group.protocol" not in consumer
    assert consumer["session.timeout.ms"] == 6000 and consumer["heartbeat.interval.ms"] == 1000
    assert consumer["partition.assignment.strategy"] == "roundrobin"


def test_group_protocol_consumer_leaves_session_and_assignor_to_the_broker(conf):
    """librdkafka refuses the client-side session, heartbeat and assignor under KIP-848."""
    from confluent_kafka import Consumer

    url, opts = build(conf, "kafka://h?group_protocol=consumer&session_timeout=6")
    consumer = kc.consumer_config(url, opts, "g")
    assert consumer["group.protocol"] == "consumer"
    assert not {"session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"} & set(consumer)
    Consumer({k: v for k, v in consumer.items() if k != "logger"}).close()  # librdkafka takes it


def test_an_unknown_group_protocol_is_refused(conf):
    with pytest.raises((ConfigurationError, InvalidTransportURL), match="group_protocol"):
        build(conf, "kafka://h?group_protocol=eager")


def test_the_producer_queue_bound_is_overridable(conf):
    url, opts = build(conf, "kafka://h1?producer_config=queue.buffering.max.messages:300")
    producer = kc.producer_config(url, opts)
    assert producer["queue.buffering.max.messages"] == "300"
    assert producer["queue.buffering.max.kbytes"] == 128 * 1024


@pytest.mark.parametrize("query, replacement", [
    ("producer_linger=0", "producer_config = linger.ms"),
    ("prefetch_messages=200", "consumer_config = queued.min.messages"),
    ("prefetch_backoff=0.05", "consumer_config = fetch.queue.backoff.ms"),
])
def test_a_deprecated_option_in_the_query_still_applies_and_says_what_replaces_it(conf, caplog, query,
                                                                                 replacement):
    with caplog.at_level(logging.WARNING, logger="notify_transport.drivers.config"):
        url, opts = build(conf, f"kafka://h?{query}")
    name, value = query.split("=")
    assert getattr(opts, name) == float(value)
    warnings = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert len(warnings) == 1 and "deprecated" in warnings[0] and replacement in warnings[0]


def test_the_replacement_sets_the_same_property(conf):
    _, deprecated = build(conf, "kafka://h?prefetch_messages=200")
    url, opts = build(conf, "kafka://h?consumer_config=queued.min.messages:200")
    # librdkafka takes a property's value as text or as a number alike
    assert int(kc.consumer_config(url, opts, "g")["queued.min.messages"]) == int(kc.consumer_config(
        url, deprecated, "g")["queued.min.messages"]) == 200


def _librdkafka_failures(records: list[logging.LogRecord]) -> list[logging.LogRecord]:
    return [r for r in records if r.name == kc.RDKAFKA_LOG.name and r.args and r.args[0] == "FAIL"]


def test_a_refused_connection_is_one_warning_not_librdkafka_error_lines_too(caplog) -> None:
    # before: librdkafka's own error line for every attempt (three a second while the broker is
    # away) beside the producer's warning for the same failure
    import notify_transport as nt
    from notify_transport.testing.brokers import free_port
    from waits import wait_until

    conf = cfg.ConfigOpts()
    conf([])
    transport = nt.get_notification_transport(conf, f"kafka://127.0.0.1:{free_port()}?flush_timeout=0")
    try:
        with caplog.at_level(logging.DEBUG, logger="notify_transport"):
            nt.Notifier(transport, "p", driver="messagingv2", topics=["t"]).info({}, "e.x", {})
            assert wait_until(lambda: len(_librdkafka_failures(caplog.records)) >= 2)
            assert wait_until(lambda: any(r.name.endswith(".producer") and r.levelno == logging.WARNING
                                          for r in caplog.records))
    finally:
        transport.cleanup()
    assert {r.levelno for r in _librdkafka_failures(caplog.records)} == {logging.DEBUG}


def test_only_librdkafka_connection_failures_are_lowered() -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    kc.RDKAFKA_LOG.addHandler(handler)
    level = kc.RDKAFKA_LOG.level
    kc.RDKAFKA_LOG.setLevel(logging.DEBUG)
    try:
        # how confluent-kafka calls a client's logger: log(level, "%s [%s] %s", facility, name, text)
        kc.RDKAFKA_LOG_BESIDE_ERROR_CB.log(logging.ERROR, "%s [%s] %s", "FAIL", "c#1", "Connect failed")
        kc.RDKAFKA_LOG_BESIDE_ERROR_CB.log(logging.WARNING, "%s [%s] %s", "CONFWARN", "c#1", "ignored")
    finally:
        kc.RDKAFKA_LOG.removeHandler(handler)
        kc.RDKAFKA_LOG.setLevel(level)
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.DEBUG, "FAIL [c#1] Connect failed"), (logging.WARNING, "CONFWARN [c#1] ignored")]


def test_the_cluster_client_names_a_refused_connection_in_its_error_not_in_librdkafka_error_lines(
        caplog) -> None:
    # before: every reconnect of the admin client while the cluster was away came out as an
    # error line of librdkafka's at its next request (67 after 11 s without a broker), beside
    # the request's own error, which names the same cause
    from notify_transport.drivers.kafka import ClusterAdmin
    from notify_transport.exceptions import BrokerUnreachable
    from notify_transport.testing.brokers import free_port

    admin = ClusterAdmin({"bootstrap.servers": f"127.0.0.1:{free_port()}", "reconnect.backoff.ms": 20,
                          "reconnect.backoff.max.ms": 50},
                         timeout=1.5)
    try:
        with caplog.at_level(logging.DEBUG, logger="notify_transport"):
            with pytest.raises(BrokerUnreachable, match="last error: _TRANSPORT: "):
                admin.existing_topics()
    finally:
        admin.close()
    assert len(_librdkafka_failures(caplog.records)) >= 2
    assert {r.levelno for r in _librdkafka_failures(caplog.records)} == {logging.DEBUG}
