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
  recovery is printed, not asserted (an open bug: in some runs they stop fetching): a send waits
  ``delivery_timeout`` (30 s) for the cluster, which needs about as long to be
  killed, kept down and started again on two cores.
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

from bench.kafka_restart_storm import BrokerCrash, LeaderCrash, RollingRestart, run_storm  # noqa: E402

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
