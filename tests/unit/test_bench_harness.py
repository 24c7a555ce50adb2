"""The benchmark harness without brokers: statistics, targets, the table, JSON, workers."""
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import payload, report, run, stats  # noqa: E402
from bench.procs import Worker, WorkerError, run_worker  # noqa: E402


# -- stats -----------------------------------------------------------------------

def test_percentile_interpolates_like_numpy_linear():
    samples = [10, 1, 4, 3, 2]   # sorted: 1 2 3 4 10
    assert stats.percentile(samples, 0) == 1
    assert stats.percentile(samples, 50) == 3
    assert stats.percentile(samples, 100) == 10
    assert stats.percentile(samples, 90) == pytest.approx(4 + 0.6 * 6)
    assert stats.percentile([7.5], 99) == 7.5


@pytest.mark.parametrize("bad", [[], None])
def test_percentile_of_nothing_is_an_error(bad):
    with pytest.raises(ValueError):
        stats.percentile(bad or [], 50)


def test_percentile_out_of_range():
    with pytest.raises(ValueError):
        stats.percentile([1, 2], 101)


def test_summarize_latencies_reports_milliseconds():
    out = stats.summarize_latencies([0.001] * 98 + [0.010, 0.020])
    assert out["count"] == 100
    assert out["p50_ms"] == pytest.approx(1.0)
    assert out["max_ms"] == pytest.approx(20.0)
    assert out["min_ms"] == pytest.approx(1.0)
    assert out["p99_ms"] == pytest.approx(10.0 + 0.01 * 10)
    assert stats.summarize_latencies([]) == {"count": 0}


def test_rate_and_ratio_edges():
    assert stats.rate(100, 2.0) == 50.0
    assert stats.rate(0, 1.0) == 0.0 and stats.rate(5, 0) == 0.0
    assert stats.ratio(10, 4) == 2.5
    assert stats.ratio(None, 4) is None and stats.ratio(3, 0) is None


# -- targets and rows ------------------------------------------------------------

def test_targets_check_each_kind():
    assert report.Target("vs_oslo_min", 10).check(100, 9, None) is True
    assert report.Target("vs_oslo_min", 10).check(100, 11, None) is False
    assert report.Target("vs_raw_min", 0.5).check(50, None, 100) is True
    assert report.Target("vs_raw_min", 0.5).check(49, None, 100) is False
    assert report.Target("vs_oslo_max", 0.5).check(1.0, 2.0, None) is True
    assert report.Target("vs_oslo_max", 0.5).check(1.1, 2.0, None) is False
    assert report.Target("vs_raw_max", 2).check(4.0, None, 2.0) is True
    assert report.Target("vs_raw_max", 2).check(4.1, None, 2.0) is False
    assert report.Target("vs_raw_max", 2).check(4.1, None, None) is None
    assert report.Target("abs_max", 10).check(9.9, None, None) is True
    assert report.Target("abs_max", 10).check(10.1, None, None) is False
    assert report.Target("vs_oslo_min", 10).check(100, None, None) is None


def _results():
    return {
        "kafka_send": {"ours": {"rate": 120_000.0, "cpu_us_per_msg": 8.0}, "oslo": {"rate": 10_000.0},
                       "raw": {"rate": 200_000.0, "cpu_us_per_msg": 5.0}},
        "kafka_listen_p1": {"ours": {"rate": 50_000.0}, "oslo": {"rate": 10_000.0},
                            "raw": {"rate": 300_000.0, "decode_rate": 200_000.0}},
        "kafka_e2e": {"ours": {"p50_ms": 1.0, "p99_ms": 12.0}, "oslo": {"error": "boom"},
                      "raw": {"p50_ms": 0.5, "p99_ms": 3.0, "note": "fine"}},
        "rpc_call_seq": {"ours": {"p50_ms": 1.0, "p99_ms": 2.0}, "oslo": {"p50_ms": 3.0, "p99_ms": 9.0}},
    }


