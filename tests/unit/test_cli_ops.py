"""The operator commands without a broker: parsing, validation, planning and formatting."""
from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import logging
import re

import pytest
from hypothesis import given, settings, strategies as st

from notify_transport.cli import main as cli_main
from notify_transport.cli import common
from notify_transport.cli.ops import args as cli_args
from notify_transport.cli.common import configured_url, load_conf
from notify_transport import times
from notify_transport.cli.ops import follow, lag, output, replay, tail, topics
from notify_transport.cli.ops.start import parse_start
from notify_transport.drivers.kafka import GroupInfo, Member
from notify_transport.cli.ops.topic_kinds import TopicKind, TopicNamer
from notify_transport.drivers.naming import PRIORITIES
from notify_transport.drivers.kafka.delivery.settings import DEFAULT_DEAD_LETTER_TOPIC, DEFAULT_RETRY_TOPIC
from notify_transport.drivers.kafka.delivery.settings import topic_name as settings_topic_name
from notify_transport.drivers.naming import notification_topic
from notify_transport.cli.ops.output import Progress
from notify_transport.testing.brokers import free_port

NOW = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.timezone.utc).timestamp()


def run(*argv: str) -> int:
    """The CLI in-process; argparse's own errors end in SystemExit."""
    try:
        return cli_main.main(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)


# -- times ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("-1h", NOW - 3600), ("1h", NOW - 3600), ("-90s", NOW - 90), ("-30m", NOW - 1800),
    ("-2d", NOW - 2 * 86400), ("-1w", NOW - 7 * 86400), ("-1h30m", NOW - 5400), ("-0.5h", NOW - 1800),
    ("2024-05-01T11:00:00Z", NOW - 3600), ("2024-05-01T13:00:00+02:00", NOW - 3600),
    ("2024-05-01 11:00", NOW - 3600),  # no zone: UTC, as oslo's timestamps
    ("2024-05-01", NOW - 12 * 3600),
    # the forms the listener positions and the pipeline's durations read, through the same parser
    ("1 h", NOW - 3600), ("-2 hours", NOW - 7200), ("-1 hour 30 minutes", NOW - 5400),
    (str(NOW - 60), NOW - 60), ("20240501T1100Z", NOW - 3600),
])
def test_parse_time(text: str, expected: float) -> None:
    assert times.parse_time(text, now=NOW) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "yesterday", "-1y", "1 y", "2024-13-01", "--1h",
                                  "1969-12-31T23:59:59Z", "-100000w", "10"+"0" * 400])
def test_parse_time_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        times.parse_time(text, now=NOW)


def test_time_helpers() -> None:
    assert times.to_millis(NOW + 0.0126) == int(NOW * 1000) + 13
    assert times.format_time(NOW + 0.25) == "2024-05-01T12:00:00.250Z"


# -- argument types -------------------------------------------------------------------------

def test_priorities() -> None:
    assert cli_args.priority("INFO") == "info"
    assert cli_args.priority("warning") == "warn"
    assert cli_args.priority_list("error, critical") == ["error", "critical"]
    with pytest.raises(argparse.ArgumentTypeError, match="unknown priority 'loud'"):
        cli_args.priority_list("info,loud")
    with pytest.raises(argparse.ArgumentTypeError):
        cli_args.priority_list(",")


def test_json_arguments(tmp_path) -> None:
    assert cli_args.json_value('{"a": [1, 2]}') == {"a": [1, 2]}
    assert cli_args.json_value("3") == 3
    path = tmp_path / "payload.json"
    path.write_text('{"from": "file"}')
    assert cli_args.json_value(f"@{path}") == {"from": "file"}
    with pytest.raises(argparse.ArgumentTypeError, match="invalid JSON in .*payload.json"):
        path.write_text("{nope")
        cli_args.json_value(f"@{path}")
    with pytest.raises(argparse.ArgumentTypeError, match="cannot read"):
        cli_args.json_value(f"@{tmp_path / 'missing.json'}")
    with pytest.raises(argparse.ArgumentTypeError, match="expected a JSON object, got list"):
        cli_args.json_object("[1]")


