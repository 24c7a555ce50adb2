"""The devstack plugin: syntax, the config-writing hooks and the broker lifecycle.

The hooks run in a real bash against a scratch config file, outside devstack
(the plugin brings stand-ins for the devstack helpers it needs there). The
broker lifecycle runs the plugin's stack/unstack/clean phases against a
stand-in Kafka distribution (a tarball served from a file:// mirror whose
scripts record their calls and listen on the configured port), so download,
unpack, KRaft storage formatting, start, port wait, stop and clean-up are
exercised without the internet or a JVM broker.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from notify_transport import TransportHost, TransportURL

ROOT = Path(__file__).resolve().parents[2]
DEVSTACK = ROOT / "devstack"
PLUGIN = DEVSTACK / "plugin.sh"
SETTINGS = DEVSTACK / "settings"

#: Passwords with every character that needs care in a URL, an ini file,
#: sed replacement text or a shell.
NASTY_PASSWORD = "p@ss:w/rd%?#&=+ \"'\\é"
NASTY_PASSWORD_ENCODED = "p%40ss%3Aw%2Frd%25%3F%23%26%3D%2B%20%22%27%5C%C3%A9"

#: What a devstack run provides when its RabbitMQ is enabled.
DEVSTACK_ENV = {"SERVICE_HOST": "controller", "RABBIT_USERID": "stackrabbit",
                "RABBIT_PASSWORD": "secret"}


def run_bash(script: str, env: dict[str, str] | None = None, *, args: str = "",
             check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run ``script`` after ``source plugin.sh ARGS`` in a clean environment."""
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
                "HOME": os.environ.get("HOME", "/tmp")}
    full_env.update(env or {})
    program = f"set -euo pipefail\nsource {PLUGIN} {args}\n{script}\n"
    proc = subprocess.run(["bash", "-c", program], env=full_env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"bash failed ({proc.returncode}):\nstdout:\n{proc.stdout}\n"
                             f"stderr:\n{proc.stderr}")
    return proc


def write_config(tmp_path: Path, env: dict[str, str], call: str = 'iniset_rpc_backend nova "$CONF"',
                 initial: str | None = None) -> str:
    conf = tmp_path / "service.conf"
    if initial is not None:
        conf.write_text(initial)
    run_bash(call, {**env, "CONF": str(conf)})
    return conf.read_text()


def ini_value(text: str, section: str, option: str) -> str:
    current = None
    for line in text.splitlines():
        if line.startswith("["):
            current = line.strip("[]")
        elif current == section and re.match(rf"{re.escape(option)}\s*=", line):
            return line.split("=", 1)[1].strip()
    raise KeyError(f"[{section}] {option} not in:\n{text}")


# -- syntax -------------------------------------------------------------------

@pytest.mark.parametrize("path", [PLUGIN, SETTINGS], ids=lambda p: p.name)
def test_bash_syntax(path: Path) -> None:
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_sourcing_without_a_phase_does_nothing_but_define(tmp_path: Path) -> None:
    proc = run_bash("declare -F iniset_rpc_backend get_transport_url get_notification_url "
                    "iniset_notification_backend install_kafka start_kafka stop_kafka cleanup_kafka",
                    {"KAFKA_DEST": str(tmp_path / "kafka")})
    assert len(proc.stdout.split()) == 8
    assert not (tmp_path / "kafka").exists()


# -- the config-writing hooks -------------------------------------------------

def test_hybrid_defaults_from_devstack_rabbit(tmp_path: Path) -> None:
    text = write_config(tmp_path, DEVSTACK_ENV)
    assert text == textwrap.dedent("""\

        [DEFAULT]
        transport_url = rabbit://stackrabbit:secret@controller:5672/

        [oslo_messaging_notifications]
        transport_url = kafka://controller:9092/
        """)
    rpc = TransportURL.parse(None, ini_value(text, "DEFAULT", "transport_url"))
    assert (rpc.transport, rpc.virtual_host) == ("rabbit", "")
    assert rpc.hosts == [TransportHost("controller", 5672, "stackrabbit", "secret")]
    notify = TransportURL.parse(None, ini_value(text, "oslo_messaging_notifications", "transport_url"))
    assert (notify.transport, notify.virtual_host) == ("kafka", "")
    assert notify.hosts == [TransportHost("controller", 9092)]


