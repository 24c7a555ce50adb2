"""The three ways a benchmark sends and receives notifications over Kafka.

``ours``: notify-transport's public API. ``oslo``: oslo.messaging 18.3.1 driven
through the global ``cfg.CONF`` with its defaults, pointed at the broker by its
transport URL only. ``raw``: confluent-kafka with pre-encoded envelopes, the
limit either library can reach.

Each factory returns small objects with the same methods so that a measure is
written once for the three.
"""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable

from bench.payload import EVENT_TYPE, PUBLISHER_ID, context_dict, encode_envelope

#: called with (payload dict, receive time from time.time())
OnMessage = Callable[[dict, float], None]


#: Environment variable with a URL query for notify-transport's Kafka URL only
#: (``--ours-kafka-query``), to try driver options; empty in a standard run.
OURS_QUERY_ENV = "BENCH_OURS_KAFKA_QUERY"


def kafka_url(bootstrap: str, ours: bool = False) -> str:
    query = os.environ.get(OURS_QUERY_ENV, "") if ours else ""
    return f"kafka://{bootstrap}" + (f"?{query}" if query else "")


def _oslo_conf() -> Any:
    from oslo_config import cfg

    if not getattr(cfg.CONF, "_bench_parsed", False):
        cfg.CONF(args=[], project="bench", default_config_files=[], default_config_dirs=[])
        cfg.CONF._bench_parsed = True
    return cfg.CONF


# -- notifiers -------------------------------------------------------------------

class Sender:
    """``send(payload)`` one notification; ``flush()`` until all are on the broker."""

    def send(self, payload: dict) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def stats(self) -> dict:
        return {}


class OursSender(Sender):
    def __init__(self, url: str, topic_base: str, ctxt: Any) -> None:
        from oslo_config import cfg

        import notify_transport as nt

        conf = cfg.ConfigOpts()
        conf([])
        self.transport = nt.get_notification_transport(conf, url)
        self.notifier = nt.Notifier(self.transport, PUBLISHER_ID, driver="messagingv2",
                                    topics=[topic_base])
        self.ctxt = ctxt

    def send(self, payload: dict) -> None:
        self.notifier.info(self.ctxt, EVENT_TYPE, payload)

    def flush(self) -> None:
        pending = self.transport.flush(60)
        if pending:
            raise RuntimeError(f"{pending} notifications still unconfirmed after 60 s")

    def stats(self) -> dict:
        return dict(self.transport.delivery_stats())

    def close(self) -> None:
        self.transport.cleanup()


class OsloSender(Sender):
    def __init__(self, url: str, topic_base: str, ctxt: Any) -> None:
        import oslo_messaging

        conf = _oslo_conf()
        self.transport = oslo_messaging.get_notification_transport(conf, url)
        self.notifier = oslo_messaging.Notifier(self.transport, PUBLISHER_ID, driver="messagingv2",
                                                topics=[topic_base])
        self.ctxt = ctxt

    def send(self, payload: dict) -> None:
        self.notifier.info(self.ctxt, EVENT_TYPE, payload)

    def flush(self) -> None:
        # oslo.messaging has no flush API; its cleanup() flushes this same producer
        # (and then drops it), so flushing it directly is what cleanup would do.
        producer = self.transport._driver.pconn.producer
        if producer is not None:
            left = producer.flush(60)
            if left:
                raise RuntimeError(f"{left} oslo.messaging messages unflushed after 60 s")

    def close(self) -> None:
        self.transport.cleanup()


class RawSender(Sender):
    """confluent-kafka producing oslo envelope bytes; acks=all and idempotence like ours."""

    def __init__(self, bootstrap: str, topic_base: str, ctxt: Any, pre_encoded: bool = True,
                 linger_ms: float | None = None) -> None:
        from confluent_kafka import Producer

        conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all",
                                "enable.idempotence": True}
        if linger_ms is not None:
            conf["linger.ms"] = linger_ms
        self.producer = Producer(conf)
        self.topic = f"{topic_base}.info"
        self.ctxt = context_dict(ctxt)
        self._fixed: bytes | None = None
        self.pre_encoded = pre_encoded
        self.failed = 0

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.failed += 1

    def send(self, payload: dict) -> None:
        if self.pre_encoded:
            if self._fixed is None:
                self._fixed = encode_envelope(payload, self.ctxt)
            value = self._fixed
        else:
            value = encode_envelope(payload, self.ctxt)
        while True:
            try:
                self.producer.produce(self.topic, value, on_delivery=self._on_delivery)
                return
            except BufferError:
                self.producer.poll(0.005)

    def flush(self) -> None:
        left = self.producer.flush(60)
        if left or self.failed:
            raise RuntimeError(f"raw producer: {left} unflushed, {self.failed} failed")

    def close(self) -> None:
        self.producer.flush(10)


