"""The devstack plugin under devstack's own code, up to a notification through the broker it started.

``../shared/devstack`` is an unmodified snapshot of openstack/devstack. The
test sources its ``functions`` (``functions-common``, ``inc/ini-config``,
``inc/python``, ...) and ``lib/rpc_backend``, enables the plugin with
devstack's ``enable_plugin`` (the line the docs give, branch ``main``), and
runs devstack's ``run_phase`` in stack.sh's order: ``source``, ``stack
pre-install``, ``stack install``, ``stack post-config``, a service configured
by ``iniset_rpc_backend`` as lib/nova does, ``stack extra``; then a
notification is sent and received through the Kafka broker the plugin
installed (from Maven Central) and started; then ``unstack`` and ``clean``,
after which nothing it started is left running.

Stand-ins, for what cannot run on a test machine (:data:`STUBS`):

* ``systemctl``: no systemd here. It runs a devstack unit's ``ExecStart`` (the
  unit file devstack's ``write_user_unit_file`` wrote) as a process group, and
  stops it with SIGTERM, as ``KillMode=process`` units stop;
* ``sudo``: not installed here, and the test runs as root: it runs the command;
* ``setup_develop``: devstack's needs a checkout of openstack/requirements for
  its constraints; the stand-in checks that the services' interpreter (this
  virtualenv, ``GLOBAL_VENV=True``) imports this checkout's package;
* the other OpenStack services (keystone, nova, ...) are not installed: one
  service's configuration is written with devstack's ``iniset_rpc_backend``
  through the plugin's hooks, and the notification is sent as a service's
  notifier would send it.
"""
from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from oslo_config import cfg

import notify_transport as nt
from notify_transport.testing.brokers import free_ports
from waits import pid_alive

ROOT = Path(__file__).resolve().parents[2]
DEVSTACK = ROOT.parent / "shared" / "devstack"

STUBS = {
    "systemctl": r'''#!/bin/bash
# systemd stand-in: devstack@NAME units run as background process groups.
state=${NT_SYSTEMD_STATE:?}
[[ "${1:-}" == "--user" ]] && shift
action=${1:-}; unit=${2:-}
pidfile="$state/$unit.pid"
running() { [[ -s "$pidfile" ]] && kill -0 "$(<"$pidfile")" 2>/dev/null; }
case "$action" in
    daemon-reload) ;;
    enable) touch "$state/$unit.enabled" ;;
    disable) rm -f "$state/$unit.enabled" ;;
    is-enabled) [[ -e "$state/$unit.enabled" ]] ;;
    start)
        command=$(sed -n 's/^ExecStart *= *//p' "${SYSTEMD_DIR:?}/$unit")
        [[ -n "$command" ]] || { echo "no ExecStart in $SYSTEMD_DIR/$unit" >&2; exit 1; }
        setsid bash -c "exec $command" >>"$state/$unit.log" 2>&1 </dev/null &
        echo $! >"$pidfile" ;;
    stop)
        if running; then
            pid=$(<"$pidfile")
            kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
            for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -KILL -- "-$pid" 2>/dev/null || true
        fi
        rm -f "$pidfile" ;;
    status) running ;;
    *) echo "systemctl stand-in: $action is not handled" >&2; exit 1 ;;
esac
''',
    "sudo": r'''#!/bin/bash
# sudo stand-in: the test runs as root; options are dropped.
while [[ "${1:-}" == -* ]]; do
    case "$1" in -u|-g) shift 2 ;; *) shift ;; esac
done
exec "$@"
''',
}

#: devstack's setup_develop, replaced after devstack's files are sourced (see the module docstring).
SETUP_DEVELOP = r'''
function setup_develop {
    echo "setup_develop $*" >>"$NT_TEST_DIR/setup_develop.log"
    "$(get_python_exec_prefix)/python3" -c 'import notify_transport, sys; sys.exit(0)'
}
'''


@pytest.fixture
def devstack_env(tmp_path: Path, rabbit: str) -> dict[str, str]:
    if not (DEVSTACK / "functions").is_file():
        pytest.fail(f"devstack's snapshot is missing at {DEVSTACK}")
    if shutil.which("java") is None:
        pytest.fail("java is needed for the broker the plugin installs")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in STUBS.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    state = tmp_path / "systemd-state"
    state.mkdir()
    port, controller = free_ports(2)
    dest = tmp_path / "opt" / "stack"
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": os.environ.get("HOME", str(tmp_path)),
        "LANG": "C.UTF-8", "TOP_DIR": str(DEVSTACK), "NT_TEST_DIR": str(tmp_path),
        "NT_SYSTEMD_STATE": str(state), "SYSTEMD_DIR": str(tmp_path / "systemd"),
        "DEST": str(dest), "DATA_DIR": str(dest / "data"), "FILES": str(tmp_path / "files"),
        "STACK_USER": "root", "GLOBAL_VENV": "True", "DEVSTACK_VENV": sys.prefix,
        "SERVICE_HOST": "127.0.0.1", "RABBIT_HOST": "127.0.0.1", "RABBIT_USERID": "guest",
        "RABBIT_PASSWORD": "guest", "ENABLED_SERVICES": "rabbit,key,n-api",
        "NOTIFY_HOST": "127.0.0.1", "NOTIFY_PORT": str(port), "KAFKA_LISTEN_HOST": "127.0.0.1",
        "KAFKA_CONTROLLER_PORT": str(controller), "KAFKA_INSTALL_SOURCE": "maven",
        "KAFKA_HEAP_OPTS": "-Xms128M -Xmx384M", "KAFKA_START_TIMEOUT": "120",
        "NOVA_CONF": str(tmp_path / "nova.conf"), "NT_PLUGIN_URL": f"file://{ROOT}",
        "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", ""),
    }


