"""``[oslo_messaging_rabbit]`` options.

``oslo_compat_opts`` keep oslo.messaging 18.3.1's rabbit options (names, types,
defaults, deprecations: services load both libraries, and both register them in
one process in either order), in our words; ``extra_opts`` are ours. Options accepted but
moot by design are listed in :data:`NOT_APPLICABLE`.
"""
from __future__ import annotations

import os
import socket
import sys

from oslo_config import cfg

GROUP = "oslo_messaging_rabbit"

# oslo.messaging's amqpdriver.ACK_REQUEUE_EVERY_SECONDS_MAX, used in a bound below.
_ACK_REQUEUE_EVERY_SECONDS_MAX = 5.0

rabbit_opts = [
    cfg.IntOpt('rpc_conn_pool_size', default=30,
               help='Accepted for compatibility; no effect here: the driver keeps one '
                    'connection for sending and one for listening instead of a pool.',
               min=1),
    cfg.IntOpt('conn_pool_min_size', default=2,
               help='Accepted for compatibility; no effect here (no connection pool).'),
    cfg.IntOpt('conn_pool_ttl', default=1200,
               help='Accepted for compatibility; no effect here (no connection pool).'),
    cfg.BoolOpt('ssl',
                default=False,
                help='Talk to RabbitMQ over TLS (?ssl=true in the transport URL does the '
                     'same).'),
    cfg.StrOpt('ssl_version',
               default='',
               help='Pin one TLS version (TLSv1, TLSv1_1, TLSv1_2, TLSv1_3); empty or '
                    'SSLv23: the highest both sides support.'),
    cfg.StrOpt('ssl_key_file',
               default='',
               help='PEM file of the private key of ssl_cert_file (TLS client '
                    'authentication).'),
    cfg.StrOpt('ssl_cert_file',
               default='',
               help="PEM file of this client's certificate, for brokers that ask clients to "
                    'prove who they are over TLS.'),
    cfg.StrOpt('ssl_ca_file',
               default='',
               help="PEM file of the certificate authorities that signed the broker's "
                    'certificate. Without it the certificate is not checked (a warning is '
                    'logged).'),
    cfg.BoolOpt('ssl_enforce_hostname_verification',
                default=True,
                deprecated_for_removal=True,
                deprecated_reason='Verification is always enabled now',
                help="With ssl_ca_file, also check that the broker's certificate names the "
                     'host connected to; off checks the chain only. Without ssl_ca_file '
                     'nothing is checked.'),
    cfg.BoolOpt('ssl_enforce_fips_mode',
                default=False,
                deprecated_for_removal=True,
                deprecated_reason='FIPS_mode_set API was removed in OpenSSL '
                                  '3.0.0. This option has no effect now.',
                help='Accepted for compatibility; no effect (OpenSSL 3 removed the switch it '
                     'flipped).'),
    cfg.FloatOpt('kombu_reconnect_delay',
                 default=1.0,
                 min=0.0,
                 max=_ACK_REQUEUE_EVERY_SECONDS_MAX * 0.9,
                 help='Longest wait, in seconds, before a consumer reopens its channel after '
                      'RabbitMQ closed it (a queue deleted or a node failing over); the first '
                      'retry comes much sooner.'),
    cfg.FloatOpt('kombu_reconnect_splay',
                 default=0.0,
                 min=0.0,
                 help='Up to this many seconds, chosen at random, added to each reconnection '
                      'wait, so that many clients do not come back at once.'),
    cfg.StrOpt('kombu_compression',
               help='Compress message bodies with this codec (gzip, bz2, lzma or their '
                    'aliases) and say so in the compression header, as kombu does; unset: '
                    'no compression. Readers of either library decompress.'),
    cfg.IntOpt('kombu_missing_consumer_retry_timeout',
               deprecated_name="kombu_reconnect_timeout",
               default=60,
               help="Seconds a server keeps trying to send a reply whose caller's reply "
                    'queue is missing (the caller reconnecting) before it drops the reply; '
                    'keep it below rpc_response_timeout.'),
    cfg.StrOpt('kombu_failover_strategy',
               choices=('round-robin', 'shuffle'),
               default='round-robin',
               help="Which of the URL's hosts is tried next after a connection is lost: "
                    'round-robin (in order) or shuffle (at random).'),
    cfg.StrOpt('rabbit_login_method',
               choices=('PLAIN', 'AMQPLAIN', 'EXTERNAL', 'RABBIT-CR-DEMO'),
               default='AMQPLAIN',
               help='How the client authenticates: PLAIN or AMQPLAIN (user and password '
                    'from the URL, sent as PLAIN, which RabbitMQ treats alike) or EXTERNAL '
                    '(the TLS client certificate).'),
    cfg.IntOpt('rabbit_retry_interval',
               min=1,
               default=1,
               help='Seconds before the first reconnection attempt after a connection '
                    'failed.'),
    cfg.IntOpt('rabbit_retry_backoff',
               default=2,
               min=0,
               help='Seconds added to the wait after each further failed attempt in a row.'),
    cfg.IntOpt('rabbit_interval_max',
               default=30,
               min=1,
               help='Longest wait, in seconds, between two reconnection attempts.'),
    cfg.BoolOpt('rabbit_ha_queues',
                default=False,
                help='Declare queues with x-ha-policy: all (classic mirrored queues of '
                     'RabbitMQ before 3.0). Later versions mirror by policy only: set one '
                     'with rabbitmqctl set_policy, or use rabbit_quorum_queue.'),
    cfg.BoolOpt('rabbit_quorum_queue',
                default=False,
                help='Declare the topic and notification queues as quorum queues (replicated '
                     'with Raft, durable; RabbitMQ 3.8 and later). Not with '
                     'rabbit_ha_queues. An existing queue keeps its type: delete it to '
                     'change.'),
    cfg.BoolOpt('rabbit_transient_quorum_queue',
                default=False,
                help='Declare the reply and fanout queues as quorum queues too (they are '
                     'otherwise classic and transient).'),
    cfg.IntOpt('rabbit_quorum_delivery_limit',
               default=0,
               help='With quorum queues, how many times RabbitMQ redelivers a message '
                    "before it drops or dead-letters it (a policy's dead-letter exchange); "
                    '0: no limit.'),
    cfg.IntOpt('rabbit_quorum_max_memory_length',
               default=0,
               help='With quorum queues, most messages a queue keeps in memory '
                    '(x-max-in-memory-length); 0: no limit. RabbitMQ 4 ignores it.'),
    cfg.IntOpt('rabbit_quorum_max_memory_bytes',
               default=0,
               help='With quorum queues, most bytes of messages a queue keeps in memory '
                    '(x-max-in-memory-bytes); 0: no limit. RabbitMQ 4 ignores it.'),
    cfg.IntOpt('rabbit_transient_queues_ttl',
               min=0,
               default=1800,
               help='Seconds an unused reply or fanout queue lives before RabbitMQ deletes '
                    'it (x-expires); 0 keeps them forever, so a policy must clean them up.'),
    cfg.IntOpt('rabbit_qos_prefetch_count',
               default=0,
               help='Unacknowledged messages a consumer may hold (basic.qos); 0 leaves it '
                    'to notification_prefetch_count and rpc_prefetch_count rather than no '
                    'limit.'),
    cfg.IntOpt('heartbeat_timeout_threshold',
               default=60,
               help='Seconds of silence after which a connection counts as dead and is '
                    'replaced; 0 turns heartbeats off. The driver heartbeats often enough '
                    'that a silent broker is noticed within twice this.'),
    cfg.IntOpt('heartbeat_rate',
               default=3,
               help='Accepted for compatibility; no effect: pika checks the heartbeat '
                    'itself, at the interval derived from heartbeat_timeout_threshold.'),
    cfg.BoolOpt('direct_mandatory_flag',
                default=True,
                deprecated_for_removal=True,
                deprecated_reason='Mandatory flag no longer deactivable.',
                help='Accepted for compatibility; no effect: replies are always published '
                     'mandatory, so a missing reply queue is noticed.'),
    cfg.BoolOpt('enable_cancel_on_failover',
                default=False,
                help='Consume with x-cancel-on-ha-failover, so that RabbitMQ cancels '
                     'the consumers of a mirrored queue whose leader moved; the '
                     'consumer then subscribes again.'),
    cfg.BoolOpt('use_queue_manager',
                default=False,
                help='Must stay false: this driver names its reply and fanout queues at '
                     "random and refuses the option set (oslo's stable names are not "
                     'supported).'),
    cfg.StrOpt('hostname',
               sample_default='node1.example.com',
               default=socket.gethostname(),
               help="Accepted for compatibility; no effect here (used by oslo's queue "
                    'manager only).'),
    cfg.StrOpt('processname',
               sample_default='nova-api',
               default=os.path.basename(sys.argv[0]),
               help="Accepted for compatibility; no effect here (used by oslo's queue "
                    'manager only).'),
    cfg.BoolOpt('rabbit_stream_fanout',
                default=False,
                help='Must stay false: this driver refuses stream queues for fanout and '
                     'declares classic (or quorum) fanout queues.'),
]

