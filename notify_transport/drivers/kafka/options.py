"""``[oslo_messaging_kafka]`` options.

The first block keeps oslo.messaging 18.x's Kafka driver options (names, types,
defaults), so existing configs work, in our words, and both libraries register
them in one process in either order. The second block is ours.
Every option can be overridden per transport by the URL query.
"""
from __future__ import annotations

import logging
from typing import Any

from oslo_config import cfg

LOG = logging.getLogger(__name__)

GROUP = "oslo_messaging_kafka"


oslo_compat_opts = [
    cfg.IntOpt('kafka_max_fetch_bytes', default=1024 * 1024,
               help='Most bytes a listener fetches from one partition in one '
                    'request (librdkafka max.partition.fetch.bytes); a larger '
                    'record is still fetched whole.'),
    cfg.FloatOpt('kafka_consumer_timeout', default=1.0,
                 help='Seconds one fetch of a listener waits for records before '
                      'it checks again whether the listener is stopping (at most '
                      'its own stop-check interval).'),
    cfg.StrOpt('consumer_group', default="oslo_messaging_consumer",
               help='Consumer group of the listeners started without a pool; '
                    'every group receives every notification, and the listeners '
                    'of one group share its partitions.'),
    cfg.FloatOpt('producer_batch_timeout', default=0.,
                 help="Seconds the producer holds notifications to send them in "
                      "batches (librdkafka linger.ms). 0 leaves it to "
                      "producer_linger."),
    cfg.IntOpt('producer_batch_size', default=16384,
               help='Most notifications in one batch the producer sends '
                    '(librdkafka batch.num.messages).'),
    cfg.StrOpt('compression_codec', default='none',
               choices=['none', 'gzip', 'snappy', 'lz4', 'zstd'],
               help='How the producer compresses its batches; the broker and '
                    'every reader must know the codec (all of these since Kafka '
                    '2.1).'),
    cfg.BoolOpt('enable_auto_commit',
                default=False,
                help='Let the consumer commit in the background what it read '
                     '(at most once, and some notifications may be read twice '
                     'after a crash), instead of committing each batch before '
                     'dispatch. Not with at_least_once or retry / dead-letter '
                     'topics.'),
    cfg.IntOpt('max_poll_records', default=500,
               help='Most records a listener takes from its consumer at once; '
                    'one take is one commit in the default delivery mode.'),
    cfg.StrOpt('security_protocol', default='PLAINTEXT',
               choices=('PLAINTEXT', 'SASL_PLAINTEXT', 'SSL', 'SASL_SSL'),
               help='How every client of the driver talks to the brokers: in the '
                    'clear or over TLS, with or without SASL authentication.'),
    cfg.StrOpt('sasl_mechanism',
               default='PLAIN',
               help='SASL mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, ...) '
                    'when security_protocol is SASL_PLAINTEXT or SASL_SSL; the '
                    'user and password come from the transport URL.'),
    cfg.StrOpt('ssl_cafile',
               default='',
               help='PEM file of the certificate authorities that signed the '
                    'brokers\' certificates (TLS). Empty: the system\'s.'),
    cfg.StrOpt('ssl_client_cert_file',
               default='',
               help='PEM file of this client\'s certificate, for brokers that '
                    'ask clients to prove who they are over TLS.'),
    cfg.StrOpt('ssl_client_key_file',
               default='',
               help='PEM file of the private key of ssl_client_cert_file.'),
    cfg.StrOpt('ssl_client_key_password',
               default='', secret=True,
               help='Password of ssl_client_key_file when the key is encrypted '
                    '(never logged).')
]

