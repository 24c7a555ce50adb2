"""RangeReader: offset ranges of several partitions with one client, no group (the Spark source's reader)."""
from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from notify_transport.reading.reader import OffsetRange, RangeReader, RecordsGone


@pytest.fixture
def topic(kafka_bootstrap, unique_topic):
    """A topic with 5, 3 and 0 records in partitions 0, 1 and 2 (values name partition and offset)."""
    name = unique_topic("ranges")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap.bootstrap})
    for future in admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1)]).values():
        future.result(30)
    # idempotent: what is retried stays in order
    producer = Producer({"bootstrap.servers": kafka_bootstrap.bootstrap, "enable.idempotence": True})
    for partition, count in ((0, 5), (1, 3)):
        for offset in range(count):
            producer.produce(name, f"p{partition}-{offset}".encode(), partition=partition)
    assert producer.flush(30) == 0
    return name


def _values(chunks) -> list[bytes]:
    return sorted(record.value() for chunk in chunks for record in chunk)


def test_ranges_of_several_partitions_with_one_client_read_again_and_again(kafka_bootstrap, topic):
    with RangeReader({"bootstrap.servers": kafka_bootstrap.bootstrap}) as reader:
        first = _values(reader.read([OffsetRange(topic, 0, 1, 4), OffsetRange(topic, 1, 0, 3),
                                     OffsetRange(topic, 2, 0, 0)], chunk=2, timeout=30))
        assert first == [b"p0-1", b"p0-2", b"p0-3", b"p1-0", b"p1-1", b"p1-2"]
        # the same client, a partition it paused when its range ended: read from its start again
        assert _values(reader.read([OffsetRange(topic, 0, 0, 5)], timeout=30)) == [
            f"p0-{i}".encode() for i in range(5)]


def test_records_that_never_arrive_are_reported(kafka_bootstrap, topic):
    with RangeReader({"bootstrap.servers": kafka_bootstrap.bootstrap}) as reader:
        with pytest.raises(RecordsGone, match=r"offsets 3\.\.9 did not arrive"):
            list(reader.read([OffsetRange(topic, 1, 0, 10)], timeout=1))
        gone: list[tuple[str, int, str]] = []
        read = _values(reader.read([OffsetRange(topic, 1, 0, 10), OffsetRange(topic, 0, 4, 5)], timeout=1,
                                   on_gone=lambda t, p, message: gone.append((t, p, message))))
        assert read == [b"p0-4", b"p1-0", b"p1-1", b"p1-2"]
        assert [(t, p) for t, p, _ in gone] == [(topic, 1)]
