"""The RPC server's replier without a broker: a reply to a missing queue is published again
on the backoff policy until ``kombu_missing_consumer_retry_timeout``, then the queue counts
as obsolete (later replies to it are dropped) for a while."""
import time

from notify_transport.drivers.rabbit.codec import BodyCodec
from notify_transport.drivers.rabbit.rpc import MISSING_REPLY_QUEUE_BACKOFF, Replier


class FakePublisher:
    def __init__(self):
        self.published = []

    def publish(self, message):
        self.published.append(message)
        return message


class FakeConn:
    def __init__(self):
        self.later = []

    def call_later(self, delay, fn):
        self.later.append((delay, fn))


def returned(message):
    """The broker returns the reply: no queue of that name."""
    assert message.finish(returned="312 NO_ROUTE")
    message.run_on_done()


def make(timeout, ttl=60.0):
    class Quick(Replier):
        OBSOLETE_TTL = ttl

    conn, publisher = FakeConn(), FakePublisher()
    return Quick(conn, publisher, BodyCodec(), timeout), conn, publisher


def test_a_reply_to_a_missing_queue_is_published_again_on_the_policy():
    replier, conn, publisher = make(timeout=60.0)
    replier.reply("m1", "reply_q1", result=1)
    returned(publisher.published[0])
    assert [delay for delay, _fn in conn.later] == [MISSING_REPLY_QUEUE_BACKOFF.delay(1)]
    conn.later[0][1]()
    assert len(publisher.published) == 2
    assert publisher.published[1].body == publisher.published[0].body


def test_a_queue_missing_past_the_timeout_is_obsolete_for_a_while():
    replier, conn, publisher = make(timeout=0.0, ttl=0.2)
    replier.reply("m1", "reply_q1", result=1)
    returned(publisher.published[0])
    assert conn.later == []  # given up
    replier.reply("m2", "reply_q1", result=2)
    replier.reply("m3", "reply_q2", result=3)
    assert [m.routing_key for m in publisher.published] == ["reply_q1", "reply_q2"]  # m2 dropped
    deadline = time.monotonic() + 10
    while replier._is_obsolete("reply_q1"):  # the entry expires after its time to live
        assert time.monotonic() < deadline
        time.sleep(0.01)
    replier.reply("m4", "reply_q1", result=4)
    assert [m.routing_key for m in publisher.published] == ["reply_q1", "reply_q2", "reply_q1"]


def test_the_obsolete_set_is_bounded():
    size = 3

    class Small(Replier):
        OBSOLETE_SIZE = size

    replier = Small(FakeConn(), FakePublisher(), BodyCodec(), 0.0)
    for i in range(size * 3):
        replier._mark_obsolete(f"q{i}")
    assert sum(replier._is_obsolete(f"q{i}") for i in range(size * 3)) == size
