"""Ordered workers (virtual partitions): order per key, parallel across keys, bounded, stoppable."""
import threading
import time

from notify_transport.drivers.kafka.delivery.workers import OrderedWorkers, worker_index


def threads_named(prefix):
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


class WatchedSlots(threading.Semaphore):
    """The workers' in-flight slots, telling when a submitter waited for one in vain."""

    def __init__(self, value):
        super().__init__(value)
        self.waited = threading.Event()

    def acquire(self, blocking=True, timeout=None):
        got = super().acquire(blocking, timeout)
        if not got:
            self.waited.set()
        return got


def watched(workers):
    workers._slots = WatchedSlots(workers.max_in_flight)  # before anything is submitted
    return workers._slots


def test_worker_index_is_stable_by_key_and_by_partition_without_key():
    assert worker_index(b"pub-1", "t", 0, 1) == 0
    picks = {worker_index(f"pub-{i}".encode(), "t", 0, 4) for i in range(50)}
    assert picks == {0, 1, 2, 3}
    assert worker_index(b"pub-1", "t", 0, 4) == worker_index(b"pub-1", "other", 7, 4)
    assert worker_index("pub-1", "t", 0, 4) == worker_index(b"pub-1", "t", 0, 4)
    assert worker_index(None, "t", 2, 4) == worker_index(None, "t", 2, 4)


def test_order_is_kept_per_key_while_keys_run_in_parallel():
    workers = OrderedWorkers(4, 100, name="t-order")
    done: dict[str, list[int]] = {}
    lock = threading.Lock()
    running = 0
    most = 0

    def item(key, n):
        def run():
            nonlocal running, most
            with lock:
                running += 1
                most = max(most, running)
            time.sleep(0.002 * (n % 3))
            with lock:
                running -= 1
                done.setdefault(key, []).append(n)
        return run

    keys = [f"k{i}".encode() for i in range(8)]
    for n in range(200):
        key = keys[n % 8]
        assert workers.submit(worker_index(key, "t", 0, 4), item(key, n))
    assert workers.drain(10)
    assert sum(map(len, done.values())) == 200
    for key in keys:
        assert done[key] == sorted(done[key])  # each key in submission order
    assert most > 1  # different keys did run at the same time
    assert workers.close(5)
    assert not threads_named("t-order")


def test_submit_blocks_at_max_in_flight():
    workers = OrderedWorkers(2, 2, name="t-bound")
    slots = watched(workers)
    gate = threading.Event()
    for i in range(2):
        assert workers.submit(i, gate.wait)
    assert workers.in_flight == 2 and not slots.waited.is_set()
    third = threading.Thread(target=lambda: workers.submit(0, lambda: None))
    third.start()
    assert slots.waited.wait(5)  # the third submitter waited for a slot
    assert third.is_alive() and workers.in_flight == 2
    gate.set()
    third.join(5)
    assert not third.is_alive()
    assert workers.drain(5) and workers.in_flight == 0
    workers.close(5)


def test_cancel_drops_queued_items_and_unblocks_submitters():
    workers = OrderedWorkers(1, 3, name="t-cancel")
    slots = watched(workers)
    gate = threading.Event()
    ran = []
    workers.submit(0, gate.wait)
    workers.submit(0, lambda: ran.append(1))
    workers.submit(0, lambda: ran.append(2))
    results = []
    blocked = threading.Thread(target=lambda: results.append(workers.submit(0, lambda: ran.append(3))))
    blocked.start()
    assert slots.waited.wait(5)  # the fourth submitter is blocked, waiting for a slot
    workers.cancel()
    blocked.join(5)
    assert results == [False]
    gate.set()
    assert workers.drain(5)
    assert ran == [] and workers.dropped == 2
    assert not workers.submit(0, lambda: None)
    assert workers.close(5)


def test_drain_times_out_and_close_is_bounded_with_a_stuck_item():
    workers = OrderedWorkers(1, 2, name="t-stuck")
    release = threading.Event()
    workers.submit(0, release.wait)
    assert not workers.drain(0.2)
    started = time.monotonic()
    assert not workers.close(0.3)  # bounded even though the item never returns
    assert time.monotonic() - started < 2
    release.set()
    for thread in threads_named("t-stuck"):
        thread.join(5)
    assert not threads_named("t-stuck")


def test_an_item_that_raises_does_not_kill_its_worker(caplog):
    workers = OrderedWorkers(1, 5, name="t-raise")
    ran = []
    workers.submit(0, lambda: 1 / 0)
    workers.submit(0, lambda: ran.append("after"))
    assert workers.drain(5) and ran == ["after"]
    assert any("raised" in r.getMessage() for r in caplog.records)
    workers.close(5)