def test_numbers_and_regexes() -> None:
    assert cli_args.positive_int("3") == 3
    for bad in ("0", "-1", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            cli_args.positive_int(bad)
    assert cli_args.non_negative_int("0") == 0
    assert cli_args.positive_float("0.5") == 0.5
    with pytest.raises(argparse.ArgumentTypeError):
        cli_args.positive_float("0")
    assert cli_args.regex("^a").search("abc")
    with pytest.raises(argparse.ArgumentTypeError, match="invalid regular expression"):
        cli_args.regex("(")


@pytest.mark.parametrize("argv, message", [
    (["send", "--transport-url", "kafka://h:1", "--event-type", "e", "--payload", "{bad"],
     "argument --payload: invalid JSON"),
    (["send", "--transport-url", "kafka://h:1", "--event-type", "e", "--ctxt", "[]"],
     "argument --ctxt: expected a JSON object"),
    (["send", "--transport-url", "kafka://h:1", "--event-type", "e", "--priority", "loud"],
     "argument --priority: unknown priority"),
    (["send", "--transport-url", "kafka://h:1"], "the following arguments are required: --event-type"),
    (["send", "--transport-url", "kafka://h:1", "--event-type", "e", "--count", "0"],
     "argument --count: must be at least 1"),
    (["tail", "--transport-url", "kafka://h:1", "--event-type", "("], "invalid regular expression"),
    (["tail", "--transport-url", "kafka://h:1", "--from", "middle"], "--from 'middle': expected earliest, latest"),
    (["tail", "--transport-url", "kafka://h:1", "--line-format", "{nope}"], "unknown field(s) 'nope'"),
    (["replay", "--pool", "p", "--to-latest", "--execute", "--dry-run"], "not allowed with argument"),
    (["replay", "--transport-url", "kafka://h:1", "--pool", "p"], "one of the arguments --to-time"),
    (["replay", "--transport-url", "kafka://h:1", "--pool", "p", "--to-earliest", "--to-latest"],
     "not allowed with argument"),
    (["replay", "--transport-url", "kafka://h:1", "--pool", "p", "--to-time", "soon"],
     "argument --to-time: 'soon' is not a time"),
    (["replay", "--transport-url", "kafka://h:1", "--to-earliest"], "required: --pool"),
    (["lag", "--transport-url", "kafka://h:1", "--priority", "nope"], "unknown priority"),
])
def test_bad_arguments_exit_2_with_a_message(argv, message, capsys) -> None:
    assert run(*argv) == 2
    assert message in capsys.readouterr().err


def test_relative_time_with_a_minus_is_a_value_not_an_option() -> None:
    args = cli_main.parse_args(["replay", "--pool", "p", "--to-time", "-1h30m"])
    assert args.to_time == pytest.approx(times.parse_time("-1h30m"), abs=5)
    args = cli_main.parse_args(["replay", "--pool", "p", "--to-offset", "7", "--partition", "0",
                              "--partition", "2"])
    assert (args.to_offset, args.partition) == (7, [0, 2])


def test_priority_lists_extend() -> None:
    args = cli_main.parse_args(
        ["tail", "--priority", "info,error", "--priority", "warning"])
    assert args.priority == ["info", "error", "warn"]


# -- configuration errors, before any broker is contacted -------------------------------------

@pytest.mark.parametrize("command", [["lag"], ["topics"], ["tail"], ["replay", "--pool", "p", "--to-latest"],
                                     ["send", "--event-type", "e"]])
def test_no_transport_url_is_a_usage_error(command, monkeypatch, capsys) -> None:
    monkeypatch.delenv("NOTIFY_TRANSPORT_URL", raising=False)
    assert run(*command) == 2
    assert "no transport URL" in capsys.readouterr().err


@pytest.mark.parametrize("url, message", [
    ("not a url", "Invalid transport URL"),
    ("kafka://h:1/?bogus=1", "Unknown option 'bogus'"),
    ("kafka://h:1/bad vhost", "cannot be part of a Kafka topic name"),
    ("nosuch://h:1", "installed drivers"),
    ("rabbit://guest:secret@h:1/", "works on Kafka only"),
])
def test_bad_urls_exit_2(url, message, capsys) -> None:
    assert run("lag", "--transport-url", url) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "secret" not in err


@pytest.mark.parametrize("query, said, step", [
    ("producer_batch_timout=1", "(did you mean producer_batch_timeout?)",
     "fix the key in the URL's query: its keys are the options of [oslo_messaging_kafka]"),
    ("zzz=1", "the options of [oslo_messaging_kafka] are: auto_offset_reset,",
     "fix the key in the URL's query: its keys are the options of [oslo_messaging_kafka]"),
    ("producer_batch_timeout=abc", "Invalid value 'abc' for 'producer_batch_timeout'",
     "fix the value of producer_batch_timeout in the URL's query"),
])
def test_a_bad_url_query_says_what_to_fix(query, said, step, capsys) -> None:
    # before: every URL error ended in "give a URL such as kafka://HOST:9092/VHOST or rabbit://..."
    assert run("send", "--transport-url", f"kafka://127.0.0.1:1/?{query}", "--event-type", "e") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err and f"try: {step}" in err


def test_tail_from_with_pool_is_a_usage_error(capsys) -> None:
    assert run("tail", "--transport-url", "kafka://127.0.0.1:1", "--pool", "p", "--from", "earliest") == 2
    assert "--from cannot be used with --pool" in capsys.readouterr().err


def test_bad_topic_name_exits_2(capsys) -> None:
    assert run("send", "--transport-url", "kafka://127.0.0.1:1", "--topic", "no spaces",
               "--event-type", "e") == 2
    assert "Kafka topic names may only contain" in capsys.readouterr().err


@pytest.mark.parametrize("argv, said", [
    (["send", "--event-type", ""], "empty event type"),
    (["send", "--event-type", "  "], "empty event type"),
    (["tail", "--pool", ""], "empty pool name"),
    (["lag", "--pool", "billing", "--pool", ""], "empty pool name"),
    (["replay", "--pool", " ", "--to-earliest"], "empty pool name"),
])
def test_an_empty_name_is_bad_input(argv, said, capsys) -> None:
    # before: tail read beside the pools, lag and replay asked the broker to describe pool ''
    # (exit 1, "ConsumerGroupDescribe:"), send sent a notification with no event type
    assert run(*argv[:1], "--transport-url", "kafka://127.0.0.1:1", *argv[1:]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1


def test_names_lose_their_surrounding_blanks() -> None:
    assert cli_args.pool_name(" billing ") == "billing"
    assert cli_args.event_type("compute.instance.create.end\n") == "compute.instance.create.end"


@pytest.mark.parametrize("argv", [["tail"], ["topics"], ["lag"], ["replay", "--pool", "p", "--to-earliest"],
                                  ["pipeline", "run", "--output", "out", "--once"]])
def test_a_kafka_command_given_another_url_asks_for_a_kafka_one(argv, capsys) -> None:
    # before: the pipeline's next step offered a rabbit:// URL, the others pointed at --help
    assert run(*argv, "--transport-url", "rabbit://guest:guest@127.0.0.1:1/") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "works on Kafka only" in err
    assert err.rstrip().endswith(f"try: {common.KAFKA_URL_HINT}")


def test_url_from_config_file_and_environment(tmp_path, monkeypatch, capsys) -> None:
    conf = tmp_path / "svc.conf"
    conf.write_text("[oslo_messaging_notifications]\ntransport_url = rabbit://h:1/\n")
    assert run("topics", "--config-file", str(conf)) == 2  # read from the file: rabbit is refused
    assert "works on Kafka only" in capsys.readouterr().err
    monkeypatch.setenv("NOTIFY_TRANSPORT_URL", "rabbit://h:1/")
    assert run("topics") == 2
    assert "works on Kafka only" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["lag"], ["topics"], ["tail", "--max", "1"],
                                     ["replay", "--pool", "p", "--to-earliest"],
                                     ["send", "--event-type", "e"]])
