"""oslo notification envelopes to typed columns: in Python (an Arrow UDF) or in the JVM.

The reference is :func:`notify_transport.drivers.envelope.decode_notification`
(``messagingv2`` and ``messaging``, both context styles), run by
:func:`decode_batches` inside ``mapInArrow`` so records cross between the JVM
and Python in Arrow batches. A record that is not a notification keeps its
coordinates and bytes and gets an ``error`` text instead of a crash;
:func:`notifications` and :func:`errors` split the two.

:func:`decode` with ``in_jvm`` decodes in the JVM instead: Spark SQL's JSON
reader parses the envelope and the message, and a record whose bytes hold
anything on which the two readers could answer differently (a number in
exponent form, an escaped control character, a payload that is a string,
prefixed context keys, keys given twice, text that is not UTF-8, text after
the message, nesting deeper than the JVM checks, anything Spark SQL cannot
parse) is decoded by the Python reference instead; only those records' bytes
cross into Python. A property test compares its rows with the reference's.
It is not the pipeline's default (:mod:`.reading`): it gives the reference's
rows, but it is the slower of the two (figures in the pipeline docs): Spark's
JSON reader building variants, the guards' regular expressions over every
message and the fallback's per-batch crossing cost more than orjson in Python.
"""
from __future__ import annotations

import functools
import operator
import re
from typing import Any, Iterable, Iterator, Sequence

