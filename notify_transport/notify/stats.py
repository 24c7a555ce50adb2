"""Counters of one listener, readable from code while it runs."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class ListenerStats:
    """Counts since the listener started.

    ``received``: handed over by the driver; ``dispatched``: endpoints handled
    them; ``failed``: an endpoint raised or asked for a requeue that was not
    allowed; ``requeued``: handed back to the driver for another attempt.
    """

    received: int = 0
    dispatched: int = 0
    failed: int = 0
    requeued: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
