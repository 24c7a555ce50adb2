"""A stand-in for ``confluent_kafka.Producer`` that holds messages until a test decides.

Reports are queued and served by ``poll()`` / ``flush()`` as librdkafka does;
``purge()`` fails what is held with a purge error; a client made fatal refuses
``produce()`` with ``_FATAL``. Messages carry topic, value, key, headers and
their create time, like the real report messages.
"""
from __future__ import annotations

import time

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException


class FakeMessage:
    def __init__(self, topic, value, key, headers, timestamp, callback):
        self._topic, self._value, self._key, self._headers = topic, value, key, headers
        self._timestamp = timestamp or int(time.time() * 1000)
        self.callback = callback

    def topic(self):
        return self._topic

    def value(self):
        return self._value

    def key(self):
        return self._key

    def headers(self):
        return self._headers

    def timestamp(self):
        return confluent_kafka.TIMESTAMP_CREATE_TIME, self._timestamp


class FakeClient:
    """Holds produced messages; ``confirm(n)`` / ``fail(n)`` settle the oldest ones."""

    def __init__(self, config):
        self.config = config
        self.held: list[FakeMessage] = []
        self.reports: list[tuple[FakeMessage, KafkaError | None]] = []
        self.fatal = False
        self.closed = False
        #: queue.buffering.max.messages, as librdkafka enforces it (None: no bound)
        self.capacity = config.get("queue.buffering.max.messages")
        #: callbacks other than delivery reports (errors, log lines) waiting for a poll
        self.events = 0
        #: delivery callbacks running now: librdkafka counts their messages until they return
        self.in_callback = 0

    # -- the confluent-kafka calls the wrapper makes ------------------------------
    def produce(self, topic, value=None, key=None, headers=None, on_delivery=None, timestamp=0):
        if self.closed:
            raise RuntimeError("Producer has been closed")
        if self.fatal:
            raise KafkaException(KafkaError(KafkaError._FATAL, "Local: Fatal error"))
        if self.capacity is not None and len(self.held) + self.in_callback >= self.capacity:
            raise BufferError("Local: Queue full")
        self.held.append(FakeMessage(topic, value, key, headers, timestamp, on_delivery))

    def __len__(self):
        """librdkafka's out-queue length: messages held (a message whose delivery callback is
        running included), reports and other callbacks waiting."""
        return len(self.held) + len(self.reports) + self.events + self.in_callback

    def poll(self, timeout=None):
        if self.closed:
            raise RuntimeError("Producer has been closed")
        if not self.reports and not self.events:
            time.sleep(min(timeout or 0, 0.01))  # a blocking poll with nothing to serve
        events, self.events = self.events, 0
        return events + self.serve()

    def flush(self, timeout=None):
        if self.closed:
            raise RuntimeError("Producer has been closed")
        self.serve()
        return len(self)

    def purge(self, in_queue=True, in_flight=True, blocking=True):
        purged, self.held = self.held, []
        self.reports += [(m, KafkaError(KafkaError._PURGE_QUEUE, "Local: Purged in queue"))
                         for m in purged]

    def close(self):
        self.closed = True

    # -- what the test decides -----------------------------------------------------
    def serve(self):
        served = 0
        while True:
            try:
                message, err = self.reports.pop(0)  # the report thread may serve too
            except IndexError:
                return served
            served += 1
            if err is None and self.config.get("delivery.report.only.error"):
                continue
            self.in_callback += 1
            try:
                (message.callback or self.config["on_delivery"])(err, message)
            finally:
                self.in_callback -= 1

    def confirm(self, n):
        """The broker confirms the ``n`` oldest messages."""
        self.reports += [(m, None) for m in self.held[:n]]
        del self.held[:n]
        self.serve()

    def fail(self, n, code=KafkaError._MSG_TIMED_OUT, fatal=False):
        """The ``n`` oldest messages fail with ``code`` (reports served at once)."""
        self.reports += [(m, KafkaError(code, "failed", fatal=fatal)) for m in self.held[:n]]
        del self.held[:n]
        self.serve()

    def values(self):
        return [m.value() for m in self.held]


def install(monkeypatch, factory=FakeClient):
    """Make the producer module create ``factory`` clients; return the list of those made."""
    from notify_transport.drivers.kafka import producer

    made = []

    def make(config):
        made.append(factory(config))
        return made[-1]
    monkeypatch.setattr(producer.confluent_kafka, "Producer", make)
    return made


def wait_for(condition, timeout=10.0):
    """Poll ``condition`` until it holds or ``timeout`` passes; return its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def send(producer, topic, value, key=None, retry=None):
    """Queue ``value`` (bytes, already encoded) through ``producer``'s notification sender for
    ``topic``, keyed by ``key`` as a notification's publisher_id keys it."""
    producer.sender(topic, lambda message, ctxt: value)({}, {"publisher_id": key}, retry)
