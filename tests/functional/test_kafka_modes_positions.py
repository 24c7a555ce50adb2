"""Replay and positions on real brokers: listener start positions, the partition consumer
(seek, latest_message_id), iterator readers merged across partitions, no leaked threads."""
from __future__ import annotations

import contextlib
import os
import threading
import uuid

import pytest
from confluent_kafka import Producer

import notify_transport
from notify_transport import Notifier, Target
from notify_transport.drivers.kafka.positions import MessageId
from notify_transport.reading.reader import PartitionIterator, merge
from notify_transport.exceptions import ConfigurationError, MessagingException
from notify_transport.reading import open_reader, partition_consumer, read_topic
from waits import time_between_batches, wait_until

pytestmark = pytest.mark.functional




class Recorder:
    def __init__(self):
        self.ids: list[int] = []
        self.marks: list[str] = []

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        if "mark" in payload:
            self.marks.append(payload["mark"])
        else:
            self.ids.append(payload["i"])


def produce(broker, topic: str, values, partition: int | None = None, create_partitions=None):
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})  # retried in order
    for value in values:
        if partition is None:
            producer.produce(topic, value)
        else:
            producer.produce(topic, value, partition=partition)
    assert producer.flush(10) == 0


def create_topic(driver, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import NewTopic

    futures = driver._admin.client().create_topics([NewTopic(topic, partitions)], operation_timeout=10)
    for future in futures.values():
        future.result(10)
    driver._admin._wait_visible([topic])


@pytest.fixture
def transport(kafka_broker, kafka_conf):
    made = notify_transport.get_notification_transport(kafka_conf, kafka_broker.url())
    yield made
    made.cleanup()


def native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


# -- listener start positions --------------------------------------------------------------

def test_listener_start_positions_replay_a_pool(transport, unique_topic):
    topic = unique_topic("replay")
    pool = f"replay-{uuid.uuid4().hex[:6]}"
    notifier = Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
    first = Recorder()
    server = notify_transport.get_notification_listener(transport, [Target(topic=topic)], [first],
                                                        pool=pool)
    server.start()
    for i in range(4):
        notifier.info({}, "e", {"i": i})
    assert transport.flush(10) == 0
    assert wait_until(lambda: first.ids == [0, 1, 2, 3])
    server.stop(timeout=10)
    midpoint = time_between_batches()  # broker timestamps are milliseconds
    for i in range(4, 6):
        notifier.info({}, "e", {"i": i})
    assert transport.flush(10) == 0

    def run(start_position, expected):
        endpoint = Recorder()
        srv = notify_transport.get_notification_listener(
            transport, [Target(topic=topic)], [endpoint], pool=pool, start_position=start_position)
        srv.start()
        try:
            # a mark sent now comes after everything the listener may get (one partition, in
            # order): once it is in, so is any message too many
            notifier.info({}, "mark", {"mark": start_position})
            assert transport.flush(10) == 0
            assert wait_until(lambda: start_position in endpoint.marks, timeout=10)
            assert endpoint.ids == expected, start_position
        finally:
            srv.stop(timeout=10)

    run("committed", [4, 5])  # the pool's committed offset
    run("earliest", [0, 1, 2, 3, 4, 5])  # replay everything (and commit that position)
    run("offset:2", [2, 3, 4, 5])
    run(f"time:{midpoint}", [4, 5])
    run("latest", [])
    run(None, [])  # committed again: latest was committed above


def test_a_reader_has_no_committed_position(transport):
    with pytest.raises(ConfigurationError, match="no consumer group"):
        partition_consumer(transport.driver, "whatever", 0, "committed")


# -- the partition consumer ------------------------------------------------------------------

def test_partition_consumer_seek_and_latest_message_id(transport, kafka_broker, unique_topic):
    topic = unique_topic("seek")
    driver = transport.driver
    create_topic(driver, topic, 1)
    with partition_consumer(driver, topic, 0, "earliest") as consumer:
        assert consumer.latest_message_id() is None  # empty partition
        with pytest.raises(TypeError, match="MessageId"):  # its None handed on, as a reader might
            consumer.seek(consumer.latest_message_id())
        assert consumer.receive(timeout=0.3) is None
        produce(kafka_broker, topic, [f"v{i}".encode() for i in range(5)])
        assert consumer.latest_message_id() == MessageId(topic, 0, 4)
        first = consumer.receive(timeout=10)
        assert (first.value, first.id) == (b"v0", MessageId(topic, 0, 0))
        consumer.seek(MessageId(topic, 0, 3), inclusive=True)
        assert consumer.receive(timeout=10).value == b"v3"
        consumer.seek(MessageId(topic, 0, 1), inclusive=False)
        assert [consumer.receive(timeout=10).offset for _ in range(3)] == [2, 3, 4]
        assert consumer.receive(timeout=0.3) is None and consumer.position == 5
        with pytest.raises(ConfigurationError):
            consumer.seek(MessageId("other", 0, 1))
    with partition_consumer(driver, topic, 0, "latest") as consumer:
        assert consumer.receive(timeout=0.3) is None
        produce(kafka_broker, topic, [b"new"])
        assert consumer.receive(timeout=10).id == MessageId(topic, 0, 5)
    with partition_consumer(driver, topic, 0, 99) as consumer:  # past the end: clamped
        assert consumer.position == 6


# -- iterator readers ---------------------------------------------------------------------

def test_iterators_per_partition_compose_and_close_without_leaks(transport, kafka_broker, unique_topic):
    topic = unique_topic("iter")
    driver = transport.driver
    create_topic(driver, topic, 3)
    for partition in range(3):
        produce(kafka_broker, topic, [f"{partition}-{i}".encode() for i in range(20)], partition=partition)
    python_before = set(threading.enumerate())
    native_before = native_threads()

    # one partition from an offset, until its end
    with PartitionIterator(partition_consumer(driver, topic, 1, "offset:15"), until_end=True) as it:
        assert [r.value for r in it] == [f"1-{i}".encode() for i in range(15, 20)]

    # three partitions merged, until their end
    iterators = [PartitionIterator(partition_consumer(driver, topic, p, "earliest"), buffer=4,
                                   until_end=True) for p in range(3)]
    with merge(iterators, buffer=8) as merged:
        records = list(merged)
    assert len(records) == 60
    for partition in range(3):
        own = [r for r in records if r.partition == partition]
        assert [r.value for r in own] == [f"{partition}-{i}".encode() for i in range(20)]
        assert [r.offset for r in own] == list(range(20))

    # a follow-mode iterator closed while its fetcher waits for more, and one closed mid-way
    follow = PartitionIterator(partition_consumer(driver, topic, 0, "latest"))
    assert follow.next(timeout=0.3) is None
    follow.close()
    busy = merge([PartitionIterator(partition_consumer(driver, topic, p, "earliest"), buffer=2)
                  for p in range(3)], buffer=2)
    assert busy.next(timeout=10) is not None  # fetchers are blocked on full buffers now
    busy.close()

    # the whole topic through the driver
    with contextlib.closing(read_topic(driver, topic, "earliest")) as everything:
        assert len(list(everything)) == 60

    assert wait_until(lambda: set(threading.enumerate()) == python_before, timeout=5)
    assert wait_until(lambda: native_threads() <= native_before, timeout=10), (
        f"librdkafka threads left: {native_threads()} > {native_before}")


def test_one_reader_covers_several_partitions_between_start_and_end_offsets(transport, kafka_broker, unique_topic):
    from notify_transport.kafka import StartPosition

    topic, later = unique_topic("ranges"), unique_topic("later")
    driver = transport.driver
    create_topic(driver, topic, 3)
    for partition in range(3):
        produce(kafka_broker, topic, [f"{partition}-{i}".encode() for i in range(10)], partition=partition)
    native_before = native_threads()
    with open_reader(driver, "ranges") as reader:
        # given ranges (the Spark source's offset ranges) and a position resolved for one more partition
        reader.assign({(topic, 0): 2, (topic, 1): 0}, ends={(topic, 0): 5, (topic, 1): 3})
        assert reader.open([(topic, 2)], StartPosition("last", 4), until_end=True) == {(topic, 2): 6}
        records = []
        assert wait_until(lambda: records.extend(reader.receive(100, timeout=0.5)) or reader.finished, timeout=30)
        assert {p: [r.offset for r in records if r.partition == p] for p in range(3)} == {
            0: [2, 3, 4], 1: [0, 1, 2], 2: [6, 7, 8, 9]}  # nothing past an end
        assert reader.receive(100, timeout=0.3) == []
        # a topic created while reading (tail's new topics) is added and followed without an end
        create_topic(driver, later, 1)
        produce(kafka_broker, later, [b"x"])
        found, missing = reader.partitions_of([later, unique_topic("absent")])
        assert found == [(later, 0)] and len(missing) == 1
        reader.open(found, StartPosition("earliest"))
        assert not reader.finished
        more = []
        assert wait_until(lambda: more.extend(reader.receive(100, timeout=0.5)) or more, timeout=30)
        assert [(r.topic, r.offset, r.value) for r in more] == [(later, 0, b"x")]
    assert wait_until(lambda: native_threads() <= native_before, timeout=10), (
        f"librdkafka threads left: {native_threads()} > {native_before}")


def test_follow_mode_reads_what_arrives_later(transport, kafka_broker, unique_topic):
    topic = unique_topic("follow")
    driver = transport.driver
    create_topic(driver, topic, 1)
    with PartitionIterator(partition_consumer(driver, topic, 0, "earliest")) as it:
        threading.Timer(0.3, produce, (kafka_broker, topic, [b"late-1", b"late-2"])).start()
        got = [next(it).value, next(it).value]
    assert got == [b"late-1", b"late-2"]


def test_reading_a_missing_topic_is_a_clear_error(transport, unique_topic):
    with pytest.raises(MessagingException, match="does not exist"):
        read_topic(transport.driver, unique_topic("missing"))
