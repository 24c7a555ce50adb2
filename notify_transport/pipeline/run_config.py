"""What a pipeline run writes where, and how it windows, deduplicates and triggers (no Spark here)."""
from __future__ import annotations

import dataclasses
import logging
import os

from notify_transport.exceptions import ConfigurationError
from notify_transport.times import parse_duration

JOBS = ("archive", "stats")
#: progress lines of a run (batches, records, rate); the CLI shows them by default
PROGRESS_LOG = logging.getLogger("notify_transport.pipeline.jobs.progress")


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Where the pipeline writes and how it windows, deduplicates and triggers."""

    output: str
    checkpoint: str | None = None
    jobs: tuple[str, ...] = JOBS
    window: str = "1 minute"
    lateness: str = "10 minutes"
    dedup_horizon: str = "24 hours"
    trigger_interval: str = "10 seconds"
    source_format: str = "auto"
    starting_offsets: str = "earliest"
    max_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    #: merge the statistics files every this many micro-batches
    stats_compact_every: int = 100

    def __post_init__(self) -> None:
        unknown = [j for j in self.jobs if j not in JOBS]
        if unknown or not self.jobs:
            raise ConfigurationError(f"Unknown jobs {unknown}; choose from {', '.join(JOBS)}")
        for name in ("window", "lateness", "dedup_horizon", "trigger_interval"):
            if parse_duration(getattr(self, name)) <= 0 and name != "lateness":
                raise ConfigurationError(f"{name} must be positive, got {getattr(self, name)!r}")

    def path(self, name: str) -> str:
        """An output folder: ``archive``, ``errors`` or ``stats``."""
        return _join(self.output, name)

    @property
    def checkpoint_root(self) -> str:
        return self.checkpoint or _join(self.output, "_checkpoints")

    def checkpoint_path(self, name: str) -> str:
        return _join(self.checkpoint_root, name)

    @property
    def lateness_us(self) -> int:
        return int(parse_duration(self.lateness) * 1_000_000)


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


@dataclasses.dataclass
class RunSummary:
    """What a run read and wrote, and how long it took."""

    seconds: float
    #: Kafka records read (duplicates included)
    input_rows: int
    #: micro-batches with records
    batches: int
    notifications: int
    undecodable: int
    #: notifications more than ``lateness`` behind their partition: archived, counted apart from the windows
    late: int
    #: duplicates read after their archived copy but with an earlier broker time (:mod:`.dedup`)
    earlier_duplicates: int = 0

    @property
    def duplicates(self) -> int:
        return self.input_rows - self.notifications - self.undecodable

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "duplicates": self.duplicates}

    @classmethod
    def empty(cls, seconds: float) -> "RunSummary":
        """A run that found nothing to read."""
        return cls(round(seconds, 3), 0, 0, 0, 0, 0)


def default_output(path: str) -> str:
    """An absolute local path, or a URI kept as given (``hdfs://``, ``s3a://``...)."""
    return path if "://" in path else os.path.abspath(path)
