"""``notify-transport serve`` and ``get_entry_point_servers`` on the noida broker (and a real Kafka).

The listeners come from the small distributions in ``tests/listener_dists``,
built once per session into a temporary directory and put on PYTHONPATH of
the subprocesses only (entry points are read from their dist-info), so they
never show up in the listener lists of other tests. Each test gives the
listeners topics and pools of its own through ``[listener:NAME]`` sections.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from waits import wait_until
from oslo_config import cfg

import notify_transport as nt
from kafka_fixtures import committed_total

pytestmark = pytest.mark.functional

DISTS = Path(__file__).resolve().parents[1] / "listener_dists"
ROOT = Path(__file__).resolve().parents[2]
#: Generous: two consumer groups join in parallel on a loaded 2-core machine.
START_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0


@pytest.fixture(scope="session")
def listener_dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``{"demo": dir, "broken": dir, "dup": dir}``: each test distribution installed into a directory of
    its own (see tests/listener_dists/README.md)."""
    built: dict[str, Path] = {}
    for key, name in (("demo", "ntlisteners_demo"), ("broken", "ntlisteners_broken"), ("dup", "ntlisteners_dup")):
        source = tmp_path_factory.mktemp(f"src-{key}") / name
        shutil.copytree(DISTS / name, source)  # building writes build/ and egg-info next to the source
        target = tmp_path_factory.mktemp(f"site-{key}")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--no-build-isolation", "--no-index", "--target", str(target), str(source)],
                       check=True, capture_output=True, timeout=300)
        built[key] = target
    return built


def env_with(*paths: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("NOTIFY_TRANSPORT_URL", None)
    env["PYTHONPATH"] = os.pathsep.join([str(p) for p in paths] + [str(ROOT)])
    env.update(extra)
    return env


class Setup:
    """A config file with a topic and two pools of its own, and the file the endpoints record to.

    ``sections`` add options to ``[listener:NAME]``; ``{topic}`` in a value is the test's topic.
    audit is at-least-once with two workers unless its section says otherwise.
    """

    #: What each listener's section says unless a test gives another value.
    DEFAULTS: dict[str, dict[str, Any]] = {"audit": {"delivery_mode": "at_least_once", "workers": 2}}

    def __init__(self, tmp_path: Path, url: str, **sections: dict[str, Any]) -> None:
        tag = uuid.uuid4().hex[:8]
        self.topic = f"serve-{tag}"
        self.pools = {"audit": f"audit-{tag}", "billing": f"billing-{tag}"}
        self.record = tmp_path / f"record-{tag}.txt"
        self.url = url
        lines = ["[oslo_messaging_notifications]", f"transport_url = {url}", f"topics = {self.topic}"]
        for name, pool in self.pools.items():
            lines += [f"[listener:{name}]", f"pool = {pool}"]
            said = {**self.DEFAULTS.get(name, {}), **sections.get(name, {})}
            lines += [f"{k} = {v}".replace("{topic}", self.topic) for k, v in said.items()]
        self.conf_file = tmp_path / f"serve-{tag}.conf"
        self.conf_file.write_text("\n".join(lines) + "\n")

    def received(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {"audit": [], "billing": []}
        if self.record.exists():
            for line in self.record.read_text().splitlines():
                name, seq = line.split()
                out[name].append(int(seq))
        return out

    def send(self, seqs: range) -> None:
        conf = cfg.ConfigOpts()
        conf([])
        transport = nt.get_notification_transport(conf, self.url)
        try:
            notifier = nt.Notifier(transport, driver="messagingv2", topics=[self.topic])
            for seq in seqs:
                notifier.prepare(publisher_id=f"compute.host{seq % 4}").info(
                    {}, "compute.instance.create.end", {"seq": seq})
            assert transport.flush(30) == 0
        finally:
            transport.cleanup()


class Serve:
    """``notify-transport serve ...`` in a subprocess, its output in a file."""

    def __init__(self, setup: Setup, paths: list[Path], *args: str, **env: str) -> None:
        self.log = setup.record.with_name(f"{setup.record.stem}-serve-{uuid.uuid4().hex[:4]}.log")
        self._out = self.log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "notify_transport.cli.main", "serve", "--config-file",
             str(setup.conf_file), "--stop-timeout", str(STOP_TIMEOUT), *args],
            stdout=self._out, stderr=subprocess.STDOUT,
            # a process group of its own, as under systemd: cotyledon signals its whole group
            start_new_session=True,
            env=env_with(*paths, NT_LISTENER_RECORD=str(setup.record), **env))

    def output(self) -> str:
        return self.log.read_text()

    def wait_serving(self, count: int) -> None:
        self.wait_for(lambda: f"serving {count} listener(s)" in self.output() or self.proc.poll() is not None,
                      START_TIMEOUT, "serve to start")
        assert self.proc.poll() is None, self.output()

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        """:func:`wait_for`, with the end of serve's log in the failure (what it was doing)."""
        if not wait_until(condition, timeout, interval=0.2):
            tail = "\n".join(self.output().splitlines()[-40:])
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; "
                                 f"serve's log ends with:\n{tail}")

    def signal(self, signum: int = signal.SIGTERM) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self._out.close()

    def children(self) -> list[int]:
        """The pids of the worker processes (Linux: /proc)."""
        pids: list[int] = []
        for path in Path(f"/proc/{self.proc.pid}/task").glob("*/children"):  # any thread may fork
            try:
                pids += [int(pid) for pid in path.read_text().split()]
            except OSError:  # the thread ended meanwhile
                continue
        return sorted(pids)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the workers too
            self.proc.wait(10)
        self._out.close()


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    if not wait_until(condition, timeout, interval=0.2):
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture
def serve(listener_dists: dict[str, Path]) -> Iterator[Callable[..., Serve]]:
    """``serve(setup, *args, broken=False, **env)`` -> a running :class:`Serve`; killed after the test."""
    made: list[Serve] = []

    def start(setup: Setup, *args: str, broken: bool = False, **env: str) -> Serve:
        paths = [listener_dists["demo"]] + ([listener_dists["broken"]] if broken else [])
        made.append(Serve(setup, paths, *args, **env))
        return made[-1]

    yield start
    for proc in made:
        proc.kill()


