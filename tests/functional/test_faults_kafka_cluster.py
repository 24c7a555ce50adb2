"""Faults of a three-node Apache Kafka cluster under load, with the default settings.

Replication factor 3 and ``min.insync.replicas=2`` on the cluster; the producer's
defaults ``acks=all`` and idempotence: a write is confirmed only once two replicas
hold it, and a retry after a leader change never writes it twice. Eight threads
share one transport at 400 notifications per second (the storm of
``bench/kafka_restart_storm.py``, whose cluster rows run the same faults), while
two listener pools read the topic, one in each delivery mode:

* the leader of the topic's partitions SIGKILLed and restarted: nothing failed,
  nothing lost, no ``Notifier.info()`` failed; the at-least-once pool dispatched
  every notification, the other pool goes on after the fault;
* a rolling restart (SIGTERM one node at a time, each back and in sync before the
  next): the same;
* the whole cluster SIGKILLed and down for 10 s: nothing lost silently, every
  notification is in the topic or counted failed (as on noida); the listeners'
  recovery is printed, not asserted (an open bug: in some runs they stop fetching);
* two nodes of three stopped for 90 s (the partition keeps its leader, its in-sync
  replicas fall below ``min.insync.replicas``, no write can be acknowledged): with
  the default ``delivery_timeout`` nothing fails and nothing is lost, with and
  without the idempotent producer, and none is written twice with it; what the
  producer holds meanwhile stays within its stated bound;
* the same outage with a queue bound too small to hold it: the sends that could
  not be held fail, each counted and logged, and exactly those are missing from
  the topic; everything held is delivered once the nodes are back, once.
"""
from __future__ import annotations

import os
import sys
import uuid

import pytest

pytestmark = [pytest.mark.functional, pytest.mark.slow]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.kafka_restart_storm import (BrokerCrash, LeaderCrash, RollingRestart, TwoNodesDown,  # noqa: E402
                                      run_storm)
from notify_transport.drivers.kafka.client_properties import (PRODUCER_QUEUE_BYTES,  # noqa: E402
                                                              PRODUCER_QUEUE_MESSAGES)

#: Longest a Notifier.info() call may block, broker down or not: a product guarantee.
LONGEST_CALL = 10.0


def pools() -> dict[str, str]:
    suffix = uuid.uuid4().hex[:6]
    return {f"alo-{suffix}": "at_least_once", f"cbd-{suffix}": "commit_before_dispatch"}


def assert_it_cost_nothing(result) -> None:
    print("\n" + result.summary(), result.pools)
    assert result.failed == 0 and result.raised == 0 and result.pending == 0, result.summary()
    assert result.missing == 0 and result.checked == result.sent, result.summary()
    assert result.longest_call <= LONGEST_CALL, result.summary()
    assert_listeners_went_on(result)


def assert_listeners_went_on(result) -> None:
    for pool, seen in result.pools.items():
        if seen["mode"] == "at_least_once":
            assert seen["missing"] == 0, (pool, seen)
        assert seen["missing_after_last_fault"] == 0, (pool, seen)


def test_leader_killed_under_load_costs_nothing(kafka_cluster, kafka_conf, unique_topic):
    topic = unique_topic("leader")
    result = run_storm(kafka_cluster, kafka_conf, topic, threads=8, rate=400.0, cycles=1,
                       down=3.0, fault=LeaderCrash(kafka_cluster, f"{topic}.info", down=3.0),
                       crash_window=False, pools=pools(), topic_partitions=3, up=3.0)
    assert_it_cost_nothing(result)


def test_rolling_restart_under_load_costs_nothing(kafka_cluster, kafka_conf, unique_topic):
    topic = unique_topic("rolling")
    result = run_storm(kafka_cluster, kafka_conf, topic, threads=8, rate=400.0, cycles=1,
                       fault=RollingRestart(kafka_cluster, f"{topic}.info"),
                       crash_window=False, pools=pools(), topic_partitions=3, up=3.0)
    assert_it_cost_nothing(result)