def test_evaluate_gives_ratios_and_verdicts():
    rows = {(r.measure, r.label): r for r in report.evaluate(_results())}
    send = rows[("kafka_send", "Kafka notify send (delivered)")]
    assert send.vs_oslo == pytest.approx(12.0) and send.vs_raw == pytest.approx(0.6)
    assert send.verdict == "PASS"
    cpu = rows[("kafka_send", "  CPU time per notification sent")]
    assert cpu.vs_raw == pytest.approx(1.6) and cpu.verdict == "PASS"   # at most 2x raw's CPU
    listen = rows[("kafka_listen_p1", "Kafka listener dispatch, 1 partition")]
    assert listen.verdict == "FAIL"            # 5x oslo, 0.17 raw
    p99 = rows[("kafka_e2e", "Kafka e2e latency p99 @500/s")]
    assert p99.verdict == "FAIL" and p99.values["oslo"] is None
    p50 = rows[("kafka_e2e", "Kafka e2e latency p50 @500/s")]
    assert p50.verdict == "-"
    # a result's notes go with the first row of its measure only
    assert any("oslo: boom" in n for n in p50.notes) and any("raw: fine" in n for n in p50.notes)
    assert p99.notes == []
    call = rows[("rpc_call_seq", "RPC call latency p50 (sequential)")]
    assert call.verdict == "PASS" and call.vs_raw is None
    # the decoding floor row: raw's decode_rate, no oslo cell, no target
    floor = rows[("kafka_listen_p1", "  raw = consume + orjson decode of each record")]
    assert floor.values == {"ours": 50_000.0, "oslo": None, "raw": 200_000.0}
    assert floor.vs_raw == pytest.approx(0.25) and floor.vs_oslo is None and floor.verdict == "-"
    # measures without results are not shown
    assert not any(r.measure == "kafka_listen_p6" for r in rows.values())


def test_missing_number_is_not_judged():
    rows = report.evaluate({"kafka_send": {"ours": {"rate": 5.0}, "oslo": {"error": "x"},
                                           "raw": {"rate": 10.0}}})
    assert rows[0].verdict == "N/A"
    # neither the rate (no oslo number) nor the CPU (no numbers) can be judged
    assert report.summary_counts(rows) == {"PASS": 0, "FAIL": 0, "N/A": 2}


def test_table_and_markdown_show_every_row():
    rows = report.evaluate(_results())
    table = report.format_table(rows)
    lines = table.splitlines()
    assert lines[0].split()[:5] == ["measure", "unit", "ours", "oslo", "raw"]
    assert "120,000" in table and "12.0x" in table and "0.60x" in table
    assert table.count("PASS") == 3 and table.count("FAIL") == 2
    assert "CPU time per notification sent" in table
    assert "notes:" in table and "oslo: boom" in table
    md = report.format_markdown(rows)
    assert md.count("\n") == len(rows) + 1 and md.startswith("| measure |")


def test_json_document_round_trips(tmp_path):
    rows = report.evaluate(_results())
    doc = report.build_document({"run_id": "x"}, _results(), rows)
    path = report.write_json(str(tmp_path / "deep" / "out.json"), doc)
    loaded = json.loads(open(path).read())
    assert loaded["meta"] == {"run_id": "x"}
    assert loaded["summary"] == {"PASS": 3, "FAIL": 2, "N/A": 0}
    assert loaded["results"]["kafka_send"]["ours"]["rate"] == 120_000.0
    assert {r["verdict"] for r in loaded["rows"]} == {"PASS", "FAIL", "-"}
    assert not os.path.exists(path + ".tmp")


def _storm(**fields):
    from bench.kafka_restart_storm import StormResult

    return StormResult("noida", 8, 400.0, 3, 3.0, **fields)


