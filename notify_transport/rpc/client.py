"""The RPC client: ``call``, ``cast``, ``prepare`` and ``can_send_version`` as in oslo.messaging.

``call`` raises :class:`MessagingTimeout` after ``timeout`` (also when no server
listens); ``cast`` returns once the broker confirmed the request.
"""
from __future__ import annotations

import logging
from typing import Any

from notify_transport.exceptions import InvalidTarget, MessagingException, RPCVersionCapError
from notify_transport.rpc import options
from notify_transport.rpc.versions import version_is_compatible
from notify_transport.serializer import NoOpSerializer, Serializer
from notify_transport.target import Target
from notify_transport.transport import RPCTransport

LOG = logging.getLogger(__name__)

__all__ = ["RPCClient", "get_rpc_client"]

_marker: Any = object()


class CallContext:
    """A target plus call settings; what ``prepare()`` returns."""

    def __init__(self, transport: Any, target: Target, serializer: Serializer,
                 timeout: float | None = None, version_cap: str | None = None,
                 retry: int | None = None, call_monitor_timeout: float | None = None,
                 transport_options: Any = None) -> None:
        self.conf = transport.conf
        self.transport = transport
        self.target = target
        self.serializer = serializer
        self.timeout = timeout
        self.version_cap = version_cap
        self.retry = retry
        self.call_monitor_timeout = call_monitor_timeout
        self.transport_options = transport_options

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.target!r}>"

    def _make_message(self, ctxt: Any, method: str, args: dict) -> dict:
        msg: dict[str, Any] = {"method": method,
                               "args": {name: self.serializer.serialize_entity(ctxt, arg)
                                        for name, arg in args.items()}}
        if self.target.namespace is not None:
            msg["namespace"] = self.target.namespace
        if self.target.version is not None:
            msg["version"] = self.target.version
        return msg

    def _check_version_cap(self, version: str | None) -> None:
        if not version_is_compatible(self.version_cap, version):
            raise RPCVersionCapError(version=str(version), version_cap=str(self.version_cap))

    def can_send_version(self, version: Any = _marker) -> bool:
        """Whether ``version`` (default: the target's) is within the version cap."""
        version = self.target.version if version is _marker else version
        return version_is_compatible(self.version_cap, version)

    def cast(self, ctxt: Any, method: str, **kwargs: Any) -> None:
        """Invoke ``method`` without waiting for it; returns once the broker has the request."""
        msg = self._make_message(ctxt, method, kwargs)
        msg_ctxt = self.serializer.serialize_context(ctxt)
        self._check_version_cap(msg.get("version"))
        self.transport._send(self.target, msg_ctxt, msg, retry=self.retry,  # noqa: SLF001
                             transport_options=self.transport_options)

    def call(self, ctxt: Any, method: str, **kwargs: Any) -> Any:
        """Invoke ``method`` and return its result; ``MessagingTimeout`` after ``timeout``.

        A remote exception comes back as itself (class ``<Name>_Remote``) when its
        module is in ``allowed_remote_exmods``, else as ``RemoteError``.
        """
        if self.target.fanout:
            raise InvalidTarget("A call cannot be used with fanout", self.target)
        msg = self._make_message(ctxt, method, kwargs)
        msg_ctxt = self.serializer.serialize_context(ctxt)
        timeout = self.timeout if self.timeout is not None else self.conf.rpc_response_timeout
        self._check_version_cap(msg.get("version"))
        send_kwargs = dict(wait_for_reply=True, timeout=timeout, retry=self.retry,
                           transport_options=self.transport_options)
        if self.call_monitor_timeout:
            result = self.transport.driver.send(self.target, msg_ctxt, msg,
                                                call_monitor_timeout=self.call_monitor_timeout,
                                                **send_kwargs)
        else:
            result = self.transport._send(self.target, msg_ctxt, msg, **send_kwargs)  # noqa: SLF001
        return self.serializer.deserialize_entity(ctxt, result)

    def prepare(self, exchange: Any = _marker, topic: Any = _marker, namespace: Any = _marker,
                version: Any = _marker, server: Any = _marker, fanout: Any = _marker,
                timeout: Any = _marker, version_cap: Any = _marker, retry: Any = _marker,
                call_monitor_timeout: Any = _marker, transport_options: Any = _marker) -> "CallContext":
        """A context overriding some target attributes and call settings."""
        if version is not _marker and version is not None:
            try:
                version_is_compatible(version, version)
            except (IndexError, ValueError, AttributeError):
                raise MessagingException(
                    f"Version must contain a major and minor integer. Got {version}") from None
        changes = {k: v for k, v in dict(exchange=exchange, topic=topic, namespace=namespace,
                                         version=version, server=server, fanout=fanout).items()
                   if v is not _marker}
        target = self.target(**changes)

        def pick(value: Any, current: Any) -> Any:
            return current if value is _marker else value

        return CallContext(self.transport, target, self.serializer,
                            pick(timeout, self.timeout), pick(version_cap, self.version_cap),
                            pick(retry, self.retry),
                            pick(call_monitor_timeout, self.call_monitor_timeout),
                            pick(transport_options, self.transport_options))


#: the former private name, for code that used it
_CallContext = CallContext


class RPCClient(CallContext):
    """Invokes methods on remote RPC servers; made by :func:`get_rpc_client`."""

    def __init__(self, transport: Any, target: Target, timeout: float | None = None,
                 version_cap: str | None = None, serializer: Serializer | None = None,
                 retry: int | None = None, call_monitor_timeout: float | None = None,
                 transport_options: Any = None) -> None:
        if not isinstance(transport, RPCTransport):
            LOG.warning("Using notification transport for RPC. Please use get_rpc_transport to "
                        "obtain an RPC transport instance.")
        options.register_client_opts(transport.conf)
        super().__init__(transport, target, serializer or NoOpSerializer(), timeout, version_cap,
                         retry, call_monitor_timeout, transport_options)


def get_rpc_client(transport: Any, target: Target, client_cls: type[RPCClient] | None = None,
                   **kwargs: Any) -> RPCClient:
    """An RPC client for ``target``: ``client_cls(transport, target, **kwargs)``, as oslo.messaging.

    ``kwargs`` are the client's (``timeout``, ``version_cap``, ``serializer``,
    ``retry``...); ``retry``: None or -1 retries sending forever (a call stays
    bounded by its timeout), 0 never retries, N retries N times.
    """
    return (client_cls or RPCClient)(transport, target, **kwargs)
