"""Which statistics files hold the current numbers, and loading them without Spark.

Each micro-batch appends partial counts (``batch-N-*`` files); every so often
they are merged into one ``compact-N-TOKEN-*`` file covering batches up to
``N``. Partial counts add up, so a file must never be counted twice: the
newest compaction wins and batch files it covers are ignored, even while
they still exist (a crash between writing the merged file and deleting the
originals, or a batch replayed after a restart). Spark (compaction) and the
report (pyarrow) choose files with the same :func:`effective_files`.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable

#: the columns that identify a partial count; the rest add up
STATS_KEY = ["window_start", "window_end", "event_type", "publisher_id", "priority", "late",
             "delay_bucket"]
STATS_VALUES = ["count", "delay_min", "delay_max"]

_NAME = re.compile(r"^(batch|compact)-(\d{12})-(?:([0-9a-f]{8})-)?")


def effective_files(paths: Iterable[str]) -> list[str]:
    """The files whose rows, summed, are the statistics: the newest compaction and later batches."""
    parsed = []
    for path in paths:
        match = _NAME.match(path.rstrip("/").rsplit("/", 1)[-1])
        if match:
            parsed.append((match.group(1), int(match.group(2)), match.group(3) or "", path))
    compactions = sorted({(n, token) for kind, n, token, _ in parsed if kind == "compact"})
    if not compactions:
        return sorted(p for _, _, _, p in parsed)
    newest = compactions[-1]
    return sorted(p for kind, n, token, p in parsed
                  if (kind == "compact" and (n, token) == newest) or (kind == "batch" and n > newest[0]))


def batch_number(path: str) -> int:
    """The batch a ``batch-N-*`` or ``compact-N-*`` file belongs to (-1 for other names)."""
    match = _NAME.match(path.rstrip("/").rsplit("/", 1)[-1])
    return int(match.group(2)) if match else -1


def load_partials(path: str | os.PathLike):
    """The statistics' partial counts summed per :data:`STATS_KEY` (a pandas frame)."""
    import pandas as pd
    import pyarrow.dataset as ds

    root = Path(path)
    files = effective_files(str(p) for p in root.glob("*.parquet")) if root.is_dir() else []
    if not files:
        return pd.DataFrame(columns=[*STATS_KEY, *STATS_VALUES])
    frame = ds.dataset(files, format="parquet").to_table(columns=[*STATS_KEY, *STATS_VALUES]).to_pandas()
    return (frame.groupby(STATS_KEY, dropna=False, sort=False)
            .agg(count=("count", "sum"), delay_min=("delay_min", "min"), delay_max=("delay_max", "max"))
            .reset_index())