def test_unreachable_brokers_exit_3(command, capsys) -> None:
    url = f"kafka://127.0.0.1:{free_port()}"
    assert run(*command, "--transport-url", url, "--connect-timeout", "1") == 3
    err = capsys.readouterr().err
    assert "Cannot reach the Kafka cluster" in err


def test_help_has_examples(capsys) -> None:
    for command in ("send", "tail", "lag", "replay", "topics"):
        assert run(command, "--help") == 0
        out = capsys.readouterr().out
        assert "examples:\n  notify-transport " + command in out
        assert "exit status:" in out
        assert "(default: None)" not in out
    assert run("--help") == 0
    top = capsys.readouterr().out
    for command in ("send", "tail", "lag", "replay", "topics"):
        assert re.search(rf"^\s+{command}\s+\S", top, re.MULTILINE)


# -- formatting and planning --------------------------------------------------------------------

def test_progress_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    progress = Progress("sent", 10, stream=out, interval=0.0)
    progress.update(5)
    progress.done(10, "waiting")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("sent 5/10 (")
    assert lines[-1].startswith("sent 10/10 (") and lines[-1].endswith(" waiting")
    quiet = io.StringIO()
    slow = Progress("sent", 10, stream=quiet, interval=60.0)
    slow.update(1)  # inside the first interval: nothing yet
    assert quiet.getvalue() == ""



def test_progress_rate_is_a_whole_number_of_items_a_second(monkeypatch) -> None:
    # before: tqdm's meter gave the rate in hundredths ("sent 5/10 (202182.74/s)")
    out = io.StringIO()
    progress = Progress("sent", 10, stream=out, interval=0.0)
    monkeypatch.setattr(output.time, "monotonic", lambda: progress.started + 0.5)
    progress.update(5)
    progress.done(10, "waiting")
    assert out.getvalue().splitlines() == ["sent 5/10 (10/s)", "sent 10/10 (20/s) waiting"]
    unbounded = io.StringIO()
    Progress("read", stream=unbounded, interval=0.0).done(7)
    assert re.fullmatch(r"read 7 \((\d+|\?)/s\)\n", unbounded.getvalue())


