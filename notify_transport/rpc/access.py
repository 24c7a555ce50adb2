"""Which endpoint methods a client may call (oslo.messaging's access policies)."""
from __future__ import annotations

import abc
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def expose(func: F) -> F:
    """Mark an endpoint method callable under :class:`ExplicitRPCAccessPolicy`."""
    func.exposed = True  # type: ignore[attr-defined]
    return func


class RPCAccessPolicyBase(abc.ABC):
    """Decides whether ``method`` of ``endpoint`` may be invoked over RPC."""

    @abc.abstractmethod
    def is_allowed(self, endpoint: Any, method: str) -> bool:
        """True if the method may be invoked."""


class LegacyRPCAccessPolicy(RPCAccessPolicyBase):
    """Every callable attribute, private ones included (oslo's legacy behaviour)."""

    def is_allowed(self, endpoint: Any, method: str) -> bool:
        return True


class DefaultRPCAccessPolicy(RPCAccessPolicyBase):
    """Public methods only: nothing whose name starts with ``_``."""

    def is_allowed(self, endpoint: Any, method: str) -> bool:
        return not method.startswith("_")


class ExplicitRPCAccessPolicy(RPCAccessPolicyBase):
    """Only methods decorated with :func:`expose`."""

    def is_allowed(self, endpoint: Any, method: str) -> bool:
        if hasattr(endpoint, method):
            return hasattr(getattr(endpoint, method), "exposed")
        return False
