"""Producing to Kafka: the one confluent-kafka Producer wrapper, and the notifier's accounting.

:class:`KafkaProducer` replaces its client after a fatal error (e.g.
OUT_OF_ORDER_SEQUENCE_NUMBER after a broker lost acknowledged writes): the
condemned client's messages come back as failed reports and are produced again
on the new client within their ``message.timeout.ms``, with no copy kept on the
hot path. The swap alone is under the lock; purging, re-producing and closing
happen outside it, each bounded. :class:`NotificationProducer` counts the
notifier's sends and failures on top (``retry`` as in oslo.messaging; see
doc/source/delivery.rst). The retry/dead-letter copies use :class:`KafkaProducer` too.
"""
from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, NoReturn

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException

from notify_transport.drivers import threads
from notify_transport.drivers.base import NotificationSender
from notify_transport.drivers.kafka.client_properties import RDKAFKA_LOG_BESIDE_ERROR_CB
from notify_transport.drivers.kafka.outage import STATS_INTERVAL_MS, ClientWarnings, parse_stats
from notify_transport.drivers.counter import Counter
from notify_transport.drivers.reporting import RateLimitedLog
from notify_transport.exceptions import MessageDeliveryFailure
from notify_transport.secrets import mask_properties

if TYPE_CHECKING:
    import threading

LOG = logging.getLogger(__name__)

#: ``report(err, msg)``: a delivery report (err is None for a success).
Report = Callable[[KafkaError | None, Any], None]

#: Errors a re-send cannot fix (or that mean the application dropped the message).
_PERMANENT = frozenset(getattr(KafkaError, name) for name in (
    "MSG_SIZE_TOO_LARGE", "_MSG_SIZE_TOO_LARGE", "INVALID_MSG", "INVALID_RECORD",
    "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "_INVALID_ARG",
    "TOPIC_EXCEPTION", "UNSUPPORTED_VERSION", "_PURGE_QUEUE", "_PURGE_INFLIGHT",
    "_FATAL", "_FENCED") if hasattr(KafkaError, name))

#: Purge reports: the client was condemned (or is closing), not the message.
_PURGED = frozenset((KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT))
#: Report errors that condemn the client's idempotent session, not the message: librdkafka
#: fails what the client held with them when it raises the fatal error (without the fatal
#: flag on each report).
_SESSION_LOST = frozenset(getattr(KafkaError, name) for name in (
    "_FATAL", "OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID", "INVALID_PRODUCER_EPOCH",
    "_INCONSISTENT", "_FENCED") if hasattr(KafkaError, name))

#: What the client raises for a message it would not queue (each counted as failed).
_REFUSED = (BufferError, KafkaException, TypeError, ValueError, MessageDeliveryFailure)

#: How long one wait for room in a full queue lasts before trying again.
_QUEUE_POLL_INTERVAL = 0.05
#: How long the delivery-report thread waits for events in one poll.
_REPORT_POLL_INTERVAL = 0.1
#: Longest wait for a condemned client's report thread to end.
_JOIN_TIMEOUT = 5.0
#: Longest wait for a condemned client to hand back (through reports) what it held.
_RETIRE_TIMEOUT = 5.0
#: librdkafka's default message.timeout.ms.
_DEFAULT_MESSAGE_TIMEOUT_MS = 300_000
#: librdkafka's default queue.buffering.max.messages: the most messages one client holds.
_DEFAULT_QUEUE_MESSAGES = 100_000
#: Epoch bumps within one statistics interval that mean the broker keeps forgetting the
#: producer id (UNKNOWN_PRODUCER_ID after every bump, e.g. a broker that restarted empty):
#: only a new client (a new producer id) gets out of that loop.
_EPOCH_BUMP_STORM = 10


def fatal_error(exc: KafkaException) -> KafkaError | None:
    """The KafkaError of ``exc`` when it means the client is in a fatal state, else None."""
    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError) and (err.fatal() or err.code() == KafkaError._FATAL):
        return err
    return None


