"""oslo.messaging's own functional suite, from its sdist, through ``ntrabbit://`` and ``ntkafka://``.

scripts/oslo_functional_suite.py downloads the sdist of the installed
oslo.messaging, lets ``ntrabbit://`` take the suite's ``rabbit://`` branches
and ``ntkafka://`` its ``kafka://`` ones (the only change) and runs its RPC
and notification tests as shipped, eventlet-monkey-patched, under unittest,
with RPC on ``ntrabbit://`` (the machine's RabbitMQ) and notifications on
``ntkafka://`` (the session's noida-db broker). On Apache Kafka some of its
notification tests race: their fixture starts a listener in a thread and sends
without waiting for its ``start()``, and Kafka's coordinator hands a new
group its first partitions later than noida-db does (5 of its 31 tests failed in
the last run there; oslo's option proxy refuses our ``auto_offset_reset`` in the
URL, so the suite cannot be told to read from the start). Needs PyPI (or a mirror) for
the download and oslo's test dependencies (the ``test`` extra). Slow: about
four and a half minutes.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rabbit_fixtures import rabbit_url

pytestmark = [pytest.mark.functional, pytest.mark.slow]

pytest.importorskip("oslotest")
pytest.importorskip("testtools")
pytest.importorskip("testscenarios")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "oslo_functional_suite.py"
#: The download and unpacking of the sdist (seconds, once per build/ directory).
DOWNLOAD_TIMEOUT = 600
#: The run (about four and a half minutes on a quiet machine). A run that outlives it is stuck
#: (seen once in CI, its first logging-handler test still running after 25 minutes; each of
#: those tests ends only after 15 s without a notification).
RUN_TIMEOUT = 720
#: oslo's own tests that must have run and passed: RPC (with the rabbit-only
#: branches ntrabbit takes), notifications and batches, the logging handler.
MUST_PASS = ("CallTestCase.test_specific_server", "CallTestCase.test_monitor_long_call",
             "CallTestCase.test_mandatory_call", "CallTestCase.test_exception", "CastTestCase.test_fanout",
             "NotifyTestCase.test_simple", "NotifyTestCase.test_simple_batch",
             "LoggingNotificationHandlerTestCase.test_logging (error,messagingv2)")


def test_oslo_messaging_functional_suite_passes_through_ntrabbit_and_ntkafka(rabbit, noida, tmp_path):
    workdir = ROOT / "build" / "oslo-sdist"  # kept (git-ignored): later runs reuse the download
    command = [sys.executable, str(SCRIPT), "--rpc-url", rabbit_url().replace("rabbit://", "ntrabbit://", 1),
               "--notify-url", f"ntkafka://{noida.bootstrap}/", "--workdir", str(workdir)]
    # the download apart, so that the run's own time is bounded tightly
    subprocess.run(command + ["--prepare-only"], check=True, capture_output=True, timeout=DOWNLOAD_TIMEOUT)
    out_path, err_path = tmp_path / "suite.out", tmp_path / "suite.err"
    with open(out_path, "w") as stdout, open(err_path, "w") as stderr:
        # a session of its own: on a timeout the whole tree (unittest under the script) is killed,
        # not left running beside the next tests
        run = subprocess.Popen(command, stdout=stdout, stderr=stderr, start_new_session=True)
    try:
        code = run.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        code = None
    out = err_path.read_text()  # unittest's stream (the tests' log lines go there too)
    tail = f"exit {code}\n{out[-8000:]}\nstdout:\n{out_path.read_text()[-2000:]}"
    assert code == 0, tail
    # "name ... ok", or "name ... " + the test's log lines + "ok" at the start of a line
    verdicts = dict(re.findall(r"^(oslo_messaging\.tests\.functional\.\S+(?: \([^)]*\))?) \.\.\. "
                               r"(?:.*?\n)??(ok|skipped '[^']*'|FAIL|ERROR)$", out, re.MULTILINE | re.DOTALL))
    for name in MUST_PASS:
        matches = [v for k, v in verdicts.items() if k.endswith(name)]
        assert matches == ["ok"], (name, matches, tail)
    skipped = {k: v for k, v in verdicts.items() if v.startswith("skipped")}
    # only the test oslo skips for Kafka (the branch ntkafka takes)
    assert list(skipped) == ["oslo_messaging.tests.functional.test_functional.NotifyTestCase.test_multiple_servers"], \
        (skipped, tail)
    ran = re.search(r"^Ran (\d+) tests", out, re.MULTILINE)
    assert ran and int(ran.group(1)) >= 31, tail
