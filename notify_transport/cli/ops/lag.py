"""``notify-transport lag``: how far each pool is behind, per partition."""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Mapping, Sequence

from notify_transport.cli.ops import args as cli_args
from notify_transport.drivers.kafka import NO_OFFSET, GroupInfo, Member, Partition, topic_name
from notify_transport.cli.ops.cluster import KafkaCluster, default_topics, open_cluster
from notify_transport.cli.ops.output import EXIT_OK, emit, fail, failures_exit_1, warn
from notify_transport.cli.contract import NOT_FOUND, TOPICS_HINT
from notify_transport.cli.ops.topic_kinds import DEAD_LETTER, NOTIFICATION, templates
from notify_transport.drivers.naming import PRIORITIES
from notify_transport.exceptions import ConfigurationError

DESCRIPTION = """\
Show how far each pool (consumer group) is behind on the notification topics:
without --describe one line per pool (state, members, lag); with --describe,
as kafka-consumer-groups --describe, one line per partition with the pool's
committed offset, the partition's end offset, the lag between them (how many
notifications the pool has yet to receive) and the member and host holding it.

Topics are TOPIC.PRIORITY plus .VHOST when the transport URL has a vhost, as the
Kafka driver names them. A pool's retry topics ({topic}.retry.{pool} by
default) are shown as KIND retry and count in its lag; dead-letter topics
({topic}.dlq) are shown as KIND dead-letter with their end offset, and do not
count in the lag (nothing reads them unless you do). Without --pool, every pool
that has committed offsets on the notification topics is shown. A partition a
pool never committed shows "-": its listeners start at the end
(auto_offset_reset=latest) when they join.

exit status: 0 shown, 1 no such topic, no pool that committed on them (without
--pool), or a --pool the cluster does not know (no member, no committed offset),
2 bad input or configuration, 3 brokers unreachable"""

EXAMPLES = """\
  notify-transport lag --transport-url kafka://127.0.0.1:9092/prod
  notify-transport lag --transport-url kafka://127.0.0.1:9092 --pool ceilometer --pool billing --describe
  notify-transport lag --config-file /etc/ceilometer/ceilometer.conf --priority info,error -f json"""


def add_parser(sub: Any) -> None:
    p = cli_args.add_command(sub, "lag", "show each pool's committed offset, end offset and lag",
                             DESCRIPTION, EXAMPLES)
    cli_args.add_connection_args(p)
    p.add_argument("--pool", action="append", type=cli_args.pool_name, metavar="POOL",
                   help="pool to show, may repeat (default: every pool reading the topics)")
    cli_args.add_topic_selection(p)
    p.add_argument("--describe", action="store_true",
                   help="one line per partition: committed, end, lag, member and host")
    p.set_defaults(func=run)


@dataclasses.dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # None: the pool never committed this partition
    end: int
    kind: str = NOTIFICATION
    member: Member | None = None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.kind == DEAD_LETTER:
            return None
        return max(0, self.end - self.committed)


