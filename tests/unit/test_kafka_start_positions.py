"""A new pool's start offsets are concrete even when the brokers answer with passing errors.

Left to librdkafka's lazy ``auto.offset.reset``, a partition's position is
resolved at its first fetch: if that comes after notifications sent once
start() returned, a ``latest`` reset skips them.
"""
from __future__ import annotations

import logging
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from notify_transport.drivers.kafka import membership as membership_module
from notify_transport.drivers.kafka.cluster import ClusterError
from notify_transport.drivers.kafka.delivery.commit import CommitBeforeDispatch
from notify_transport.drivers.kafka.delivery.settings import ListenerSettings
from notify_transport.drivers.kafka.membership import GroupMembership
from notify_transport.backoff import Backoff
from notify_transport.exceptions import MessagingException


class FlakyBroker:
    """A consumer (committed, commit) and admin client (ListOffsets) that fail a set number of times first."""

    def __init__(self, committed_errors: int = 0, list_errors: int = 0, commit_errors: int = 0,
                 end: int = 42) -> None:
        self.left = {"committed": committed_errors, "list": list_errors, "commit": commit_errors}
        self.end = end
        self.commits: list[list[tuple[str, int, int]]] = []

    def _maybe_fail(self, what: str) -> None:
        if self.left[what] > 0:
            self.left[what] -= 1
            raise KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE, f"{what} not yet",
                                            retriable=True))

    def committed(self, partitions, timeout=None):
        self._maybe_fail("committed")
        return [TopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]

    def offsets_at(self, partitions, spec):  # the admin client's ListOffsets (ClusterAdmin)
        if self.left["list"] > 0:
            self.left["list"] -= 1
            raise ClusterError(f"offsets of {partitions[0][0]}[{partitions[0][1]}]: Broker: Leader not available")
        return {tp: self.end if spec == -1 else 0 for tp in partitions}

    def commit(self, offsets=None, asynchronous=True):
        self._maybe_fail("commit")
        self.commits.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(membership_module, "START_RETRY", Backoff(initial=0.0, maximum=0.0))


def membership(broker: "FlakyBroker", operation_timeout: float = 5.0) -> GroupMembership:
    """The listener's part that positions a new assignment, alone: the broker is its consumer and admin."""
    return GroupMembership("pool", {"group.id": "pool"}, ["t.info"], CommitBeforeDispatch(), ListenerSettings(),
                           broker, operation_timeout, threading.Event(), on_gone=lambda gone: None)


def test_passing_errors_are_tried_again_and_the_end_is_committed():
    broker = FlakyBroker(committed_errors=2, list_errors=3)
    found = membership(broker).start_positions(broker, [TopicPartition("t.info", 0), TopicPartition("t.info", 1)])
    assert [(tp.topic, tp.partition, tp.offset) for tp in found] == [("t.info", 0, 42), ("t.info", 1, 42)]
    assert broker.commits == [[("t.info", 0, 42), ("t.info", 1, 42)]]


def test_a_commit_error_that_passes_is_tried_again_and_the_start_is_stored():
    broker = FlakyBroker(commit_errors=1)
    found = membership(broker).start_positions(broker, [TopicPartition("t.info", 0)])
    assert [tp.offset for tp in found] == [42]
    assert broker.commits == [[("t.info", 0, 42)]]


def test_a_failed_commit_still_starts_the_partition_at_the_resolved_end(caplog):
    broker = FlakyBroker(commit_errors=10)  # more than commit_sync's attempts
    with caplog.at_level(logging.WARNING):
        found = membership(broker).start_positions(broker, [TopicPartition("t.info", 0)])
    assert [tp.offset for tp in found] == [42]  # not -1001: never left to a later, lazy reset
    assert broker.commits == []
    assert "could not commit the start positions of t.info[0]" in caplog.text


def test_an_error_that_outlasts_the_operation_timeout_is_raised():
    broker = FlakyBroker(list_errors=10**9)
    with pytest.raises(MessagingException, match=r"cannot list offsets of t.info\[0\]"):
        membership(broker, operation_timeout=0.05).start_positions(broker, [TopicPartition("t.info", 0)])
