"""``notify-transport topics``: notification topics of the cluster by vhost, retry and dead-letter
topics under the notification topic they belong to."""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Mapping, Sequence

from notify_transport.cli.ops import args as cli_args
from notify_transport.cli.ops.cluster import open_cluster
from notify_transport.cli.ops.output import EXIT_OK, emit, fail, failures_exit_1
from notify_transport.cli.contract import NOT_FOUND
from notify_transport.cli.ops.topic_kinds import DEAD_LETTER, NOTIFICATION, OTHER, RETRY, TopicNamer

DESCRIPTION = """\
List the notification topics of the cluster, one row each, by vhost: Kafka
topics named TOPIC.PRIORITY[.VHOST] as the Kafka driver names them, with their
partitions and the number of notifications they keep (end offset minus earliest
offset, summed over the partitions). Retry and dead-letter topics (named from
the [oslo_messaging_kafka] retry_topic and dead_letter_topic templates,
{topic}.retry.{pool} and {topic}.dlq by default) are listed after the
notification topic they belong to, of KIND retry (with their POOL) or
dead-letter. Topics that are not named like that are left out unless --all is
given; Kafka's internal topics are always left out.

The vhost of the transport URL does not restrict the list: use --vhost.

exit status: 0 listed, 1 nothing matched, 2 bad input or configuration,
3 brokers unreachable"""

EXAMPLES = """\
  notify-transport topics --transport-url kafka://127.0.0.1:9092
  notify-transport topics --transport-url kafka://127.0.0.1:9092 --vhost prod -f json
  notify-transport topics --config-file /etc/nova/nova.conf --topic versioned_notifications --all"""

def add_parser(sub: Any) -> None:
    p = cli_args.add_command(sub, "topics", "list notification topics per vhost with their sizes",
                             DESCRIPTION, EXAMPLES)
    cli_args.add_connection_args(p)
    p.add_argument("--vhost", metavar="VHOST", help="only this vhost's topics")
    p.add_argument("--topic", action="append", type=cli_args.topic_name, metavar="TOPIC",
                   help="only these notification topics, may repeat (also splits names whose "
                        "topic contains dots exactly)")
    p.add_argument("--all", action="store_true",
                   help="also list topics that are not notification topics")
    p.set_defaults(func=run)


@dataclasses.dataclass(frozen=True)
class TopicRow:
    kafka_topic: str
    topic: str
    priority: str | None
    vhost: str | None
    partitions: int
    messages: int
    #: notification, retry, dead-letter or other
    kind: str = NOTIFICATION
    #: retry / dead-letter topics: the pool named in the topic, when the template has one
    pool: str | None = None


#: Order of the kinds under one base topic and priority.
_KIND_ORDER = {NOTIFICATION: 0, RETRY: 1, DEAD_LETTER: 2, OTHER: 3}


def classify(partition_counts: Mapping[str, int], messages: Mapping[str, int],
             base_topics: Sequence[str] = (),
             namer: TopicNamer | None = None) -> tuple[dict[str | None, list[TopicRow]], list[TopicRow]]:
    """Notification topics (retry and dead-letter ones with them) by vhost (None: no vhost), and the others."""
    namer = namer or TopicNamer(base_topics=base_topics)
    by_vhost: dict[str | None, list[TopicRow]] = {}
    other: list[TopicRow] = []
    for name in sorted(partition_counts):
        kind = namer.classify(name)
        row = TopicRow(name, kind.base, kind.priority, kind.vhost, partition_counts[name],
                       messages.get(name, 0), kind.kind, kind.pool)
        if kind.kind == OTHER:
            other.append(row)
        else:
            by_vhost.setdefault(kind.vhost, []).append(row)
    for rows in by_vhost.values():
        rows.sort(key=lambda r: (r.topic, r.priority or "", _KIND_ORDER[r.kind], r.pool or "", r.kafka_topic))
    return by_vhost, other


#: The columns of the list (cliff's -c takes these names).
HEADERS = ("VHOST", "TOPIC", "PRIORITY", "KIND", "POOL", "KAFKA TOPIC", "PARTITIONS", "MESSAGES")


@failures_exit_1
def run(args: argparse.Namespace) -> int:
    base_topics = list(dict.fromkeys(args.topic or []))
    with open_cluster(args) as cluster:
        counts = cluster.topic_partitions()
        by_vhost, other = classify(counts, {}, base_topics,
                                   TopicNamer.from_options(cluster.driver.opts, base_topics))
        if args.vhost is not None:
            by_vhost = {v: rows for v, rows in by_vhost.items() if v == args.vhost}
        if not args.all:
            other = []
        shown = [r.kafka_topic for rows in by_vhost.values() for r in rows] + [r.kafka_topic for r in other]
        partitions = [(t, p) for t in shown for p in range(counts[t])]
        marks = cluster.watermarks(partitions)
    sizes: dict[str, int] = {}
    for (topic, _), (low, high) in marks.items():
        sizes[topic] = sizes.get(topic, 0) + max(0, high - low)
    by_vhost = {v: [dataclasses.replace(r, messages=sizes.get(r.kafka_topic, 0)) for r in rows]
                for v, rows in by_vhost.items()}
    other = [dataclasses.replace(r, messages=sizes.get(r.kafka_topic, 0)) for r in other]
    if not shown:
        what = f" on vhost {args.vhost!r}" if args.vhost is not None else ""
        return fail(f"no notification topic{what} in the cluster", NOT_FOUND,
                    "send one with 'notify-transport send --event-type test.ping', or check the URL")
    order = sorted(by_vhost, key=lambda v: (v is not None, v or ""))
    document = {"vhosts": [{"vhost": v, "topics": [dataclasses.asdict(r) for r in by_vhost[v]]} for v in order],
                "other": [dataclasses.asdict(r) for r in other]}
    rows = [(r.vhost, r.topic, r.priority, r.kind, r.pool, r.kafka_topic, r.partitions, r.messages)
            for v in order for r in by_vhost[v]] + [
        (None, None, None, r.kind, None, r.kafka_topic, r.partitions, r.messages) for r in other]
    emit(args, HEADERS, rows, document)
    return EXIT_OK
