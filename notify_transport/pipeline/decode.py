"""oslo notification envelopes to typed columns, in an Arrow UDF.

Each Kafka record goes through :func:`notify_transport.drivers.envelope.decode_notification`
(``messagingv2`` and ``messaging``, both context styles), inside
``mapInArrow`` so records cross between the JVM and Python in Arrow batches.
A record that is not a notification keeps its coordinates and bytes and gets
an ``error`` text instead of a crash; :func:`notifications` and
:func:`errors` split the two.
"""
from __future__ import annotations

import datetime
from typing import Any, Iterable, Iterator, Sequence

from pyspark.sql.types import (BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

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

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MICROSECOND = datetime.timedelta(microseconds=1)


def parse_timestamp(value: Any) -> int:
    """Microseconds since the epoch of an oslo timestamp.

    oslo writes ``str(utcnow())``: ``YYYY-MM-DD HH:MM:SS.ffffff``, naive UTC
    (no fraction when it is zero); ISO 8601 with ``T`` and an offset is accepted too.
    """
    if not isinstance(value, str):
        raise DecodeError(f"timestamp is {type(value).__name__}, not a string")
    try:
        parsed = datetime.datetime.fromisoformat(value.strip())
    except ValueError:
        raise DecodeError(f"invalid timestamp {value!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return (parsed - _EPOCH) // _MICROSECOND


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


def decode(kafka_df, base_topics: Sequence[str] = (), with_payload: bool = True):
    """Decoded DataFrame (:data:`DECODED_SCHEMA`) of a DataFrame with Spark's Kafka columns.

    Without ``with_payload`` the ``payload`` column is null, which saves
    re-serializing it when only the other columns are used (the statistics).
    """
    bases = tuple(base_topics)
    return kafka_df.select("key", "value", "topic", "partition", "offset", "timestamp").mapInArrow(
        lambda batches: decode_batches(batches, bases, with_payload), DECODED_SCHEMA)


def notifications(decoded_df):
    """The rows that are notifications, without the error columns."""
    from pyspark.sql import functions as F

    return decoded_df.filter(F.col("error").isNull()).select(*NOTIFICATION_COLUMNS)


def errors(decoded_df):
    """The records that are not notifications, with their Kafka coordinates and bytes."""
    from pyspark.sql import functions as F

    return decoded_df.filter(F.col("error").isNotNull()).select(*ERROR_COLUMNS)
