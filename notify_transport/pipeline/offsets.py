"""Kafka offsets as the streaming source's offsets, and the per-trigger limit.

A source offset is the JSON ``{"topic": {"partition": next_offset}}``, the
same shape Spark's own Kafka source checkpoints. Everything here is plain
Python so the arithmetic is tested without Spark or a broker.
"""
from __future__ import annotations

import json
from typing import Callable, Iterable, Mapping, Sequence

from notify_transport.drivers.kafka import OffsetRange, Partition
from notify_transport.exceptions import ConfigurationError

#: Spark's Kafka source spells "earliest" -2 and "latest" -1 in offset JSON.
EARLIEST = -2
LATEST = -1

#: next offset per partition
Offsets = dict[Partition, int]


def to_json(offsets: Mapping[Partition, int]) -> dict[str, dict[str, int]]:
    """The checkpointed form: topics and partitions sorted, partition numbers as strings."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json(data: Mapping[str, Mapping[str, int]] | None) -> Offsets:
    """Inverse of :func:`to_json`; raise :class:`ConfigurationError` on a malformed offset."""
    offsets: Offsets = {}
    for topic, partitions in (data or {}).items():
        if not isinstance(partitions, Mapping):
            raise ConfigurationError(f"Offsets of topic {topic!r} must be an object, got {partitions!r}")
        for partition, offset in partitions.items():
            try:
                offsets[(str(topic), int(partition))] = int(offset)
            except (TypeError, ValueError):
                raise ConfigurationError(
                    f"Invalid offset {offset!r} for {topic}[{partition}]") from None
    return offsets


def parse_offsets_option(value: str | None, default: str) -> str | Offsets:
    """``startingOffsets``/``endingOffsets``: ``earliest``, ``latest`` or a JSON object."""
    value = (value or default).strip()
    if value.lower() in ("earliest", "latest"):
        return value.lower()
    try:
        return from_json(json.loads(value))
    except ValueError:
        raise ConfigurationError(
            f"Offsets must be 'earliest', 'latest' or JSON like "
            f'{{"topic": {{"0": 42}}}}, got {value!r}') from None


def resolve(spec: str | Offsets, earliest: Mapping[Partition, int],
            latest: Mapping[Partition, int], unlisted: str = "earliest") -> Offsets:
    """Concrete offsets for every known partition from a starting or ending spec.

    Partitions the JSON leaves out get ``unlisted`` (``earliest`` for a start,
    ``latest`` for an end, so no partition is skipped silently); -2 and -1
    mean earliest and latest.
    """
    if spec == "earliest":
        return dict(earliest)
    if spec == "latest":
        return dict(latest)
    assert isinstance(spec, dict)
    out = dict(earliest if unlisted == "earliest" else latest)
    for tp, offset in spec.items():
        if offset == EARLIEST:
            out[tp] = earliest.get(tp, 0)
        elif offset == LATEST:
            out[tp] = latest.get(tp, 0)
        else:
            out[tp] = offset
    return out


#: Broker times are searched between the epoch and this many milliseconds (year 2109).
_LAST_MILLIS = 1 << 42


def time_cut(start: Mapping[Partition, int], latest: Mapping[Partition, int],
             max_records: int | None,
             offsets_at: Callable[[int], Mapping[Partition, int]]) -> Offsets:
    """End offsets of a capped micro-batch, cut on broker time.

    ``offsets_at(t)`` answers as Kafka's ListOffsets (per partition the first offset at or
    after ``t`` ms, -1 for none). The batch admits, in every partition, the records before
    the latest cut time whose batch holds at most ``max_records``, so batches follow broker
    time across partitions; a first millisecond holding more is taken whole rather than split.
    ``start`` must hold every partition of ``latest``.
    """
    missing = [tp for tp in latest if tp not in start]
    if missing:
        raise ValueError(f"start offsets lack partitions {missing}")
    available = sum(max(0, latest[tp] - start[tp]) for tp in latest)
    if max_records is None or available <= max_records:
        return {**start, **{tp: max(start[tp], off) for tp, off in latest.items()}}

    def ends(millis: int) -> Offsets:
        found = offsets_at(millis)
        out = dict(start)
        for tp, until in latest.items():
            offset = found.get(tp, -1)
            offset = until if offset < 0 else offset
            out[tp] = max(start[tp], min(offset, until))
        return out

    def admitted(end: Offsets) -> int:
        return sum(end[tp] - start[tp] for tp in latest)

    low, high = 0, _LAST_MILLIS  # admitted(ends(low)) <= max_records < admitted(ends(high))
    while high - low > 1:
        middle = (low + high) // 2
        if admitted(ends(middle)) <= max_records:
            low = middle
        else:
            high = middle
    best = ends(low)
    return best if admitted(best) else ends(high)


def cap(end: Mapping[Partition, int], ceiling: Mapping[Partition, int]) -> Offsets:
    """``end`` without going past ``ceiling`` (the ``availableNow`` target); unknown partitions dropped."""
    return {tp: min(offset, ceiling[tp]) for tp, offset in end.items() if tp in ceiling}


def plan(start: Mapping[Partition, int], end: Mapping[Partition, int],
         earliest: Mapping[Partition, int] | None = None) -> list[OffsetRange]:
    """One :class:`OffsetRange` per partition with records between ``start`` and ``end``.

    A partition in ``end`` but not in ``start`` was discovered during the run,
    and one whose end is before its start was recreated (offsets restarted,
    accepted only with ``failOnDataLoss=false``): both are read from their
    earliest record.
    """
    ranges = []
    for tp, until in sorted(end.items()):
        if tp in start and until >= start[tp]:
            ranges.append(OffsetRange(tp[0], tp[1], start[tp], until))
        else:
            ranges.append(OffsetRange(tp[0], tp[1], (earliest or {}).get(tp, 0), until, True))
    return [r for r in ranges if r.end > r.start]


def spread(ranges: Sequence[OffsetRange], tasks: int) -> list[list[OffsetRange]]:
    """``ranges`` in at most ``tasks`` groups of about equal size (largest first, to the smallest group).

    Deterministic, so a replayed micro-batch is read by the same tasks.
    """
    groups: list[list[OffsetRange]] = [[] for _ in range(max(1, min(tasks, len(ranges))))]
    sizes = [0] * len(groups)
    for r in sorted(ranges, key=lambda r: (-r.size, r.topic, r.partition)):
        smallest = sizes.index(min(sizes))
        groups[smallest].append(r)
        sizes[smallest] += r.size
    return [sorted(g) for g in groups if g]


def total(ranges: Iterable[OffsetRange]) -> int:
    """Number of offsets the ranges cover."""
    return sum(r.size for r in ranges)
