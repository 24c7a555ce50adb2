"""``notify-transport serve`` without a broker: arguments, errors, and the signal handling on the fake driver."""
from __future__ import annotations

import argparse
import os
import signal
import threading
import time

import pytest
from waits import wait_until
from oslo_config import cfg

from notify_transport import get_notification_transport
from notify_transport.cli import main as cli_main
from notify_transport.cli.serve import _Service
from notify_transport.listeners import RegisteredEntry, describe


def test_serve_needs_a_transport(monkeypatch, capsys) -> None:
    monkeypatch.delenv("NOTIFY_TRANSPORT_URL", raising=False)
    assert cli_main.main(["serve"]) == 2
    assert "no transport URL configured" in capsys.readouterr().err


def test_an_unknown_name_lists_what_is_registered(capsys) -> None:
    assert cli_main.main(["serve", "nosuch", "--transport-url", "fake://"]) == 1  # not found
    err = capsys.readouterr().err
    assert "no listener named 'nosuch' in entry point group notify_transport.listeners" in err
    assert "registered:" in err


@pytest.mark.parametrize("option", ["--stop-timeout", "--stats-interval"])
def test_timings_must_be_positive(option, capsys) -> None:
    with pytest.raises(SystemExit):
        cli_main.main(["serve", option, "0"])
    assert "must be more than 0" in capsys.readouterr().err


class Slow:
    """Takes ``delay`` seconds per notification."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.started = threading.Event()
        self.done: list[int] = []

    def info(self, ctxt, publisher_id, event_type, payload, metadata) -> None:
        self.started.set()
        time.sleep(self.delay)
        self.done.append(payload["seq"])


def run_service(endpoint: Slow, signals: list[int], stop_timeout: float = 10.0) -> tuple[int, float]:
    """Run a service of one listener on the fake driver; send ``signals`` to this process once a
    notification is being dispatched; return the exit status and how long the stop took."""
    conf = cfg.ConfigOpts()
    conf([])
    transport = get_notification_transport(conf, "fake://")
    listener = describe(RegisteredEntry("slow", "tests:Slow", "tests 0"), endpoint, conf)
    args = argparse.Namespace(stop_timeout=stop_timeout, stats_interval=60.0, skip_broken=False)
    service = _Service(transport, [listener], args)
    signalled: list[float] = []

    def send() -> None:
        from notify_transport import Notifier
        wait_until(lambda: service.servers, timeout=30)  # until the service runs
        notifier = Notifier(transport, "compute.host1", driver="messagingv2", topics=["notifications"])
        for seq in range(3):
            notifier.info({}, "compute.instance.create.end", {"seq": seq})
        endpoint.started.wait(30)
        signalled.append(time.monotonic())
        for count, signum in enumerate(signals, 1):
            os.kill(os.getpid(), signum)
            # handled before the next is sent (pending signals are handled by number, not in order)
            wait_until(lambda count=count: len(service._signals) >= count, timeout=10)

    threading.Thread(target=send, daemon=True).start()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        code = service.run()
    finally:
        transport.cleanup()
    assert signal.getsignal(signal.SIGTERM) is previous  # handlers restored
    return code, time.monotonic() - signalled[0]


def test_sigterm_drains_and_exits_0() -> None:
    endpoint = Slow(0.2)
    code, took = run_service(endpoint, [signal.SIGTERM])
    assert code == 0
    assert took < 10  # bounded by --stop-timeout
    assert endpoint.done == [0, 1, 2]  # what was received was dispatched before the exit


def test_a_graceful_stop_that_runs_out_of_time_exits_1() -> None:
    code, took = run_service(Slow(5.0), [signal.SIGTERM], stop_timeout=1.0)
    assert code == 1
    assert took < 5.0 + 3.0


def test_a_second_signal_stops_at_once() -> None:
    code, took = run_service(Slow(30.0), [signal.SIGTERM, signal.SIGINT], stop_timeout=60.0)
    assert code == 128 + signal.SIGINT
    assert took < 20


class Fussy(Slow):
    workers = 2  # a Kafka delivery option: the fake driver refuses it at start


@pytest.mark.parametrize("skip_broken", [False, True])
def test_a_listener_that_fails_to_start_stops_the_service_unless_skip_broken(skip_broken, caplog) -> None:
    conf = cfg.ConfigOpts()
    conf([])
    transport = get_notification_transport(conf, "fake://")
    listeners = [describe(RegisteredEntry(name, f"tests:{type(ep).__name__}", "tests 0"), ep, conf)
                 for name, ep in (("fussy", Fussy(0)), ("plain", Slow(0)))]
    service = _Service(transport, listeners, argparse.Namespace(stop_timeout=5.0, stats_interval=60.0,
                                                                skip_broken=skip_broken))
    if skip_broken:
        threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    with caplog.at_level("INFO"):
        try:
            code = service.run()
        finally:
            transport.cleanup()
    assert "listener fussy failed to start: ConfigurationError: The fake driver takes no listener options" \
        in caplog.text
    if skip_broken:
        assert code == 0 and list(service.servers) == ["plain"]
    else:
        assert code == 1
        assert "1 of 2 listener(s) failed to start: stopping" in caplog.text


def test_sighup_reloads_the_mutable_serve_options(tmp_path, caplog) -> None:
    from notify_transport.cli import serve
    from notify_transport.options import register_serve_opts

    conf_file = tmp_path / "serve.conf"
    conf_file.write_text("[serve]\nstats_interval = 60\nstop_timeout = 10\n")
    conf = cfg.ConfigOpts()
    register_serve_opts(conf)
    conf([], default_config_files=[str(conf_file)])
    transport = get_notification_transport(conf, "fake://")
    listener = describe(RegisteredEntry("slow", "tests:Slow", "tests 0"), Slow(0), conf)
    service = _Service(transport, [listener], serve._settings(conf, argparse.Namespace(skip_broken=False)), conf)

    def operator() -> None:
        for _ in range(600):  # until the service runs
            if service.servers:
                break
            time.sleep(0.05)
        conf_file.write_text("[serve]\nstats_interval = 0.5\nstop_timeout = 10\n")
        os.kill(os.getpid(), signal.SIGHUP)
        for _ in range(600):
            if service.args.stats_interval == 0.5:
                break
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=operator, daemon=True).start()
    with caplog.at_level("INFO"):
        try:
            code = service.run()
        finally:
            transport.cleanup()
    assert code == 0
    assert service.args.stats_interval == 0.5
    assert "options reloaded: stats_interval=0.5s" in caplog.text


def test_counters_are_structured_fields_of_the_log_line() -> None:
    import io
    import json
    import logging

    from oslo_log import formatters

    from notify_transport.notify.counters_log import CountersLog

    class Server:
        def metrics(self) -> dict:
            return {"received": 5, "dispatched": 4, "failed": 1, "lag": {("t", 0): 2, ("t", 1): 1}}

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatters.JSONFormatter())
    logger = logging.getLogger("test.counters")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    CountersLog({"audit": Server()}, 60, logger=logger).report()
    line = json.loads(out.getvalue())
    assert line["extra"] == {"listener": "audit", "received": 5, "dispatched": 4, "failed": 1, "lag": 3}
    assert line["message"] == "listener audit: received=5 dispatched=4 failed=1 lag=3"
