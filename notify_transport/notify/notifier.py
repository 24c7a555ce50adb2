"""Send notifications: ``Notifier(transport, publisher_id).info(ctxt, event_type, payload)``."""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Iterable

from notify_transport import options
from notify_transport.notify.drivers import Driver, Route, TestDriver, load_drivers, log_failed_send
from notify_transport.notify.redaction import redacted_dict
from notify_transport.secrets import without_secrets
from notify_transport.serializer import NoOpSerializer, Serializer

LOG = logging.getLogger(__name__)


def utc_clock(now_ns: Callable[[], int] = time.time_ns) -> Callable[[], str]:
    """A function returning ``str(datetime.utcnow())`` as oslo writes timestamps, without a
    datetime per call: the date and time part is formatted once per second. A closure, not a
    class with ``__call__``: calling it costs half as much on the send path."""
    # (first microsecond of the second, its text with a "%06d" slot, its text alone);
    # the start is a second no clock reading falls in
    second: list[tuple[int, str, str]] = [(-10**7, "", "")]

    def now() -> str:
        micro = now_ns() // 1000
        cached = second[0]  # one tuple, replaced whole: safe across threads
        if not 0 <= micro - cached[0] < 1_000_000:
            start = micro - micro % 1_000_000
            text = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start // 1_000_000))
            cached = second[0] = (start, text + ".%06d", text)
        micro -= cached[0]
        return cached[1] % micro if micro else cached[2]
    return now


# Random (version 4) UUID strings made 256 at a time from one os.urandom call:
# str(uuid.uuid4()) costs a system call and a UUID object per notification.
# The pool is process state, not per notifier, because a forked child must drop
# the ids it inherited (it would otherwise reuse its parent's): one at-fork hook
# clears this one pool, where per-notifier pools would need a hook registered per
# notifier (never released) or a getpid() per notification. What the pool and the
# cached clock save is measured by `python -m bench.profile_hot build`
# (doc/source/benchmarks.rst).
_ID_BATCH = 256
#: one id's text and the space that splits it from the next: 37 columns
_ID_WIDTH = 37
#: (first hex digit, first column, digits) of the five dash-separated groups of an id
_ID_GROUPS = ((0, 0, 8), (8, 9, 4), (12, 14, 4), (16, 19, 4), (20, 24, 12))
#: the RFC 4122 variant keeps a hex digit's two low bits and sets its top bits to 10
_VARIANT = bytes.maketrans(b"0123456789abcdef", b"89ab89ab89ab89ab")
_ID_TEMPLATE = (b"-" * (_ID_WIDTH - 1) + b" ") * _ID_BATCH
_id_pool: list[str] = []


def _more_ids() -> list[str]:
    """A batch of ids laid out column by column: each of an id's 32 digits is one slice
    assignment for the whole batch, so the work in Python is per column, not per id (a
    third of the cost of slicing and formatting each id)."""
    digits = os.urandom(16 * _ID_BATCH).hex().encode()
    text = bytearray(_ID_TEMPLATE)
    for first, column, length in _ID_GROUPS:
        for k in range(length):
            text[column + k::_ID_WIDTH] = digits[first + k::32]
    text[14::_ID_WIDTH] = b"4" * _ID_BATCH   # the version, as uuid.uuid4()
    text[19::_ID_WIDTH] = digits[16::32].translate(_VARIANT)
    return text.decode().split()


def new_message_id() -> str:
    """A random UUID string, like ``str(uuid.uuid4())``; safe across threads and forks."""
    while True:
        try:
            return _id_pool.pop()  # atomic under the GIL
        except IndexError:
            _id_pool.extend(_more_ids())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_id_pool.clear)


def sanitize_context(ctxt: Any) -> Any:
    """Drop credentials from a context before it goes on the bus.

    Objects with oslo.context's ``redacted_copy()`` use it; plain dicts lose
    the keys :func:`notify_transport.secrets.is_secret` names (``auth_token``,
    ``service_token``, ``password``...; oslo.messaging 18 drops dict
    contexts entirely; we keep the rest, which is what listeners filter on).
    """
    if ctxt is None:
        return {}
    if isinstance(ctxt, dict):
        return without_secrets(ctxt)
    fast = redacted_dict(ctxt)
    if fast is not None:
        return fast
    redact = getattr(ctxt, "redacted_copy", None)
    if callable(redact):
        return redact()
    LOG.warning("Context of type %s has no redacted_copy(); sending an empty context",
                type(ctxt).__name__)
    return {}


