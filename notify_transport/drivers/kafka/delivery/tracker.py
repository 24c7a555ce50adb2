"""In-flight offset tracking for at-least-once commits.

Records are handed out in offset order but finish in any order; a partition
may only be committed up to the first unfinished record. As zkafka does, two
heaps (handed out, finished) give "highest contiguous done + 1". A
:class:`PartitionTrack` belongs to one assignment: once revoked it is closed,
so no stale offset is ever committed.
"""
from __future__ import annotations

import heapq
from typing import Iterable

from notify_transport.drivers import threads


class PartitionTrack:
    """Offsets of one partition handed out and not yet all finished. Thread-safe."""

    __slots__ = ("topic", "partition", "position", "committed", "closed", "_pending", "_handed",
                 "_finished", "_lock")

    def __init__(self, topic: str, partition: int, position: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        #: next offset to commit (one past the contiguous finished prefix), None before any
        self.position = position
        #: the last position the broker confirmed as committed
        self.committed = position
        #: revoked, lost or closed: finishing records changes nothing any more
        self.closed = False
        self._pending: set[int] = set()
        self._handed: list[int] = []
        self._finished: list[int] = []
        self._lock = threads.Lock()

    def __repr__(self) -> str:
        return (f"<PartitionTrack {self.topic}[{self.partition}] position={self.position} "
                f"in_flight={len(self._pending)}{' closed' if self.closed else ''}>")

    def add(self, offset: int) -> None:
        """A record is handed out."""
        with self._lock:
            if self.closed or offset in self._pending:
                return
            if self.position is not None and offset < self.position:
                return  # already behind the commit position (delivered again): nothing to track
            self._pending.add(offset)
            heapq.heappush(self._handed, offset)

    def finish(self, offset: int) -> bool:
        """A record's processing ended; return whether the commit position moved."""
        with self._lock:
            if self.closed or offset not in self._pending:
                return False
            self._pending.discard(offset)
            heapq.heappush(self._finished, offset)
            handed, finished = self._handed, self._finished
            moved = False
            while finished and handed[0] == finished[0]:
                heapq.heappop(handed)
                done = heapq.heappop(finished)
                self.position = done + 1
                moved = True
            return moved

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def uncommitted(self) -> bool:
        """Whether the position moved past what was last committed."""
        return self.position is not None and self.position != self.committed

    def close(self) -> int | None:
        """Stop tracking; return the position to commit one last time (None if nothing new)."""
        with self._lock:
            self.closed = True
            return self.position if self.uncommitted else None


class OffsetTracker:
    """The :class:`PartitionTrack` of every partition a listener owns now."""

    def __init__(self) -> None:
        self._tracks: dict[tuple[str, int], PartitionTrack] = {}
        self._lock = threads.Lock()

    def assign(self, topic: str, partition: int, position: int | None) -> PartitionTrack:
        """A new track for a partition just assigned (``position``: where reading starts)."""
        track = PartitionTrack(topic, partition, position if position is not None and position >= 0
                               else None)
        with self._lock:
            old = self._tracks.get((topic, partition))
            if old is not None:
                old.close()
            self._tracks[(topic, partition)] = track
        return track

    def get(self, topic: str, partition: int) -> PartitionTrack:
        """The current track (a new one when the assignment callback was missed)."""
        track = self._tracks.get((topic, partition))
        if track is None:
            track = self.assign(topic, partition, None)
        return track

    def revoke(self, partitions: Iterable[tuple[str, int]]) -> list[PartitionTrack]:
        """Close and forget the tracks of ``partitions``; return them."""
        gone = []
        with self._lock:
            for key in partitions:
                track = self._tracks.pop(key, None)
                if track is not None:
                    gone.append(track)
        return gone

    def tracks(self) -> list[PartitionTrack]:
        with self._lock:
            return list(self._tracks.values())

    def uncommitted(self) -> list[PartitionTrack]:
        """Tracks whose position moved since their last confirmed commit."""
        return [t for t in self.tracks() if t.uncommitted]

    @property
    def in_flight(self) -> int:
        return sum(t.in_flight for t in self.tracks())