def devstack(env: dict[str, str], steps: str) -> subprocess.CompletedProcess:
    """devstack's files sourced, the plugin enabled as local.conf does, then ``steps``."""
    program = f'''
set -o errexit
export SYSTEMD_DIR SYSTEMCTL=systemctl KILL_PATH=$(command -v kill)
source "$TOP_DIR/functions"
source "$TOP_DIR/lib/rpc_backend"
{SETUP_DEVELOP}
enable_plugin notify-transport "$NT_PLUGIN_URL" main
GITDIR[notify-transport]={ROOT}   # this checkout, as fetch_plugins would have cloned it
run_phase source
{steps}
'''
    env = {k: v for k, v in env.items() if v}
    return subprocess.run(["bash", "-c", program], env=env, capture_output=True, text=True, timeout=600,
                          check=False)


def test_devstack_fetches_the_plugin_from_the_documented_line(devstack_env: dict[str, str],
                                                             tmp_path: Path) -> None:
    """devstack's own fetch_plugins clones the branch the docs name (main), not its default, master."""
    done = devstack(devstack_env, 'GITDIR[notify-transport]=$DEST/notify-transport\n'
                                  'fetch_plugins\ngit -C "$DEST/notify-transport" rev-parse HEAD')
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    main = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "main"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert done.stdout.strip().splitlines()[-1] == main
    assert (tmp_path / "opt" / "stack" / "notify-transport" / "devstack" / "plugin.sh").is_file()


def test_stack_notify_unstack_clean_under_devstacks_own_code(devstack_env: dict[str, str],
                                                            tmp_path: Path) -> None:
    state = Path(devstack_env["NT_SYSTEMD_STATE"])
    stacked = devstack(devstack_env, '''
run_phase stack pre-install
run_phase stack install
echo "KAFKA RUNNING AFTER INSTALL: $(systemctl status devstack@kafka.service && echo yes || echo no)"
run_phase stack post-config
iniset_rpc_backend nova "$NOVA_CONF"
run_phase stack extra
''')
    try:
        assert stacked.returncode == 0, stacked.stdout[-4000:] + stacked.stderr[-4000:]
        # the broker runs before post-config: stack.sh starts keystone in between
        assert "KAFKA RUNNING AFTER INSTALL: yes" in stacked.stdout
        pid = int((state / "devstack@kafka.service.pid").read_text())
        assert pid_alive(pid)
        assert "setup_develop" in (tmp_path / "setup_develop.log").read_text()

        nova = configparser.ConfigParser()
        nova.read(devstack_env["NOVA_CONF"])
        port = devstack_env["NOTIFY_PORT"]
        assert nova["DEFAULT"]["transport_url"] == "rabbit://guest:guest@127.0.0.1:5672/"
        notify_url = nova["oslo_messaging_notifications"]["transport_url"]
        assert notify_url == f"ntkafka://127.0.0.1:{port}/"

        received = exchange(f"kafka://127.0.0.1:{port}/")
        assert received == [("compute.instance.create.end", {"instance_id": "i-devstack"})]
    finally:
        down = devstack(devstack_env, "run_phase unstack\nrun_phase clean")
    assert down.returncode == 0, down.stdout[-4000:] + down.stderr[-4000:]
    deadline = time.monotonic() + 60
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(pid), "the broker outlived unstack"
    assert not list(state.glob("*.pid")) and not list(state.glob("*.enabled"))
    assert not (tmp_path / "opt" / "stack" / "notify-transport-kafka").exists()
    assert not (tmp_path / "opt" / "stack" / "data" / "kafka").exists()


def exchange(url: str, timeout: float = 60.0) -> list[tuple[str, dict]]:
    """One notification sent as a service's notifier sends it, received by a listener in a pool."""
    conf = cfg.ConfigOpts()
    conf([])
    got: list[tuple[str, dict]] = []
    arrived = threading.Event()

    class Endpoint:
        def info(self, ctxt, publisher_id, event_type, payload, metadata):
            got.append((event_type, payload))
            arrived.set()

    transport = nt.get_notification_transport(conf, url)
    try:
        listener = nt.get_notification_listener(transport, [nt.Target(topic="notifications")], [Endpoint()],
                                                pool="devstack-check")
        listener.start()
        try:
            notifier = nt.Notifier(transport, publisher_id="compute.devstack", driver="messagingv2",
                                   topics=["notifications"])
            notifier.info({}, "compute.instance.create.end", {"instance_id": "i-devstack"})
            assert transport.flush(30) == 0
            assert arrived.wait(timeout), "the notification did not arrive"
        finally:
            listener.stop()
            listener.wait()
    finally:
        transport.cleanup()
    return got