extra_opts = [
    cfg.FloatOpt('producer_linger', default=0.002, min=0,
                 deprecated_for_removal=True,
                 deprecated_reason='It is a second name for librdkafka linger.ms beside '
                                   'producer_batch_timeout: set producer_batch_timeout, or '
                                   'producer_config = linger.ms:N for 0 or another value.',
                 help='Seconds the producer waits to batch notifications when '
                      'producer_batch_timeout is 0 (its default, which librdkafka '
                      'would take as "send each message at once", costing several '
                      'times the CPU per notification). A non-zero '
                      'producer_batch_timeout takes precedence.'),
    cfg.StrOpt('producer_acks', default='all', choices=['0', '1', 'all'],
               help='How many replicas must acknowledge a notification before '
                    'the broker confirms it (Kafka "acks"). "all" waits for every '
                    'in-sync replica.'),
    cfg.BoolOpt('enable_idempotence', default=True,
                help='Idempotent producer: broker-side de-duplication of '
                     'retried sends, so a retry never writes a message twice.'),
    cfg.FloatOpt('delivery_timeout', default=300.0, min=0.001,
                 help='Seconds a notification may wait for broker confirmation, '
                      'retries included, before its delivery is reported as failed. '
                      'The default rides out a cluster that cannot take writes for '
                      'a few minutes (two brokers of three down, a leader election '
                      'that drags): what waits is held in the producer queue, whose '
                      'size producer_config bounds (queue.buffering.max.messages, '
                      'queue.buffering.max.kbytes).'),
    cfg.FloatOpt('producer_queue_timeout', default=5.0, min=0,
                 help='Seconds a send blocks when the local producer queue is full '
                      'before raising MessageDeliveryFailure.'),
    cfg.FloatOpt('flush_timeout', default=10.0, min=0,
                 help='Seconds cleanup() waits for queued notifications to be '
                      'confirmed; what is still pending then is logged as lost.'),
    cfg.FloatOpt('exit_flush_timeout', default=5.0, min=0,
                 help='Seconds a process that exits without calling cleanup() '
                      'waits for the notifications its producer still holds to '
                      'be confirmed (at interpreter exit, for every transport '
                      'still alive). What is still unconfirmed then is lost and '
                      'its count logged at WARNING. 0: do not wait.'),
    cfg.FloatOpt('session_timeout', default=45.0, min=0.001,
                 help='Consumer group session timeout in seconds: a listener '
                      'that sends no heartbeat for this long is evicted.'),
    cfg.FloatOpt('heartbeat_interval', default=0.5, min=0.001,
                 help='Seconds between consumer group heartbeats; keep it well '
                      'under session_timeout. Under the classic group protocol a '
                      'listener joining a pool waits for the pool\'s other '
                      'listeners to learn of it from their next heartbeat, so this '
                      'is also about how long a second listener takes to start '
                      '(about 0.5 s at the default). librdkafka sends them no '
                      'sooner than its group thread wakes, so values below 0.5 '
                      'bought nothing where this was measured.'),
    cfg.StrOpt('group_protocol', default='classic', choices=['classic', 'consumer'],
               help='How listeners of a pool agree on who reads which partition '
                    '(librdkafka group.protocol). classic: the listeners rebalance '
                    'together; session_timeout and heartbeat_interval are the '
                    'client\'s, partitions are spread round-robin, and every '
                    'broker speaks it. consumer: Kafka 4\'s protocol (KIP-848, '
                    'Apache Kafka 4.0 or later): the broker computes assignments '
                    'and moves partitions one at a time, so a joining or leaving '
                    'listener does not stop the others; the broker\'s '
                    'group.consumer.session.timeout.ms and heartbeat interval '
                    'apply instead of session_timeout and heartbeat_interval.'),
    cfg.StrOpt('auto_offset_reset', default='latest',
               choices=['latest', 'earliest'],
               help='Where a pool with no committed offset starts reading. '
                    'Listeners always receive what is sent after start() returns.'),
    cfg.FloatOpt('listener_start_timeout', default=None, min=0.001,
                 help='Seconds a listener start() waits to join its consumer '
                      'group and get its partitions before failing with an error. '
                      'Unset, it is twice session_timeout plus 15 seconds: a '
                      'listener restarted right after a crash joins only once the '
                      'group has evicted its dead predecessor, session_timeout '
                      'after its last heartbeat (up to twice that on brokers that '
                      'check expiry periodically).'),
    cfg.IntOpt('prefetch_messages', default=5000, min=1,
               deprecated_for_removal=True,
               deprecated_reason='It only sets librdkafka queued.min.messages: set '
                                 'consumer_config = queued.min.messages:N instead.',
               help='Messages per partition a listener keeps fetched ahead of '
                    'dispatch (librdkafka queued.min.messages, whose default of '
                    '100000 can hold up to 64 MB per listener). Once the local '
                    'queue holds more, fetching pauses for prefetch_backoff.'),
    cfg.FloatOpt('prefetch_backoff', default=0.01, min=0,
                 deprecated_for_removal=True,
                 deprecated_reason='It only sets librdkafka fetch.queue.backoff.ms: set '
                                   'consumer_config = fetch.queue.backoff.ms:N instead.',
                 help='Seconds fetching pauses when prefetch_messages are already '
                      'waiting for dispatch (librdkafka fetch.queue.backoff.ms). '
                      'Short enough that the queue never runs dry at full speed.'),
    cfg.IntOpt('topic_partitions', default=1, min=1,
               help='Partitions of topics the driver creates when a listener '
                    'subscribes to a topic that does not exist yet.'),
    cfg.IntOpt('topic_replication_factor', default=-1,
               help='Replication factor of topics the driver creates; -1 uses '
                    'the broker default.'),
    cfg.StrOpt('sasl_username', default='', secret=True,
               help='SASL user name, when not given in the transport URL.'),
    cfg.StrOpt('sasl_password', default='', secret=True,
               help='SASL password, when not given in the transport URL.'),
    cfg.DictOpt('librdkafka_config', default={}, secret=True,
                help='Escape hatch: extra librdkafka properties for producers '
                     'and consumers (e.g. "socket.keepalive.enable:true"). '
                     'They override what the options above set. This option '
                     'and the two below are secret (hidden when option values '
                     'are logged): they may hold passwords or keys.'),
    cfg.DictOpt('producer_config', default={}, secret=True,
                help='Extra librdkafka properties for producers only.'),
    cfg.DictOpt('consumer_config', default={}, secret=True,
                help='Extra librdkafka properties for consumers only.'),
]