def run_cli(paths: list[Path], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "notify_transport.cli.main", "serve", *args],
                          capture_output=True, text=True, timeout=120, env=env_with(*paths))


def restart_audit_until_everything_arrived(serve: Callable[..., Serve], setup: Setup, count: int) -> None:
    """Serve audit again until every seq below ``count`` was dispatched at least once; stop it."""
    before = len(set(setup.received()["audit"]))
    again = serve(setup, "audit")
    again.wait_serving(1)
    again.wait_for(lambda: set(setup.received()["audit"]) == set(range(count)), 90,
             f"the rest after the restart (had {before} before it)")
    again.signal(signal.SIGTERM)
    assert again.wait(STOP_TIMEOUT + 30) == 0, again.output()


# -- the tests ---------------------------------------------------------------------------------

def test_list_shows_the_registered_listeners_with_their_distribution_topics_and_pool(
        listener_dists, tmp_path, broker) -> None:
    setup = Setup(tmp_path, broker.url(), billing={"topics": "alpha,beta"})
    proc = run_cli([listener_dists["demo"]], "--list", "--config-file", str(setup.conf_file), "-f", "value")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()}
    assert set(rows) == {"audit", "billing"}, proc.stdout
    assert rows["audit"][1:3] == ["ntlisteners-demo", "0.1.0"]
    # the class says topics=["notifications"]: the class attribute wins over [oslo_messaging_notifications]
    assert rows["audit"][3:6] == ["notifications", setup.pools["audit"], "at_least_once"]
    # the section overrides the factory's endpoint; default delivery
    assert rows["billing"][3:6] == ["alpha,beta", setup.pools["billing"], "default"]


