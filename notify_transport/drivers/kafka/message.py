"""The IncomingMessage of the Kafka driver: Kafka fields read from the record when asked.

Copying seven fields out of every record would cost more than the dispatch;
the record is kept and the fields are properties over it.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

from confluent_kafka import KafkaError

from notify_transport.drivers.base import IncomingMessage


class ConsumedRecord(Protocol):
    """A record a consumer returned without error: ``topic()``, ``partition()`` and ``offset()`` are set.

    The client's types allow None there; the consumer casts once per checked batch.
    """

    def topic(self) -> str: ...

    def partition(self) -> int: ...

    def offset(self) -> int: ...

    def key(self) -> bytes | None: ...

    def value(self) -> bytes | None: ...

    def headers(self) -> list[tuple[str, bytes]] | None: ...

    def timestamp(self) -> tuple[int, int]: ...

    def error(self) -> KafkaError | None: ...


class KafkaMessage(IncomingMessage):
    """An :class:`IncomingMessage` backed by a confluent-kafka record."""

    __slots__ = ("record", "owner")

    def __init__(self, ctxt: dict, message: dict, record: ConsumedRecord,
                 on_ack: Callable[[IncomingMessage], None] | None = None,
                 on_requeue: Callable[[IncomingMessage], None] | None = None,
                 owner: Any = None) -> None:
        # the base fields that are properties here are deliberately not set
        self.ctxt = ctxt
        self.message = message
        self.record = record
        #: what the commit policy handed out with the record (at least once: its partition's
        #: track), asked later whether the record still counts
        self.owner = owner
        self._on_ack = on_ack
        self._on_requeue = on_requeue
        self._settled = False

    # read-only by design: the fields the base class stores are read from the record here
    @property
    def topic(self) -> str:  # type: ignore[override]
        return self.record.topic()

    @property
    def partition(self) -> int:  # type: ignore[override]
        return self.record.partition()

    @property
    def offset(self) -> int:  # type: ignore[override]
        return self.record.offset()

    @property
    def key(self) -> bytes | None:  # type: ignore[override]
        return self.record.key()

    @property
    def timestamp(self) -> float | None:  # type: ignore[override]
        """Broker or producer time in seconds since the epoch, None when the record has none."""
        kind, millis = self.record.timestamp()
        return millis / 1000.0 if kind else None

    @property
    def headers(self) -> list[tuple[str, bytes]] | None:  # type: ignore[override]
        return self.record.headers()

    @property
    def raw(self) -> Any:  # type: ignore[override]
        return self.record.value()
