"""Exchanges, queues and bindings, laid out exactly as oslo.messaging's rabbit driver does.

RPC: topic exchange ``<exchange>`` with queues ``<topic>`` and
``<topic>.<server>``, fanout exchange ``<topic>_fanout`` with a queue per
server, one ``reply_<uuid>`` queue per process. Notifications: routing key
``<topic>.<priority>``, a queue per pool (or ``<topic>.<priority>``). Names and
attributes must match oslo's: RabbitMQ rejects a declaration that differs.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from notify_transport.drivers.naming import server_routing_key
from notify_transport.exceptions import ConfigurationError


@dataclass(frozen=True)
class ExchangeSpec:
    """An exchange to declare; the empty name is the default exchange (never declared)."""

    name: str
    type: str = "topic"
    durable: bool = False
    auto_delete: bool = False


@dataclass(frozen=True)
class QueueSpec:
    """A queue, the bindings that feed it, and how to consume it."""

    name: str
    durable: bool = False
    auto_delete: bool = False
    arguments: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    bindings: tuple[tuple[ExchangeSpec, str], ...] = ()
    consumer_arguments: dict[str, Any] | None = field(default=None, hash=False, compare=False)
    #: Deleted when its consumer closes (per-server fanout queues).
    delete_on_close: bool = False


def queue_arguments(opts: SimpleNamespace, ttl: int, quorum: bool) -> dict[str, Any]:
    """``x-`` arguments as oslo's ``_get_queue_arguments`` builds them (streams aside)."""
    if quorum and opts.rabbit_ha_queues:
        raise ConfigurationError("rabbit_quorum_queue and rabbit_ha_queues are both enabled; "
                                 "a queue is quorum or HA (mirrored), not both")
    args: dict[str, Any] = {}
    if opts.rabbit_ha_queues:
        args["x-ha-policy"] = "all"
    if quorum:
        args["x-queue-type"] = "quorum"
        if opts.rabbit_quorum_delivery_limit:
            args["x-delivery-limit"] = opts.rabbit_quorum_delivery_limit
        if opts.rabbit_quorum_max_memory_length:
            args["x-max-in-memory-length"] = opts.rabbit_quorum_max_memory_length
        if opts.rabbit_quorum_max_memory_bytes:
            args["x-max-in-memory-bytes"] = opts.rabbit_quorum_max_memory_bytes
    if ttl > 0:
        args["x-expires"] = ttl * 1000
    return args


class Topology:
    """Builds the specs for one driver's options."""

    def __init__(self, opts: SimpleNamespace, default_exchange: str) -> None:
        self.opts = opts
        self.default_exchange = default_exchange
        #: durability of topic exchanges and their queues (oslo's ``Connection.durable``)
        self.durable = bool(opts.amqp_durable_queues or opts.rabbit_quorum_queue)
        self.transient_durable = bool(opts.rabbit_transient_quorum_queue)
        self._consumer_args = ({"x-cancel-on-ha-failover": True}
                               if opts.enable_cancel_on_failover else None)
        queue_arguments(opts, 0, bool(opts.rabbit_quorum_queue))  # refuse contradictions early

    def topic_exchange(self, name: str | None) -> ExchangeSpec:
        return ExchangeSpec(name or self.default_exchange, "topic", self.durable,
                            bool(self.opts.amqp_auto_delete))

    def fanout_exchange(self, topic: str) -> ExchangeSpec:
        return ExchangeSpec(f"{topic}_fanout", "fanout", self.transient_durable, True)

    def topic_queue(self, exchange: ExchangeSpec, name: str, routing_keys: list[str]) -> QueueSpec:
        """A shared queue: RPC topic/server queues, notification queues."""
        return QueueSpec(name, self.durable, bool(self.opts.amqp_auto_delete),
                         queue_arguments(self.opts, 0, bool(self.opts.rabbit_quorum_queue)),
                         tuple((exchange, rk) for rk in routing_keys),
                         self._consumer_args)

    def fanout_queue(self, topic: str) -> QueueSpec:
        return QueueSpec(f"{topic}_fanout_{uuid.uuid4().hex}", self.transient_durable, False,
                         self._transient_args(),
                         ((self.fanout_exchange(topic), topic),),
                         self._consumer_args, delete_on_close=True)

    def reply_queue(self) -> QueueSpec:
        return QueueSpec(f"reply_{uuid.uuid4().hex}", self.transient_durable, False,
                         self._transient_args(), (), self._consumer_args, delete_on_close=True)

    def rpc_queues(self, exchange_name: str | None, topic: str, server: str) -> list[QueueSpec]:
        """The three queues an RPC server consumes."""
        exchange = self.topic_exchange(exchange_name)
        server_key = server_routing_key(topic, server)
        return [self.topic_queue(exchange, topic, [topic]),
                self.topic_queue(exchange, server_key, [server_key]),
                self.fanout_queue(topic)]

    def notification_queues(self, exchange_names_and_keys: list[tuple[str | None, str]],
                            pool: str | None) -> list[QueueSpec]:
        """One queue per routing key, or one queue named ``pool`` bound to all of them."""
        if pool:
            bindings = tuple((self.topic_exchange(ex), rk) for ex, rk in exchange_names_and_keys)
            base = self.topic_queue(self.topic_exchange(None), pool, [])
            return [QueueSpec(base.name, base.durable, base.auto_delete, base.arguments,
                              _unique(bindings), base.consumer_arguments)]
        by_key: dict[str, list[tuple[ExchangeSpec, str]]] = {}
        for ex, rk in exchange_names_and_keys:
            by_key.setdefault(rk, []).append((self.topic_exchange(ex), rk))
        out = []
        for rk, key_bindings in by_key.items():
            base = self.topic_queue(self.topic_exchange(None), rk, [])
            out.append(QueueSpec(rk, base.durable, base.auto_delete, base.arguments,
                                 _unique(tuple(key_bindings)), base.consumer_arguments))
        return out

    def _transient_args(self) -> dict[str, Any]:
        return queue_arguments(self.opts, int(self.opts.rabbit_transient_queues_ttl),
                               self.transient_durable)


def _unique(bindings: tuple[tuple[ExchangeSpec, str], ...]) -> tuple[tuple[ExchangeSpec, str], ...]:
    seen: list[tuple[ExchangeSpec, str]] = []
    for b in bindings:
        if b not in seen:
            seen.append(b)
    return tuple(seen)
