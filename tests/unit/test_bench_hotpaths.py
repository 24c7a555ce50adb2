"""The fast paths tuned for the benchmarks behave exactly like the plain code they replace."""
import dataclasses
import datetime
import json
import os
import re
import threading
import time
import uuid

import pytest
from hypothesis import given, strategies as st
from oslo_messaging._drivers import common as oslo_common
from oslo_messaging._drivers import impl_kafka

from notify_transport.drivers import envelope
from notify_transport.drivers.base import IncomingMessage, Listener
from notify_transport.notify import listener as listener_mod
from notify_transport.notify import notifier as notifier_mod
from notify_transport.notify.dispatcher import NotificationDispatcher, NotificationResult
from notify_transport.notify.filter import NotificationFilter
from notify_transport.serializer import Serializer
from notify_transport.target import Target

MSG = {"message_id": "m1", "publisher_id": "p", "event_type": "e.t", "priority": "INFO",
       "payload": {"k": [1, 2.5, None, True], "u": "é\u2028\"\\\n", "nested": {"a": {"b": []}}},
       "timestamp": "2026-01-01 00:00:00.000001"}


# -- message ids -------------------------------------------------------------------

def test_message_ids_are_random_uuid4_strings():
    ids = [notifier_mod.new_message_id() for _ in range(3 * notifier_mod._ID_BATCH + 7)]
    assert len(set(ids)) == len(ids)
    for value in ids[:600]:
        parsed = uuid.UUID(value)
        assert str(parsed) == value
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_message_ids_unique_across_threads():
    got: list[str] = []
    lock = threading.Lock()

    def take():
        mine = [notifier_mod.new_message_id() for _ in range(2000)]
        with lock:
            got.extend(mine)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 8000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_does_not_reuse_the_parents_ids():
    # Emptied first: earlier tests of the process may have left exactly one id in the pool, and
    # taking it would leave nothing to compare with.
    notifier_mod._id_pool.clear()
    notifier_mod.new_message_id()            # refills the pool and takes one id
    pending = list(notifier_mod._id_pool)
    assert len(pending) == notifier_mod._ID_BATCH - 1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.write(write, notifier_mod.new_message_id().encode())
        finally:
            os._exit(0)
    os.close(write)
    child_id = os.read(read, 100).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert child_id and child_id not in pending


# -- timestamps --------------------------------------------------------------------

@pytest.mark.parametrize("ns", [0, 1_700_000_000_000_000_000, 1_700_000_000_123_456_789,
                                1_700_000_059_999_999_999, 1_700_000_000_000_001_000])
