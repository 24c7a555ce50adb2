"""Helpers of the Spark tests: a notification producer and the clock of the notifications.

Notifications are encoded with :mod:`notify_transport.drivers.envelope` and
produced with confluent-kafka directly, so these tests depend only on the
wire format, not on the Notifier.
"""
from __future__ import annotations

import contextlib
import datetime
import gc
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from notify_transport.drivers import envelope


def utc(seconds_ago: float = 0.0) -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - datetime.timedelta(
        seconds=seconds_ago)


def oslo_timestamp(when: datetime.datetime) -> str:
    """oslo's ``str(timeutils.utcnow())``."""
    return str(when)


class NotificationProducer:
    """Creates topics and produces oslo notifications (and poison records) to them."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                  # retries keep the order sent (a new topic's first batches may be retried)
                                  "enable.idempotence": True})

    @staticmethod
    def unique_base(prefix: str = "nt") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:8]}"

    def create_topics(self, partitions: dict[str, int]) -> None:
        futures = self.admin.create_topics(
            [NewTopic(t, num_partitions=n, replication_factor=1) for t, n in partitions.items()])
        for future in futures.values():
            future.result(30)

    def delete_topics(self, topics: list[str]) -> None:
        for future in self.admin.delete_topics(topics).values():
            with contextlib.suppress(Exception):
                future.result(30)

    def notification(self, event_type: str = "compute.instance.create.end",
                     publisher_id: str = "compute.host1", priority: str = "INFO",
                     payload: dict | None = None, timestamp: datetime.datetime | None = None,
                     message_id: str | None = None) -> dict:
        return {"message_id": message_id or str(uuid.uuid4()), "publisher_id": publisher_id,
                "event_type": event_type, "priority": priority, "payload": payload or {"n": 1},
                "timestamp": oslo_timestamp(timestamp or utc())}

    def send(self, topic: str, message: dict, version: float = 2.0, partition: int | None = None,
             context_style: str = envelope.CONTEXT_DICT, ctxt: dict | None = None,
             broker_millis: int | None = None) -> None:
        raw = envelope.encode(message, ctxt or {"request_id": "req-" + message["message_id"][:8]},
                              version, context_style)
        self.send_raw(topic, raw, partition, broker_millis)

    def send_raw(self, topic: str, raw: bytes | None, partition: int | None = None,
                 broker_millis: int | None = None) -> None:
        """Produce ``raw``; ``broker_millis`` sets the record's (create) timestamp."""
        kwargs: dict = {} if partition is None else {"partition": partition}
        if broker_millis is not None:
            kwargs["timestamp"] = broker_millis
        self.producer.produce(topic, raw, **kwargs)
        self.producer.poll(0)

    def close(self) -> None:
        """Flush and drop the clients, so none outlives the broker and logs reconnect errors."""
        self.flush()
        del self.producer, self.admin
        gc.collect()

    def flush(self) -> None:
        remaining = self.producer.flush(30)
        assert remaining == 0, f"{remaining} records not delivered"