def _serve_reports(client: confluent_kafka.Producer, timeout: float) -> None:
    """Serve delivery reports for up to ``timeout`` seconds, returning once the client holds nothing.

    poll(), not flush(): a fatal error raised during flush() makes the next delivery callbacks
    fail (SystemError) and lose their messages; poll() returns with the exception.
    """
    deadline = time.monotonic() + max(0.0, timeout)
    while True:
        client.poll(max(0.0, min(_QUEUE_POLL_INTERVAL, deadline - time.monotonic())))
        if not len(client) or time.monotonic() >= deadline:
            return


#: How many times :meth:`_Client.messages` counts again when callbacks keep arriving
#: (a broker that is down queues an error per reconnect, 100 ms or more apart).
_COUNT_ATTEMPTS = 5


def _queue_messages(config: dict[str, Any]) -> int:
    value = config.get("queue.buffering.max.messages")
    return int(value) if value is not None else _DEFAULT_QUEUE_MESSAGES


def _message_timeout_ms(config: dict[str, Any]) -> int:
    value = config.get("message.timeout.ms", config.get("delivery.timeout.ms"))
    return int(value) if value is not None else _DEFAULT_MESSAGE_TIMEOUT_MS


class _Client:
    """One confluent-kafka client and the thread serving its reports (if any)."""

    __slots__ = ("client", "capacity", "stop", "thread", "draining", "epochs", "queued", "settled",
                 "reports_begun", "reports_done", "sends_begun", "sends_done")

    def __init__(self, capacity: int = _DEFAULT_QUEUE_MESSAGES) -> None:
        self.client: confluent_kafka.Producer | None = None
        #: queue.buffering.max.messages: librdkafka refuses a message past it, so no count is higher
        self.capacity = capacity
        #: messages handed to the client (counted before the call) and messages
        #: reported back or refused: their difference bounds what the client holds
        self.queued = Counter()
        self.settled = Counter()
        #: delivery callbacks entered and left: one still running on the report thread is a
        #: message whose outcome is not yet counted or logged, so it is still held
        self.reports_begun = Counter()
        self.reports_done = Counter()
        #: produce() calls under way (waiting for room in a full queue included): counted in
        #: ``queued``, but not held until the call returns
        self.sends_begun = Counter()
        self.sends_done = Counter()
        self.stop = threads.Event()
        self.thread: threading.Thread | None = None
        #: a thread took charge of retiring it
        self.draining = False
        #: the idempotent producer's (id, epoch) at the last statistics report
        self.epochs: tuple[int, int] | None = None

    def held(self) -> int:
        """What the client holds: messages, and callbacks waiting for a poll.

        The smallest of librdkafka's out-queue length (which also counts queued error events
        and reports), our own count (an upper bound with failure-only reports) and the queue
        bound: neither an error event nor a refused send is taken for a message, and a message
        whose callback runs is counted once.
        """
        try:
            length = len(self.client) if self.client is not None else 0
        except RuntimeError:  # closed
            return 0
        return min(length, self.ours(), self.capacity)

    def ours(self) -> int:
        """Messages handed over and not yet settled, less the produce() calls under way (a send
        waiting for room in a full queue is not held; one that just succeeded is counted a
        moment late, never twice), plus the callbacks running (librdkafka still counts their
        messages)."""
        # read in this order, a send counted in ``unsettled`` is counted under way too until done
        sends_done = self.sends_done.value
        unsettled = self.unsettled()
        under_way = self.sends_begun.value - sends_done
        return max(0, unsettled - under_way) + self.reporting()

    def reporting(self) -> int:
        """Delivery callbacks running now (done read first, so never below zero)."""
        done = self.reports_done.value
        return self.reports_begun.value - done

    def unsettled(self) -> int:
        """Messages handed to the client and neither reported back nor refused (an upper
        bound: confirmations are not reported when only errors are)."""
        return max(0, self.queued.value - self.settled.value)

    def epoch_storm(self, stats: dict[str, Any]) -> KafkaError | None:
        """A fatal error when the idempotent producer's epoch (librdkafka's documented ``eos``
        statistics) went up :data:`_EPOCH_BUMP_STORM` times or more since the last report.

        A broker answering UNKNOWN_PRODUCER_ID to every bumped epoch (one that restarted
        without its producer state) makes librdkafka bump again and again until the
        messages time out; a new client gets a new producer id.
        """
        try:
            eos = stats.get("eos", {})
            current = (int(eos["producer_id"]), int(eos["producer_epoch"]))
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        last, self.epochs = self.epochs, current
        if last is None or last[0] != current[0] or current[1] - last[1] < _EPOCH_BUMP_STORM:
            return None
        return KafkaError(KafkaError._FATAL, f"the idempotent producer bumped its epoch {current[1] - last[1]} "
                          "times in a row: the broker does not keep its producer id", fatal=True)

    def messages(self) -> int:
        """The messages the client holds: the callbacks waiting are served, then counted out.

        Only for a thread that may serve callbacks (the one that flushes or closes). The count
        is taken between two polls and kept only when the second one found nothing to serve:
        an error queued before the count is then served after it, and the count taken again.
        """
        client = self.client
        if client is None:
            return 0
        try:
            for _ in range(_COUNT_ATTEMPTS):
                while client.poll(0):
                    pass
                length = len(client)
                if not client.poll(0):
                    break
            return min(length, self.ours(), self.capacity)
        except RuntimeError:  # closed
            return 0


