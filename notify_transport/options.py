"""oslo.config options of the API layer, and ``list_opts()`` for oslo-config-generator.

The ``[DEFAULT]`` and ``[oslo_messaging_notifications]`` options are copied
from oslo.messaging 18.x attribute for attribute, so a service config written
for it works unchanged and both libraries can register them in one process.
"""
from __future__ import annotations

import copy
from typing import Any

from oslo_config import cfg

from notify_transport.drivers.config import register_opts

NOTIFICATIONS_GROUP = "oslo_messaging_notifications"

transport_opts = [
    cfg.StrOpt('transport_url',
               default="rabbit://",
               secret=True,
               help='The network address and optional user credentials for '
                    'connecting to the messaging backend, in URL format. The '
                    'expected format is:\n\n'
                    'driver://[user:pass@]host:port[,[userN:passN@]hostN:'
                    'portN]/virtual_host?query\n\n'
                    'Example: rabbit://rabbitmq:password@127.0.0.1:5672//\n\n'
                    'For full details on the fields in the URL see the '
                    'documentation of oslo_messaging.TransportURL at '
                    'https://docs.openstack.org/oslo.messaging/latest/'
                    'reference/transport.html'),
    cfg.StrOpt('control_exchange',
               default='openstack',
               help='The default exchange under which topics are scoped. May '
                    'be overridden by an exchange name specified in the '
                    'transport_url option.'),
]

notifier_opts = [
    cfg.MultiStrOpt('driver',
                    default=[],
                    help='The Drivers(s) to handle sending notifications. '
                         'Possible values are messaging, messagingv2, '
                         'routing, log, test, noop'),
    cfg.StrOpt('transport_url',
               secret=True,
               help='A URL representing the messaging driver to use for '
                    'notifications. If not set, we fall back to the same '
                    'configuration used for RPC.'),
    cfg.ListOpt('topics',
                default=['notifications', ],
                help='AMQP topic used for OpenStack notifications.'),
    cfg.IntOpt('retry', default=-1,
               help='The maximum number of attempts to re-send a notification '
                    'message which failed to be delivered due to a '
                    'recoverable error. 0 - No retry, -1 - indefinite'),
]


SERVE_GROUP = "serve"

#: ``notify-transport serve``: the service's own options (its command-line flags override them).
serve_opts = [
    cfg.IntOpt('workers', default=1, min=1,
               help='Processes running the same listeners, each a member of the '
                    'same consumer groups (pools), so that the listeners use more '
                    'than one core. With more than one, a master process starts, '
                    'watches and restarts them (cotyledon).'),
    cfg.FloatOpt('stats_interval', default=60.0, min=0.1, mutable=True,
                 help='Seconds between the per-listener counter lines (received, '
                      'dispatched, failed, lag) in the log. Reloaded on SIGHUP.'),
    cfg.FloatOpt('stop_timeout', default=30.0, min=0.1, mutable=True,
                 help='Seconds a graceful stop (SIGTERM) may take to drain the work '
                      'in flight and commit it. Reloaded on SIGHUP.'),
    cfg.BoolOpt('static_membership', default=True,
                help='On Kafka, each worker joins its consumer groups with a '
                     'group.instance.id of its own (GROUP_INSTANCE_PREFIX-WORKER), '
                     'so a worker restarted after dying takes its partitions back at '
                     'once instead of waiting for the broker to evict it. Not applied '
                     'when [oslo_messaging_kafka] consumer_config sets '
                     'group.instance.id itself.'),
    cfg.StrOpt('group_instance_prefix',
               help='Prefix of the workers\' group.instance.id (default: '
                    'notify-transport-serve.HOSTNAME). Two serve services on one host '
                    'running the same listeners need different prefixes.'),
]


def register_serve_opts(conf: cfg.ConfigOpts) -> None:
    """Register the ``[serve]`` group."""
    register_opts(conf, serve_opts, SERVE_GROUP)


def register_transport_opts(conf: cfg.ConfigOpts) -> None:
    """Register ``[DEFAULT] transport_url`` and ``control_exchange``."""
    register_opts(conf, transport_opts)


def register_notifier_opts(conf: cfg.ConfigOpts) -> None:
    """Register the ``[oslo_messaging_notifications]`` group."""
    register_opts(conf, notifier_opts, NOTIFICATIONS_GROUP)


def list_opts() -> list[tuple[str | None, list[Any]]]:
    """Every option of the library, by group, for oslo-config-generator."""
    from notify_transport.drivers.kafka import GROUP as KAFKA_GROUP, all_opts as kafka_opts
    from notify_transport.notify.drivers import routing_config_opt
    groups: list[tuple[str | None, list[Any]]] = [
        (None, copy.deepcopy(transport_opts)),
        (NOTIFICATIONS_GROUP, copy.deepcopy(notifier_opts) + [copy.deepcopy(routing_config_opt)]),
        (KAFKA_GROUP, copy.deepcopy(kafka_opts())),
        (SERVE_GROUP, copy.deepcopy(serve_opts)),
    ]
    try:
        from notify_transport.drivers.rabbit import GROUP as RABBIT_GROUP, all_opts as rabbit_opts
    except ImportError:  # the rabbit driver is optional at import time
        pass
    else:
        groups.append((RABBIT_GROUP, copy.deepcopy(rabbit_opts())))
    from notify_transport.rpc.options import all_opts as rpc_opts  # [DEFAULT] RPC options
    groups[0][1].extend(copy.deepcopy(rpc_opts()))
    return groups