def test_quiet_progress_prints_nothing() -> None:
    out = io.StringIO()
    progress = Progress("sent", 10, stream=out, interval=0.0, quiet=True)
    progress.update(5)
    progress.done(10, "waiting")  # forced, and still left out
    assert out.getvalue() == ""


@pytest.mark.parametrize("argv", [["-q", "lag"], ["lag", "-q"], ["--quiet", "topics"]])
def test_q_is_quiet_before_or_after_the_command(argv) -> None:
    assert cli_main.parse_args(argv).quiet is True
    assert cli_main.parse_args([a for a in argv if not a.startswith("-")]).quiet is False


def test_q_keeps_the_pipeline_progress_lines_out(monkeypatch) -> None:
    # before: -q set cliff's verbose level to 0, which the log set-up read as the default
    from notify_transport.cli import logs

    progress = logging.getLogger(logs.PROGRESS[0])
    with logs.restored():
        logs.configure(quiet=True)
        assert not progress.isEnabledFor(logging.INFO)
        logs.configure()
        assert progress.isEnabledFor(logging.INFO)


def test_global_options_are_said_in_our_words() -> None:
    text = cli_main.NotifyTransportApp().parser.format_help()
    for cliffs in ("Increase verbosity of output", "Suppress output except", "Specify a file to log output",
                   "Show help message"):
        assert cliffs not in text
    assert "no progress or status lines on stderr" in text


MESSAGE = {"message_id": "m1", "publisher_id": "compute.host1", "event_type": "compute.instance.create.end",
           "priority": "INFO", "payload": {"b": 2, "a": "é"}, "timestamp": "2024-05-01 12:00:00.123456"}


def test_tail_line_and_json() -> None:
    item = tail.Received({"user": "u"}, MESSAGE, "notifications.info.prod", 1, 42, NOW)
    assert tail.format_line(item) == ('2024-05-01T12:00:00.123Z INFO     compute.host1 '
                                      'compute.instance.create.end {"a":"é","b":2}')
    assert tail.format_line(item, long=True).startswith("notifications.info.prod[1]@42 2024-05-01")
    record = json.loads(tail.format_json(item, "prod"))
    assert record["message"] == MESSAGE and record["ctxt"] == {"user": "u"}
    assert (record["topic"], record["partition"], record["offset"], record["vhost"]) == (
        "notifications.info.prod", 1, 42, "prod")
    assert record["kafka_timestamp"] == "2024-05-01T12:00:00.000Z"
    no_stamp = tail.Received({}, {**MESSAGE, "timestamp": None}, "t", 0, 0, NOW)
    assert tail.format_line(no_stamp).startswith("2024-05-01T12:00:00.000Z INFO")


def test_tail_filter() -> None:
    everything = tail.TailFilter()
    assert everything.match(MESSAGE)
    assert tail.TailFilter(event_type=re.compile(r"^compute\.instance\.")).match(MESSAGE)
    assert not tail.TailFilter(event_type=re.compile(r"delete")).match(MESSAGE)
    assert tail.TailFilter(publisher=re.compile(r"host1$")).match(MESSAGE)
    assert not tail.TailFilter(publisher=re.compile(r"^network")).match(MESSAGE)
    assert tail.TailFilter(priorities=frozenset({"info"})).match(MESSAGE)
    assert not tail.TailFilter(priorities=frozenset({"error"})).match(MESSAGE)
    assert tail.TailFilter(priorities=frozenset({"warn"})).match({**MESSAGE, "priority": "WARNING"})


def test_lag_rows() -> None:
    partitions = [("n.info", 0), ("n.info", 1), ("n.error", 0)]
    marks = {("n.info", 0): (0, 10), ("n.info", 1): (5, 8), ("n.error", 0): (0, 0)}
    partitions.append(("n.info.dlq", 0))
    marks[("n.info.dlq", 0)] = (0, 4)
    owner = Member("rdkafka-1", "notify-transport-audit", "/10.0.0.7")
    info = GroupInfo("audit", "stable", 2, {("n.info", 0): owner})
    result = lag.pool_lag(info, partitions, {("n.info", 0): 7, ("n.info", 1): -1, ("n.info.dlq", 0): 1},
                          marks, {"n.info.dlq": "dead-letter"})
    assert [(p.committed, p.end, p.lag) for p in result.partitions] == [(7, 10, 3), (None, 8, None),
                                                                         (None, 0, None), (1, 4, None)]
    assert result.total == 3  # the dead-letter topic is not lag
    rows = lag.describe_rows([result])
    assert rows[0] == ("audit", "n.info", "notification", 0, 7, 10, 3, "notify-transport-audit", "/10.0.0.7")
    assert rows[1] == ("audit", "n.info", "notification", 1, None, 8, None, None, None)
    assert rows[3][:7] == ("audit", "n.info.dlq", "dead-letter", 0, 1, 4, None)
    assert len(lag.DESCRIBE_HEADERS) == len(rows[0])
    assert lag.summary_rows([result]) == [("audit", "stable", 2, 3, 3)]
    as_json = result.as_dict()
    assert as_json["total_lag"] == 3 and as_json["partitions"][1]["lag"] is None
    assert as_json["partitions"][0]["host"] == "/10.0.0.7"


