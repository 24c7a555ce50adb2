"""notify-transport: OpenStack-style notifications over Kafka, RPC over RabbitMQ.

The public names, shaped like oslo.messaging's so that migrating is an import change. Each is
loaded on first use (:func:`~notify_transport.drivers.face.lazy_names`): a process that imports
one part of the package, such as a Spark worker reading Kafka for the pipeline, does not import
the API, oslo.config and the drivers it never calls.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from notify_transport.drivers.face import lazy_names

if TYPE_CHECKING:
    from notify_transport.exceptions import (ConfigurationError, DecodeError, DriverLoadFailure,  # noqa: F401
                                             InvalidTarget, InvalidTransportURL, MessageDeliveryFailure,
                                             MessagingException, MessagingServerError, MessagingTimeout,
                                             NotSupported, ServerListenError)
    from notify_transport.exceptions import ExecutorLoadFailure, MessageUndeliverable  # noqa: F401
    from notify_transport.notify import (NotificationFilter, NotificationResult, Notifier,  # noqa: F401
                                         get_batch_notification_listener, get_notification_listener)
    from notify_transport.notify import (LoggingErrorNotificationHandler, LoggingNotificationHandler,  # noqa: F401
                                         PublishErrorsHandler)
    from notify_transport.options import list_opts  # noqa: F401
    from notify_transport.serializer import JsonPayloadSerializer, NoOpSerializer, Serializer  # noqa: F401
    from notify_transport.target import Target  # noqa: F401
    from notify_transport.transport import (NotificationTransport, RPCTransport, Transport,  # noqa: F401
                                            get_notification_transport, get_rpc_transport, get_transport)
    from notify_transport.transport import TransportOptions, set_transport_defaults  # noqa: F401
    from notify_transport.url import TransportHost, TransportURL  # noqa: F401
    from notify_transport.rpc import (RemoteError, get_rpc_client, get_rpc_server)  # noqa: F401
    from notify_transport.rpc import (ClientSendError, DefaultRPCAccessPolicy,  # noqa: F401
                                      ExpectedException, ExplicitRPCAccessPolicy, LegacyRPCAccessPolicy,
                                      NoSuchMethod, RPCAccessPolicyBase, RPCClient, RPCDispatcher,
                                      RPCDispatcherError, RPCVersionCapError, UnsupportedVersion,
                                      expected_exceptions, expose)
    from notify_transport.server import MessageHandlingServer  # noqa: F401

#: oslo.messaging's submodules that its users reach as attributes of the package
_SUBMODULES = ("dispatcher", "server")

_names, _load = lazy_names(__name__, __file__)
__all__ = ["__version__", *_names]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = version = _version()
        return version
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    return _load(name)


def _version() -> str:
    """setup.cfg is the one source of the version; the installed metadata carries it."""
    from importlib import metadata

    try:
        return metadata.version("notify-transport")
    except metadata.PackageNotFoundError:  # a bare checkout on sys.path, never installed
        return "0+unknown"