def test_hybrid_with_vhosts(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "RPC_HOST": "rabbit1", "RPC_PORT": "5673", "RPC_USER": "nova",
           "RPC_PASSWORD": "pw", "RPC_VHOST": "nova", "NOTIFY_HOST": "kafka1",
           "NOTIFY_PORT": "9094", "NOTIFY_VHOST": "prod"}
    text = write_config(tmp_path, env)
    assert text == textwrap.dedent("""\

        [DEFAULT]
        transport_url = rabbit://nova:pw@rabbit1:5673/nova

        [oslo_messaging_notifications]
        transport_url = kafka://kafka1:9094/prod
        """)
    rpc = TransportURL.parse(None, ini_value(text, "DEFAULT", "transport_url"))
    assert rpc.virtual_host == "nova"
    assert rpc.hosts == [TransportHost("rabbit1", 5673, "nova", "pw")]
    notify = TransportURL.parse(None, ini_value(text, "oslo_messaging_notifications", "transport_url"))
    assert notify.virtual_host == "prod"
    assert notify.hosts == [TransportHost("kafka1", 9094)]


def test_special_characters_are_percent_encoded(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "RPC_USER": "stack user", "RPC_PASSWORD": NASTY_PASSWORD,
           "RPC_VHOST": "cell/1 é", "NOTIFY_USER": "notifier", "NOTIFY_PASSWORD": NASTY_PASSWORD + "$x",
           "NOTIFY_VHOST": "/prod"}
    text = write_config(tmp_path, env)
    notify_pw = quote(NASTY_PASSWORD + "$x", safe="")
    assert text == textwrap.dedent(f"""\

        [DEFAULT]
        transport_url = rabbit://stack%20user:{NASTY_PASSWORD_ENCODED}@controller:5672/cell%2F1%20%C3%A9

        [oslo_messaging_notifications]
        transport_url = kafka://notifier:{notify_pw}@controller:9092/%2Fprod

        [oslo_messaging_kafka]
        security_protocol = SASL_PLAINTEXT
        sasl_mechanism = PLAIN
        """)
    assert notify_pw == NASTY_PASSWORD_ENCODED + "%24x"
    rpc = TransportURL.parse(None, ini_value(text, "DEFAULT", "transport_url"))
    assert rpc.hosts == [TransportHost("controller", 5672, "stack user", NASTY_PASSWORD)]
    assert rpc.virtual_host == "cell/1 é"
    notify = TransportURL.parse(None, ini_value(text, "oslo_messaging_notifications", "transport_url"))
    assert notify.hosts == [TransportHost("controller", 9092, "notifier", NASTY_PASSWORD + "$x")]
    assert notify.virtual_host == "/prod"


