"""Checks shared by the RabbitMQ functional tests that run the same traffic on another
path (TLS, pika's own I/O loop): concurrent calls and a notification round trip."""
from __future__ import annotations

import threading

import notify_transport as nt
from endpoints import IdRecorder
from rabbit_fixtures import wait_for


def check_concurrent_calls(client, threads: int = 4, calls: int = 15) -> None:
    """``threads`` threads each call ``echo`` ``calls`` times: every answer is its own."""
    results: list = []
    errors: list = []

    def caller(n: int) -> None:
        try:
            results.extend(tuple(client.call({}, "echo", value=[n, i])) for i in range(calls))
        except Exception as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=caller, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert errors == []
    assert sorted(results) == [(n, i) for n in range(threads) for i in range(calls)]


def check_notifications_round_trip(transport, topic: str, count: int = 25) -> None:
    """``count`` notifications are confirmed, then each reaches a listener once."""
    recorder = IdRecorder("n")
    got = recorder.ids
    listener = nt.get_notification_listener(transport, [nt.Target(topic=topic)], [recorder])
    listener.start()
    try:
        notifier = nt.Notifier(transport, publisher_id="p", driver="messagingv2", topics=[topic])
        for i in range(count):
            notifier.info({}, "ev", {"n": i})
        assert transport.flush(30) == 0
        assert wait_for(lambda: len(got) == count, timeout=30)
        assert sorted(got) == list(range(count))
    finally:
        listener.stop()
        listener.wait()
