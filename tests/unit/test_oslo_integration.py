"""The ``ntkafka`` oslo.messaging driver without a broker: entry point, URL, errors, polling."""
from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from importlib import metadata

import pytest
from oslo_config import cfg
from waits import Clock

from notify_transport.drivers.base import IncomingMessage, Listener

oslo_messaging = pytest.importorskip("oslo_messaging")

from notify_transport.integrations import oslo_messaging as integration  # noqa: E402
from oslo_messaging._drivers import base as oslo_base  # noqa: E402


def oslo_url(conf, text):
    return oslo_messaging.TransportURL.parse(conf, text)


def test_registered_in_oslo_messaging_drivers() -> None:
    entry = [ep for ep in metadata.entry_points(group="oslo.messaging.drivers") if ep.name == "ntkafka"]
    assert len(entry) == 1, "run pip install -e . so that the entry point is visible"
    assert entry[0].load() is integration.NtKafkaDriver
    assert integration.SCHEME == "ntkafka"


def test_oslo_parses_the_scheme_and_we_convert_it(conf) -> None:
    url = oslo_url(conf, "ntkafka://user:p%40ss@k1:9093,[::1]:9094/prod"
                         "?compression_codec=gzip&listener.delivery_mode=at_least_once&workers=4")
    assert url.transport == "ntkafka"
    ours = integration.convert_url(url)
    assert ours.transport == "kafka"
    assert ours.virtual_host == "prod"
    assert [(h.hostname, h.port, h.username, h.password) for h in ours.hosts] == [
        ("k1", 9093, "user", "p@ss"), ("::1", 9094, None, None)]
    assert ours.bootstrap_servers(9092) == ["k1:9093", "[::1]:9094"]
    # the deprecated listener. key is read as the option itself
    assert ours.query == {"compression_codec": "gzip", "delivery_mode": "at_least_once", "workers": "4"}
    assert "p@ss" not in ours.redacted()


@pytest.mark.parametrize("text, vhost", [("ntkafka://h:1", None), ("ntkafka://h:1/", ""),
                                         ("ntkafka://h:1/a.b", "a.b")])
def test_vhost_forms(conf, text, vhost) -> None:
    assert integration.convert_url(oslo_url(conf, text)).virtual_host == vhost


def test_transport_through_oslo_api(conf) -> None:
    transport = oslo_messaging.get_notification_transport(conf, url="ntkafka://127.0.0.1:1/prod")
    try:
        driver = transport._driver
        assert isinstance(driver, integration.NtKafkaDriver)
        assert driver.driver.vhost == "prod"
        # our options are registered on the service's conf, next to oslo's names
        assert conf.oslo_messaging_kafka.producer_acks == "all"
        assert conf.oslo_messaging_kafka.consumer_group == "oslo_messaging_consumer"
        assert driver.delivery_stats() == {"sent": 0, "delivered": 0, "failed": 0, "pending": 0}
        assert "ntkafka://127.0.0.1:1/prod" in repr(driver)
    finally:
        transport.cleanup()


def test_options_from_the_services_config_and_the_url(conf) -> None:
    conf.register_group(cfg.OptGroup("oslo_messaging_kafka"))
    transport = oslo_messaging.get_notification_transport(
        conf, url="ntkafka://127.0.0.1:1/?compression_codec=lz4")
    try:
        opts = transport._driver.driver.opts
        assert opts.compression_codec == "lz4"  # URL query over the option
        assert opts.producer_acks == "all"
    finally:
        transport.cleanup()


def test_bad_url_raises_oslos_exception_naming_the_key(conf) -> None:
    with pytest.raises(oslo_messaging.InvalidTransportURL, match="Unknown option 'bogus'"):
        oslo_messaging.get_notification_transport(conf, url="ntkafka://127.0.0.1:1/?bogus=1")
    with pytest.raises(oslo_messaging.InvalidTransportURL, match="cannot be part of a Kafka topic"):
        oslo_messaging.get_notification_transport(conf, url="ntkafka://127.0.0.1:1/bad%20vhost")
    with pytest.raises(oslo_messaging.InvalidTransportURL, match="Empty listener option"):
        oslo_messaging.get_notification_transport(conf, url="ntkafka://127.0.0.1:1/?listener.=1")
    # a listener option the driver does not know: refused with the transport, not when a listener starts
    with pytest.raises(oslo_messaging.InvalidTransportURL, match="Unknown option 'no_such_mode'"):
        oslo_messaging.get_notification_transport(conf, url="ntkafka://127.0.0.1:1/?listener.no_such_mode=true")


