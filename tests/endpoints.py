"""The recording notification endpoint of the functional tests, for every broker's tests."""
from __future__ import annotations

import threading
from typing import Any, Callable


class IdRecorder:
    """A notification endpoint for the info priority that keeps, thread-safely, every payload and
    its number (``payload[key]``: the tests number their notifications so; -1 for a payload
    without one). ``result(payload)``, when given, is what the endpoint returns (e.g. a requeue)."""

    def __init__(self, key: str = "i", result: Callable[[dict], Any] | None = None) -> None:
        self.key = key
        self.result = result
        self.payloads: list[dict] = []
        self.ids: list[int] = []
        self._lock = threading.Lock()

    def info(self, ctxt: Any, publisher_id: str, event_type: str, payload: dict, metadata: Any) -> Any:
        with self._lock:
            self.payloads.append(payload)
            self.ids.append(payload.get(self.key, -1) if isinstance(payload, dict) else -1)
        return self.result(payload) if self.result is not None else None