from pyspark.sql.types import (BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from notify_transport import times
from notify_transport.drivers import envelope
from notify_transport.exceptions import DecodeError
from notify_transport.drivers.naming import TopicParts, parse_topic

#: Decoded columns: the notification, its Kafka coordinates, and for undecodable records
#: the error with the record's key and value (null for notifications).
DECODED_SCHEMA = StructType([
    StructField("message_id", StringType()), StructField("publisher_id", StringType()),
    StructField("event_type", StringType()), StructField("priority", StringType()),
    StructField("payload", StringType()), StructField("timestamp", TimestampType()),
    StructField("request_id", StringType()), StructField("envelope", StringType()),
    StructField("topic", StringType()), StructField("partition", IntegerType()),
    StructField("offset", LongType()), StructField("kafka_timestamp", TimestampType()),
    StructField("vhost", StringType()), StructField("base_topic", StringType()),
    StructField("error", StringType()), StructField("key", BinaryType()),
    StructField("value", BinaryType()),
])

NOTIFICATION_COLUMNS = ["message_id", "publisher_id", "event_type", "priority", "payload",
                        "timestamp", "request_id", "envelope", "topic", "partition", "offset",
                        "kafka_timestamp", "vhost", "base_topic"]
ERROR_COLUMNS = ["topic", "partition", "offset", "kafka_timestamp", "vhost", "error", "key", "value"]

def _payload_json_stdlib(value: Any) -> str:
    return envelope.dumps(value)


try:  # orjson is a dependency of the package; the standard library stays the fallback
    import orjson

    def _payload_json(value: Any) -> str:
        """Compact JSON of a decoded payload (several times faster than the json module)."""
        try:
            return orjson.dumps(value, default=envelope.to_primitive).decode("utf-8")
        except orjson.JSONEncodeError:  # e.g. integers beyond 64 bits
            return envelope.dumps(value)
except ImportError:  # pragma: no cover
    _payload_json = _payload_json_stdlib


#: A 2.0 envelope starts with its version key (oslo.messaging and this library write it first).
_ENVELOPE_KEY = f'"{envelope.VERSION_KEY}"'.encode()
_ENVELOPE_SNIFF = 32

def parse_timestamp(value: Any) -> int:
    """Microseconds since the epoch of an oslo timestamp (:func:`~notify_transport.times.timestamp_micros`);
    DecodeError when it is not one."""
    if not isinstance(value, str):
        raise DecodeError(f"timestamp is {type(value).__name__}, not a string")
    try:
        return times.timestamp_micros(value)
    except ValueError:
        raise DecodeError(f"invalid timestamp {value!r}") from None


def decode_record(raw: bytes | None, with_payload: bool = True) -> tuple:
    """``(message_id, publisher_id, event_type, priority, payload, timestamp, request_id, envelope)``.

    ``timestamp`` is the notification's timestamp string as sent (checked by
    :func:`parse_timestamps`); ``payload`` is JSON, or None without ``with_payload``.
    Raises :class:`DecodeError` when ``raw`` is not an oslo notification.
    """
    if raw is None:
        raise DecodeError("record has no value")
    ctxt, message = envelope.decode_notification(raw)
    message_id = message.get("message_id")
    if not isinstance(message_id, str) or not message_id:
        raise DecodeError("not a notification: missing or non-string message_id")
    timestamp = message.get("timestamp")
    if not isinstance(timestamp, str):
        raise DecodeError(f"timestamp is {type(timestamp).__name__}, not a string")
    publisher_id = message.get("publisher_id")
    request_id = ctxt.get("request_id")
    return (message_id, publisher_id if isinstance(publisher_id, str) else None,
            message["event_type"], message["priority"].upper(),
            _payload_json(message.get("payload")) if with_payload else None, timestamp,
            request_id if isinstance(request_id, str) else None,
            "2.0" if _ENVELOPE_KEY in raw[:_ENVELOPE_SNIFF] else "1.0")


def parse_timestamps(texts: list, errors: list):
    """Arrow ``timestamp[us, UTC]`` of oslo timestamp strings; unparsable ones become errors.

    Arrow parses the usual ``YYYY-MM-DD HH:MM:SS.ffffff`` column at once; a
    column with anything else (an offset, garbage) goes through
    :func:`parse_timestamp` row by row, which sets ``errors[i]`` for a bad one.
    """
    import pyarrow as pa

    target = pa.timestamp("us", tz="UTC")
    try:
        return pa.array(texts, pa.string()).cast(pa.timestamp("us")).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    micros: list[int | None] = []
    for i, text in enumerate(texts):
        if text is None:
            micros.append(None)
            continue
        try:
            micros.append(parse_timestamp(text))
        except DecodeError as exc:
            errors[i] = str(exc)
            micros.append(None)
    return pa.array(micros, pa.int64()).cast(target)


def decode_batches(batches: Iterable, base_topics: Sequence[str] = (), with_payload: bool = True) -> Iterator:
    """``mapInArrow`` function: Kafka-column batches in, :data:`DECODED_SCHEMA` batches out."""
    import pyarrow as pa

    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(DECODED_SCHEMA, timezone="UTC")
    topic_parts: dict[str, TopicParts] = {}
    empty = (None,) * 8
    for batch in batches:
        values = batch.column("value").to_pylist()
        topics = batch.column("topic").to_pylist()
        decoded: list[list] = [[] for _ in range(8)]
        vhosts, bases, errors = [], [], []
        for raw, topic in zip(values, topics):
            parts = topic_parts.get(topic)
            if parts is None:
                parts = topic_parts[topic] = parse_topic(topic or "", base_topics)
            bases.append(parts.base)
            vhosts.append(parts.vhost)
            try:
                row = decode_record(raw, with_payload)
                error = None
            except DecodeError as exc:
                row, error = empty, str(exc)
            except Exception as exc:  # noqa: BLE001 - a record must never fail the job
                row, error = empty, f"{type(exc).__name__}: {exc}"
            errors.append(error)
            for column, value in zip(decoded, row):
                column.append(value)
        timestamps = parse_timestamps(decoded[5], errors)
        is_error = pa.array([e is not None for e in errors], pa.bool_())
        no_bytes = pa.nulls(len(errors), pa.binary())
        arrays = [
            *[pa.array(decoded[i], pa.string()) for i in range(5)],
            timestamps,
            pa.array(decoded[6], pa.string()),
            pa.array(decoded[7], pa.string()),
            batch.column("topic"), batch.column("partition"), batch.column("offset"),
            batch.column("timestamp"),
            pa.array(vhosts, pa.string()), pa.array(bases, pa.string()),
            pa.array(errors, pa.string()),
            _where(is_error, batch.column("key"), no_bytes), _where(is_error, batch.column("value"), no_bytes),
        ]
        # A record whose timestamp turned out bad is an error row: clear its notification columns.
        if any(e is not None for e in errors):
            arrays[:8] = [_where(is_error, pa.nulls(len(errors), a.type), a) for a in arrays[:8]]
        yield pa.RecordBatch.from_arrays([a.cast(f.type) for a, f in zip(arrays, schema)],
                                         schema=schema)


def _where(mask, when_true, when_false):
    import pyarrow.compute as pc

    return pc.if_else(mask, when_true, when_false)


def decode(kafka_df, base_topics: Sequence[str] = (), with_payload: bool = True, in_jvm: bool = False):
    """Decoded DataFrame (:data:`DECODED_SCHEMA`) of a DataFrame with Spark's Kafka columns.

    Without ``with_payload`` the ``payload`` column is null, which saves
    re-serializing it when only the other columns are used (the statistics).
    ``in_jvm`` decodes with Spark SQL, handing Python only the records the
    module docstring lists (meant to give the reference's rows; see there).
    """
    bases = tuple(base_topics)
    kafka_df = kafka_df.select("key", "value", "topic", "partition", "offset", "timestamp")
    if in_jvm:
        return _decode_in_jvm(kafka_df, bases, with_payload)
    return kafka_df.mapInArrow(lambda batches: decode_batches(batches, bases, with_payload), DECODED_SCHEMA)


# -- decoding in the JVM -------------------------------------------------------------------------

#: The body of a JSON string literal, written as runs of plain characters between escapes: Java's
#: regex engine takes a run in one step, where one alternative per character cost it about a third
#: more on 1.3 KB notifications.
_STRING_BODY = r'[^"\\]*+(?:\\.[^"\\]*+)*+'
#: A 2.0 envelope as oslo.messaging and this library write it: the version, then one JSON string.
_V2_ENVELOPE = r'^\{"oslo\.version": "2\.0", "oslo\.message": "' + _STRING_BODY + r'"\}\z'
#: In the record's bytes: a UTF-16 surrogate escape, at either level of escaping (a lone one is no text).
_SURROGATE = r'\\u[dD][89a-fA-F]'
#: In the message text: what Spark SQL's JSON reader and Python's may read or write differently.
#: Each is a scan of its own: one alternation of them all cost the JVM almost twice as long.
_PYTHON_ONLY = (
    r'\\u00[01][0-9a-fA-F]',            # an escaped control character: the case of its hex digits
    r'[:,\[]\s*-?[0-9.]+[eE]',            # a number in exponent form
    r'[:,\[]\s*-?(?:NaN|Infinity)',      # not JSON, though both readers could take it
    r'"_context_',                      # context as prefixed keys: merged by the reference only
    r'"payload":\s*"',                  # a payload that is a string (the JVM reads it unquoted)
)
#: In the payload as Spark writes it back: a double outside Java's plain notation, or a character
#: beyond the Basic Multilingual Plane (Spark escapes it as a surrogate pair, Python writes it as is).
_JAVA_WRITES_OTHERWISE = r'[:,\[]-?[0-9]+\.[0-9]+E|\\u[dD][89a-fA-F]'
#: The notification's timestamp as oslo writes it (``str(utcnow())``), which the JVM parses alike.
_OSLO_TIMESTAMP = r'^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{6})?\z'
_MESSAGE_FIELDS = ("message_id", "publisher_id", "event_type", "priority", "timestamp", "_context")
#: Spark's JSON reader held to what Python's json module accepts.
_STRICT_JSON = {"allowSingleQuotes": "false", "allowNonNumericNumbers": "false",
                "allowUnquotedControlChars": "false", "mode": "PERMISSIVE"}
#: A JSON string literal, and the innermost object or array of a text with its strings taken out.
_STRING_LITERAL = '"' + _STRING_BODY + '"'
_INNERMOST = r'\{[^{}\[\]]*\}|\[[^{}\[\]]*\]'
#: How deeply nested a message may be for the JVM to vouch for it alone (deeper ones go to Python).
_NESTING_CHECKED = 12


def _jvm_frame(kafka_df, bases: tuple[str, ...], with_payload: bool):
    """``kafka_df`` with ``_ok`` (whether the JVM vouches for the record) and, prefixed ``_jvm_``,
    the :data:`DECODED_SCHEMA` columns as Spark SQL reads them (meaningful where ``_ok``).

    Built in stages, one projection each: what several later expressions read
    (the text, the message parsed once, each field's JSON type and string) is a
    column of its own. In one projection Spark evaluates a shared parse again
    under every ``AND`` or ``CASE`` that uses it (it only shares subexpressions
    evaluated unconditionally), which made the message parse a dozen times.
    """
    from pyspark.sql import functions as F

    col = F.col
    frame = kafka_df.withColumn("_text", col("value").cast("string"))
    text = col("_text")
    outer = F.from_json(text, "`oslo.message` string", _STRICT_JSON)
    frame = frame.withColumns({
        "_inner": (F.when(text.rlike(_V2_ENVELOPE), outer["oslo.message"])
                   .when(~(F.instr(text, '"oslo.version"') > 0) & ~(F.instr(text, '"oslo.message"') > 0), text)),
        "_text_ok": F.is_valid_utf8(text) & ~text.rlike(_SURROGATE),
    })
    inner = col("_inner")
    schema = ", ".join(f"`{name}` variant" for name in _MESSAGE_FIELDS) + ", payload string"
    frame = frame.withColumns({
        "_message": F.from_json(inner, schema, _STRICT_JSON),
        "_inner_ok": inner.isNotNull() & ~functools.reduce(operator.or_, [inner.rlike(p) for p in _PYTHON_ONLY]),
        "_skeleton": F.regexp_replace(F.regexp_replace(inner, _STRING_LITERAL, "s"), r"\s+", ""),
    })
    message = col("_message")
    fields = ("message_id", "publisher_id", "event_type", "priority", "timestamp", "_context")
    frame = frame.withColumns({
        **{f"_kind{name}": F.schema_of_variant(message[name]) for name in fields},
        **{f"_str{name}": F.try_variant_get(message[name], "$", "string") for name in fields[:-1]},
        "_payload": F.coalesce(message["payload"], F.lit("null")),
        "_request_kind": F.schema_of_variant(F.variant_get(message["_context"], "$.request_id", "variant")),
        "_request_id": F.try_variant_get(message["_context"], "$.request_id", "string"),
        "_has_context": message["_context"].isNotNull(),
        "_one_object": _one_object(col("_skeleton")),
    })
    frame = frame.withColumn("_stamp", F.try_to_timestamp(col("_strtimestamp"),
                                                          F.lit("yyyy-MM-dd HH:mm:ss[.SSSSSS]")))

    def kind(field):  # the JSON type of a top-level field: STRING, OBJECT<...>, ..., VOID; null if absent
        return col(f"_kind{field}")

    payload = col("_payload")
    ok = (col("_text_ok") & col("_inner_ok") & col("_one_object") & message.isNotNull()
          & (kind("message_id") == "STRING") & (F.length(col("_strmessage_id")) > 0)
          & (kind("event_type") == "STRING") & (kind("priority") == "STRING")
          & col("_strpriority").rlike("^[A-Za-z]*\\z")
          & (kind("timestamp") == "STRING") & col("_strtimestamp").rlike(_OSLO_TIMESTAMP)
          & col("_stamp").isNotNull()
          & (~col("_has_context") | kind("_context").startswith("OBJECT") | (kind("_context") == "VOID"))
          & ~payload.rlike(_JAVA_WRITES_OTHERWISE) & F.try_parse_json(payload).isNotNull())
    base, vhost = topic_parts(col("topic"), bases)
    value = col("value")
    columns = {
        "message_id": col("_strmessage_id"),
        "publisher_id": F.when(kind("publisher_id") == "STRING", col("_strpublisher_id")),
        "event_type": col("_strevent_type"),
        "priority": F.upper(col("_strpriority")),
        "payload": payload if with_payload else F.lit(None).cast("string"),
        "timestamp": col("_stamp"),
        "request_id": F.when(col("_request_kind") == "STRING", col("_request_id")),
        "envelope": F.when(F.instr(F.substring(value, 1, _ENVELOPE_SNIFF).cast("string"),
                                   _ENVELOPE_KEY.decode()) > 0, F.lit("2.0")).otherwise(F.lit("1.0")),
        "topic": col("topic"), "partition": col("partition"), "offset": col("offset"),
        "kafka_timestamp": col("timestamp"), "vhost": vhost, "base_topic": base,
        "error": F.lit(None).cast("string"),  # where the JVM vouches, there is none
    }
    return frame.select(*kafka_df.columns, F.coalesce(ok, F.lit(False)).alias("_ok"),
                        *[column.alias(f"_jvm_{name}") for name, column in columns.items()])


def _one_object(skeleton):
    """True where ``skeleton`` (a message with its strings and whitespace taken out) is one JSON
    object with nothing after it.

    Spark SQL's JSON reader stops at the end of the first value and ignores
    what follows (``{...} trailing``), where Python's refuses the record. The
    brackets are matched by folding innermost pairs; a skeleton nested deeper
    than :data:`_NESTING_CHECKED` is not vouched for, so Python decides it.
    """
    from pyspark.sql import functions as F

    folded = skeleton
    for _ in range(_NESTING_CHECKED):
        folded = F.regexp_replace(folded, _INNERMOST, "o")
    return F.startswith(skeleton, F.lit("{")) & (folded == F.lit("o"))


def decoded_in_jvm(kafka_df):
    """``kafka_df`` with a boolean ``decoded_in_jvm``: False for the records Python decodes."""
    frame = _jvm_frame(kafka_df, (), True)
    return frame.select(*kafka_df.columns, frame["_ok"].alias("decoded_in_jvm"))


def _decode_in_jvm(kafka_df, bases: tuple[str, ...], with_payload: bool):
    """:func:`decode` in Spark SQL; the records it cannot vouch for through :func:`decode_batches`."""
    from pyspark.sql import functions as F

    fallback = _python_fallback(bases, with_payload)
    rows = _jvm_frame(kafka_df, bases, with_payload)
    rows = rows.withColumn("_py", fallback(F.when(~F.col("_ok"), F.col("value")), F.col("topic"),
                                           ~F.col("_ok")))
    python_error = ~F.col("_ok") & F.col("_py")["error"].isNotNull()
    columns = []
    for field in DECODED_SCHEMA:
        name = field.name
        if name in _FALLBACK_FIELDS:
            column = F.when(F.col("_ok"), F.col(f"_jvm_{name}")).otherwise(F.col("_py")[name])
        elif name in ("key", "value"):  # an error row keeps the record's bytes
            column = F.when(python_error, F.col(name))
        else:
            column = F.col(f"_jvm_{name}")
        columns.append(column.cast(field.dataType).alias(name))
    return rows.select(*columns)


#: The columns :func:`_python_fallback` computes for a record the JVM left to it.
_FALLBACK_FIELDS = ("message_id", "publisher_id", "event_type", "priority", "payload", "timestamp",
                    "request_id", "envelope", "error")


def _python_fallback(bases: tuple[str, ...], with_payload: bool):
    """An Arrow UDF decoding by the reference the values it is asked to (``wanted``); null for the others.

    The JVM hands it a null value for every record it decoded itself, so only
    the others' bytes cross into Python.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql.functions import arrow_udf
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import StructType

    schema = StructType([DECODED_SCHEMA[name] for name in _FALLBACK_FIELDS])
    arrow_type = to_arrow_type(schema, timezone="UTC")

    @arrow_udf(schema)  # type: ignore[call-overload]  # a struct result, which the stubs do not list
    def fallback(values, topics, wanted):
        present = pc.fill_null(wanted, False)
        if not pc.any(present).as_py():
            return pa.nulls(len(values), arrow_type)
        size = len(values)
        batch = pa.RecordBatch.from_arrays(
            [pa.nulls(size, pa.binary()), values, topics, pa.nulls(size, pa.int32()),
             pa.nulls(size, pa.int64()), pa.nulls(size, pa.timestamp("us", tz="UTC"))],
            names=["key", "value", "topic", "partition", "offset", "timestamp"])
        decoded = next(decode_batches([batch], bases, with_payload))
        return pa.StructArray.from_arrays([decoded.column(name) for name in _FALLBACK_FIELDS],
                                          fields=list(arrow_type), mask=pc.invert(present))

    return fallback


def topic_parts(topic, base_topics: Sequence[str] = ()):
    """``(base, vhost)`` columns of a topic column: :func:`~notify_transport.drivers.naming.parse_topic` in SQL."""
    from pyspark.sql import functions as F

    from notify_transport.drivers.naming import PRIORITIES

    prios = "|".join(re.escape(p) for p in PRIORITIES)
    exact = None
    if base_topics:
        bases = "|".join(re.escape(b) for b in sorted(base_topics, key=len, reverse=True))
        exact = rf"^({bases})\.(?:{prios})(?:\.(.*))?\z"
    generic = rf"^(.*?)\.(?:{prios})(?:\.(.*))?\z"
    base = F.when(topic.rlike(generic), F.regexp_extract(topic, generic, 1)).otherwise(topic)
    vhost = F.when(topic.rlike(generic), F.nullif(F.regexp_extract(topic, generic, 2), F.lit("")))
    if exact is not None:
        base = F.when(topic.rlike(exact), F.regexp_extract(topic, exact, 1)).otherwise(base)
        vhost = F.when(topic.rlike(exact), F.nullif(F.regexp_extract(topic, exact, 2), F.lit(""))).otherwise(vhost)
    return base, vhost


def notifications(decoded_df):
    """The rows that are notifications, without the error columns."""
    from pyspark.sql import functions as F

    return decoded_df.filter(F.col("error").isNull()).select(*NOTIFICATION_COLUMNS)


def errors(decoded_df):
    """The records that are not notifications, with their Kafka coordinates and bytes."""
    from pyspark.sql import functions as F

    return decoded_df.filter(F.col("error").isNotNull()).select(*ERROR_COLUMNS)
