"""Route incoming notifications to endpoint methods named by priority."""
from __future__ import annotations

import enum
import itertools
import logging
from typing import Any, Callable, Iterable, Sequence

from notify_transport.drivers.base import IncomingMessage
from notify_transport.drivers.naming import PRIORITIES
from notify_transport.serializer import NoOpSerializer, Serializer

LOG = logging.getLogger(__name__)


class NotificationResult(str, enum.Enum):
    """What an endpoint method returns: handled, or deliver again later."""

    HANDLED = "handled"
    REQUEUE = "requeue"


Callback = Callable[..., Any]


class NotificationDispatcher:
    """Calls ``endpoint.<priority>(ctxt, publisher_id, event_type, payload, metadata)``.

    An endpoint's optional ``filter_rule`` (a NotificationFilter) screens what it
    receives. A callback that raises counts as REQUEUE, as in oslo.messaging.
    """

    batch = False

    def __init__(self, endpoints: Iterable[Any], serializer: Serializer | None = None) -> None:
        self.endpoints = list(endpoints)
        self.serializer = serializer or NoOpSerializer()
        #: the default serializer changes nothing: dispatch() skips its calls
        self._deserializes = type(self.serializer) is not NoOpSerializer
        self._callbacks: dict[str, list[tuple[Any, Callback]]] = {}
        for endpoint, prio in itertools.product(self.endpoints, PRIORITIES):
            method = getattr(endpoint, prio, None)
            if callable(method):
                self._callbacks.setdefault(prio, []).append(
                    (getattr(endpoint, "filter_rule", None), method))

    @property
    def supported_priorities(self) -> list[str]:
        """Priorities some endpoint handles, in oslo's order: the topics to subscribe to."""
        return [p for p in PRIORITIES if p in self._callbacks]

    def extract(self, incoming: IncomingMessage) -> tuple[str, dict]:
        """Return the priority and the endpoint's view of a message."""
        ctxt = self.serializer.deserialize_context(incoming.ctxt)
        message = incoming.message
        metadata = {"message_id": message.get("message_id"), "timestamp": message.get("timestamp")}
        priority = str(message.get("priority") or "").lower()
        payload = self.serializer.deserialize_entity(ctxt, message.get("payload"))
        return priority, {"ctxt": ctxt, "publisher_id": message.get("publisher_id"),
                          "event_type": message.get("event_type"), "payload": payload,
                          "metadata": metadata}

    def dispatch(self, incoming: IncomingMessage) -> NotificationResult:
        """Run every matching callback; REQUEUE as soon as one asks for it.

        The hot path of every listener: the same as :meth:`extract` followed by
        the calls, without building the intermediate dict.
        """
        message = incoming.message
        get = message.get
        if self._deserializes:
            ctxt = self.serializer.deserialize_context(incoming.ctxt)
            payload = self.serializer.deserialize_entity(ctxt, get("payload"))
        else:
            ctxt = incoming.ctxt
            payload = get("payload")
        priority = get("priority")
        priority = priority.lower() if type(priority) is str else str(priority or "").lower()
        callbacks = self._callbacks.get(priority)
        if callbacks is None:
            if priority not in PRIORITIES:
                LOG.warning("Unknown priority %r in %s; dropping", priority, incoming.coordinates)
            return NotificationResult.HANDLED
        metadata = {"message_id": get("message_id"), "timestamp": get("timestamp")}
        publisher_id = get("publisher_id")
        event_type = get("event_type")
        for screen, callback in callbacks:
            if screen is not None and not screen.match(ctxt, publisher_id, event_type, metadata, payload):
                continue
            try:
                ret = callback(ctxt, publisher_id, event_type, payload, metadata)
            except Exception as exc:
                LOG.exception("Endpoint %s raised on %s", getattr(callback, "__qualname__", callback),
                              incoming.coordinates)
                _note_error(incoming, exc)
                return NotificationResult.REQUEUE
            if ret is not None and ret == NotificationResult.REQUEUE:
                return NotificationResult.REQUEUE
        return NotificationResult.HANDLED


class BatchNotificationDispatcher(NotificationDispatcher):
    """Calls ``endpoint.<priority>(messages)`` with the batch's messages of that priority."""

    batch = True

    def dispatch_batch(self, incoming: Sequence[IncomingMessage]) -> set[IncomingMessage]:
        """Return the messages to requeue."""
        by_priority: dict[str, list[tuple[IncomingMessage, dict]]] = {}
        for raw in incoming:
            priority, msg = self.extract(raw)
            by_priority.setdefault(priority, []).append((raw, msg))
        requeues: set[IncomingMessage] = set()
        for priority, pairs in by_priority.items():
            if priority not in PRIORITIES:
                LOG.warning("Unknown priority %r in %d messages; dropping", priority, len(pairs))
                continue
            raws = [r for r, _ in pairs]
            for screen, callback in self._callbacks.get(priority, []):
                msgs = [m for _, m in pairs if screen is None or screen.match(
                    m["ctxt"], m["publisher_id"], m["event_type"], m["metadata"], m["payload"])]
                if not msgs:
                    continue
                try:
                    ret = callback(msgs)
                except Exception as exc:
                    LOG.exception("Endpoint %s raised on a batch of %d",
                                  getattr(callback, "__qualname__", callback), len(msgs))
                    for raw in raws:
                        _note_error(raw, exc)
                    ret = NotificationResult.REQUEUE
                if ret == NotificationResult.REQUEUE:
                    requeues.update(raws)
                    break
        return requeues


def _note_error(incoming: IncomingMessage, exc: BaseException) -> None:
    """Keep what an endpoint raised on the message, for the driver (dead-letter headers, hooks)."""
    try:
        incoming.error = exc
    except AttributeError:  # a message type without the slot
        pass
