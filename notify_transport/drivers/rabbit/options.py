"""``[oslo_messaging_rabbit]`` options.

``oslo_compat_opts`` copy oslo.messaging 18.3.1's rabbit options attribute for
attribute (oslo.config refuses two differing registrations of one name, and
services load both libraries); ``extra_opts`` are ours. Options accepted but
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
               help='Size of RPC connection pool.',
               min=1),
    cfg.IntOpt('conn_pool_min_size', default=2,
               help='The pool size limit for connections expiration policy'),
    cfg.IntOpt('conn_pool_ttl', default=1200,
               help='The time-to-live in sec of idle connections in the pool'),
    cfg.BoolOpt('ssl',
                default=False,
                help='Connect over SSL.'),
    cfg.StrOpt('ssl_version',
               default='',
               help='SSL version to use (valid only if SSL enabled). '
                    'Valid values are TLSv1 and SSLv23. SSLv2, SSLv3, '
                    'TLSv1_1, and TLSv1_2 may be available on some '
                    'distributions.'
               ),
    cfg.StrOpt('ssl_key_file',
               default='',
               help='SSL key file (valid only if SSL enabled).'),
    cfg.StrOpt('ssl_cert_file',
               default='',
               help='SSL cert file (valid only if SSL enabled).'),
    cfg.StrOpt('ssl_ca_file',
               default='',
               help='SSL certification authority file '
                    '(valid only if SSL enabled).'),
    cfg.BoolOpt('ssl_enforce_hostname_verification',
                default=True,
                deprecated_for_removal=True,
                deprecated_reason='Verification is always enabled now',
                help='When true, verify the broker hostname against the '
                     'certificate when ``ssl_ca_file`` is set. When false, '
                     '``ssl`` with ``ssl_ca_file`` still validates the '
                     'certificate chain but does not verify the broker '
                     'hostname. ``ssl=true`` without ``ssl_ca_file`` never '
                     'enables hostname verification.'),
    cfg.BoolOpt('ssl_enforce_fips_mode',
                default=False,
                deprecated_for_removal=True,
                deprecated_reason='FIPS_mode_set API was removed in OpenSSL '
                                  '3.0.0. This option has no effect now.',
                help='Global toggle for enforcing the OpenSSL FIPS mode. '
                'This feature requires Python support. '
                'This is available in Python 3.9 in all '
                'environments and may have been backported to older '
                'Python versions on select environments. If the Python '
                'executable used does not support OpenSSL FIPS mode, '
                'an exception will be raised.'),
    cfg.FloatOpt('kombu_reconnect_delay',
                 default=1.0,
                 min=0.0,
                 max=_ACK_REQUEUE_EVERY_SECONDS_MAX * 0.9,
                 help='How long to wait (in seconds) before reconnecting in '
                      'response to an AMQP consumer cancel notification.'),
    cfg.FloatOpt('kombu_reconnect_splay',
                 default=0.0,
                 min=0.0,
                 help='Random time to wait for when reconnecting in response '
                      'to an AMQP consumer cancel notification.'),
    cfg.StrOpt('kombu_compression',
               help="EXPERIMENTAL: Possible values are: gzip, bz2. If not "
                    "set compression will not be used. This option may not "
                    "be available in future versions."),
    cfg.IntOpt('kombu_missing_consumer_retry_timeout',
               deprecated_name="kombu_reconnect_timeout",
               default=60,
               help='How long to wait a missing client before abandoning to '
                    'send it its replies. This value should not be longer '
                    'than rpc_response_timeout.'),
    cfg.StrOpt('kombu_failover_strategy',
               choices=('round-robin', 'shuffle'),
               default='round-robin',
               help='Determines how the next RabbitMQ node is chosen in case '
                    'the one we are currently connected to becomes '
                    'unavailable. Takes effect only if more than one '
                    'RabbitMQ node is provided in config.'),
    cfg.StrOpt('rabbit_login_method',
               choices=('PLAIN', 'AMQPLAIN', 'EXTERNAL', 'RABBIT-CR-DEMO'),
               default='AMQPLAIN',
               help='The RabbitMQ login method.'),
    cfg.IntOpt('rabbit_retry_interval',
               min=1,
               default=1,
               help='How frequently to retry connecting with RabbitMQ.'),
    cfg.IntOpt('rabbit_retry_backoff',
               default=2,
               min=0,
               help='How long to backoff for between retries when connecting '
                    'to RabbitMQ.'),
    cfg.IntOpt('rabbit_interval_max',
               default=30,
               min=1,
               help='Maximum interval of RabbitMQ connection retries.'),
    cfg.BoolOpt('rabbit_ha_queues',
                default=False,
                help='Try to use HA queues in RabbitMQ (x-ha-policy: all). '
                'If you change this option, you must wipe the RabbitMQ '
                'database. In RabbitMQ 3.0, queue mirroring is no longer '
                'controlled by the x-ha-policy argument when declaring a '
                'queue. If you just want to make sure that all queues (except '
                'those with auto-generated names) are mirrored across all '
                'nodes, run: '
                """\"rabbitmqctl set_policy HA '^(?!amq\\.).*' """
                """'{"ha-mode": "all"}' \""""),
    cfg.BoolOpt('rabbit_quorum_queue',
                default=False,
                help='Use quorum queues in RabbitMQ (x-queue-type: quorum). '
                'The quorum queue is a modern queue type for RabbitMQ '
                'implementing a durable, replicated FIFO queue based on the '
                'Raft consensus algorithm. It is available as of '
                'RabbitMQ 3.8.0. If set this option will conflict with '
                'the HA queues (``rabbit_ha_queues``) aka mirrored queues, '
                'in other words the HA queues should be disabled. '
                'Quorum queues are also durable by default so the '
                'amqp_durable_queues option is ignored when this option is '
                'enabled.'),
    cfg.BoolOpt('rabbit_transient_quorum_queue',
                default=False,
                help='Use quorum queues for transients queues in RabbitMQ. '
                'Enabling this option will then make sure those queues are '
                'also using quorum kind of rabbit queues, which are HA by '
                'default.'),
    cfg.IntOpt('rabbit_quorum_delivery_limit',
               default=0,
               help='Each time a message is redelivered to a consumer, '
               'a counter is incremented. Once the redelivery count '
               'exceeds the delivery limit the message gets dropped '
               'or dead-lettered (if a DLX exchange has been configured) '
               'Used only when rabbit_quorum_queue is enabled, '
               'Default 0 which means dont set a limit.'),
    cfg.IntOpt('rabbit_quorum_max_memory_length',
               default=0,
               help='By default all messages are maintained in memory '
               'if a quorum queue grows in length it can put memory '
               'pressure on a cluster. This option can limit the number '
               'of messages in the quorum queue. '
               'Used only when rabbit_quorum_queue is enabled, '
               'Default 0 which means dont set a limit.'),
    cfg.IntOpt('rabbit_quorum_max_memory_bytes',
               default=0,
               help='By default all messages are maintained in memory '
               'if a quorum queue grows in length it can put memory '
               'pressure on a cluster. This option can limit the number '
               'of memory bytes used by the quorum queue. '
               'Used only when rabbit_quorum_queue is enabled, '
               'Default 0 which means dont set a limit.'),
    cfg.IntOpt('rabbit_transient_queues_ttl',
               min=0,
               default=1800,
               help='Positive integer representing duration in seconds for '
                    'queue TTL (x-expires). Queues which are unused for the '
                    'duration of the TTL are automatically deleted. The '
                    'parameter affects only reply and fanout queues. Setting '
                    '0 as value will disable the x-expires. If doing so, '
                    'make sure you have a rabbitmq policy to delete the '
                    'queues or you deployment will create an infinite number '
                    'of queue over time.'
                    'In case rabbit_stream_fanout is set to True, this option '
                    'will control data retention policy (x-max-age) for '
                    'messages in the fanout queue rather then the queue '
                    'duration itself. So the oldest data in the stream queue '
                    'will be discarded from it once reaching TTL '
                    'Setting to 0 will disable x-max-age for stream which '
                    'make stream grow indefinitely filling up the diskspace'),
    cfg.IntOpt('rabbit_qos_prefetch_count',
               default=0,
               help='Specifies the number of messages to prefetch. Setting to '
                    'zero allows unlimited messages.'),
    cfg.IntOpt('heartbeat_timeout_threshold',
               default=60,
               help="Number of seconds after which the Rabbit broker is "
               "considered down if heartbeat's keep-alive fails "
               "(0 disables heartbeat)."),
    cfg.IntOpt('heartbeat_rate',
               default=3,
               help='How often times during the heartbeat_timeout_threshold '
               'we check the heartbeat.'),
    cfg.BoolOpt('direct_mandatory_flag',
                default=True,
                deprecated_for_removal=True,
                deprecated_reason='Mandatory flag no longer deactivable.',
                help='(DEPRECATED) Enable/Disable the RabbitMQ mandatory '
                'flag for direct send. The direct send is used as reply, '
                'so the MessageUndeliverable exception is raised '
                'in case the client queue does not exist.'
                'MessageUndeliverable exception will be used to loop for a '
                'timeout to lets a chance to sender to recover.'
                'This flag is deprecated and it will not be possible to '
                'deactivate this functionality anymore'),
    cfg.BoolOpt('enable_cancel_on_failover',
                default=False,
                help="Enable x-cancel-on-ha-failover flag so that "
                     "rabbitmq server will cancel and notify consumers"
                     "when queue is down"),
    cfg.BoolOpt('use_queue_manager',
                default=False,
                help='Should we use consistant queue names or random ones'),
    cfg.StrOpt('hostname',
               sample_default='node1.example.com',
               default=socket.gethostname(),
               help='Hostname used by queue manager. Defaults to the value '
               'returned by socket.gethostname().'),
    cfg.StrOpt('processname',
               sample_default='nova-api',
               default=os.path.basename(sys.argv[0]),
               help='Process name used by queue manager'),
    cfg.BoolOpt('rabbit_stream_fanout',
                default=False,
                help='Use stream queues in RabbitMQ (x-queue-type: stream). '
                'Streams are a new persistent and replicated data structure '
                '("queue type") in RabbitMQ which models an append-only log '
                'with non-destructive consumer semantics. It is available '
                'as of RabbitMQ 3.9.0. If set this option will replace all '
                'fanout queues with only one stream queue.'),
]

amqp_opts = [
    cfg.BoolOpt('amqp_durable_queues',
                default=False,
                help='Use durable queues in AMQP. If rabbit_quorum_queue '
                'is enabled, queues will be durable and this value will '
                'be ignored.'),
    cfg.BoolOpt('amqp_auto_delete',
                default=False,
                help='Auto-delete queues in AMQP.'),
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
