"""RPC traffic for the tests that cut connections: casts without pause, calls held by the endpoint.

Shared by test_ntrabbit_reconnect.py (threads) and oslo_eventlet_rabbit_service.py (an
eventlet-patched child, where ``threading`` is green); oslo.messaging's public API only.
No pytest here, for the child.
"""
from __future__ import annotations

import collections
import threading
from typing import Any

import oslo_messaging


class Holds:
    """An endpoint's ``hold``: it answers only once the test releases the key, so no reply can
    come before that (a call that "returns" earlier did not wait for its answer)."""

    def __init__(self) -> None:
        self.held: collections.defaultdict[str, threading.Event] = collections.defaultdict(threading.Event)
        self.released: collections.defaultdict[str, threading.Event] = collections.defaultdict(threading.Event)

    def hold(self, ctxt: dict, key: str) -> str:
        self.held[key].set()
        self.released[key].wait(120)
        return key

    def release_all(self) -> None:
        for key in list(self.held):
            self.released[key].set()


def call_held(client: Any, key: str, timeout: float, outcome: dict[str, Any]) -> None:
    """Call ``hold(key)``; ``outcome[key]`` is its answer, or ``"timeout"``."""
    try:
        outcome[key] = client.prepare(timeout=timeout).call({}, "hold", key=key)
    except oslo_messaging.MessagingTimeout:
        outcome[key] = "timeout"


class Casts:
    """Casts ``echo(value=n)`` for n = 1, 2, ... (:meth:`run`) until :meth:`stop`; keeps the
    numbers the broker confirmed (the cast returned) and why the others failed."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.confirmed: list[int] = []
        self.failed: list[str] = []
        self._stop = threading.Event()

    def run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            try:
                self.client.cast({}, "echo", value=n)
                self.confirmed.append(n)
            except oslo_messaging.MessagingException as exc:  # not confirmed: may be lost
                self.failed.append(f"{n}: {exc}")

    def stop(self) -> None:
        self._stop.set()

    def lost(self, received: list[Any]) -> list[int]:
        """The first confirmed numbers not in ``received`` (what the endpoint got)."""
        return sorted(set(self.confirmed) - set(received))[:10]

    @staticmethod
    def duplicates(received: list[Any]) -> int:
        numbers = [v for v in received if isinstance(v, int)]
        return len(numbers) - len(set(numbers))
