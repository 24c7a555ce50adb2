"""Requeue routing, dead-letter headers, the retry delay gate and the at-least-once policy
(with stand-ins for the producer and the consumer; the real ones are in tests/functional)."""
import pytest
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition
from oslo_config import cfg
from waits import Clock

from notify_transport.drivers.base import IncomingMessage
from notify_transport.drivers.config import resolve_options
from notify_transport.drivers.kafka import options as kafka_options
from notify_transport.drivers.kafka.delivery import deadletter
from notify_transport.drivers.kafka.delivery.atleastonce import AtLeastOnce
from notify_transport.drivers.kafka.delivery.commit import CommitBeforeDispatch
from notify_transport.drivers.kafka.delivery.counters import DeliveryCounters
from notify_transport.drivers.kafka.delivery.hooks import ListenerHooks
from notify_transport.drivers.kafka.message import KafkaMessage
from notify_transport.drivers.kafka.delivery.retry import DelayGate, Requeuer
from notify_transport.drivers.kafka.delivery.settings import listener_settings


def record(topic="t.info", partition=0, offset=0, value=b"v", key=b"k", headers=None, ts_ms=1000):
    return Message(topic=topic, partition=partition, offset=offset, key=key, value=value,
                   headers=headers, timestamp=(1, ts_ms))


def settings(**options):
    opts = resolve_options(cfg.ConfigOpts(), kafka_options.GROUP, kafka_options.all_opts(), {})
    return listener_settings(opts, {"delivery_mode": "at_least_once", **options})


class FakeSide:
    """Records sends; confirms or fails them when told."""

    def __init__(self):
        self.sent = []

    def send(self, topic, value, key, headers, on_done):
        self.sent.append((topic, value, key, dict(headers), on_done))

    def confirm_all(self, error=None):
        sent, self.sent = self.sent, []
        for *_, on_done in sent:
            on_done(error)
        return sent


def requeuer(side=None, hooks=ListenerHooks(), **options):
    counters = DeliveryCounters()
    return Requeuer(settings(**options), side or FakeSide(), "billing", counters, hooks,
                    topics=["t.info"]), counters


# -- headers ------------------------------------------------------------------------

def test_copy_headers_keep_the_first_origin_and_the_user_headers():
    fresh = record(offset=7, headers=[("trace", b"abc")])
    headers = dict(deadletter.copy_headers(fresh, 1, "ValueError: x", "billing"))
    assert headers == {"trace": b"abc", "nt-original-topic": b"t.info", "nt-original-partition": b"0",
                       "nt-original-offset": b"7", "nt-attempts": b"1", "nt-error": b"ValueError: x",
                       "nt-pool": b"billing"}
    retried = record(topic="t.info.retry.billing", partition=3, offset=1,
                     headers=list(headers.items()))
    assert deadletter.attempts_of(retried) == 1
    assert deadletter.origin_of(retried) == ("t.info", 0, 7)
    again = dict(deadletter.copy_headers(retried, 2, "requeued", "billing"))
    assert again["nt-original-offset"] == b"7" and again["nt-attempts"] == b"2"
    assert again["nt-error"] == b"requeued" and again["trace"] == b"abc"


def test_error_text():
    assert deadletter.error_text(None) == "requeued"
    assert deadletter.error_text(KeyError("payload")) == "KeyError: 'payload'"
    assert len(deadletter.error_text("x" * 5000)) == deadletter.MAX_ERROR_LENGTH
    assert deadletter.attempts_of(record(headers=[("nt-attempts", b"junk")])) == 0


# -- routing ------------------------------------------------------------------------