def test_whole_cluster_down_for_ten_seconds_loses_nothing_silently(kafka_cluster, kafka_conf,
                                                                   unique_topic):
    topic = unique_topic("down")
    result = run_storm(kafka_cluster, kafka_conf, topic, threads=8, rate=400.0, cycles=1,
                       down=10.0, fault=BrokerCrash(kafka_cluster, down=10.0), crash_window=False,
                       pools=pools(), topic_partitions=3, up=4.0)
    print("\n" + result.summary(), result.pools)
    assert result.sent == result.delivered + result.failed + result.pending
    assert result.pending == 0
    # nothing lost silently: what is not in the topic was reported failed (sends queued longer
    # than delivery_timeout while no broker ran; some reported failed were written after all)
    assert result.missing <= result.failed, (result.missing_sample, result.summary())
    assert result.checked > 0
    assert result.longest_call <= LONGEST_CALL, result.summary()
    # The listeners are not held to going on here: in some runs both pools stopped fetching
    # after the whole cluster came back (an open bug, see the deployment docs); what they
    # dispatched is printed above.


#: How long two nodes of three stay down: past what the old 30 s delivery_timeout survived.
OUTAGE = 90.0
#: An upper bound of one storm notification's size on the wire (the 2.0 envelope of a small payload).
STORM_NOTIFICATION_BYTES = 1024


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "not-idempotent"])
def test_two_nodes_down_for_ninety_seconds_loses_nothing(kafka_cluster, kafka_conf, unique_topic,
                                                         idempotent):
    topic = unique_topic("twodown")
    query = {} if idempotent else {"enable_idempotence": "false"}
    result = run_storm(kafka_cluster, kafka_conf, topic, threads=8, rate=400.0, cycles=1, down=OUTAGE,
                       fault=TwoNodesDown(kafka_cluster, f"{topic}.info", down=OUTAGE), crash_window=False,
                       pools=pools(), topic_partitions=3, up=3.0, **query)
    assert_it_cost_nothing(result)
    # the outage was real: the producer held what was sent during it (400/s, most of 90 s)
    assert result.held_max >= 400 * OUTAGE / 2, result.summary()
    # ... within the stated bound, in notifications and bytes
    assert result.held_max <= PRODUCER_QUEUE_MESSAGES
    assert result.held_max * STORM_NOTIFICATION_BYTES <= PRODUCER_QUEUE_BYTES
    if idempotent:  # retried writes are never stored twice
        assert result.duplicated == 0, result.summary()
        for pool, seen in result.pools.items():
            if seen["mode"] == "at_least_once":
                assert seen["duplicated"] == 0, (pool, seen)


def test_an_outage_past_the_queue_bound_reports_exactly_what_it_could_not_hold(kafka_cluster, kafka_conf,
                                                                               unique_topic):
    topic = unique_topic("bound")
    bound = 2000  # notifications; the outage sends some 12,000
    result = run_storm(kafka_cluster, kafka_conf, topic, threads=8, rate=400.0, cycles=1, down=30.0,
                       fault=TwoNodesDown(kafka_cluster, f"{topic}.info", down=30.0), crash_window=False,
                       topic_partitions=3, up=3.0, producer_queue_timeout="0.2",
                       producer_config=f"queue.buffering.max.messages:{bound}")
    print("\n" + result.summary())
    assert result.held_max <= bound, result.summary()
    # the sends that found the queue full waited producer_queue_timeout, then were counted failed
    # (the Notifier logs each one, as oslo.messaging's does, instead of raising into the service)
    assert result.failed > 0, result.summary()
    # exactly those are missing from the topic: everything that was held got through once the
    # nodes were back, once
    assert result.pending == 0 and result.checked == result.sent, result.summary()
    assert result.missing == result.failed and result.duplicated == 0, result.summary()
    assert result.longest_call <= LONGEST_CALL, result.summary()
