"""The publisher's bookkeeping, against a scripted channel: confirms (also ``multiple``),
returns of unroutable messages, nacks, lost channels and retry budgets, one outcome per
message, callbacks after the lock."""
import threading

import pika
import pika.exceptions as pex
import pytest

from notify_transport.drivers.rabbit.publisher import PendingPublish, Publisher
from notify_transport.drivers.rabbit.topology import ExchangeSpec, QueueSpec
from notify_transport.exceptions import AccessDenied, MessageDeliveryFailure


class FakeConn:
    """Runs everything inline, as if the caller were the I/O thread."""

    def __init__(self):
        self.passive_names = set()
        self.fatal_error = None
        self.last_error = "refused"
        self.users = []
        #: callbacks waiting for the (pretend) lock to be let go; None: run them at once
        self.unlocked = None

    def add_user(self, user):
        self.users.append(user)

    def in_io_thread(self):
        return True

    def call_soon(self, fn, *args):
        fn(*args)

    def call_unlocked(self, fn):
        if self.unlocked is None:
            fn()
        else:
            self.unlocked.append(fn)

    def note_entity_error(self, reason):
        return getattr(reason, "reply_code", 0) != 403

    def call_later(self, delay, fn):
        """Kept, not run: a test fires the timers (``fire``) when it wants the wait over."""
        self.timers = getattr(self, "timers", [])
        self.timers.append((delay, fn))

    def fire(self):
        timers, self.timers = self.timers, []
        for _delay, fn in timers:
            fn()


class FakeChannel:
    def __init__(self, publisher=None):
        self.is_open = True
        self.published = []
        self.declared = []
        self.on_return = None
        self.closes = 0
        self.publisher = publisher

    def close(self):
        """As the connection does: the channel's user hears that it closed (by us)."""
        self.closes += 1
        self.is_open = False
        if self.publisher is not None:
            self.publisher.io_channel_closed(self, pex.ChannelClosedByClient(200, "Normal shutdown"))

    def add_on_return_callback(self, cb):
        self.on_return = cb

    def confirm_delivery(self, ack_nack_callback, callback):
        self.on_confirm = ack_nack_callback
        callback(None)

    def exchange_declare(self, name, type_, passive, durable, auto_delete):
        self.declared.append(("exchange", name, passive))

    def queue_declare(self, name, passive, durable, auto_delete, arguments):
        self.declared.append(("queue", name, passive))

    def queue_bind(self, queue, exchange, routing_key):
        self.declared.append(("bind", queue, exchange, routing_key))

    def basic_publish(self, exchange, routing_key, body, properties, mandatory):
        if not self.is_open:
            raise pex.ChannelWrongStateError("closed")
        self.published.append((exchange, routing_key, body, properties, mandatory))

    # broker side
    def ack(self, tag, multiple=False, nack=False):
        method = (pika.spec.Basic.Nack if nack else pika.spec.Basic.Ack)(delivery_tag=tag, multiple=multiple)
        self.on_confirm(pika.frame.Method(1, method))

    def return_(self, index):
        _ex, rk, body, props, _m = self.published[index]
        self.on_return(self, pika.spec.Basic.Return(reply_code=312, reply_text="NO_ROUTE",
                                                    exchange="x", routing_key=rk), props, body)


def message(retry=None, mandatory=False, queue=None, exchange="openstack", on_done=None):
    return PendingPublish(ExchangeSpec(exchange), "rk", b"{}", pika.BasicProperties(),
                          mandatory=mandatory, queue=queue, retry=retry, on_done=on_done)


@pytest.fixture
def setup():
    conn = FakeConn()
    publisher = Publisher(conn)
    channel = FakeChannel(publisher)
    publisher.io_channel_open(channel)
    return conn, publisher, channel


def reopened(publisher):
    """The channel the connection opens after the publisher closed its own."""
    channel = FakeChannel(publisher)
    publisher.io_channel_open(channel)
    return channel


def test_confirm_completes_messages_including_multiple_acks(setup):
    _conn, publisher, channel = setup
    msgs = [publisher.publish(message()) for _ in range(4)]
    assert [m.done for m in msgs] == [False] * 4
    channel.ack(3, multiple=True)
    assert [m.ok for m in msgs] == [True, True, True, False]
    channel.ack(4)
    assert msgs[3].ok
    assert channel.declared == [("exchange", "openstack", False)]  # declared once per channel


def test_return_before_ack_marks_unroutable(setup):
    _conn, publisher, channel = setup
    routed, lost = publisher.publish(message(mandatory=True)), publisher.publish(message(mandatory=True))
    channel.return_(1)
    channel.ack(2, multiple=True)
    assert routed.ok
    assert lost.done and not lost.ok and lost.returned == "312 NO_ROUTE" and lost.error is None


