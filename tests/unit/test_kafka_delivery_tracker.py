"""The at-least-once offset tracker: only the contiguous finished prefix is committed."""
import random
import threading

from notify_transport.drivers.kafka.delivery.tracker import OffsetTracker, PartitionTrack


def test_in_order_completion_moves_the_position_each_time():
    track = PartitionTrack("t", 0, 5)
    for offset in (5, 6, 7):
        track.add(offset)
    assert track.position == 5 and not track.uncommitted
    assert track.finish(5) and track.position == 6
    assert track.finish(6) and track.position == 7
    assert track.finish(7) and track.position == 8
    assert track.in_flight == 0 and track.uncommitted


def test_out_of_order_completion_waits_for_the_gap():
    track = PartitionTrack("t", 0, 0)
    for offset in range(5):
        track.add(offset)
    assert not track.finish(3)
    assert not track.finish(1)
    assert track.position == 0  # 0 is still running
    assert track.finish(0) and track.position == 2  # 0 and 1 done; 2 is not
    assert not track.finish(4) and track.position == 2
    assert track.finish(2) and track.position == 5  # the whole prefix at once
    assert track.in_flight == 0


def test_offsets_need_not_be_consecutive():
    """Compaction and transaction markers leave gaps: hand-out order is what counts."""
    track = PartitionTrack("t", 0, 10)
    for offset in (10, 13, 20):
        track.add(offset)
    assert not track.finish(20)
    assert track.finish(10) and track.position == 11
    assert track.finish(13) and track.position == 21


def test_unknown_double_and_old_offsets_change_nothing():
    track = PartitionTrack("t", 0, 10)
    track.add(9)  # behind the start position: delivered again, nothing to track
    assert track.in_flight == 0
    track.add(10)
    track.add(10)  # handed out twice: tracked once
    assert track.in_flight == 1
    assert not track.finish(11)  # never handed out
    assert track.finish(10) and track.position == 11
    assert not track.finish(10)  # finished twice
    assert track.position == 11


def test_a_closed_track_ignores_late_completions():
    track = PartitionTrack("t", 0, 0)
    for offset in range(3):
        track.add(offset)
    track.finish(0)
    assert track.close() == 1  # the last position to commit on revoke
    assert not track.finish(1) and track.position == 1
    track.add(3)
    assert track.in_flight == 2  # nothing new tracked after close


def test_close_returns_none_when_nothing_new():
    track = PartitionTrack("t", 0, 4)
    assert track.close() is None
    track = PartitionTrack("t", 0, 4)
    track.add(4)
    track.finish(4)
    track.committed = 5
    assert track.close() is None


def test_random_completion_order_always_commits_a_finished_prefix():
    rng = random.Random(7)
    for _ in range(50):
        count = rng.randint(1, 60)
        offsets = sorted(rng.sample(range(200), count))
        track = PartitionTrack("t", 0, offsets[0])
        for offset in offsets:
            track.add(offset)
        finished: set[int] = set()
        for offset in rng.sample(offsets, count):
            track.finish(offset)
            finished.add(offset)
            # every handed-out offset below the position has finished...
            assert all(o in finished for o in offsets if o < track.position)
            # ...and the first unfinished one is exactly at the position (or the end)
            pending = [o for o in offsets if o not in finished]
            if pending:
                assert track.position <= pending[0]
                assert all(o in finished for o in offsets if o < pending[0])
                assert track.position == max([offsets[0]] + [o + 1 for o in offsets
                                                             if o < pending[0]])
        assert track.position == offsets[-1] + 1


def test_threads_finishing_concurrently():
    track = PartitionTrack("t", 0, 0)
    for offset in range(4000):
        track.add(offset)
    order = list(range(4000))
    random.Random(3).shuffle(order)
    chunks = [order[i::4] for i in range(4)]
    threads = [threading.Thread(target=lambda c=c: [track.finish(o) for o in c]) for c in chunks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert track.position == 4000 and track.in_flight == 0


def test_tracker_assign_revoke_and_uncommitted():
    tracker = OffsetTracker()
    a = tracker.assign("t", 0, 0)
    b = tracker.assign("t", 1, -1001)  # no committed offset yet
    assert b.position is None
    a.add(0)
    b.add(7)
    assert tracker.in_flight == 2
    a.finish(0)
    assert tracker.uncommitted() == [a]
    gone = tracker.revoke([("t", 0)])
    assert gone == [a] and tracker.tracks() == [b]
    again = tracker.assign("t", 0, 1)  # the partition comes back: a new track
    assert again is not a and tracker.get("t", 0) is again
    assert tracker.get("u", 3).position is None  # missed assignment: made on demand
    replaced = tracker.assign("t", 1, 7)
    assert b.closed and not replaced.closed
