"""Topic naming, the transport URL and the reader options of the pipeline (no broker needed)."""
import logging
import re

import pytest
from hypothesis import given, strategies as st
from oslo_config import cfg

from notify_transport.exceptions import ConfigurationError, InvalidTransportURL
from notify_transport.drivers import naming as topics
from notify_transport.pipeline.kafka_settings import (CONNECTOR_FETCH_WAIT_MS, CONNECTOR_PARTITION_FETCH_BYTES,
                                                     KafkaSettings)
from notify_transport.pipeline.reading import Subscription, exact_topics_pattern, source_options


def test_subscription_topics_follow_the_driver_naming():
    assert topics.subscription_topics(["notifications"], None, ["info", "error"]) == [
        "notifications.info", "notifications.error"]
    assert topics.subscription_topics(["n"], "vh1", ["info"]) == ["n.info.vh1"]
    assert topics.subscription_topics(["n"], "", ["info"]) == ["n.info"]


@pytest.mark.parametrize("topic,bases,expected", [
    ("notifications.info", (), ("notifications", "info", None)),
    ("notifications.error.vh1", (), ("notifications", "error", "vh1")),
    ("notifications.info.info", (), ("notifications", "info", "info")),
    ("a.b.info.x.y", ("a.b",), ("a.b", "info", "x.y")),
    ("versioned.error.notifications.info.vh", ("versioned.error.notifications",),
     ("versioned.error.notifications", "info", "vh")),
    ("plain", (), ("plain", None, None)),
])
def test_parse_topic(topic, bases, expected):
    assert tuple(topics.parse_topic(topic, bases)) == expected


def test_all_vhosts_pattern():
    import re
    pattern = re.compile(topics.all_vhosts_pattern(["notifications"], ["info"]))
    assert pattern.search("notifications.info") and pattern.search("notifications.info.vh")
    assert not pattern.search("notifications.error") and not pattern.search("xnotifications.info")


def test_settings_from_url_with_sasl_ssl_and_query_override():
    conf = cfg.ConfigOpts()
    settings = KafkaSettings.from_url(
        "kafka://user:s%40cret@h1:9093,h2/vh?security_protocol=SASL_SSL&sasl_mechanism=SCRAM-SHA-512"
        "&ssl_cafile=/etc/ca.pem", conf)
    assert settings.bootstrap_servers == ("h1:9093", "h2:9092") and settings.vhost == "vh"
    config = settings.librdkafka_config()
    assert config["security.protocol"] == "SASL_SSL"
    assert config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (config["sasl.username"], config["sasl.password"]) == ("user", "s@cret")
    assert config["ssl.ca.location"] == "/etc/ca.pem"
    assert "s@cret" not in repr(settings) and "s@cret" not in str(settings.describe())
    jvm = settings.spark_kafka_options()
    assert "ScramLoginModule required" in jvm["kafka.sasl.jaas.config"]
    assert jvm["kafka.ssl.truststore.location"] == "/etc/ca.pem"


def test_plaintext_settings_have_no_credentials():
    config = KafkaSettings.from_url("kafka://h:1/").librdkafka_config()
    # the driver's own connection properties, and nothing about SASL or SSL
    assert config == {"bootstrap.servers": "h:1", "security.protocol": "PLAINTEXT",
                      "client.id": "notify-transport"}
    assert KafkaSettings.from_url("kafka://h:1/").vhost is None


@pytest.mark.parametrize("url,match", [
    ("rabbit://h:5672/", "reads Kafka"),
    ("kafka:///vh", "no Kafka host"),
    ("kafka://h:1/?no_such_option=1", "no_such_option"),
])
def test_bad_urls(url, match):
    with pytest.raises(InvalidTransportURL, match=match):
        KafkaSettings.from_url(url)


