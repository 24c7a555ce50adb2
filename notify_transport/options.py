"""oslo.config options of the API layer, and ``list_opts()`` for oslo-config-generator.

The ``[DEFAULT]`` and ``[oslo_messaging_notifications]`` options keep
oslo.messaging 18.x's names, types and defaults, so a service config written
for it works unchanged; their help is ours, and both libraries register them in
one process in either order (:func:`~notify_transport.drivers.config.register_opts`).
"""
from __future__ import annotations

import copy
import difflib
import glob
import logging
import os
from typing import Any, Iterable, Mapping

from oslo_config import cfg

from notify_transport.drivers.config import register_opts

LOG = logging.getLogger(__name__)

NOTIFICATIONS_GROUP = "oslo_messaging_notifications"

transport_opts = [
    cfg.StrOpt('transport_url',
               default="rabbit://",
               secret=True,
               help='Where messages go, as a URL: the scheme names the driver '
                    '(kafka, rabbit, ntkafka, fake or a third-party one), then '
                    'optional credentials, one or more host:port pairs, a virtual '
                    'host and query options that override the driver\'s options:\n\n'
                    'scheme://[user:pass@]host:port[,host2:port2]/vhost?option=value\n\n'
                    'The password is never logged. Notifications use '
                    '[oslo_messaging_notifications] transport_url instead when it is set.'),
    cfg.StrOpt('control_exchange',
               default='openstack',
               help='Exchange of a target that names none. RabbitMQ binds each '
                    'topic queue to it; Kafka has no exchanges and ignores it. '
                    'A service usually sets its own default (for example nova).'),
]

notifier_opts = [
    cfg.MultiStrOpt('driver',
                    default=[],
                    help='Notifier drivers a notification is handed to, any number of '
                         'them: messagingv2 (the transport, in the 2.0 envelope), '
                         'messaging (the transport, unwrapped), log, routing (per '
                         'event type, from routing_config), test, noop. None: '
                         'notifications are not sent.'),
    cfg.StrOpt('transport_url',
               secret=True,
               help='Transport URL of the notifications alone (for example '
                    'kafka://... while RPC stays on rabbit://). Unset: the '
                    '[DEFAULT] transport_url.'),
    cfg.ListOpt('topics',
                default=['notifications', ],
                help='Topics a notifier publishes to and a listener without '
                     'targets reads; each is suffixed with the priority (and on Kafka '
                     'the vhost), notifications.info for example.'),
    cfg.IntOpt('retry', default=-1,
               help='How many more times a notification is sent after a failure '
                    'that may pass (the broker unreachable). 0: never; -1: as the '
                    'driver does by itself (RabbitMQ reconnects until it is sent, '
                    'Kafka\'s producer retries within delivery_timeout); N > 0: on '
                    'Kafka, N new attempts after a failed delivery, on RabbitMQ N '
                    'reconnection attempts.'),
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


def ignored_file_options(conf: cfg.ConfigOpts, groups: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """What ``conf``'s files set in notify-transport's groups that no option of ours takes.

    oslo.config skips a key it has no option for without a word, so a misspelt
    ``producer_batch_timout`` leaves the default in force unnoticed. Each such key
    comes back as a sentence naming its file and the closest option name. ``groups``
    maps a group to the names it takes (default: the groups of :func:`list_opts`;
    ``[DEFAULT]``, which every library of a service shares, is not ours to judge).
    """
    known = _own_groups() if groups is None else {group: set(names) for group, names in groups.items()}
    ignored = []
    for path in _config_files(conf):
        sections: dict[str, dict[str, Any]] = {}
        try:
            cfg.ConfigParser(path, sections).parse()
        except (OSError, cfg.ParseError):  # reading the files reported it already
            continue
        for group, keys in sections.items():
            taken = known.get(group)
            for key in keys:
                if taken is None or key.replace("-", "_") in taken:
                    continue
                close = difflib.get_close_matches(key, taken, 1)
                ignored.append(f"{path}: [{group}] {key} is not an option of notify-transport and is ignored"
                               + (f" (did you mean {close[0]}?)" if close else ""))
    return ignored


#: The lines :func:`warn_ignored_file_options` logged in this process. A service makes
#: several transports from one configuration (RPC and notifications; ``serve``'s probe,
#: its service and each worker), and a misspelt key deserves one warning, not one each.
_WARNED: set[str] = set()


def warn_ignored_file_options(conf: cfg.ConfigOpts, groups: Mapping[str, Iterable[str]] | None = None) -> None:
    """Log each line of :func:`ignored_file_options` as a warning, once a process."""
    for line in ignored_file_options(conf, groups):
        if line not in _WARNED:
            _WARNED.add(line)
            LOG.warning("%s", line)


def _own_groups() -> dict[str, set[str]]:
    """Each group of :func:`list_opts` but ``[DEFAULT]``, with its options' names (deprecated ones too)."""
    known: dict[str, set[str]] = {}
    for group, opts in list_opts():
        if group is None:
            continue
        names = known.setdefault(group, set())
        for opt in opts:
            names.add(opt.dest)
            names.update(old.name.replace("-", "_") for old in opt.deprecated_opts
                         if old.name and old.group in (None, group))
    return known


def _config_files(conf: cfg.ConfigOpts) -> list[str]:
    """The files ``conf`` read: ``--config-file`` ones, then each ``--config-dir``'s ``*.conf`` in name order."""
    try:
        files = list(conf.config_file or [])
        dirs = list(conf.config_dir or [])
    except (cfg.NoSuchOptError, cfg.NotInitializedError):  # a ConfigOpts never called: no files
        return []
    for folder in dirs:
        files.extend(sorted(glob.glob(os.path.join(folder, "*.conf"))))
    return files
