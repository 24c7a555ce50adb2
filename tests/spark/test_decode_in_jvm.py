"""The JVM decoder (a Java UDF) gives the Python reference's rows, record for record.

Records are generated (hypothesis): oslo notifications in both envelopes and
context styles with payloads of any JSON (floats of every size, escapes,
non-ASCII, deep nesting, keys given twice), damaged variants of them and
plain garbage. Each example is one DataFrame decoded both ways in one Spark
job; :func:`decode.decode` must answer the same for every row, and the
records the JVM handed to Python must be the unusual ones only. Named cases
pin the edges where Java and Python write or read JSON differently.
"""
from __future__ import annotations

import datetime
import functools
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from notify_transport.drivers import envelope
from notify_transport.drivers.naming import PRIORITIES, parse_topic
from notify_transport.pipeline import decode
from notify_transport.pipeline.source import KAFKA_SCHEMA

BROKER_TIME = datetime.datetime(2026, 3, 1, 12, 0, 5)
BASES = ("notifications", "a.b")

json_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)
stamps = st.datetimes(min_value=datetime.datetime(1970, 1, 2), max_value=datetime.datetime(2200, 1, 1))
topics = st.sampled_from(["notifications.info", "notifications.error.vh1", "a.b.info.x.y", "plain",
                          "other.warn", "notifications.info.", "x.debug.info.v", "a.b.sample"])


@st.composite
def notifications(draw) -> bytes:
    stamp = draw(stamps)
    message = {"message_id": draw(st.uuids().map(str) | st.sampled_from(["", "m"])),
               "publisher_id": draw(st.text(max_size=8) | st.none() | st.integers()),
               "event_type": draw(st.sampled_from(["compute.instance.create.end", "é.ü"]) | st.integers()),
               "priority": draw(st.sampled_from(PRIORITIES).map(str.upper) | st.sampled_from(["info", "ß"])),
               "payload": draw(json_values),
               "timestamp": draw(st.sampled_from([str(stamp), stamp.isoformat(), "yesterday",
                                                  str(stamp.replace(microsecond=0))]))}
    for key in draw(st.sets(st.sampled_from(["publisher_id", "payload", "timestamp"]), max_size=1)):
        del message[key]
    ctxt = draw(st.none() | st.fixed_dictionaries({"request_id": st.text(max_size=8) | st.integers()}))
    version = draw(st.sampled_from([2.0, 1.0]))
    style = draw(st.sampled_from([envelope.CONTEXT_DICT, envelope.CONTEXT_PREFIXED]))
    raw = envelope.encode(message, ctxt, version, style)
    if draw(st.booleans()):  # oslo.messaging's spelling: ensure_ascii, ", " separators
        inner = json.dumps({**message, "_context": ctxt or {}})
        raw = (json.dumps({"oslo.version": "2.0", "oslo.message": inner}) if version == 2.0 else inner).encode()
    return raw


damage = st.sampled_from([
    lambda raw: raw[: len(raw) // 2],
    lambda raw: raw + b" trailing",
    lambda raw: raw + b"}",
    lambda raw: raw + b", {}",
    lambda raw: raw.replace(b'}"}', b'} x"}'),  # after the message, inside a 2.0 envelope's string
    lambda raw: raw.replace(b'"payload": {', b'"payload": {"k": 1, "k": 2, ', 1),
    lambda raw: raw.replace(b"2.0", b"3.0", 1),
    lambda raw: raw.replace(b'"', b"'"),
    lambda raw: b"\xff" + raw,
    lambda raw: raw.replace(b"{", b"[{", 1),
])
records = (notifications() | st.tuples(notifications(), damage).map(lambda pair: pair[1](pair[0]))
           | st.binary(max_size=40) | st.none()
           | st.just(b'{"message_id": "m", "event_type": "e", "priority": "info", '
                     b'"timestamp": "2026-01-01 00:00:00", "payload": {"big": 1.5e300, "small": 1e-7}}'))


def _frame(spark, values: list, topic_list: list):
    rows = [(None, v, t, 0, i, BROKER_TIME, 0) for i, (v, t) in enumerate(zip(values, topic_list))]
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def _rows(df) -> dict:
    return {row["offset"]: row.asDict() for row in df.collect()}


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(records, topics), min_size=20, max_size=80))
def test_the_jvm_decodes_every_record_as_the_reference_does(spark, generated):
    values, topic_list = [v for v, _ in generated], [t for _, t in generated]
    frame = _frame(spark, values, topic_list)
    for with_payload in (True, False):
        reference = _rows(decode.decode(frame, BASES, with_payload))
        in_jvm = _rows(decode.decode(frame, BASES, with_payload, in_jvm=True))
        for offset, row in reference.items():
            assert in_jvm[offset] == row, (values[offset], topic_list[offset])


