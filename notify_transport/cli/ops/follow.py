"""Reading notification topics beside the pools, for ``tail``: start positions, new topics, outages.

Reading is the driver's :class:`~notify_transport.reading.Reader`
(no group). Topics created later are found by asking the metadata every
``refresh`` seconds and read from their beginning. A lost connection is one log
line, and its return another (:class:`ConnectionState`).
"""
from __future__ import annotations

import dataclasses
import logging
import sys
import time
from typing import Callable, Iterator, Sequence

from confluent_kafka import KafkaError

from notify_transport.drivers.kafka import (EARLIEST, UNREACHABLE, ClusterError, Partition, StartPosition,
                                            reader_config)
from notify_transport.cli.ops.cluster import RDKAFKA_LOG, KafkaCluster
from notify_transport.cli.ops.start import Start
from notify_transport.drivers.envelope import decode_notification
from notify_transport.exceptions import DecodeError, MessagingException
from notify_transport.reading import Reader, Record

LOG = logging.getLogger(__name__)

#: Most records taken from the consumer in one call.
BATCH = 500
#: Longest single wait, so that --timeout and Ctrl-C are noticed quickly.
SLICE = 0.2


@dataclasses.dataclass
class Received:
    """One record, decoded (``message`` None: undecodable, already reported)."""

    ctxt: dict
    message: dict | None
    topic: str
    partition: int
    offset: int
    timestamp: float | None  # broker/producer time, seconds since the epoch

    @property
    def coordinates(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


class ConnectionState:
    """Logs a change of the brokers' reachability once: lost, then back."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.down = False

    def on_error(self, err: KafkaError) -> None:
        """The client's ``error_cb``: librdkafka reports every failed attempt; log the change only.

        "All brokers down" is librdkafka's own state change (reported once per
        outage); a failed connection attempt (or a closed idle connection) is
        one attempt, kept for --debug.
        """
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            if not self.down:
                self.down = True
                LOG.warning("lost the connection to the Kafka brokers at %s (%s); retrying until they "
                            "answer", self.where, err.str())
            return
        if err.code() in UNREACHABLE:
            LOG.debug("Kafka broker at %s: %s", self.where, err.str())
            return
        LOG.warning("Kafka client: %s", err.str())

    def answered(self) -> None:
        """The brokers answered (records or metadata)."""
        if self.down:
            self.down = False
            LOG.warning("the Kafka brokers at %s answer again", self.where)


class Follower:
    """Follows ``topics`` from ``start``; ``exit_at_end`` stops once the end offsets seen at start are read."""

    def __init__(self, cluster: KafkaCluster, topics: Sequence[str], start: Start, refresh: float,
                 exit_at_end: bool = False, status: Callable[[str], None] = lambda _line: None) -> None:
        self.cluster = cluster
        #: where the line about newly followed partitions goes (the command's output.status)
        self.status = status
        self.topics = list(topics)
        self.start = start
        self.refresh = refresh
        self.exit_at_end = exit_at_end
        self.state = ConnectionState(cluster.bootstrap)
        self.reader = Reader(reader_config(cluster.driver.url, cluster.driver.opts), name="tail",
                             timeout=cluster.timeout, error_cb=self.state.on_error, on_error=self.state.on_error,
                             logger=RDKAFKA_LOG, admin=cluster)

    def open(self) -> tuple[list[Partition], list[str]]:
        """Assign the partitions that exist now at their start offsets; the names of the missing topics."""
        partitions, missing = self.cluster.partitions_of(self.topics)
        self.reader.open(partitions, self.start.position, until_end=self.exit_at_end)
        return partitions, missing

    def done(self) -> bool:
        """exit_at_end: every partition read up to its end at start (or reported at its end)."""
        return self.exit_at_end and self.reader.finished

    def close(self) -> None:
        self.reader.close()

    def records(self) -> Iterator[Received | None]:
        """Decoded records as they come; None when a slice passed without any."""
        next_refresh = time.monotonic() + self.refresh
        try:
            while not self.done():
                if not self.exit_at_end and time.monotonic() >= next_refresh:
                    self.follow_new_topics()
                    next_refresh = time.monotonic() + self.refresh
                try:
                    records = self.reader.receive(BATCH, SLICE)
                except MessagingException as exc:
                    raise ClusterError(f"reading failed: {exc}") from None
                if not records:
                    yield None
                    continue
                self.state.answered()
                for record in records:
                    yield self._decode(record)
        finally:
            self.reader.close()

    def follow_new_topics(self) -> list[Partition]:
        """Assign, from their beginning, the partitions of followed topics that appeared since."""
        try:
            found, _missing = self.reader.partitions_of(self.topics, timeout=min(self.refresh, 5.0))
            new = [tp for tp in found if tp not in self.reader.assigned]
            self.reader.open(new, StartPosition(EARLIEST))
        except MessagingException:
            return []  # the error callback has told the state; try again at the next refresh
        self.state.answered()
        if new:
            self.status(f"following {len(new)} new partition(s) of {', '.join(sorted({t for t, _ in new}))} "
                        "from their beginning")
        return new

    @staticmethod
    def _decode(record: Record) -> Received:
        coords = (record.topic, record.partition, record.offset, record.timestamp)
        try:
            ctxt, message = decode_notification(record.value)
        except DecodeError as exc:
            print(f"notify-transport: warning: skipping undecodable record "
                  f"{coords[0]}[{coords[1]}]@{coords[2]}: {exc}", file=sys.stderr)
            return Received({}, None, *coords)
        return Received(ctxt, message, *coords)