def test_replay_plan_keeps_offsets_in_range() -> None:
    partitions = [("t", 0), ("t", 1), ("t", 2), ("t", 3)]
    marks = {("t", 0): (0, 10), ("t", 1): (4, 9), ("t", 2): (0, 5), ("t", 3): (0, 0)}
    committed = {("t", 0): 10, ("t", 1): 9, ("t", 2): -1}
    moves = replay.plan_moves(partitions, committed, marks, {tp: 6 for tp in partitions})
    assert [(m.new, m.again) for m in moves] == [(6, 4), (6, 3), (5, 0), (0, 0)]
    assert "past the end" in moves[2].note and "past the end" in moves[3].note
    gone = replay.plan_moves([("t", 1)], committed, marks, {("t", 1): 2})
    assert (gone[0].new, gone[0].again) == (4, 5) and "retention" in gone[0].note
    by_time = replay.plan_moves(partitions, committed, marks, {("t", 0): 3, ("t", 1): -1, ("t", 2): 0,
                                                               ("t", 3): -1}, target_is_time=True)
    assert [m.new for m in by_time] == [3, 9, 0, 0]
    assert "no notification that recent" in by_time[1].note
    assert by_time[2].committed is None and by_time[2].again == 5  # never committed: from the end
    assert replay.rows_of(moves)[0] == ("t", 0, 10, 6, 4, "")
    assert replay.HEADERS == ("TOPIC", "PARTITION", "FROM", "TO", "RECEIVED AGAIN", "NOTE")


def test_topics_grouped_by_vhost() -> None:
    counts = {"notifications.info": 1, "notifications.error.prod": 2, "notifications.info.prod": 2,
              "notifications.info.eu.west": 1, "versioned.notifications.audit": 1, "random": 3}
    by_vhost, other = topics.classify(counts, {"notifications.info.prod": 7})
    assert set(by_vhost) == {None, "eu.west", "prod"}
    assert [r.kafka_topic for r in by_vhost[None]] == ["notifications.info", "versioned.notifications.audit"]
    assert [(r.topic, r.priority) for r in by_vhost["prod"]] == [("notifications", "error"),
                                                                 ("notifications", "info")]
    assert by_vhost["prod"][1].messages == 7
    assert [r.kafka_topic for r in other] == ["random"]
    only, rest = topics.classify(counts, {}, base_topics=["versioned.notifications"])
    assert list(only) == [None] and [r.topic for r in only[None]] == ["versioned.notifications"]
    assert "notifications.info" in [r.kafka_topic for r in rest]


def test_topics_group_retry_and_dead_letter_topics_under_their_base() -> None:
    counts = {"notifications.info": 1, "notifications.info.retry.billing": 1, "notifications.info.dlq": 1,
              "notifications.info.prod": 1, "notifications.info.prod.retry.billing": 1,
              "notifications.info.prod.dlq": 1}
    by_vhost, other = topics.classify(counts, {})
    assert not other
    assert set(by_vhost) == {None, "prod"}  # no vhost "retry.billing" nor "dlq"
    assert [(r.kafka_topic, r.kind, r.pool) for r in by_vhost[None]] == [
        ("notifications.info", "notification", None),
        ("notifications.info.retry.billing", "retry", "billing"),
        ("notifications.info.dlq", "dead-letter", None)]
    assert [r.kind for r in by_vhost["prod"]] == ["notification", "retry", "dead-letter"]


def test_topic_kinds_follow_configured_templates() -> None:
    from types import SimpleNamespace

    namer = TopicNamer.from_options(SimpleNamespace(retry_topic="retries-{pool}-{topic}",
                                                    dead_letter_topic="none"))
    kind = namer.classify("retries-billing-notifications.error.prod")
    assert (kind.kind, kind.base, kind.priority, kind.vhost, kind.pool) == (
        "retry", "notifications", "error", "prod", "billing")
    assert namer.classify("notifications.info.dlq").kind == "notification"  # dead letters disabled
    assert namer.classify("notifications.info.dlq").vhost == "dlq"
    assert TopicNamer().classify("metrics").kind == "other"
    assert TopicNamer().classify("metrics.dlq").kind == "other"  # not from a notification topic


@settings(max_examples=200, deadline=None)
@given(retry=st.sampled_from([None, "none", "", "{topic}.again.{pool}", "retry-{pool}-{topic}"]),
       dead=st.sampled_from([None, "none", "{topic}.dead", "dead-{topic}"]),
       mode=st.sampled_from(["commit_before_dispatch", "at_least_once"]),
       max_attempts=st.integers(1, 4))
