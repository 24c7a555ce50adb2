"""A record read before a rebalance is not handed out once its partition was revoked.

``poll()`` waits for a first record with ``Consumer.poll()`` and takes the rest of its batch
with ``Consumer.consume()``, which serves the rebalance callbacks first. A revoke served there
left the first record, read under the old assignment, in the batch: it was dispatched beside
its partition's next owner, and its commit (before dispatch, or the at-least-once track the
listener opened for a partition it no longer had) could move that owner's committed offset
back. Found while tracking down the clean-clone CI failure of 9c0e113, where ``serve``'s
killed-worker test found fewer offsets committed than notifications dispatched.
"""
from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Message, TopicPartition

from notify_transport.drivers.envelope import encode
from notify_transport.drivers.kafka.listener import KafkaListener
from notify_transport.drivers.kafka.delivery.atleastonce import AtLeastOnce
from notify_transport.drivers.kafka.delivery.commit import CommitBeforeDispatch, CommitPolicy
from notify_transport.drivers.kafka.delivery.counters import DeliveryCounters
from notify_transport.drivers.kafka.delivery.hooks import ListenerHooks

TOPIC = "t.info"
VALUE = encode({"event_type": "e", "priority": "INFO", "payload": {}}, {})


def record(partition: int, offset: int) -> Message:
    return Message(topic=TOPIC, partition=partition, offset=offset, value=VALUE)


class RebalancingClient:
    """poll() gives t.info[0]@5; the consume() after it serves a revoke of partition 0 (and,
    with ``back_at``, gives it back at that committed offset) before returning partition 1's records."""

    def __init__(self, back_at: int | None = None) -> None:
        self.listener: KafkaListener | None = None
        self.back_at = back_at
        self.commits: list[tuple[int, int]] = []
        self.assigned: list[tuple[int, int]] = []
        self.first = [record(0, 5)]
        self.rest = [record(1, 0), record(1, 1)]

    def poll(self, timeout: float | None = None) -> Message | None:
        return self.first.pop() if self.first else None

    def consume(self, num_messages: int = 1, timeout: float | None = None) -> list[Message]:
        listener = self.listener
        assert listener is not None
        listener.membership.on_revoke(self, [TopicPartition(TOPIC, 0)])
        if self.back_at is not None:
            listener.membership.on_assign(self, [TopicPartition(TOPIC, 0)])
        rest, self.rest = self.rest, []
        return rest

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.back_at) for tp in partitions]

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned += [(tp.partition, tp.offset) for tp in partitions]

    def commit(self, offsets: list[TopicPartition] | None = None, asynchronous: bool = True) -> Any:
        self.commits += [(tp.partition, tp.offset) for tp in offsets or []]
        return None if asynchronous else offsets


def listener_with(policy: CommitPolicy, client: RebalancingClient) -> KafkaListener:
    policy.attach(client, "test")  # type: ignore[arg-type]
    listener = KafkaListener({"group.id": "g"}, [TOPIC], policy)
    listener._consumer = client  # type: ignore[assignment]  # as if started
    listener.membership.assignment = frozenset({(TOPIC, 0), (TOPIC, 1)})
    policy.on_assigned([TopicPartition(TOPIC, 0, 0), TopicPartition(TOPIC, 1, 0)])
    client.listener = listener
    return listener


def at_least_once() -> AtLeastOnce:
    # nothing here is requeued or undecodable: no requeuer is needed
    return AtLeastOnce(None, DeliveryCounters(), ListenerHooks(), commit_interval=3600)  # type: ignore[arg-type]


@pytest.mark.parametrize("back_at", [None, 3], ids=["moved-away", "given-back"])
def test_at_least_once_neither_dispatches_nor_commits_the_revoked_record(back_at):
    client = RebalancingClient(back_at=back_at)
    policy = at_least_once()
    listener = listener_with(policy, client)
    messages = listener.poll(timeout=0, max_messages=10)
    assert [(m.partition, m.offset) for m in messages] == [(1, 0), (1, 1)]
    for message in messages:
        message.acknowledge()
    listener.commit()
    # partition 1 is committed past its records; partition 0 is not committed at all: moved
    # away, its next owner reads t.info[0]@5 again; given back, this listener reads it again
    # from offset 3 (and committing 6 now would have skipped 3 and 4)
    assert client.commits == [(1, 2)]
    assert listener.counters.stale.value == 1
    if back_at is not None:
        assert client.assigned == [(0, 3)]


def test_commit_before_dispatch_does_not_commit_the_revoked_partition():
    client = RebalancingClient()
    listener = listener_with(CommitBeforeDispatch(hooks=ListenerHooks()), client)
    messages = listener.poll(timeout=0, max_messages=10)
    assert [(m.partition, m.offset) for m in messages] == [(1, 0), (1, 1)]
    assert client.commits == [(1, 2)]  # before the fix also (0, 6), over the next owner's commit


def test_a_record_of_a_partition_still_owned_is_kept():
    client = RebalancingClient()
    client.first, client.rest = [record(1, 0)], [record(1, 1), record(1, 2)]  # partition 0 goes, 1 stays
    listener = listener_with(at_least_once(), client)
    messages = listener.poll(timeout=0, max_messages=10)
    assert [(m.partition, m.offset) for m in messages] == [(1, 0), (1, 1), (1, 2)]
    assert listener.counters.stale.value == 0