class Notifier:
    """Publishes notifications at a priority to each configured topic.

    ``driver`` is a name under :data:`~notify_transport.notify.drivers.NAMESPACE`
    (``messagingv2``, ``messaging``, ``log``, ``test``, ``noop``, ``routing``...) or a list;
    None reads ``[oslo_messaging_notifications] driver``, and an empty option disables
    notifications, as in oslo.messaging. Send failures are logged, never raised; delivery
    failures are counted by ``transport.delivery_stats()``.
    """

    def __init__(self, transport: Any, publisher_id: str | None = None,
                 driver: str | Iterable[str] | None = None, serializer: Serializer | None = None,
                 retry: int | None = None, topics: Iterable[str] | None = None) -> None:
        conf = transport.conf
        options.register_notifier_opts(conf)
        group = conf[options.NOTIFICATIONS_GROUP]
        self.transport = transport
        self.publisher_id = publisher_id
        self.retry = retry
        self._conf_retry = group.retry
        self._serializer = serializer or NoOpSerializer()
        #: oslo's timestamp text, the formatted second cached (see utc_clock)
        self._clock = utc_clock()
        #: the default serializer changes nothing: skip its two calls per notification
        self._serializes = type(self._serializer) is not NoOpSerializer
        if driver is None:
            names = list(group.driver)
        elif isinstance(driver, str):
            names = [driver]
        else:
            names = list(driver)
        self._topics = list(topics) if topics is not None else list(group.topics)
        loaded = load_drivers(names, conf, self._topics, transport) if names else {}
        #: the driver objects, in configured order (``drivers[i].sent`` for the ``test`` driver)
        self.drivers: list[Driver] = [loaded[n] for n in dict.fromkeys(names)]
        #: priority -> the drivers' routes (Driver.routes), made on the priority's first notification
        self._routes: dict[str, list[Route]] = {}
        for d in self.drivers:
            if isinstance(d, TestDriver):
                self.sent = d.sent
        if not self.drivers:
            LOG.warning("Notifier %r has no driver configured ([%s] driver is empty): "
                        "notifications are disabled", publisher_id, options.NOTIFICATIONS_GROUP)

    def is_enabled(self) -> bool:
        """False when no driver is configured (notifications are dropped by design)."""
        return bool(self.drivers)

    def _notify(self, ctxt: Any, event_type: str, payload: Any, priority: str,
                publisher_id: str | None = None, retry: int | None = None) -> None:
        if not self.drivers:
            return
        if self._serializes:
            payload = self._serializer.serialize_entity(ctxt, payload)
            ctxt = self._serializer.serialize_context(sanitize_context(ctxt))
        else:
            ctxt = sanitize_context(ctxt)
        if type(ctxt) is not dict and not isinstance(ctxt, dict):
            ctxt = ctxt.to_dict() if hasattr(ctxt, "to_dict") else dict(ctxt)
        msg = {"message_id": new_message_id(),
               "publisher_id": publisher_id or self.publisher_id,
               "event_type": event_type,
               "priority": priority,
               "payload": payload,
               "timestamp": self._clock()}
        if retry is None:
            retry = self.retry if self.retry is not None else self._conf_retry
        routes = self._routes.get(priority)
        if routes is None:
            routes = self._routes[priority] = [r for d in self.drivers for r in d.routes(priority)]
        for send, topic in routes:
            if topic is None:
                send(ctxt, msg, retry)
                continue
            try:
                send(ctxt, msg, retry)
            except Exception as exc:  # never break the caller, as oslo does
                log_failed_send(msg, topic, exc)

    def audit(self, ctxt: Any, event_type: str, payload: Any) -> None:
        self._notify(ctxt, event_type, payload, "AUDIT")

    def debug(self, ctxt: Any, event_type: str, payload: Any) -> None:
        self._notify(ctxt, event_type, payload, "DEBUG")

    def info(self, ctxt: Any, event_type: str, payload: Any) -> None:
        self._notify(ctxt, event_type, payload, "INFO")

    def warn(self, ctxt: Any, event_type: str, payload: Any) -> None:
        self._notify(ctxt, event_type, payload, "WARN")

    warning = warn

    def error(self, ctxt: Any, event_type: str, payload: Any) -> None:
        self._notify(ctxt, event_type, payload, "ERROR")

    def critical(self, ctxt: Any, event_type: str, payload: Any) -> None:
        self._notify(ctxt, event_type, payload, "CRITICAL")

    def sample(self, ctxt: Any, event_type: str, payload: Any) -> None:
        self._notify(ctxt, event_type, payload, "SAMPLE")

    def prepare(self, publisher_id: str | None = None, retry: int | None = None) -> "Notifier":
        """A notifier sharing this one's transport and drivers with other defaults."""
        return _SubNotifier(self, publisher_id or self.publisher_id,
                            retry if retry is not None else self.retry)

    def flush(self, timeout: float | None = None) -> int:
        """Wait until sent notifications are confirmed; return how many are still pending."""
        return self.transport.flush(timeout)


class _SubNotifier(Notifier):
    """A prepared notifier: the parent's senders with another publisher_id/retry."""

    def __init__(self, base: Notifier, publisher_id: str | None, retry: int | None) -> None:
        self.__dict__.update(base.__dict__)
        self.publisher_id = publisher_id
        self.retry = retry