def test_requeue_goes_to_the_retry_topic_until_attempts_run_out():
    side = FakeSide()
    router, counters = requeuer(side, max_attempts=3)
    outcomes = []
    msg = record(offset=5)
    for attempt in (1, 2, 3):
        router.requeue(msg, None, outcomes.append)
        topic, value, key, headers, _ = side.sent[-1]
        assert headers["nt-attempts"] == str(attempt).encode()
        if attempt < 3:
            assert topic == "t.info.retry.billing"
        else:
            assert topic == "t.info.dlq"
        side.confirm_all()
        # the next delivery is the retry copy
        msg = record(topic=topic, offset=attempt, headers=list(headers.items()))
    assert value == b"v" and key == b"k"
    assert outcomes == [True, True, True]
    assert counters.retried.value == 2 and counters.dead_lettered.value == 1


def test_errors_go_straight_to_the_dead_letter_topic_without_requeue_on_error():
    side = FakeSide()
    router, _ = requeuer(side, requeue_on_error=False)
    router.requeue(record(), RuntimeError("db down"), lambda ok: None)
    router.requeue(record(offset=1), None, lambda ok: None)  # an explicit REQUEUE still retries
    assert [s[0] for s in side.sent] == ["t.info.dlq", "t.info.retry.billing"]
    assert side.sent[0][3]["nt-error"] == b"RuntimeError: db down"


def test_failed_copies_are_reported_and_counted():
    side = FakeSide()
    router, counters = requeuer(side)
    outcomes = []
    router.dead_letter(record(), "undecodable: not JSON", outcomes.append)
    side.confirm_all(KafkaError(KafkaError._MSG_TIMED_OUT))
    assert outcomes == [False] and counters.copy_failures.value == 1
    assert counters.dead_lettered.value == 0


def test_hooks_see_confirmed_copies():
    side = FakeSide()
    seen = []
    router, _ = requeuer(side, hooks=ListenerHooks(on_retry=seen.append, on_dead_letter=seen.append),
                         max_attempts=2)
    router.requeue(record(offset=9), ValueError("no"), lambda ok: None)
    assert seen == []  # not before the broker confirmed
    side.confirm_all()
    assert [(d.topic, d.original_offset, d.attempts, d.error) for d in seen] == [
        ("t.info.retry.billing", 9, 1, "ValueError: no")]


def test_topic_lists():
    router, _ = requeuer()
    topics = ["a.info", "a.error", "a.info"]
    assert router.retry_topics(topics) == ["a.info.retry.billing", "a.error.retry.billing"]
    assert router.dead_letter_topics(topics) == ["a.info.dlq", "a.error.dlq"]


# -- delay gate -----------------------------------------------------------------------


def test_gate_holds_until_due_and_pauses_only_that_partition():
    clock = Clock(10.0)
    paused, resumed = [], []
    gate = DelayGate(["r"], 5.0, lambda tps: paused.extend((t.topic, t.partition) for t in tps),
                     lambda tps: resumed.extend((t.topic, t.partition) for t in tps), clock)
    batch = [record("r", 0, 0, ts_ms=4000),   # due at 9: now
             record("r", 0, 1, ts_ms=6000),   # due at 11: held, pauses r[0]
             record("main", 0, 0, ts_ms=9999),  # not delayed
             record("r", 0, 2, ts_ms=1000),   # due long ago, but behind a held one
             record("r", 1, 0, ts_ms=8000)]   # due at 13: held, pauses r[1]
    out = gate.admit(batch)
    assert [(r.topic(), r.partition(), r.offset()) for r in out] == [("r", 0, 0), ("main", 0, 0)]
    assert paused == [("r", 0), ("r", 1)] and gate.held == 3
    assert gate.seconds_to_next() == 1.0
    assert gate.release(10) == []
    clock.now = 11.0
    released = gate.release(10)
    assert [(r.partition(), r.offset()) for r in released] == [(0, 1), (0, 2)]
    assert resumed == [("r", 0)]
    # new records of a partition that is held wait behind it
    assert gate.admit([record("r", 1, 1, ts_ms=0)]) == []
    clock.now = 13.0
    assert [(r.partition(), r.offset()) for r in gate.release(1)] == [(1, 0)]  # the limit
    assert [(r.partition(), r.offset()) for r in gate.release(5)] == [(1, 1)]
    assert resumed == [("r", 0), ("r", 1)] and gate.held == 0 and gate.seconds_to_next() is None


