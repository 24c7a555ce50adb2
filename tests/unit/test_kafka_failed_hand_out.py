"""A poll whose hand-out fails after the client gave it records reads them again next time.

The client's position is past what ``consume()`` returned, so an error between taking the
records and handing them out (the commit policy failing to start, for instance) would lose them
for good, while the server logs the error and polls on. Seen in the hybrid service test: a pool
got none of the 40 notifications its first poll had taken.
"""
from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from notify_transport.drivers.envelope import encode
from notify_transport.drivers.kafka.listener import KafkaListener
from notify_transport.drivers.kafka.delivery.commit import CommitBeforeDispatch
from notify_transport.drivers.kafka.delivery.hooks import ListenerHooks

VALUE = encode({"event_type": "e", "priority": "INFO", "payload": {}}, {})


class LogClient:
    """A consumer over fixed partition logs: a position per partition, moved by reads and seeks."""

    def __init__(self, sizes: dict[int, int], assigned: bool = True) -> None:
        self.logs = {p: [Message(topic="t.info", partition=p, offset=i, value=VALUE) for i in range(n)]
                     for p, n in sizes.items()}
        self.position = {p: 0 for p in sizes}
        self.assigned = assigned
        self.seeks: list[tuple[int, int]] = []
        self.commits: list[list[tuple[int, int]]] = []

    def _next(self) -> Message | None:
        for p, log in self.logs.items():
            if self.position[p] < len(log):
                self.position[p] += 1
                return log[self.position[p] - 1]
        return None

    def poll(self, timeout=None):
        return self._next()

    def consume(self, num_messages=1, timeout=None):
        out = []
        while len(out) < num_messages and (record := self._next()) is not None:
            out.append(record)
        return out

    def seek(self, tp: TopicPartition) -> None:
        if not self.assigned:
            raise KafkaException(KafkaError(KafkaError._STATE, "not assigned"))
        self.seeks.append((tp.partition, tp.offset))
        self.position[tp.partition] = tp.offset

    def commit(self, offsets=None, asynchronous=True):
        self.commits.append([(tp.partition, tp.offset) for tp in offsets])
        return None if asynchronous else offsets


class FailsOnce(CommitBeforeDispatch):
    """A commit policy whose first hand-out raises, as a half-imported module once made it."""

    def __init__(self) -> None:
        super().__init__(hooks=ListenerHooks())
        self.failed = False

    def on_polled(self, records):
        if not self.failed:
            self.failed = True
            raise AttributeError("partially initialized module")
        return super().on_polled(records)


def listener_on(client: LogClient) -> KafkaListener:
    policy = FailsOnce()
    policy.attach(client, "rewind")
    listener = KafkaListener({"group.id": "g"}, ["t.info"], policy)
    listener._consumer = client  # as if started
    return listener


def test_records_taken_by_a_failed_poll_are_read_again(caplog):
    client = LogClient({0: 30, 1: 20})
    listener = listener_on(client)
    with caplog.at_level(logging.WARNING), pytest.raises(AttributeError):
        listener.poll(timeout=0, max_messages=100)
    assert sorted(client.seeks) == [(0, 0), (1, 0)]  # back to where the failed batch began
    assert "will be read again" in caplog.text
    got = []
    while piece := listener.poll(timeout=0, max_messages=100):
        got += [(m.partition, m.offset) for m in piece]
    assert sorted(got) == [(0, i) for i in range(30)] + [(1, i) for i in range(20)]  # each once


def test_a_partition_that_moved_away_is_left_to_its_next_owner(caplog):
    client = LogClient({0: 5}, assigned=False)
    listener = listener_on(client)
    with caplog.at_level(logging.WARNING), pytest.raises(AttributeError):
        listener.poll(timeout=0, max_messages=10)
    assert "could not rewind t.info[0]@0" in caplog.text
    assert not client.commits  # nothing was committed past them: the next owner reads them
