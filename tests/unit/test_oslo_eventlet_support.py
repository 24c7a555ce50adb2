"""eventlet support of the ``ntkafka`` driver without a broker: native primitives for the Kafka driver,
blocking calls through tpool from the hub, direct calls elsewhere, admin futures under eventlet.

The monkey-patched checks run in a child process (monkey-patching cannot be undone in this one).
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from notify_transport.drivers.kafka import cluster
from notify_transport.exceptions import MessagingException

pytest.importorskip("oslo_utils")
pytest.importorskip("eventlet")

from notify_transport.integrations import eventlet_support  # noqa: E402

CHILD = textwrap.dedent("""
    import eventlet
    eventlet.monkey_patch()
    import concurrent.futures, json, sys, threading, time
    from eventlet import patcher
    from notify_transport.drivers import base
    from notify_transport.drivers.kafka import cluster, driver, producer
    from notify_transport.reading import reader
    from notify_transport.drivers.kafka.delivery import commit, workers
    from notify_transport.drivers.rabbit import connection as rabbit_connection, consumer as rabbit_consumer
    from notify_transport import backoff
    from notify_transport.integrations import eventlet_support
    from notify_transport.integrations.oslo_messaging import NtKafkaDriver

    native = patcher.original("threading")
    native_ident = patcher.original("_thread").get_ident
    out = {"patched": eventlet_support.monkey_patched()}
    # the Kafka driver's primitives come from drivers/threads.py, native from the start: no switch
    from notify_transport.drivers import threads
    from notify_transport.drivers.kafka import listener as kafka_listener
    job = commit._CommitJob([], lambda offsets, error: None)
    made = [threads.Lock(), threads.RLock(), threads.Event(), threads.Condition(), threads.Semaphore(2),
            threads.Thread(target=lambda: None), threads.Queue(1), threads.SimpleQueue(), job.done]
    out["native_primitives"] = [type(x).__module__ for x in made]
    out["native_types"] = all(isinstance(x, t) for x, t in zip(made, (
        type(native.Lock()), type(native.RLock()), native.Event, native.Condition, native.Semaphore,
        native.Thread, patcher.original("queue").Queue, patcher.original("queue").SimpleQueue, native.Event)))
    out["queue_errors"] = threads.queue_full() is patcher.original("queue").Full \
        and threads.queue_full() is not sys.modules["queue"].Full
    out["green_lock_differs"] = type(threading.Lock()) is not type(native.Lock())
    listener = kafka_listener.KafkaListener.__new__(kafka_listener.KafkaListener)
    base.Listener.__init__(listener)
    out["base_listener_stays_green"] = not isinstance(listener._stopped, native.Event)
    out["rabbit_stays_green"] = rabbit_connection.threading is threading \
        and rabbit_consumer.threading is threading and backoff.time is time
    out["stdlib_untouched"] = threading.Thread is not native.Thread and time.sleep is not patcher.original("time").sleep

    ticks = []
    def ticker():
        while True:
            ticks.append(time.monotonic())
            eventlet.sleep(0.01)
    eventlet.spawn(ticker)
    eventlet.sleep(0.05)

    offload = eventlet_support.Offload()
    out["offload_patched"] = offload.patched
    before = len(ticks)
    threads.sleep(0.3)  # native: holds the hub's thread, as a librdkafka wait would
    out["ticks_while_native_sleep"] = len(ticks) - before
    def blocking():
        patcher.original("time").sleep(0.5)  # as a librdkafka call: holds its native thread
        return native_ident()
    before = len(ticks)
    ran_in = offload(blocking)
    out["offload_other_thread"] = ran_in != native_ident()
    out["ticks_while_blocking"] = len(ticks) - before
    def boom():
        raise ValueError("raised in tpool")
    try:
        offload(boom)
    except ValueError as exc:
        out["exception"] = str(exc)
    seen = []
    worker = native.Thread(target=lambda: seen.append((offload(native_ident), native_ident())))
    worker.start()
    while worker.is_alive():
        eventlet.sleep(0.01)
    out["direct_on_native_thread"] = seen[0][0] == seen[0][1]

    # an AdminClient-style future, resolved from a native thread, waited for in another native thread
    future = concurrent.futures.Future()
    got = []
    waiter = native.Thread(target=lambda: got.append(cluster._result(future, 10.0)))
    waiter.start()
    setter = native.Thread(target=lambda: (patcher.original("time").sleep(0.2), future.set_result("created")))
    setter.start()
    deadline = time.monotonic() + 20
    while waiter.is_alive() and time.monotonic() < deadline:
        eventlet.sleep(0.01)
    out["admin_future"] = got

    from oslo_config import cfg
    import oslo_messaging
    cfg.CONF([])
    transport = oslo_messaging.get_notification_transport(cfg.CONF, url="ntkafka://127.0.0.1:1/v")
    out["driver_offload"] = repr(transport._driver.offload)
    transport.cleanup()
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def patched_child() -> dict:
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    result = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_child_is_patched(patched_child) -> None:
    assert patched_child["patched"] is True and patched_child["offload_patched"] is True