def test_storm_result_becomes_the_rows_numbers(monkeypatch):
    from bench import kafka_restart_storm

    monkeypatch.setattr(kafka_restart_storm, "storm", lambda name, **kw: _storm(
        sent=1000, failed=5, delivered=995, longest_call=0.5, missing=2,
        first_delivery_after_answer=[0.9, 2.5, 1.2]))
    out = kafka_restart_storm.measure("noida")
    assert out["failed_pct"] == pytest.approx(0.5) and out["first_delivery_worst_s"] == 2.5
    assert out["lost_silently"] == 2 and out["longest_call"] == 0.5
    json.dumps(out)   # a worker result travels as JSON
    rows = [r for r in report.evaluate({"storm_noida": {"ours": out}}) if r.measure == "storm_noida"]
    assert [r.verdict for r in rows] == ["PASS", "PASS", "-", "FAIL"]   # 2 lost silently > 0
    assert all(r.values["oslo"] is None and r.values["raw"] is None for r in rows)


def test_storm_restart_without_delivery_has_no_worst_time(monkeypatch):
    from bench import kafka_restart_storm

    monkeypatch.setattr(kafka_restart_storm, "storm", lambda name, **kw: _storm(
        sent=10, first_delivery_after_answer=[0.9, -1.0]))
    out = kafka_restart_storm.measure("noida")
    assert "first_delivery_worst_s" not in out and "1 of 2 restarts saw no delivery" in out["note"]
    first_delivery = report.evaluate({"storm_tansu": {"ours": out}})[2]
    assert first_delivery.label.startswith("  first delivery") and first_delivery.values["ours"] is None


# -- options ---------------------------------------------------------------------

def test_only_selects_groups_and_names():
    assert run._selected("kafka") == set(run.KAFKA_MEASURES)
    assert "kafka_restart_storm" in run._selected("kafka")
    assert run._selected("kafka_restart_storm") == {"kafka_restart_storm"}
    assert run._selected("rabbit,kafka_e2e") == set(run.RABBIT_MEASURES + run.RABBIT_CLUSTER_MEASURES) | {"kafka_e2e"}
    assert run._selected("rabbit_cluster_faults") == {"rabbit_cluster_faults"}
    with pytest.raises(SystemExit, match="unknown measure"):
        run._selected("kafka,nope")


def test_quick_sizes_are_smaller_and_overrides_apply():
    full, quick = run.Sizes(), run.Sizes.quick()
    assert quick.send_count < full.send_count and quick.e2e_seconds < full.e2e_seconds
    assert quick.storm_cycles == 1 < full.storm_cycles
    args = run.build_parser().parse_args(["--quick", "--send-count", "123", "--impls", "ours,raw"])
    r = run.Run(args)
    assert r.sizes.send_count == 123 and r.impls == ["ours", "raw"] and r.budget == 90.0
    with pytest.raises(SystemExit):
        run.Run(run.build_parser().parse_args(["--impls", "ours,kombu"]))


# -- payload ---------------------------------------------------------------------

def test_envelope_is_oslo_readable_and_about_1300_bytes():
    from oslo_messaging._drivers import impl_kafka

    ctxt = payload.make_context("request")
    body = payload.make_payload(ctxt)
    raw = payload.encode_envelope(body, payload.context_dict(ctxt))
    assert 1250 <= len(raw) <= 1350
    got_ctxt, msg = impl_kafka.unpack_message(raw)
    assert got_ctxt == payload.context_dict(ctxt) and got_ctxt["auth_token"] is None
    assert msg["payload"] == body and msg["event_type"] == payload.EVENT_TYPE


def test_stamped_copies():
    body = payload.make_payload(None)
    stamped = payload.stamped(body)
    assert stamped["sent_at"] > 0 and body["sent_at"] == 0.0


# -- workers ---------------------------------------------------------------------

def test_worker_returns_the_function_result():
    assert run_worker("bench.stats:rate", {"count": 10, "seconds": 2.0}, timeout=60) == 5.0