amqp_opts = [
    cfg.BoolOpt('amqp_durable_queues',
                default=False,
                help='Declare topic and notification queues and their exchanges durable, so '
                     'they survive a broker restart (quorum queues always are).'),
    cfg.BoolOpt('amqp_auto_delete',
                default=False,
                help='Declare queues and exchanges that RabbitMQ deletes once their last '
                     'consumer or binding is gone.'),
]

oslo_compat_opts = rabbit_opts + amqp_opts

#: Options kept for config compatibility that have no effect here: one
#: connection per purpose replaces the connection pool, and pika speaks PLAIN
#: for oslo's default AMQPLAIN (same credentials, other encoding).
NOT_APPLICABLE = frozenset({
    "rpc_conn_pool_size", "conn_pool_min_size", "conn_pool_ttl", "ssl_enforce_fips_mode",
    "direct_mandatory_flag", "heartbeat_rate", "hostname", "processname",
})

extra_opts = [
    cfg.FloatOpt('connection_timeout', default=5.0, min=0.1,
                 help='Seconds one connection attempt (TCP connect, TLS and AMQP '
                      'handshake) may take before the next host is tried.'),
    cfg.BoolOpt('publisher_confirms', default=True,
                help='Wait for RabbitMQ to confirm each cast and notification '
                     '(publisher confirms). Off trades that guarantee for speed: '
                     'a message then counts as sent once written to the socket.'),
    cfg.IntOpt('notification_prefetch_count', default=100, min=1,
               help='Unacknowledged notifications a listener may hold at once '
                    'when rabbit_qos_prefetch_count is 0, so that the listeners '
                    'of a pool share the queue instead of one taking it all.'),
    cfg.IntOpt('rpc_prefetch_count', default=100, min=1,
               help='Requests an RPC server may hold unacknowledged when '
                    'rabbit_qos_prefetch_count is 0 (requests are acknowledged '
                    'as the server takes them for dispatch, so this bounds only '
                    'what waits to be taken): the servers of a topic share its '
                    'queue, and RabbitMQ does less work per request than with '
                    'no limit.'),
    cfg.IntOpt('max_pending_notifications', default=10000, min=1,
               help='Notifications sent but not yet confirmed by the broker; a '
                    'send beyond that blocks (see pending_notifications_timeout).'),
    cfg.FloatOpt('pending_notifications_timeout', default=5.0, min=0,
                 help='Seconds a notification send blocks when '
                      'max_pending_notifications is reached before raising '
                      'MessageDeliveryFailure.'),
    cfg.FloatOpt('flush_timeout', default=10.0, min=0,
                 help='Seconds cleanup() waits for sent notifications to be '
                      'confirmed; what is still pending then is logged as lost.'),
    cfg.FloatOpt('exit_flush_timeout', default=5.0, min=0,
                 help='Seconds a process that exits without calling cleanup() '
                      'waits for the notifications it sent to be confirmed (at '
                      'interpreter exit, for every transport still alive). What '
                      'is still unconfirmed then is lost and its count logged at '
                      'WARNING. 0: do not wait.'),
    cfg.FloatOpt('send_timeout', default=0.0, min=0,
                 help='Seconds a cast may wait for a connection and for the '
                      "broker's confirmation before MessageDeliveryFailure; 0 "
                      'waits as long as the retry argument allows (oslo.messaging '
                      'semantics: retry=None waits for the broker forever).'),
]


def all_opts() -> list[cfg.Opt]:
    """Every option of the group, oslo-compatible ones first."""
    return oslo_compat_opts + extra_opts