def test_both_formats_get_the_same_subscription_and_offsets():
    settings = KafkaSettings.from_url("kafka://h:1/vh")
    sub = Subscription(base_topics=("notifications",), vhost="vh", priorities=("info", "error"))
    ours = source_options(settings, sub, "notify_kafka", "earliest", 100)
    theirs = source_options(settings, sub, "kafka", "earliest", 100)
    for key in ("startingOffsets", "maxOffsetsPerTrigger", "failOnDataLoss"):
        assert ours[key] == theirs[key]
    assert ours["subscribe"] == "notifications.info.vh,notifications.error.vh"
    # the connector gets the same topics as a pattern: one not created yet is no error for it
    assert ours["kafka.bootstrap.servers"] == theirs["kafka.bootstrap.servers"] == "h:1"
    assert "subscribe" not in theirs
    pattern = re.compile(theirs["subscribePattern"])
    assert all(pattern.fullmatch(topic) for topic in ours["subscribe"].split(","))
    assert not pattern.fullmatch("notifications.info.vh2") and not pattern.fullmatch("notificationsXinfo.vh")


@given(st.lists(st.text(alphabet="abz09._-", min_size=1, max_size=12), min_size=1, max_size=5, unique=True),
       st.text(alphabet="abz09._-", min_size=1, max_size=12))
def test_the_connectors_pattern_matches_exactly_the_subscribed_topics(topics, other):
    pattern = re.compile(exact_topics_pattern(topics))
    assert all(pattern.fullmatch(topic) for topic in topics)
    assert bool(pattern.fullmatch(other)) == (other in topics)


def test_subscription_validation():
    with pytest.raises(ConfigurationError, match="priorities"):
        Subscription(priorities=("loud",))
    assert Subscription(kafka_topics=("x", "y")).options() == {"subscribe": "x,y"}
    assert "subscribePattern" in Subscription(all_vhosts=True).options()


def test_session_environment_is_set_by_the_code(monkeypatch):
    import sys

    from notify_transport.pipeline import session

    from notify_transport.pipeline import spark_home

    monkeypatch.setenv("PYSPARK_PYTHON", "/elsewhere/python")
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    session.prepare_environment("local[2]")
    import os
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert os.environ["SPARK_HOME"] == str(spark_home.prepared())  # the overlay without the zipped PySpark
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    session.prepare_environment("local[2]")
    assert os.environ["SPARK_HOME"] == "/opt/spark"  # a Spark home the user chose is kept
    monkeypatch.setenv("PYSPARK_PYTHON", "/cluster/python")
    session.prepare_environment("spark://master:7077")
    assert os.environ["PYSPARK_PYTHON"] == "/cluster/python"  # the cluster's own interpreter is kept
    conf = session.default_conf("local[2]")
    assert conf["spark.ui.enabled"] == "false" and conf["spark.sql.shuffle.partitions"] == "2"
    assert "password" in conf["spark.redaction.regex"]


def test_source_decode_options_are_checked():
    from notify_transport.pipeline.decode import DECODED_SCHEMA
    from notify_transport.pipeline.source import KAFKA_SCHEMA, NotifyKafkaDataSource, SourceOptions

    base = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "n.info"}
    options = SourceOptions({**base, "decode": "TRUE", "baseTopics": "n, m"}, streaming=True)
    assert (options.decode, options.base_topics, options.decode_payload) == (True, ("n", "m"), True)
    with pytest.raises(ConfigurationError, match="decode must be true or false"):
        SourceOptions({**base, "decode": "yes"}, streaming=True)
    assert NotifyKafkaDataSource({**base, "decode": "true"}).schema() == DECODED_SCHEMA
    assert NotifyKafkaDataSource(base).schema() == KAFKA_SCHEMA