def test_worker_error_is_reported_not_raised():
    out = run_worker("bench.stats:percentile", {"samples": [], "pct": 50}, timeout=60)
    assert out["error"].startswith("ValueError")


def test_worker_that_dies_is_an_error():
    worker = Worker("bench.worker:wait_command", {"expected": "never"})
    worker.kill()
    with pytest.raises(WorkerError):
        worker.wait_signal("ready", 5)


def test_median_result_keeps_a_real_round_and_all_values():
    rounds = [{"rate": 3.0, "n": "a"}, {"error": "boom"}, {"rate": 1.0, "n": "b"}, {"rate": 2.0, "n": "c"}]
    out = run.median_result(rounds, "rate")
    assert out["n"] == "c" and out["rate"] == 2.0
    assert out["rounds"] == [3.0, None, 1.0, 2.0]
    assert "1 of 4 rounds failed: boom" in out["note"]
    assert run.median_result([{"rate": 5.0}, {"rate": 7.0}], "rate")["rate"] == 5.0
    assert run.median_result([{"error": "x"}], "rate") == {"error": "x"}
    assert run.median_result([], "rate") == {"error": "no result"}


def test_kafka_send_rounds_interleave_the_impls_and_check_the_broker(monkeypatch):
    # the Kafka send measure's rounds go through the same interleaving as the RPC ones;
    # a round whose messages did not all reach the broker is an error, not a rate
    calls, rates = [], iter([10.0, 1.0, 30.0, 3.0, 20.0, 2.0])

    def fake_worker(target, kwargs, timeout, name=None):
        calls.append((kwargs["impl"], kwargs["topic_base"]))
        return {"rate": next(rates), "expected_on_broker": 5}

    monkeypatch.setattr(run, "run_worker", fake_worker)
    monkeypatch.setattr(run.brokers, "create_topics", lambda *a, **k: None)
    monkeypatch.setattr(run.brokers, "end_offsets",
                        lambda bootstrap, topic: 4 if topic.endswith("oslo-1.info") else 5)
    r = run.Run(run.build_parser().parse_args(["--quick", "--rounds", "3", "--impls", "ours,oslo"]))
    r.kafka_send()
    assert [(impl, base.rsplit("-", 1)[1]) for impl, base in calls] == [
        ("ours", "0"), ("oslo", "0"), ("ours", "1"), ("oslo", "1"), ("ours", "2"), ("oslo", "2")]
    ours, oslo = r.results["kafka_send"]["ours"], r.results["kafka_send"]["oslo"]
    assert (ours["rate"], ours["rounds"]) == (20.0, [10.0, 30.0, 20.0])
    assert (oslo["rate"], oslo["rounds"]) == (1.0, [1.0, None, 2.0])
    assert "1 of 3 rounds failed: only 4 of 5 messages reached the broker" in oslo["note"]


# -- the RPC rounds (workers faked: which worker gets what, which keys are recorded) --------

class _FakeServer:
    """Stands for a server worker; ``fail`` makes it die before it is ready."""

    started: list[tuple[str, dict, str]] = []

    def __init__(self, target, kwargs, name=None):
        self.kwargs = kwargs
        self.stopped = self.killed = False
        _FakeServer.started.append((target, kwargs, name))

    def wait_signal(self, name, timeout):
        if self.kwargs["impl"] == "raw":
            raise WorkerError("server died\ntraceback")

    def send(self, command):
        self.stopped = command == "stop"

    def result(self, timeout):
        return {}

    def kill(self):
        self.killed = True


def _fake_rpc_run(monkeypatch, args=("--quick",), values=None):
    """A run whose workers are faked; ``values`` gives each client round's numbers in turn."""
    _FakeServer.started = []
    clients = []
    values = iter(values or [])

    def fake_client(target, kwargs, timeout, name=None):
        clients.append((target, kwargs, name))
        if kwargs["impl"] == "oslo" and not kwargs.get("eventlet"):  # all but eventlet rounds
            return {"error": "client failed"}
        p50, rate = next(values, (1.0, 10.0))
        return {k: {"p50_ms": p50, "rate": rate, "by": kwargs["impl"]}
                for k in ("rpc_call_seq", "rpc_call_threads", "rpc_cast")}

    monkeypatch.setattr(run, "Worker", _FakeServer)
    monkeypatch.setattr(run, "run_worker", fake_client)
    from bench import brokers

    r = run.Run(run.build_parser().parse_args(list(args)))
    return r, brokers.RabbitVhost("t"), clients


