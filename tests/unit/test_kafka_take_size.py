"""A listener that dispatches one by one takes what ``max_poll_records`` says, in one commit.

The notification server asked every driver for at most 500 messages per poll,
and the Kafka listener takes no more than it is asked for: a ``max_poll_records``
above 500 was silently capped, one commit per 500 records.
"""
from __future__ import annotations

from notify_transport.drivers.kafka.listener import KafkaListener
from notify_transport.drivers.kafka.delivery.commit import CommitBeforeDispatch
from notify_transport.drivers.kafka.delivery.hooks import ListenerHooks
from tests.unit.test_kafka_failed_hand_out import LogClient


def test_a_server_dispatching_one_by_one_takes_the_whole_max_poll_records_in_one_commit():
    from notify_transport.notify.listener import DISPATCH_POLL_SIZE, dispatch_poll_size

    client = LogClient({0: 2500})
    policy = CommitBeforeDispatch(hooks=ListenerHooks())
    policy.attach(client, "take")
    listener = KafkaListener({"group.id": "g"}, ["t.info"], policy, max_poll_records=2000, hand_out_chunk=64)
    listener._consumer = client  # as if started
    assert dispatch_poll_size(listener) == 2000 > DISPATCH_POLL_SIZE
    got = []
    while piece := listener.poll(timeout=0, max_messages=dispatch_poll_size(listener)):
        got += [m.offset for m in piece]
    assert got == list(range(2500))
    assert client.commits == [[(0, 2000)], [(0, 2500)]]  # one commit per take of max_poll_records
    assert (policy.counters.commits.value, policy.counters.commit_failures.value) == (2, 0)  # in metrics()
    policy.on_close()  # its committer thread
    small = KafkaListener({"group.id": "g"}, ["t.info"], policy, max_poll_records=100)
    assert dispatch_poll_size(small) == DISPATCH_POLL_SIZE  # the driver stops at its own 100
