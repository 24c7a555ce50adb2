"""The IncomingMessage of the Kafka driver: Kafka fields read from the record when asked.

A listener may hand out hundreds of thousands of messages a second; copying
seven fields out of every confluent-kafka record that the dispatcher never
looks at would cost more than the dispatch. The record is kept and the fields
(``topic``, ``partition``, ``offset``, ``key``, ``timestamp``, ``headers``,
``raw``) are properties over it.
"""
from __future__ import annotations

from typing import Any, Callable

from confluent_kafka import Message

from notify_transport.drivers.base import IncomingMessage


class KafkaMessage(IncomingMessage):
    """An :class:`IncomingMessage` backed by a confluent-kafka record."""

    __slots__ = ("record",)

    def __init__(self, ctxt: dict, message: dict, record: Message,
                 on_ack: Callable[[IncomingMessage], None] | None = None,
                 on_requeue: Callable[[IncomingMessage], None] | None = None) -> None:
        # the base fields that are properties here are deliberately not set
        self.ctxt = ctxt
        self.message = message
        self.record = record
        self._on_ack = on_ack
        self._on_requeue = on_requeue
        self._settled = False

    @property  # type: ignore[override]
    def topic(self) -> str:
        return self.record.topic()

    @property  # type: ignore[override]
    def partition(self) -> int:
        return self.record.partition()

    @property  # type: ignore[override]
    def offset(self) -> int:
        return self.record.offset()

    @property  # type: ignore[override]
    def key(self) -> bytes | None:
        return self.record.key()

    @property  # type: ignore[override]
    def timestamp(self) -> float | None:
        """Broker or producer time in seconds since the epoch, None when the record has none."""
        kind, millis = self.record.timestamp()
        return millis / 1000.0 if kind else None

    @property  # type: ignore[override]
    def headers(self) -> list[tuple[str, bytes]] | None:
        return self.record.headers()

    @property  # type: ignore[override]
    def raw(self) -> Any:
        return self.record.value()