def test_the_cli_labels_the_side_topics_a_listener_uses(retry, dead, mode, max_attempts) -> None:
    """One rule names a listener's retry and dead-letter topics and the CLI's view of them: any
    side topic a listener of this configuration writes is labelled with its kind by the CLI."""
    from types import SimpleNamespace

    from notify_transport.cli.ops.topic_kinds import templates
    from notify_transport.drivers.kafka.delivery.settings import OPTION_NAMES, listener_settings
    from notify_transport.drivers.kafka.options import delivery_opts
    from notify_transport.exceptions import ConfigurationError

    opts = SimpleNamespace(**{o.name: o.default for o in delivery_opts if o.name in OPTION_NAMES})
    opts.retry_topic, opts.dead_letter_topic = retry, dead
    cli = templates(opts)
    namer = TopicNamer.from_options(opts)
    for keywords in ({}, {"delivery_mode": mode, "max_attempts": max_attempts}):
        try:
            chosen = listener_settings(opts, keywords)
        except ConfigurationError:
            continue  # the listener refuses to start: it writes nothing
        for kind, template in (("retry", chosen.retry_topic), ("dead-letter", chosen.dead_letter_topic)):
            if template is None:
                continue
            assert cli[kind] == template
            name = settings_topic_name(template, "notifications.info.prod", "billing")
            labelled = namer.classify(name)
            assert (labelled.kind, labelled.base, labelled.vhost) == (kind, "notifications", "prod")


@settings(max_examples=60, deadline=None)
@given(base=st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True), prio=st.sampled_from(PRIORITIES),
       vhost=st.one_of(st.none(), st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)),
       pool=st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True))
def test_topic_kinds_invert_the_driver_naming(base, prio, vhost, pool) -> None:
    source = notification_topic(base, prio, vhost)
    namer = TopicNamer()
    assert namer.classify(source) == TopicKind(source, "notification", base, prio, vhost)
    retry = namer.classify(settings_topic_name(DEFAULT_RETRY_TOPIC, source, pool))
    assert (retry.kind, retry.base, retry.priority, retry.vhost, retry.pool, retry.source) == (
        "retry", base, prio, vhost, pool, source)
    dead = namer.classify(settings_topic_name(DEFAULT_DEAD_LETTER_TOPIC, source, pool))
    assert (dead.kind, dead.base, dead.priority, dead.vhost, dead.source) == ("dead-letter", base, prio, vhost,
                                                                              source)


# -- tail's start positions and line format ------------------------------------------------------

@pytest.mark.parametrize("text,kind,value", [
    ("earliest", "earliest", 0), ("latest", "latest", 0), ("1200", "offset", 1200), ("0", "offset", 0),
    ("-10", "last", 10), ("-0", "latest", 0), ("-1h", "time", NOW - 3600),
    ("2024-05-01T11:00:00Z", "time", NOW - 3600)])
def test_start_positions(text, kind, value) -> None:
    start = parse_start(text, now=NOW)
    assert (start.kind, start.value) == (kind, value)


def test_start_positions_resolve_within_the_partition() -> None:
    assert parse_start("earliest").resolve(5, 9) == 5
    assert parse_start("latest").resolve(5, 9) == 9
    assert parse_start("3").resolve(5, 9) == 5 and parse_start("7").resolve(5, 9) == 7
    assert parse_start("20").resolve(5, 9) == 9
    assert parse_start("-2").resolve(5, 9) == 7 and parse_start("-100").resolve(5, 9) == 5
    assert parse_start("-1h").resolve(5, 9, at_time=6) == 6
    assert parse_start("-1h").resolve(5, 9, at_time=-1) == 9  # nothing that recent: the end


@settings(max_examples=80, deadline=None)
@given(text=st.text(max_size=12), low=st.integers(0, 50), size=st.integers(0, 50))
def test_start_parser_rejects_clearly_or_resolves_in_range(text, low, size) -> None:
    try:
        start = parse_start(text, now=NOW)
    except ValueError as exc:
        assert "--from" in str(exc)
        return
    at_time = low + size // 2 if size else -1
    assert low <= start.resolve(low, low + size, at_time) <= low + size


def test_dash_values_reach_their_option() -> None:
    args = cli_main.parse_args(["tail", "--from", "-10", "--transport-url", "kafka://h:1"])
    assert (args.start.kind, args.start.value) == ("last", 10)
    args = cli_main.parse_args(["tail", "--from", "-1h30m"])
    assert args.start.kind == "time"


