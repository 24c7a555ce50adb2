"""A KIP-848 listener whose pool holds every partition returns from start() only where the
pool has a stored position for each partition (regression: a replacement listener returned
while the dead member's partition had none, and what was sent meanwhile was skipped)."""
from __future__ import annotations

from types import SimpleNamespace

from notify_transport.drivers.kafka.cluster import ClusterError
from notify_transport.drivers.kafka.listener import KafkaListener
from notify_transport.drivers.kafka.delivery.commit import CommitBeforeDispatch

ME, OTHER = "me-1", "dead-2"


class Admin:
    """The answers of ClusterAdmin a joining listener asks for."""

    def __init__(self, committed: dict, owners: dict | None = None, state: str = "stable",
                 members=(ME, OTHER), missing=(), fail: bool = False) -> None:
        self._committed, self._missing, self._fail = committed, list(missing), fail
        owners = {("t.info", 0): OTHER} if owners is None else owners
        self.info = SimpleNamespace(state=state, member_ids=frozenset(members),
                                    owners={tp: SimpleNamespace(member_id=m) for tp, m in owners.items()})

    def describe_pool(self, pool):
        if self._fail:
            raise ClusterError("coordinator not available")
        return self.info

    def partitions_of(self, topics):
        return [("t.info", 0)], self._missing

    def committed(self, pool, partitions):
        return {tp: self._committed.get(tp, -1) for tp in partitions}


def joined(admin: Admin) -> bool:
    listener = KafkaListener({"group.id": "pool", "group.protocol": "consumer"}, ["t.info"],
                             CommitBeforeDispatch(), admin=admin)
    return listener.membership.joined_without_partitions(SimpleNamespace(memberid=lambda: ME))


def test_in_a_stable_pool_with_every_position_stored_it_has_joined():
    assert joined(Admin({("t.info", 0): 17}))


def test_a_partition_without_a_stored_position_keeps_it_waiting():
    assert not joined(Admin({}))


def test_a_topic_the_cluster_does_not_list_yet_keeps_it_waiting():
    assert not joined(Admin({("t.info", 0): 17}, missing=["t.info"]))


def test_partitions_on_their_way_or_an_unsettled_group_keep_it_waiting():
    assert not joined(Admin({("t.info", 0): 17}, owners={("t.info", 0): ME}))
    assert not joined(Admin({("t.info", 0): 17}, state="reconciling"))
    assert not joined(Admin({("t.info", 0): 17}, members=(OTHER,)))


def test_a_failing_admin_client_keeps_it_waiting():
    assert not joined(Admin({("t.info", 0): 17}, fail=True))


def test_partitions_print_alike_as_pairs_and_as_topic_partitions():
    from confluent_kafka import TopicPartition

    from notify_transport.drivers.kafka.partitions import format_partitions

    assert format_partitions([("t.info", 0), TopicPartition("t.info", 1)]) == "t.info[0], t.info[1]"
    assert format_partitions([]) == "none"