def test_gate_drop_forgets_revoked_partitions():
    gate = DelayGate(["r"], 60.0, lambda tps: None, lambda tps: None, Clock(0.0))
    gate.admit([record("r", 0, 0, ts_ms=1000), record("r", 1, 0, ts_ms=1000)])
    assert gate.drop([("r", 0)]) == 1 and gate.held == 1


# -- the at-least-once policy with a stand-in consumer ---------------------------------

class FakeConsumer:
    def __init__(self):
        self.commits = []
        self.fail_next = None

    def commit(self, offsets=None, asynchronous=True):
        if self.fail_next is not None:
            err, self.fail_next = self.fail_next, None
            raise KafkaException(err)
        self.commits.append(([(tp.topic, tp.partition, tp.offset) for tp in offsets], asynchronous))
        return None if asynchronous else [TopicPartition(tp.topic, tp.partition, tp.offset)
                                          for tp in offsets]


def policy(side=None, **options):
    s = settings(**options)
    counters = DeliveryCounters()
    side = side or FakeSide()
    committed = []
    hooks = ListenerHooks(on_commit=lambda offsets, err: committed.append((offsets, err)))
    p = AtLeastOnce(Requeuer(s, side, "g", counters, hooks, topics=["t.info"]), counters, hooks,
                    commit_interval=0)
    consumer = FakeConsumer()
    p.attach(consumer, "test")
    p.on_assigned([TopicPartition("t.info", 0, 0), TopicPartition("t.info", 1, 100)])
    return p, consumer, side, counters, committed


def hand_out(p, rec):
    handle = p.take(rec)
    return KafkaMessage({}, {"event_type": "e", "priority": "INFO"}, rec, handle.on_ack,
                        handle.on_requeue, handle)


def test_policy_commits_only_the_finished_prefix():
    p, consumer, _, counters, committed = policy()
    msgs = [hand_out(p, record(offset=i)) for i in range(4)]
    msgs[1].acknowledge()
    msgs[2].acknowledge()
    p.commit()
    assert consumer.commits == []  # offset 0 still running
    msgs[0].acknowledge()
    p.commit()
    assert consumer.commits == [([("t.info", 0, 3)], False)]
    assert p.committed == {("t.info", 0): 3} and counters.commits.value == 1
    assert committed == [([("t.info", 0, 3)], None)]
    p.commit()
    assert len(consumer.commits) == 1  # nothing new
    p.tick()  # interval 0: asynchronous commit of what moved since (nothing)
    assert len(consumer.commits) == 1
    msgs[3].acknowledge()
    p.tick()
    assert consumer.commits[-1] == ([("t.info", 0, 4)], True)


def test_requeued_offset_is_committed_only_after_the_copy_is_confirmed():
    p, consumer, side, _, _ = policy()
    first = hand_out(p, record(offset=0))
    first.error = RuntimeError("boom")
    first.requeue()
    p.commit()
    assert consumer.commits == [] and side.sent[0][0] == "t.info.retry.g"
    side.confirm_all()
    p.commit()
    assert consumer.commits == [([("t.info", 0, 1)], False)]


def test_failed_copy_keeps_the_offset_uncommitted(caplog):
    p, consumer, side, _, _ = policy()
    hand_out(p, record(offset=0)).requeue()
    side.confirm_all(KafkaError(KafkaError._MSG_TIMED_OUT))
    p.commit()
    assert consumer.commits == []
    assert any("stays uncommitted" in r.getMessage() for r in caplog.records)


