"""The devstack plugin, run by bash against stand-ins for devstack's functions.

devstack itself is not installed here: ``DEVSTACK_STANDINS`` below defines the
devstack functions the plugin calls (``iniset``, ``is_service_enabled``,
``enable_service``, ``trueorfalse``, ``setup_develop``, ``run_process``,
``stop_process``, lib/rpc_backend's ``get_transport_url``,
``get_notification_url`` and ``iniset_rpc_backend``, ...), each recording its
call, and every test sources ``settings`` then ``plugin.sh PHASE`` after them,
in devstack's order. The plugin defines none of them (one test scans it for
that): it is held to devstack's conventions, not to running on its own.

The broker lifecycle runs the plugin's stack/unstack/clean phases against a
stand-in Kafka distribution (a tarball served from a file:// mirror whose
scripts record their calls and listen on the configured port); the
``run_process`` stand-in starts the command in the background as systemd
would, so download, unpack, KRaft storage formatting, start, port wait, stop
and clean-up are exercised without the internet or a JVM broker.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tarfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from notify_transport import TransportHost, TransportURL
from notify_transport.testing.brokers import free_ports
from waits import pid_alive

ROOT = Path(__file__).resolve().parents[2]
DEVSTACK = ROOT / "devstack"
PLUGIN = DEVSTACK / "plugin.sh"
SETTINGS = DEVSTACK / "settings"
LIBS = sorted((DEVSTACK / "lib").iterdir())

#: Passwords with every character that needs care in a URL, an ini file,
#: sed replacement text or a shell.
NASTY_PASSWORD = "p@ss:w/rd%?#&=+ \"'\\é"
NASTY_PASSWORD_ENCODED = "p%40ss%3Aw%2Frd%25%3F%23%26%3D%2B%20%22%27%5C%C3%A9"

#: What a devstack run provides with its RabbitMQ enabled (lib/rpc_backend
#: sets RABBIT_HOST from SERVICE_HOST).
DEVSTACK_ENV = {"SERVICE_HOST": "controller", "RABBIT_HOST": "controller",
                "RABBIT_USERID": "stackrabbit", "RABBIT_PASSWORD": "secret",
                "ENABLED_SERVICES": "rabbit,mysql,key,n-api"}

#: Stand-ins for devstack's functions, with devstack's signatures and results.
#: Each records its call in $DEVSTACK_CALLS as one shell-quoted line; the
#: lib/rpc_backend ones record under "devstack:NAME", so that a test sees
#: whether the plugin delegated to them.
DEVSTACK_STANDINS = r'''
function _devstack_record {
    local line
    printf -v line '%q ' "$@"
    printf '%s\n' "${line% }" >>"$DEVSTACK_CALLS"
}

# functions-common
function echo_summary { echo "$@"; }
function define_plugin { _devstack_record define_plugin "$@"; }
function die {
    local line=$1
    shift
    echo "[ERROR] ${BASH_SOURCE[1]}:$line $*" >&2
    exit 1
}
function trueorfalse {
    local default=$1 testval=${!2:-}
    case "$testval" in
        "") echo "$default" ;;
        0|no|No|NO|false|False|FALSE) echo False ;;
        1|yes|Yes|YES|true|True|TRUE) echo True ;;
        *) echo "$default" ;;
    esac
}
function is_service_enabled {
    local service
    for service in "$@"; do
        [[ ",${ENABLED_SERVICES:-}," == *",$service,"* ]] && return 0
    done
    return 1
}
function enable_service {
    _devstack_record enable_service "$@"
    local service
    for service in "$@"; do
        [[ ",${DISABLED_SERVICES:-}," == *",$service,"* ]] && continue
        is_service_enabled "$service" || ENABLED_SERVICES+=",$service"
    done
}
function install_package { _devstack_record install_package "$@"; }
function is_ubuntu { return 0; }
function run_process {
    _devstack_record run_process "$@"
    if [[ -n "${RUN_PROCESS_DIR:-}" ]]; then  # start it, as systemd would
        bash -c "exec $2" >"$RUN_PROCESS_DIR/$1.log" 2>&1 </dev/null &
        echo $! >"$RUN_PROCESS_DIR/$1.pid"
    fi
}
function stop_process {
    _devstack_record stop_process "$@"
    local pid_file=${RUN_PROCESS_DIR:-/nonexistent}/$1.pid
    if [[ -s "$pid_file" ]]; then
        kill -TERM "$(<"$pid_file")" 2>/dev/null || true
        rm -f "$pid_file"
    fi
}
function sudo { "$@"; }

# inc/python
function setup_develop { _devstack_record setup_develop "$@"; }
function pip_install { _devstack_record pip_install "$@"; }
function get_python_exec_prefix { echo "$DEVSTACK_VENV/bin"; }

# inc/ini-config: iniset [-sudo] config-file section option value. A missing
# section is appended after a blank line, a missing option goes right under
# its section header, an existing one is replaced in place.
function iniset {
    [[ "${1:-}" == "-sudo" ]] && shift
    local file=$1 section=$2 option=$3 value=${4:-}
    [[ -z "$section" || -z "$option" ]] && return 0
    [[ -e "$file" ]] || touch "$file"
    local tmp
    tmp=$(mktemp)
    NT_INI_SECTION=$section NT_INI_OPTION=$option NT_INI_VALUE=$value awk '
        function is_header(l) { return l ~ /^\[.*\]/ }
        function is_option(l) {
            return substr(l, 1, length(opt)) == opt && substr(l, length(opt) + 1) ~ /^[ \t]*=/
        }
        BEGIN {
            sec = ENVIRON["NT_INI_SECTION"]; opt = ENVIRON["NT_INI_OPTION"]
            line = opt " = " ENVIRON["NT_INI_VALUE"]; header = "[" sec "]"
        }
        NR == FNR {
            if (is_header($0)) { in_sec = (substr($0, 1, length(header)) == header) }
            if (in_sec && is_header($0)) has_sec = 1
            if (in_sec && is_option($0)) has_opt = 1
            next
        }
        FNR == 1 { in_sec = 0 }
        {
            if (is_header($0)) {
                in_sec = (substr($0, 1, length(header)) == header)
                print
                if (in_sec && !has_opt && !inserted) { print line; inserted = 1 }
                next
            }
            if (in_sec && has_opt && is_option($0)) {
                match($0, /^[^=]*=[ \t]*/)
                print substr($0, 1, RLENGTH) ENVIRON["NT_INI_VALUE"]
                next
            }
            print
        }
        END { if (!has_sec) { print ""; print header; print line } }
    ' "$file" "$file" >"$tmp"
    cat "$tmp" >"$file"
    rm -f "$tmp"
}

# lib/rpc_backend
function rpc_backend_add_vhost { _devstack_record rpc_backend_add_vhost "$@"; }
function get_transport_url {
    _devstack_record devstack:get_transport_url "$@"
    local virtual_host=${1:-}
    if is_service_enabled rabbit || { [ -n "${RABBIT_HOST:-}" ] && [ -n "${RABBIT_PASSWORD:-}" ]; }; then
        echo "rabbit://$RABBIT_USERID:$RABBIT_PASSWORD@$RABBIT_HOST:5672/$virtual_host"
    fi
}
function get_notification_url {
    _devstack_record devstack:get_notification_url "$@"
    local virtual_host=${1:-}
    if is_service_enabled rabbit || { [ -n "${RABBIT_HOST:-}" ] && [ -n "${RABBIT_PASSWORD:-}" ]; }; then
        echo "rabbit://$RABBIT_USERID:$RABBIT_PASSWORD@$RABBIT_HOST:5672/$virtual_host"
    fi
}
function iniset_rpc_backend {
    _devstack_record devstack:iniset_rpc_backend "$@"
    local package=$1 file=$2 section=${3:-DEFAULT} virtual_host=${4:-}
    if is_service_enabled rabbit || { [ -n "${RABBIT_HOST:-}" ] && [ -n "${RABBIT_PASSWORD:-}" ]; }; then
        iniset "$file" "$section" transport_url "$(get_transport_url "$virtual_host")"
        if [ -n "${RABBIT_HEARTBEAT_TIMEOUT_THRESHOLD:-}" ]; then
            iniset "$file" oslo_messaging_rabbit heartbeat_timeout_threshold "$RABBIT_HEARTBEAT_TIMEOUT_THRESHOLD"
        fi
        if [ -n "${RABBIT_HEARTBEAT_RATE:-}" ]; then
            iniset "$file" oslo_messaging_rabbit heartbeat_rate "$RABBIT_HEARTBEAT_RATE"
        fi
    fi
}
'''

#: The devstack functions the stand-ins define.
STANDIN_FUNCTIONS = set(re.findall(r"^function (\w+)", DEVSTACK_STANDINS, re.MULTILINE)) - {
    "_devstack_record"}
#: devstack hooks the plugin replaces on purpose while the "kafka" service is enabled.
REPLACED_HOOKS = {"get_transport_url", "get_notification_url", "iniset_rpc_backend"}


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    calls: list[list[str]]

    def called(self, name: str) -> list[list[str]]:
        """The recorded calls of ``name``, each as its argument list."""
        return [call[1:] for call in self.calls if call[0] == name]


def run_devstack(tmp_path: Path, script: str = "", env: dict[str, str] | None = None, *,
                 phase: str = "", check: bool = True, timeout: float = 90,
                 before_plugin: str = "") -> Run:
    """``settings`` then ``plugin.sh PHASE`` sourced after the stand-ins, then ``script``."""
    calls = tmp_path / "devstack-calls.log"
    calls.write_text("")
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
                "HOME": os.environ.get("HOME", "/tmp"), "DEVSTACK_CALLS": str(calls),
                "DEVSTACK_VENV": "/opt/stack/data/venv", "STACK_USER": current_user(),
                "PYTHON": sys.executable}
    full_env.update(env or {})
    program = (f"set -o errexit -o nounset -o pipefail\n{DEVSTACK_STANDINS}\n"
               f"source {SETTINGS}\n{before_plugin}\nsource {PLUGIN} {phase}\n{script}\n")
    proc = subprocess.run(["bash", "-c", program], env=full_env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    run = Run(proc.returncode, proc.stdout, proc.stderr,
              [shlex.split(line) for line in calls.read_text().splitlines()])
    if check and proc.returncode != 0:
        raise AssertionError(f"bash failed ({proc.returncode}):\nstdout:\n{proc.stdout}\n"
                             f"stderr:\n{proc.stderr}")
    return run


def current_user() -> str:
    return subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()


def write_config(tmp_path: Path, env: dict[str, str], call: str = 'iniset_rpc_backend nova "$CONF"',
                 initial: str | None = None) -> str:
    conf = tmp_path / "service.conf"
    if initial is not None:
        conf.write_text(initial)
    run_devstack(tmp_path, call, {**env, "CONF": str(conf)})
    return conf.read_text()


def ini_value(text: str, section: str, option: str) -> str:
    current = None
    for line in text.splitlines():
        if line.startswith("["):
            current = line.strip("[]")
        elif current == section and re.match(rf"{re.escape(option)}\s*=", line):
            return line.split("=", 1)[1].strip()
    raise KeyError(f"[{section}] {option} not in:\n{text}")


def parse_url(text: str, section: str) -> TransportURL:
    return TransportURL.parse(None, ini_value(text, section, "transport_url"))


# -- layout: plugin.sh dispatches, lib/ holds the functions --------------------

@pytest.mark.parametrize("path", [PLUGIN, SETTINGS, *LIBS], ids=lambda p: p.name)
def test_bash_syntax(path: Path) -> None:
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_lib_holds_the_services_functions() -> None:
    assert [p.name for p in LIBS] == ["kafka", "notify-transport", "nt-serve", "transport-url"]


def test_sourcing_without_a_phase_does_nothing_but_define(tmp_path: Path) -> None:
    run = run_devstack(tmp_path, "declare -F install_notify_transport configure_nt_serve "
                       "start_nt_serve install_kafka start_kafka stop_kafka cleanup_kafka",
                       {"KAFKA_DEST": str(tmp_path / "kafka")})
    assert len(run.stdout.split()) == 7
    # settings: define_plugin (devstack's plugin guide), enable_service kafka
    assert [c[0] for c in run.calls] == ["define_plugin", "enable_service"]
    assert run.called("define_plugin") == [["notify-transport"]]
    assert not (tmp_path / "kafka").exists()


def test_settings_enable_the_kafka_service_as_devstack_plugin_kafka(tmp_path: Path) -> None:
    run = run_devstack(tmp_path, 'echo "$ENABLED_SERVICES"', DEVSTACK_ENV)
    assert run.called("enable_service") == [["kafka"]]
    assert run.stdout.strip() == "rabbit,mysql,key,n-api,kafka"
    run = run_devstack(tmp_path, 'echo "$ENABLED_SERVICES"', {**DEVSTACK_ENV, "NOTIFY_SERVICE": "rabbit"})
    assert run.called("enable_service") == []
    # disable_service kafka in local.conf wins over the settings
    run = run_devstack(tmp_path, 'echo "$ENABLED_SERVICES"', {**DEVSTACK_ENV, "DISABLED_SERVICES": "kafka"})
    assert run.stdout.strip() == "rabbit,mysql,key,n-api"


# -- the default: hybrid RPC on devstack's RabbitMQ, ntkafka notifications ------

def test_default_gives_ntkafka_notifications_and_devstacks_rabbit_rpc(tmp_path: Path) -> None:
    conf = tmp_path / "nova.conf"
    run = run_devstack(tmp_path, 'iniset_rpc_backend nova "$CONF"', {**DEVSTACK_ENV, "CONF": str(conf)})
    assert conf.read_text() == textwrap.dedent("""\

        [DEFAULT]
        transport_url = rabbit://stackrabbit:secret@controller:5672/

        [oslo_messaging_notifications]
        transport_url = ntkafka://controller:9092/
        """)
    # the RPC settings came from devstack's own functions
    assert run.called("devstack:iniset_rpc_backend") == [["nova", str(conf), "DEFAULT", ""]]
    assert run.called("devstack:get_transport_url") == [[""]]
    assert run.called("devstack:get_notification_url") == []


def test_default_scheme_with_a_vhost(tmp_path: Path) -> None:
    text = write_config(tmp_path, {**DEVSTACK_ENV, "NOTIFY_VHOST": "prod"})
    url = ini_value(text, "oslo_messaging_notifications", "transport_url")
    assert url == "ntkafka://controller:9092/prod"
    notify = TransportURL.parse(None, url)
    assert notify.virtual_host == "prod"
    assert notify.hosts == [TransportHost("controller", 9092)]


def test_ntkafka_scheme_is_the_driver_the_package_registers_for_oslo_messaging() -> None:
    from importlib.metadata import entry_points
    drivers = {ep.name: ep.value for ep in entry_points(group="oslo.messaging.drivers")}
    assert drivers.get("ntkafka") == "notify_transport.integrations.oslo_messaging:NtKafkaDriver"


def test_oslo_messaging_loads_notify_transports_driver_from_the_written_config(tmp_path: Path) -> None:
    """What an unchanged oslo.messaging service does with the file: parse, load the driver."""
    import oslo_messaging
    from oslo_config import cfg
    from stevedore import driver

    from notify_transport.integrations.oslo_messaging import NtKafkaDriver

    text = write_config(tmp_path, {**DEVSTACK_ENV, "NOTIFY_VHOST": "prod", "NOTIFY_USERNAME": "n",
                                   "NOTIFY_PASSWORD": NASTY_PASSWORD})
    conf = cfg.ConfigOpts()
    conf(["--config-file", str(tmp_path / "service.conf")], project="nova")
    conf.register_opts([cfg.StrOpt("transport_url", secret=True)], group="oslo_messaging_notifications")
    url = oslo_messaging.TransportURL.parse(conf, conf.oslo_messaging_notifications.transport_url)
    assert (url.transport, url.virtual_host) == ("ntkafka", "prod")
    assert [(h.hostname, h.port, h.username, h.password) for h in url.hosts] == [
        ("controller", 9092, "n", NASTY_PASSWORD)]
    manager = driver.DriverManager("oslo.messaging.drivers", url.transport, invoke_on_load=False)
    assert manager.driver is NtKafkaDriver
    assert "security_protocol = SASL_PLAINTEXT" in text


def test_url_functions_print_the_urls(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "RPC_VHOST": "nova", "NOTIFY_VHOST": "prod"}
    run = run_devstack(tmp_path, "get_transport_url; get_transport_url cell1; get_notification_url; "
                       "get_notification_url other", env)
    assert run.stdout.splitlines() == [
        "rabbit://stackrabbit:secret@controller:5672/nova",
        "rabbit://stackrabbit:secret@controller:5672/cell1",
        "ntkafka://controller:9092/prod", "ntkafka://controller:9092/other"]
    assert run.called("devstack:get_transport_url") == [["nova"], ["cell1"]]


def test_cell_vhost_argument_goes_to_devstacks_function(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "RPC_VHOST": "nova", "NOTIFY_VHOST": "prod"}
    conf = tmp_path / "service.conf"
    run = run_devstack(tmp_path, 'iniset_rpc_backend nova "$CONF" conductor nova_cell1',
                       {**env, "CONF": str(conf)})
    text = conf.read_text()
    assert ini_value(text, "conductor", "transport_url") == \
        "rabbit://stackrabbit:secret@controller:5672/nova_cell1"
    assert ini_value(text, "oslo_messaging_notifications", "transport_url") == \
        "ntkafka://controller:9092/prod"
    assert "[DEFAULT]" not in text
    assert run.called("devstack:get_transport_url") == [["nova_cell1"]]


def test_rabbit_heartbeat_settings_are_devstacks(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "RABBIT_HEARTBEAT_TIMEOUT_THRESHOLD": "60", "RABBIT_HEARTBEAT_RATE": "3"}
    text = write_config(tmp_path, env)
    assert ini_value(text, "oslo_messaging_rabbit", "heartbeat_timeout_threshold") == "60"
    assert ini_value(text, "oslo_messaging_rabbit", "heartbeat_rate") == "3"
    # also when the plugin builds the RPC URL itself
    text = write_config(tmp_path, {**env, "RPC_HOST": "rabbit1"})
    assert ini_value(text, "oslo_messaging_rabbit", "heartbeat_rate") == "3"


def test_resourcing_per_phase_keeps_devstacks_original(tmp_path: Path) -> None:
    """devstack sources plugin.sh once per phase: the saved original must stay devstack's."""
    run = run_devstack(tmp_path, f"source {PLUGIN} stack install-nothing\n"
                       f"source {PLUGIN}\nget_transport_url\n"
                       "declare -f _nt_devstack_get_transport_url", DEVSTACK_ENV)
    lines = run.stdout.splitlines()
    assert lines[0] == "rabbit://stackrabbit:secret@controller:5672/"
    assert "_devstack_record devstack:get_transport_url" in run.stdout
    assert run.called("devstack:get_transport_url") == [[""]]