def make_sender(impl: str, bootstrap: str, topic_base: str, ctxt: Any, **raw_options: Any) -> Sender:
    if impl == "ours":
        return OursSender(kafka_url(bootstrap, ours=True), topic_base, ctxt)
    if impl == "oslo":
        return OsloSender(kafka_url(bootstrap), topic_base, ctxt)
    if impl == "raw":
        return RawSender(bootstrap, topic_base, ctxt, **raw_options)
    raise ValueError(f"unknown implementation {impl!r}")


# -- listeners -------------------------------------------------------------------

class _Endpoint:
    """An ``info`` endpoint handing the payload and its receive time to a callback."""

    def __init__(self, on_message: OnMessage) -> None:
        self._on_message = on_message

    def info(self, ctxt: Any, publisher_id: str, event_type: str, payload: dict,
             metadata: dict) -> None:
        self._on_message(payload, time.time())


class Receiver:
    """A listener in one pool; ``start()`` returns once it is subscribed."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class OursReceiver(Receiver):
    def __init__(self, url: str, topic_base: str, pool: str, on_message: OnMessage) -> None:
        from oslo_config import cfg

        import notify_transport as nt

        conf = cfg.ConfigOpts()
        conf([])
        self.transport = nt.get_notification_transport(conf, url)
        self.server = nt.get_notification_listener(self.transport, [nt.Target(topic=topic_base)],
                                                   [_Endpoint(on_message)], pool=pool)

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()
        self.server.wait(30)
        self.transport.cleanup()


class OsloReceiver(Receiver):
    def __init__(self, url: str, topic_base: str, pool: str, on_message: OnMessage) -> None:
        import oslo_messaging

        conf = _oslo_conf()
        self.transport = oslo_messaging.get_notification_transport(conf, url)
        self.server = oslo_messaging.get_notification_listener(
            self.transport, [oslo_messaging.Target(topic=topic_base)], [_Endpoint(on_message)],
            executor="threading", pool=pool)

    def start(self) -> None:
        self.server.start()

    def stop(self) -> None:
        self.server.stop()
        self.server.wait()
        self.transport.cleanup()


class RawReceiver(Receiver):
    """A confluent-kafka consumer in a thread.

    ``decode=False`` (dispatch rate): count raw records from ``consume()``,
    the limit. ``decode="batch"``: the same, parsing every record's envelope
    and message with orjson first, the floor for anything that hands payloads
    to code. ``decode=True`` (latency): ``poll()`` one record at a time and
    parse the envelope to read the payload's send time.
    """

    def __init__(self, bootstrap: str, topic_base: str, pool: str, on_message: OnMessage,
                 decode: bool | str = True,
                 on_count: Callable[[int, float], None] | None = None) -> None:
        from confluent_kafka import Consumer

        config = {"bootstrap.servers": bootstrap, "group.id": pool,
                  "auto.offset.reset": "latest", "enable.partition.eof": False}
        if decode == "batch":
            # tuned as ours: a bounded read-ahead, so that while it decodes, its fetcher
            # does not spin on a broker that answers empty fetches at once (noida-db)
            config.update({"queued.min.messages": 5000, "fetch.queue.backoff.ms": 10})
        self.consumer = Consumer(config)
        self.topic = f"{topic_base}.info"
        self.on_message = on_message
        self.on_count = on_count
        self.decode = decode
        self._stop = threading.Event()
        self._assigned = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_assign(self, consumer: Any, partitions: Any) -> None:
        self._assigned.set()

    def start(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._on_assign)
        self._thread.start()
        if not self._assigned.wait(60):
            raise TimeoutError("raw consumer got no assignment in 60 s")

    def _run(self) -> None:
        consumer = self.consumer
        if not self.decode:
            on_count = self.on_count
            while not self._stop.is_set():
                records = consumer.consume(500, 0.2)
                if records:
                    on_count(len(records), time.time())
            return
        if self.decode == "batch":
            import orjson

            loads, on_count = orjson.loads, self.on_count
            while not self._stop.is_set():
                records = consumer.consume(500, 0.2)
                if records:
                    for record in records:
                        message = loads(loads(record.value())["oslo.message"])
                        message.pop("_context", None)
                    on_count(len(records), time.time())
            return
        while not self._stop.is_set():
            record = consumer.poll(0.1)
            if record is None or record.error():
                continue
            now = time.time()
            body = json.loads(record.value())
            inner = json.loads(body["oslo.message"])
            self.on_message(inner["payload"], now)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def make_receiver(impl: str, bootstrap: str, topic_base: str, pool: str, on_message: OnMessage,
                  **raw_options: Any) -> Receiver:
    if impl == "ours":
        return OursReceiver(kafka_url(bootstrap, ours=True), topic_base, pool, on_message)
    if impl == "oslo":
        return OsloReceiver(kafka_url(bootstrap), topic_base, pool, on_message)
    if impl == "raw":
        return RawReceiver(bootstrap, topic_base, pool, on_message, **raw_options)
    raise ValueError(f"unknown implementation {impl!r}")
