"""The operator commands on noida (and on the cluster of $NOTIFY_TRANSPORT_KAFKA_BOOTSTRAP when set),
run in-process through ``cli.main.main``.

Each test uses topics of its own (``unique_topic``) on a vhost of its own, and
the library's Notifier and listeners to make the state the commands inspect.
"""
from __future__ import annotations

import contextlib
import json
import time
import uuid
from typing import Any, Iterator

import pytest
from endpoints import IdRecorder
from kafka_fixtures import settled
from waits import time_between_batches, wait_for_clock, wait_until
from confluent_kafka.admin import AdminClient

import notify_transport as nt
from notify_transport.cli import main as cli_main
from notify_transport.times import format_time

pytestmark = pytest.mark.functional


# -- helpers ---------------------------------------------------------------------------------

def cli(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    """Run the CLI in-process; return (exit status, stdout, stderr)."""
    capsys.readouterr()
    try:
        code = cli_main.main([str(a) for a in argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def vhost() -> str:
    return f"v{uuid.uuid4().hex[:8]}"


class Seen(IdRecorder):
    """The ``seq`` of each info notification, waited for."""

    def __init__(self) -> None:
        super().__init__(key="seq")

    def wait_for(self, count: int, timeout: float = 20.0) -> list[int]:
        """What arrived once ``count`` did (or ``timeout`` passed: the caller's assertion says so)."""
        wait_until(lambda: len(self.ids) >= count, timeout)
        return list(self.ids)

    def settle(self, server: Any) -> list[int]:
        """Everything received, once nothing more can arrive: the server's group committed the
        end of every partition, and a graceful stop dispatches everything committed."""
        assert wait_until(lambda: settled(server), 30, interval=0.2), server.metrics()
        assert server.stop(graceful=True, timeout=30)
        return list(self.ids)


@contextlib.contextmanager
def pool_listener(transport: Any, topic: str, pool: str, endpoint: Any) -> Iterator[Any]:
    server = nt.get_notification_listener(transport, [nt.Target(topic=topic)], [endpoint], pool=pool)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        server.wait()


def send(transport: Any, topic: str, seqs: range | list[int], priority: str = "info",
         event_type: str = "test.event", publisher: str = "compute.host1") -> None:
    notifier = nt.Notifier(transport, publisher_id=publisher, driver="messagingv2", topics=[topic])
    for seq in seqs:
        getattr(notifier, priority)({"request_id": f"req-{seq}"}, event_type, {"seq": seq})
    assert notifier.flush(10) == 0


@pytest.fixture
def transports(kafka_conf) -> Iterator[Any]:
    """``transports(url)`` -> a notification transport, cleaned up after the test."""
    made: list[Any] = []

    def make(url: str) -> Any:
        transport = nt.get_notification_transport(kafka_conf, url)
        made.append(transport)
        return transport

    yield make
    for transport in made:
        transport.cleanup()


# -- send and tail ----------------------------------------------------------------------------

def test_send_then_tail_gets_it(broker, unique_topic, capsys) -> None:
    topic, url = unique_topic("send"), broker.url(vhost())
    code, out, err = cli(capsys, "send", "--transport-url", url, "--topic", topic, "--priority", "error",
                         "--event-type", "compute.instance.create.error", "--publisher-id", "compute.h1",
                         "--payload", '{"instance_id": "i-1", "n": [1, 2]}',
                         "--ctxt", '{"user": "u1", "auth_token": "secret"}')
    assert code == 0, err
    kafka_topic = f"{topic}.error.{url.rsplit('/', 1)[1]}"
    assert f"sent 1 notification(s) to {kafka_topic}; all confirmed" in out

    code, out, err = cli(capsys, "tail", "--transport-url", url, "--topic", topic, "--from", "earliest",
                         "--max", "1", "--timeout", "30", "--json")
    assert code == 0, err
    record = json.loads(out)
    assert record["topic"] == kafka_topic and record["offset"] == 0
    assert record["ctxt"] == {"user": "u1"}  # the secret never left the sender
    message = record["message"]
    assert (message["priority"], message["event_type"], message["publisher_id"], message["payload"]) == (
        "ERROR", "compute.instance.create.error", "compute.h1", {"instance_id": "i-1", "n": [1, 2]})
    assert "1 notification(s) shown, 0 filtered out" in err

    code, out, err = cli(capsys, "tail", "--transport-url", url, "--topic", topic, "--from", "earliest",
                         "--max", "1", "--timeout", "30", "--long")
    assert code == 0, err
    assert out.startswith(f"{kafka_topic}[0]@0 ")
    assert out.rstrip().endswith('ERROR    compute.h1 compute.instance.create.error {"instance_id":"i-1","n":[1,2]}')


def test_tail_filters_and_reads_beside_the_pools(broker, unique_topic, transports, capsys) -> None:
    topic, url = unique_topic("filters"), broker.url(vhost())
    transport = transports(url)
    seen = Seen()
    with pool_listener(transport, topic, "billing", seen):
        send(transport, topic, range(0, 3), event_type="compute.instance.create.end", publisher="compute.h1")
        send(transport, topic, range(3, 5), event_type="compute.instance.delete.end", publisher="compute.h2")
        send(transport, topic, range(5, 6), priority="error", event_type="compute.instance.create.error",
             publisher="compute.h1")
        code, out, err = cli(capsys, "tail", "--transport-url", url, "--topic", topic, "--from", "earliest",
                             "--event-type", r"^compute\.instance\.create", "--publisher", "h1$",
                             "--priority", "info,error", "--timeout", "2")
        assert seen.wait_for(5) == [0, 1, 2, 3, 4]  # the pool got its share: tail took nothing
    lines = out.splitlines()
    assert len(lines) == 4
    assert sum("compute.instance.create.end" in line for line in lines) == 3
    assert sum("compute.instance.create.error" in line for line in lines) == 1
    assert code == 0, err
    assert "4 notification(s) shown, 2 filtered out, 0 undecodable" in err


@pytest.fixture
def tail_groups(broker) -> Iterator[Any]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def groups() -> set[str]:
        return {g.group_id for g in admin.list_consumer_groups(request_timeout=10).result().valid
                if g.group_id.startswith("notify-transport-tail-")}

    yield groups


def test_tail_from_latest_skips_the_past_and_leaves_no_group(broker, unique_topic, transports, capsys,
                                                              tail_groups, raw_producer) -> None:
    vh = vhost()
    topic, url = unique_topic("latest"), broker.url(vh)
    transport = transports(url)
    send(transport, topic, range(2))  # creates the topic; all before tail starts
    poison = raw_producer(broker)
    poison.produce(f"{topic}.info.{vh}", b"not a notification")
    assert poison.flush(10) == 0
    send(transport, topic, range(2, 3))
    before = tail_groups()
    code, out, err = cli(capsys, "tail", "--transport-url", url, "--topic", topic, "--priority", "info",
                         "--timeout", "1")
    assert code == 0, err
    assert out == ""
    assert "following 1 partition(s)" in err and "from latest" in err
    assert "0 notification(s) shown" in err
    code, out, err = cli(capsys, "tail", "--transport-url", url, "--topic", topic, "--priority", "info",
                         "--from", "earliest", "--max", "5", "--timeout", "2")
    assert code == 1 and len(out.splitlines()) == 3
    assert "only 3 of 5 notification(s) arrived within 2s" in err
    assert f"skipping undecodable record {topic}.info.{vh}[0]@2" in err
    assert "3 notification(s) shown, 0 filtered out, 1 undecodable record(s) skipped" in err
    assert tail_groups() == before


def test_tail_pool_then_lag_shows_what_is_left(broker, unique_topic, transports, capsys) -> None:
    topic, vh = unique_topic("lag"), vhost()
    url = broker.url(vh)
    transport = transports(url)
    send(transport, topic, range(10))
    kafka_topic = f"{topic}.info.{vh}"
    # a pool that never read starts at the earliest kept with this URL option
    code, out, err = cli(capsys, "tail", "--transport-url", broker.url(vh, auto_offset_reset="earliest"),
                         "--topic", topic, "--priority", "info", "--pool", "audit", "--max", "4",
                         "--timeout", "30")
    assert code == 0, err
    assert [line.rsplit(" ", 1)[1] for line in out.splitlines()] == [f'{{"seq":{n}}}' for n in range(4)]
    send(transport, topic, range(10, 15))

    code, out, err = cli(capsys, "lag", "--transport-url", url, "--topic", topic, "-f", "json")
    assert code == 0, err
    # found without --pool: the only pool reading these topics
    assert json.loads(out) == [{"POOL": "audit", "STATE": "empty", "MEMBERS": 0, "PARTITIONS": 1, "LAG": 11}]
    code, out, err = cli(capsys, "lag", "--transport-url", url, "--topic", topic, "--describe", "-f", "json")
    assert code == 0, err
    assert json.loads(out) == [{"POOL": "audit", "TOPIC": kafka_topic, "KIND": "notification", "PARTITION": 0,
                                "COMMITTED": 4, "END": 15, "LAG": 11, "MEMBER": None, "HOST": None}]

    seen = Seen()
    with pool_listener(transport, topic, "audit", seen):
        assert seen.wait_for(11) == list(range(4, 15))  # the rest, from the committed offset
        code, out, err = cli(capsys, "lag", "--transport-url", url, "--topic", topic, "--pool", "audit",
                             "--describe", "-f", "value")
        assert code == 0, err
        [row] = [line.split() for line in out.splitlines()]
        assert row[:7] == ["audit", kafka_topic, "notification", "0", "15", "15", "0"], out
        assert len(row) == 9 and row[7] != "-" and row[8] != "-"  # the member holding it, and its host
        code, out, err = cli(capsys, "lag", "--transport-url", url, "--topic", topic, "--pool", "audit",
                             "-f", "value")
        assert code == 0, err
        assert out.split() == ["audit", "stable", "1", "1", "0"]
        # a pool the cluster does not know: exit 1, as the help says, after the pools it knows
        code, out, err = cli(capsys, "lag", "--transport-url", url, "--topic", topic, "--pool", "audit",
                             "--pool", "nobody", "-f", "value")
    assert code == 1
    assert out.splitlines()[0].split() == ["audit", "stable", "1", "1", "0"]
    assert [line for line in err.splitlines() if "error:" in line] == [
        "notify-transport: error: no such pool: nobody (no member and no committed offset); "
        "try: 'notify-transport lag' without --pool lists the pools that committed"]


# -- replay -------------------------------------------------------------------------------------

def test_replay_to_earliest_re_receives_exactly_the_old_messages(broker, unique_topic, transports,
                                                                  capsys) -> None:
    topic, url = unique_topic("replay"), broker.url(vhost())
    transport = transports(url)
    args = ["--transport-url", url, "--topic", topic, "--priority", "info", "--pool", "ceilometer"]
    first = Seen()
    with pool_listener(transport, topic, "ceilometer", first):
        send(transport, topic, range(8))
        assert first.wait_for(8) == list(range(8))
        # refused while the pool has a member, and nothing changes
        code, out, err = cli(capsys, "replay", *args, "--to-earliest", "--execute")
        assert code == 1
        assert "pool 'ceilometer' has 1 member(s)" in err and "nothing changed" in err
    assert first.ids == list(range(8))  # the listener stopped: nothing more arrived

    # without --execute: the plan (from, to, received again per partition) and nothing changes
    code, out, err = cli(capsys, "replay", *args, "--to-earliest")
    assert code == 0, err
    assert "8 notification(s) received again" in out and "run again with --execute" in err
    kafka_topic = f"{topic}.info.{url.rsplit('/', 1)[1]}"
    assert [kafka_topic, "0", "8", "0", "8"] in [line.replace("|", " ").split() for line in out.splitlines()], out
    code, out, err = cli(capsys, "lag", *args, "-f", "value")
    assert out.split() == ["ceilometer", "empty", "0", "1", "0"]  # the plan moved nothing
    code, out, err = cli(capsys, "replay", *args, "--to-earliest", "--dry-run")
    assert code == 0 and "nothing changed" in err
    code, out, err = cli(capsys, "lag", *args, "-f", "value")
    assert out.split()[-1] == "0"

    code, out, err = cli(capsys, "replay", *args, "--to-earliest", "--execute")
    assert code == 0, err
    assert "8 notification(s) received again" in out
    assert "replay ceilometer: committed new offsets for 1/1 partition(s)" in err
    again = Seen()
    with pool_listener(transport, topic, "ceilometer", again) as server:
        assert again.wait_for(8) == list(range(8))
        assert again.settle(server) == list(range(8))  # exactly the old ones, once


def test_replay_to_a_time_and_to_an_offset(broker, unique_topic, transports, capsys) -> None:
    topic, url = unique_topic("replaytime"), broker.url(vhost())
    transport = transports(url)
    args = ["--transport-url", url, "--topic", topic, "--priority", "info", "--pool", "billing"]
    seen = Seen()
    with pool_listener(transport, topic, "billing", seen):
        send(transport, topic, range(5))
        middle = time_between_batches()  # broker timestamps are milliseconds
        send(transport, topic, range(5, 9))
        sent = time.time()
        assert seen.wait_for(9) == list(range(9))

    code, out, err = cli(capsys, "replay", *args, "--to-time", format_time(middle), "--execute")
    assert code == 0, err
    assert "4 notification(s) received again" in out
    again = Seen()
    with pool_listener(transport, topic, "billing", again) as server:
        assert again.wait_for(4) == [5, 6, 7, 8]
        assert again.settle(server) == [5, 6, 7, 8]

    code, out, err = cli(capsys, "replay", *args, "--to-offset", "7", "-f", "json", "--execute")
    assert code == 0, err
    plan = json.loads(out)
    assert [(p["FROM"], p["TO"], p["RECEIVED AGAIN"]) for p in plan] == [(9, 7, 2)]
    wait_for_clock(sent + 1.0)  # nothing was sent in the last second
    code, out, err = cli(capsys, "replay", *args, "--to-time", "-1s")
    assert "2 notification(s) skipped" in out and "no notification that recent" in out
    last = Seen()
    with pool_listener(transport, topic, "billing", last) as server:
        assert last.wait_for(2) == [7, 8]
        assert last.settle(server) == [7, 8]


# -- topics ------------------------------------------------------------------------------------------

def test_topics_lists_notification_topics_by_vhost(broker, unique_topic, transports, capsys) -> None:
    topic = unique_topic("topics")
    prod, test = vhost(), vhost()
    send(transports(broker.url()), topic, range(1))
    send(transports(broker.url(prod)), topic, range(2), priority="error")
    send(transports(broker.url(prod)), topic, range(3))
    send(transports(broker.url(test)), topic, range(4), priority="sample")

    code, out, err = cli(capsys, "topics", "--transport-url", broker.url(prod), "--topic", topic, "-f", "json")
    assert code == 0, err
    listing: dict = {}
    for t in json.loads(out):
        listing.setdefault(t["VHOST"], []).append(
            (t["KAFKA TOPIC"], t["TOPIC"], t["PRIORITY"], t["PARTITIONS"], t["MESSAGES"]))
    assert listing == {
        None: [(f"{topic}.info", topic, "info", 1, 1)],
        prod: sorted([(f"{topic}.error.{prod}", topic, "error", 1, 2),
                      (f"{topic}.info.{prod}", topic, "info", 1, 3)]),
        test: [(f"{topic}.sample.{test}", topic, "sample", 1, 4)],
    }
    code, out, err = cli(capsys, "topics", "--transport-url", broker.url(), "--topic", topic, "--vhost", prod,
                         "-f", "value", "-c", "KAFKA TOPIC", "-c", "MESSAGES", "--sort-column", "MESSAGES")
    assert code == 0, err
    assert out.splitlines() == [f"{topic}.error.{prod} 2", f"{topic}.info.{prod} 3"]
    code, out, err = cli(capsys, "topics", "--transport-url", broker.url(), "--topic", topic, "--vhost", "nope")
    assert code == 1 and "no notification topic on vhost 'nope'" in err


# -- bad input and failures ------------------------------------------------------------------------

def test_send_reports_failed_deliveries(broker, unique_topic, tmp_path, capsys) -> None:
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({"blob": "x" * 1_200_000}))  # over the producer's message.max.bytes
    code, out, err = cli(capsys, "send", "--transport-url", broker.url(), "--topic", unique_topic("big"),
                         "--event-type", "too.big", "--payload", f"@{huge}")
    assert code == 1
    assert "0 of 1 notification(s)" in err and "1 failed" in err


def test_send_many_shows_progress(broker, unique_topic, capsys) -> None:
    code, out, err = cli(capsys, "send", "--transport-url", broker.url(vhost()), "--topic", unique_topic("many"),
                         "--event-type", "load.test", "--count", "200")
    assert code == 0, err
    assert "sent 200 notification(s)" in out
    assert "sent 200/200" in err  # the final progress line


def test_commands_on_topics_that_do_not_exist(broker, unique_topic, capsys) -> None:
    url, topic = broker.url(vhost()), unique_topic("none")
    code, out, err = cli(capsys, "tail", "--transport-url", url, "--topic", topic, "--exit-at-end")
    assert code == 1 and "nothing to read" in err
    code, out, err = cli(capsys, "tail", "--transport-url", url, "--topic", topic, "--timeout", "1")
    assert code == 0 and "do not exist yet and are followed from their beginning once created" in err
    code, out, err = cli(capsys, "lag", "--transport-url", url, "--topic", topic)
    assert code == 1 and "exists" in err
    code, out, err = cli(capsys, "replay", "--transport-url", url, "--topic", topic, "--pool", "p",
                         "--to-latest", "--execute")
    assert code == 1 and "no partition to move" in err


def test_send_over_rabbit(rabbit, unique, fresh_conf, capsys) -> None:
    topic = unique("cli")
    transport = nt.get_notification_transport(fresh_conf, rabbit)
    seen = Seen()
    try:
        with pool_listener(transport, topic, None, seen):
            code, out, err = cli(capsys, "send", "--transport-url", rabbit, "--topic", topic,
                                 "--event-type", "e", "--payload", '{"seq": 7}', "--count", "2")
            assert code == 0, err
            assert f"sent 2 notification(s) to {topic}.info; all confirmed" in out
            assert seen.wait_for(2) == [7, 7]
    finally:
        transport.cleanup()
