"""``notify-transport tail``: follow notification topics, one line per notification."""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from typing import Any, Iterator

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from notify_transport.cli.ops import args as cli_args
from notify_transport.cli.ops.cluster import ClusterError, KafkaCluster, default_topics, open_cluster
from notify_transport.cli.ops.output import EXIT_OK, fail, failures_exit_1, warn
from notify_transport.cli.ops.timespec import format_time
from notify_transport.drivers.base import PRIORITIES
from notify_transport.drivers.envelope import decode_notification
from notify_transport.exceptions import ConfigurationError, DecodeError
from notify_transport.target import Target

DESCRIPTION = """\
Follow notification topics and print each notification on one line (or as JSON).

By default tail reads with a consumer of its own that joins no pool and commits
nothing: it takes nothing away from the listeners of any pool and leaves nothing
behind on the brokers. With --pool it joins that pool like any listener: it gets
only its share of the pool's partitions, and what it reads (filtered out or not)
is committed for the pool.

Topics are TOPIC.PRIORITY plus .VHOST when the transport URL has a vhost, as the
Kafka driver names them. Records that are not notifications are reported on
stderr with their coordinates and skipped.

exit status: 0 done, 1 --max not reached within --timeout or no topic to follow,
2 bad input or configuration, 3 brokers unreachable"""

EXAMPLES = """\
  notify-transport tail --transport-url kafka://127.0.0.1:9092/prod
  notify-transport tail --transport-url kafka://127.0.0.1:9092 --priority error,critical \\
      --event-type '^compute\\.instance\\.' --publisher 'compute\\.host1$'
  notify-transport tail --transport-url kafka://127.0.0.1:9092 --from earliest --max 10 --json
  notify-transport tail --transport-url kafka://127.0.0.1:9092 --pool ceilometer --timeout 60"""

#: Most records taken from the consumer in one call.
BATCH = 500
#: Longest single wait, so that --timeout and Ctrl-C are noticed quickly.
SLICE = 0.2


def add_parser(sub: Any) -> None:
    p = cli_args.add_command(sub, "tail", "follow topics and print notifications as they come",
                             DESCRIPTION, EXAMPLES)
    cli_args.add_connection_args(p)
    p.add_argument("--topic", action="append", type=cli_args.topic_name, metavar="TOPIC",
                   help="notification topic, may repeat (default: [oslo_messaging_notifications] "
                        "topics, i.e. notifications)")
    p.add_argument("--priority", action="extend", type=cli_args.priority_list, metavar="LIST",
                   help="comma-separated priorities to follow (default: all)")
    p.add_argument("--event-type", type=cli_args.regex, metavar="REGEX",
                   help="only event types this regular expression finds a match in")
    p.add_argument("--publisher", type=cli_args.regex, metavar="REGEX",
                   help="only publisher ids this regular expression finds a match in")
    p.add_argument("--from", dest="start", choices=("latest", "earliest"), default=None,
                   help="start at the end (only new notifications) or at the oldest kept "
                        "(default: latest; not with --pool, which reads from its committed offsets)")
    p.add_argument("--max", type=cli_args.positive_int, metavar="N",
                   help="stop after printing N notifications")
    p.add_argument("--timeout", type=cli_args.positive_float, metavar="SECONDS",
                   help="stop after this long (default: run until Ctrl-C or --max)")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per line: coordinates, ctxt and the whole message")
    p.add_argument("-l", "--long", action="store_true",
                   help="prefix each line with topic[partition]@offset")
    p.add_argument("--pool", help="join this pool instead of reading on the side")
    p.set_defaults(func=run)


