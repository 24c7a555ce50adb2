"""``notify-transport replay``: move a pool's committed offsets so its listeners receive again."""
from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any, Mapping, Sequence

from notify_transport.cli.ops import args as cli_args
from notify_transport.drivers.kafka import NO_OFFSET, Partition
from notify_transport.cli.ops.cluster import default_topics, open_cluster
from notify_transport.cli.ops.output import EXIT_OK, Progress, emit, fail, failures_exit_1, status, warn
from notify_transport.cli.contract import NOT_FOUND, TOPICS_HINT
from notify_transport.times import TIME_HELP, format_time, to_millis
from notify_transport.drivers.naming import PRIORITIES

DESCRIPTION = """\
Reset a pool's committed offsets on its notification topics to a point in time,
an offset, or the earliest/latest kept notification, so that the pool's
listeners receive again from there (or skip ahead) when they next join.

Kafka only accepts new offsets for a group without members: stop the pool's
listeners first. replay refuses while the pool has members unless --force
(useful with a broker that never evicts a member that died without leaving;
the listeners of a live pool would commit over the new offsets).

Like kafka-consumer-groups --reset-offsets, replay only prints the plan (per
partition: the committed offset it moves from, the offset it moves to and how
many notifications the pool receives again) unless --execute is given.

Topics are TOPIC.PRIORITY plus .VHOST when the transport URL has a vhost, as the
Kafka driver names them.

A pool that has never joined nor committed is refused (a misspelt name would
create a new consumer group) unless --new-pool.

exit status: 0 planned (or done with --execute), 1 refused or failed, or no
such pool or topic, 2 bad input or configuration, 3 broker unreachable"""

EXAMPLES = """\
  notify-transport replay --transport-url kafka://127.0.0.1:9092/prod --pool ceilometer --to-time -1h
  notify-transport replay --transport-url kafka://127.0.0.1:9092/prod --pool ceilometer --to-time -1h \\
      --execute
  notify-transport replay --transport-url kafka://127.0.0.1:9092 --pool billing \\
      --to-time 2024-05-01T12:00:00Z --priority info -f json
  notify-transport replay --transport-url kafka://127.0.0.1:9092 --pool audit --to-earliest --execute
  notify-transport replay --transport-url kafka://127.0.0.1:9092 --pool audit --topic notifications \\
      --priority error --partition 0 --to-offset 1200 --execute"""


def add_parser(sub: Any) -> None:
    p = cli_args.add_command(sub, "replay", "reset a pool's offsets to a time or offset to receive again",
                             DESCRIPTION, EXAMPLES)
    cli_args.add_connection_args(p)
    p.add_argument("--pool", required=True, type=cli_args.pool_name, help="the pool (consumer group) to move")
    cli_args.add_topic_selection(p)
    p.add_argument("--partition", action="append", type=cli_args.non_negative_int, metavar="N",
                   help="only this partition of each topic, may repeat (default: all)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-time", type=cli_args.point_in_time, metavar="TIME",
                       help=f"the first notification at or after TIME: {TIME_HELP}")
    where.add_argument("--to-offset", type=cli_args.non_negative_int, metavar="OFFSET",
                       help="this offset in every selected partition (kept within the partition's range)")
    where.add_argument("--to-earliest", action="store_true", help="the oldest notification kept")
    where.add_argument("--to-latest", action="store_true",
                       help="the end: skip everything not yet received")
    act = p.add_mutually_exclusive_group()
    act.add_argument("--execute", action="store_true",
                     help="move the offsets (without it, replay prints the plan and changes nothing)")
    act.add_argument("--dry-run", action="store_true",
                     help="print the plan and change nothing: what replay does without --execute")
    p.add_argument("--force", action="store_true",
                   help="with --execute: move the offsets even while the pool has members")
    p.add_argument("--new-pool", action="store_true",
                   help="place a pool that has never joined nor committed (its listeners then start "
                        "from the new offsets); without it an unknown pool is refused, so that a "
                        "misspelt name does not create a consumer group")
    p.set_defaults(func=run)


@dataclasses.dataclass(frozen=True)
class Move:
    """The plan for one partition."""

    topic: str
    partition: int
    committed: int | None  # None: the pool never committed this partition
    low: int
    high: int
    new: int
    note: str = ""

    @property
    def again(self) -> int:
        """Notifications the pool receives again (positive) or skips (negative) by this move."""
        start = self.committed if self.committed is not None else self.high
        return start - self.new