def test_undecodable_records_are_dead_lettered_then_committed():
    p, consumer, side, _, _ = policy()
    bad = record(offset=0, value=b"\xff")
    p.take(bad)
    p.on_undecodable(bad, ValueError("not JSON"))
    topic, _, _, headers, _ = side.sent[0]
    assert topic == "t.info.dlq" and headers["nt-error"].startswith(b"undecodable: ")
    assert headers["nt-attempts"] == b"1"
    side.confirm_all()
    p.commit()
    assert consumer.commits == [([("t.info", 0, 1)], False)]


def test_revoke_commits_synchronously_and_late_acks_are_ignored():
    p, consumer, _, _, _ = policy()
    a = hand_out(p, record(offset=0))
    b = hand_out(p, record(offset=1))
    other = hand_out(p, record(partition=1, offset=100))
    a.acknowledge()
    p.on_revoke([TopicPartition("t.info", 0)])
    assert consumer.commits == [([("t.info", 0, 1)], False)]
    assert not p.still_owned(b) and p.still_owned(other)
    b.acknowledge()  # finished after the revoke: nothing more is committed for it
    p.on_assigned([TopicPartition("t.info", 0, 1)])  # the partition comes back
    p.commit()
    assert consumer.commits == [([("t.info", 0, 1)], False)]
    other.acknowledge()
    p.on_close()
    assert consumer.commits[-1] == ([("t.info", 1, 101)], False)


def test_lost_partitions_are_not_committed(caplog):
    p, consumer, _, _, _ = policy()
    hand_out(p, record(offset=0)).acknowledge()
    p.on_revoke([TopicPartition("t.info", 0)], lost=True)
    assert consumer.commits == []
    assert any("delivered again" in r.getMessage() for r in caplog.records)


def test_failed_commit_is_counted_and_retried_later():
    p, consumer, _, counters, committed = policy()
    hand_out(p, record(offset=0)).acknowledge()
    consumer.fail_next = KafkaError(KafkaError.REBALANCE_IN_PROGRESS)
    p.commit()
    assert counters.commit_failures.value == 1 and committed[-1][1]
    p.commit()
    assert consumer.commits == [([("t.info", 0, 1)], False)]


def test_commit_before_dispatch_with_a_dead_letter_topic():
    side = FakeSide()
    s = settings(delivery_mode="commit_before_dispatch", retry_topic="{topic}.r.{pool}")
    router = Requeuer(s, side, "g", DeliveryCounters(), ListenerHooks(), topics=["t.info"])
    cbd = CommitBeforeDispatch(router, ListenerHooks())
    consumer = FakeConsumer()
    cbd.attach(consumer, "cbd")
    recs = [record(offset=i) for i in range(2)]
    assert cbd.on_polled(recs) is None  # a small batch is committed inline
    assert consumer.commits == [([("t.info", 0, 2)], False)] and cbd.committed == {("t.info", 0): 2}
    msg = KafkaMessage({}, {}, recs[0], cbd.on_ack, cbd.on_requeue)
    msg.requeue()
    cbd.on_undecodable(recs[1], ValueError("bad"))
    assert [s[0] for s in side.sent] == ["t.info.r.g", "t.info.dlq"]


def test_incoming_message_has_an_error_slot():
    msg = IncomingMessage({}, {})
    assert msg.error is None
    msg.error = ValueError("x")
    assert isinstance(msg.error, ValueError)
    kafka_msg = KafkaMessage({}, {}, record())
    assert getattr(kafka_msg, "error", None) is None


@pytest.mark.parametrize("error", [None, ValueError("v")])
def test_dispatcher_keeps_the_endpoint_error(error):
    from notify_transport.notify.dispatcher import NotificationDispatcher, NotificationResult

    class Endpoint:
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            if error is not None:
                raise error
            return NotificationResult.REQUEUE

    msg = IncomingMessage({}, {"priority": "INFO", "event_type": "e", "payload": {}})
    assert NotificationDispatcher([Endpoint()]).dispatch(msg) == NotificationResult.REQUEUE
    assert msg.error is error
