"""Turning a take of records into the messages a listener hands out.

The commit policy is told of the take first (its commit runs while the records
are decoded); undecodable records are skipped, counted and logged (or
dead-lettered by the policy), never allowed to stop their neighbours. A large
take is decoded a chunk at a time, so each piece is freed before the next is
decoded; the rest waits in :attr:`HandOut.ready`.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from notify_transport.drivers.base import IncomingMessage
from notify_transport.drivers.envelope import decode_notification
from notify_transport.drivers.kafka.delivery.commit import CommitPolicy
from notify_transport.drivers.kafka.delivery.counters import DeliveryCounters
from notify_transport.drivers.kafka.message import ConsumedRecord, KafkaMessage
from notify_transport.exceptions import DecodeError

LOG = logging.getLogger(__name__)

#: Records of one take (one commit, up to max_poll_records) decoded and handed out per
#: poll() to a listener that dispatches one at a time: hundreds of decoded
#: notifications alive at once would make the garbage collector scan and promote
#: them, a cost the listener benchmark shows.
HAND_OUT_CHUNK = 64


class HandOut:
    """Decodes takes for one listener; ``chunk`` (None: no chunks) bounds what one poll decodes."""

    def __init__(self, name: str, policy: CommitPolicy, counters: DeliveryCounters, dead_letters: bool,
                 chunk: int | None = None) -> None:
        self.name = name
        self.policy = policy
        self.counters = counters
        self._action = "dead-lettering" if dead_letters else "skipping"
        self._chunk = None if chunk is None else max(1, int(chunk))
        #: taken by the policy (committed before dispatch, or stored), not yet decoded:
        #: returned by the next polls, even after stop(), as the Listener contract says
        self.ready: list[ConsumedRecord] = []
        #: records skipped because they could not be decoded
        self.skipped = 0

    def messages(self, good: list[ConsumedRecord]) -> list[IncomingMessage]:
        """Commit policy told, then decode; with a chunk, only the first pieces are decoded now
        (more of them while the policy's commit is still in flight), the rest kept in ``ready``."""
        policy = self.policy
        if policy.take is not None:
            return self.decode(good, policy.take)
        # the policy's commit (if any) runs while the batch is decoded
        finish = policy.on_polled(good)
        try:
            chunk = self._chunk
            if chunk is None or len(good) <= chunk:
                return self.decode(good)
            pending = getattr(finish, "pending", None)
            out = self.decode(good[:chunk])
            taken = chunk
            while taken < len(good) and (not out or (pending is not None and pending())):
                out += self.decode(good[taken:taken + chunk])
                taken += chunk
            self.ready.extend(good[taken:])
            return out
        finally:
            if finish is not None:
                finish()

    def decode(self, records: list[ConsumedRecord],
               take: Callable[[ConsumedRecord], Any] | None = None) -> list[IncomingMessage]:
        """Messages of ``records``; undecodable ones are skipped.

        ``take`` (a tracking policy's) is told of every record first and gives
        each message its acknowledgement handlers; else they are the policy's.
        """
        out: list[IncomingMessage] = []
        append = out.append
        decode = decode_notification
        on_ack, on_requeue = self.policy.on_ack, self.policy.on_requeue
        handle = None
        for record in records:
            if take is not None:
                handle = take(record)
                on_ack, on_requeue = handle.on_ack, handle.on_requeue
            try:
                ctxt, message = decode(record.value())
            except DecodeError as exc:
                self._skip(record, exc)
                continue
            except Exception as exc:  # noqa: BLE001 - no record may stop the loop or its neighbours
                self._skip(record, DecodeError(f"cannot decode: {type(exc).__name__}: {str(exc)[:200]}"))
                continue
            append(KafkaMessage(ctxt, message, record, on_ack, on_requeue, handle))
        return out

    def next_ready(self, max_messages: int) -> list[IncomingMessage]:
        """The next piece of ``ready``, decoded (the caller holds the listener's lock)."""
        ready = self.ready
        size = max(1, min(max_messages, self._chunk or len(ready)))
        out: list[IncomingMessage] = []
        while ready and not out:
            piece = ready[:size]
            del ready[:size]
            out = self.decode(piece)
        return out

    def drop_ready(self) -> int:
        """At close: forget what was taken and never handed out; how many that was."""
        dropped, self.ready = len(self.ready), []
        return dropped

    def _skip(self, record: ConsumedRecord, exc: Exception) -> None:
        self.skipped += 1
        self.counters.undecodable.incr()
        LOG.warning("%s: %s undecodable record %s[%d]@%d (%d bytes): %s", self.name, self._action,
                    record.topic(), record.partition(), record.offset(), len(record.value() or b""), exc)
        try:
            self.policy.on_undecodable(record, exc)
        except Exception:  # noqa: BLE001
            LOG.exception("%s: commit policy failed on an undecodable record", self.name)
