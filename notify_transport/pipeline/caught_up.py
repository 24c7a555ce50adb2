"""Whether a scheduled ``pipeline run --once`` has anything to read, answered without Spark.

A JVM costs seconds and a quiet bus mostly has nothing new. Each run writes the end
offsets of its last finished micro-batch to ``CHECKPOINT/last_run.json``; the next
``--once`` run starts Spark only when some partition has records past them. The file is
written after the batches it describes commit, so a stale one starts Spark and never
skips records. The same count sizes the run that does start (:func:`held`).
"""
from __future__ import annotations

import json
import logging
import os
from typing import Any, Iterable, Mapping

from confluent_kafka import IsolationLevel
from confluent_kafka.admin import OffsetSpec

from notify_transport.drivers.kafka import ClusterAdmin
from notify_transport.pipeline import hadoop_fs, offsets
from notify_transport.pipeline.topics import Subscription

LOG = logging.getLogger(__name__)

LAST_RUN = "last_run.json"


def subscribed_partitions(admin: ClusterAdmin, topics: Iterable[str],
                          pattern: str | None) -> list[offsets.Partition]:
    """Partitions of the listed topics that exist, and of every topic matching ``pattern``."""
    found, _missing = admin.partitions_of(topics)
    if pattern:
        found = sorted(set(found) | set(admin.partitions_matching(pattern)))
    return found


def list_offsets(admin: ClusterAdmin, partitions: Iterable[offsets.Partition], which: str) -> offsets.Offsets:
    """Earliest or latest (last stable, as read_committed consumers see it) offsets."""
    spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
    return admin.list_offsets({tp: spec for tp in partitions}, isolation_level=IsolationLevel.READ_COMMITTED)


def end_offsets_of(progress: Iterable[Any]) -> dict[str, Any] | None:
    """The end offsets of the newest finished micro-batch among ``StreamingQueryProgress`` reports."""
    for report in reversed(list(progress)):
        sources = getattr(report, "sources", None) or []
        end = sources[0].endOffset if sources else None
        if end:
            return json.loads(end) if isinstance(end, str) else dict(end)
    return None


def record(spark, checkpoint_root: str, progress: Iterable[Any]) -> None:
    """Write the end offsets of the run's last finished micro-batch (nothing if it finished none)."""
    end = end_offsets_of(progress)
    if end is None:
        return
    fs = hadoop_fs.FileSystem(spark, checkpoint_root)
    fs.write_text(f"{checkpoint_root.rstrip('/')}/{LAST_RUN}", json.dumps(end, sort_keys=True))


def recorded(checkpoint_root: str) -> offsets.Offsets | None:
    """The offsets of ``LAST_RUN`` in a local checkpoint folder; None when there is none to trust."""
    if "://" in checkpoint_root and not checkpoint_root.startswith("file://"):
        return None
    path = os.path.join(checkpoint_root.removeprefix("file://"), LAST_RUN)
    try:
        with open(path, encoding="utf-8") as handle:
            return offsets.from_json(json.load(handle))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # ConfigurationError is a ValueError too
        LOG.warning("Ignoring %s: %s", path, exc)
        return None


def news(done: Mapping[offsets.Partition, int], latest: Mapping[offsets.Partition, int],
         earliest: Mapping[offsets.Partition, int]) -> int:
    """Records past ``done``; a partition it does not list counts from its earliest offset."""
    return sum(max(0, end - done.get(tp, earliest.get(tp, 0))) for tp, end in latest.items())


def _offsets(kafka_config: Mapping[str, Any], subscription: Subscription, timeout: float,
             known: Mapping[offsets.Partition, int]) -> tuple[offsets.Offsets, offsets.Offsets]:
    """Latest offsets of the subscribed partitions, and earliest offsets of those ``known`` lacks."""
    from notify_transport.pipeline.kafka_io import admin_properties

    options = subscription.options()
    topics = [t for t in options.get("subscribe", "").split(",") if t]
    admin = ClusterAdmin(admin_properties(kafka_config), timeout=timeout)
    try:
        partitions = subscribed_partitions(admin, topics, options.get("subscribePattern"))
        latest = list_offsets(admin, partitions, "latest")
        earliest = list_offsets(admin, [tp for tp in partitions if tp not in known], "earliest")
    finally:
        admin.close()
    return latest, earliest


def waiting(checkpoint_root: str, kafka_config: Mapping[str, Any], subscription: Subscription,
            timeout: float = 30.0) -> int | None:
    """How many records the subscribed partitions hold past the last run's end offsets; None
    when there is no last run to compare with (a first run, a remote checkpoint)."""
    done = recorded(checkpoint_root)
    if done is None:
        return None
    count = news(done, *_offsets(kafka_config, subscription, timeout, known=done))
    LOG.info("%d records past the last run's end offsets", count)
    return count


def held(kafka_config: Mapping[str, Any], subscription: Subscription, timeout: float = 30.0) -> int:
    """How many records the subscribed partitions hold (earliest to latest offset).

    No run can read more, whatever its checkpoint or starting offsets say, so
    this bounds a run the last run's offsets cannot measure (a first run, a
    remote checkpoint): enough to tell a small run from a large one.
    """
    count = news({}, *_offsets(kafka_config, subscription, timeout, known={}))
    LOG.info("%d records in the subscribed partitions", count)
    return count
