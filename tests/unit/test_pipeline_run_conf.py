"""Per-run Spark settings chosen from the backlog a run will read, and the backlog's count."""
import json

import pytest

pytest.importorskip("pyspark")

from notify_transport.pipeline import caught_up  # noqa: E402
from notify_transport.pipeline.session import (JAVA_OPTIONS, QUICK_START, SMALL_RUN_RECORDS,  # noqa: E402
                                                default_conf, run_conf, small_run)

INTERPRETED = {"spark.sql.codegen.wholeStage": "false"}


@pytest.mark.parametrize("backlog", [1, 5000, SMALL_RUN_RECORDS])
def test_a_small_known_backlog_runs_its_plans_interpreted(backlog):
    assert run_conf(backlog) == INTERPRETED


@pytest.mark.parametrize("backlog", [None, SMALL_RUN_RECORDS + 1, 10 * SMALL_RUN_RECORDS])
def test_an_unknown_or_large_backlog_keeps_sparks_defaults(backlog):
    assert run_conf(backlog) == {}


@pytest.mark.parametrize("backlog, quick", [(0, True), (SMALL_RUN_RECORDS, True), (SMALL_RUN_RECORDS + 1, False),
                                            (None, False)])
def test_only_a_small_known_backlog_starts_the_jvm_with_c1_only(backlog, quick):
    """C1 starts sooner but compiles slower code: a large or unbounded run (a continuous one) needs C2."""
    assert small_run(backlog) is quick
    options = default_conf("local[2]", quick_start=small_run(backlog))[JAVA_OPTIONS].split()
    assert (QUICK_START in options) is quick and "-Xss16m" in options


def test_no_last_run_means_an_unknown_backlog_without_asking_kafka(tmp_path):
    # no last_run.json: the broker is never asked (its address does not even resolve)
    assert caught_up.waiting(str(tmp_path), {"bootstrap.servers": "nowhere.invalid:1"}, None) is None


def test_the_backlog_counts_records_past_the_last_run_and_whole_new_partitions():
    done = {("t", 0): 10, ("t", 1): 5}
    latest = {("t", 0): 12, ("t", 1): 5, ("t", 2): 7}
    assert caught_up.news(done, latest, earliest={("t", 2): 3}) == 2 + 0 + 4


def test_a_recorded_last_run_is_read_back(tmp_path):
    (tmp_path / caught_up.LAST_RUN).write_text(json.dumps({"t": {"0": 10, "1": 5}}))
    assert caught_up.recorded(str(tmp_path)) == {("t", 0): 10, ("t", 1): 5}
