"""Small statistics for benchmark samples: percentiles, latency summaries, rates."""
from __future__ import annotations

import math
from typing import Iterable, Sequence


def percentile(samples: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0-100) of ``samples`` with linear interpolation.

    Same definition as numpy's default ("linear"): rank ``pct/100 * (n-1)``
    between the two nearest sorted samples. Raises ValueError on no samples.
    """
    if not samples:
        raise ValueError("percentile of no samples")
    if not 0 <= pct <= 100:
        raise ValueError(f"percentile must be within 0..100, got {pct}")
    ordered = sorted(samples)
    rank = pct / 100 * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    frac = rank - low
    return ordered[low] + (ordered[high] - ordered[low]) * frac


def summarize_latencies(seconds: Iterable[float]) -> dict[str, float | int]:
    """count, min, mean, p50, p90, p99, max of latencies given in seconds, reported in ms."""
    ordered = sorted(seconds)
    if not ordered:
        return {"count": 0}
    ms = [s * 1000.0 for s in ordered]
    return {"count": len(ms), "min_ms": ms[0], "mean_ms": sum(ms) / len(ms),
            "p50_ms": percentile(ms, 50), "p90_ms": percentile(ms, 90),
            "p99_ms": percentile(ms, 99), "max_ms": ms[-1]}


def rate(count: int, seconds: float) -> float:
    """Events per second; 0 when nothing happened or no time passed."""
    if count <= 0 or seconds <= 0:
        return 0.0
    return count / seconds


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator`` or None when either side is missing or zero."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator
