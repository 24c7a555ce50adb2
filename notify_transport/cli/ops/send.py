"""``notify-transport send``: publish notifications and wait for the broker to confirm them."""
from __future__ import annotations

import argparse
import socket
import sys
import time
from typing import Any

from oslo_config import cfg

from notify_transport.cli.ops import args as cli_args
from notify_transport.cli.ops.cluster import KafkaCluster, default_topics, open_transport
from notify_transport.cli import logs
from notify_transport.cli.common import load_conf
from notify_transport.cli.ops.output import EXIT_OK, Progress, emit, fail, failures_exit_1
from notify_transport.drivers.config import register_opts
from notify_transport.drivers.kafka import GROUP as KAFKA_GROUP, KafkaDriver, all_opts as kafka_opts
from notify_transport.drivers.naming import notification_topic
from notify_transport.drivers.rabbit import GROUP as RABBIT_GROUP, all_opts as rabbit_opts
from notify_transport.notify import Notifier

DESCRIPTION = """\
Send notifications through the public API (a Notifier, as a service would) and
wait until the broker has confirmed every one of them.

Works with every notification driver (kafka://, rabbit://). On Kafka the topic
is TOPIC.PRIORITY plus .VHOST when the transport URL has a vhost. A send that
fails is logged with its cause; the command then exits 1.

--timeout bounds the whole command: connecting, sending and waiting for the
confirmations (with rabbit://, each connection attempt is bounded by it too).

exit status: 0 all confirmed, 1 some failed or were not confirmed within
--timeout, 2 bad input or configuration (refused credentials too), 3 broker
unreachable within --connect-timeout (checked before sending)"""

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
    cli_args.add_topic_selection(p, priorities=False)
    p.add_argument("--priority", type=cli_args.priority, default="info",
                   help="audit, debug, info, warn, error, critical or sample")
    p.add_argument("--event-type", required=True, type=cli_args.event_type, help="e.g. compute.instance.create.end")
    p.add_argument("--payload", type=cli_args.json_value, default={}, metavar="JSON",
                   help="the payload as JSON, or @FILE to read it from a file (default: {})")
    p.add_argument("--ctxt", type=cli_args.json_object, default={}, metavar="JSON",
                   help="request context as a JSON object (secret keys such as auth_token are "
                        "never sent)")
    p.add_argument("--publisher-id",
                   help="publisher_id of the notifications, also the Kafka message key "
                        "(default: notify-transport.HOSTNAME)")
    p.add_argument("--count", type=cli_args.positive_int, default=1,
                   help="how many times to send it")
    p.add_argument("--driver", choices=("messagingv2", "messaging"), default="messagingv2",
                   help="the oslo notification driver, i.e. wire format: messagingv2 (2.0 envelope) "
                        "or messaging (plain)")
    p.add_argument("--retry", type=int, default=None,
                   help="re-sends of a failed delivery, as oslo's retry (-1: until delivery_timeout)")
    p.add_argument("--timeout", type=cli_args.positive_float, default=30.0, metavar="SECONDS",
                   help="how long the command may take, the broker's confirmations included")
    cli_args.add_output_format(p)
    p.set_defaults(func=run)


def bounded_conf(args: argparse.Namespace) -> cfg.ConfigOpts:
    """The configuration with the drivers' own waits bounded by --timeout.

    The command waits for the confirmations itself: the drivers' cleanup, a full
    queue and a RabbitMQ connection attempt never wait longer.
    """
    conf = load_conf(args)
    for group, opts in ((KAFKA_GROUP, kafka_opts()), (RABBIT_GROUP, rabbit_opts())):
        register_opts(conf, opts, group)
        conf.set_override("flush_timeout", 0.0, group)
    kafka = conf[KAFKA_GROUP]
    conf.set_override("producer_queue_timeout", min(kafka.producer_queue_timeout, args.timeout),
                      KAFKA_GROUP)
    rabbit = conf[RABBIT_GROUP]
    conf.set_override("connection_timeout", max(0.1, min(rabbit.connection_timeout, args.timeout)),
                      RABBIT_GROUP)
    conf.set_override("pending_notifications_timeout",
                      min(rabbit.pending_notifications_timeout, args.timeout), RABBIT_GROUP)
    return conf


class NotConfirmed(Exception):
    """Some notifications were not confirmed: the one error line, without its cause yet."""


@failures_exit_1
def run(args: argparse.Namespace) -> int:
    """Send, then one line: the summary, or the error with the drivers' last logged cause."""
    if args.debug or args.verbose:  # everything the drivers log, as it happens
        try:
            return _run(args)
        except NotConfirmed as exc:
            return fail(f"{exc} (the log lines above give the causes)")
    with logs.HeldRecords("notify_transport.drivers") as held:
        try:
            code = _run(args)
        except NotConfirmed as exc:
            cause = f"; first error: {held.first}" if held.first else ""
            return fail(f"{exc}{cause} (--debug shows every attempt)")
    held.show()
    return code


def _run(args: argparse.Namespace) -> int:
    args.deadline = time.monotonic() + args.timeout
    with open_transport(args, bounded_conf(args)) as transport:
        topics = default_topics(args)
        kafka_topics = [notification_topic(t, args.priority) for t in topics]  # as the notifier names them
        if isinstance(transport.driver, KafkaDriver):
            cluster = KafkaCluster(transport, min(args.connect_timeout, args.timeout))
            try:
                kafka_topics = cluster.notification_topics(topics, [args.priority])
            finally:
                cluster.close()
        # a broker that does not answer, or refuses the login, is said before anything is sent
        transport.check_connection(min(args.connect_timeout, args.timeout))
        publisher_id = args.publisher_id or f"notify-transport.{socket.gethostname()}"
        notifier = Notifier(transport, publisher_id=publisher_id, driver=args.driver,
                            topics=topics, retry=args.retry)
        return _send(transport, notifier, args, kafka_topics)


def _send(transport: Any, notifier: Notifier, args: argparse.Namespace, kafka_topics: list[str]) -> int:
    notify = getattr(notifier, args.priority)
    progress = Progress("sent", args.count, quiet=args.quiet) if args.count > 1 else None
    started = time.monotonic()
    for done in range(1, args.count + 1):
        notify(args.ctxt, args.event_type, args.payload)
        if progress is not None:
            progress.update(done)
    if progress is not None:
        progress.done(args.count, "waiting for the broker's confirmation")
    pending = transport.flush(max(0.0, args.deadline - time.monotonic()))
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
        raise NotConfirmed(f"{delivered} of {expected} notification(s) to {where} confirmed; "
                           f"{', '.join(problems)}")
    if args.output_format == "table":
        print(f"sent {expected} notification(s) to {where}; all confirmed by the broker "
              f"in {elapsed:.2f}s", file=sys.stdout)
    else:
        emit(args, (), [(expected, where, f"{elapsed:.3f}")],
             {"sent": expected, "confirmed": delivered, "topics": kafka_topics, "seconds": round(elapsed, 3)})
    return EXIT_OK