def test_notification_queue_declared_and_bound_before_publish(setup):
    _conn, publisher, channel = setup
    exchange = ExchangeSpec("openstack")
    queue = QueueSpec("n.info", bindings=((exchange, "n.info"),))
    publisher.publish(message(queue=queue))
    publisher.publish(message(queue=queue))
    assert channel.declared == [("exchange", "openstack", False), ("queue", "n.info", False),
                                ("bind", "n.info", "openstack", "n.info")]


def test_lost_channel_republishes_within_retry_budget(setup):
    conn, publisher, channel = setup
    forever, once, never = message(), message(retry=1), message(retry=0)
    for m in (forever, once, never):
        publisher.publish(m)
    channel.is_open = False
    publisher.io_channel_closed(channel, pex.ConnectionClosedByBroker(320, "shutdown"))
    assert never.done and isinstance(never.error, MessageDeliveryFailure)
    publisher.io_connect_failed(OSError("refused"))  # once: attempt 2 > retry 1
    assert once.done and isinstance(once.error, MessageDeliveryFailure)
    assert not forever.done
    fresh = FakeChannel()
    publisher.io_channel_open(fresh)
    assert len(fresh.published) == 1  # forever went out again on the new channel
    fresh.ack(1)
    assert forever.ok


def test_nack_republishes_after_a_growing_wait_on_a_new_channel(setup):
    conn, publisher, channel = setup
    m = publisher.publish(message())
    channel.ack(1, nack=True)
    assert not m.done and len(channel.published) == 1  # not at once: the cluster would nack again
    assert channel.closes == 1  # regression: the old channel went on being nacked after a leader died
    conn.fire()
    second = reopened(publisher)
    assert len(second.published) == 1
    second.ack(1, nack=True)
    conn.fire()
    third = reopened(publisher)
    third.ack(1)
    assert m.ok and second.closes == 1 and third.closes == 0
    waits = []
    for attempt in (1, 2, 3, 8):
        from notify_transport.drivers.rabbit.publisher import NACK_BACKOFF
        waits.append(NACK_BACKOFF.delay(attempt))
    assert waits[0] < waits[1] < waits[2] <= waits[3] <= NACK_BACKOFF.maximum + NACK_BACKOFF.jitter


def test_many_nacks_close_a_channel_once_and_the_rest_go_out_again_on_the_next(setup):
    conn, publisher, channel = setup
    msgs = [publisher.publish(message()) for _ in range(5)]
    channel.ack(2, multiple=True, nack=True)  # the first two nacked
    channel.ack(3, nack=True)  # a late one on the closed channel: nothing more to close
    assert channel.closes == 1
    fresh = reopened(publisher)
    assert len(fresh.published) == 3  # the three unconfirmed ones at once
    conn.fire()
    assert len(fresh.published) == 5  # the nacked ones after their wait
    fresh.ack(5, multiple=True)
    assert all(m.ok for m in msgs)


def test_a_nacked_message_the_sender_gave_up_on_fails_instead_of_looping(setup, caplog):
    """Regression: a cluster nacking every publish made the driver republish at once, forever."""
    conn, publisher, channel = setup
    m = publisher.publish(message())
    for _ in range(200):
        channel.ack(1, nack=True)
        conn.fire()
        channel = reopened(publisher)
    assert len(channel.published) == 1 and not m.done
    assert len([r for r in caplog.records if "nacked" in r.getMessage()]) <= 2  # rate-limited
    channel.ack(1, nack=True)
    m.cancel()  # the caller's timeout passed
    conn.fire()
    assert m.done and isinstance(m.error, MessageDeliveryFailure) and "cancelled" in str(m.error)


def test_closing_fails_a_message_waiting_to_be_published_again(setup):
    conn, publisher, channel = setup
    m = publisher.publish(message())
    channel.ack(1, nack=True)
    publisher.io_fail_all(MessageDeliveryFailure("closing"))
    assert m.done and str(m.error) == "closing"
    conn.fire()  # the timer of the closed connection: nothing more
    assert len(reopened(publisher).published) == 0


def test_precondition_failure_then_passive_declare(setup):
    conn, publisher, channel = setup
    m = publisher.publish(message(exchange="shared"))
    conn.passive_names.add("shared")  # what note_entity_error learns from a 406
    channel.is_open = False
    publisher.io_channel_closed(channel, pex.ChannelClosedByBroker(406, "PRECONDITION_FAILED"))
    fresh = FakeChannel()
    publisher.io_channel_open(fresh)
    assert fresh.declared == [("exchange", "shared", True)]
    fresh.ack(1)
    assert m.ok


def test_permission_error_fails_the_message(setup):
    _conn, publisher, channel = setup
    m = publisher.publish(message())
    publisher.io_channel_closed(channel, pex.ChannelClosedByBroker(403, "ACCESS_REFUSED"))
    assert m.done and "ACCESS_REFUSED" in str(m.error)