def test_plain_oslo_notifications_never_cross_into_python(spark):
    """The records every producer sends are decoded in the JVM: the fallback sees none of them."""
    message = {"message_id": "m-1", "publisher_id": "compute.host1", "event_type": "compute.instance.update",
               "priority": "INFO", "payload": {"state": "active", "n": [1, 2.5, -3], "name": "é"},
               "timestamp": "2026-03-01 12:00:01.250000"}
    values = [envelope.encode(message, {"request_id": "req-9"}, 2.0),
              envelope.encode(message, {"request_id": "req-9"}, 1.0),
              json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps({**message, "_context": {}})}).encode()]
    frame = _frame(spark, values, ["notifications.info.vh1"] * 3)
    marked = decode.decoded_in_jvm(frame)
    assert [row[0] for row in marked.select("decoded_in_jvm").collect()] == [True, True, True]
    rows = _rows(decode.decode(frame, BASES, in_jvm=True))
    assert rows == _rows(decode.decode(frame, BASES))


@pytest.mark.parametrize("tail", [b" trailing", b"}", b"]", b" {}", b", 1", b"\n\t "])
@pytest.mark.parametrize("version", [1.0, 2.0])
def test_text_after_the_message_is_decided_as_the_reference_decides(spark, tail, version):
    """Spark SQL's JSON reader ignores what follows the first value; Python's refuses it (regression:
    the JVM decoded ``{...} trailing`` as a notification)."""
    message = {"message_id": "m-1", "event_type": "e", "priority": "INFO", "payload": {"a": [1, {"b": 2}]},
               "timestamp": "2026-03-01 12:00:01"}
    inner = json.dumps({**message, "_context": {}}) + tail.decode()
    value = (json.dumps({"oslo.version": "2.0", "oslo.message": inner}) if version == 2.0 else inner).encode()
    deep = {**message, "payload": functools.reduce(lambda acc, _: [acc], range(20), 1)}
    values = [value, envelope.encode(deep, {}, version)]
    frame = _frame(spark, values, ["notifications.info"] * 2)
    reference = _rows(decode.decode(frame, BASES))
    assert _rows(decode.decode(frame, BASES, in_jvm=True)) == reference
    assert (reference[0]["error"] is None) == (tail.strip() == b"")
    assert reference[1]["error"] is None  # nested twenty deep: decoded


@pytest.mark.parametrize("topic", ["notifications.info", "notifications.error.vh1", "a.b.info.x.y", "plain",
                                   "a.b.info", "a.b.c.info", "x.info.info", ".info", "info", "a.information.b",
                                   "notifications.info.", "a.b.sample.v.w"])
@pytest.mark.parametrize("bases", [(), BASES])
def test_topic_parts_in_sql_split_as_the_driver_naming_does(spark, topic, bases):
    from pyspark.sql import functions as F

    base, vhost = decode.topic_parts(F.col("topic"), bases)
    row = spark.createDataFrame([(topic,)], "topic string").select(base.alias("b"), vhost.alias("v")).first()
    expected = parse_topic(topic, bases)
    assert (row["b"], row["v"]) == (expected.base, expected.vhost)


def _notification(payload_json: str, **fields: str) -> str:
    message = {"message_id": "m-1", "event_type": "e", "priority": "info", "timestamp": "2026-03-01 12:00:01",
               **fields}
    head = json.dumps(message)[:-1]
    return f'{head}, "payload": {payload_json}, "_context": {{"request_id": "r"}}}}'