def test_serve_delivers_every_notification_to_both_listeners_in_their_pools_and_stops_on_sigterm(
        serve, tmp_path, broker) -> None:
    # audit's class names the topic "notifications": the section points it at this test's topic
    setup = Setup(tmp_path, broker.url(topic_partitions=2), audit={"topics": "{topic}"})
    proc = serve(setup, "--stats-interval", "1")
    proc.wait_serving(2)
    out = proc.output()
    assert (f"listener audit started: topics={setup.topic} pool={setup.pools['audit']} "
            "delivery_mode=at_least_once") in out
    assert (f"listener billing started: topics={setup.topic} pool={setup.pools['billing']} "
            "delivery_mode=commit_before_dispatch") in out
    count = 120
    setup.send(range(count))
    proc.wait_for(lambda: all(len(set(v)) >= count for v in setup.received().values()), 60,
             "both listeners to receive every notification")
    proc.wait_for(lambda: f"listener audit: received={count} dispatched={count} failed=0" in proc.output(), 30,
             "the counters in the log")
    sent_at = time.monotonic()
    proc.signal(signal.SIGTERM)
    code = proc.wait(STOP_TIMEOUT + 30)
    elapsed = time.monotonic() - sent_at
    out = proc.output()
    assert code == 0, out
    assert elapsed < STOP_TIMEOUT + 30
    assert "stopped: every listener drained and committed" in out
    received = setup.received()
    for name in ("audit", "billing"):
        assert sorted(set(received[name])) == list(range(count)), name
    assert Counter(received["billing"]).most_common(1)[0][1] == 1  # commit before dispatch: once each
    # each listener read in its own pool (consumer group), and committed everything there
    for name in ("audit", "billing"):
        assert committed_total(broker.bootstrap, setup.pools[name], setup.topic) == count, name


def test_at_least_once_listener_loses_nothing_across_sigterm_and_restart(serve, tmp_path, broker) -> None:
    setup = Setup(tmp_path, broker.url(topic_partitions=2), audit={"topics": "{topic}", "max_in_flight": 20})
    count = 200
    first = serve(setup, "audit", NT_LISTENER_DELAY="0.02")
    first.wait_serving(1)
    setup.send(range(count))
    first.wait_for(lambda: len(setup.received()["audit"]) >= 30, 60, "the first notifications")
    first.signal(signal.SIGTERM)
    assert first.wait(STOP_TIMEOUT + 30) == 0, first.output()
    before = set(setup.received()["audit"])
    assert len(before) < count, "the stop came too late to test anything; send more"
    restart_audit_until_everything_arrived(serve, setup, count)
    assert "billing" not in first.output() and not setup.received()["billing"]


def test_a_second_signal_stops_at_once_and_at_least_once_delivers_the_rest_after_a_restart(
        serve, tmp_path, broker) -> None:
    # (with delivery_mode = commit_before_dispatch here, the restart gets nothing: the test fails)
    setup = Setup(tmp_path, broker.url(), audit={"topics": "{topic}", "workers": 1, "max_in_flight": 1000})
    count = 100
    proc = serve(setup, "audit", NT_LISTENER_DELAY="1")
    proc.wait_serving(1)
    setup.send(range(count))  # 100 s of work: the graceful stop cannot drain it in time
    proc.wait_for(lambda: len(setup.received()["audit"]) >= 1, 60, "the first notification")
    proc.signal(signal.SIGTERM)
    proc.wait_for(lambda: "stopping 1 listener(s) gracefully" in proc.output(), 30, "the graceful stop")
    proc.signal(signal.SIGINT)
    code = proc.wait(30)
    assert code == 128 + signal.SIGINT, proc.output()
    assert "SIGINT again: stopping at once" in proc.output()
    before = set(setup.received()["audit"])
    assert len(before) < count
    # nothing that was cut short was committed: a restart dispatches all the rest
    restart_audit_until_everything_arrived(serve, setup, count)


