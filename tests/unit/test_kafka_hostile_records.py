"""Hostile records on the Kafka path, with stand-ins for the clients.

* a record no decoder can take (nested deeper than any parser goes, or odd in
  some other way) is undecodable: logged with its coordinates, dead-lettered
  when a dead-letter topic is configured; its neighbours are dispatched and
  at-least-once commits go on past it;
* where a retry / dead-letter copy goes is decided by the topic the record
  was read from and the listener's configuration; headers are copied, never
  obeyed.
"""
import json
import logging

import pytest
from confluent_kafka import Message, TopicPartition
from oslo_config import cfg

from notify_transport.drivers import envelope
from notify_transport.drivers.config import resolve_options
from notify_transport.drivers.kafka import options as kafka_options
from notify_transport.drivers.kafka.delivery.atleastonce import AtLeastOnce
from notify_transport.drivers.kafka.delivery.commit import CommitBeforeDispatch, CommitPolicy
from notify_transport.drivers.kafka.listener import KafkaListener
from notify_transport.drivers.kafka.delivery.counters import DeliveryCounters
from notify_transport.drivers.kafka.delivery.hooks import ListenerHooks
from notify_transport.drivers.kafka.delivery.retry import Requeuer
from notify_transport.drivers.kafka.delivery.settings import listener_settings
from notify_transport.exceptions import DecodeError

TOPIC = "t.info"
NESTED = b"[" * 3000 + b"]" * 3000


def valid(i: int) -> bytes:
    return envelope.encode({"event_type": "e", "priority": "INFO", "payload": {"i": i},
                            "publisher_id": "p", "message_id": str(i), "timestamp": "t"}, {})


def deep_payload(levels: int) -> bytes:
    """A well-formed notification whose payload nests ``levels`` lists deep."""
    inner = ('{"event_type": "e", "priority": "INFO", "payload": ' + "[" * levels + "]" * levels + "}")
    return json.dumps({"oslo.version": "2.0", "oslo.message": inner}).encode()


def record(offset, value, topic=TOPIC, partition=0, headers=None):
    return Message(topic=topic, partition=partition, offset=offset, key=b"k", value=value,
                   headers=headers, timestamp=(1, 1000))


class FakeSide:
    def __init__(self):
        self.sent = []

    def send(self, topic, value, key, headers, on_done):
        self.sent.append((topic, value, key, dict(headers), on_done))

    def confirm_all(self):
        sent, self.sent = self.sent, []
        for *_, on_done in sent:
            on_done(None)
        return sent


class FakeConsumer:
    def __init__(self):
        self.commits = []

    def commit(self, offsets=None, asynchronous=True):
        self.commits.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])
        return None if asynchronous else offsets


def settings(**options):
    opts = resolve_options(cfg.ConfigOpts(), kafka_options.GROUP, kafka_options.all_opts(), {})
    return listener_settings(opts, options)


def requeuer(side, **options):
    return Requeuer(settings(**options), side, "billing", DeliveryCounters(), ListenerHooks(),
                    topics=[TOPIC])


def listener(policy: CommitPolicy, **options) -> KafkaListener:
    if policy.consumer is None:
        policy.attach(FakeConsumer(), "test")
    return KafkaListener({"group.id": "billing"}, [TOPIC], policy, settings=settings(**options))


def at_least_once_listener():
    """``(side, consumer, policy, listener)``: an at-least-once listener owning t.info[0]."""
    side = FakeSide()
    policy = AtLeastOnce(requeuer(side, delivery_mode="at_least_once"), DeliveryCounters(),
                         ListenerHooks(), commit_interval=0)
    consumer = FakeConsumer()
    policy.attach(consumer, "test")
    policy.on_assigned([TopicPartition(TOPIC, 0, 0)])
    return side, consumer, policy, listener(policy, delivery_mode="at_least_once")


# -- item 1: nothing in a record escapes the decoder ------------------------------------

@pytest.mark.parametrize("raw", [NESTED, deep_payload(2000), deep_payload(5000),
                                 b'{"oslo.version": ' + b"[" * 900 + b"]" * 900 + b', "oslo.message": "{}"}',
                                 b'{"oslo.version": "2.0", "oslo.message": "' + b"[" * 3000 + b'"}'],
                         ids=["bare-3000", "payload-2000", "payload-5000", "version-900", "inner-open"])
def test_deeply_nested_records_are_undecodable_not_errors(raw):
    with pytest.raises(DecodeError) as info:
        envelope.decode_notification(raw)
    assert len(str(info.value)) < 300  # the reason, never the record
    with pytest.raises(DecodeError):
        envelope.decode(raw)


def test_a_nested_record_among_valid_ones_loses_no_neighbour(caplog):
    caplog.set_level(logging.WARNING, "notify_transport")
    lst = listener(CommitBeforeDispatch())
    records = [record(i, valid(i)) for i in range(500)] + [record(500, NESTED)] + \
        [record(501 + i, valid(500 + i)) for i in range(500)] + [record(1001, deep_payload(2000))]
    messages = lst.hand_out.messages(records)
    assert [m.message["payload"]["i"] for m in messages] == list(range(1000))
    assert lst.skipped == 2 and lst.counters.undecodable.value == 2
    logged = [r.getMessage() for r in caplog.records if "undecodable" in r.getMessage()]
    assert any(f"{TOPIC}[0]@500" in line for line in logged)
    assert any(f"{TOPIC}[0]@1001" in line for line in logged)


