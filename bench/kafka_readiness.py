"""How soon Kafka listeners are ready: the demo's shape, timed per listener, under one group protocol.

The targets: a listener ready within 1 s of ``start()``, and the
demo's four listeners in two pools, started one after another, all ready
within 2 s. ``measure`` runs exactly the demo's exchange (``notify-transport
demo``: its topic of two partitions, four listeners in two pools, 300
notifications that every pool must receive exactly once) on the given broker
with ``group_protocol`` set, and returns how long each ``start()`` took. A run
whose pools did not get every notification exactly once is an error, not a
figure: a listener that returns early without its place in the group would
look fast.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

from bench.kafka_impls import OURS_QUERY_ENV


def url_for(bootstrap: str, protocol: str) -> str:
    """The demo's URL for ``bootstrap`` with ``group_protocol`` and any ``--ours-kafka-query``."""
    from notify_transport.cli.demo import with_demo_defaults

    query = "&".join(filter(None, (os.environ.get(OURS_QUERY_ENV, ""), f"group_protocol={protocol}")))
    return with_demo_defaults(f"kafka://{bootstrap}?{query}")


def measure(bootstrap: str, protocol: str, topic: str, count: int = 300,
            pools: tuple[str, ...] = ("audit", "billing"), per_pool: int = 2, timeout: float = 60.0) -> dict:
    """One demo exchange on ``topic``; each listener's start time, the slowest and all of them."""
    from oslo_config import cfg

    from notify_transport import get_notification_transport
    from notify_transport.cli.demo import exchange

    conf = cfg.ConfigOpts()
    conf([])
    transport = get_notification_transport(conf, url_for(bootstrap, protocol))
    args = argparse.Namespace(count=count, listeners_per_pool=per_pool, timeout=timeout)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # stdout carries the worker's result
            outcome = exchange(transport, list(pools), args, topic=topic)
    finally:
        transport.cleanup()
    result = {"protocol": protocol, "ready_s": [round(t, 3) for t in outcome.ready_s],
              "longest_s": max(outcome.ready_s), "all_s": outcome.all_started_s,
              "listeners": len(outcome.ready_s)}
    if not outcome.ok:
        result["error"] = "a pool missed or duplicated notifications (see the worker's stderr)"
    return result