def test_clock_formats_like_str_of_utc_datetime(ns):
    clock = notifier_mod.utc_clock(lambda: ns)
    expected = str(datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=ns // 1000))
    assert clock() == expected
    assert clock() == expected   # cached second


@given(start=st.integers(min_value=0, max_value=4_102_444_800 * 10**9),
       steps=st.lists(st.integers(min_value=-2 * 10**9, max_value=2 * 10**9), max_size=30))
def test_clock_matches_datetime_in_any_order_of_times(start, steps):
    # steps within a second and across seconds, forwards and back (NTP steps the clock back too)
    times = [start]
    for step in steps:
        times.append(max(0, times[-1] + step))
    now = iter(times)
    clock = notifier_mod.utc_clock(lambda: next(now))
    for ns in times:
        assert clock() == str(datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=ns // 1000))


def test_clock_is_now():
    text = notifier_mod.utc_clock()()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?", text)
    parsed = datetime.datetime.fromisoformat(text)
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    assert abs((now - parsed).total_seconds()) < 5


# -- envelope --------------------------------------------------------------------

def test_fast_encoding_is_read_by_oslo_unpack():
    raw = envelope.encode(MSG, {"user": "u", "roles": ["a"]}, 2.0)
    assert raw.startswith(b'{"oslo.version": "2.0", "oslo.message": "')
    assert json.loads(raw)["oslo.version"] == "2.0"
    assert impl_kafka.unpack_message(raw) == ({"user": "u", "roles": ["a"]}, MSG)
    v1 = envelope.encode(MSG, {"user": "u"}, 1.0, envelope.CONTEXT_PREFIXED)
    assert oslo_common.deserialize_msg(json.loads(v1)) == dict(MSG, _context_user="u")


@dataclasses.dataclass
class Point:
    x: int


class Enumish(str):
    pass


@pytest.mark.parametrize("value", [
    2 ** 70,                                   # beyond orjson's 64 bits
    {1: "int key", None: "none key"},          # keys orjson refuses
    datetime.datetime(2026, 1, 2, 3, 4, 5),    # formatted by to_primitive
    Point(3),                                  # dataclass through to_primitive
    {1, 2}, b"bytes", uuid.UUID(int=5), Enumish("sub"),
])
def test_fast_encoding_means_what_the_standard_encoder_means(value):
    raw = envelope.encode(dict(MSG, payload=value), {}, 2.0)
    _, msg = envelope.decode(raw)
    assert msg["payload"] == json.loads(envelope.dumps(value))


def test_decoding_accepts_what_the_standard_parser_accepts():
    inner = '{"event_type": "e", "priority": "INFO", "payload": {"x": NaN, "big": %d}, "s": "\\ud800"}' % 2 ** 70
    raw = json.dumps({"oslo.version": "2.0", "oslo.message": inner}).encode()
    _, msg = envelope.decode_notification(raw)
    assert msg["payload"]["big"] == 2 ** 70 and msg["payload"]["x"] != msg["payload"]["x"]
    assert msg["s"] == "\ud800"


@pytest.mark.parametrize("raw", [b"", b"{", b'{"oslo.version": "2.0", "oslo.message": "{bad"}',
                                 b"\xff", "{\"a\": ".encode()])
def test_bad_json_is_still_a_decode_error(raw):
    with pytest.raises(envelope.DecodeError):
        envelope.decode(raw)


# -- dispatcher --------------------------------------------------------------------

class Upper(Serializer):
    def serialize_entity(self, ctxt, entity):
        return entity

    def deserialize_entity(self, ctxt, entity):
        return {"seen_by": ctxt["who"], **entity}

    def serialize_context(self, ctxt):
        return ctxt

    def deserialize_context(self, ctxt):
        return {"who": ctxt["user"].upper()}


class Recorder:
    def __init__(self, result=None, filter_rule=None):
        self.calls = []
        self.result = result
        if filter_rule is not None:
            self.filter_rule = filter_rule

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self.calls.append((ctxt, publisher_id, event_type, payload, metadata))
        return self.result


def _incoming(priority="INFO", event_type="e.t"):
    return IncomingMessage({"user": "bob"}, dict(MSG, priority=priority, event_type=event_type),
                           topic="t", partition=0, offset=1)


@pytest.mark.parametrize("serializer", [None, Upper()])
def test_dispatch_passes_what_extract_describes(serializer):
    rec = Recorder()
    dispatcher = NotificationDispatcher([rec], serializer)
    incoming = _incoming()
    assert dispatcher.dispatch(incoming) is NotificationResult.HANDLED
    _prio, view = dispatcher.extract(incoming)
    assert rec.calls == [(view["ctxt"], view["publisher_id"], view["event_type"], view["payload"],
                          view["metadata"])]


def test_dispatch_filters_requeues_and_skips_unknown_priorities():
    skipped = Recorder(filter_rule=NotificationFilter(event_type="other.*"))
    requeue = Recorder(result=NotificationResult.REQUEUE)
    dispatcher = NotificationDispatcher([skipped, requeue])
    assert dispatcher.dispatch(_incoming()) == NotificationResult.REQUEUE
    assert skipped.calls == [] and len(requeue.calls) == 1
    assert dispatcher.dispatch(_incoming(priority="nonsense")) == NotificationResult.HANDLED
    assert dispatcher.dispatch(_incoming(priority="ERROR")) == NotificationResult.HANDLED
    assert len(requeue.calls) == 1


# -- listener --------------------------------------------------------------------

class _ScriptedListener(Listener):
    def __init__(self, batches):
        super().__init__()
        self.batches = list(batches)
        self.asked: list[int] = []
        self.acked: list[int] = []

    def poll(self, timeout=None, max_messages=1):
        self.asked.append(max_messages)
        if self.batches:
            return self.batches.pop(0)
        self._stopped.wait(0.01)
        return []


class _Transport:
    def __init__(self, listener):
        self.listener = listener

    def _listen_for_notifications(self, pairs, pool, batch_size, batch_timeout, **options):
        return self.listener


def test_single_dispatch_listener_takes_every_message_a_poll_has():
    acked = []
    batch = [IncomingMessage({}, dict(MSG, message_id=str(i)), offset=i,
                             on_ack=lambda m: acked.append(m.offset)) for i in range(5)]
    scripted = _ScriptedListener([batch])
    rec = Recorder()
    server = listener_mod.NotificationServer(_Transport(scripted), [Target(topic="t")],
                                             NotificationDispatcher([rec]))
    server.start()
    deadline = time.monotonic() + 5
    while len(acked) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.stop()
    server.wait(5)
    assert scripted.asked[0] == listener_mod.DISPATCH_POLL_SIZE
    assert acked == [0, 1, 2, 3, 4]
    assert [c[4]["message_id"] for c in rec.calls] == ["0", "1", "2", "3", "4"]
    assert server.stats.received == 5 and server.stats.dispatched == 5


def test_a_listener_with_a_larger_take_is_asked_for_all_of_it():
    scripted = _ScriptedListener([])
    scripted.take_size = 2000  # a Kafka listener with max_poll_records = 2000
    server = listener_mod.NotificationServer(_Transport(scripted), [Target(topic="t")],
                                             NotificationDispatcher([Recorder()]))
    server.start()
    deadline = time.monotonic() + 5
    while not scripted.asked and time.monotonic() < deadline:
        time.sleep(0.01)
    server.stop()
    server.wait(5)
    assert scripted.asked and set(scripted.asked) == {2000}


def test_each_notifier_has_its_own_clock_shared_with_its_prepared_copies():
    from oslo_config import cfg

    import notify_transport as nt

    conf = cfg.ConfigOpts()
    conf([])
    with nt.get_notification_transport(conf, "fake:///") as transport:
        first = nt.Notifier(transport, "a", driver="test", topics=["n"])
        second = nt.Notifier(transport, "b", driver="test", topics=["n"])
        assert first._clock is not second._clock
        assert first.prepare(publisher_id="c")._clock is first._clock
        first.info({}, "e", {})
        stamp = first.sent[0][1]["timestamp"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?", stamp)


def test_build_profile_row_runs():
    from bench.profile_hot import _build

    row = _build("ours", 200)
    assert set(row) == {"pooled_ids_cached_clock_ns_per_msg", "uuid4_and_datetime_per_call_ns_per_msg",
                        "saved_ns_per_msg"}
    assert row["pooled_ids_cached_clock_ns_per_msg"] > 0 and row["uuid4_and_datetime_per_call_ns_per_msg"] > 0


def test_the_listen_profile_counts_commits_and_waits_then_puts_the_functions_back():
    from confluent_kafka import TopicPartition

    from bench.profile_hot import _commit_timing
    from notify_transport.drivers.kafka.delivery import commit

    inside: list[float] = []

    class Consumer:
        def commit(self, offsets=None, asynchronous=True):
            inside.append(time.perf_counter())
            return offsets

    real_commit, real_wait = commit.commit_sync, commit._CommitJob.__call__
    offsets = [TopicPartition("t", 0, 5)]
    with _commit_timing() as totals:
        before = time.perf_counter()
        assert commit.commit_sync(Consumer(), offsets) == (offsets, None)
        committed = time.perf_counter()
        job = commit._CommitJob(offsets, lambda _offsets, _err: None)
        job.done.set()
        job()
        waited = time.perf_counter() - committed
    # the commit's time is the call's: it encloses the consumer's commit and lies within the test's
    assert totals["count"] == 1 and before < inside[0] and 0 < totals["seconds"] < committed - before
    assert 0 < totals["waited"] < waited
    assert commit.commit_sync is real_commit and commit._CommitJob.__call__ is real_wait