def test_fatal_connection_error_fails_backlog(setup):
    conn, publisher, channel = setup
    publisher.io_channel_closed(channel, pex.ConnectionClosedByBroker(320, "x"))
    m = publisher.publish(message())
    conn.fatal_error = AccessDenied("vhost refused")
    publisher.io_connect_failed(OSError())
    assert m.error is conn.fatal_error


def test_cancelled_message_is_not_sent(setup):
    _conn, publisher, channel = setup
    publisher.io_channel_closed(channel, pex.ConnectionClosedByBroker(320, "x"))
    m = publisher.publish(message())
    m.cancel()
    fresh = FakeChannel()
    publisher.io_channel_open(fresh)
    assert fresh.published == [] and m.done and not m.ok


def test_done_callback_runs_once(setup):
    _conn, publisher, channel = setup
    seen = []
    publisher.publish(message(on_done=seen.append))
    channel.ack(1)
    channel.ack(1)
    assert len(seen) == 1 and seen[0].ok


class HandOffConn(FakeConn):
    """A connection whose lock is busy or cannot be lent (no epoll): work waits for the I/O thread."""

    def __init__(self):
        super().__init__()
        self.scheduled = []
        self.closed = False

    def in_io_thread(self):
        return False

    def try_run_locked(self, fn, *args):
        return False  # busy, or cannot lend: the I/O thread publishes

    def call_soon(self, fn, *args):
        if self.closed:
            raise MessageDeliveryFailure("closed")
        self.scheduled.append(lambda: fn(*args))

    def run_io(self):
        scheduled, self.scheduled = self.scheduled, []
        for fn in scheduled:
            fn()


def test_while_the_lock_is_busy_messages_queue_and_one_wake_up_publishes_them_all():
    conn = HandOffConn()
    publisher = Publisher(conn)
    channel = FakeChannel()
    publisher.io_channel_open(channel)
    msgs = [publisher.publish(message()) for _ in range(5)]
    assert len(conn.scheduled) == 1 and channel.published == []
    conn.run_io()
    assert len(channel.published) == 5
    channel.ack(5, multiple=True)
    assert all(m.ok for m in msgs)
    later = publisher.publish(message())  # the next batch wakes the I/O thread again
    assert len(conn.scheduled) == 1
    conn.run_io()
    channel.ack(6)
    assert later.ok


def test_a_closed_connection_fails_the_queued_messages():
    conn = HandOffConn()
    publisher = Publisher(conn)
    publisher.io_channel_open(FakeChannel())
    conn.closed = True
    with pytest.raises(MessageDeliveryFailure):
        publisher.publish(first := message())
    assert first.done and isinstance(first.error, MessageDeliveryFailure)
    conn.closed = False
    queued = publisher.publish(message())
    publisher.io_fail_all(MessageDeliveryFailure("cleaned up"))  # never sent: failed, not lost
    assert queued.done and str(queued.error) == "cleaned up"


def test_done_callbacks_wait_until_the_connection_lock_is_let_go(setup):
    conn, publisher, channel = setup
    conn.unlocked = []
    seen = []
    m = publisher.publish(message(on_done=seen.append))
    channel.ack(1)
    assert m.ok and seen == []  # done (waiters released), callback not yet: the lock is held
    for fn in conn.unlocked:
        fn()
    assert seen == [m]


def test_two_finishes_at_once_settle_one_whole_outcome_that_never_changes():
    """A close failing a message while the I/O thread confirms it: one outcome wins whole."""
    failed = MessageDeliveryFailure("the transport was cleaned up")
    in_finish, go_on = threading.Event(), threading.Event()

    class Observed(PendingPublish):
        """Stops the first finisher inside finish(), where the second one comes in."""

        __slots__ = ()

        @property
        def error(self):
            return PendingPublish.error.__get__(self, PendingPublish)

        @error.setter
        def error(self, value):
            if value is failed:
                in_finish.set()
                go_on.wait(10)
            PendingPublish.error.__set__(self, value)

    m = Observed(ExchangeSpec("openstack"), "rk", b"{}", pika.BasicProperties(), mandatory=True)
    closing = threading.Thread(target=m.finish, kwargs={"error": failed})
    closing.start()
    assert in_finish.wait(10)
    m.finish(returned="312 NO_ROUTE")  # the I/O thread, meanwhile
    seen = (m.done, m.error, m.returned)
    go_on.set()
    closing.join(10)
    assert (m.error, m.returned) in [(failed, None), (None, "312 NO_ROUTE")]
    if seen[0]:  # done already then: nothing may change it afterwards
        assert (m.error, m.returned) == seen[1:]