def test_source_refuses_an_option_it_does_not_take():
    from notify_transport.pipeline.source import SourceOptions

    base = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "n.info"}
    with pytest.raises(ConfigurationError, match=r"unknown option\(s\) startingoffset, x;"):
        SourceOptions({**base, "startingOffset": "earliest", "X": "1"}, streaming=False)
    # every case of a known option, and any kafka.<property>, is taken
    options = SourceOptions({**base, "STARTINGOFFSETS": "latest", "kafka.fetch.wait.max.ms": "5"}, streaming=True)
    assert (options.starting, options.kafka_config["fetch.wait.max.ms"]) == ("latest", "5")
    # a boolean option's value is true or false, not anything else read as true
    with pytest.raises(ConfigurationError, match="failOnDataLoss must be true or false"):
        SourceOptions({**base, "failOnDataLoss": "flase"}, streaming=True)
    assert SourceOptions({**base, "failOnDataLoss": "FALSE"}, streaming=True).fail_on_data_loss is False


def test_spark_options_translate_what_the_driver_builder_gives(tmp_path):
    # a CA set through librdkafka_config reaches Spark's kafka format too: one mapping, read from
    # the librdkafka properties the driver builds
    settings = KafkaSettings.from_url("kafka://h:1/?security_protocol=SSL"
                                      "&librdkafka_config=ssl.ca.location:/etc/other-ca.pem")
    assert settings.librdkafka_config()["ssl.ca.location"] == "/etc/other-ca.pem"
    jvm = settings.spark_kafka_options()
    assert jvm["kafka.security.protocol"] == "SSL"
    assert jvm["kafka.ssl.truststore.location"] == "/etc/other-ca.pem"


def test_the_connectors_fetches_do_not_wait_out_the_java_default():
    # Each connector task ends with a fetch past its range, which the broker holds for the
    # fetch wait: at the Java client's 500 ms a run over many partitions spent most of its time so.
    jvm = KafkaSettings.from_url("kafka://h:1/").spark_kafka_options()
    assert jvm["kafka.fetch.max.wait.ms"] == str(CONNECTOR_FETCH_WAIT_MS)
    assert int(jvm["kafka.fetch.max.wait.ms"]) < 500


def test_a_fetch_wait_set_for_the_driver_reaches_the_connector(caplog):
    settings = KafkaSettings.from_url("kafka://h:1/?librdkafka_config=fetch.wait.max.ms:200")
    with caplog.at_level(logging.WARNING):
        jvm = settings.spark_kafka_options()
    assert jvm["kafka.fetch.max.wait.ms"] == "200"
    assert "fetch.wait.max.ms" not in caplog.text  # translated, so not reported as ignored


def test_an_uncapped_connector_read_fetches_large_parts_of_each_partition():
    # the Java client's 1 MiB per partition made the broker answer some 800 notifications a
    # fetch; a capped read keeps it, since a fetch may run past the task's range
    sub = Subscription(base_topics=("n",), priorities=("info",))
    settings = KafkaSettings.from_url("kafka://h:1/")
    key = "kafka.max.partition.fetch.bytes"
    assert source_options(settings, sub, "kafka")[key] == str(CONNECTOR_PARTITION_FETCH_BYTES)
    assert source_options(settings, sub, "kafka", streaming=False)[key] == str(CONNECTOR_PARTITION_FETCH_BYTES)
    assert key not in source_options(settings, sub, "kafka", max_per_trigger=1000)
    assert key not in source_options(settings, sub, "notify_kafka")  # librdkafka keeps its own settings


@pytest.mark.parametrize("name", ["max.partition.fetch.bytes", "fetch.message.max.bytes"])
def test_a_partition_fetch_size_set_for_the_driver_reaches_the_connector(name, caplog):
    settings = KafkaSettings.from_url(f"kafka://h:1/?librdkafka_config={name}:2097152")
    sub = Subscription(base_topics=("n",), priorities=("info",))
    with caplog.at_level(logging.WARNING):
        for capped in (None, 1000):
            assert source_options(settings, sub, "kafka", max_per_trigger=capped)[
                "kafka.max.partition.fetch.bytes"] == "2097152"
    assert name not in caplog.text  # translated, so not reported as ignored