def test_rpc_rounds_interleave_the_columns_and_keep_each_keys_median(monkeypatch):
    # ntrabbit rounds alternate ntrabbit, oslo (only the eventlet ones both answer, three
    # values go to the threaded ntrabbit rounds); each key's median is taken on its own
    # metric: p50 for the sequential calls, the rate for the others
    values = [(0.9, 30.0), (1.5, 10.0), (0.6, 50.0), (1.4, 12.0), (0.7, 20.0), (1.6, 11.0)]
    r, vhost, clients = _fake_rpc_run(monkeypatch, ("--quick", "--rounds", "3"),
                                      [(2.0, 1.0)] * 3 + values)
    r.ntrabbit(vhost)
    names = [n for _, _, n in clients]
    assert names[:6] == ["ntrabbit-client/threads/ntrabbit", "ntrabbit-client/threads/oslo"] * 3
    assert names[6:] == ["ntrabbit-client/eventlet/ntrabbit", "ntrabbit-client/eventlet/oslo"] * 3
    ev_seq, ev_cast = r.results["ntrabbit_ev_call_seq"], r.results["ntrabbit_ev_cast"]
    assert (ev_seq["ours"]["p50_ms"], ev_seq["ours"]["rounds"]) == (0.7, [0.9, 0.6, 0.7])
    assert (ev_cast["ours"]["rate"], ev_cast["ours"]["rounds"]) == (30.0, [30.0, 50.0, 20.0])
    assert (ev_seq["oslo"]["p50_ms"], ev_cast["oslo"]["rate"]) == (1.5, 11.0)
    assert r.results["ntrabbit_cast"]["oslo"] == {"error": "client failed"}


def test_rpc_round_records_each_key_per_impl(monkeypatch):
    r, vhost, clients = _fake_rpc_run(monkeypatch)
    r.rpc(vhost)
    assert [(t, kw["server"], n) for t, kw, n in _FakeServer.started] == [
        ("bench.rabbit_rpc:serve", "bench-server", f"rpc-server/{impl}") for impl in ("ours", "oslo", "raw")]
    assert [(t, n) for t, _, n in clients] == [("bench.rabbit_rpc:client", f"rpc-client/{impl}")
                                               for impl in ("ours", "oslo")]
    assert "eventlet" not in clients[0][1] and clients[0][1]["casts"] == r.sizes.rpc_casts
    assert set(r.results) == {"rpc_call_seq", "rpc_call_threads", "rpc_cast"}
    for key in r.results:
        assert r.results[key]["ours"]["by"] == "ours"
        assert r.results[key]["oslo"] == {"error": "client failed"}
        assert r.results[key]["raw"] == {"error": "server died"}
    topic = f"{r.prefix}-rpc-ours"
    assert {topic, f"{topic}.raw", f"{topic}.bench-server"} <= vhost._queues