#: Listener delivery options. Each is also a keyword of
#: ``get_notification_listener(..., **driver_options)``, which overrides it
#: for that listener.
delivery_opts = [
    cfg.StrOpt('delivery_mode', default='commit_before_dispatch',
               choices=['commit_before_dispatch', 'at_least_once'],
               help='When a listener commits offsets. commit_before_dispatch '
                    '(oslo.messaging\'s semantics): a polled batch is committed, '
                    'then dispatched; a listener that dies loses what it was '
                    'processing, nothing is dispatched twice. at_least_once: an '
                    'offset is committed only once processing of it and of every '
                    'earlier record of its partition ended (periodically, on '
                    'partition revoke and on close); a listener that dies has '
                    'what was in flight dispatched again.'),
    cfg.IntOpt('workers', default=1, min=1,
               help='Threads dispatching a listener\'s notifications. With more '
                    'than one, notifications with the same Kafka key (the '
                    'publisher_id) go to the same worker, so each publisher\'s '
                    'notifications keep their order (virtual partitions).'),
    cfg.IntOpt('max_in_flight', default=1000, min=1,
               help='Most notifications handed to workers and not yet '
                    'processed; polling waits while that many are in flight.'),
    cfg.FloatOpt('commit_interval', default=1.0, min=0,
                 help='at_least_once: seconds between commits of the offsets '
                      'whose processing ended (0: after each poll). Offsets are '
                      'also committed synchronously on revoke and on close.'),
    cfg.StrOpt('retry_topic',
               help='Topic that requeued notifications go to, to be dispatched '
                    'again after retry_delay; {topic} is the original Kafka '
                    'topic, {pool} the pool (consumer group). "none" disables '
                    'retries. Unset: "{topic}.retry.{pool}" with at_least_once '
                    '(and max_attempts > 1), none with commit_before_dispatch, '
                    'where requeue is then impossible.'),
    cfg.StrOpt('dead_letter_topic',
               help='Topic that notifications go to when their attempts are '
                    'exhausted or they cannot be decoded, with headers naming the '
                    'original topic, partition, offset, attempts and error; '
                    '{topic} and {pool} as in retry_topic. Unset: "{topic}.dlq" '
                    'with at_least_once or when retry_topic is set, else none '
                    '(undecodable records are then logged and skipped).'),
    cfg.IntOpt('max_attempts', default=3, min=1,
               help='Processing attempts of a notification, the first included, '
                    'before it is dead-lettered.'),
    cfg.FloatOpt('retry_delay', default=5.0, min=0,
                 help='Seconds a requeued notification waits in the retry topic '
                      '(from its timestamp) before it is dispatched again. The '
                      'wait pauses only the retry topic\'s partition.'),
    cfg.BoolOpt('requeue_on_error', default=True,
                help='An endpoint that raises is retried like one that returns '
                     'REQUEUE (the listener needs allow_requeue=True); false '
                     'dead-letters it at once.'),
    cfg.StrOpt('start_position', default='committed',
               help='Where a listener starts reading a partition the first time '
                    'it is assigned it: committed (the pool\'s committed offset, '
                    'else auto_offset_reset), earliest, latest, offset:N, or '
                    'time:T (T in ISO 8601 or seconds since the epoch). Anything '
                    'but committed replaces the pool\'s committed offset (replay).'),
    cfg.FloatOpt('shutdown_timeout', default=30.0, min=0,
                 help='Seconds a listener\'s cleanup waits for work in flight to '
                      'finish and for retry/dead-letter sends to be confirmed '
                      'before it commits and closes.'),
]


def all_opts() -> list[cfg.Opt]:
    """Every option of the group, oslo-compatible ones first."""
    return oslo_compat_opts + extra_opts + delivery_opts


#: Seconds ``start()`` allows beyond the eviction for the rebalance that follows it.
START_TIMEOUT_MARGIN = 15.0


def listener_start_timeout(opts: Any) -> float:
    """How long a listener's ``start()`` waits for its partitions.

    ``listener_start_timeout``, else twice ``session_timeout`` plus :data:`START_TIMEOUT_MARGIN`:
    a crashed member is evicted up to two sessions late (Tansu), and a restart joins after that.
    """
    if opts.listener_start_timeout is None:
        return 2 * opts.session_timeout + START_TIMEOUT_MARGIN
    if opts.listener_start_timeout <= opts.session_timeout:
        LOG.warning("listener_start_timeout (%ss) is not above session_timeout (%ss): a listener "
                    "restarted right after a crash will fail to start while the group still "
                    "holds its dead predecessor", opts.listener_start_timeout, opts.session_timeout)
    return opts.listener_start_timeout