def test_the_kafka_driver_gets_native_primitives_from_its_one_seam(patched_child) -> None:
    assert patched_child["green_lock_differs"] is True  # the child really has two kinds
    assert patched_child["native_types"] is True, patched_child["native_primitives"]
    assert patched_child["queue_errors"] is True
    assert patched_child["stdlib_untouched"] is True  # the rest of the process stays green


def test_a_native_sleep_is_not_a_green_one(patched_child) -> None:
    assert patched_child["ticks_while_native_sleep"] <= 1


def test_the_rabbit_driver_and_the_listener_base_stay_green(patched_child) -> None:
    # pika's timer and loop lock are green in a patched process: the RabbitMQ driver keeps the
    # standard modules, and so does the listener base class unless a driver passes its own event
    assert patched_child["rabbit_stays_green"] is True
    assert patched_child["base_listener_stays_green"] is True


def test_a_blocking_call_from_the_hub_runs_in_tpool_and_the_hub_keeps_running(patched_child) -> None:
    assert patched_child["offload_other_thread"] is True
    # 0.5 s blocked in a native thread: a free hub ticks ~50 times; a blocked one 0 or 1
    assert patched_child["ticks_while_blocking"] >= 10
    assert patched_child["exception"] == "raised in tpool"


def test_a_call_from_another_native_thread_runs_there(patched_child) -> None:
    assert patched_child["direct_on_native_thread"] is True


def test_admin_future_resolved_by_a_native_thread_is_seen(patched_child) -> None:
    assert patched_child["admin_future"] == ["created"]


def test_the_driver_offloads_under_eventlet(patched_child) -> None:
    assert patched_child["driver_offload"] == "<Offload through eventlet.tpool>"


# -- without monkey-patching (this process) -------------------------------------------------

def test_without_monkey_patching_calls_run_directly() -> None:
    offload = eventlet_support.Offload()
    assert offload.patched is False and not offload.on_hub()
    assert offload(threading.get_ident) == threading.get_ident()
    with pytest.raises(ValueError, match="x"):
        offload(lambda: (_ for _ in ()).throw(ValueError("x")))
    assert repr(offload) == "<Offload direct>"


def test_admin_result_waits_for_a_future_set_by_another_thread() -> None:
    future: concurrent.futures.Future = concurrent.futures.Future()
    threading.Timer(0.1, future.set_result, ("done",)).start()
    assert cluster._result(future, 10.0) == "done"


def test_admin_result_raises_the_future_exception() -> None:
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_exception(KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS)))
    with pytest.raises(KafkaException):
        cluster._result(future, 1.0)


def test_admin_result_is_bounded() -> None:
    started = time.monotonic()
    with pytest.raises(MessagingException, match="did not answer an admin request within 0.2s"):
        cluster._result(concurrent.futures.Future(), 0.2)
    assert time.monotonic() - started < 5


LOG_CHILD = textwrap.dedent("""
    import eventlet
    eventlet.monkey_patch()
    import io, json, logging
    from eventlet import patcher
    from oslo_config import cfg
    import oslo_messaging

    stream = io.StringIO()
    logging.getLogger().addHandler(logging.StreamHandler(stream))
    logging.getLogger().setLevel(logging.INFO)
    cfg.CONF([])
    transport = oslo_messaging.get_notification_transport(cfg.CONF, url="ntkafka://127.0.0.1:1/v")
    ours = logging.getLogger("notify_transport.drivers.kafka.listener")
    librdkafka = logging.getLogger("notify_transport.drivers.kafka.librdkafka")
    service = logging.getLogger("service")

    def native(logger):
        for n in range(5000):
            logger.info("native %d", n)

    threads = [patcher.original("threading").Thread(target=native, args=(lg,), daemon=True)
               for lg in (ours, librdkafka)]
    for thread in threads:
        thread.start()

    def green():
        for n in range(20000):
            service.info("green %d", n)
            if n % 100 == 0:
                eventlet.sleep(0)

    for worker in [eventlet.spawn(green) for _ in range(2)]:
        worker.wait()
    while any(thread.is_alive() for thread in threads):
        eventlet.sleep(0.01)
    transport.cleanup()  # drains what is still queued
    text = stream.getvalue()
    print(json.dumps({"native": text.count("native"), "green": text.count("green")}))
""")


def test_native_threads_logging_beside_green_ones_neither_deadlocks_nor_loses_records() -> None:
    """Without the bridge, the handler's greened lock deadlocks here within seconds
    ("greenlet.error: Cannot switch to a different thread", then a hang)."""
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    result = subprocess.run([sys.executable, "-c", LOG_CHILD], capture_output=True, text=True, timeout=120,
                            env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"native": 10000, "green": 40000}
