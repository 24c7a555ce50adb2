"""Periodic log lines with the counters of a set of running listeners.

A service running many listeners (``notify-transport serve``) has no other
window on them: every ``interval`` seconds each listener's received,
dispatched and failed counts and its total consumer lag go to the log, so a
stuck or failing listener is visible without a metrics system.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Mapping

LOG = logging.getLogger(__name__)


def summary(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """received, dispatched, failed and the total lag (None when unknown) of one server's metrics."""
    lag = metrics.get("lag")
    return {"received": metrics.get("received", 0), "dispatched": metrics.get("dispatched", 0),
            "failed": metrics.get("failed", 0),
            "lag": sum(lag.values()) if isinstance(lag, Mapping) and lag else None}


class CountersLog:
    """Logs ``summary(server.metrics())`` of each named server every ``interval`` seconds."""

    def __init__(self, servers: Mapping[str, Any], interval: float,
                 logger: logging.Logger = LOG) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be > 0, got {interval}")
        self.servers = dict(servers)
        self.interval = interval
        self._log = logger
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def report(self) -> None:
        """One line per listener, now."""
        for name, server in self.servers.items():
            try:
                metrics = server.metrics()
            except Exception:  # noqa: BLE001 - a report must not stop the service
                self._log.exception("listener %s: reading its metrics failed", name)
                continue
            counts = summary(metrics)
            self._log.debug("listener %s: metrics %s", name, metrics)
            lag = "unknown" if counts["lag"] is None else counts["lag"]
            # the counters as fields too: oslo.log's JSON formatter (use_json) writes record.extra
            self._log.info("listener %s: received=%d dispatched=%d failed=%d lag=%s", name,
                           counts["received"], counts["dispatched"], counts["failed"], lag,
                           extra={"extra": {"listener": name, **counts}})

    def start(self) -> "CountersLog":
        self._thread = threading.Thread(target=self._run, name="listener-counters", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.report()
