"""notify-transport: OpenStack-style notifications over Kafka, RPC over RabbitMQ.

The public names, shaped like oslo.messaging's so that migrating is an import change.
"""
from importlib import metadata as _metadata

from notify_transport.exceptions import (ConfigurationError, DecodeError, DriverLoadFailure,
                                         InvalidTarget, InvalidTransportURL, MessageDeliveryFailure,
                                         MessagingException, MessagingServerError, MessagingTimeout,
                                         NotSupported, ServerListenError)
from notify_transport.exceptions import ExecutorLoadFailure, MessageUndeliverable  # oslo.messaging names
from notify_transport.notify import (NotificationFilter, NotificationResult, Notifier,
                                     get_batch_notification_listener, get_notification_listener)
from notify_transport.notify import (LoggingErrorNotificationHandler, LoggingNotificationHandler,
                                     PublishErrorsHandler)
from notify_transport.options import list_opts
from notify_transport.serializer import JsonPayloadSerializer, NoOpSerializer, Serializer
from notify_transport.target import Target
from notify_transport.transport import (NotificationTransport, RPCTransport, Transport,
                                        get_notification_transport, get_rpc_transport, get_transport)
from notify_transport.transport import TransportOptions, set_transport_defaults
from notify_transport.url import TransportHost, TransportURL

try:  # setup.cfg is the one source of the version; installed metadata carries it
    __version__ = _metadata.version("notify-transport")
except _metadata.PackageNotFoundError:  # a bare checkout on sys.path, never installed
    __version__ = "0+unknown"

__all__ = [
    "__version__",
    "ConfigurationError", "DecodeError", "DriverLoadFailure", "InvalidTarget", "InvalidTransportURL",
    "MessageDeliveryFailure", "MessagingException", "MessagingServerError", "MessagingTimeout",
    "NotSupported", "ServerListenError",
    "NotificationFilter", "NotificationResult", "Notifier", "get_batch_notification_listener",
    "get_notification_listener", "list_opts", "NoOpSerializer", "Serializer", "Target",
    "NotificationTransport", "RPCTransport", "Transport", "get_notification_transport",
    "get_rpc_transport", "get_transport", "TransportHost", "TransportURL",
    "ExecutorLoadFailure", "MessageUndeliverable", "LoggingErrorNotificationHandler",
    "LoggingNotificationHandler", "PublishErrorsHandler", "JsonPayloadSerializer", "TransportOptions",
    "set_transport_defaults",
]

try:  # the RPC API lands with the rabbit driver
    from notify_transport.rpc import (RemoteError, get_rpc_client,  # noqa: F401
                                      get_rpc_server)
    from notify_transport.rpc import (ClientSendError, DefaultRPCAccessPolicy,  # noqa: F401
                                      ExpectedException, ExplicitRPCAccessPolicy, LegacyRPCAccessPolicy,
                                      NoSuchMethod, RPCAccessPolicyBase, RPCClient, RPCDispatcher,
                                      RPCDispatcherError, RPCVersionCapError, UnsupportedVersion,
                                      expected_exceptions, expose)
    from notify_transport import dispatcher, server  # noqa: F401  (oslo.messaging's submodules)
    from notify_transport.server import MessageHandlingServer  # noqa: F401
except ImportError:
    pass
else:
    __all__ += ["RemoteError", "get_rpc_client", "get_rpc_server",
                "ClientSendError", "DefaultRPCAccessPolicy", "ExpectedException", "ExplicitRPCAccessPolicy",
                "LegacyRPCAccessPolicy", "NoSuchMethod", "RPCAccessPolicyBase", "RPCClient", "RPCDispatcher",
                "RPCDispatcherError", "RPCVersionCapError", "UnsupportedVersion", "expected_exceptions",
                "expose", "MessageHandlingServer"]