@dataclasses.dataclass
class TailFilter:
    """What --event-type, --publisher and --priority let through."""

    event_type: re.Pattern[str] | None = None
    publisher: re.Pattern[str] | None = None
    priorities: frozenset[str] | None = None

    def match(self, message: dict) -> bool:
        if self.priorities is not None:
            prio = str(message.get("priority") or "").lower()
            if cli_args.PRIORITY_ALIASES.get(prio, prio) not in self.priorities:
                return False
        if self.event_type is not None and not self.event_type.search(str(message.get("event_type") or "")):
            return False
        if self.publisher is not None and not self.publisher.search(str(message.get("publisher_id") or "")):
            return False
        return True


@dataclasses.dataclass
class Received:
    """One decoded record, wherever it came from."""

    ctxt: dict
    message: dict
    topic: str
    partition: int
    offset: int
    timestamp: float | None  # broker/producer time, seconds since the epoch

    @property
    def coordinates(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


def format_line(item: Received, long: bool = False) -> str:
    """``timestamp PRIORITY publisher event_type payload`` on one line."""
    message = item.message
    stamp = str(message.get("timestamp") or "")[:23]
    if not stamp and item.timestamp is not None:
        stamp = format_time(item.timestamp)
    payload = json.dumps(message.get("payload"), sort_keys=True, separators=(",", ":"),
                         ensure_ascii=False, default=str)
    line = (f"{stamp} {str(message.get('priority') or '?').upper():<8} "
            f"{message.get('publisher_id')} {message.get('event_type')} {payload}")
    return f"{item.coordinates} {line}" if long else line


def format_json(item: Received, vhost: str | None) -> str:
    return json.dumps({"topic": item.topic, "partition": item.partition, "offset": item.offset,
                       "kafka_timestamp": None if item.timestamp is None else format_time(item.timestamp),
                       "vhost": vhost, "ctxt": item.ctxt, "message": item.message},
                      sort_keys=True, ensure_ascii=False, default=str)


@dataclasses.dataclass
class Tally:
    shown: int = 0
    filtered: int = 0
    undecodable: int = 0

    def summary(self) -> str:
        return (f"{self.shown} notification(s) shown, {self.filtered} filtered out, "
                f"{self.undecodable} undecodable record(s) skipped")


@failures_exit_1
def run(args: argparse.Namespace) -> int:
    if args.pool and args.start:
        raise ConfigurationError("--from cannot be used with --pool: a pool reads from its committed "
                                 "offsets (move them with 'notify-transport replay')")
    priorities = list(dict.fromkeys(args.priority or PRIORITIES))
    selector = TailFilter(args.event_type, args.publisher, frozenset(priorities))
    with open_cluster(args) as cluster:
        topics = cluster.notification_topics(default_topics(args), priorities)
        tally = Tally()
        source = (_pool_source(cluster, args, topics, priorities, tally) if args.pool
                  else _reader_source(cluster, args, topics))
        if source is None:
            return fail(f"none of the topics {', '.join(topics)} exists yet; nothing to follow")
        return _follow(source, selector, args, cluster.vhost, tally)


def _follow(source: Iterator[Received | None], selector: TailFilter, args: argparse.Namespace,
            vhost: str | None, tally: Tally) -> int:
    """Print what ``source`` yields until --max or --timeout; ``None`` items mean "nothing yet"."""
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    out = sys.stdout
    try:
        for item in source:
            if item is not None:
                if item.message is None:  # undecodable, already reported
                    tally.undecodable += 1
                elif selector.match(item.message):
                    out.write((format_json(item, vhost) if args.json else format_line(item, args.long)) + "\n")
                    out.flush()
                    tally.shown += 1
                else:
                    tally.filtered += 1
            if args.max is not None and tally.shown >= args.max:
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
        print(tally.summary(), file=sys.stderr)
    if args.max is not None and tally.shown < args.max:
        return fail(f"only {tally.shown} of {args.max} notification(s) arrived within {args.timeout:g}s")
    return EXIT_OK


def _reader_source(cluster: KafkaCluster, args: argparse.Namespace,
                   topics: list[str]) -> Iterator[Received | None] | None:
    partitions, missing = cluster.partitions_of(topics)
    if not partitions:
        return None
    start = args.start or "latest"
    marks = cluster.watermarks(partitions)
    # explicit offsets, resolved now: a notification sent after the line below is printed is read
    positions = [TopicPartition(t, p, marks[(t, p)][0 if start == "earliest" else 1]) for t, p in partitions]
    for tp in positions:
        if tp.offset < 0:
            tp.offset = OFFSET_BEGINNING
    consumer = cluster.reader("tail")
    consumer.assign(positions)
    absent = (f"; not following {len(missing)} topic(s) that do not exist yet: {', '.join(missing)}"
              if missing else "")
    print(f"following {len(partitions)} partition(s) of {', '.join(sorted({t for t, _ in partitions}))} "
          f"from {start}{absent}", file=sys.stderr)
    return _records(consumer)


def _records(consumer: Any) -> Iterator[Received | None]:
    try:
        while True:
            try:
                records = consumer.consume(BATCH, SLICE)
            except KafkaException as exc:
                raise ClusterError(f"reading failed: {exc.args[0].str() if exc.args else exc}") from None
            if not records:
                yield None
                continue
            for record in records:
                err = record.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    if err.fatal():
                        raise ClusterError(f"reading failed: {err.str()}")
                    warn(err.str())
                    continue
                kind, millis = record.timestamp()
                coords = (record.topic(), record.partition(), record.offset(),
                          millis / 1000.0 if kind else None)
                try:
                    ctxt, message = decode_notification(record.value())
                except DecodeError as exc:
                    warn(f"skipping undecodable record {coords[0]}[{coords[1]}]@{coords[2]}: {exc}")
                    yield Received({}, None, *coords)  # type: ignore[arg-type]
                    continue
                yield Received(ctxt, message, *coords)
    finally:
        consumer.close()


def _pool_source(cluster: KafkaCluster, args: argparse.Namespace, topics: list[str],
                 priorities: list[str], tally: Tally) -> Iterator[Received | None]:
    base_topics = default_topics(args)
    pairs = [(Target(topic=t), p) for t in base_topics for p in priorities]
    listener = cluster.driver.listen_for_notifications(pairs, args.pool, 1, None)
    try:
        listener.start()  # creates missing topics and returns once the pool gave it partitions
    except BaseException:
        listener.stop()
        listener.cleanup()
        raise
    print(f"following {', '.join(topics)} in pool {args.pool!r} "
          f"(partitions {', '.join(f'{t}[{p}]' for t, p in sorted(listener_assignment(listener)))})",
          file=sys.stderr)
    return _pool_messages(listener, tally, args.max)


def listener_assignment(listener: Any) -> set[tuple[str, int]]:
    return set(getattr(listener, "assignment", set()) or set())


def _pool_messages(listener: Any, tally: Tally, limit: int | None) -> Iterator[Received | None]:
    skipped_before = getattr(listener, "skipped", 0)
    unsettled = None
    try:
        while True:
            # never take more than is left to print: what is polled is committed for the pool
            # (the items of the previous batch were all counted by the time we get here)
            want = BATCH if limit is None else max(1, min(BATCH, limit - tally.shown))
            batch = listener.poll(timeout=SLICE, max_messages=want)
            skipped = getattr(listener, "skipped", 0)
            for _ in range(skipped - skipped_before):
                yield Received({}, None, "?", -1, -1, None)  # type: ignore[arg-type]
            skipped_before = skipped
            if not batch:
                yield None
                continue
            for incoming in batch:
                unsettled = incoming
                yield Received(incoming.ctxt, incoming.message, incoming.topic, incoming.partition,
                               incoming.offset, incoming.timestamp)
                incoming.acknowledge()  # printed (or filtered out): processing ended
                unsettled = None
    finally:
        if unsettled is not None:
            unsettled.acknowledge()
        listener.stop()
        listener.commit()
        listener.cleanup()
