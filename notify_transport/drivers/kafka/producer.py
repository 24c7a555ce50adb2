"""The notification producer: one confluent-kafka Producer per driver, shared by all threads.

A failed delivery is reported, counted and logged with its topic and cause
(never the payload), so nothing is dropped silently; successes are not
reported one by one (librdkafka's ``delivery.report.only.error``): a
notification is delivered once the client no longer holds it and it did not
fail. ``retry`` follows oslo.messaging's meaning:

* ``None`` or ``-1``: librdkafka retries on its own until ``delivery_timeout``;
* ``0``: a failed delivery is reported, never re-sent;
* ``N > 0``: a failed delivery is produced again, up to ``N`` times, each
  attempt with a fresh ``delivery_timeout``.
"""
from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException

from notify_transport.drivers.kafka.client_properties import RDKAFKA_LOG, redact
from notify_transport.drivers.kafka.delivery.counters import Counter
from notify_transport.drivers.kafka.reporting import RateLimitedLog
from notify_transport.exceptions import MessageDeliveryFailure

LOG = logging.getLogger(__name__)
#: librdkafka's own log lines, routed into std logging.

#: Errors a re-send cannot fix (or that mean the application dropped the message).
_PERMANENT = frozenset(getattr(KafkaError, name) for name in (
    "MSG_SIZE_TOO_LARGE", "_MSG_SIZE_TOO_LARGE", "INVALID_MSG", "INVALID_RECORD",
    "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "_INVALID_ARG",
    "TOPIC_EXCEPTION", "UNSUPPORTED_VERSION", "_PURGE_QUEUE", "_PURGE_INFLIGHT",
    "_FATAL", "_FENCED") if hasattr(KafkaError, name))

#: How long one wait for room in a full queue lasts before trying again.
_QUEUE_POLL_INTERVAL = 0.05
#: How long the delivery-report thread waits for events in one poll.
_REPORT_POLL_INTERVAL = 0.1


def fatal_error(exc: KafkaException) -> KafkaError | None:
    """The KafkaError of ``exc`` when it means the client is in a fatal state, else None."""
    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError) and (err.fatal() or err.code() == KafkaError._FATAL):
        return err
    return None


class _Resend:
    """Per-message delivery callback used only when ``retry > 0``."""

    __slots__ = ("owner", "topic", "value", "key", "left")

    def __init__(self, owner: "NotificationProducer", topic: str, value: bytes,
                 key: Any, left: int) -> None:
        self.owner = owner
        self.topic = topic
        self.value = value
        self.key = key
        self.left = left

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        owner = self.owner
        if err is None:  # only with delivery.report.only.error switched off
            return
        if (self.left > 0 and not owner.closing and not err.fatal()
                and err.code() not in _PERMANENT):
            self.left -= 1
            LOG.warning("Delivery to Kafka topic %s failed (%s); sending again (%d retries left)",
                        self.topic, err.str(), self.left)
            try:
                owner.producer().produce(self.topic, self.value, self.key, on_delivery=self)
                return
            except (BufferError, KafkaException) as exc:
                LOG.error("Could not send a notification to Kafka topic %s again: %s", self.topic, exc)
        owner.failed.incr()
        owner.report_failure(self.topic, err)


