"""``notify-transport tail``: follow notification topics, one line per notification."""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import string
import sys
import time
from typing import Any, Iterator

from notify_transport.cli.ops import args as cli_args
from notify_transport.cli.ops.cluster import KafkaCluster, default_topics, open_cluster
from notify_transport.cli.ops.follow import BATCH, SLICE, Follower, Received
from notify_transport.cli.ops.output import EXIT_OK, fail, failures_exit_1, status
from notify_transport.cli.contract import NOT_FOUND, TOPICS_HINT
from notify_transport.cli.ops.start import HELP as START_HELP, LATEST, Start, parse_start
from notify_transport.times import format_time, parse_time
from notify_transport.drivers.naming import PRIORITIES
from notify_transport.exceptions import ConfigurationError
from notify_transport.target import Target

DESCRIPTION = """\
Follow notification topics and print each notification on one line (or as JSON).

By default tail reads with a consumer of its own that joins no pool and commits
nothing: it takes nothing away from the listeners of any pool and leaves nothing
behind on the brokers. With --pool it joins that pool like any listener: it gets
only its share of the pool's partitions, and what it reads (filtered out or not)
is committed for the pool.

Topics are TOPIC.PRIORITY plus .VHOST when the transport URL has a vhost, as the
Kafka driver names them. A topic created after tail started (the first error
notification of a service, say) is followed from its beginning within
--refresh seconds. Records that are not notifications are reported on stderr
with their coordinates and skipped. When the brokers stop answering, tail says
so once, keeps trying, and says so again once they answer.

--line-format takes a Python format string over the fields
{timestamp} {priority} {publisher_id} {event_type} {payload} {message_id}
{ctxt} {topic} {partition} {offset} {kafka_timestamp} (payload and ctxt as
compact JSON), e.g. '{timestamp} {event_type} {payload}'.

exit status: 0 done, 1 --max not reached within --timeout, or nothing to read
with --exit-at-end, 2 bad input or configuration, 3 brokers unreachable"""

EXAMPLES = """\
  notify-transport tail --transport-url kafka://127.0.0.1:9092/prod
  notify-transport tail --transport-url kafka://127.0.0.1:9092 --priority error,critical \\
      --event-type '^compute\\.instance\\.' --publisher 'compute\\.host1$'
  notify-transport tail --transport-url kafka://127.0.0.1:9092 --from earliest --max 10 -f json
  notify-transport tail --transport-url kafka://127.0.0.1:9092 --from -1h --exit-at-end \\
      --line-format '{timestamp} {publisher_id} {event_type}'
  notify-transport tail --transport-url kafka://127.0.0.1:9092 --from -20 -e
  notify-transport tail --transport-url kafka://127.0.0.1:9092 --pool ceilometer --timeout 60"""

#: Fields of --line-format.
LINE_FIELDS = ("timestamp", "priority", "publisher_id", "event_type", "payload", "message_id", "ctxt",
               "topic", "partition", "offset", "kafka_timestamp")


def add_parser(sub: Any) -> None:
    p = cli_args.add_command(sub, "tail", "follow topics and print notifications as they come",
                             DESCRIPTION, EXAMPLES)
    cli_args.add_connection_args(p)
    cli_args.add_topic_selection(p)
    p.add_argument("--event-type", type=cli_args.regex, metavar="REGEX",
                   help="only event types this regular expression finds a match in")
    p.add_argument("--publisher", type=cli_args.regex, metavar="REGEX",
                   help="only publisher ids this regular expression finds a match in")
    p.add_argument("--from", dest="start", type=start_position, default=None, metavar="WHERE",
                   help=f"where to start in each partition: {START_HELP} (default: latest; not with "
                        "--pool, which reads from its committed offsets)")
    p.add_argument("-e", "--exit-at-end", action="store_true",
                   help="stop once every partition is read up to where it ended when tail started "
                        "(as kcat -e)")
    p.add_argument("--refresh", type=cli_args.positive_float, default=1.0, metavar="SECONDS",
                   help="how often to look for topics created since tail started")
    p.add_argument("--max", type=cli_args.positive_int, metavar="N",
                   help="stop after printing N notifications")
    p.add_argument("--timeout", type=cli_args.positive_float, metavar="SECONDS",
                   help="stop after this long (default: run until Ctrl-C or --max)")
    cli_args.add_output_format(p, formats=("value", "json"), described={
        "value": "value: one line per notification (see --line-format, --long)",
        "json": "json: one JSON object per line with the coordinates, ctxt and the whole message"})
    p.add_argument("--line-format", type=line_template, metavar="TEMPLATE",
                   help="a Python format string over the fields listed above (value format only)")
    p.add_argument("-l", "--long", action="store_true",
                   help="prefix each line with topic[partition]@offset")
    p.add_argument("--pool", type=cli_args.pool_name, help="join this pool instead of reading on the side")
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


