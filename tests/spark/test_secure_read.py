"""The pipeline reads a secured cluster from the same URL as the driver: SASL/PLAIN over TLS.

The session's Apache Kafka has a listener that accepts only authenticated
clients over TLS (``tests/session_brokers.py``). Notifications sent there by
the driver's Notifier are read back by Spark's connector (the ``kafka.``
options built from the URL: JAAS line, PEM trust store) and by ``notify_kafka``
(the driver's own librdkafka properties), with identical rows; a wrong password
fails the read instead of reading nothing.
"""
from __future__ import annotations

import pytest
from oslo_config import cfg
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException

import notify_transport
from notify_transport.pipeline.kafka_settings import KafkaSettings
from notify_transport.pipeline.reading import read_decoded, source_options
from notify_transport.pipeline.topics import Subscription
from session_brokers import SECURE_PASSWORD, SECURE_USER
from spark_support import NotificationProducer

COUNT = 30
#: How a failed Spark job reaches Python: an error PySpark recognised, or the JVM's own exception.
SPARK_ERRORS = (PySparkException, Py4JJavaError)


@pytest.fixture(scope="module")
def secured_topic(apache_kafka):
    """A base topic with COUNT notifications sent over the secure listener."""
    base = NotificationProducer.unique_base("secure")
    transport = notify_transport.get_notification_transport(cfg.ConfigOpts(), apache_kafka.secure_url(SECURE_USER))
    try:
        notifier = notify_transport.Notifier(transport, publisher_id="secure.host", topics=[base],
                                             driver="messaging")
        for i in range(COUNT):
            notifier.info({"request_id": f"req-{i}"}, "secure.read", {"i": i})
    finally:
        transport.cleanup()  # flushes: every notification is on the broker
    return base


def decoded_rows(spark, url: str, base: str, fmt: str) -> list[tuple]:
    rows = read_decoded(spark, KafkaSettings.from_url(url), Subscription(base_topics=(base,)),
                        streaming=False, fmt=fmt).collect()
    return sorted((r.partition, r.offset, r.event_type, r.payload, r.request_id, r.error) for r in rows)


def test_both_readers_read_the_secured_topic_alike(spark, connector, apache_kafka, secured_topic):
    url = apache_kafka.secure_url(SECURE_USER)
    through_connector = decoded_rows(spark, url, secured_topic, connector)
    assert [(r[2], r[3], r[4], r[5]) for r in through_connector] == [
        ("secure.read", f'{{"i":{i}}}', f"req-{i}", None) for i in range(COUNT)]
    assert decoded_rows(spark, url, secured_topic, "notify_kafka") == through_connector


def test_a_wrong_password_fails_the_read_and_names_the_cause(spark, connector, apache_kafka, secured_topic):
    wrong = "not-" + SECURE_PASSWORD
    settings = KafkaSettings.from_url(apache_kafka.secure_url(SECURE_USER, password=wrong))
    subscription = Subscription(base_topics=(secured_topic,))
    with pytest.raises(SPARK_ERRORS) as refused:
        read_decoded(spark, settings, subscription, streaming=False, fmt=connector).collect()
    assert wrong not in str(refused.value)
    # notify_kafka's planner asks for the partitions with the driver's admin client; a short
    # metadata wait keeps the test short, and the error gives the client's last error, not a timeout alone
    options = {**source_options(settings, subscription, "notify_kafka", streaming=False),
               "metadataTimeoutMs": "5000"}
    with pytest.raises(SPARK_ERRORS) as refused:
        spark.read.format("notify_kafka").options(**options).load().collect()
    text = str(refused.value)
    assert "last error: _AUTHENTICATION: " in text and wrong not in text
