"""ClusterAdmin, the one AdminClient user, on a real broker: what the pipeline plans its reads with."""
from __future__ import annotations

import re

import pytest
from confluent_kafka import IsolationLevel
from confluent_kafka.admin import OffsetSpec

from notify_transport.drivers.kafka.cluster import ClusterAdmin
from waits import wait_until

pytestmark = pytest.mark.functional


def test_partitions_by_name_and_pattern_and_offsets(kafka_bootstrap, unique_topic, raw_producer):
    admin = ClusterAdmin({"bootstrap.servers": kafka_bootstrap.bootstrap}, partitions=2, timeout=15)
    first, second = unique_topic("a"), unique_topic("b")
    try:
        assert admin.ensure_topics([first, second]) == [first, second]
        producer = raw_producer(kafka_bootstrap)
        for n in range(5):
            producer.produce(first, value=b"x%d" % n, partition=n % 2)
        producer.flush(15)

        found, missing = admin.partitions_of([first, unique_topic("absent")])
        assert found == [(first, 0), (first, 1)] and len(missing) == 1
        common = re.escape(first.rsplit("-a-", 1)[0])
        assert admin.partitions_matching(rf"^{common}-[ab]-") == sorted(
            [(first, 0), (first, 1), (second, 0), (second, 1)])
        assert admin.partitions_matching(r"^no-such-topic-at-all$") == []

        def latest_total() -> int:
            latest = admin.list_offsets({tp: OffsetSpec.latest() for tp in found},
                                        isolation_level=IsolationLevel.READ_COMMITTED)
            return sum(latest.values())

        if getattr(kafka_bootstrap, "name", "") != "tansu":  # Tansu reports a wrong high watermark
            assert wait_until(lambda: latest_total() == 5, timeout=30)
        earliest = admin.list_offsets({tp: OffsetSpec.earliest() for tp in found})
        assert earliest == {(first, 0): 0, (first, 1): 0}
    finally:
        admin.close()