def test_line_format() -> None:
    item = follow.Received({"user": "u"}, {**MESSAGE, "message_id": "m-1"}, "n.info", 0, 4, NOW)
    args = cli_main.parse_args(
        ["tail", "--line-format", "{offset} {priority} {event_type} {payload} {ctxt} {kafka_timestamp}"])
    assert tail.render(item, args, None) == (
        '4 INFO compute.instance.create.end {"a":"é","b":2} {"user":"u"} 2024-05-01T12:00:00.000Z')


# -- global options -------------------------------------------------------------------------------

def test_global_options_before_or_after_the_command(tmp_path) -> None:
    first, second = tmp_path / "a.conf", tmp_path / "b.conf"
    first.write_text("[oslo_messaging_notifications]\ntransport_url = kafka://a:1\n")
    second.write_text("[oslo_messaging_notifications]\ntransport_url = kafka://b:1\n")
    parse = cli_main.parse_args
    before = parse(["--config-file", str(first), "--debug", "lag", "--pool", "p"])
    after = parse(["lag", "--pool", "p", "--config-file", str(first), "--debug"])
    assert before.config_file == after.config_file == [str(first)] and before.debug and after.debug
    both = parse(["--config-file", str(first), "lag", "--config-file", str(second)])
    assert both.config_file == [str(first), str(second)]  # in command-line order: the last one wins
    assert configured_url(both, load_conf(both)) == "kafka://b:1"
    url = parse(["--transport-url", "kafka://x:1", "topics"])
    assert url.transport_url == "kafka://x:1"
    nested = parse(["pipeline", "run", "--output", "o", "--transport-url", "kafka://y:1"])
    assert nested.transport_url == "kafka://y:1"


def test_version_from_the_package_metadata(capsys) -> None:
    import importlib.metadata

    for argv in (["--version"], ["lag", "--version"]):
        assert run(*argv) == 0
        assert importlib.metadata.version("notify-transport") in capsys.readouterr().out