def plan_moves(partitions: Sequence[Partition], committed: Mapping[Partition, int],
               marks: Mapping[Partition, tuple[int, int]], targets: Mapping[Partition, int],
               target_is_time: bool = False) -> list[Move]:
    """New offsets kept within each partition's ``[low, high]``; a time with no later notification -> high."""
    moves = []
    for tp in partitions:
        low, high = marks[tp]
        want = targets[tp]
        note = ""
        if want < 0:
            want, note = (high, "no notification that recent: end") if target_is_time else (high, "")
        if want < low:
            want, note = low, f"{targets[tp]} is gone (retention): earliest kept"
        elif want > high:
            want, note = high, f"{targets[tp]} is past the end: end"
        offset = committed.get(tp, NO_OFFSET)
        moves.append(Move(tp[0], tp[1], offset if offset >= 0 else None, low, high, want, note))
    return moves


HEADERS = ("TOPIC", "PARTITION", "FROM", "TO", "RECEIVED AGAIN", "NOTE")


def rows_of(moves: Sequence[Move]) -> list[tuple[Any, ...]]:
    """Per partition: from (the committed offset, - when none), to, notifications received again."""
    return [(m.topic, m.partition, m.committed, m.new, m.again, m.note) for m in moves]


def describe_target(args: argparse.Namespace) -> str:
    if args.to_time is not None:
        return f"the first notification at or after {format_time(args.to_time)}"
    if args.to_offset is not None:
        return f"offset {args.to_offset}"
    return "the earliest kept notification" if args.to_earliest else "the end (latest)"


@failures_exit_1
def run(args: argparse.Namespace) -> int:
    priorities = list(dict.fromkeys(args.priority or PRIORITIES))
    with open_cluster(args) as cluster:
        topics = cluster.notification_topics(default_topics(args), priorities)
        partitions, _missing = cluster.partitions_of(topics)
        if args.partition:
            wanted = set(args.partition)
            partitions = [tp for tp in partitions if tp[1] in wanted]
        if not partitions:
            return fail(f"no partition to move: none of the topics {', '.join(topics)} exists"
                        + (f" with partition(s) {', '.join(map(str, args.partition))}" if args.partition else ""),
                        NOT_FOUND, TOPICS_HINT)
        progress = Progress(f"replay {args.pool}: resolved the offsets of", len(partitions), rate=False,
                            quiet=args.quiet)
        info = cluster.describe_pool(args.pool)
        committed = cluster.committed(args.pool, partitions)
        if info.unknown and not args.new_pool and not any(o >= 0 for o in cluster.committed(args.pool).values()):
            return fail(f"no such pool: {args.pool!r} (no member and no committed offset)", NOT_FOUND,
                        "'notify-transport lag' lists the pools; --new-pool places a pool before its "
                        "listeners first start")
        marks = cluster.watermarks(partitions)
        if args.to_time is not None:
            targets = cluster.offsets_for_time(partitions, to_millis(args.to_time))
        elif args.to_offset is not None:
            targets = {tp: args.to_offset for tp in partitions}
        else:
            targets = {tp: marks[tp][0 if args.to_earliest else 1] for tp in partitions}
        progress.done(len(partitions), "partition(s)")
        moves = plan_moves(partitions, committed, marks, targets, target_is_time=args.to_time is not None)
        again = sum(m.again for m in moves)
        header = (f"pool {args.pool} ({info.state}, {info.members} member(s)) to "
                  f"{describe_target(args)}: {again} notification(s) received again"
                  if again >= 0 else
                  f"pool {args.pool} ({info.state}, {info.members} member(s)) to "
                  f"{describe_target(args)}: {-again} notification(s) skipped")
        document = {"pool": args.pool, "state": info.state, "members": info.members,
                    "executed": args.execute, "received_again": again,
                    "partitions": [{**dataclasses.asdict(m), "received_again": m.again} for m in moves]}
        if args.output_format == "table":
            print(header)
        emit(args, HEADERS, rows_of(moves), document)
        busy = (f"pool {args.pool!r} has {info.members} member(s) (group {info.state}): stop its "
                "listeners first, or use --force (a running listener commits over the new offsets, "
                "and a real Kafka broker refuses them while the group has members)")
        if not args.execute:
            if info.active and not args.force:
                warn(busy)
            print("plan only, nothing changed: run again with --execute to move the offsets",
                  file=sys.stderr)
            return EXIT_OK
        if info.active and not args.force:
            return fail(busy + "; nothing changed")
        progress = Progress(f"replay {args.pool}: committed new offsets for", len(moves), rate=False,
                            quiet=args.quiet)
        cluster.commit(args.pool, {(m.topic, m.partition): m.new for m in moves})
        progress.done(len(moves), "partition(s)")
        check = cluster.committed(args.pool, partitions)
        wrong = [f"{m.topic}[{m.partition}] is at {check.get((m.topic, m.partition))}, not {m.new}"
                 for m in moves if check.get((m.topic, m.partition)) != m.new]
        if wrong:
            return fail("the new offsets did not stick (a member of the pool committed over them?): "
                        + "; ".join(wrong))
    if args.output_format == "table":
        status(args, f"done: the listeners of pool {args.pool} start from the new offsets when they next join")
    return EXIT_OK