#: (message text, whether the JVM decodes it itself): each where Java and Python could part.
EDGES = [
    (_notification('{"n": [0, -0, 7, -12, 18446744073709551615, -9223372036854775808]}'), True),
    (_notification('{"n": 18446744073709551616}'), False),    # beyond 64 bits: Python's own encoder
    (_notification('{"n": -9223372036854775809}'), False),
    (_notification('{"f": [1.10, -0.0, 0.000, 0.0001, 12345678901234.5, 2.50]}'), True),
    (_notification('{"f": 0.00001}'), False),                 # Python writes 1e-05
    (_notification('{"f": 1e5}'), False),                     # an exponent
    (_notification('{"f": 0.1234567890123456}'), False),      # 16 significant digits
    (_notification('{"f": 1000000000000000.5}'), False),
    (_notification('{"s": "\\u001F\\u0000 \\t \\" \\\\ \\/ \\u2028 \\ud83d\\ude00 \u00e9 \u007f"}'), True),
    (_notification('{"s": "\\ud800"}'), False),            # a lone surrogate
    # longer than the scan buffer a task thread keeps (DecodeNotification.SCAN_KEPT, 65,536), escapes at its end
    (_notification(json.dumps({"long": "x" * 70_000 + '\n"\u00e9\\', "next": "\t"})), True),
    (_notification('{"k": 1, "k": 2}'), False),               # a key given twice
    (_notification('"text"'), True),
    (_notification('null'), True),
    (_notification('[]'), True),
    (_notification('{}', priority="\u00df"), False),         # not an ASCII letter: Python upper-cases it
    (_notification('{}', publisher_id="p"), True),
    (json.dumps({"message_id": "m", "event_type": "e", "priority": "info", "timestamp": "2026-03-01 12:00:01",
                 "publisher_id": {"a": [1]}, "_context": None}), True),
    (json.dumps({"message_id": "m", "event_type": "e", "priority": "info", "timestamp": "2026-03-01 12:00:01",
                 "_context": {"request_id": 5}}), True),
    (json.dumps({"message_id": "m", "event_type": "e", "priority": "info", "timestamp": "2026-03-01 12:00:01",
                 "_context_request_id": "r"}), False),        # prefixed context keys
    (json.dumps({"message_id": "m", "event_type": "e", "priority": "info", "timestamp": "2026-03-01T12:00:01",
                 }), False),                                  # not oslo's spelling of a timestamp
    (json.dumps({"message_id": "", "event_type": "e", "priority": "info", "timestamp": "2026-03-01 12:00:01",
                 }), False),
    ("\ufeff" + _notification("1"), False),                  # a byte order mark
    (_notification(functools.reduce(lambda acc, _: f"[{acc}]", range(200), "1")), False),  # deeper than 128
]


@pytest.mark.parametrize("version", [1.0, 2.0])
def test_the_edges_between_java_and_python_json_are_decided_as_the_reference_decides(spark, version):
    values = []
    for text, _ in EDGES:
        if version == 2.0:
            values.append(json.dumps({"oslo.version": "2.0", "oslo.message": text}).encode())
        else:
            values.append(text.encode())
    values += [b"\xff\xfe{}", b'{"oslo.version": "2.1", "oslo.message": "{}"}',
               b'{"oslo.version": 2.0, "oslo.message": "{}"}', b'{"oslo.version": "2.0", "oslo.message": "{}", "x": 1}']
    frame = _frame(spark, values, ["notifications.info"] * len(values))
    reference = _rows(decode.decode(frame, BASES))
    assert _rows(decode.decode(frame, BASES, in_jvm=True)) == reference
    marked = [row[0] for row in decode.decoded_in_jvm(frame).orderBy("offset").select("decoded_in_jvm").collect()]
    expected = [in_jvm for _, in_jvm in EDGES] + [False] * 4
    assert marked == expected
    assert all(reference[i]["error"] is None for i, in_jvm in enumerate(expected) if in_jvm)
