"""Kafka offsets as the streaming source's offsets, and the per-trigger limit.

A source offset is the JSON ``{"topic": {"partition": next_offset}}``, the
same shape Spark's own Kafka source checkpoints. Everything here is plain
Python so the arithmetic is tested without Spark or a broker.
"""
from __future__ import annotations

import json
from typing import Iterable, Mapping, NamedTuple

from notify_transport.exceptions import ConfigurationError

#: Spark's Kafka source spells "earliest" -2 and "latest" -1 in offset JSON.
EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]


class OffsetRange(NamedTuple):
    """Records ``[start, end)`` of one topic partition: one Spark input partition."""

    topic: str
    partition: int
    start: int
    end: int
    #: the partition appeared after the query started: read from its earliest record.
    from_earliest: bool = False

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
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


def resolve(spec: str | Offsets, earliest: Mapping[TopicPartition, int],
            latest: Mapping[TopicPartition, int], unlisted: str = "earliest") -> Offsets:
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


def limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
          max_records: int | None) -> Offsets:
    """End offsets admitting at most ``max_records``, split in proportion to each partition's lag.

    ``start`` must hold every partition of ``latest`` (new partitions at their
    earliest offset). Largest-remainder rounding makes the shares add up to
    exactly ``max_records`` when more is available, so no trigger reads less
    than allowed; ties go to the partition with more lag, then to the first in
    topic/partition order, so the split is deterministic.
    """
    missing = [tp for tp in latest if tp not in start]
    if missing:
        raise ValueError(f"start offsets lack partitions {missing}")
    lags = {tp: max(0, latest[tp] - start[tp]) for tp in latest}
    end = dict(start)
    total_lag = sum(lags.values())
    if max_records is None or total_lag <= max_records:
        quota = lags
    else:
        shares = {tp: lag * max_records / total_lag for tp, lag in lags.items()}
        quota = {tp: int(share) for tp, share in shares.items()}
        left = max_records - sum(quota.values())
        order = sorted(lags, key=lambda tp: (-(shares[tp] - quota[tp]), -lags[tp], tp))
        for tp in order[:left]:
            quota[tp] += 1
    for tp, lag in lags.items():
        end[tp] = start[tp] + min(lag, quota[tp])
    return end


def cap(end: Mapping[TopicPartition, int], ceiling: Mapping[TopicPartition, int]) -> Offsets:
    """``end`` without going past ``ceiling`` (the ``availableNow`` target); unknown partitions dropped."""
    return {tp: min(offset, ceiling[tp]) for tp, offset in end.items() if tp in ceiling}


def plan(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
         earliest: Mapping[TopicPartition, int] | None = None) -> list[OffsetRange]:
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


def total(ranges: Iterable[OffsetRange]) -> int:
    """Number of offsets the ranges cover."""
    return sum(r.size for r in ranges)
