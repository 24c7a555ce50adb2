"""``notify-transport serve`` dispatch rate with 1 and 2 worker processes, one topic of several partitions.

The orchestrator (:mod:`bench.run`, measure ``serve_workers``) creates a topic
and commits offset 0 for the pool; :func:`measure` runs
``notify-transport serve bench_serve --workers N`` as a service would run it
(its own process group, a config file), the listener being
:class:`CountingEndpoint`, registered for the run through a dist-info
directory on the service's PYTHONPATH. Once every worker serves (its
consumer has its partitions), the topic is filled, so the measure is the
steady state of N workers sharing the partitions, not their joins. Each worker process writes its count
and its first and last dispatch times to a file of its own; the rate is every
notification over the time from the first dispatch in any worker to the last:
the first join is left out, as in the other listener measures, but with two
workers the rebalance when the second one joins is in (what a service pays at
each start). The service is
then stopped with SIGTERM, as an operator does; its exit status is recorded.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from bench.stats import rate

ROOT = Path(__file__).resolve().parents[1]
#: the entry point name of the benchmark's listener
LISTENER = "bench_serve"
#: where the endpoints write their counts (one file per worker process)
COUNTS_ENV = "NT_BENCH_SERVE_DIR"


class CountingEndpoint:
    """Counts what it dispatches; a thread writes ``count first last`` to ``$NT_BENCH_SERVE_DIR/<pid>``."""

    def __init__(self) -> None:
        self.count = 0
        self.first = 0.0
        self.last = 0.0
        self._lock = threading.Lock()
        self._path = Path(os.environ[COUNTS_ENV]) / str(os.getpid())
        self._writer: threading.Thread | None = None

    def info(self, ctxt: Any, publisher_id: str, event_type: str, payload: dict, metadata: dict) -> None:
        now = time.time()
        with self._lock:
            self.count += 1
            if self.count == 1:
                self.first = now
                self._writer = threading.Thread(target=self._write_forever, daemon=True)
                self._writer.start()
            self.last = now

    def _write_forever(self) -> None:
        while True:
            with self._lock:
                line = f"{self.count} {self.first} {self.last}\n"
            tmp = self._path.with_suffix(".tmp")
            tmp.write_text(line)
            tmp.replace(self._path)  # whole lines only
            time.sleep(0.2)


def _totals(counts_dir: Path) -> tuple[int, float, float]:
    count, first, last = 0, float("inf"), 0.0
    for path in counts_dir.iterdir():
        if path.suffix == ".tmp":
            continue
        n, begun, ended = path.read_text().split()
        count, first, last = count + int(n), min(first, float(begun)), max(last, float(ended))
    return count, first, last


def measure(bootstrap: str, topic: str, group: str, expected: int, workers: int,
            fill: Callable[[], None], max_seconds: float = 60.0, start_seconds: float = 120.0) -> dict:
    """Run ``serve --workers N``; once every worker serves, ``fill()`` the topic (TOPIC.info);
    wait until ``expected`` notifications were dispatched (or ``max_seconds`` after the first
    one); stop the service with SIGTERM; the rate and its exit status."""
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        work = Path(tmp)
        dist = work / "site" / "bench_serve-0.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bench-serve\nVersion: 0\n")
        (dist / "entry_points.txt").write_text(
            f"[notify_transport.listeners]\n{LISTENER} = bench.serve_workers:CountingEndpoint\n")
        counts = work / "counts"
        counts.mkdir()
        conf = work / "serve.conf"
        conf.write_text(f"[DEFAULT]\nlog_file = {work / 'serve.log'}\n"
                        f"[oslo_messaging_notifications]\ntransport_url = kafka://{bootstrap}\n"
                        f"topics = {topic}\n[listener:{LISTENER}]\npool = {group}\n")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(work / "site"), str(ROOT)]),
                   **{COUNTS_ENV: str(counts)})
        env.pop("NOTIFY_TRANSPORT_URL", None)
        proc = subprocess.Popen([sys.executable, "-m", "notify_transport.cli.main", "serve", LISTENER,
                                 "--config-file", str(conf), "--workers", str(workers),
                                 "--stats-interval", "3600"],
                                env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        log = work / "serve.log"
        try:
            deadline = time.monotonic() + start_seconds
            while (time.monotonic() < deadline and proc.poll() is None
                   and (not log.exists() or log.read_text().count("serving 1 listener(s)") < workers)):
                time.sleep(0.2)
            filling = time.time()
            fill()
            filled = time.time()
            count, first, last = 0, 0.0, 0.0
            while time.monotonic() < deadline and proc.poll() is None:
                if any(counts.iterdir()):
                    count, first, last = _totals(counts)
                    deadline = min(deadline, time.monotonic() + max_seconds)
                    if count >= expected:
                        break
                time.sleep(0.2)
            time.sleep(0.5)  # the writers' last lines (they write every 0.2 s)
            if any(counts.iterdir()):
                count, first, last = _totals(counts)
            if proc.poll() is not None:
                return {"error": f"serve exited with {proc.returncode}: {proc.stderr.read()[-500:]}"
                        if proc.stderr else f"serve exited with {proc.returncode}"}
            proc.send_signal(signal.SIGTERM)
            status = proc.wait(120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        result: dict[str, Any] = {
            "workers": workers, "count": count, "expected": expected,
            "seconds": round(last - first, 3) if count else None,
            "rate": rate(count, last - first) if count >= expected else None,
            # the producer filling the topic meanwhile: a bound on the rate
            "fill_rate": rate(expected, filled - filling), "exit_status": status}
        if count < expected:
            tail = log.read_text()[-800:] if log.exists() else ""
            result["error"] = f"dispatched {count} of {expected} within {max_seconds:.0f}s; log: {tail}"
        return result
