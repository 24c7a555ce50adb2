"""Exceptions raised by notify-transport.

Leaf module: drivers and the public API both import it, so it imports nothing
from the package.
"""
from __future__ import annotations


class MessagingException(Exception):
    """Base class for every error this library raises."""


class ConfigurationError(MessagingException, ValueError):
    """An option, a URL query parameter or an argument has a wrong value."""


class InvalidTransportURL(ConfigurationError):
    """A transport URL could not be parsed or names an unknown option.

    ``fix``: what to change in the URL, when the error knows (the command line's next step).
    """

    def __init__(self, url: str, msg: str, fix: str | None = None) -> None:
        super().__init__(msg)
        self.url = url
        self.fix = fix


class DriverLoadFailure(MessagingException):
    """No driver is installed for the URL's scheme, or it failed to load."""

    def __init__(self, driver: str, ex: object) -> None:
        super().__init__(str(ex))
        self.driver = driver
        self.ex = ex


class NotSupported(MessagingException, NotImplementedError):
    """The driver cannot do what was asked (e.g. RPC over Kafka)."""


class MessageDeliveryFailure(MessagingException):
    """A message could not be handed to the broker or was not confirmed."""


class BrokerUnreachable(MessagingException):
    """No broker of the transport answered within the wait the caller gave.

    Raised by :meth:`notify_transport.transport.Transport.check_connection`; the
    command line reports it with exit status 3.
    """


class MessagingTimeout(MessagingException):
    """An operation did not complete within its timeout."""


class DecodeError(MessagingException):
    """Bytes received from a broker are not a valid oslo message."""


class MessagingServerError(MessagingException):
    """Base class for errors of a listener or RPC server."""


class ServerListenError(MessagingServerError):
    """A server could not start listening on its targets."""

    def __init__(self, target: object, ex: BaseException) -> None:
        super().__init__(f"Failed to listen on {target}: {ex}")
        self.target = target
        self.ex = ex


class ExecutorLoadFailure(MessagingServerError, ConfigurationError):
    """A server was asked for an executor this library does not run (only ``threading``)."""

    def __init__(self, executor: str | None, ex: object) -> None:
        super().__init__(f'Failed to load executor "{executor}": {ex}')
        self.executor = executor
        self.ex = ex


class InvalidTarget(MessagingException, ValueError):
    """A target lacks something that the operation needs."""

    def __init__(self, msg: str, target: object) -> None:
        super().__init__(f"{msg}: {target}")
        self.target = target


# Names, constructor arguments and messages follow oslo.messaging, so code that
# catches or inspects them keeps working after the import change.


class MessageUndeliverable(MessagingException):
    """The broker could not route a message sent with the mandatory flag."""

    def __init__(self, exception: object, exchange: str, routing_key: str, message: object) -> None:
        super().__init__(f"Message to exchange {exchange!r} with routing key {routing_key!r} "
                         f"was not routed: {exception}")
        self.exception = exception
        self.exchange = exchange
        self.routing_key = routing_key
        self.message = message


class AccessDenied(MessageDeliveryFailure):
    """The broker refused the credentials or the virtual host (not worth retrying as is)."""


class RemoteError(MessagingException):
    """A remote endpoint raised an exception that is not re-raised locally.

    ``exc_type`` is the remote class name, ``value`` its message and
    ``traceback`` the formatted remote traceback (a list of lines).
    """

    def __init__(self, exc_type: str | None = None, value: str | None = None,
                 traceback: object = None) -> None:
        self.exc_type = exc_type
        self.value = value
        self.traceback = traceback
        super().__init__(f"Remote error: {exc_type} {value}\n{traceback}.")


class RPCVersionCapError(MessagingException):
    """A call asked for a version above the client's version cap."""

    def __init__(self, version: str, version_cap: str) -> None:
        self.version = version
        self.version_cap = version_cap
        super().__init__(f"Requested message version, {version} is incompatible.  It needs to be "
                         "equal in major version and less than or equal in minor version as the "
                         f"specified version cap {version_cap}.")


class ClientSendError(MessagingException):
    """A request could not be handed to the transport."""

    def __init__(self, target: object, ex: BaseException) -> None:
        super().__init__(f'Failed to send to target "{target}": {ex}')
        self.target = target
        self.ex = ex


class RPCDispatcherError(MessagingServerError):
    """Base class of the RPC dispatcher's errors."""


class NoSuchMethod(RPCDispatcherError, AttributeError):
    """No endpoint exposes the requested method (or the access policy forbids it)."""

    def __init__(self, method: str) -> None:
        super().__init__(f"Endpoint does not support RPC method {method}")
        self.method = method


class UnsupportedVersion(RPCDispatcherError):
    """No endpoint of the requested namespace supports the requested version."""

    def __init__(self, version: str, method: str | None = None) -> None:
        msg = f"Endpoint does not support RPC version {version}"
        if method:
            msg = f"{msg}. Attempted method: {method}"
        super().__init__(msg)
        self.version = version
        self.method = method


class ExpectedException(Exception):
    """Wraps an exception an endpoint expects to raise: the client gets the
    original exception, and the server logs it without a traceback."""

    def __init__(self) -> None:
        import sys
        self.exc_info = sys.exc_info()