# -- the overrides apply only with the kafka service ---------------------------

@pytest.mark.parametrize("env", [{"NOTIFY_SERVICE": "rabbit"}, {"DISABLED_SERVICES": "kafka"}],
                         ids=["notify-service-rabbit", "kafka-disabled"])
def test_without_the_kafka_service_devstacks_hooks_stay(tmp_path: Path, env: dict[str, str]) -> None:
    conf = tmp_path / "nova.conf"
    run = run_devstack(tmp_path, 'iniset_rpc_backend nova "$CONF"; get_notification_url n\n'
                       'declare -F iniset_notification_backend _nt_devstack_get_transport_url || true',
                       {**DEVSTACK_ENV, **env, "CONF": str(conf), "NOTIFY_VHOST": "prod",
                        "NOTIFY_HOST": "kafka1"})
    assert conf.read_text() == textwrap.dedent("""\

        [DEFAULT]
        transport_url = rabbit://stackrabbit:secret@controller:5672/
        """)
    assert run.stdout.splitlines() == ["rabbit://stackrabbit:secret@controller:5672/n"]
    assert run.called("devstack:iniset_rpc_backend") == [["nova", str(conf)]]
    assert run.called("devstack:get_notification_url") == [["n"]]


def test_the_hooks_are_replaced_only_under_the_kafka_service(tmp_path: Path) -> None:
    """The replacement happens in one place, behind is_service_enabled kafka."""
    text = PLUGIN.read_text()
    assert re.search(r"^if is_service_enabled kafka; then\n    notify_transport_take_over_messaging_hooks\n"
                     r"elif \[\[ \"\$\{RPC_SCHEME:-rabbit\}\" != \"rabbit\" \]\]; then\n"
                     r"    notify_transport_take_over_rpc_url_hook\nfi$", text, re.MULTILINE)
    assert text.count("notify_transport_take_over_messaging_hooks") == 1
    for path in LIBS:
        for hook in REPLACED_HOOKS:
            for match in re.finditer(rf"^(\s*)function {hook} ", path.read_text(), re.MULTILINE):
                assert match.group(1), f"{path.name} defines {hook} at top level"


