"""``[DEFAULT]`` options of the RPC layer: oslo.messaging 18.3.1's names, types and
defaults, in our words.

Both libraries may register them in one process (in either order); oslo registers
these on whichever ConfigOpts the transport uses (and the ping option on the
global one), so do we.
"""
from __future__ import annotations

from oslo_config import cfg

from notify_transport.drivers.config import register_opts

client_opts = [
    cfg.IntOpt('rpc_response_timeout',
               default=60,
               help='Seconds an RPC call waits for its answer before it raises '
                    'MessagingTimeout, unless the call gives its own timeout.'),
]

pool_opts = [
    cfg.IntOpt('executor_thread_pool_size',
               default=64,
               deprecated_name="rpc_thread_pool_size",
               help='Most requests an RPC server handles at once: its worker '
                    'threads (or green threads under eventlet), added as needed up '
                    'to this number.'),
]

dispatcher_opts = [
    cfg.BoolOpt('rpc_ping_enabled',
                default=False,
                help='Whether RPC servers answer oslo_rpc_server_ping calls '
                     '(a liveness check that needs no endpoint of the service).'),
]


def all_opts() -> list[cfg.Opt]:
    return [*client_opts, *pool_opts, *dispatcher_opts]


def register_client_opts(conf: cfg.ConfigOpts) -> None:
    register_opts(conf, client_opts)


def register_server_opts(conf: cfg.ConfigOpts) -> None:
    register_opts(conf, [*pool_opts, *dispatcher_opts])
