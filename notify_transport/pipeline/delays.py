"""Delay histograms: percentiles that add up across micro-batches.

Percentiles of batches do not combine, so the statistics keep a count per delay bucket
with the bucket's smallest and largest delay. Buckets grow by :data:`RATIO` (2 %) from
one millisecond, signed for clocks that run ahead; a percentile interpolated within its
bucket is within 2 %, and summing rows of any batches, windows or groups gives their union.
"""
from __future__ import annotations

import math
from typing import Sequence

RATIO = 1.02
#: delays below this (seconds) share bucket 0
RESOLUTION = 0.001


def bucket_of(delay: float | None) -> int | None:
    """The bucket of a delay in seconds (the Spark expression in :func:`bucket_column` matches it)."""
    if delay is None or math.isnan(delay):
        return None
    magnitude = abs(delay)
    if magnitude < RESOLUTION:
        return 0
    index = 1 + int(math.floor(math.log(magnitude / RESOLUTION) / math.log(RATIO)))
    return index if delay > 0 else -index


def bucket_column(delay):
    """Spark column of :func:`bucket_of` for a column of delays in seconds."""
    from pyspark.sql import functions as F

    magnitude = F.abs(delay)
    index = (F.floor(F.log(magnitude / RESOLUTION) / math.log(RATIO)) + 1).cast("int")
    return (F.when(delay.isNull(), F.lit(None).cast("int"))
            .when(magnitude < RESOLUTION, F.lit(0))
            .when(delay > 0, index).otherwise(-index))


def percentiles(frame, keys: Sequence[str], quantiles: Sequence[float] = (0.5, 0.95)):
    """Per group of ``keys``, the delay at each quantile from bucket rows.

    ``frame`` has ``keys`` plus ``delay_bucket``, ``count``, ``delay_min``
    and ``delay_max``; rows without a delay are ignored. Returns a pandas
    frame indexed by ``keys`` with a ``delay_pNN`` column per quantile
    (``p50``, ``p95``) and ``delay_max``.
    """
    import numpy as np
    import pandas as pd

    keys = list(keys)
    rows = frame[frame["delay_bucket"].notna()]
    names = [f"delay_p{round(q * 100):d}" for q in quantiles]
    if rows.empty:
        return pd.DataFrame(columns=[*keys, *names, "delay_max"]).set_index(keys)
    rows = (rows.groupby([*keys, "delay_bucket"], dropna=False, sort=False)
            .agg(count=("count", "sum"), delay_min=("delay_min", "min"), delay_max=("delay_max", "max"))
            .reset_index().sort_values([*keys, "delay_bucket"], ignore_index=True))
    grouped = rows.groupby(keys, dropna=False, sort=False)
    counts = rows["count"].to_numpy(dtype="float64")
    after = grouped["count"].cumsum().to_numpy(dtype="float64")
    before = after - counts
    totals = grouped["count"].transform("sum").to_numpy(dtype="float64")
    result = grouped["delay_max"].max().to_frame()
    lows, highs = rows["delay_min"].to_numpy(), rows["delay_max"].to_numpy()
    for q, name in zip(quantiles, names):
        rank = q * (totals - 1)  # 0-based rank of the quantile in the group
        mask = (before <= rank) & (rank < after)
        share = np.where(counts > 1, (rank - before) / np.maximum(counts - 1, 1), 0.0)
        value = lows + np.clip(share, 0.0, 1.0) * (highs - lows)
        picked = pd.Series(value[mask], index=pd.MultiIndex.from_frame(rows.loc[mask, keys])
                           if len(keys) > 1 else pd.Index(rows.loc[mask, keys[0]], name=keys[0]))
        result[name] = picked
    return result[[*names, "delay_max"]]
