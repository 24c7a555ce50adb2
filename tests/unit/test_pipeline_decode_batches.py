"""The reference decoder's Arrow map (no Spark session): a record Arrow cannot store is an error row."""
from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from notify_transport.drivers import envelope
from notify_transport.pipeline import decode

STAMP = datetime.datetime(2026, 3, 1, 12, 0, 5, tzinfo=datetime.timezone.utc)
MESSAGE = {"message_id": "m-1", "event_type": "compute.instance.update", "priority": "info",
           "timestamp": "2026-03-01 12:00:01.250000", "payload": {"state": "active"}}


def batch(values: list[bytes]) -> pa.RecordBatch:
    size = len(values)
    return pa.RecordBatch.from_arrays(
        [pa.nulls(size, pa.binary()), pa.array(values, pa.binary()), pa.array(["notifications.info"] * size),
         pa.array(range(size), pa.int32()), pa.array(range(size), pa.int64()),
         pa.array([STAMP] * size, pa.timestamp("us", tz="UTC"))],
        names=["key", "value", "topic", "partition", "offset", "timestamp"])


def rows(values: list[bytes]) -> list[dict]:
    decoded = list(decode.decode_batches([batch(values)], ("notifications",)))
    return pa.Table.from_batches(decoded).to_pylist()


@pytest.mark.parametrize("where", ["payload", "message_id", "publisher_id", "request_id", "timestamp"])
def test_a_lone_surrogate_makes_an_error_row_not_a_failed_batch(where):
    # regression: JSON may spell a lone surrogate (\ud800) and Python reads it, but Arrow cannot
    # store it, and the whole batch failed with UnicodeEncodeError
    good = envelope.encode(MESSAGE, {"request_id": "req-1"})
    spelled = '"\\ud800"'
    if where == "request_id":
        bad = envelope.encode(MESSAGE, {"request_id": "X"}, 1.0).replace(b'"X"', spelled.encode())
    else:
        field = {"payload": {"s": "X"}, "timestamp": "X"}.get(where, "X")
        bad = envelope.encode({**MESSAGE, where: field}, {}, 1.0).replace(b'"X"', spelled.encode())
    out = rows([good, bad, good])
    assert [r["error"] for r in out] == [None, decode.LONE_SURROGATE, None]
    assert out[1]["value"] == bad and out[1]["message_id"] is None and out[1]["payload"] is None
    assert out[0]["message_id"] == out[2]["message_id"] == "m-1" and out[0]["request_id"] == "req-1"


def test_a_batch_of_notifications_keeps_its_text():
    out = rows([envelope.encode({**MESSAGE, "payload": {"name": "é😀"}}, {"request_id": "r"})])
    assert out[0]["error"] is None and out[0]["payload"] == '{"name":"é😀"}' and out[0]["priority"] == "INFO"
