"""Closing a listener's consumer: the group is left first, and a close that hangs is not waited for.

Seen in CI: an oslo service's ``wait()`` hung for good in ``KafkaListener.cleanup``, inside
``Consumer.close()``, where librdkafka served a rebalance and the assignment made from that
callback waited for a group already terminating (librdkafka #4884). The listener now
unsubscribes and serves the hand-back itself before it closes (unless it is a static member,
which keeps its place in the group), and gives ``close()`` a bound.
"""
from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import Message, TopicPartition

from notify_transport.drivers.kafka.listener import KafkaListener
from notify_transport.drivers.kafka.delivery.commit import CommitPolicy

PARTITIONS = [("t.info", 0), ("t.info", 1)]


class GroupClient:
    """A subscribed consumer: unsubscribe() queues the revoke that its next poll() serves."""

    def __init__(self, listener: KafkaListener, hang: bool = False, late: int = 0) -> None:
        self.listener = listener
        self.hang = hang
        self.calls: list[str] = []
        self.queued: list[str] = []
        self.late = [Message(topic="t.info", partition=0, offset=i, value=b"{}") for i in range(late)]
        self.released = threading.Event()
        self.assigned_at_close: list[tuple[str, int]] | None = None

    def unsubscribe(self) -> None:
        self.calls.append("unsubscribe")
        self.queued.append("revoke")

    def poll(self, timeout=None):
        self.calls.append("poll")
        if self.late:
            return self.late.pop(0)
        if self.queued:
            self.queued.pop(0)
            self.listener.membership.on_revoke(self, [TopicPartition(t, p) for t, p in PARTITIONS])
        return None

    def close(self) -> None:
        self.calls.append("close")
        self.assigned_at_close = sorted(self.listener.assignment)
        if self.hang:
            self.released.wait()


def started(hang: bool = False, late: int = 0, operation_timeout: float = 10.0, **config: str
            ) -> tuple[KafkaListener, GroupClient]:
    policy = CommitPolicy()
    listener = KafkaListener({"group.id": "g", **config}, ["t.info"], policy, operation_timeout=operation_timeout)
    client = GroupClient(listener, hang=hang, late=late)
    policy.attach(client, listener.name)
    listener._consumer = client  # as if started
    listener.membership.assignment = frozenset(PARTITIONS)
    return listener, client


def test_the_group_is_left_before_close_so_close_has_nothing_to_revoke():
    listener, client = started()
    listener.cleanup()
    assert client.calls[0] == "unsubscribe"
    assert client.calls.index("close") > client.calls.index("poll")
    assert client.assigned_at_close == []
    assert listener.closed


def test_a_static_member_does_not_leave_its_group():
    """unsubscribe() would send a LeaveGroup for a static member too: the group would move its
    partitions to the other members while they commit their last offsets (seen on noida: their
    final commits refused with ILLEGAL_GENERATION). Its close() revokes them without leaving."""
    listener, client = started(**{"group.instance.id": "serve-0"})
    listener.cleanup()
    assert client.calls == ["close"]
    assert listener.closed


def test_records_read_while_leaving_are_not_handed_out():
    listener, client = started(late=3)
    listener.cleanup()
    assert client.late == [] and client.assigned_at_close == []
    assert listener.poll(0) == []


def test_a_close_that_never_returns_does_not_hold_cleanup(caplog):
    listener, client = started(hang=True, operation_timeout=0.3)
    done = threading.Event()

    def clean() -> None:
        listener.cleanup()
        done.set()

    with caplog.at_level(logging.ERROR, logger="notify_transport.drivers.kafka.membership"):
        threading.Thread(target=clean, daemon=True).start()
        try:
            # the bound is 0.3 s: a cleanup that waits on the hung close never gets here
            assert done.wait(30), "cleanup() waited for a close() that never returns"
        finally:
            client.released.set()
    assert client.calls[-1] == "close"
    assert listener.closed
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and listener.name in errors[0].getMessage()


def test_a_revoke_that_never_comes_does_not_hold_cleanup(caplog):
    listener, client = started(operation_timeout=0.3)
    client.unsubscribe = lambda: client.calls.append("unsubscribe")  # no revoke queued
    started_at = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="notify_transport.drivers.kafka.membership"):
        listener.cleanup()
    assert client.calls[-1] == "close"
    assert time.monotonic() - started_at < 30
    assert "still assigned" in caplog.text