def test_user_errors_are_one_line(tmp_path, capsys) -> None:
    capsys.readouterr()
    assert run("--config-file", str(tmp_path / "missing.conf"), "lag") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing.conf: no such file" in err
    bad = tmp_path / "bad.conf"
    bad.write_text("[DEFAULT\n")
    assert run("topics", "--config-file", str(bad)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.conf" in err
    assert err.rstrip().endswith(f"try: {common.PARSE_HINT}")  # not the command's --help
    assert run("lag", "--config-dir", str(tmp_path / "nodir")) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_missing_extra_says_how_to_install(monkeypatch, capsys) -> None:
    real = common.importlib.util.find_spec
    monkeypatch.setattr(common.importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyspark" else real(name, *a))
    capsys.readouterr()
    run("--help")
    help_text = "".join(capsys.readouterr().out.split())  # wrapped at any space or dash
    assert "(needs:pipinstall'notify-transport[spark]')" in help_text
    capsys.readouterr()
    assert run("pipeline", "run", "--output", "o", "--transport-url", "kafka://h:1") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'notify-transport[spark]'" in err


def test_the_demo_without_the_embedded_extra_says_how_to_get_a_broker(monkeypatch, capsys) -> None:
    # before: "BrokerStartError: noida-db is not installed ...; try: ... report it", exit status 1
    import sys

    monkeypatch.setitem(sys.modules, "noida_db", None)  # importing it fails, as on a plain install
    monkeypatch.delenv("NOTIFY_TRANSPORT_URL", raising=False)
    capsys.readouterr()
    assert run("demo", "--count", "1") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'notify-transport[embedded]'" in err and "--transport-url" in err


def test_the_demo_on_apache_kafka_without_java_says_so(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.delenv("NOTIFY_TRANSPORT_URL", raising=False)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on it
    capsys.readouterr()
    assert run("demo", "--broker", "apache-kafka", "--count", "1") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Java 17" in err and "--transport-url" in err


def test_a_broker_that_fails_to_start_is_one_line_without_its_log(monkeypatch, capsys) -> None:
    import sys

    from notify_transport.testing.brokers import NoidaBroker

    monkeypatch.delenv("NOTIFY_TRANSPORT_URL", raising=False)
    monkeypatch.setattr(NoidaBroker, "command", lambda self: [
        sys.executable, "-c", "print('first log line'); print('second log line'); raise SystemExit(3)"])
    capsys.readouterr()
    assert run("demo", "--count", "1") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "could not start an embedded Kafka-protocol broker" in err
    assert "exited with status 3" in err and "log line" not in err


def test_the_package_never_imports_bench() -> None:
    import subprocess
    import sys

    code = ("import sys, notify_transport.cli.main as m; m.main(['--help']); "
            "sys.exit(1 if any(n == 'bench' or n.startswith('bench.') for n in sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code], cwd="/", check=False).returncode == 0
    assert "bench" not in cli_main.NotifyTransportApp().command_manager.commands


def test_progress_is_a_live_line_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    progress = Progress("sent", 10, stream=out, interval=0.0)
    progress.update(5)
    progress.done(10, "waiting")
    text = out.getvalue()
    assert "\r" in text and "10/10" in text and "waiting" in text  # redrawn in place, then ended
    assert text.endswith("\n")


def test_connection_state_logs_each_change_once(caplog) -> None:
    from confluent_kafka import KafkaError

    state = follow.ConnectionState("127.0.0.1:9092")
    caplog.set_level("DEBUG", logger="notify_transport.cli.ops.follow")
    for _ in range(5):  # librdkafka reports every failed attempt
        state.on_error(KafkaError(KafkaError._TRANSPORT, "Connection refused"))
        state.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    state.answered()
    state.answered()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("lost the connection to the Kafka brokers at 127.0.0.1:9092")
    assert warnings[1] == "the Kafka brokers at 127.0.0.1:9092 answer again"


def test_repeated_log_lines_are_dropped() -> None:
    from notify_transport.cli.logs import DropRepeats

    drop = DropRepeats(window=60)

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("notify_transport.drivers.x", logging.ERROR, __file__, 1, msg, None, None)

    assert [drop.filter(record(m)) for m in ("refused", "refused", "other", "refused")] == [
        True, False, True, False]


def test_a_command_module_that_cannot_be_imported_is_listed_and_answers_in_one_line(monkeypatch,
                                                                                    capsys) -> None:
    class NotInstalled:
        """An entry point whose module needs what is not installed."""

        name = "no_such"

        def __repr__(self) -> str:
            return "EntryPoint(no_such)"

        def load(self) -> None:
            raise ModuleNotFoundError("No module named 'nowhere'", name="nowhere")

    real = cli_main.CommandManager.load_commands

    def with_broken(manager, namespace):
        real(manager, namespace)
        manager.commands["no_such"] = NotInstalled()

    monkeypatch.setattr(cli_main.CommandManager, "load_commands", with_broken)
    capsys.readouterr()
    run("--help")
    assert "no_such" in capsys.readouterr().out
    assert run("no_such") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'no_such' is unavailable" in err


@settings(max_examples=80, deadline=None)
@given(argv=st.lists(st.one_of(st.sampled_from(["--from", "--to-time", "--topic", "-e", "--", "-5", "-1h", "x"]),
                               st.text(min_size=1, max_size=6)), max_size=8))
def test_joining_dash_values_only_glues_them_to_their_option(argv) -> None:
    from notify_transport.cli.main import DASH_VALUE_OPTIONS, join_dash_values

    joined = join_dash_values(argv)
    # nothing is lost or reordered: splitting the glued pairs gives the command line back
    split = []
    for item in joined:
        option, sep, value = item.partition("=")
        if sep and option in DASH_VALUE_OPTIONS and value.startswith("-") and item not in argv:
            split += [option, value]
        else:
            split.append(item)
    assert split == argv


@pytest.mark.parametrize("argv", [["topics"], ["lag"], ["lag", "--describe"],
                                  ["replay", "--pool", "p", "--to-latest"], ["serve", "--list"]])
def test_every_listing_command_takes_cliffs_output_options(argv) -> None:
    args = cli_main.parse_args([*argv, "-f", "csv", "-c", "POOL", "-c", "TOPIC", "--sort-column", "POOL",
                                "--max-width", "80", "--noindent", "--quote", "all"])
    assert (args.formatter, args.columns, args.sort_columns) == ("csv", ["POOL", "TOPIC"], ["POOL"])
    for fmt in ("table", "json", "yaml", "value"):
        assert cli_main.parse_args([*argv, "-f", fmt]).formatter == fmt


def test_a_listing_body_hands_its_rows_to_cliff(capsys) -> None:
    from notify_transport.cli import commands

    class Body:
        @staticmethod
        def add_parser(sub):
            parser = sub.add_parser("listing", help="a listing")
            parser.set_defaults(func=lambda args: (setattr(args, "seen", args.output_format),
                                                   emit_rows(args))[-1])
            return parser

    def emit_rows(args) -> int:
        from notify_transport.cli.ops.output import emit

        emit(args, ("NAME", "N"), [("b", None), ("a", 2)])
        return 1  # the body's exit status is the command's

    class Listing(commands.ModuleLister):
        module = Body

    from notify_transport.cli import logs

    app = cli_main.NotifyTransportApp()
    app.command_manager.add_command("listing", Listing)
    with logs.restored():  # app.run sets up the command line's logging, as main() does inside it
        assert app.run(["listing", "-f", "csv", "--sort-column", "NAME"]) == 1
        assert capsys.readouterr().out.splitlines() == ['"NAME","N"', '"a",2', '"b",""']
        assert app.run(["listing", "-f", "value", "-c", "NAME"]) == 1
        assert capsys.readouterr().out.splitlines() == ["b", "a"]