def start_position(text: str) -> Start:
    try:
        return parse_start(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def line_template(text: str) -> str:
    """A --line-format template whose fields all exist (checked before anything connects)."""
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(text) if field is not None]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid --line-format {text!r}: {exc}") from None
    unknown = [f for f in fields if f not in LINE_FIELDS]
    if unknown or "" in fields:
        raise argparse.ArgumentTypeError(
            f"unknown field(s) {', '.join(repr(f) for f in unknown) or repr('{}')} in --line-format; "
            f"expected {', '.join('{' + f + '}' for f in LINE_FIELDS)}")
    return text


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def format_template(item: Received, template: str) -> str:
    """One line from a --line-format template (fields checked by :func:`line_template`)."""
    message = item.message or {}
    fields = {"timestamp": message.get("timestamp"), "priority": message.get("priority"),
              "publisher_id": message.get("publisher_id"), "event_type": message.get("event_type"),
              "payload": _compact(message.get("payload")), "message_id": message.get("message_id"),
              "ctxt": _compact(item.ctxt), "topic": item.topic, "partition": item.partition,
              "offset": item.offset,
              "kafka_timestamp": None if item.timestamp is None else format_time(item.timestamp)}
    return template.format(**fields)


def _stamp(value: object) -> str:
    """A notification's own timestamp (oslo's ``2024-05-01 12:00:00.250123``, UTC) as every time is
    printed (:func:`~notify_transport.times.format_time`); as it came when it is not a time."""
    if not value:
        return ""
    try:
        return format_time(parse_time(str(value)))
    except ValueError:
        return str(value)[:23]


def format_line(item: Received, long: bool = False) -> str:
    """``timestamp PRIORITY publisher event_type payload`` on one line."""
    message = item.message or {}
    stamp = _stamp(message.get("timestamp"))
    if not stamp and item.timestamp is not None:
        stamp = format_time(item.timestamp)
    payload = _compact(message.get("payload"))
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
            return fail(f"none of the topics {', '.join(topics)} exists; nothing to read", NOT_FOUND,
                        TOPICS_HINT)
        return _follow(source, selector, args, cluster.vhost, tally)


def render(item: Received, args: argparse.Namespace, vhost: str | None) -> str:
    """One output line as -f, --line-format and --long ask."""
    if args.output_format == "json":
        return format_json(item, vhost)
    if args.line_format:
        line = format_template(item, args.line_format)
        return f"{item.coordinates} {line}" if args.long else line
    return format_line(item, args.long)


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
                    out.write(render(item, args, vhost) + "\n")
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
        status(args, tally.summary())
    if args.max is not None and tally.shown < args.max:
        within = "before the end" if getattr(args, "exit_at_end", False) and args.timeout is None \
            else f"within {args.timeout:g}s"
        return fail(f"only {tally.shown} of {args.max} notification(s) arrived {within}")
    return EXIT_OK


def _reader_source(cluster: KafkaCluster, args: argparse.Namespace,
                   topics: list[str]) -> Iterator[Received | None] | None:
    """Records read beside the pools; None when --exit-at-end and no topic exists."""
    start = args.start or Start(LATEST)
    follower = Follower(cluster, topics, start, args.refresh, exit_at_end=args.exit_at_end,
                        status=lambda line: status(args, line))
    try:
        # explicit offsets, resolved now: a notification sent after the line below is printed is read
        partitions, missing = follower.open()
    except BaseException:
        follower.close()
        raise
    if not partitions and args.exit_at_end:
        follower.close()
        return None
    absent = (f"; {len(missing)} topic(s) do not exist yet and are followed from their beginning once "
              f"created: {', '.join(missing)}" if missing and not args.exit_at_end else "")
    shown = ", ".join(sorted({t for t, _ in partitions})) or "no topic yet"
    status(args, f"following {len(partitions)} partition(s) of {shown} from {start.describe()}{absent}")
    return follower.records()


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
    status(args, f"following {', '.join(topics)} in pool {args.pool!r} "
                 f"(partitions {', '.join(f'{t}[{p}]' for t, p in sorted(listener_assignment(listener)))})")
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
                yield Received({}, None, "?", -1, -1, None)
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