def test_several_hosts_and_ipv6(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "NOTIFY_HOST": "k1, k2:9093,::1,[::2]:9094,[fe80::3]",
           "NOTIFY_USER": "u", "NOTIFY_PASSWORD": "p", "RPC_HOST": "r1,r2:5673"}
    text = write_config(tmp_path, env)
    notify = TransportURL.parse(None, ini_value(text, "oslo_messaging_notifications", "transport_url"))
    assert [(h.hostname, h.port, h.username, h.password) for h in notify.hosts] == [
        ("k1", 9092, "u", "p"), ("k2", 9093, "u", "p"), ("::1", 9092, "u", "p"),
        ("::2", 9094, "u", "p"), ("fe80::3", 9092, "u", "p")]
    assert notify.bootstrap_servers() == ["k1:9092", "k2:9093", "[::1]:9092", "[::2]:9094",
                                          "[fe80::3]:9092"]
    rpc = TransportURL.parse(None, ini_value(text, "DEFAULT", "transport_url"))
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
        transport_url = kafka://controller:9092/prod
        driver = messagingv2
        topics = notifications

        [database]
        connection = sqlite://
        """)
    assert write_config(tmp_path, env) == text


def test_cell_vhost_argument_overrides_rpc_vhost_only(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "RPC_VHOST": "nova", "NOTIFY_VHOST": "prod"}
    text = write_config(tmp_path, env, 'iniset_rpc_backend nova "$CONF" conductor nova_cell1')
    assert ini_value(text, "conductor", "transport_url") == \
        "rabbit://stackrabbit:secret@controller:5672/nova_cell1"
    assert ini_value(text, "oslo_messaging_notifications", "transport_url") == \
        "kafka://controller:9092/prod"
    assert "[DEFAULT]" not in text


def test_url_functions_print_the_urls() -> None:
    env = {**DEVSTACK_ENV, "RPC_VHOST": "nova", "NOTIFY_VHOST": "prod"}
    out = run_bash("get_transport_url; get_transport_url cell1; get_notification_url; "
                   "get_notification_url other", env).stdout.splitlines()
    assert out == ["rabbit://stackrabbit:secret@controller:5672/nova",
                   "rabbit://stackrabbit:secret@controller:5672/cell1",
                   "kafka://controller:9092/prod", "kafka://controller:9092/other"]


def test_notifications_on_rabbit_reuse_the_rpc_account(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "NOTIFY_SERVICE": "rabbit", "NOTIFY_VHOST": "notif"}
    text = write_config(tmp_path, env)
    assert text == textwrap.dedent("""\

        [DEFAULT]
        transport_url = rabbit://stackrabbit:secret@controller:5672/

        [oslo_messaging_notifications]
        transport_url = rabbit://stackrabbit:secret@controller:5672/notif
        """)
    notify = TransportURL.parse(None, ini_value(text, "oslo_messaging_notifications", "transport_url"))
    assert notify.transport == "rabbit" and notify.virtual_host == "notif"


def test_notify_scheme_and_external_cluster_security(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "ENABLED_SERVICES": "", "NOTIFY_SCHEME": "kafka",
           "NOTIFY_HOST": "broker1:9093,broker2:9093", "NOTIFY_USER": "svc",
           "NOTIFY_PASSWORD": "pw", "NOTIFY_SECURITY_PROTOCOL": "SASL_SSL",
           "NOTIFY_SASL_MECHANISM": "SCRAM-SHA-512", "NOTIFY_SSL_CAFILE": "/etc/ssl/kafka-ca.pem"}
    conf = tmp_path / "svc.conf"
    run_bash('check_notify_transport_settings; iniset_notification_backend svc "$CONF"',
             {**env, "CONF": str(conf)})
    assert conf.read_text() == textwrap.dedent("""\

        [oslo_messaging_notifications]
        transport_url = kafka://svc:pw@broker1:9093,svc:pw@broker2:9093/

        [oslo_messaging_kafka]
        security_protocol = SASL_SSL
        sasl_mechanism = SCRAM-SHA-512
        ssl_cafile = /etc/ssl/kafka-ca.pem
        """)


def test_rabbit_heartbeat_settings_follow_devstack(tmp_path: Path) -> None:
    env = {**DEVSTACK_ENV, "RABBIT_HEARTBEAT_TIMEOUT_THRESHOLD": "60", "RABBIT_HEARTBEAT_RATE": "3"}
    text = write_config(tmp_path, env)
    assert ini_value(text, "oslo_messaging_rabbit", "heartbeat_timeout_threshold") == "60"
    assert ini_value(text, "oslo_messaging_rabbit", "heartbeat_rate") == "3"


def test_passwords_stay_out_of_the_xtrace_log(tmp_path: Path) -> None:
    conf = tmp_path / "x.conf"
    env = {**DEVSTACK_ENV, "RPC_USER": "u", "RPC_PASSWORD": "rpc-SECRET-1",
           "NOTIFY_USER": "n", "NOTIFY_PASSWORD": "notify-SECRET-2", "CONF": str(conf)}
    full_env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", **env}
    script = (f'set -x\nsource {PLUGIN}\niniset_rpc_backend nova "$CONF"\n'
              'get_notification_url >/dev/null\n')
    proc = subprocess.run(["bash", "-c", script], env=full_env, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert "+ iniset_rpc_backend nova" in proc.stderr  # xtrace was on around the calls
    assert "SECRET" not in proc.stderr
    assert "rpc-SECRET-1" in conf.read_text()


# -- settings validation -------------------------------------------------------

@pytest.mark.parametrize("env, message", [
    ({"RPC_SERVICE": "kafka"}, "Kafka carries notifications only"),
    ({"NOTIFY_SERVICE": "amqp"}, "NOTIFY_SERVICE=amqp is not supported"),
    ({"NOTIFY_PORT": "90x2"}, "NOTIFY_PORT must be a number"),
    ({"NOTIFY_PASSWORD": "pw"}, "NOTIFY_PASSWORD is set but NOTIFY_USER is empty"),
    ({"NOTIFY_SECURITY_PROTOCOL": "TLS"}, "NOTIFY_SECURITY_PROTOCOL=TLS"),
    ({"NOTIFY_SECURITY_PROTOCOL": "SSL"}, "serves PLAINTEXT or SASL_PLAINTEXT, not SSL"),
    ({"NOTIFY_USER": "u", "NOTIFY_PASSWORD": "p", "NOTIFY_SASL_MECHANISM": "SCRAM-SHA-256"},
     "supports SASL PLAIN, not SCRAM-SHA-256"),
    ({"NOTIFY_USER": "bad user", "NOTIFY_PASSWORD": "p"}, "NOTIFY_USER may only hold"),
    ({"NOTIFY_USER": "u", "NOTIFY_PASSWORD": "pé"}, "NOTIFY_PASSWORD must be printable ASCII"),
    ({"NOTIFY_USER": "u"}, "NOTIFY_PASSWORD must be printable ASCII"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_settings_stop_with_the_reason(env: dict[str, str], message: str) -> None:
    proc = run_bash("check_notify_transport_settings", {**DEVSTACK_ENV, **env}, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr


@pytest.mark.parametrize("env", [
    {},
    {"NOTIFY_USER": "admin", "NOTIFY_PASSWORD": NASTY_PASSWORD.replace("é", "e")},
    {"ENABLED_SERVICES": "", "NOTIFY_USER": "u", "NOTIFY_PASSWORD": "pé",
     "NOTIFY_SECURITY_PROTOCOL": "SASL_SSL", "NOTIFY_SASL_MECHANISM": "SCRAM-SHA-256"},
    {"NOTIFY_SERVICE": "rabbit", "NOTIFY_VHOST": "x"},
], ids=["defaults", "local-sasl-plain", "external-scram-ssl", "rabbit-notify"])
def test_good_settings_pass(env: dict[str, str]) -> None:
    run_bash("check_notify_transport_settings", {**DEVSTACK_ENV, **env})


# -- every function the plugin calls exists ------------------------------------

#: devstack functions the plugin calls only when running inside devstack (each
#: call is behind ``declare -F NAME`` or in a branch devstack alone reaches).
#: functions-common: enable_service, install_package, is_ubuntu, run_process,
#: stop_process; lib/rpc_backend: rpc_backend_add_vhost.
DEVSTACK_BUILTINS = {"enable_service", "install_package", "is_ubuntu", "run_process",
                     "stop_process", "rpc_backend_add_vhost"}
#: devstack functions the plugin calls everywhere; it defines a stand-in for
#: each when devstack did not (functions-common / inc/ini-config / inc/python).
DEVSTACK_WITH_FALLBACK = {"iniset", "echo_summary", "die", "is_service_enabled", "pip_install"}
#: Programs the plugin runs.
EXTERNAL_COMMANDS = {"awk", "cat", "chmod", "cp", "curl", "cut", "grep", "ln", "mkdir", "mktemp",
                     "mv", "nohup", "rm", "sed", "sha512sum", "sleep", "tail", "tar", "timeout",
                     "touch", "tr", "dirname"}
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


def test_every_called_function_is_defined_or_a_known_command() -> None:
    plugin = ShellScan(PLUGIN.read_text())
    settings = ShellScan(SETTINGS.read_text())
    defined = plugin.functions | settings.functions
    allowed = defined | DEVSTACK_BUILTINS | EXTERNAL_COMMANDS | bash_builtins() | SHELL_KEYWORDS
    unknown = []
    for source, scan in (("plugin.sh", plugin), ("settings", settings)):
        for name, line in scan.commands:
            if name.startswith(("$", '"$')) or "/" in name.strip('"'):
                continue  # a command from a variable or a path
            if name not in allowed:
                unknown.append(f"{source}:{line}: {name}")
    assert not unknown, "called but defined nowhere:\n" + "\n".join(unknown)
    called = {name for name, _ in plugin.commands + settings.commands}
    # the fallbacks are defined, and the scan is not vacuous
    assert DEVSTACK_WITH_FALLBACK <= plugin.functions
    assert {"iniset", "curl", "tar", "run_process", "_nt_url", "get_transport_url",
            "configure_kafka", "enable_service"} <= called
    assert DEVSTACK_BUILTINS <= called, "a listed devstack builtin is no longer used"
    assert not DEVSTACK_BUILTINS & defined


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


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
    port = free_port()
    env = {"PATH": f"{os.environ['PATH']}:{stub_bin}", "KAFKA_BASEURL": f"file://{mirror}",
           "KAFKA_VERSION": "3.9.1", "SCALA_VERSION": "2.13", "KAFKA_DEST": str(tmp_path / "dest"),
           "KAFKA_DATA_DIR": str(tmp_path / "data"), "KAFKA_DOWNLOAD_DIR": str(tmp_path / "files"),
           "NOTIFY_HOST": "127.0.0.1", "NOTIFY_PORT": str(port), "KAFKA_LISTEN_HOST": "127.0.0.1",
           "KAFKA_CONTROLLER_PORT": str(free_port()), "KAFKA_START_TIMEOUT": "30",
           "KAFKA_HEAP_OPTS": "-Xms64M -Xmx128M", "PYTHON": sys.executable,
           "PIP_LOG": str(tmp_path / "pip.log"), "SERVICE_HOST": "127.0.0.1"}
    yield env
    pid_file = tmp_path / "dest" / "kafka.pid"
    if pid_file.exists():  # stop what the test started, if it failed half-way
        pid = int(pid_file.read_text())
        if pid_alive(pid):
            os.kill(pid, 15)
            wait_gone(pid)


#: pip stand-in: the install phase must not install anything from a unit test.
RECORD_PIP = 'function pip_install { echo "$*" >>"$PIP_LOG"; }\n'


def run_phase(env: dict[str, str], phase: str, check: bool = True) -> subprocess.CompletedProcess:
    program = f"set -euo pipefail\n{RECORD_PIP}source {PLUGIN} {phase}\n"
    proc = subprocess.run(["bash", "-c", program], env={"LANG": "C.UTF-8", **env},
                          capture_output=True, text=True, timeout=90, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"phase {phase!r} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def test_stack_unstack_clean_lifecycle(kafka_env: dict[str, str], tmp_path: Path) -> None:
    dest, data = tmp_path / "dest", tmp_path / "data"
    run_phase(kafka_env, "stack pre-install")
    run_phase(kafka_env, "stack install")
    assert (tmp_path / "pip.log").read_text().split() == ["-e", str(ROOT)]
    assert (tmp_path / "files" / "kafka_2.13-3.9.1.tgz").is_file()
    assert (dest / "kafka").resolve() == dest / "kafka_2.13-3.9.1"

    out = run_phase(kafka_env, "stack post-config").stdout
    assert "Starting Kafka" in out
    pid = int((dest / "kafka.pid").read_text())
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
    assert f"Notifications: kafka://127.0.0.1:{port}/" in extra

    run_phase(kafka_env, "unstack")
    assert wait_gone(pid)
    assert not (dest / "kafka.pid").exists()

    run_phase(kafka_env, "stack post-config")  # a restart keeps the cluster id and the data
    pid2 = int((dest / "kafka.pid").read_text())
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
    env = {**kafka_env, "ENABLED_SERVICES": ""}
    run_phase(env, "stack install")
    run_phase(env, "stack post-config")
    assert (tmp_path / "pip.log").read_text().split() == ["-e", str(ROOT)]
    assert not (tmp_path / "files").exists() and not (tmp_path / "dest").exists()


def test_install_extras_are_passed_to_pip(kafka_env: dict[str, str], tmp_path: Path) -> None:
    run_phase({**kafka_env, "ENABLED_SERVICES": "", "NOTIFY_TRANSPORT_EXTRAS": "embedded,spark"},
              "stack install")
    assert (tmp_path / "pip.log").read_text().split() == ["-e", f"{ROOT}[embedded,spark]"]


def test_download_failure_names_the_url(kafka_env: dict[str, str], tmp_path: Path) -> None:
    proc = run_phase({**kafka_env, "KAFKA_VERSION": "0.0.1"}, "stack install", check=False)
    assert proc.returncode != 0
    assert f"Could not download file://{tmp_path}/mirror/0.0.1/kafka_2.13-0.0.1.tgz" in proc.stderr


def test_checksum_mismatch_stops_the_install(kafka_env: dict[str, str]) -> None:
    proc = run_phase({**kafka_env, "KAFKA_SHA512": "0" * 128}, "stack install", check=False)
    assert proc.returncode != 0
    assert "does not match KAFKA_SHA512" in proc.stderr


def test_broker_that_exits_is_reported(kafka_env: dict[str, str], tmp_path: Path) -> None:
    run_phase(kafka_env, "stack install")
    start = tmp_path / "dest" / "kafka" / "bin" / "kafka-server-start.sh"
    start.write_text("#!/bin/bash\necho 'broker failed: bad config' >&2\nexit 1\n")
    proc = run_phase(kafka_env, "stack post-config", check=False)
    assert proc.returncode != 0
    assert "broker failed: bad config" in proc.stderr
    assert "Kafka does not accept connections" in proc.stderr


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
    env = {**kafka_env, "NOTIFY_USER": "admin", "NOTIFY_PASSWORD": password}
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