def test_at_least_once_dead_letters_the_nested_record_and_commits_past_it():
    side, consumer, policy, lst = at_least_once_listener()
    messages = lst.hand_out.messages([record(0, valid(0)), record(1, NESTED), record(2, valid(2))])
    assert [m.offset for m in messages] == [0, 2]
    for m in messages:
        m.acknowledge()
    (topic, value, _, headers, _), = side.confirm_all()
    assert topic == "t.info.dlq" and value == NESTED
    assert headers["nt-error"].startswith(b"undecodable: ") and headers["nt-original-offset"] == b"1"
    policy.commit()
    assert consumer.commits[-1] == [(TOPIC, 0, 3)]


def test_any_exception_out_of_the_decoder_is_an_undecodable_record(monkeypatch):
    import notify_transport.drivers.kafka.hand_out as hand_out_module

    def broken(raw):
        if raw == b"boom":
            raise MemoryError("decoder ran out of memory")
        return envelope.decode_notification(raw)

    monkeypatch.setattr(hand_out_module, "decode_notification", broken)
    lst = listener(CommitBeforeDispatch())
    messages = lst.hand_out.messages([record(0, valid(0)), record(1, b"boom"), record(2, valid(2))])
    assert [m.offset for m in messages] == [0, 2] and lst.skipped == 1


# -- item 3: headers never choose a topic ----------------------------------------------

FORGED = [("nt-original-topic", b"victim"), ("nt-original-partition", b"9"),
          ("nt-original-offset", b"12345"), ("nt-attempts", b"99"), ("trace", b"abc")]


def test_forged_headers_on_a_main_topic_record_change_nothing():
    side = FakeSide()
    router = requeuer(side, delivery_mode="at_least_once", max_attempts=3)
    rec = record(7, b"v", headers=FORGED)
    router.requeue(rec, None, lambda ok: None)
    router.dead_letter(rec, "undecodable: x", lambda ok: None)
    (retry_topic, _, _, retry_headers, _), (dead_topic, _, _, dead_headers, _) = side.sent
    assert retry_topic == "t.info.retry.billing" and dead_topic == "t.info.dlq"
    for headers in (retry_headers, dead_headers):
        assert headers["nt-attempts"] == b"1"  # a fresh record: the forged count is not believed
        assert (headers["nt-original-topic"], headers["nt-original-partition"],
                headers["nt-original-offset"]) == (b"t.info", b"0", b"7")
        assert headers["trace"] == b"abc"  # the record's own headers travel with it


@pytest.mark.parametrize("forged", [b"victim", b"../bad topic!", b"\xff\xfe", b"x" * 10000, b""])
def test_a_retried_record_is_routed_by_the_topic_it_came_from(forged):
    side = FakeSide()
    router = requeuer(side, delivery_mode="at_least_once", max_attempts=2)
    headers = [("nt-original-topic", forged), ("nt-original-partition", b"0"),
               ("nt-original-offset", b"5"), ("nt-attempts", b"1")]
    rec = record(3, b"v", topic="t.info.retry.billing", headers=headers)
    outcomes = []
    router.requeue(rec, RuntimeError("again"), outcomes.append)  # attempts exhausted: dead-letter
    router.dead_letter(rec, "undecodable: y", outcomes.append)
    assert [s[0] for s in side.sent] == ["t.info.dlq", "t.info.dlq"]
    assert side.sent[0][3]["nt-attempts"] == b"2"
    assert side.sent[0][3]["nt-original-topic"] == forged.decode("utf-8", "replace").encode()
    side.confirm_all()
    assert outcomes == [True, True]


def test_a_shared_retry_topic_uses_the_header_only_among_the_listeners_topics():
    side = FakeSide()
    s = settings(delivery_mode="at_least_once", retry_topic="shared.retry")
    router = Requeuer(s, side, "billing", DeliveryCounters(), ListenerHooks(), topics=["a.info", "b.info"])
    for named, expected in ((b"b.info", "b.info.dlq"), (b"victim", "a.info.dlq")):
        rec = record(0, b"v", topic="shared.retry", headers=[("nt-original-topic", named),
                                                             ("nt-attempts", b"5")])
        router.dead_letter(rec, "x", lambda ok: None)
        assert side.sent[-1][0] == expected


def test_undecodable_record_with_hostile_headers_is_finished_in_at_least_once_mode():
    side, consumer, policy, lst = at_least_once_listener()
    bad = record(0, b"\xff not json", headers=[("nt-original-topic", b"../bad topic!")])
    assert lst.hand_out.messages([bad]) == []
    assert [s[0] for s in side.confirm_all()] == ["t.info.dlq"]
    policy.commit()
    assert consumer.commits == [[(TOPIC, 0, 1)]]
