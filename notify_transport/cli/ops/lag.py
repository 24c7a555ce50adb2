"""``notify-transport lag``: how far each pool is behind, per partition."""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Mapping, Sequence

from notify_transport.cli.ops import args as cli_args
from notify_transport.cli.ops.cluster import (NO_OFFSET, GroupInfo, KafkaCluster, Partition,
                                              default_topics, open_cluster)
from notify_transport.cli.ops.output import EXIT_OK, fail, failures_exit_1, print_json, table, warn
from notify_transport.drivers.base import PRIORITIES

DESCRIPTION = """\
Show, for each pool (consumer group) and partition of the notification topics,
the pool's committed offset, the partition's end offset and the lag between them:
how many notifications the pool has yet to receive.

Topics are TOPIC.PRIORITY plus .VHOST when the transport URL has a vhost, as the
Kafka driver names them. Without --pool, every pool that has committed offsets
on those topics is shown. A partition a pool never committed shows "-": its
listeners start at the end (auto_offset_reset=latest) when they join.

exit status: 0 shown, 1 no such topic or pool, 2 bad input or configuration,
3 brokers unreachable"""

EXAMPLES = """\
  notify-transport lag --transport-url kafka://127.0.0.1:9092/prod
  notify-transport lag --transport-url kafka://127.0.0.1:9092 --pool ceilometer --pool billing
  notify-transport lag --config-file /etc/ceilometer/ceilometer.conf --priority info,error --json"""


def add_parser(sub: Any) -> None:
    p = cli_args.add_command(sub, "lag", "show each pool's committed offset, end offset and lag",
                             DESCRIPTION, EXAMPLES)
    cli_args.add_connection_args(p)
    p.add_argument("--pool", action="append", metavar="POOL",
                   help="pool to show, may repeat (default: every pool reading the topics)")
    p.add_argument("--topic", action="append", type=cli_args.topic_name, metavar="TOPIC",
                   help="notification topic, may repeat (default: [oslo_messaging_notifications] "
                        "topics, i.e. notifications)")
    p.add_argument("--priority", action="extend", type=cli_args.priority_list, metavar="LIST",
                   help="comma-separated priorities (default: all)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


@dataclasses.dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # None: the pool never committed this partition
    end: int

    @property
    def lag(self) -> int | None:
        if self.committed is None:
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
                "partitions": [{**dataclasses.asdict(p), "lag": p.lag} for p in self.partitions]}


def pool_lag(info: GroupInfo, partitions: Sequence[Partition], committed: Mapping[Partition, int],
             marks: Mapping[Partition, tuple[int, int]]) -> PoolLag:
    """The lag of one pool from its committed offsets and the partitions' watermarks."""
    rows = []
    for tp in partitions:
        offset = committed.get(tp, NO_OFFSET)
        rows.append(PartitionLag(tp[0], tp[1], offset if offset >= 0 else None, marks[tp][1]))
    return PoolLag(info, rows)


def render(pools: Sequence[PoolLag]) -> str:
    headers = ("POOL", "TOPIC", "PARTITION", "COMMITTED", "END", "LAG")
    rows = [(pool.info.pool, p.topic, p.partition, p.committed, p.end, p.lag)
            for pool in pools for p in pool.partitions]
    lines = [table(headers, rows, right=("PARTITION", "COMMITTED", "END", "LAG")), ""]
    for pool in pools:
        lines.append(f"pool {pool.info.pool}: lag {pool.total} over {len(pool.partitions)} partition(s); "
                     f"group {pool.info.state}, {pool.info.members} member(s)")
    return "\n".join(lines)


@failures_exit_1
def run(args: argparse.Namespace) -> int:
    priorities = list(dict.fromkeys(args.priority or PRIORITIES))
    with open_cluster(args) as cluster:
        topics = cluster.notification_topics(default_topics(args), priorities)
        partitions, missing = cluster.partitions_of(topics)
        if not partitions:
            return fail(f"none of the topics {', '.join(topics)} exists")
        pools = list(dict.fromkeys(args.pool)) if args.pool else _pools_reading(cluster, partitions)
        if not pools:
            return fail(f"no pool has committed offsets on {', '.join(sorted({t for t, _ in partitions}))}")
        marks = cluster.watermarks(partitions)
        result = [pool_lag(cluster.describe_pool(pool), partitions, cluster.committed(pool, partitions), marks)
                  for pool in pools]
    if args.json:
        print_json({"vhost": cluster.vhost, "missing_topics": missing,
                    "pools": [pool.as_dict() for pool in result]})
    else:
        print(render(result))
        if missing and (args.topic or args.priority):
            warn(f"{len(missing)} topic(s) do not exist: {', '.join(missing)}")
    return EXIT_OK


def _pools_reading(cluster: KafkaCluster, partitions: Sequence[Partition]) -> list[str]:
    """Pools with a committed offset on any of ``partitions``."""
    return [pool for pool in cluster.pools()
            if any(o >= 0 for o in cluster.committed(pool, partitions).values())]