@dataclasses.dataclass
class PoolLag:
    info: GroupInfo
    partitions: list[PartitionLag]

    @property
    def total(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    def as_dict(self) -> dict[str, Any]:
        return {"pool": self.info.pool, "state": self.info.state, "members": self.info.members,
                "total_lag": self.total,
                "partitions": [{"topic": p.topic, "partition": p.partition, "kind": p.kind,
                                "committed": p.committed, "end": p.end, "lag": p.lag,
                                "member": p.member.client_id if p.member else None,
                                "member_id": p.member.member_id if p.member else None,
                                "host": p.member.host if p.member else None}
                               for p in self.partitions]}


def pool_lag(info: GroupInfo, partitions: Sequence[Partition], committed: Mapping[Partition, int],
             marks: Mapping[Partition, tuple[int, int]], kinds: Mapping[str, str] | None = None) -> PoolLag:
    """The lag of one pool from its committed offsets and the partitions' watermarks."""
    rows = []
    for tp in partitions:
        offset = committed.get(tp, NO_OFFSET)
        rows.append(PartitionLag(tp[0], tp[1], offset if offset >= 0 else None, marks[tp][1],
                                 (kinds or {}).get(tp[0], NOTIFICATION), info.owners.get(tp)))
    return PoolLag(info, rows)


DESCRIBE_HEADERS = ("POOL", "TOPIC", "KIND", "PARTITION", "COMMITTED", "END", "LAG", "MEMBER", "HOST")
SUMMARY_HEADERS = ("POOL", "STATE", "MEMBERS", "PARTITIONS", "LAG")


def describe_rows(pools: Sequence[PoolLag]) -> list[tuple[Any, ...]]:
    return [(pool.info.pool, p.topic, p.kind, p.partition, p.committed, p.end, p.lag,
             p.member.client_id if p.member else None, p.member.host if p.member else None)
            for pool in pools for p in pool.partitions]


def summary_rows(pools: Sequence[PoolLag]) -> list[tuple[Any, ...]]:
    return [(pool.info.pool, pool.info.state, pool.info.members,
             sum(p.kind != DEAD_LETTER for p in pool.partitions), pool.total) for pool in pools]


@failures_exit_1
def run(args: argparse.Namespace) -> int:
    priorities = list(dict.fromkeys(args.priority or PRIORITIES))
    with open_cluster(args) as cluster:
        topics = cluster.notification_topics(default_topics(args), priorities)
        partitions, missing = cluster.partitions_of(topics)
        if not partitions:
            return fail(f"none of the topics {', '.join(topics)} exists", NOT_FOUND, TOPICS_HINT)
        pools = list(dict.fromkeys(args.pool)) if args.pool else _pools_reading(cluster, partitions)
        if not pools:
            return fail(f"no pool has committed offsets on {', '.join(sorted({t for t, _ in partitions}))}",
                        NOT_FOUND, "a pool shows here once its listeners commit; name one with --pool")
        result, unknown = [], []
        for pool in pools:
            info = cluster.describe_pool(pool)
            if info.unknown and not any(o >= 0 for o in cluster.committed(pool).values()):
                unknown.append(pool)
                continue
            extra, kinds = _delivery_topics(cluster, sorted({t for t, _ in partitions}), pool)
            mine = partitions + extra
            marks = cluster.watermarks(mine)
            result.append(pool_lag(info, mine, cluster.committed(pool, mine), marks, kinds))
    document = {"vhost": cluster.vhost, "missing_topics": missing, "unknown_pools": unknown,
                "pools": [pool.as_dict() for pool in result]}
    if result or args.output_format == "json":
        headers, rows = ((DESCRIBE_HEADERS, describe_rows(result)) if args.describe
                         else (SUMMARY_HEADERS, summary_rows(result)))
        emit(args, headers, rows, document)
    if missing and (args.topic or args.priority) and args.output_format != "json":
        warn(f"{len(missing)} topic(s) do not exist: {', '.join(missing)}")
    if unknown:
        return fail(f"no such pool: {', '.join(unknown)} (no member and no committed offset)", NOT_FOUND,
                    "'notify-transport lag' without --pool lists the pools that committed")
    return EXIT_OK


def _delivery_topics(cluster: KafkaCluster, topics: Sequence[str],
                     pool: str) -> tuple[list[Partition], dict[str, str]]:
    """The partitions of ``pool``'s retry topics and of the dead-letter topics of ``topics`` that exist."""
    names: dict[str, str] = {}
    for kind, template in templates(cluster.driver.opts).items():
        for topic in topics:
            try:
                names.setdefault(topic_name(template, topic, pool), kind)
            except ConfigurationError:
                continue
    found, _missing = cluster.partitions_of([n for n in names if n not in topics])
    return found, {name: kind for name, kind in names.items()}


def _pools_reading(cluster: KafkaCluster, partitions: Sequence[Partition]) -> list[str]:
    """Pools with a committed offset on any of ``partitions``."""
    return [pool for pool in cluster.pools()
            if any(o >= 0 for o in cluster.committed(pool, partitions).values())]
