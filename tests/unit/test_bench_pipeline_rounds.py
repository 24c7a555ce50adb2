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
