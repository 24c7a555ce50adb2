"""RPC: clients and servers with oslo.messaging's API (``oslo_messaging.rpc``)."""
from notify_transport.exceptions import (ClientSendError, ExpectedException, MessagingTimeout,
                                         NoSuchMethod, RemoteError, RPCDispatcherError,
                                         RPCVersionCapError, UnsupportedVersion)
from notify_transport.rpc.access import (DefaultRPCAccessPolicy, ExplicitRPCAccessPolicy,
                                         LegacyRPCAccessPolicy, RPCAccessPolicyBase, expose)
from notify_transport.rpc.client import RPCClient, get_rpc_client
from notify_transport.rpc.dispatcher import RPCDispatcher
from notify_transport.rpc.server import RPCServer, expected_exceptions, get_rpc_server
from notify_transport.transport import get_rpc_transport

__all__ = [
    "ClientSendError", "ExpectedException", "MessagingTimeout", "NoSuchMethod", "RemoteError",
    "RPCDispatcherError", "RPCVersionCapError", "UnsupportedVersion",
    "DefaultRPCAccessPolicy", "ExplicitRPCAccessPolicy", "LegacyRPCAccessPolicy",
    "RPCAccessPolicyBase", "expose", "RPCClient", "get_rpc_client", "RPCDispatcher", "RPCServer",
    "expected_exceptions", "get_rpc_server", "get_rpc_transport",
]