# -- RPC_SCHEME=ntrabbit: the services' RPC on notify-transport's RabbitMQ driver --

def test_rpc_scheme_ntrabbit_with_devstacks_rabbit_and_kafka(tmp_path: Path) -> None:
    text = write_config(tmp_path, {**DEVSTACK_ENV, "RPC_SCHEME": "ntrabbit"})
    assert ini_value(text, "DEFAULT", "transport_url") == "ntrabbit://stackrabbit:secret@controller:5672/"
    assert ini_value(text, "oslo_messaging_notifications", "transport_url") == "ntkafka://controller:9092/"


def test_rpc_scheme_ntrabbit_with_an_account_of_its_own(tmp_path: Path) -> None:
    text = write_config(tmp_path, {**DEVSTACK_ENV, **ANCHOR_ENV, "RPC_SCHEME": "ntrabbit", "RPC_VHOST": "nova"})
    assert ini_value(text, "DEFAULT", "transport_url") == "ntrabbit://nova:pw@rabbit1:5673/nova"


@pytest.mark.parametrize("env", [{"NOTIFY_SERVICE": "rabbit"}, {"DISABLED_SERVICES": "kafka"}],
                         ids=["notify-service-rabbit", "kafka-disabled"])
def test_rpc_scheme_ntrabbit_without_the_kafka_service(tmp_path: Path, env: dict[str, str]) -> None:
    """Only get_transport_url is replaced; devstack's iniset_rpc_backend writes what it gives."""
    conf = tmp_path / "nova.conf"
    run = run_devstack(tmp_path, 'iniset_rpc_backend nova "$CONF"; get_transport_url cell1',
                       {**DEVSTACK_ENV, **env, "CONF": str(conf), "RPC_SCHEME": "ntrabbit"})
    assert conf.read_text() == textwrap.dedent("""\

        [DEFAULT]
        transport_url = ntrabbit://stackrabbit:secret@controller:5672/
        """)
    assert run.stdout.splitlines() == ["ntrabbit://stackrabbit:secret@controller:5672/cell1"]
    assert run.called("devstack:iniset_rpc_backend") == [["nova", str(conf)]]


def test_oslo_messaging_loads_ntrabbit_from_the_written_config(tmp_path: Path) -> None:
    import oslo_messaging
    from oslo_config import cfg
    from stevedore import driver

    from notify_transport.integrations.oslo_rabbit import NtRabbitDriver

    write_config(tmp_path, {**DEVSTACK_ENV, "RPC_SCHEME": "ntrabbit"})
    conf = cfg.ConfigOpts()
    conf(["--config-file", str(tmp_path / "service.conf")], project="nova")
    url = oslo_messaging.TransportURL.parse(conf)  # [DEFAULT] transport_url, as services read it
    assert url.transport == "ntrabbit"
    manager = driver.DriverManager("oslo.messaging.drivers", url.transport, invoke_on_load=False)
    assert manager.driver is NtRabbitDriver


# -- devstack-plugin-kafka's variable spellings beside the plugin's own --------

ANCHOR_ENV = {"RPC_HOST": "rabbit1", "RPC_PORT": "5673", "RPC_USERNAME": "nova",
              "RPC_PASSWORD": "pw", "NOTIFY_HOST": "kafka1", "NOTIFY_PORT": "9094",
              "NOTIFY_USERNAME": "notifier", "NOTIFY_PASSWORD": "npw"}
EXPECTED_WITH_ACCOUNTS = textwrap.dedent("""\

    [DEFAULT]
    transport_url = rabbit://nova:pw@rabbit1:5673/

    [oslo_messaging_notifications]
    transport_url = ntkafka://notifier:npw@kafka1:9094/

    [oslo_messaging_kafka]
    security_protocol = SASL_PLAINTEXT
    sasl_mechanism = PLAIN
    """)


def test_devstack_plugin_kafka_spellings(tmp_path: Path) -> None:
    conf = tmp_path / "nova.conf"
    run = run_devstack(tmp_path, 'iniset_rpc_backend nova "$CONF"',
                       {**DEVSTACK_ENV, **ANCHOR_ENV, "CONF": str(conf)})
    assert conf.read_text() == EXPECTED_WITH_ACCOUNTS
    assert run.called("devstack:get_transport_url") == []  # another broker: not devstack's URL
    assert run.called("devstack:iniset_rpc_backend") == []


def test_the_plugins_own_spellings_mean_the_same(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, **ANCHOR_ENV, "RPC_USER": "nova", "NOTIFY_USER": "notifier"}
    del env["RPC_USERNAME"], env["NOTIFY_USERNAME"]
    assert write_config(tmp_path, env) == EXPECTED_WITH_ACCOUNTS
    # both spellings, same value: fine
    assert write_config(tmp_path, {**env, "RPC_USERNAME": "nova", "NOTIFY_USERNAME": "notifier"}) == \
        EXPECTED_WITH_ACCOUNTS


@pytest.mark.parametrize("first, second", [("RPC_USERNAME", "RPC_USER"),
                                           ("NOTIFY_USERNAME", "NOTIFY_USER")])
def test_both_spellings_with_different_values_stop(tmp_path: Path, first: str, second: str) -> None:
    env = {**DEVSTACK_ENV, first: "a", second: "b", "RPC_PASSWORD": "p", "NOTIFY_PASSWORD": "p"}
    run = run_devstack(tmp_path, "check_notify_transport_settings", env, check=False)
    assert run.returncode != 0
    assert f"{first} and {second} name the same setting but differ" in run.stderr


def test_rpc_host_alone_keeps_devstacks_account(tmp_path: Path) -> None:
    text = write_config(tmp_path, {**DEVSTACK_ENV, "RPC_HOST": "r1,r2:5673", "RPC_VHOST": "nova"})
    rpc = parse_url(text, "DEFAULT")
    assert [(h.hostname, h.port, h.username, h.password) for h in rpc.hosts] == [
        ("r1", 5672, "stackrabbit", "secret"), ("r2", 5673, "stackrabbit", "secret")]
    assert rpc.virtual_host == "nova"


