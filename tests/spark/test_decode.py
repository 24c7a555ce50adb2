"""Decoding oslo envelopes into typed columns, inside Spark, with poison records set aside."""
import datetime
import json

from oslo_messaging._drivers import impl_kafka

from notify_transport.drivers import envelope
from notify_transport.pipeline import decode
from notify_transport.pipeline.source import KAFKA_SCHEMA

BROKER_TIME = datetime.datetime(2026, 3, 1, 12, 0, 5)
MSG = {"message_id": "m-1", "publisher_id": "compute.host1", "event_type": "compute.instance.update",
       "priority": "INFO", "payload": {"state": "active", "n": [1, 2]},
       "timestamp": "2026-03-01 12:00:01.250000"}


def _record(value, offset, topic="notifications.info.vh1", key=None):
    return (key, value, topic, 0, offset, BROKER_TIME, 0)


def _frame(spark, values, topic="notifications.info.vh1"):
    rows = [_record(v, i, topic) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def test_all_envelope_styles_decode_to_the_same_columns(spark):
    oslo_packed = json.dumps(impl_kafka.pack_message({"request_id": "req-9"}, dict(MSG))).encode()
    values = [
        envelope.encode(MSG, {"request_id": "req-9"}, 2.0),
        envelope.encode(MSG, {"request_id": "req-9"}, 1.0),
        envelope.encode(MSG, {"request_id": "req-9"}, 1.0, envelope.CONTEXT_PREFIXED),
        oslo_packed,
    ]
    rows = decode.notifications(decode.decode(_frame(spark, values), ["notifications"])).collect()
    assert len(rows) == 4
    for row in rows:
        assert (row.message_id, row.publisher_id, row.event_type, row.priority) == (
            "m-1", "compute.host1", "compute.instance.update", "INFO")
        assert json.loads(row.payload) == MSG["payload"]
        assert row.timestamp == datetime.datetime(2026, 3, 1, 12, 0, 1, 250000)
        assert row.kafka_timestamp == BROKER_TIME
        assert (row.topic, row.vhost, row.base_topic, row.request_id) == (
            "notifications.info.vh1", "vh1", "notifications", "req-9")
    # oslo.messaging's Kafka driver sends the 2.0 envelope too
    assert sorted(r.envelope for r in rows) == ["1.0", "1.0", "2.0", "2.0"]


def test_poison_records_go_to_errors_with_their_coordinates(spark):
    good = envelope.encode(MSG, {}, 2.0)
    poison = {
        1: b"not json at all",
        2: b"[1, 2, 3]",
        3: envelope.encode({**MSG, "event_type": None}, {}, 2.0),
        4: envelope.encode({k: v for k, v in MSG.items() if k != "message_id"}, {}, 2.0),
        5: envelope.encode({**MSG, "timestamp": "yesterday"}, {}, 2.0),
        6: json.dumps({"oslo.version": "3.0", "oslo.message": "{}"}).encode(),
        7: None,
        8: b"\xff\xfe binary",
    }
    values = [good] + [poison[i] for i in range(1, 9)] + [good]
    decoded = decode.decode(_frame(spark, values, "notifications.error"))
    assert decode.notifications(decoded).count() == 2
    errors = {r.offset: r for r in decode.errors(decoded).collect()}
    assert sorted(errors) == list(range(1, 9))
    for offset, row in errors.items():
        assert (row.topic, row.partition, row.kafka_timestamp) == ("notifications.error", 0, BROKER_TIME)
        assert row.value == poison[offset] and row.error
    assert "JSON" in errors[1].error
    assert "event_type" in errors[3].error
    assert "message_id" in errors[4].error
    assert "timestamp" in errors[5].error
    assert "version" in errors[6].error
    assert "no value" in errors[7].error


def test_timestamp_formats():
    assert decode.parse_timestamp("1970-01-01 00:00:01") == 1_000_000
    assert decode.parse_timestamp("1970-01-01 00:00:01.000002") == 1_000_002
    assert decode.parse_timestamp("1970-01-01T01:00:01+01:00") == 1_000_000
    assert decode.parse_timestamp("1970-01-01T00:00:01Z") == 1_000_000
