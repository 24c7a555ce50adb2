"""oslo.messaging's own functional suite, from its sdist, through ``ntrabbit://`` and ``ntkafka://``.

scripts/oslo_functional_suite.py downloads the sdist of the installed
oslo.messaging, lets ``ntrabbit://`` take the suite's ``rabbit://`` branches
(the only change) and runs its RPC and notification tests as shipped,
eventlet-monkey-patched, with RPC on ``ntrabbit://`` (the machine's RabbitMQ)
and notifications on ``ntkafka://`` (the session's noida-db broker). Needs
PyPI (or a mirror) for the download and oslo's test dependencies (the
``test`` extra). Slow: about two minutes.
"""
from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rabbit_fixtures import rabbit_url

pytestmark = [pytest.mark.functional, pytest.mark.slow]

pytest.importorskip("oslotest")
pytest.importorskip("testtools")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "oslo_functional_suite.py"
#: The whole run, download included.
RUN_TIMEOUT = 1200


def test_oslo_messaging_functional_suite_passes_through_ntrabbit_and_ntkafka(rabbit, noida, tmp_path):
    report = tmp_path / "junit.xml"
    workdir = ROOT / "build" / "oslo-sdist"  # kept: the download is reused by later runs
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--rpc-url", rabbit_url().replace("rabbit://", "ntrabbit://", 1),
         "--notify-url", f"ntkafka://{noida.bootstrap}/", "--workdir", str(workdir),
         "--", f"--junitxml={report}", "-W", "ignore::DeprecationWarning"],
        capture_output=True, text=True, timeout=RUN_TIMEOUT)
    output = f"exit {done.returncode}\nstdout:\n{done.stdout[-8000:]}\nstderr:\n{done.stderr[-4000:]}"
    assert done.returncode == 0, output
    suite = ET.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    assert suite is not None, output
    cases = suite.findall("testcase")
    names = {case.get("name") for case in cases}
    skipped = {case.get("name") for case in cases if case.find("skipped") is not None}
    # RPC and notifications both ran (by oslo's own test names), the rabbit-only ones included
    assert {"test_specific_server", "test_monitor_long_call", "test_mandatory_call", "test_simple_batch",
            "test_multiple_servers", "test_logger"} <= names - skipped, (sorted(skipped), output)
    assert suite.get("failures") == "0" and suite.get("errors") == "0", output