def test_rpc_is_refused_clearly(conf) -> None:
    transport = oslo_messaging.get_notification_transport(conf, url="ntkafka://127.0.0.1:1/")
    try:
        driver = transport._driver
        target = oslo_messaging.Target(topic="t", server="s")
        with pytest.raises(NotImplementedError, match="notifications only; use a rabbit://"):
            driver.send(target, {}, {"method": "m"})
        with pytest.raises(NotImplementedError, match="notifications only"):
            driver.listen(target, 1, None)
    finally:
        transport.cleanup()


def test_requeue_needs_a_delivery_mode(conf) -> None:
    transport = oslo_messaging.get_notification_transport(conf, url="ntkafka://127.0.0.1:1/")
    try:
        driver = transport._driver
        driver.require_features(requeue=False)
        with pytest.raises(NotImplementedError, match="requeueing is not supported"):
            transport._require_driver_features(requeue=True)
    finally:
        transport.cleanup()


@pytest.mark.parametrize("query", ["delivery_mode=at_least_once", "listener.delivery_mode=at_least_once"])
def test_requeue_with_a_delivery_mode_from_the_url(conf, query) -> None:
    transport = oslo_messaging.get_notification_transport(conf, url=f"ntkafka://127.0.0.1:1/?{query}")
    try:
        transport._require_driver_features(requeue=True)  # at_least_once has a dead-letter topic
    finally:
        transport.cleanup()


def test_send_errors_become_oslos(conf) -> None:
    transport = oslo_messaging.get_notification_transport(conf, url="ntkafka://127.0.0.1:1/")
    try:
        with pytest.raises(oslo_messaging.InvalidTarget):
            transport._driver.send_notification(oslo_messaging.Target(topic="bad topic.info"), {},
                                                {"publisher_id": "p"}, 2.0)
    finally:
        transport.cleanup()


# -- the poll-style listener over one of our listeners -----------------------------------------