def test_ntrabbit_round_records_prefixed_keys_in_ours_and_oslo_columns(monkeypatch):
    r, vhost, clients = _fake_rpc_run(monkeypatch)
    r.ntrabbit(vhost)
    assert [(n, kw["eventlet"]) for _, kw, n in _FakeServer.started] == [
        ("ntrabbit-server/threads/ntrabbit", False), ("ntrabbit-server/threads/oslo", False),
        ("ntrabbit-server/eventlet/ntrabbit", True), ("ntrabbit-server/eventlet/oslo", True)]
    assert {t for t, _, _ in clients} == {"bench.ntrabbit_rpc:client"}
    assert [n for _, _, n in clients][-1] == "ntrabbit-client/eventlet/oslo"
    assert set(r.results) == {p + k for p in ("ntrabbit_", "ntrabbit_ev_")
                              for k in ("call_seq", "call_threads", "cast")}
    assert r.results["ntrabbit_cast"] == {
        "ours": {"p50_ms": 1.0, "rate": 10.0, "by": "ntrabbit", "rounds": [10.0]},
        "oslo": {"error": "client failed"}}
    assert r.results["ntrabbit_ev_call_seq"]["oslo"]["by"] == "oslo"
    assert {r.label for r in report.evaluate(r.results)} >= {"oslo API, ntrabbit:// vs rabbit://: call p50",
                                                             "  eventlet-patched: call p50"}
    assert f"{r.prefix}-ntr-eventlet-oslo.bench-server" in vhost._queues


# -- listener readiness (targets: each start() <= 1 s, the demo's four <= 2 s) --------

def test_readiness_runs_both_protocols_on_apache_kafka_and_keeps_the_median_round(monkeypatch):
    calls, times = [], iter([3.0, 1.5, 1.3, 1.6, 1.4, 1.5])

    def fake_worker(target, kwargs, timeout, name=None):
        calls.append((kwargs["protocol"], kwargs["topic"]))
        all_s = next(times)
        return {"ready_s": [all_s / 4] * 4, "longest_s": all_s / 4, "all_s": all_s}

    monkeypatch.setattr(run, "run_worker", fake_worker)
    r = run.Run(run.build_parser().parse_args(["--rounds", "3"]))
    r.bootstrap = "127.0.0.1:1"
    r.kafka_readiness()
    assert [p for p, _ in calls] == ["classic", "consumer"] * 3
    assert len({topic for _, topic in calls}) == 6  # a new topic, so a new group, every time
    classic, consumer = r.results["readiness_classic"]["ours"], r.results["readiness_consumer"]["ours"]
    assert (classic["all_s"], classic["rounds"]) == (1.4, [3.0, 1.3, 1.4])
    assert consumer["all_s"] == 1.5
    rows = {row.label.strip(): row for row in report.evaluate(r.results)}
    slowest = rows["Kafka listeners ready, classic protocol (demo: 4 in 2 pools): slowest start()"]
    assert (slowest.values["ours"], slowest.verdict) == (0.35, "PASS")
    assert rows["all four started"].verdict == "PASS"


def test_readiness_on_noida_runs_the_classic_protocol_only(monkeypatch):
    protocols = []
    monkeypatch.setattr(run, "run_worker", lambda target, kwargs, timeout, name=None: (
        protocols.append(kwargs["protocol"]) or {"longest_s": 1.2, "all_s": 2.5}))
    r = run.Run(run.build_parser().parse_args(["--rounds", "1", "--kafka-broker", "noida"]))
    r.kafka_readiness()
    assert protocols == ["classic"] and "readiness_consumer" not in r.results
    verdicts = [row.verdict for row in report.evaluate(r.results)]
    assert verdicts == ["FAIL", "FAIL"]


def test_readiness_url_is_the_demos_with_the_protocol_and_the_bench_query(monkeypatch):
    from bench import kafka_readiness
    from bench.kafka_impls import OURS_QUERY_ENV
    from notify_transport.url import TransportURL

    monkeypatch.setenv(OURS_QUERY_ENV, "heartbeat_interval=0.25")
    query = TransportURL.parse(None, kafka_readiness.url_for("127.0.0.1:9092", "consumer")).query
    assert query == {"heartbeat_interval": "0.25", "group_protocol": "consumer", "topic_partitions": "2"}
    monkeypatch.setenv(OURS_QUERY_ENV, "")
    assert "heartbeat_interval" not in TransportURL.parse(
        None, kafka_readiness.url_for("127.0.0.1:9092", "classic")).query
