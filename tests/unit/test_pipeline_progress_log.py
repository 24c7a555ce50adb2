"""The pipeline's progress lines (:class:`~notify_transport.pipeline.jobs.ProgressLog`), without Spark."""
from __future__ import annotations

import logging
from types import SimpleNamespace

from notify_transport.pipeline import jobs


def _progress(batch: int, rows: int, latest: int, end: int) -> SimpleNamespace:
    source = SimpleNamespace(latestOffset=f'{{"t": {{"0": {latest}}}}}', endOffset=f'{{"t": {{"0": {end}}}}}')
    return SimpleNamespace(batchId=batch, numInputRows=rows, durationMs={"triggerExecution": 2000},
                           sources=[source])


def test_a_line_per_batch_with_the_run_so_far(caplog) -> None:
    log = jobs.ProgressLog()
    with caplog.at_level(logging.INFO, logger=jobs.PROGRESS_LOG.name):
        log.update([_progress(0, 100, 300, 100)])
        log.update([_progress(0, 100, 300, 100), _progress(1, 200, 300, 300)])  # batch 0 seen once
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("Batch 0: 100 records in 2.0 s (50 records/s); 100 records in 1 batch so far")
    assert lines[0].endswith(", 200 behind")
    assert lines[1].startswith("Batch 1: 200 records in 2.0 s (100 records/s); 300 records in 2 batches so far")
    assert lines[1].endswith(", 0 behind")


def test_an_empty_batch_says_nothing(caplog) -> None:
    with caplog.at_level(logging.INFO, logger=jobs.PROGRESS_LOG.name):
        jobs.ProgressLog().update([_progress(0, 0, 0, 0)])
    assert caplog.records == []
