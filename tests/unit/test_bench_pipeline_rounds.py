"""The pipeline benchmark's choice among rounds, without a broker or Spark."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.path.join(ROOT, "bench") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "bench"))

import bench_pipeline  # noqa: E402


def test_the_faster_complete_round_is_kept():
    assert bench_pipeline._faster((200, 5.0), (200, 3.0), 200) == (200, 3.0)
    assert bench_pipeline._faster((200, 3.0), (200, 5.0), 200) == (200, 3.0)


def test_a_round_cut_short_never_beats_a_complete_one():
    # a round whose time bound ran out read fewer rows in less time: it is not faster
    assert bench_pipeline._faster((200, 5.0), (120, 1.0), 200) == (200, 5.0)
    assert bench_pipeline._faster((120, 1.0), (200, 5.0), 200) == (200, 5.0)


def test_of_two_short_rounds_the_faster_is_kept():
    assert bench_pipeline._faster((120, 4.0), (150, 2.0), 200) == (150, 2.0)


@pytest.mark.parametrize("rounds", ["0", "-1"])
def test_rounds_below_one_are_refused_before_anything_starts(rounds, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_pipeline.main(["--rounds", rounds])
    assert exit_info.value.code == 2
    assert "--rounds" in capsys.readouterr().err


def _wall(seconds, complete=True):
    return {"rows": 5000, "seconds": seconds, "rate": 0.0, "complete": complete, "wall": True}


def test_each_readers_incremental_run_is_read_against_the_floor_timed_beside_it():
    phases = {"cli first run, 14x3 [kafka]": _wall(22.8), "cli nothing new, 14x3 [kafka]": _wall(1.1),
              "cli Spark floor [kafka]": _wall(6.5), "cli 5000 new, 14x3 [kafka]": _wall(23.3),
              "cli Spark floor [notify_kafka]": _wall(7.0), "cli 5000 new, 14x3 [notify_kafka]": _wall(17.25)}
    lines = bench_pipeline.over_floor(phases)
    assert len(lines) == 2
    assert lines[0].startswith("cli 5000 new, 14x3 [kafka]: 23.30 s = Spark's floor 6.50 s")
    assert lines[0].endswith("+ 16.80 s of the pipeline's own")
    assert lines[1].startswith("cli 5000 new, 14x3 [notify_kafka]: 17.25 s = Spark's floor 7.00 s")
    assert lines[1].endswith("+ 10.25 s of the pipeline's own")


def test_no_reading_without_a_complete_floor_or_a_complete_run():
    phases = {"cli Spark floor [kafka]": _wall(6.5, complete=False), "cli 5000 new, 14x3 [kafka]": _wall(23.3),
              "cli Spark floor [notify_kafka]": _wall(7.0),
              "cli 5000 new, 14x3 [notify_kafka]": _wall(17.25, complete=False)}
    assert bench_pipeline.over_floor(phases) == []
