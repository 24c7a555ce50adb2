"""Commit before dispatch with the commit running while the batch is decoded."""
from __future__ import annotations

import logging
import threading

from confluent_kafka import KafkaError, KafkaException, Message

from notify_transport.drivers.kafka.delivery.commit import CommitBeforeDispatch
from notify_transport.drivers.kafka.listener import KafkaListener
from notify_transport.drivers.kafka.delivery.hooks import ListenerHooks
from notify_transport.drivers.envelope import encode


def records(n: int, partition: int = 0, value: bytes = b"{}") -> list[Message]:
    return [Message(topic="t.info", partition=partition, offset=i, value=value) for i in range(n)]


class GatedConsumer:
    """commit() blocks until released, and remembers the thread it ran on."""

    def __init__(self, errors: list[KafkaError] | None = None) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.commits: list[tuple[list[tuple[str, int, int]], bool, str]] = []
        self.errors = list(errors or [])

    def commit(self, offsets=None, asynchronous=True):
        self.entered.set()
        assert self.release.wait(10)
        if self.errors:
            raise KafkaException(self.errors.pop(0))
        self.commits.append(([(tp.topic, tp.partition, tp.offset) for tp in offsets], asynchronous,
                             threading.current_thread().name))


def policy(consumer, hooks=None) -> CommitBeforeDispatch:
    p = CommitBeforeDispatch(hooks=hooks or ListenerHooks())
    p.attach(consumer, "overlap")
    return p


def test_a_large_batch_is_committed_on_another_thread_while_the_caller_goes_on():
    consumer = GatedConsumer()
    seen = []
    p = policy(consumer, ListenerHooks(on_commit=lambda offsets, err: seen.append(
        (offsets, err, threading.current_thread().name))))
    finish = p.on_polled(records(40) + records(3, partition=1))
    assert finish is not None
    assert consumer.entered.wait(5)  # the commit was sent before on_polled returned ...
    assert consumer.commits == [] and p.committed == {}  # ... and it is still running
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (finish(), done.set()))
    waiter.start()
    assert not done.wait(0.2)  # finish() waits for the broker's answer
    consumer.release.set()
    assert done.wait(5)
    waiter.join()
    offsets, asynchronous, thread = consumer.commits[0]
    assert sorted(offsets) == [("t.info", 0, 40), ("t.info", 1, 3)] and asynchronous is False
    assert thread.startswith("notify-kafka-commit-")
    assert p.committed == {("t.info", 0): 40, ("t.info", 1): 3}
    # the hook runs in the thread that called finish(), as before
    assert seen and seen[0][2] == waiter.name
    p.on_close()


def test_a_small_batch_is_committed_inline():
    consumer = GatedConsumer()
    consumer.release.set()
    p = policy(consumer)
    assert p.on_polled(records(3)) is None
    assert consumer.commits[0][2] == threading.current_thread().name
    assert p.committed == {("t.info", 0): 3}


def test_a_retriable_error_is_retried_and_a_failure_is_logged_not_recorded(caplog):
    consumer = GatedConsumer([KafkaError(KafkaError.REQUEST_TIMED_OUT, "slow", retriable=True)])
    consumer.release.set()
    p = policy(consumer)
    p.on_polled(records(50))()
    assert p.committed == {("t.info", 0): 50} and len(consumer.commits) == 1

    consumer.errors = [KafkaError(KafkaError.ILLEGAL_GENERATION, "rebalanced")]
    with caplog.at_level(logging.WARNING):
        p.on_polled(records(60))()
    assert p.committed == {("t.info", 0): 50}  # unchanged: the batch was not committed
    assert "could not commit offsets t.info[0]@60 before dispatch" in caplog.text
    p.on_close()


def test_close_stops_the_commit_thread():
    consumer = GatedConsumer()
    consumer.release.set()
    p = policy(consumer)
    p.on_polled(records(40))()
    thread = p._committer._thread
    p.on_close()
    thread.join(5)
    assert not thread.is_alive() and p._committer is None


def test_the_listener_waits_for_the_commit_even_when_decoding_raises(monkeypatch):
    consumer = GatedConsumer()
    consumer.release.set()
    p = policy(consumer)
    listener = KafkaListener({"group.id": "g"}, ["t.info"], p)
    good = encode({"event_type": "e", "priority": "INFO", "payload": {}}, {})
    out = listener.hand_out.messages(records(40, value=good))
    assert len(out) == 40 and p.committed == {("t.info", 0): 40}

    import notify_transport.drivers.kafka.hand_out as hand_out_module

    def explode(raw):
        raise RuntimeError("boom")
    monkeypatch.setattr(hand_out_module, "decode_notification", explode)
    assert listener.hand_out.messages(records(42, value=good)) == []  # a decoder error: undecodable records
    assert listener.skipped == 42 and p.committed == {("t.info", 0): 42}

    def no_message(*args):  # an error outside the decoder (a bug) still reaches the caller
        raise RuntimeError("boom")
    monkeypatch.undo()
    monkeypatch.setattr(hand_out_module, "KafkaMessage", no_message)
    try:
        listener.hand_out.messages(records(45, value=good))
    except RuntimeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("the error should reach the caller")
    assert p.committed == {("t.info", 0): 45}  # finished (and recorded) all the same
    p.on_close()


def test_a_chunked_listener_holds_the_rest_of_a_committed_batch_and_returns_it_after_stop(caplog):
    consumer = GatedConsumer()
    consumer.release.set()
    p = policy(consumer)
    p.OVERLAP_MIN_RECORDS = 10_000  # committed inline: no decoding ahead while it runs
    listener = KafkaListener({"group.id": "g"}, ["t.info"], p, hand_out_chunk=50)
    good = encode({"event_type": "e", "priority": "INFO", "payload": {}}, {})
    bad = b"not json"
    batch = records(200, value=good)
    batch[60] = Message(topic="t.info", partition=0, offset=60, value=bad)
    first = listener.hand_out.messages(batch)
    assert p.committed == {("t.info", 0): 200}  # the whole batch went through the policy
    assert len(first) == 50 and len(listener.hand_out.ready) == 150  # the rest is held
    listener._consumer = object()  # as if started; poll() serves what it holds first
    listener.stop()
    got = list(first)
    while True:
        piece = listener.poll(timeout=0, max_messages=500)
        if not piece:
            break
        assert len(piece) <= 50
        got += piece
    assert [m.offset for m in got] == [i for i in range(200) if i != 60]  # in order, bad one skipped
    assert listener.skipped == 1

    # what is still held at close (an abrupt stop) is counted and logged, not dropped silently
    listener.hand_out.ready = records(7, value=good)
    listener._consumer = type("C", (), {"close": lambda self: None, "unsubscribe": lambda self: None,
                                        "poll": lambda self, timeout=None: None})()
    with caplog.at_level(logging.WARNING):
        listener._close_consumer()
    assert "7 received notification(s) not dispatched at close" in caplog.text
    assert listener.counters.cancelled.value == 7


def test_pieces_are_decoded_ahead_only_while_the_commit_runs():
    consumer = GatedConsumer()
    p = policy(consumer)
    listener = KafkaListener({"group.id": "g"}, ["t.info"], p, hand_out_chunk=50)
    good = encode({"event_type": "e", "priority": "INFO", "payload": {}}, {})
    threading.Timer(0.3, consumer.release.set).start()  # the broker answers late
    first = listener.hand_out.messages(records(400, value=good))
    assert len(first) == 400 and not listener.hand_out.ready  # everything decoded while it waited
    p.on_close()
