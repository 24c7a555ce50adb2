"""What a Kafka listener did with the records it read, counted without a lock (:class:`Counter`)."""
from __future__ import annotations

from notify_transport.drivers.counter import Counter


class DeliveryCounters:
    """What a Kafka listener did with the records it read, for ``metrics()``.

    ``retried``/``dead_lettered`` count copies the broker confirmed;
    ``copy_failures`` copies that could not be delivered (their originals stay
    uncommitted); ``undecodable`` records that were not valid notifications;
    ``stale`` records not dispatched because their partition was revoked
    while they waited for a worker or before they were handed out; ``cancelled`` records an abrupt stop
    dropped before dispatch; ``commit_failures`` commits the broker refused.
    """

    NAMES = ("undecodable", "retried", "dead_lettered", "copy_failures", "stale",
             "cancelled", "commits", "commit_failures")
    # the slots' types (set in __init__ by name)
    undecodable: Counter
    retried: Counter
    dead_lettered: Counter
    copy_failures: Counter
    stale: Counter
    cancelled: Counter
    commits: Counter
    commit_failures: Counter

    __slots__ = NAMES

    def __init__(self) -> None:
        for name in self.NAMES:
            setattr(self, name, Counter())

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name).value for name in self.NAMES}
