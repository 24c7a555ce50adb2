"""Routing a request to an endpoint method by namespace, version and name, as oslo.messaging.

The first endpoint whose ``target`` namespace matches, whose version is
compatible and that has the method gets it, if the access policy allows.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Iterable

from notify_transport.exceptions import NoSuchMethod, UnsupportedVersion
from notify_transport.rpc.access import DefaultRPCAccessPolicy, RPCAccessPolicyBase
from notify_transport.rpc.versions import version_is_compatible
from notify_transport.serializer import NoOpSerializer, Serializer
from notify_transport.target import Target

LOG = logging.getLogger(__name__)


class PingEndpoint:
    """Answers ``oslo_rpc_server_ping`` when ``[DEFAULT] rpc_ping_enabled`` is set."""

    def oslo_rpc_server_ping(self, ctxt: Any, **kwargs: Any) -> str:
        return "pong"


def _is_target_like(target: Any) -> bool:
    return isinstance(target, Target) or (hasattr(target, "accepted_namespaces")
                                          and hasattr(target, "version"))


class RPCDispatcher:
    """Dispatches incoming requests to endpoints."""

    def __init__(self, endpoints: Iterable[Any], serializer: Serializer | None = None,
                 access_policy: type[RPCAccessPolicyBase] | None = None,
                 ping_enabled: bool = False) -> None:
        self.endpoints = list(endpoints)
        has_ping = False
        for endpoint in self.endpoints:
            target = getattr(endpoint, "target", None)
            if target is not None and not _is_target_like(target):
                raise TypeError("'target' is a reserved Endpoint attribute used for namespace and "
                                "version filtering.  It must be of type Target. Do not define an "
                                f"Endpoint method named 'target': endpoint={endpoint}")
            if getattr(endpoint, "oslo_rpc_server_ping", None):
                has_ping = True
                LOG.warning("'oslo_rpc_server_ping' is a reserved Endpoint attribute which can be "
                            "used to ping the endpoint; avoid oslo_* names (endpoint=%s)", endpoint)
        if ping_enabled:
            if has_ping:
                LOG.warning("rpc_ping_enabled=True but oslo_rpc_server_ping is already declared "
                            "by an endpoint; not adding the ping endpoint")
            else:
                self.endpoints.append(PingEndpoint())
        self.serializer = serializer or NoOpSerializer()
        self._default_target = Target()
        if access_policy is None:
            self.access_policy: RPCAccessPolicyBase = DefaultRPCAccessPolicy()
        elif isinstance(access_policy, type) and issubclass(access_policy, RPCAccessPolicyBase):
            self.access_policy = access_policy()
        else:
            raise TypeError("access_policy must be a subclass of RPCAccessPolicyBase")

    @staticmethod
    def _is_namespace(target: Any, namespace: str | None) -> bool:
        return namespace in target.accepted_namespaces

    @staticmethod
    def _is_compatible(target: Any, version: str) -> bool:
        return version_is_compatible(target.version or "1.0", version)

    def _do_dispatch(self, endpoint: Any, method: str, ctxt: Any, args: dict) -> Any:
        ctxt = self.serializer.deserialize_context(ctxt)
        new_args = {name: self.serializer.deserialize_entity(ctxt, arg) for name, arg in args.items()}
        result = getattr(endpoint, method)(ctxt, **new_args)
        return self.serializer.serialize_entity(ctxt, result)

    def dispatch(self, incoming: Any) -> Any:
        """Call the endpoint method for ``incoming``; return its (serialized) result."""
        message = incoming.message
        method = message.get("method")
        args = message.get("args", {}) or {}
        namespace = message.get("namespace")
        version = message.get("version", "1.0")
        if not isinstance(method, str):
            raise NoSuchMethod(str(method))
        watchdog = _CallMonitor(incoming) if getattr(incoming, "client_timeout", None) else None
        found_compatible = False
        try:
            for endpoint in self.endpoints:
                target = getattr(endpoint, "target", None) or self._default_target
                if not (self._is_namespace(target, namespace) and self._is_compatible(target, version)):
                    continue
                if hasattr(endpoint, method) and self.access_policy.is_allowed(endpoint, method):
                    return self._do_dispatch(endpoint, method, incoming.ctxt, args)
                found_compatible = True
        finally:
            if watchdog is not None:
                watchdog.stop()
        if found_compatible:
            raise NoSuchMethod(method)
        raise UnsupportedVersion(version, method=method)


class _CallMonitor:
    """Heartbeats a long call to a client that set a call-monitor timeout (oslo's watchdog)."""

    def __init__(self, incoming: Any) -> None:
        self._incoming = incoming
        self._done = threading.Event()
        try:
            interval = int(incoming.client_timeout) / 2
        except (TypeError, ValueError):
            interval = 0
        if interval < 1:
            LOG.warning("Client provided an invalid timeout value of %r", incoming.client_timeout)
            self._thread = None
            return
        self._interval = interval
        self._thread = threading.Thread(target=self._run, name="rpc-call-monitor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self._interval):
            try:
                self._incoming.heartbeat()
            except Exception as exc:  # noqa: BLE001 - the call goes on without heartbeats
                LOG.debug("Call-monitor heartbeat failed: %s", exc)
                break

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
