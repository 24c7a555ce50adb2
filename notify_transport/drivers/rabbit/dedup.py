"""Recently seen message ids, so a redelivered RPC or notification is handled once.

oslo.messaging's ``_MsgIdCache`` keeps the last 16 ``_unique_id`` values; this
keeps more (1024 by default), first in first out, on ``cachetools.FIFOCache``.
"""
from __future__ import annotations

import threading

from cachetools import FIFOCache

#: Seconds between the lines of a listener that count the redelivered copies it drops
#: (:class:`~notify_transport.drivers.reporting.RateLimitedLog`): one failover brings hundreds.
DUPLICATES_LOG_INTERVAL = 10.0


class DedupCache:
    """The last ``size`` ``_unique_id`` values seen; safe to share between threads."""

    def __init__(self, size: int = 1024) -> None:
        self._seen: FIFOCache[str, bool] = FIFOCache(maxsize=size)
        self._lock = threading.Lock()

    def contains(self, unique_id: str) -> bool:
        with self._lock:
            return unique_id in self._seen

    def seen(self, unique_id: str) -> bool:
        """True if ``unique_id`` was seen before; remembers it otherwise."""
        with self._lock:
            if unique_id in self._seen:
                return True
            self._seen[unique_id] = True
            return False
