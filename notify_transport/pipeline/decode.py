"""oslo notification envelopes to typed columns: in Python (an Arrow UDF) or in the JVM.

The reference is :func:`notify_transport.drivers.envelope.decode_notification`, run in
``mapInArrow``; a record that is not a notification keeps its coordinates and gets an
``error`` instead of failing the job. ``in_jvm`` decodes in this project's Java UDF
(:mod:`.jvm_decoder`) and sends to the Python reference only the records on which the
two could differ (number forms, surrogates, repeated keys, ``_context_`` keys, invalid
UTF-8, deep nesting...); property tests compare the two.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Iterator, Sequence

from pyspark.sql.types import (BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from notify_transport import times
from notify_transport.drivers import envelope
from notify_transport.exceptions import ConfigurationError, DecodeError
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


def parse_timestamps(texts, errors: list):
    """Arrow ``timestamp[us, UTC]`` of an Arrow string array of oslo timestamps; bad ones become errors.

    Arrow parses the usual ``YYYY-MM-DD HH:MM:SS.ffffff`` column at once; a
    column with anything else (an offset, garbage) goes through
    :func:`parse_timestamp` row by row, which sets ``errors[i]`` for a bad one.
    """
    import pyarrow as pa

    target = pa.timestamp("us", tz="UTC")
    try:
        return texts.cast(pa.timestamp("us")).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    micros: list[int | None] = []
    for i, text in enumerate(texts.to_pylist()):
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
        try:
            texts = [pa.array(column, pa.string()) for column in decoded]
        except UnicodeEncodeError:
            _set_aside_unencodable(decoded, errors)
            texts = [pa.array(column, pa.string()) for column in decoded]
        timestamps = parse_timestamps(texts[5], errors)
        is_error = pa.array([e is not None for e in errors], pa.bool_())
        no_bytes = pa.nulls(len(errors), pa.binary())
        arrays = [
            *texts[:5],
            timestamps,
            *texts[6:],
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


#: Why a record is an error row when a text of it cannot be written as UTF-8.
LONE_SURROGATE = "holds a lone surrogate, which is not text that can be stored"


def _set_aside_unencodable(decoded: list[list], errors: list) -> None:
    """Make an error row of every record with a string Arrow cannot store: a lone surrogate,
    which JSON's escapes can spell and Python's readers accept (it failed the whole batch)."""
    for i in range(len(errors)):
        values = [column[i] for column in decoded]
        try:
            "\0".join(v for v in values if type(v) is str).encode("utf-8")
        except UnicodeEncodeError:
            errors[i] = LONE_SURROGATE
            for column in decoded:
                column[i] = None


def _where(mask, when_true, when_false):
    import pyarrow.compute as pc

    return pc.if_else(mask, when_true, when_false)


def decode(kafka_df, base_topics: Sequence[str] = (), with_payload: bool = True, in_jvm: bool = False):
    """Decoded DataFrame (:data:`DECODED_SCHEMA`) of a DataFrame with Spark's Kafka columns.

    Without ``with_payload`` the ``payload`` column is null, which saves
    re-serializing it when only the other columns are used (the statistics).
    ``in_jvm`` decodes with the JVM decoder, handing Python only the records
    the module docstring lists; the rows are the reference's either way.
    """
    bases = tuple(base_topics)
    kafka_df = kafka_df.select("key", "value", "topic", "partition", "offset", "timestamp")
    if in_jvm:
        return _decode_in_jvm(kafka_df, bases, with_payload)
    return kafka_df.mapInArrow(lambda batches: decode_batches(batches, bases, with_payload), DECODED_SCHEMA)


# -- decoding in the JVM -------------------------------------------------------------------------

#: The notification's timestamp as oslo writes it (``str(utcnow())``), which Spark parses as Arrow does.
_OSLO_TIMESTAMP = r'^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{6})?\z'
_OSLO_TIMESTAMP_FORMAT = "yyyy-MM-dd HH:mm:ss[.SSSSSS]"


def _jvm_frame(kafka_df, bases: tuple[str, ...], with_payload: bool):
    """``kafka_df`` with ``_ok`` (whether the JVM vouches for the record) and, prefixed ``_jvm_``,
    the :data:`DECODED_SCHEMA` columns as the JVM decoder gives them (meaningful where ``_ok``).

    The decoder's UDF answers null for what it leaves to Python; a timestamp
    other than oslo's own spelling is left to Python as well, whose Arrow cast
    and fallback parser accept more.
    """
    from pyspark.sql import functions as F

    from notify_transport.pipeline import jvm_decoder

    if not jvm_decoder.register(kafka_df.sparkSession):
        raise ConfigurationError("the JVM decoder's jar is not on this session's classpath: build the "
                                 "session with notify_transport.pipeline.session.build_session "
                                 "(a JDK's javac compiles the jar once)")
    col = F.col
    frame = kafka_df.withColumn("_d", F.call_function(jvm_decoder.FUNCTION, col("value"), F.lit(with_payload)))
    decoded = col("_d")
    frame = frame.withColumn("_stamp", F.when(decoded["timestamp"].rlike(_OSLO_TIMESTAMP), F.try_to_timestamp(
        decoded["timestamp"], F.lit(_OSLO_TIMESTAMP_FORMAT))))
    ok = decoded.isNotNull() & col("_stamp").isNotNull()
    base, vhost = topic_parts(col("topic"), bases)
    columns = {
        **{name: decoded[name] for name in ("message_id", "publisher_id", "event_type", "priority", "payload")},
        "timestamp": col("_stamp"),
        "request_id": decoded["request_id"], "envelope": decoded["envelope"],
        "topic": col("topic"), "partition": col("partition"), "offset": col("offset"),
        "kafka_timestamp": col("timestamp"), "vhost": vhost, "base_topic": base,
        "error": F.lit(None).cast("string"),  # where the JVM vouches, there is none
    }
    return frame.select(*kafka_df.columns, F.coalesce(ok, F.lit(False)).alias("_ok"),
                        *[column.alias(f"_jvm_{name}") for name, column in columns.items()])


def decoded_in_jvm(kafka_df):
    """``kafka_df`` with a boolean ``decoded_in_jvm``: False for the records Python decodes."""
    frame = _jvm_frame(kafka_df, (), True)
    return frame.select(*kafka_df.columns, frame["_ok"].alias("decoded_in_jvm"))


def _decode_in_jvm(kafka_df, bases: tuple[str, ...], with_payload: bool):
    """:func:`decode` in the JVM; the records it cannot vouch for through :func:`decode_batches`."""
    from pyspark.sql import functions as F

    fallback = _python_fallback(bases, with_payload)
    rows = _jvm_frame(kafka_df, bases, with_payload)
    # nulls for the records the JVM decoded: all that crosses into Python for them is a null bitmap
    rows = rows.withColumn("_py", fallback(F.when(~F.col("_ok"), F.col("value")),
                                           F.when(~F.col("_ok"), F.col("topic")), ~F.col("_ok")))
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