class KafkaProducer:
    """Thread-safe wrapper around a lazily created ``confluent_kafka.Producer``.

    ``on_report(err, msg)`` receives the reports of messages produced without
    a callback of their own; ``on_lost(n)`` is told of messages a condemned
    client still held and never reported (they are not delivered).
    ``background``: a thread serves delivery reports, and calls ``on_idle()`` (if given)
    after each of its polls; else the owner calls :meth:`poll`. Reports of a condemned
    client are never seen by the owner: those messages are produced again, unless the
    transport is closing or their message timeout passed (reported with ``_MSG_TIMED_OUT``).
    """

    def __init__(self, config: dict[str, Any], name: str, on_report: Report,
                 on_lost: Callable[[int], None], queue_timeout: float,
                 background: bool = True, unit: str = "message",
                 on_idle: Callable[[], None] | None = None) -> None:
        self._config = dict(config)
        #: what a message is called in log lines ("notification", "copy")
        self.unit = unit
        self.name = name
        self._on_report = on_report
        self._on_lost = on_lost
        self._queue_timeout = queue_timeout
        self._background = background
        self._on_idle = on_idle
        self._timeout_ms = _message_timeout_ms(self._config)
        # held only to swap clients, never to wait; re-entrant because a delivery or error
        # callback may run (and swap) while the lock is held, e.g. when a client is freed
        self._lock = threads.RLock()
        self._current: _Client | None = None
        #: condemned clients not yet closed (what they hold is still pending)
        self._old: list[_Client] = []
        #: set by close(): purged messages are failed, not sent again
        self.closing = False
        #: the client's warnings, backed off per cause, and the end of an outage
        self._warnings = ClientWarnings(f"Kafka producer for {name}", LOG)

    def __repr__(self) -> str:
        return f"<KafkaProducer {self.name}>"

    def _handle(self) -> _Client:
        """The current client, created on first use (a driver that never sends opens no connection)."""
        handle = self._current
        if handle is not None:
            return handle
        with self._lock:
            if self._current is None:
                self._current = self._create()
            return self._current

    def _create(self) -> _Client:
        handle = _Client(_queue_messages(self._config))
        config = dict(self._config)
        config["on_delivery"] = functools.partial(self._report, handle, self._on_report)
        config["error_cb"] = functools.partial(self._on_error, handle)
        config["logger"] = RDKAFKA_LOG_BESIDE_ERROR_CB
        if "statistics.interval.ms" not in config:
            config["statistics.interval.ms"] = STATS_INTERVAL_MS
            # the idempotent producer's epoch is read at every report; otherwise the statistics
            # are parsed only while an outage lasts
            idempotent = str(config.get("enable.idempotence", "")).lower() in ("true", "1")
            config["stats_cb"] = (functools.partial(self._on_stats, handle) if idempotent
                                  else self._warnings.outage.on_stats_json)
        LOG.debug("Creating Kafka producer for %s: %s", self.name, mask_properties(self._config))
        try:
            handle.client = confluent_kafka.Producer(config)
        except (KafkaException, ValueError, TypeError) as exc:
            raise MessageDeliveryFailure(
                f"Cannot create a Kafka producer for {self.name}: {exc}") from exc
        if self._background:
            # a failure is logged and counted when it happens, even if the service sends
            # nothing more for a while, and send() does not pay for a poll per message
            handle.thread = threads.Thread(target=self._serve, args=(handle,),
                                           name="notify-kafka-delivery-reports", daemon=True)
            handle.thread.start()
        return handle

    def _serve(self, handle: _Client) -> None:
        client = handle.client
        assert client is not None
        while not handle.stop.is_set():
            try:
                client.poll(_REPORT_POLL_INTERVAL)
                self._warnings.summarize_due()
                if self._on_idle is not None:
                    self._on_idle()
            except RuntimeError:  # closed under us
                break
            except KafkaException as exc:
                err = fatal_error(exc)
                if err is None:
                    LOG.exception("Delivery report handling failed")
                    continue
                self._condemn(handle, err)
            except Exception:  # a callback raised: keep serving the others
                LOG.exception("Delivery report handling failed")
        self._retire_condemned()

    def _condemn(self, handle: _Client, err: KafkaError) -> bool:
        """``handle`` hit fatal error ``err``: swap it out (True) unless that was done already.

        Only the swap happens here, under the lock; :meth:`_retire_condemned`
        does the rest, outside it.
        """
        with self._lock:
            if self._current is not handle:
                return False
            self._current = None
            handle.draining = False
            self._old.append(handle)
            handle.stop.set()
        LOG.error("Kafka producer for %s hit a fatal error (%s); replacing it and sending what "
                  "it held again", self.name, err.str())
        return True

    def _retire_condemned(self) -> None:
        """Retire each condemned client no other thread has taken charge of."""
        while self._old:
            with self._lock:
                handle = next((h for h in self._old if not h.draining), None)
                if handle is None:
                    return
                handle.draining = True
            self._retire(handle)

    def _retire(self, handle: _Client) -> None:
        """Stop the report thread, take back (through reports) what the client holds, close it.

        Purged messages come back as reports: produced again on the current
        client, or failed when closing. Every wait is bounded.
        """
        handle.stop.set()
        thread = handle.thread
        if thread is not None and thread is not threads.current_thread():
            thread.join(_JOIN_TIMEOUT)
        client = handle.client
        try:
            if client is not None:
                try:
                    client.purge(in_queue=True, in_flight=True, blocking=False)
                except (KafkaException, RuntimeError):
                    pass
                deadline = time.monotonic() + _RETIRE_TIMEOUT
                while handle.held() and time.monotonic() < deadline:
                    try:
                        _serve_reports(client, deadline - time.monotonic())
                    except KafkaException:  # the fatal error raised once more: go on serving
                        continue
                    except RuntimeError:
                        break
                try:
                    left = handle.messages()
                except KafkaException:  # the fatal error raised once more
                    left = handle.held()
                if left:
                    LOG.error("%d %s(s) held by the replaced Kafka producer for %s were "
                              "never reported back and are lost", left, self.unit, self.name)
                    self._on_lost(left)
                if thread is not None and thread.is_alive() and thread is not threads.current_thread():
                    LOG.warning("The delivery-report thread of the replaced Kafka producer for %s "
                                "did not stop in time; the client is left to the garbage collector",
                                self.name)
                elif not left:  # close() waits for what the client holds: only when empty
                    try:
                        client.close()
                    except (KafkaException, RuntimeError):  # already closed / fatal state
                        pass
        finally:
            with self._lock:
                if handle in self._old:
                    self._old.remove(handle)
            # the client's callbacks refer to the handle: without this cycle the client is
            # freed here, outside the lock, not by the garbage collector at any moment
            handle.client = None

    def _report(self, handle: _Client, report: Report, err: KafkaError | None, msg: Any) -> None:
        """A delivery report of ``handle``'s client: move the message to a new client
        if its client was condemned, else hand it to ``report``."""
        handle.reports_begun.incr()
        handle.settled.incr()
        try:
            if err is not None and not self.closing and (
                    err.code() in _PURGED or err.code() in _SESSION_LOST or err.fatal()):
                if err.code() not in _PURGED:
                    self._condemn(handle, err)  # a fatal report: the rest follows after this poll
                err = self._resend(msg, report)
                if err is None:
                    return
            report(err, msg)
        finally:
            handle.reports_done.incr()

    def _resend(self, msg: Any, report: Report) -> KafkaError | None:
        """Produce ``msg`` again on the current client; the error that stops that, or None."""
        kind, created = msg.timestamp()
        if kind == confluent_kafka.TIMESTAMP_CREATE_TIME and created > 0:
            if time.time() * 1000.0 - created >= self._timeout_ms:
                return KafkaError(KafkaError._MSG_TIMED_OUT,
                                  "message timed out while its producer was replaced")
        else:
            created = 0
        try:
            # inside a delivery callback: wait for room, but retire no client from here
            self.produce(msg.topic(), msg.value(), msg.key(), msg.headers(),
                         None if report is self._on_report else report, created, wait=True, retire=False)
        except BufferError:
            return KafkaError(KafkaError._QUEUE_FULL, "producer queue full")
        except KafkaException as exc:
            return exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else \
                KafkaError(KafkaError._FAIL, str(exc))
        except (MessageDeliveryFailure, TypeError, ValueError) as exc:
            return KafkaError(KafkaError._FAIL, str(exc))
        return None

    def _on_error(self, handle: _Client, err: KafkaError) -> None:
        if err.fatal():
            # the thread that polled retires the client once its poll returns
            self._condemn(handle, err)
        else:  # librdkafka retries: said again only as the back-off allows
            self._warnings.warn(err)

    def _on_stats(self, handle: _Client, stats_json: str) -> None:
        """The idempotent producer's statistics: say the end of an outage
        (:class:`~.outage.BrokersBack`), and replace a client that keeps bumping its epoch
        (:meth:`_Client.epoch_storm`)."""
        stats = parse_stats(stats_json)
        self._warnings.outage.on_stats(stats)
        storm = handle.epoch_storm(stats)
        if storm is not None:
            self._condemn(handle, storm)

    def produce(self, topic: str, value: Any, key: Any = None,
                headers: list[tuple[str, bytes]] | None = None, on_delivery: Report | None = None,
                timestamp: int = 0, wait: bool = True, retire: bool | None = None) -> None:
        """Queue one message (``on_delivery`` receives its report instead of ``on_report``).

        A full queue is waited on for up to ``queue_timeout`` (``wait``), then BufferError;
        KafkaException, TypeError and ValueError mean the message was refused. ``retire``
        (default: ``wait``) lets a condemned client be retired from this thread; inside a
        delivery callback it is retired after its poll instead. The first attempt calls the
        client directly: a notifier's send is this method and the client, no frame between.
        """
        if retire is None:
            retire = wait
        kwargs: dict[str, Any] = {}
        if headers:
            kwargs["headers"] = headers
        if timestamp:
            kwargs["timestamp"] = timestamp
        handle = self._current or self._handle()
        for _ in range(3):  # a replacement happening meanwhile: the next client
            client = handle.client
            if client is None:  # retired by another thread meanwhile
                handle = self._handle()
                continue
            if on_delivery is not None:
                kwargs["on_delivery"] = functools.partial(self._report, handle, on_delivery)
            # counted before the call, so that a report served meanwhile never makes the
            # bound on what the client holds smaller than what it holds
            handle.sends_begun.incr()
            handle.queued.incr()
            try:
                try:
                    try:
                        if kwargs:
                            client.produce(topic, value, key, **kwargs)
                        else:  # a notification's send: no keyword dict to unpack
                            client.produce(topic, value, key)
                    except BufferError:
                        if not wait:
                            raise
                        self._wait_for_room(client, topic, value, key, kwargs)
                    return
                except BaseException:
                    handle.settled.incr()  # refused: the client does not hold it
                    raise
                finally:
                    handle.sends_done.incr()
            except KafkaException as exc:
                err = fatal_error(exc)
                if err is None:
                    raise
                if self._condemn(handle, err) and retire:
                    self._retire_condemned()
            except RuntimeError:  # closed by a replacement: try the new client
                pass
            handle = self._handle()
        raise KafkaException(KafkaError(KafkaError._FATAL, f"no usable Kafka producer for {self.name}"))

    def _wait_for_room(self, client: confluent_kafka.Producer, topic: str, value: Any, key: Any,
                       kwargs: dict[str, Any]) -> None:
        """The local queue is full: serve reports until there is room, for a bounded time."""
        deadline = time.monotonic() + self._queue_timeout
        while True:
            client.poll(max(0.0, min(_QUEUE_POLL_INTERVAL, deadline - time.monotonic())))
            try:
                client.produce(topic, value, key, **kwargs)
                return
            except BufferError:
                if time.monotonic() >= deadline or self.closing:
                    raise

    def poll(self, timeout: float = 0.0) -> None:
        """Serve due delivery reports (owners without a background thread call this)."""
        handle = self._current
        client = handle.client if handle is not None else None
        if handle is not None and client is not None:
            self._serve_on(handle, client.poll, timeout)
        self._warnings.summarize_due()
        if self._old:
            self._retire_condemned()

    def flush(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` seconds (None: until each message is delivered or
        timed out) for delivery reports; return how many messages are still pending."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            if self._old:
                self._retire_condemned()
            handle = self._current
            client = handle.client if handle is not None else None
            left = None if deadline is None else deadline - time.monotonic()
            if handle is None or client is None or not self.pending \
                    or (left is not None and left <= 0):
                return self._messages_left(handle)
            self._serve_on(handle, functools.partial(_serve_reports, client), 1.0 if left is None else min(1.0, left))

    def _messages_left(self, handle: _Client | None) -> int:
        """The messages still unconfirmed (what :meth:`flush` reports as lost), counted
        after serving the callbacks waiting, which the out-queue length counts too."""
        left = 0
        if handle is not None:
            try:
                left = handle.messages()
            except KafkaException as exc:  # a fatal error served: the messages are resent
                err = fatal_error(exc)
                if err is None:
                    raise
                self._condemn(handle, err)
                left = 0
        return left + sum(h.held() for h in list(self._old))

    def _serve_on(self, handle: _Client, serve: Callable[[float], Any], timeout: float) -> None:
        """``serve(timeout)`` on ``handle``'s client; a fatal error condemns the client."""
        try:
            serve(timeout)
        except RuntimeError:  # closed under us
            pass
        except KafkaException as exc:
            err = fatal_error(exc)
            if err is None:
                raise
            self._condemn(handle, err)

    def close(self, timeout: float) -> int:
        """Flush for up to ``timeout``; fail what is left (reported through the callbacks),
        close the client; return how many messages were not delivered in time.

        A later :meth:`produce` opens a new client.
        """
        left = self.flush(timeout)
        self.closing = True
        try:
            with self._lock:
                handle, self._current = self._current, None
                if handle is not None:
                    handle.draining = True
                    self._old.append(handle)
            if handle is not None:
                if left:
                    LOG.error("%d %s(s) to %s were not confirmed by the broker within %.1fs "
                              "and are lost", left, self.unit, self.name, timeout)
                self._retire(handle)
            self._retire_condemned()
            self._warnings.summarize()
        finally:
            self.closing = False
        return left

    @property
    def pending(self) -> int:
        """Messages neither confirmed nor reported failed: what the clients still hold."""
        current = self._current
        held = current.held() if current is not None else 0
        return held + sum(h.held() for h in list(self._old))


class _Resend:
    """Per-message delivery callback used only when ``retry > 0``."""

    __slots__ = ("owner", "left")

    def __init__(self, owner: "NotificationProducer", left: int) -> None:
        self.owner = owner
        self.left = left

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        owner = self.owner
        if err is None:  # only with delivery.report.only.error switched off
            return
        topic = msg.topic()
        if (self.left > 0 and not owner.client.closing and not err.fatal()
                and err.code() not in _PERMANENT):
            self.left -= 1
            LOG.warning("Delivery to Kafka topic %s failed (%s); sending again (%d retries left)",
                        topic, err.str(), self.left)
            try:
                owner.client.produce(topic, msg.value(), msg.key(), msg.headers(), self, wait=False)
                return
            except (BufferError, KafkaException, TypeError, ValueError) as exc:
                LOG.error("Could not send a notification to Kafka topic %s again: %s", topic, exc)
        owner.on_report(err, msg)


class NotificationProducer:
    """The notifier's producer: one :class:`KafkaProducer` shared by every sending thread,
    with ``sent`` / ``failed`` counted for :meth:`stats`."""

    def __init__(self, config: dict[str, Any], queue_timeout: float, flush_timeout: float,
                 url_for_logs: str = "") -> None:
        self._flush_timeout = flush_timeout
        self._url_for_logs = url_for_logs
        self.sent = Counter()
        self.failed = Counter()
        self.failures = RateLimitedLog(LOG)
        self._queue_timeout = queue_timeout
        # a failed burst's count is logged within a second of its last failure, not only at close
        self.client = KafkaProducer(config, url_for_logs, self.on_report, self._lost, queue_timeout,
                                    unit="notification", on_idle=self.failures.summarize_due)

    def __repr__(self) -> str:
        return f"<NotificationProducer {self._url_for_logs}>"

    def flush(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` seconds (None: until each message is delivered or
        timed out) for delivery reports; return how many notifications are still pending."""
        return self.client.flush(timeout)

    def close(self) -> None:
        """Flush for ``flush_timeout``; report what could not be delivered, then close."""
        self.client.close(self._flush_timeout)
        self.failures.summarize()

    def sender(self, topic: str, encode: Callable[[dict, dict], bytes]) -> NotificationSender:
        """``send(ctxt, message, retry)`` for the notifications of one topic: encodes the message,
        keys it by its publisher (which keeps each publisher's notifications in order) and queues
        it, one frame above the client's produce (the notifier's hot path). It raises
        MessageDeliveryFailure when the message cannot be queued; a client found in a fatal state
        is replaced and the message queued on the new one, so sending resumes as soon as the
        broker answers again.

        ``retry`` > 0: a message whose delivery fails is sent again that many times."""
        count_sent, produce, refused = self.sent.incr, self.client.produce, self.refused

        def send(ctxt: dict, message: dict, retry: int | None = None) -> None:
            value = encode(message, ctxt)
            key = message.get("publisher_id")
            if key is not None and type(key) is not str:
                key = str(key)
            count_sent()
            try:
                produce(topic, value, key, None, None if retry is None or retry <= 0 else _Resend(self, retry))
            except _REFUSED as exc:
                refused(topic, exc)
        return send

    def refused(self, topic: str, exc: Exception) -> NoReturn:
        """Count a notification the client would not queue, and raise why as MessageDeliveryFailure."""
        self.failed.incr()
        if isinstance(exc, MessageDeliveryFailure):
            raise exc
        if isinstance(exc, BufferError):
            raise MessageDeliveryFailure(
                f"Kafka producer queue for {self._url_for_logs} stayed full for "
                f"{self._queue_timeout}s ({self.client.pending} messages waiting for the broker); "
                f"notification to topic {topic} not sent") from None
        if isinstance(exc, KafkaException):
            err = exc.args[0] if exc.args else None
            raise MessageDeliveryFailure(
                f"Kafka refused a notification for topic {topic}: "
                f"{err.str() if isinstance(err, KafkaError) else exc}") from None
        raise MessageDeliveryFailure(f"Invalid notification for Kafka topic {topic}: {exc}") from None

    def on_report(self, err: KafkaError | None, msg: Any) -> None:
        # only failures are reported (delivery.report.only.error): a report per
        # confirmed message would cost a Python call and the GIL each
        if err is not None:
            self.failed.incr()
            self.report_failure(msg.topic(), err)

    def report_failure(self, topic: str, err: KafkaError) -> None:
        """Log a failed delivery: topic and cause, never the payload."""
        self.failures.log(logging.ERROR, (topic, err.code()),
                          "Notification delivery to Kafka topic %s failed: %s", topic, err.str())

    def _lost(self, count: int) -> None:
        for _ in range(count):
            self.failed.incr()

    @property
    def pending(self) -> int:
        """Notifications neither confirmed nor reported failed: what the client still holds."""
        return self.client.pending

    def stats(self) -> dict[str, int]:
        """``delivered`` is what was sent and is neither failed nor still pending."""
        failed, pending, sent = self.failed.value, self.pending, self.sent.value
        return {"sent": sent, "delivered": max(0, sent - failed - pending), "failed": failed,
                "pending": pending}