class NotificationProducer:
    """Thread-safe wrapper around a lazily created ``confluent_kafka.Producer``."""

    def __init__(self, config: dict[str, Any], queue_timeout: float, flush_timeout: float,
                 url_for_logs: str = "") -> None:
        self._config = dict(config)
        self._queue_timeout = queue_timeout
        self._flush_timeout = flush_timeout
        self._url_for_logs = url_for_logs
        self._producer: confluent_kafka.Producer | None = None
        # re-entrant: a delivery report served while draining may ask for the producer
        self._lock = threading.RLock()
        self._fatal: KafkaError | None = None
        #: Set by close(): failed deliveries are not re-sent any more.
        self.closing = False
        self.sent = Counter()
        self.failed = Counter()
        self.failures = RateLimitedLog(LOG)
        self._reporter: threading.Thread | None = None
        self._reporter_stop = threading.Event()

    def __repr__(self) -> str:
        return f"<NotificationProducer {self._url_for_logs}>"

    # -- lifecycle ------------------------------------------------------------
    def producer(self) -> confluent_kafka.Producer:
        """The client, created on first use (a driver that never sends opens no connection)."""
        producer = self._producer
        if producer is not None and self._fatal is None:
            return producer
        with self._lock:
            if self._fatal is not None and self._producer is not None:
                self._replace_after_fatal()
            if self._producer is None:
                self._fatal = None  # a late report of the replaced client's fatal error
                config = dict(self._config)
                config["on_delivery"] = self._on_delivery
                # bound to this client: a late fatal report of a replaced one changes nothing
                client: list[confluent_kafka.Producer] = []
                config["error_cb"] = functools.partial(self._on_error, client)
                config["logger"] = RDKAFKA_LOG
                LOG.debug("Creating Kafka producer for %s: %s", self._url_for_logs, redact(self._config))
                try:
                    self._producer = confluent_kafka.Producer(config)
                    client.append(self._producer)
                except (KafkaException, ValueError, TypeError) as exc:
                    raise MessageDeliveryFailure(
                        f"Cannot create a Kafka producer for {self._url_for_logs}: {exc}") from exc
                self._start_reporter(self._producer)
            return self._producer

    def _start_reporter(self, producer: confluent_kafka.Producer) -> None:
        """Serve delivery reports in the background.

        A failure is then logged and counted when it happens, even if the
        service sends nothing more for a while, and ``send()`` does not pay
        for a poll on every message.
        """
        self._stop_reporter()
        stop = self._reporter_stop = threading.Event()

        def serve() -> None:
            while not stop.is_set():
                try:
                    producer.poll(_REPORT_POLL_INTERVAL)
                except RuntimeError:  # closed under us
                    return
                except KafkaException as exc:
                    err = fatal_error(exc)
                    if err is None:
                        LOG.exception("Delivery report handling failed")
                        continue
                    # e.g. OUT_OF_ORDER_SEQUENCE_NUMBER after a broker lost acknowledged
                    # writes: this client is done for; its messages fail, the next one starts
                    self._replace_now(producer, err)
                    return
                except Exception:  # a callback raised: keep serving the others
                    LOG.exception("Delivery report handling failed")

        self._reporter = threading.Thread(target=serve, name="notify-kafka-delivery-reports", daemon=True)
        self._reporter.start()

    def _stop_reporter(self) -> None:
        thread, self._reporter = self._reporter, None
        self._reporter_stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _replace_after_fatal(self) -> None:
        """Drop the client that hit a fatal error (its messages are failed and counted);
        the next :meth:`producer` call creates a fresh one (a new idempotent session)."""
        old, err = self._producer, self._fatal
        self._producer = None
        self._stop_reporter()
        LOG.error("Kafka producer for %s hit a fatal error (%s); replacing it", self._url_for_logs,
                  err.str() if err else "?")
        if old is not None:
            self._drain(old, 0)
        self._fatal = None

    def _replace_now(self, producer: confluent_kafka.Producer, err: KafkaError) -> None:
        """``producer`` raised fatal error ``err``: replace it unless that was done already."""
        with self._lock:
            if self._producer is not producer:
                return
            self._fatal = err
            self._replace_after_fatal()

    def flush(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` seconds (None: until each message is delivered or
        timed out) for delivery reports; return how many notifications are still pending."""
        producer = self._producer
        if producer is None:
            return 0
        producer.flush(-1 if timeout is None else max(0.0, timeout))
        return self.pending

    def close(self) -> None:
        """Flush for ``flush_timeout``; report what could not be delivered, then close."""
        self.closing = True
        with self._lock:
            producer, self._producer = self._producer, None
            self._stop_reporter()
        if producer is not None:
            self._drain(producer, self._flush_timeout)
        self.failures.summarize()
        self.closing = False

    def _drain(self, producer: confluent_kafka.Producer, timeout: float) -> None:
        remaining = producer.flush(timeout)
        if remaining:
            LOG.error("%d notification(s) to %s were not confirmed by the broker within %.1fs "
                      "and are lost", remaining, self._url_for_logs, timeout)
            # purged messages get a delivery report with a purge error: counted as failed
            producer.purge(in_queue=True, in_flight=True, blocking=False)
            producer.flush(0)
            for _ in range(len(producer)):  # reports not served: failed all the same
                self.failed.incr()
        try:
            producer.close()
        except (KafkaException, RuntimeError):  # already closed / fatal state
            pass

    # -- sending --------------------------------------------------------------
    def send(self, topic: str, value: bytes, key: Any = None, retry: int | None = None) -> None:
        """Queue one message; raise MessageDeliveryFailure when it cannot be queued.

        A client found in a fatal state is replaced and the message queued on
        the new one, so sending resumes as soon as the broker answers again.
        """
        producer = self._producer
        if producer is None or self._fatal is not None:
            producer = self.producer()
        self.sent.incr()
        try:
            self._produce(producer, topic, value, key, retry)
        except KafkaException as exc:
            err = fatal_error(exc)
            if err is None:
                self.failed.incr()
                raise MessageDeliveryFailure(
                    f"Kafka refused a notification for topic {topic}: {exc.args[0].str()}") from None
            self._replace_now(producer, err)
            try:
                self._produce(self.producer(), topic, value, key, retry)
            except KafkaException as again:
                self.failed.incr()
                raise MessageDeliveryFailure(
                    f"Kafka refused a notification for topic {topic}: {again.args[0].str()}") from None

    def _produce(self, producer: confluent_kafka.Producer, topic: str, value: bytes, key: Any,
                 retry: int | None) -> None:
        """One produce; KafkaException is the caller's (a fatal state is recovered from there)."""
        try:
            if retry is None or retry <= 0:
                producer.produce(topic, value, key)
            else:
                producer.produce(topic, value, key, on_delivery=_Resend(self, topic, value, key, retry))
        except BufferError:
            self._produce_when_room(producer, topic, value, key, retry)
        except RuntimeError:  # closed by a replacement after a fatal error: try the new client
            raise KafkaException(KafkaError(KafkaError._FATAL, "producer replaced")) from None
        except (TypeError, ValueError) as exc:
            self.failed.incr()
            raise MessageDeliveryFailure(f"Invalid notification for Kafka topic {topic}: {exc}") from None

    def _produce_when_room(self, producer: confluent_kafka.Producer, topic: str, value: bytes,
                           key: Any, retry: int | None) -> None:
        """The local queue is full: serve delivery reports until there is room, for a bounded time."""
        deadline = time.monotonic() + self._queue_timeout
        while True:
            try:
                producer.poll(max(0.0, min(_QUEUE_POLL_INTERVAL, deadline - time.monotonic())))
                if retry is None or retry <= 0:
                    producer.produce(topic, value, key)
                else:
                    producer.produce(topic, value, key,
                                     on_delivery=_Resend(self, topic, value, key, retry))
                return
            except BufferError:
                if time.monotonic() >= deadline:
                    self.failed.incr()
                    raise MessageDeliveryFailure(
                        f"Kafka producer queue for {self._url_for_logs} stayed full for "
                        f"{self._queue_timeout}s ({len(producer)} messages waiting for the "
                        f"broker); notification to topic {topic} not sent") from None
            except RuntimeError:  # replaced after a fatal error meanwhile: try the new client
                raise KafkaException(KafkaError(KafkaError._FATAL, "producer replaced")) from None

    # -- callbacks (run in whichever thread polls) -----------------------------
    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        # only failures are reported (delivery.report.only.error): a report per
        # confirmed message would cost a Python call and the GIL each
        if err is not None:
            self.failed.incr()
            self.report_failure(msg.topic(), err)

    def report_failure(self, topic: str, err: KafkaError) -> None:
        """Log a failed delivery: topic and cause, never the payload."""
        self.failures.log(logging.ERROR, (topic, err.code()),
                          "Notification delivery to Kafka topic %s failed: %s", topic, err.str())

    def _on_error(self, client: list[confluent_kafka.Producer], err: KafkaError) -> None:
        if err.fatal():
            if client and client[0] is not self._producer:
                return  # already replaced
            # the next send replaces the client
            self._fatal = err
            LOG.error("Kafka producer for %s: fatal error %s", self._url_for_logs, err.str())
        elif err.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT,
                            KafkaError._RESOLVE):
            self.failures.log(logging.WARNING, err.code(), "Kafka producer for %s: %s",
                              self._url_for_logs, err.str())
        else:
            LOG.warning("Kafka producer for %s: %s", self._url_for_logs, err.str())

    # -- stats ----------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Notifications neither confirmed nor reported failed: what the client still holds."""
        producer = self._producer
        return len(producer) if producer is not None else 0

    def stats(self) -> dict[str, int]:
        """``delivered`` is what was sent and is neither failed nor still pending."""
        failed, pending, sent = self.failed.value, self.pending, self.sent.value
        return {"sent": sent, "delivered": max(0, sent - failed - pending), "failed": failed,
                "pending": pending}