def test_special_characters_are_percent_encoded(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "RPC_USERNAME": "stack user", "RPC_PASSWORD": NASTY_PASSWORD,
           "RPC_VHOST": "cell/1 é", "NOTIFY_USERNAME": "notifier",
           "NOTIFY_PASSWORD": NASTY_PASSWORD + "$x", "NOTIFY_VHOST": "/prod"}
    text = write_config(tmp_path, env)
    notify_pw = quote(NASTY_PASSWORD + "$x", safe="")
    assert text == textwrap.dedent(f"""\

        [DEFAULT]
        transport_url = rabbit://stack%20user:{NASTY_PASSWORD_ENCODED}@controller:5672/cell%2F1%20%C3%A9

        [oslo_messaging_notifications]
        transport_url = ntkafka://notifier:{notify_pw}@controller:9092/%2Fprod

        [oslo_messaging_kafka]
        security_protocol = SASL_PLAINTEXT
        sasl_mechanism = PLAIN
        """)
    assert notify_pw == NASTY_PASSWORD_ENCODED + "%24x"
    rpc = parse_url(text, "DEFAULT")
    assert rpc.hosts == [TransportHost("controller", 5672, "stack user", NASTY_PASSWORD)]
    assert rpc.virtual_host == "cell/1 é"
    notify = parse_url(text, "oslo_messaging_notifications")
    assert notify.hosts == [TransportHost("controller", 9092, "notifier", NASTY_PASSWORD + "$x")]
    assert notify.virtual_host == "/prod"


def test_rpc_vhost_is_encoded_for_devstacks_function(tmp_path: Path) -> None:
    run = run_devstack(tmp_path, "get_transport_url", {**DEVSTACK_ENV, "RPC_VHOST": "cell/1"})
    assert run.stdout.strip() == "rabbit://stackrabbit:secret@controller:5672/cell%2F1"


def test_several_hosts_and_ipv6(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "NOTIFY_HOST": "k1, k2:9093,::1,[::2]:9094,[fe80::3]",
           "NOTIFY_USERNAME": "u", "NOTIFY_PASSWORD": "p", "RPC_HOST": "r1,r2:5673"}
    text = write_config(tmp_path, env)
    notify = parse_url(text, "oslo_messaging_notifications")
    assert [(h.hostname, h.port, h.username, h.password) for h in notify.hosts] == [
        ("k1", 9092, "u", "p"), ("k2", 9093, "u", "p"), ("::1", 9092, "u", "p"),
        ("::2", 9094, "u", "p"), ("fe80::3", 9092, "u", "p")]
    assert notify.bootstrap_servers() == ["k1:9092", "k2:9093", "[::1]:9092", "[::2]:9094",
                                          "[fe80::3]:9092"]
    rpc = parse_url(text, "DEFAULT")
    assert [(h.hostname, h.port, h.username) for h in rpc.hosts] == [
        ("r1", 5672, "stackrabbit"), ("r2", 5673, "stackrabbit")]


def test_existing_config_is_updated_in_place_and_idempotently(tmp_path: Path) -> None:
    initial = textwrap.dedent("""\
        [DEFAULT]
        debug = True
        transport_url=rabbit://old@oldhost:5672/

        [oslo_messaging_notifications]
        driver = messagingv2
        topics = notifications

        [database]
        connection = sqlite://
        """)
    env = {**DEVSTACK_ENV, "NOTIFY_VHOST": "prod"}
    text = write_config(tmp_path, env, initial=initial)
    assert text == textwrap.dedent("""\
        [DEFAULT]
        debug = True
        transport_url=rabbit://stackrabbit:secret@controller:5672/

        [oslo_messaging_notifications]
        transport_url = ntkafka://controller:9092/prod
        driver = messagingv2
        topics = notifications

        [database]
        connection = sqlite://
        """)
    assert write_config(tmp_path, env) == text


def test_oslo_messagings_own_kafka_driver_and_external_cluster_security(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "KAFKA_EXTERNAL": "True", "NOTIFY_SCHEME": "kafka",
           "NOTIFY_HOST": "broker1:9093,broker2:9093", "NOTIFY_USERNAME": "svc",
           "NOTIFY_PASSWORD": "pw", "NOTIFY_SECURITY_PROTOCOL": "SASL_SSL",
           "NOTIFY_SASL_MECHANISM": "SCRAM-SHA-512", "NOTIFY_SSL_CAFILE": "/etc/ssl/kafka-ca.pem"}
    conf = tmp_path / "svc.conf"
    run_devstack(tmp_path, 'check_notify_transport_settings; iniset_notification_backend svc "$CONF"',
                 {**env, "CONF": str(conf)})
    assert conf.read_text() == textwrap.dedent("""\

        [oslo_messaging_notifications]
        transport_url = kafka://svc:pw@broker1:9093,svc:pw@broker2:9093/

        [oslo_messaging_kafka]
        security_protocol = SASL_SSL
        sasl_mechanism = SCRAM-SHA-512
        ssl_cafile = /etc/ssl/kafka-ca.pem
        """)


def test_passwords_stay_out_of_the_xtrace_log(tmp_path: Path) -> None:
    conf = tmp_path / "x.conf"
    env = {**DEVSTACK_ENV, "RPC_USERNAME": "u", "RPC_PASSWORD": "rpc-SECRET-1",
           "NOTIFY_USERNAME": "n", "NOTIFY_PASSWORD": "notify-SECRET-2", "CONF": str(conf),
           "NT_SERVE_CONF": str(tmp_path / "serve.conf"), "ENABLED_SERVICES": "rabbit,nt-serve"}
    run = run_devstack(tmp_path, 'set -x\niniset_rpc_backend nova "$CONF"\n'
                       'get_notification_url >/dev/null\nconfigure_nt_serve\n', env)
    assert "+ iniset_rpc_backend nova" in run.stderr  # xtrace was on around the calls
    assert "+ configure_nt_serve" in run.stderr
    assert "SECRET" not in run.stderr
    assert "rpc-SECRET-1" in conf.read_text()
    assert "notify-SECRET-2" in (tmp_path / "serve.conf").read_text()


# -- install: the devstack way --------------------------------------------------

def test_install_uses_setup_develop_with_devstacks_constraints(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "KAFKA_EXTERNAL": "True", "NOTIFY_HOST": "kafka1"}
    run = run_devstack(tmp_path, env=env, phase="stack install")
    # setup_develop edits upper-constraints for this project and installs it
    # with them (pip install -c upper-constraints.txt -e DIR), like devstack's libs
    assert run.called("setup_develop") == [[str(ROOT), ""]]
    assert run.called("pip_install") == []
    run = run_devstack(tmp_path, env={**env, "NOTIFY_TRANSPORT_EXTRAS": "embedded,spark"},
                       phase="stack install")
    assert run.called("setup_develop") == [[str(ROOT), "embedded,spark"]]


def test_extra_phase_checks_the_driver_and_shows_the_urls(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "NOTIFY_PASSWORD": "hidden", "NOTIFY_USERNAME": "n"}
    run = run_devstack(tmp_path, env=env, phase="stack extra")
    assert "RPC: rabbit://stackrabbit:***@controller:5672/" in run.stdout
    assert "Notifications: ntkafka://n:***@controller:9092/" in run.stdout
    assert "hidden" not in run.stdout and "secret" not in run.stdout
    run = run_devstack(tmp_path, env={**env, "NOTIFY_SCHEME": "nosuch"}, phase="stack extra",
                       check=False)
    assert run.returncode != 0
    assert "oslo.messaging finds no driver for nosuch://" in run.stderr


def test_extra_phase_checks_with_the_services_interpreter(tmp_path: Path) -> None:
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    python = venv_bin / "python3"
    python.write_text(f'#!/bin/bash\necho "$*" >>{tmp_path}/python.log\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    run_devstack(tmp_path, env={**DEVSTACK_ENV, "DEVSTACK_VENV": str(tmp_path / "venv")},
                 phase="stack extra")
    assert (tmp_path / "python.log").read_text().splitlines() == ["-c import notify_transport",
                                                                  "- ntkafka"]


def test_rpc_vhost_is_created_on_devstacks_rabbit(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "KAFKA_EXTERNAL": "True", "RPC_VHOST": "nova"}
    run = run_devstack(tmp_path, env=env, phase="stack post-config")
    assert run.called("rpc_backend_add_vhost") == [["nova"]]
    run = run_devstack(tmp_path, env={**env, "ENABLED_SERVICES": "key", "RABBIT_HOST": "ext"},
                       phase="stack post-config")
    assert run.called("rpc_backend_add_vhost") == []


# -- settings validation -------------------------------------------------------

