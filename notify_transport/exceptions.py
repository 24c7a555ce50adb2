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
    """A transport URL could not be parsed or names an unknown option."""

    def __init__(self, url: str, msg: str) -> None:
        super().__init__(msg)
        self.url = url


class DriverLoadFailure(MessagingException):
    """No driver is installed for the URL's scheme, or it failed to load."""

    def __init__(self, driver: str, msg: str) -> None:
        super().__init__(msg)
        self.driver = driver


class NotSupported(MessagingException, NotImplementedError):
    """The driver cannot do what was asked (e.g. RPC over Kafka)."""


class MessageDeliveryFailure(MessagingException):
    """A message could not be handed to the broker or was not confirmed."""


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


class InvalidTarget(MessagingException, ValueError):
    """A target lacks something that the operation needs."""

    def __init__(self, msg: str, target: object) -> None:
        super().__init__(f"{msg}: {target}")
        self.target = target
