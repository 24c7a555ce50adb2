"""The end of an outage, said: a Kafka client's line when a broker answers again.

librdkafka tells a client's ``error_cb`` that all its brokers are down
(``_ALL_BROKERS_DOWN``), and the driver logs it, but has no event for the way
back: the warnings just stop. Its statistics (librdkafka's documented
``stats_cb`` JSON, every :data:`STATS_INTERVAL_MS`) give each broker's
connection state; the first report with a broker ``UP`` after such an error
ends the outage with one line at info, with how long it lasted.
:class:`ClientWarnings` pairs that with the client's warnings in between, backed off.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any, Callable

from confluent_kafka import KafkaError

from notify_transport.drivers.reporting import OUTAGE_MAX_INTERVAL, RateLimitedLog

LOG = logging.getLogger(__name__)

#: How often a client reports its statistics: the outage's end is said this late at most.
STATS_INTERVAL_MS = 1000


def parse_stats(stats_json: str) -> dict[str, Any]:
    """librdkafka's statistics as a dict; ``{}`` for a report that does not parse."""
    try:
        stats = json.loads(stats_json)
    except ValueError:
        return {}
    return stats if isinstance(stats, dict) else {}


class BrokersBack:
    """Logs when a client that lost all its brokers reaches one again."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self._clock = clock
        #: when the client last said all its brokers were down; None while one answers
        self.down_since: float | None = None

    def on_error(self, err: KafkaError) -> None:
        """From the client's ``error_cb``: start the outage's clock at its first all-down error."""
        if err.code() == KafkaError._ALL_BROKERS_DOWN and self.down_since is None:
            self.down_since = self._clock()

    def on_stats_json(self, stats_json: str) -> None:
        """A client's ``stats_cb``: parsed only while an outage lasts."""
        if self.down_since is not None:
            self.on_stats(parse_stats(stats_json))

    def on_stats(self, stats: dict[str, Any]) -> None:
        """End the outage at the first statistics with a broker connected (state ``UP``)."""
        since = self.down_since
        brokers = stats.get("brokers")
        if since is None or not isinstance(brokers, dict):
            return
        if any(isinstance(b, dict) and b.get("state") == "UP" for b in brokers.values()):
            self.down_since = None
            LOG.info("%s: connected to a broker again, %.0fs after all brokers went down",
                     self.name, self._clock() - since)


class ClientWarnings:
    """A client's warnings (its ``error_cb``): each cause said at most once a second at first,
    further apart while it stays (a broker away, a refused login), under ``logger``; the count
    of an interval's repeats is said once the interval is over, as the owner polls
    (:meth:`summarize_due`). ``outage`` says when a broker answers again."""

    def __init__(self, name: str, logger: logging.Logger, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.outage = BrokersBack(name, clock=clock)
        self._log = RateLimitedLog(logger, clock=clock, max_interval=OUTAGE_MAX_INTERVAL)

    def warn(self, err: KafkaError) -> None:
        """One error the client retries by itself, keyed by its code (an all-brokers-down one
        also starts the outage's clock)."""
        self.outage.on_error(err)
        self._log.log(logging.WARNING, err.code(), "%s: %s", self.name, err.str())

    def summarize_due(self) -> None:
        """The count of a cause's repeats, once its interval is over (called at each poll)."""
        self._log.summarize_due()

    def summarize(self) -> None:
        """At close: the repeats not yet counted."""
        self._log.summarize()