@pytest.mark.parametrize("env, message", [
    ({"RPC_SERVICE": "kafka"}, "Kafka carries notifications only"),
    ({"NOTIFY_SERVICE": "amqp"}, "NOTIFY_SERVICE=amqp is not supported"),
    ({"NOTIFY_SCHEME": "amqp"}, "NOTIFY_SCHEME=amqp is not supported"),
    ({"NOTIFY_PORT": "90x2"}, "NOTIFY_PORT must be a number"),
    ({"RPC_PORT": "x"}, "RPC_PORT must be a number"),
    ({"NOTIFY_PASSWORD": "pw"}, "NOTIFY_PASSWORD is set but NOTIFY_USERNAME (or NOTIFY_USER) is empty"),
    ({"NOTIFY_SECURITY_PROTOCOL": "TLS"}, "NOTIFY_SECURITY_PROTOCOL=TLS"),
    ({"NOTIFY_SECURITY_PROTOCOL": "SSL"}, "serves PLAINTEXT or SASL_PLAINTEXT, not SSL"),
    ({"NOTIFY_USERNAME": "u", "NOTIFY_PASSWORD": "p", "NOTIFY_SASL_MECHANISM": "SCRAM-SHA-256"},
     "supports SASL PLAIN, not SCRAM-SHA-256"),
    ({"NOTIFY_USER": "bad user", "NOTIFY_PASSWORD": "p"}, "NOTIFY_USERNAME may only hold"),
    ({"NOTIFY_USERNAME": "u", "NOTIFY_PASSWORD": "pé"}, "NOTIFY_PASSWORD must be printable ASCII"),
    ({"NOTIFY_USERNAME": "u"}, "NOTIFY_PASSWORD must be printable ASCII"),
    ({"ENABLED_SERVICES": "key", "RABBIT_HOST": ""}, "RPC has no broker"),
    ({"KAFKA_EXTERNAL": "True"}, "KAFKA_EXTERNAL=True needs NOTIFY_HOST"),
    ({"NT_SERVE_LISTENERS": "billing,a;b"}, "NT_SERVE_LISTENERS: 'a;b' is not a listener name"),
    ({"NT_SERVE_CONF": "/etc/my conf"}, "NT_SERVE_CONF may not contain white space"),
    ({"NT_SERVE_WORKERS": "0"}, "NT_SERVE_WORKERS: '0' is not a number of processes"),
    ({"RPC_SCHEME": "kombu"}, "RPC_SCHEME=kombu is not supported"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_settings_stop_with_the_reason(tmp_path: Path, env: dict[str, str], message: str) -> None:
    run = run_devstack(tmp_path, env={**DEVSTACK_ENV, **env}, phase="stack pre-install", check=False)
    assert run.returncode != 0
    assert message in run.stderr


@pytest.mark.parametrize("env", [
    {},
    {"NOTIFY_USERNAME": "admin", "NOTIFY_PASSWORD": NASTY_PASSWORD.replace("é", "e")},
    {"KAFKA_EXTERNAL": "True", "NOTIFY_HOST": "k1", "NOTIFY_USERNAME": "u", "NOTIFY_PASSWORD": "pé",
     "NOTIFY_SECURITY_PROTOCOL": "SASL_SSL", "NOTIFY_SASL_MECHANISM": "SCRAM-SHA-256"},
    {"NOTIFY_SERVICE": "rabbit", "NOTIFY_SCHEME": "kafka"},
    {"ENABLED_SERVICES": "key", "RPC_HOST": "rabbit.example.org", "NT_SERVE_LISTENERS": "a, b.c"},
    {"RPC_SCHEME": "ntrabbit"},
], ids=["defaults", "local-sasl-plain", "external-scram-ssl", "rabbit-notify", "external-rpc", "ntrabbit"])
def test_good_settings_pass(tmp_path: Path, env: dict[str, str]) -> None:
    run_devstack(tmp_path, env={**DEVSTACK_ENV, **env}, phase="stack pre-install")


# -- nt-serve: `notify-transport serve` as a devstack service ------------------

@pytest.fixture
def serve_env(tmp_path: Path) -> dict[str, str]:
    """nt-serve enabled, with a notify-transport stand-in in the services' venv whose ``serve --list``
    prints $NT_FAKE_LISTENERS and exits $NT_FAKE_LIST_STATUS."""
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    write_fake_cli(venv_bin / "notify-transport", "exit 0")
    return {**DEVSTACK_ENV, "ENABLED_SERVICES": DEVSTACK_ENV["ENABLED_SERVICES"] + ",nt-serve",
            "KAFKA_EXTERNAL": "True", "NOTIFY_HOST": "kafka1", "NOTIFY_VHOST": "prod",
            "NT_SERVE_CONF": str(tmp_path / "etc" / "serve.conf"), "DEVSTACK_VENV": str(tmp_path / "venv"),
            "NT_FAKE_LISTENERS": "billing"}


def write_fake_cli(path: Path, serving: str) -> None:
    """A notify-transport stand-in: ``serve --list`` as described in :func:`serve_env`, else ``serving``."""
    path.write_text("#!/bin/bash\n"
                    "if [[ \" $* \" == *\" --list \"* ]]; then\n"
                    "    printf '%s\\n' \"$NT_FAKE_LISTENERS\"\n"
                    "    exit ${NT_FAKE_LIST_STATUS:-0}\n"
                    f"fi\n{serving}\n")
    path.chmod(0o755)


def serve_command(run: Run) -> list[str]:
    (service, command), = run.called("run_process")
    assert service == "nt-serve"
    return shlex.split(command)


def test_nt_serve_config_and_command(tmp_path: Path, serve_env: dict[str, str]) -> None:
    conf = tmp_path / "etc" / "serve.conf"
    run_devstack(tmp_path, env=serve_env, phase="stack post-config")
    assert conf.read_text() == textwrap.dedent("""\

        [oslo_messaging_notifications]
        topics = notifications
        transport_url = kafka://kafka1:9092/prod
        """)
    assert oct(conf.stat().st_mode & 0o777) == "0o600"
    # notify-transport reads it: its own "kafka" driver, the vhost, the topics
    url = parse_url(conf.read_text(), "oslo_messaging_notifications")
    assert (url.transport, url.virtual_host, url.hosts) == ("kafka", "prod", [TransportHost("kafka1", 9092)])

    run = run_devstack(tmp_path, env=serve_env, phase="stack extra")
    assert serve_command(run) == [str(tmp_path / "venv" / "bin" / "notify-transport"), "serve",
                                  "--config-file", str(conf), "--workers", "2"]


def test_nt_serve_with_no_listener_stops_the_extra_phase(tmp_path: Path, serve_env: dict[str, str]) -> None:
    env = {**serve_env, "NT_FAKE_LISTENERS": "no listener registered in entry point group x"}
    run_devstack(tmp_path, env=env, phase="stack post-config")
    run = run_devstack(tmp_path, env=env, phase="stack extra", check=False)
    assert run.returncode != 0 and not run.called("run_process")
    assert "nt-serve has no listener to run" in run.stderr


def test_nt_serve_with_a_broken_listener_stops_unless_skip_broken(tmp_path: Path,
                                                                  serve_env: dict[str, str]) -> None:
    env = {**serve_env, "NT_FAKE_LIST_STATUS": "1"}
    run_devstack(tmp_path, env=env, phase="stack post-config")
    run = run_devstack(tmp_path, env=env, phase="stack extra", check=False)
    assert run.returncode != 0 and not run.called("run_process")
    assert "nt-serve cannot start" in run.stderr
    run = run_devstack(tmp_path, env={**env, "NT_SERVE_SKIP_BROKEN": "True"}, phase="stack extra")
    assert run.called("run_process")


def test_nt_serve_named_listeners_and_skip_broken(tmp_path: Path, serve_env: dict[str, str]) -> None:
    env = {**serve_env, "NT_SERVE_LISTENERS": "billing, audit", "NT_SERVE_SKIP_BROKEN": "True",
           "NT_SERVE_WORKERS": "3"}
    run_devstack(tmp_path, env=env, phase="stack post-config")
    run = run_devstack(tmp_path, env=env, phase="stack extra")
    assert serve_command(run) == [str(tmp_path / "venv" / "bin" / "notify-transport"), "serve", "billing",
                                  "audit", "--config-file", str(tmp_path / "etc" / "serve.conf"),
                                  "--workers", "3", "--skip-broken"]


def test_nt_serve_topics_and_security(tmp_path: Path, serve_env: dict[str, str]) -> None:
    env = {**serve_env, "NT_SERVE_TOPICS": "notifications,billing", "NOTIFY_USERNAME": "svc",
           "NOTIFY_PASSWORD": NASTY_PASSWORD, "NOTIFY_SECURITY_PROTOCOL": "SASL_SSL",
           "NOTIFY_SSL_CAFILE": "/etc/ca.pem"}
    run_devstack(tmp_path, env=env, phase="stack post-config")
    text = (tmp_path / "etc" / "serve.conf").read_text()
    assert ini_value(text, "oslo_messaging_notifications", "topics") == "notifications,billing"
    url = parse_url(text, "oslo_messaging_notifications")
    assert url.hosts == [TransportHost("kafka1", 9092, "svc", NASTY_PASSWORD)]
    assert ini_value(text, "oslo_messaging_kafka", "security_protocol") == "SASL_SSL"
    assert ini_value(text, "oslo_messaging_kafka", "ssl_cafile") == "/etc/ca.pem"


def test_nt_serve_on_devstacks_rabbit_notifications(tmp_path: Path, serve_env: dict[str, str]) -> None:
    env = {**serve_env, "NOTIFY_SERVICE": "rabbit"}
    run_devstack(tmp_path, env=env, phase="stack post-config")
    text = (tmp_path / "etc" / "serve.conf").read_text()
    assert ini_value(text, "oslo_messaging_notifications", "transport_url") == \
        "rabbit://stackrabbit:secret@controller:5672/"
    assert "oslo_messaging_kafka" not in text


def test_nt_serve_stop_and_clean(tmp_path: Path, serve_env: dict[str, str]) -> None:
    run_devstack(tmp_path, env=serve_env, phase="stack post-config")
    run = run_devstack(tmp_path, env=serve_env, phase="unstack")
    assert run.called("stop_process") == [["nt-serve"]]
    run_devstack(tmp_path, env=serve_env, phase="clean")
    assert not (tmp_path / "etc").exists()  # the folder too, once empty


def test_nt_serve_not_enabled_does_nothing(tmp_path: Path, serve_env: dict[str, str]) -> None:
    env = {**serve_env, "ENABLED_SERVICES": DEVSTACK_ENV["ENABLED_SERVICES"]}
    for phase in ("stack post-config", "stack extra", "unstack", "clean"):
        run = run_devstack(tmp_path, env=env, phase=phase)
        assert not run.called("run_process") and not run.called("stop_process")
    assert not (tmp_path / "etc").exists()


def test_nt_serve_runs_and_stops_with_sigterm(tmp_path: Path, serve_env: dict[str, str]) -> None:
    """The command run_process gets runs (a notify-transport stand-in records its argv)."""
    venv_bin = tmp_path / "venv" / "bin"
    record = tmp_path / "argv.txt"
    write_fake_cli(venv_bin / "notify-transport",
                   f"printf '%s\\n' \"$@\" >{record}.tmp\nmv {record}.tmp {record}\n"
                   "trap 'exit 0' TERM\nwhile :; do sleep 0.1; done")
    procs = tmp_path / "procs"
    procs.mkdir()
    env = {**serve_env, "DEVSTACK_VENV": str(tmp_path / "venv"), "RUN_PROCESS_DIR": str(procs),
           "NT_SERVE_LISTENERS": "billing"}
    run_devstack(tmp_path, env=env, phase="stack post-config")
    run_devstack(tmp_path, env=env, phase="stack extra")
    pid = int((procs / "nt-serve.pid").read_text())
    deadline = time.monotonic() + 30
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert record.read_text().split("\n")[:-1] == [
        "serve", "billing", "--config-file", str(tmp_path / "etc" / "serve.conf"), "--workers", "2"]
    run_devstack(tmp_path, env=env, phase="unstack")
    assert wait_gone(pid, 30)


def test_serve_command_line_matches_the_cli_when_present(tmp_path: Path) -> None:
    """When this checkout's CLI has `serve`, the options the plugin passes exist."""
    proc = subprocess.run([sys.executable, "-m", "notify_transport.cli.main", "serve", "--help"],
                          capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        pytest.skip("notify-transport serve is not in this checkout")
    assert "--skip-broken" in proc.stdout and "--workers" in proc.stdout
    top = subprocess.run([sys.executable, "-m", "notify_transport.cli.main", "--help"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert "--config-file" in top.stdout  # a global option, also given after the command


# -- every function the plugin calls exists; the plugin defines no devstack function

#: devstack functions the plugin may call: those the stand-ins define.
DEVSTACK_FUNCTIONS = STANDIN_FUNCTIONS - {"sudo"}
#: Programs the plugin runs.
EXTERNAL_COMMANDS = {"awk", "cat", "chmod", "cp", "curl", "cut", "grep", "install", "ln", "mkdir",
                     "mktemp", "mv", "rm", "sed", "sha512sum", "sleep", "sudo", "tail", "tar",
                     "timeout", "touch", "tr", "dirname", "java", "head"}
SHELL_KEYWORDS = {"if", "then", "elif", "else", "fi", "while", "until", "do", "done", "!", "{",
                  "}", "time", "esac", "in", "select", "coproc"}


def bash_builtins() -> set[str]:
    out = subprocess.run(["bash", "-c", "compgen -b"], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


class ShellScan:
    """Command words and function definitions of a bash script.

    A small tokenizer, enough for this plugin's style: quotes, ``$(...)``
    (also inside double quotes and unquoted here-documents), ``${...}``,
    arithmetic, ``[[ ]]``, ``case`` patterns, ``for`` lists, redirections
    and assignments are understood; words in command position are recorded.
    """

    OPS = (";;", "&&", "||", ";", "|", "&", "(", ")", "\n")

    def __init__(self, text: str) -> None:
        self.commands: list[tuple[str, int]] = []
        self.functions: set[str] = set()
        self._scan(text, 1)

    # lexing -----------------------------------------------------------------
    def _skip_quoted(self, text: str, i: int, line: int, record: bool) -> int:
        """``text[i]`` opens a double-quoted string: return the index after it."""
        i += 1
        while i < len(text) and text[i] != '"':
            if text[i] == "\\":
                i += 2
            elif text.startswith("$(", i) and not text.startswith("$((", i):
                i = self._substitution(text, i + 2, line, record)
            else:
                i += 1
        return i + 1

    # ``line`` is always the line number of ``text[0]``.
    def _matching(self, text: str, i: int, open_: str, close: str, line: int, record: bool) -> int:
        """Index of the ``close`` balancing an ``open_`` just before ``i``.

        Command substitutions met on the way are scanned when ``record``.
        """
        depth = 1
        while i < len(text):
            c = text[i]
            if c == "\\":
                i += 2
                continue
            if c == "'":
                i = text.index("'", i + 1) + 1
                continue
            if c == '"':
                i = self._skip_quoted(text, i, line, record)
                continue
            if text.startswith("$(", i) and not text.startswith("$((", i):
                i = self._substitution(text, i + 2, line, record)
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    return i
            i += 1
        raise ValueError(f"unbalanced {open_}{close}")

    def _substitution(self, text: str, i: int, line: int, record: bool = True) -> int:
        """``text[i]`` follows ``$(``: scan the command inside, return the index after ``)``."""
        end = self._matching(text, i, "(", ")", line, record=False)
        if record:
            self._scan(text[i:end], line + text.count("\n", 0, i))
        return end + 1

    def _tokens(self, text: str, line: int):
        """Yield (kind, value, line): kind is 'word', 'op', 'redir' or 'arith'."""
        i, n = 0, len(text)
        heredocs: list[tuple[str, bool]] = []

        def at(pos: int) -> int:
            return line + text.count("\n", 0, pos)

        while i < n:
            c = text[i]
            if c in " \t":
                i += 1
                continue
            if text.startswith("\\\n", i):
                i += 2
                continue
            if c == "#":
                i = text.find("\n", i)
                i = n if i < 0 else i
                continue
            if c == "\n":
                yield "op", "\n", at(i)
                i += 1
                for delim, expand in heredocs:  # here-document bodies follow the line
                    end = re.compile(rf"^\s*{re.escape(delim)}$", re.MULTILINE).search(text, i)
                    if expand:
                        self._scan_heredoc(text[i:end.start()], at(i))
                    i = end.end() + 1
                heredocs = []
                continue
            if text.startswith("((", i):
                end = text.index("))", i)
                yield "arith", text[i:end + 2], at(i)
                i = end + 2
                continue
            op = next((o for o in self.OPS if text.startswith(o, i)), None)
            if op:
                yield "op", op, at(i)
                i += len(op)
                continue
            # a word, or a redirection (optionally after a file descriptor number)
            start: int | None = i
            while i < n and text[i] not in " \t\n;&|()":
                ch = text[i]
                if ch in "<>" and (i == start or text[start:i].isdigit()):
                    m = re.compile(r"<<<|<<-?|<>|>>|>&|<&|>\||<|>").match(text, i)
                    i = m.end()
                    if m.group() in ("<<", "<<-"):
                        dm = re.compile(r"\s*(['\"]?)(\w+)\1").match(text, i)
                        heredocs.append((dm.group(2), not dm.group(1)))
                        i = dm.end()
                    yield "redir", text[start:i], at(start)
                    start = None
                    break
                if ch == "\\":
                    i += 2
                elif ch == "'":
                    i = text.index("'", i + 1) + 1
                elif ch == '"':
                    i = self._skip_quoted(text, i, line, record=True)
                elif text.startswith("$'", i):
                    j = i + 2
                    while text[j] != "'":
                        j += 2 if text[j] == "\\" else 1
                    i = j + 1
                elif text.startswith("$((", i):
                    i = text.index("))", i) + 2
                elif text.startswith("$(", i):
                    i = self._substitution(text, i + 2, line)
                elif text.startswith("${", i):
                    i = self._matching(text, i + 2, "{", "}", line, record=True) + 1
                else:
                    i += 1
            if start is not None and i > start:
                yield "word", text[start:i], at(start)

    def _scan_heredoc(self, body: str, line: int) -> None:
        i = 0
        while (i := body.find("$(", i)) >= 0:
            if body.startswith("$((", i):
                i += 3
                continue
            i = self._substitution(body, i + 2, line)

    # parsing ----------------------------------------------------------------
    def _scan(self, text: str, line: int) -> None:
        at_start = True
        skip_until: str | None = None  # a word ending a construct of non-commands
        redirect_target = False
        case_depth_pattern: list[bool] = []  # per open case: expecting a pattern?
        expect_function_name = False
        for kind, value, lineno in self._tokens(text, line):
            if redirect_target:
                redirect_target = False
                if kind == "word":
                    continue
            if kind == "redir":
                # a here-document's delimiter is part of the token; others take the next word
                redirect_target = not re.search(r"<<-?\s*['\"]?\w+['\"]?$", value)
                continue
            if skip_until is not None:
                if kind == "word" and value == skip_until:
                    skip_until = None
                    at_start = skip_until is None and value in ("do", "in")
                    if value == "in" and case_depth_pattern:
                        case_depth_pattern[-1] = True
                        at_start = False
                continue
            if case_depth_pattern and case_depth_pattern[-1]:
                if kind == "word" and value == "esac":
                    case_depth_pattern.pop()
                    at_start = False
                elif kind == "op" and value == ")":
                    case_depth_pattern[-1] = False
                    at_start = True
                continue
            if kind == "op":
                if value == ";;" and case_depth_pattern:
                    case_depth_pattern[-1] = True
                at_start = True
                continue
            if kind == "arith":
                at_start = False
                continue
            if expect_function_name:
                self.functions.add(value)
                expect_function_name = False
                at_start = True
                continue
            if not at_start:
                continue
            if re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=", value):
                continue  # assignment before a command
            if value in SHELL_KEYWORDS:
                if value == "esac" and case_depth_pattern:
                    case_depth_pattern.pop()
                continue
            if value == "function":
                expect_function_name = True
                continue
            if value == "for":
                skip_until = "do"
                continue
            if value == "case":
                case_depth_pattern.append(False)
                skip_until = "in"
                continue
            if value == "[[":
                skip_until = "]]"
                continue
            self.commands.append((value, lineno))
            at_start = False


def test_scanner_sees_calls_everywhere_and_flags_unknown_ones() -> None:
    script = textwrap.dedent("""\
        function defined_one {
            local x=$(inner_sub "$1")
            echo "$(in_quotes)" >"$file" 2>/dev/null
            cat <<EOF
        value=$(in_heredoc arg)
        EOF
            case "$x" in
                a|b) in_case ;;
                *) other_case ;;
            esac
            [[ -n "$x" ]] && after_test || after_or
            for i in not_a_call also_not; do in_loop; done
            if ! in_if; then :; fi
            FOO=bar after_assignment
            cat <<'EOF'
        $(quoted_heredoc_is_text)
        EOF
            while read -r line; do :; done <<<"$(here_string)"
        }
        """)
    scan = ShellScan(script)
    names = {name for name, _ in scan.commands}
    assert scan.functions == {"defined_one"}
    assert {"inner_sub", "in_quotes", "in_heredoc", "in_case", "other_case", "after_test",
            "after_or", "in_loop", "in_if", "after_assignment", "here_string"} <= names
    assert not names & {"not_a_call", "also_not", "quoted_heredoc_is_text", "a", "b", "x",
                        "bar", "/dev/null"}




def scans() -> dict[str, "ShellScan"]:
    return {p.relative_to(DEVSTACK).as_posix(): ShellScan(p.read_text()) for p in [PLUGIN, SETTINGS, *LIBS]}


def test_every_called_function_is_defined_or_a_known_command() -> None:
    by_file = scans()
    defined = set().union(*(scan.functions for scan in by_file.values()))
    # the copies of devstack's hooks, made by _nt_save_function
    saved = set(re.findall(r"^\s*_nt_save_function (\w+) (\w+)$", (DEVSTACK / "lib" / "transport-url").read_text(),
                           re.MULTILINE))
    assert saved == {("get_transport_url", "_nt_devstack_get_transport_url"),
                     ("iniset_rpc_backend", "_nt_devstack_iniset_rpc_backend")}
    allowed = (defined | DEVSTACK_FUNCTIONS | EXTERNAL_COMMANDS | bash_builtins() | SHELL_KEYWORDS
               | {copy for _, copy in saved})
    unknown = []
    for source, scan in by_file.items():
        for name, line in scan.commands:
            if name.startswith(("$", '"$')) or "/" in name.strip('"'):
                continue  # a command from a variable or a path
            if name not in allowed:
                unknown.append(f"{source}:{line}: {name}")
    assert not unknown, "called but defined nowhere:\n" + "\n".join(unknown)
    called = {name for scan in by_file.values() for name, _ in scan.commands}
    assert {"iniset", "curl", "tar", "run_process", "stop_process", "setup_develop", "trueorfalse",
            "get_python_exec_prefix", "_nt_url", "configure_kafka", "enable_service"} <= called
    # the plugin brings no stand-in of its own: it replaces devstack's
    # messaging hooks, and nothing else of devstack's
    assert defined & DEVSTACK_FUNCTIONS == REPLACED_HOOKS
    # every stand-in is needed; pip_install is there to catch a direct call
    assert DEVSTACK_FUNCTIONS - called - REPLACED_HOOKS == {"pip_install"}


#: What plugin.sh may run besides the entry points of lib/.
DISPATCH_COMMANDS = {"source", "set", "grep", "cd", "dirname", "pwd", "is_service_enabled",
                     "$_XTRACE_NT_PLUGIN"}


def test_plugin_sh_only_dispatches() -> None:
    plugin = ShellScan(PLUGIN.read_text())
    assert plugin.functions == set()
    lib_functions = set().union(*(ShellScan(p.read_text()).functions for p in LIBS))
    called = {name for name, _ in plugin.commands}
    assert called - DISPATCH_COMMANDS <= {f for f in lib_functions if not f.startswith("_")}
    assert {"check_notify_transport_settings", "install_notify_transport", "install_kafka",
            "configure_kafka", "start_kafka", "stop_kafka", "cleanup_kafka", "configure_rabbit_vhosts",
            "check_notify_transport", "configure_nt_serve", "start_nt_serve", "stop_nt_serve",
            "cleanup_nt_serve", "notify_transport_take_over_messaging_hooks"} <= called
    sources = re.findall(r'^source "\$NOTIFY_TRANSPORT_PLUGIN_DIR/(lib/[\w-]+)"$', PLUGIN.read_text(),
                         re.MULTILINE)
    assert sorted(sources) == sorted(p.relative_to(DEVSTACK).as_posix() for p in LIBS)


# -- the Kafka broker lifecycle against a stand-in distribution --------------

STUB_BROKER = '''\
import os, signal, socket, sys
props = {}
for raw in open(sys.argv[1]):
    raw = raw.strip()
    if raw and not raw.startswith("#"):
        key, _, value = raw.partition("=")
        props[key] = value
proto, _, address = props["listeners"].split(",")[0].partition("://")
host, _, port = address.rpartition(":")
with open(os.path.join(os.path.dirname(__file__), "..", "started.log"), "a") as log:
    log.write(f"{os.getpid()} {proto} {host} {port} heap={os.environ.get('KAFKA_HEAP_OPTS')} "
              f"log_dir={os.environ.get('LOG_DIR')}\\n")
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
server = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind((host.strip("[]"), int(port)))
server.listen()
print("stand-in broker listening", flush=True)
while True:
    conn, _ = server.accept()
    conn.close()
'''

STUB_STORAGE = '''\
#!/bin/bash
# kafka-storage.sh stand-in: records its calls, formats like the real one.
here=$(cd "$(dirname "$0")/.." && pwd)
echo "$*" >>"$here/storage-calls.log"
case "$1" in
    random-uuid) echo "Ab3dEf6hIj9lMn2pQr5tUv" ;;
    format)
        shift
        while (($#)); do
            case "$1" in
                -t) id=$2; shift 2 ;;
                -c) conf=$2; shift 2 ;;
                *) shift ;;
            esac
        done
        dir=$(sed -n 's/^log.dirs=//p' "$conf")
        if [[ -f "$dir/meta.properties" ]]; then
            echo "All of the log directories are already formatted."
            exit 0
        fi
        mkdir -p "$dir"
        printf 'cluster.id=%s\\nnode.id=1\\nversion=1\\n' "$id" >"$dir/meta.properties"
        ;;
    *) exit 1 ;;
esac
'''


def make_distribution(mirror: Path, version: str, scala: str) -> Path:
    """A kafka_SCALA-VERSION.tgz under MIRROR/VERSION/ with stand-in scripts."""
    name = f"kafka_{scala}-{version}"
    build = mirror.parent / "build" / name
    (build / "bin").mkdir(parents=True)
    (build / "bin" / "stub_broker.py").write_text(STUB_BROKER)
    start = build / "bin" / "kafka-server-start.sh"
    start.write_text(f'#!/bin/bash\nexec {sys.executable} "$(dirname "$0")/stub_broker.py" "$@"\n')
    storage = build / "bin" / "kafka-storage.sh"
    storage.write_text(STUB_STORAGE)
    for script in (start, storage):
        script.chmod(0o755)
    (mirror / version).mkdir(parents=True)
    tarball = mirror / version / f"{name}.tgz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(build, arcname=name)
    return tarball




def wait_gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def kafka_env(tmp_path: Path):
    mirror = tmp_path / "mirror"
    make_distribution(mirror, "3.9.1", "2.13")
    stub_bin = tmp_path / "stub-bin"  # a java stand-in, only found when no real one is installed
    stub_bin.mkdir()
    (stub_bin / "java").write_text("#!/bin/sh\nexit 0\n")
    (stub_bin / "java").chmod(0o755)
    port, controller_port = free_ports(2)
    procs = tmp_path / "procs"
    procs.mkdir()
    env = {**DEVSTACK_ENV, "PATH": f"{os.environ['PATH']}:{stub_bin}", "KAFKA_BASEURL": f"file://{mirror}",
           "KAFKA_VERSION": "3.9.1", "SCALA_VERSION": "2.13", "KAFKA_DEST": str(tmp_path / "dest"),
           "KAFKA_DATA_DIR": str(tmp_path / "data"), "KAFKA_DOWNLOAD_DIR": str(tmp_path / "files"),
           "NOTIFY_HOST": "127.0.0.1", "NOTIFY_PORT": str(port), "KAFKA_LISTEN_HOST": "127.0.0.1",
           "KAFKA_CONTROLLER_PORT": str(controller_port), "KAFKA_START_TIMEOUT": "30",
           "KAFKA_HEAP_OPTS": "-Xms64M -Xmx128M", "RUN_PROCESS_DIR": str(procs),
           "SERVICE_HOST": "127.0.0.1", "NT_TEST_TMP": str(tmp_path)}
    yield env
    pid_file = procs / "kafka.pid"
    if pid_file.exists():  # stop what the test started, if it failed half-way
        pid = int(pid_file.read_text())
        if pid_alive(pid):
            os.kill(pid, 15)
            wait_gone(pid)


def run_phase(env: dict[str, str], phase: str, check: bool = True) -> Run:
    return run_devstack(Path(env["NT_TEST_TMP"]), env=env, phase=phase, check=check)


def kafka_pid(tmp_path: Path) -> int:
    return int((tmp_path / "procs" / "kafka.pid").read_text())


def test_stack_unstack_clean_lifecycle(kafka_env: dict[str, str], tmp_path: Path) -> None:
    dest, data = tmp_path / "dest", tmp_path / "data"
    run_phase(kafka_env, "stack pre-install")
    # the broker starts in the install phase: stack.sh starts keystone, which notifies, before post-config
    run = run_phase(kafka_env, "stack install")
    assert run.called("setup_develop") == [[str(ROOT), ""]]
    assert (tmp_path / "files" / "kafka_2.13-3.9.1.tgz").is_file()
    assert (dest / "kafka").resolve() == dest / "kafka_2.13-3.9.1"
    assert "Starting Kafka" in run.stdout
    assert run.called("run_process") == [["kafka", str(dest / "bin" / "kafka-broker")]]
    pid = kafka_pid(tmp_path)
    assert pid_alive(pid)
    port = int(kafka_env["NOTIFY_PORT"])
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    properties = (dest / "config" / "server.properties").read_text()
    controller = kafka_env["KAFKA_CONTROLLER_PORT"]
    for line in ("process.roles=broker,controller", "node.id=1",
                 f"controller.quorum.voters=1@127.0.0.1:{controller}",
                 f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
                 f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
                 "controller.listener.names=CONTROLLER", f"log.dirs={data}",
                 "offsets.topic.replication.factor=1"):
        assert line in properties.splitlines()
    assert "sasl" not in properties
    assert (data / "meta.properties").read_text().startswith("cluster.id=Ab3dEf6hIj9lMn2pQr5tUv\n")
    started = (dest / "kafka_2.13-3.9.1" / "started.log").read_text().split()
    assert started == [str(pid), "PLAINTEXT", "127.0.0.1", str(port), "heap=-Xms64M", "-Xmx128M",
                       f"log_dir={dest / 'logs'}"]

    extra = run_phase(kafka_env, "stack extra").stdout
    assert f"Notifications: ntkafka://127.0.0.1:{port}/" in extra

    run = run_phase(kafka_env, "unstack")
    assert run.called("stop_process") == [["kafka"]]
    assert wait_gone(pid)

    assert not run_phase(kafka_env, "stack post-config").called("run_process")
    run_phase(kafka_env, "stack install")  # a restart keeps the cluster id and the data
    pid2 = kafka_pid(tmp_path)
    assert pid2 != pid and pid_alive(pid2)
    calls = (dest / "kafka_2.13-3.9.1" / "storage-calls.log").read_text().splitlines()
    formats = [c for c in calls if c.startswith("format")]
    assert [c for c in calls if c == "random-uuid"] == ["random-uuid"]
    properties_path = dest / "config" / "server.properties"
    assert formats == [f"format --ignore-formatted -t Ab3dEf6hIj9lMn2pQr5tUv -c {properties_path}"] * 2

    run_phase(kafka_env, "unstack")
    assert wait_gone(pid2)
    run_phase(kafka_env, "clean")
    assert not dest.exists() and not data.exists()
    assert not (tmp_path / "files" / "kafka_2.13-3.9.1.tgz").exists()


def test_external_cluster_installs_no_broker(kafka_env: dict[str, str], tmp_path: Path) -> None:
    env = {**kafka_env, "KAFKA_EXTERNAL": "True", "NOTIFY_HOST": "kafka.example.org"}
    run = run_phase(env, "stack install")
    assert run.called("setup_develop") == [[str(ROOT), ""]]
    run = run_phase(env, "stack post-config")
    assert not run.called("run_process")
    assert not (tmp_path / "files").exists() and not (tmp_path / "dest").exists()
    for phase in ("unstack", "clean"):
        assert not run_phase(env, phase).called("stop_process")
    # the services still get the external cluster
    assert run_devstack(tmp_path, "get_notification_url", env).stdout.strip() == \
        f"ntkafka://kafka.example.org:{kafka_env['NOTIFY_PORT']}/"


def test_download_failure_names_the_url(kafka_env: dict[str, str], tmp_path: Path) -> None:
    proc = run_phase({**kafka_env, "KAFKA_VERSION": "0.0.1"}, "stack install", check=False)
    assert proc.returncode != 0
    assert f"Could not download file://{tmp_path}/mirror/0.0.1/kafka_2.13-0.0.1.tgz" in proc.stderr


def test_checksum_mismatch_stops_the_install(kafka_env: dict[str, str]) -> None:
    proc = run_phase({**kafka_env, "KAFKA_SHA512": "0" * 128}, "stack install", check=False)
    assert proc.returncode != 0
    assert "does not match KAFKA_SHA512" in proc.stderr


def test_broker_that_exits_is_reported(kafka_env: dict[str, str], tmp_path: Path) -> None:
    env = {**kafka_env, "KAFKA_START_TIMEOUT": "3"}
    run_phase(env, "stack install")
    pid = kafka_pid(tmp_path)
    run_phase(env, "unstack")
    assert wait_gone(pid)
    start = tmp_path / "dest" / "kafka" / "bin" / "kafka-server-start.sh"
    start.write_text("#!/bin/bash\necho 'broker failed: bad config' >&2\nexit 1\n")
    proc = run_phase(env, "stack install", check=False)
    assert proc.returncode != 0
    port = kafka_env["NOTIFY_PORT"]
    assert f"Kafka does not accept connections on 127.0.0.1:{port} after 3s" in proc.stderr
    assert "journalctl -u devstack@kafka" in proc.stderr
    assert "broker failed: bad config" in (tmp_path / "procs" / "kafka.log").read_text()


JAAS_READER = r'''
import java.io.*;
import java.util.*;

/** Reads the SASL JAAS option as Kafka does: java.util.Properties, then JaasConfig's tokenizer. */
public class JaasRead {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(args[0])) { props.load(in); }
        String jaas = props.getProperty("listener.name.sasl_plaintext.plain.sasl.jaas.config");
        StreamTokenizer t = new StreamTokenizer(new StringReader(jaas));
        t.slashSlashComments(true);
        t.slashStarComments(true);
        t.wordChars('-', '-');
        t.wordChars('_', '_');
        t.wordChars('$', '$');
        t.nextToken();
        System.out.println("module=" + t.sval);
        t.nextToken();
        System.out.println("flag=" + t.sval);
        while (t.nextToken() != ';') {
            String key = t.sval;
            if (t.nextToken() != '=') throw new IllegalStateException("expected =");
            t.nextToken();
            System.out.println(key + "=" + t.sval);
        }
    }
}
'''


def test_sasl_broker_properties_carry_any_printable_password(kafka_env: dict[str, str],
                                                             tmp_path: Path) -> None:
    java = shutil.which("java", path=os.environ.get("PATH"))
    password = "p@ss:w/rd%?#&=+ \"'\\n\\u0041 \\\\ end\\"
    env = {**kafka_env, "NOTIFY_USERNAME": "admin", "NOTIFY_PASSWORD": password}
    run_phase(env, "stack install")
    run_phase(env, "stack post-config")
    properties = tmp_path / "dest" / "config" / "server.properties"
    text = properties.read_text()
    port = kafka_env["NOTIFY_PORT"]
    assert f"listeners=SASL_PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:" in text
    assert "sasl.enabled.mechanisms=PLAIN\n" in text
    assert "inter.broker.listener.name=SASL_PLAINTEXT\n" in text
    assert oct(properties.stat().st_mode & 0o777) == "0o600"
    run_phase(env, "unstack")
    if java is None:
        pytest.skip("no Java to read the properties file as Kafka does")
    source = tmp_path / "JaasRead.java"
    source.write_text(JAAS_READER)
    proc = subprocess.run([java, str(source), str(properties)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "module=org.apache.kafka.common.security.plain.PlainLoginModule", "flag=required",
        "username=admin", f"password={password}", f"user_admin={password}"]
