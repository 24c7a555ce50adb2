"""``[DEFAULT]`` options of the RPC layer, copied from oslo.messaging 18.3.1.

Identical definitions, so that both libraries register them in one process;
oslo registers these on whichever ConfigOpts the transport uses (and the ping
option on the global one), so do we.
"""
from __future__ import annotations

from oslo_config import cfg

from notify_transport.drivers.config import register_opts

client_opts = [
    cfg.IntOpt('rpc_response_timeout',
               default=60,
               help='Seconds to wait for a response from a call.'),
]

pool_opts = [
    cfg.IntOpt('executor_thread_pool_size',
               default=64,
               deprecated_name="rpc_thread_pool_size",
               help='Size of executor thread pool when'
               ' executor is threading or eventlet.'),
]

dispatcher_opts = [
    cfg.BoolOpt('rpc_ping_enabled',
                default=False,
                help='Add an endpoint to answer to ping calls. '
                     'Endpoint is named oslo_rpc_server_ping'),
]


def all_opts() -> list[cfg.Opt]:
    return [*client_opts, *pool_opts, *dispatcher_opts]


def register_client_opts(conf: cfg.ConfigOpts) -> None:
    register_opts(conf, client_opts)


def register_server_opts(conf: cfg.ConfigOpts) -> None:
    register_opts(conf, [*pool_opts, *dispatcher_opts])
