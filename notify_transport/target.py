"""Where a message goes to or comes from, as in oslo.messaging."""
from __future__ import annotations

from typing import Any


class Target:
    """A destination or a subscription.

    ``topic`` is required to send or listen; ``server`` narrows an RPC to one
    server; ``fanout`` reaches every server of a topic; ``exchange``,
    ``namespace`` and ``version`` follow oslo.messaging's meaning.
    """

    __slots__ = ("exchange", "topic", "namespace", "version", "server",
                 "fanout", "accepted_namespaces")

    def __init__(self, exchange: str | None = None, topic: str | None = None,
                 namespace: str | None = None, version: str | None = None,
                 server: str | None = None, fanout: bool | None = None,
                 legacy_namespaces: list[str | None] | None = None,
                 accepted_namespaces: list[str | None] | None = None) -> None:
        self.exchange = exchange
        self.topic = topic
        self.namespace = namespace
        self.version = version
        self.server = server
        self.fanout = fanout
        # oslo.messaging's meaning: the namespace, then older names it still answers to
        self.accepted_namespaces = accepted_namespaces or [namespace] + list(legacy_namespaces or [])

    def __call__(self, **kwargs: Any) -> "Target":
        """Return a copy with some attributes replaced."""
        for slot in self.__slots__:
            kwargs.setdefault(slot, getattr(self, slot))
        return Target(**kwargs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Target):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        attrs = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__
                          if s != "accepted_namespaces" and getattr(self, s) is not None)
        return f"<Target {attrs}>"