class QueueListener(Listener):
    """An in-memory driver listener: messages put in a queue, acks and requeues recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.queue: queue.Queue[IncomingMessage] = queue.Queue()
        self.acked: list[int] = []
        self.requeued: list[int] = []
        self.commits = 0
        self.cleaned = False
        self.raise_next: Exception | None = None

    def put(self, *numbers: int) -> None:
        for n in numbers:
            self.queue.put(IncomingMessage(
                {"user": "u"}, {"message_id": f"m{n}", "publisher_id": "p", "event_type": "e",
                                "priority": "INFO", "payload": {"n": n}, "timestamp": "t"},
                topic="t.info", partition=0, offset=n,
                on_ack=lambda m: self.acked.append(m.offset),
                on_requeue=lambda m: self.requeued.append(m.offset)))

    def poll(self, timeout=None, max_messages=1):
        if self.raise_next is not None:
            exc, self.raise_next = self.raise_next, None
            raise exc
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.stopped:
            try:
                first = self.queue.get(timeout=0.02)
            except queue.Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    return []
                continue
            out = [first]
            while len(out) < max_messages:
                try:
                    out.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            return out
        return []

    def commit(self) -> None:
        self.commits += 1

    def cleanup(self) -> None:
        self.cleaned = True


def payloads(batch) -> list[int]:
    return [m.message["payload"]["n"] for m in batch]


def test_poll_returns_a_full_batch_at_once() -> None:
    ours = QueueListener()
    ours.put(1, 2, 3, 4)
    poller = integration.NotificationPollListener(ours)
    assert payloads(poller.poll(batch_size=3, batch_timeout=30)) == [1, 2, 3]
    assert payloads(poller.poll(batch_size=3, batch_timeout=0.05)) == [4]  # partial after the timeout
    assert poller.poll(timeout=0.05, batch_size=3) == []


def test_poll_waits_for_the_batch_until_batch_timeout() -> None:
    ours = QueueListener()
    ours.put(1)
    later = threading.Timer(0.1, ours.put, args=(2,))
    later.start()
    poller = integration.NotificationPollListener(ours)
    assert payloads(poller.poll(batch_size=2, batch_timeout=30)) == [1, 2]
    later.join()


def test_poll_returns_what_it_has_on_stop() -> None:
    ours = QueueListener()
    ours.put(1)
    poller = integration.NotificationPollListener(ours)
    threading.Timer(0.1, poller.stop).start()
    assert payloads(poller.poll(batch_size=5, batch_timeout=None)) == [1]
    assert poller.poll(batch_size=5) == []  # stopped: returns at once


def test_poll_never_raises(caplog) -> None:
    ours = QueueListener()
    ours.raise_next = RuntimeError("broker gone")
    ours.put(1)
    poller = integration.NotificationPollListener(ours)
    assert payloads(poller.poll(timeout=5)) == [1]
    assert "broker gone" in caplog.text


def test_failed_polls_are_counted_in_the_log_once_polling_works_again(caplog, monkeypatch) -> None:
    """An outage fails poll after poll: one line, and the count of the rest once the interval (30 s)
    has passed, while the service runs, not only at cleanup."""
    clock = Clock()
    monkeypatch.setattr(integration, "RateLimitedLog", functools.partial(integration.RateLimitedLog, clock=clock))
    ours = QueueListener()
    poller = integration.NotificationPollListener(ours)
    with caplog.at_level(logging.ERROR, integration.LOG.name):
        for _ in range(5):
            ours.raise_next = RuntimeError("broker gone")
            assert poller.poll(timeout=0.01) == []
        assert len(caplog.records) == 1
        clock.now = 31.0
        ours.put(1)
        assert payloads(poller.poll(timeout=5)) == [1]
        assert caplog.records[-1].getMessage().startswith("4 more not logged one by one; the last: ")
        assert caplog.records[-1].getMessage().endswith("polling failed, retrying: broker gone")
        assert len(caplog.records) == 2
    poller.cleanup()
    assert len(caplog.records) == 2


def test_messages_ack_and_requeue_through_ours_and_cleanup_commits() -> None:
    ours = QueueListener()
    ours.put(1, 2)
    cleaned = []
    poller = integration.NotificationPollListener(ours, on_cleanup=cleaned.append)
    first, second = poller.poll(batch_size=2)
    assert isinstance(first, oslo_base.IncomingMessage)
    assert first.ctxt == {"user": "u"} and first.msg_id == "m1"
    first.acknowledge()
    second.requeue()
    assert (ours.acked, ours.requeued) == ([1], [2])
    poller.cleanup()
    assert ours.stopped and ours.commits == 1 and ours.cleaned and cleaned == [poller]


def test_oslo_adapter_delivers_to_its_callback() -> None:
    ours = QueueListener()
    poller = integration.NotificationPollListener(ours)
    adapter = oslo_base.PollStyleListenerAdapter(poller, batch_size=2, batch_timeout=0.2)
    got: list[list[int]] = []
    done = threading.Event()

    def on_incoming(batch):
        got.append(payloads(batch))
        if sum(len(b) for b in got) >= 3:
            done.set()

    adapter.start(on_incoming)
    ours.put(1, 2, 3)
    assert done.wait(10)
    adapter.stop()
    adapter.cleanup()
    assert [n for batch in got for n in batch] == [1, 2, 3]
    assert all(len(batch) <= 2 for batch in got)
    assert ours.cleaned


def test_listener_start_failure_is_an_oslo_error() -> None:
    from notify_transport.testing.brokers import free_port

    url = f"ntkafka://127.0.0.1:{free_port()}/?listener_start_timeout=1"
    transport = oslo_messaging.get_notification_transport(cfg.CONF, url=url)
    try:
        server = oslo_messaging.get_notification_listener(
            transport, [oslo_messaging.Target(topic="t")], [type("E", (), {"info": lambda *a: None})()],
            executor="threading", pool="p")
        with pytest.raises(oslo_messaging.MessagingException, match="Cannot reach the Kafka cluster"):
            server.start()
    finally:
        transport.cleanup()


class RecordingOffload(integration.Offload):
    """Runs calls directly, as without eventlet, and records which ones went through it."""

    def __init__(self) -> None:
        super().__init__(patched=False)
        self.calls: list[str] = []

    def __call__(self, func, *args, **kwargs):
        self.calls.append(getattr(func, "__name__", repr(func)))
        return func(*args, **kwargs)


def test_every_call_into_our_listener_goes_through_the_offload() -> None:
    """Under eventlet these are the calls that may wait: each must leave the hub (tpool)."""
    ours, offload = QueueListener(), RecordingOffload()
    ours.put(1, 2)
    poller = integration.NotificationPollListener(ours, offload=offload)
    first, second = poller.poll(batch_size=2)
    first.acknowledge()
    second.requeue()
    poller.stop()
    poller.cleanup()
    assert offload.calls == ["poll", "acknowledge", "requeue", "stop", "_close"]
    assert (ours.acked, ours.requeued, ours.commits, ours.cleaned) == ([1], [2], 1, True)


def test_the_driver_sends_and_cleans_up_through_its_offload(conf) -> None:
    transport = oslo_messaging.get_notification_transport(conf, url="ntkafka://127.0.0.1:1/v?flush_timeout=0")
    driver = transport._driver
    assert repr(driver.offload) == "<Offload direct>"  # no eventlet in this process
    driver.offload = offload = RecordingOffload()
    assert driver.flush(0) == 0
    transport.cleanup()
    assert offload.calls == ["flush", "cleanup"]
