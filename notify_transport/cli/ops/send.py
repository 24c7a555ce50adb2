"""``notify-transport send``: publish notifications and wait for the broker to confirm them."""
from __future__ import annotations

import argparse
import socket
import sys
import time
from typing import Any

from notify_transport.cli.ops import args as cli_args
from notify_transport.cli.ops.cluster import KafkaCluster, default_topics, open_transport
from notify_transport.cli.ops.output import EXIT_OK, Progress, fail, failures_exit_1
from notify_transport.drivers.kafka.driver import KafkaDriver
from notify_transport.notify import Notifier

DESCRIPTION = """\
Send notifications through the public API (a Notifier, as a service would) and
wait until the broker has confirmed every one of them.

Works with every notification driver (kafka://, rabbit://). On Kafka the topic
is TOPIC.PRIORITY plus .VHOST when the transport URL has a vhost. A send that
fails is logged with its cause; the command then exits 1.

exit status: 0 all confirmed, 1 some failed or were not confirmed within
--timeout, 2 bad input or configuration, 3 Kafka brokers unreachable (checked
before sending; with rabbit:// an unreachable broker shows as unconfirmed: 1)"""

EXAMPLES = """\
  notify-transport send --transport-url kafka://127.0.0.1:9092/prod \\
      --event-type compute.instance.create.end --payload '{"instance_id": "i-1"}'
  notify-transport send --config-file /etc/nova/nova.conf --topic versioned_notifications \\
      --priority error --event-type compute.instance.create.error --payload @payload.json
  notify-transport send --transport-url kafka://127.0.0.1:9092 --event-type load.test --count 10000"""


def add_parser(sub: Any) -> None:
    p = cli_args.add_command(sub, "send", "send notifications and wait for the broker's confirmation",
                             DESCRIPTION, EXAMPLES)
    cli_args.add_connection_args(p)
    p.add_argument("--topic", action="append", type=cli_args.topic_name, metavar="TOPIC",
                   help="notification topic, may repeat (default: [oslo_messaging_notifications] "
                        "topics, i.e. notifications)")
    p.add_argument("--priority", type=cli_args.priority, default="info",
                   help="audit, debug, info, warn, error, critical or sample")
    p.add_argument("--event-type", required=True, help="e.g. compute.instance.create.end")
    p.add_argument("--payload", type=cli_args.json_value, default={}, metavar="JSON",
                   help="the payload as JSON, or @FILE to read it from a file (default: {})")
    p.add_argument("--ctxt", type=cli_args.json_object, default={}, metavar="JSON",
                   help="request context as a JSON object (secret keys such as auth_token are "
                        "never sent)")
    p.add_argument("--publisher-id", default=f"notify-transport.{socket.gethostname()}",
                   help="publisher_id of the notifications (also the Kafka message key)")
    p.add_argument("--count", type=cli_args.positive_int, default=1,
                   help="how many times to send it")
    p.add_argument("--format", choices=("messagingv2", "messaging"), default="messagingv2",
                   help="oslo wire format: messagingv2 (2.0 envelope) or messaging (plain)")
    p.add_argument("--retry", type=int, default=None,
                   help="re-sends of a failed delivery, as oslo's retry (-1: until delivery_timeout)")
    p.add_argument("--timeout", type=cli_args.positive_float, default=30.0, metavar="SECONDS",
                   help="how long to wait for the broker's confirmations")
    p.set_defaults(func=run)


@failures_exit_1
def run(args: argparse.Namespace) -> int:
    with open_transport(args) as transport:
        topics = default_topics(args)
        kafka_topics = [f"{t}.{args.priority}" for t in topics]  # how the notifier names targets
        if isinstance(transport.driver, KafkaDriver):
            cluster = KafkaCluster(transport, args.connect_timeout)
            try:
                kafka_topics = cluster.notification_topics(topics, [args.priority])
                cluster.topic_partitions()  # brokers unreachable -> exit 3 before sending
            finally:
                cluster.close()
        notifier = Notifier(transport, publisher_id=args.publisher_id, driver=args.format,
                            topics=topics, retry=args.retry)
        return _send(transport, notifier, args, kafka_topics)


def _send(transport: Any, notifier: Notifier, args: argparse.Namespace, kafka_topics: list[str]) -> int:
    notify = getattr(notifier, args.priority)
    progress = Progress("sent", args.count) if args.count > 1 else None
    started = time.monotonic()
    for done in range(1, args.count + 1):
        notify(args.ctxt, args.event_type, args.payload)
        if progress is not None:
            progress.update(done)
    if progress is not None:
        progress.done(args.count, "waiting for the broker's confirmation")
    pending = transport.flush(args.timeout)
    elapsed = time.monotonic() - started
    expected = args.count * len(kafka_topics)
    stats = transport.delivery_stats()
    # a send refused before reaching the driver's counters (logged by the Notifier) is "not sent"
    not_sent = max(0, expected - stats.get("sent", expected))
    failed = stats.get("failed", 0)
    pending = max(pending, stats.get("pending", 0))
    delivered = stats.get("delivered", expected - failed - pending - not_sent)
    where = ", ".join(kafka_topics)
    if failed or pending or not_sent:
        problems = [f"{n} {what}" for n, what in ((failed, "failed"), (not_sent, "could not be sent"),
                                                  (pending, f"not confirmed within {args.timeout:g}s"))
                    if n]
        return fail(f"{delivered} of {expected} notification(s) to {where} confirmed; "
                    f"{', '.join(problems)} (the log lines above give the causes)")
    print(f"sent {expected} notification(s) to {where}; all confirmed by the broker "
          f"in {elapsed:.2f}s", file=sys.stdout)
    return EXIT_OK