def test_unknown_name_exits_non_zero_listing_the_registered_names(listener_dists, tmp_path, broker) -> None:
    setup = Setup(tmp_path, broker.url())
    proc = run_cli([listener_dists["demo"]], "nosuch", "--config-file", str(setup.conf_file))
    assert proc.returncode == 1  # not found
    assert "no listener named 'nosuch'" in proc.stderr
    assert "registered: audit, billing" in proc.stderr


def test_broken_entries_are_named_and_nothing_starts(listener_dists, tmp_path, broker) -> None:
    setup = Setup(tmp_path, broker.url())
    proc = run_cli([listener_dists["demo"], listener_dists["broken"]], "--config-file", str(setup.conf_file))
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1, proc.stderr  # the contract's one line
    assert "'broken' from ntlisteners-broken 0.1.0: cannot import it: ModuleNotFoundError" in proc.stderr
    assert ("'unbuildable' from ntlisteners-broken 0.1.0: cannot build it: RuntimeError: the billing "
            "database is unreachable") in proc.stderr
    assert "started" not in proc.stdout + proc.stderr.replace("nothing started", "")
    listing = run_cli([listener_dists["demo"], listener_dists["broken"]], "--list",
                      "--config-file", str(setup.conf_file))
    assert listing.returncode == 1
    assert "BROKEN: cannot import it" in listing.stdout and "audit" in listing.stdout


def test_a_name_registered_by_two_distributions_is_an_error(listener_dists, tmp_path, broker) -> None:
    setup = Setup(tmp_path, broker.url())
    proc = run_cli([listener_dists["demo"], listener_dists["dup"]], "billing", "--config-file", str(setup.conf_file))
    assert proc.returncode == 1
    assert "'billing' from" in proc.stderr and "the name is registered more than once" in proc.stderr
    assert "ntlisteners_dup:Billing from ntlisteners-dup 0.1.0" in proc.stderr
    assert "ntlisteners_demo.endpoints:make_billing from ntlisteners-demo 0.1.0" in proc.stderr


def test_skip_broken_runs_the_others(serve, tmp_path, broker) -> None:
    setup = Setup(tmp_path, broker.url())
    proc = serve(setup, "--skip-broken", broken=True)
    proc.wait_serving(2)
    assert "Skipping listener 'broken'" in proc.output()
    setup.send(range(10))
    proc.wait_for(lambda: len(set(setup.received()["billing"])) == 10, 60, "billing to receive")
    proc.signal(signal.SIGTERM)
    assert proc.wait(STOP_TIMEOUT + 30) == 0, proc.output()


EMBED = textwrap.dedent("""
    import json, sys, time
    from oslo_config import cfg
    import notify_transport as nt
    from notify_transport.listeners import get_entry_point_servers, stop_servers

    conf = cfg.ConfigOpts()
    conf(args=[], default_config_files=[sys.argv[1]])
    transport = nt.get_notification_transport(conf)
    servers = get_entry_point_servers(transport)
    for server in servers.values():
        server.start()
    topic = conf.oslo_messaging_notifications.topics[0]
    notifier = nt.Notifier(transport, publisher_id="compute.embed", driver="messagingv2", topics=[topic])
    for seq in range(25):
        notifier.info({}, "compute.instance.create.end", {"seq": seq})
    transport.flush(30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(s.metrics()["dispatched"] < 25 for s in servers.values()):
        time.sleep(0.2)
    metrics = {name: s.metrics() for name, s in servers.items()}
    stopped = stop_servers(servers.values(), timeout=20)
    transport.cleanup()
    print(json.dumps({"names": sorted(servers), "pools": {n: s.pool for n, s in servers.items()},
                      "dispatched": {n: m["dispatched"] for n, m in metrics.items()},
                      "in_flight": {n: m.get("in_flight") for n, m in metrics.items()},
                      "stopped": stopped}))
""")


def test_get_entry_point_servers_embeds_the_listeners(listener_dists, tmp_path, broker) -> None:
    setup = Setup(tmp_path, broker.url(), audit={"topics": "{topic}"})
    proc = subprocess.run([sys.executable, "-c", EMBED, str(setup.conf_file)], capture_output=True, text=True,
                          timeout=240, env=env_with(listener_dists["demo"], NT_LISTENER_RECORD=str(setup.record)))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["names"] == ["audit", "billing"]
    assert result["pools"] == setup.pools
    assert result["dispatched"] == {"audit": 25, "billing": 25}
    assert result["stopped"] is True
    assert {k: sorted(set(v)) for k, v in setup.received().items()} == {
        "audit": list(range(25)), "billing": list(range(25))}


def test_two_workers_share_the_pool_survive_a_killed_worker_and_stop_on_sigterm(serve, tmp_path, broker) -> None:
    killed_worker_is_replaced(serve, tmp_path, broker, broker.url(topic_partitions=4))


def test_a_killed_worker_is_replaced_under_the_kip848_group_protocol(serve, tmp_path, apache_kafka) -> None:
    """Kafka 4's consumer protocol: the broker moves the dead worker's partitions, nothing is lost."""
    killed_worker_is_replaced(serve, tmp_path, apache_kafka,
                              apache_kafka.url(topic_partitions=4, group_protocol="consumer"))


def killed_worker_is_replaced(serve, tmp_path, broker, url: str,
                              serve_options: dict[str, str] | None = None) -> None:
    setup = Setup(tmp_path, url,
                  audit={"topics": "{topic}", "max_in_flight": 20}, billing={"topics": "{topic}"})
    if serve_options:
        with setup.conf_file.open("a") as conf_file:
            conf_file.write("[serve]\n" + "".join(f"{k} = {v}\n" for k, v in serve_options.items()))
    count = 300
    proc = serve(setup, "audit", "--workers", "2", "--stats-interval", "1", NT_LISTENER_DELAY="0.01")
    proc.wait_for(lambda: all(f"(worker {n})" in proc.output() for n in (0, 1)) or proc.proc.poll() is not None,
             START_TIMEOUT, "both workers serving")
    assert proc.proc.poll() is None, proc.output()
    workers = proc.children()
    assert len(workers) == 2, proc.output()
    setup.send(range(count))
    proc.wait_for(lambda: len(setup.received()["audit"]) >= 40, 60, "the first notifications")
    os.kill(workers[1], signal.SIGKILL)  # dies with work in flight, nothing committed for it
    killed = time.monotonic()
    proc.wait_for(lambda: "died (signal SIGKILL): starting it again" in proc.output(), 30, "the restart")
    proc.wait_for(lambda: set(setup.received()["audit"]) == set(range(count)), 120,
             "every notification, the killed worker's included")
    print(f"\n{broker.name}: every notification dispatched {time.monotonic() - killed:.1f} s after "
          f"the SIGKILL ({url}, serve options {serve_options or 'default'})")
    proc.wait_for(lambda: len(proc.children()) == 2 and workers[1] not in proc.children(), 30, "a new worker")
    # SIGHUP only once the new worker serves: before that it has no handler of its own yet
    proc.wait_for(lambda: proc.output().count("serving 1 listener(s)") >= 3, START_TIMEOUT,
                  "the new worker to serve")
    # both workers logged their counters
    assert "listener audit: received=" in proc.output()
    proc.signal(signal.SIGHUP)  # the master passes it to every worker, which reloads its options
    proc.wait_for(lambda: proc.output().count("options reloaded: stats_interval=1s") == 2, 30, "both reloads")
    proc.signal(signal.SIGTERM)
    assert proc.wait(STOP_TIMEOUT + 30) == 0, proc.output()
    assert committed_total(broker.bootstrap, setup.pools["audit"], setup.topic) == count
    assert not setup.received()["billing"]
